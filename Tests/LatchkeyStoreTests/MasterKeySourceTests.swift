// The master key's sources fail closed — missing, corrupt, wrong size, locked —
// make a key only on a first start, and the migration from a plaintext file
// into a sealed source removes the file only once the sealed copy reads back,
// and can run twice or after an interruption. The Secret Service is a fake
// secret-tool here (one item in a directory); Tests/e2e/test_secrets_at_rest.py
// runs the real gnome-keyring. systemd credentials use the real systemd-creds
// with a host key of the test's own ($SYSTEMD_CREDENTIAL_SECRET).

import CTAP
import Foundation
import Glibc
import LatchkeyCrypto
import Testing

@testable import LatchkeyStore

/// A state directory and the fake programs a source may run.
private final class Fixture {
    let directory: TemporaryDirectory
    let state: String
    let tools: String
    let keyring: String
    let credentials: String

    init() throws {
        directory = try TemporaryDirectory()
        state = directory.file("state")
        tools = directory.file("bin")
        keyring = directory.file("keyring")
        credentials = directory.file("credentials")
        for path in [state, tools, keyring, credentials] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        chmod(state, 0o700)
        // secret-tool: one item, kept in keyring/item; `locked` makes a lookup find
        // nothing and a store fail, as gnome-keyring does without a prompter.
        try write(
            "secret-tool",
            """
            #!/bin/sh
            case "$1" in
            lookup) [ -f "$FAKE_KEYRING/locked" ] && exit 1
                    [ -f "$FAKE_KEYRING/item" ] || exit 1
                    if [ -f "$FAKE_KEYRING/other" ]; then cat "$FAKE_KEYRING/other"; else cat "$FAKE_KEYRING/item"; fi ;;
            store) if [ -f "$FAKE_KEYRING/locked" ]; then echo "secret-tool: Cannot create an item in a locked collection" >&2; exit 1; fi
                   echo "$@" > "$FAKE_KEYRING/arguments"
                   cat > "$FAKE_KEYRING/item" ;;
            esac
            """
        )
        try write(
            "gdbus",
            """
            #!/bin/sh
            if [ -f "$FAKE_KEYRING/locked" ]; then echo '(<true>,)'; else echo '(<false>,)'; fi
            """
        )
    }

    private func write(_ name: String, _ script: String) throws {
        let path = "\(tools)/\(name)"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
    }

    func source(_ kind: MasterKeySourceKind, credentialsDirectory: Bool = false) -> MasterKeySource {
        var environment = [
            "PATH": "\(tools):/usr/bin:/bin", "FAKE_KEYRING": keyring,
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(directory.file("no-bus"))",
            "SYSTEMD_CREDENTIAL_SECRET": directory.file("host.secret"),
        ]
        if credentialsDirectory { environment["CREDENTIALS_DIRECTORY"] = credentials }
        return MasterKeySource(kind: kind, stateDirectory: state, withKey: "host", environment: environment)
    }

    var plaintext: String { state + "/master-key" }
    var item: String { keyring + "/item" }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// The key the fake keyring holds.
    func keyringKey() -> [UInt8]? { KeyText.decode(fileBytes(item)) }

    func putInKeyring(_ key: [UInt8]) throws {
        try Data(KeyText.encode(key)).write(to: URL(fileURLWithPath: item))
    }

    func writePlaintext(_ key: [UInt8]) throws {
        try Data(key).write(to: URL(fileURLWithPath: plaintext))
        chmod(plaintext, 0o600)
    }

    /// A store in the state directory, as a key's store (`keys/NAME/credentials.db`).
    func makeStore() throws {
        try FileManager.default.createDirectory(atPath: state + "/keys/default", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: state + "/keys/default/credentials.db", contents: Data())
    }

    func lock() { FileManager.default.createFile(atPath: keyring + "/locked", contents: Data()) }
}

private func expectFailure(
    _ code: MasterKeyErrorCode,
    saying phrase: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = #expect(throws: MasterKeyError.self, sourceLocation: sourceLocation) { try body() }
    #expect(error?.code == code, "\(error?.reason ?? "")", sourceLocation: sourceLocation)
    #expect(error?.reason.contains(phrase) == true, "\(error?.reason ?? "") lacks \(phrase)", sourceLocation: sourceLocation)
}

@Suite("Master key sources: fail closed")
struct MasterKeySourceTests {
    // MARK: file

    @Test("file: a first start makes the key; the next start reads it")
    func fileFirstStart() throws {
        let fixture = try Fixture()
        let (key, origin) = try MasterKey.obtain(fixture.source(.file))
        #expect(origin.created && origin.source == .file)
        let (again, second) = try MasterKey.obtain(fixture.source(.file))
        #expect(again == key && !second.created)
    }

    @Test("file: a missing key beside existing stores is not made anew")
    func fileMissingWithStores() throws {
        let fixture = try Fixture()
        try fixture.makeStore()
        expectFailure(.missing, saying: "none is made") { _ = try MasterKey.obtain(fixture.source(.file)) }
        #expect(!fixture.exists(fixture.plaintext))
    }

    @Test("file: a key file of the wrong size is refused", arguments: [0, 31, 33])
    func fileWrongSize(size: Int) throws {
        let fixture = try Fixture()
        try fixture.writePlaintext(SecureRandom.bytes(count: size))
        expectFailure(.invalid, saying: "bytes") { _ = try MasterKey.obtain(fixture.source(.file)) }
    }

    @Test("file: a systemd credential beside the file source is a conflict, not ignored")
    func fileWithCredential() throws {
        let fixture = try Fixture()
        FileManager.default.createFile(atPath: fixture.credentials + "/master-key", contents: Data(count: 32))
        expectFailure(.conflict, saying: "systemd-credential") {
            _ = try MasterKey.obtain(fixture.source(.file, credentialsDirectory: true))
        }
        #expect(!fixture.exists(fixture.plaintext))
    }

    // MARK: systemd-credential

    @Test("systemd-credential: read from $CREDENTIALS_DIRECTORY/master-key")
    func credentialLoads() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try Data(key).write(to: URL(fileURLWithPath: fixture.credentials + "/master-key"))
        let (loaded, origin) = try MasterKey.obtain(fixture.source(.systemdCredential, credentialsDirectory: true))
        #expect(loaded == key && !origin.created)
    }

    @Test("systemd-credential: no $CREDENTIALS_DIRECTORY, or no credential in it, is missing; nothing is made")
    func credentialMissing() throws {
        let fixture = try Fixture()
        expectFailure(.missing, saying: "LoadCredentialEncrypted=") {
            _ = try MasterKey.obtain(fixture.source(.systemdCredential))
        }
        expectFailure(.missing, saying: "does not exist") {
            _ = try MasterKey.obtain(fixture.source(.systemdCredential, credentialsDirectory: true))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.state).isEmpty)
    }

    @Test("systemd-credential: a credential of the wrong size is refused", arguments: [0, 31, 33, 64])
    func credentialWrongSize(size: Int) throws {
        let fixture = try Fixture()
        try Data(SecureRandom.bytes(count: size)).write(to: URL(fileURLWithPath: fixture.credentials + "/master-key"))
        expectFailure(.invalid, saying: "a master key is 32") {
            _ = try MasterKey.obtain(fixture.source(.systemdCredential, credentialsDirectory: true))
        }
    }

    @Test("a sealed source refuses to run beside a plaintext copy of the key, naming the migration")
    func sealedBesidePlaintext() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try fixture.writePlaintext(key)
        try Data(key).write(to: URL(fileURLWithPath: fixture.credentials + "/master-key"))
        for kind in [MasterKeySourceKind.systemdCredential, .secretService] {
            expectFailure(.conflict, saying: "--seal-master-key") {
                _ = try MasterKey.obtain(fixture.source(kind, credentialsDirectory: true))
            }
        }
        #expect(fixture.exists(fixture.plaintext))
    }

    @Test("the header of a systemd credential says which key sealed it")
    func credentialSealing() throws {
        let fixture = try Fixture()
        let path = fixture.directory.file("master-key.cred")
        for (id, expected) in [
            ("5a1c6a86df9d4096b1d5a65e0862f19a", "host"), ("0c7cc07b117645919c4b0bea08bc20fe", "tpm2"),
            ("93a894094874449090caf2fc93cab553", "host+tpm2"),
        ] {
            let header = bytes(hex: Substring(id))! + [32, 0, 0, 0, 1, 0, 0, 0]
            try Data(header).base64EncodedData().write(to: URL(fileURLWithPath: path))
            #expect(SystemdCredentialFile.sealing(ofFile: path) == expected)
        }
        #expect(SystemdCredentialFile.sealing(ofFile: fixture.directory.file("absent")) == nil)
    }

    // MARK: secret-service

    @Test("secret-service: a first start makes the key in the keyring, and reads it from there next time")
    func keyringFirstStart() throws {
        let fixture = try Fixture()
        let (key, origin) = try MasterKey.obtain(fixture.source(.secretService))
        #expect(origin.created && origin.source == .secretService)
        #expect(fixture.keyringKey() == key)
        #expect(!fixture.exists(fixture.plaintext), "no plaintext file is made")
        let arguments = String(decoding: fileBytes(fixture.keyring + "/arguments"), as: UTF8.self)
        #expect(arguments.contains("application latchkey state-directory \(fixture.state)"))
        let (again, second) = try MasterKey.obtain(fixture.source(.secretService))
        #expect(again == key && !second.created)
    }

    @Test("secret-service: a locked keyring stops the daemon, and nothing is made")
    func keyringLocked() throws {
        let fixture = try Fixture()
        try fixture.putInKeyring(SecureRandom.bytes(count: 32))
        fixture.lock()
        expectFailure(.unavailable, saying: "locked") { _ = try MasterKey.obtain(fixture.source(.secretService)) }
        #expect(!fixture.exists(fixture.plaintext))
    }

    @Test("secret-service: an empty keyring beside existing stores is missing; no key is made")
    func keyringMissingWithStores() throws {
        let fixture = try Fixture()
        try fixture.makeStore()
        expectFailure(.missing, saying: "none is made") { _ = try MasterKey.obtain(fixture.source(.secretService)) }
        #expect(!fixture.exists(fixture.item))
    }

    @Test("secret-service: an item that is not a 32-byte key is refused", arguments: ["", "abc", String(repeating: "zz", count: 32), String(repeating: "ab", count: 33)])
    func keyringCorrupt(text: String) throws {
        let fixture = try Fixture()
        try text.write(toFile: fixture.item, atomically: true, encoding: .utf8)
        expectFailure(.invalid, saying: "32-byte key") { _ = try MasterKey.obtain(fixture.source(.secretService)) }
    }

    @Test("secret-service: no session bus, or no secret-tool, is unavailable")
    func keyringUnreachable() throws {
        let fixture = try Fixture()
        var source = fixture.source(.secretService)
        source.environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        expectFailure(.unavailable, saying: "no session bus") { _ = try MasterKey.obtain(source) }
        source = fixture.source(.secretService)
        source.environment["PATH"] = fixture.directory.file("empty")
        expectFailure(.unavailable, saying: "libsecret-tools") { _ = try MasterKey.obtain(source) }
    }

    // MARK: the migration

    @Test("seal: the plaintext key moves into the keyring, reads back, and the file is gone; a second run changes nothing")
    func sealMoves() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try fixture.writePlaintext(key)
        try fixture.makeStore()
        #expect(try MasterKey.seal(fixture.source(.secretService)) == .moved)
        #expect(!fixture.exists(fixture.plaintext))
        #expect(fixture.keyringKey() == key)
        #expect(try MasterKey.seal(fixture.source(.secretService)) == .alreadySealed)
        #expect(fixture.keyringKey() == key)
        let (loaded, _) = try MasterKey.obtain(fixture.source(.secretService))
        #expect(loaded == key)
    }

    @Test("seal: interrupted after storing, the next run only removes the leftover file")
    func sealInterrupted() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try fixture.writePlaintext(key)
        try fixture.putInKeyring(key)
        #expect(try MasterKey.seal(fixture.source(.secretService)) == .removedLeftover)
        #expect(!fixture.exists(fixture.plaintext))
        #expect(fixture.keyringKey() == key)
    }

    @Test("seal: a keyring holding another key is a conflict; both are kept")
    func sealConflict() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try fixture.writePlaintext(key)
        try fixture.putInKeyring(SecureRandom.bytes(count: 32))
        expectFailure(.conflict, saying: "different keys") { _ = try MasterKey.seal(fixture.source(.secretService)) }
        #expect(fixture.exists(fixture.plaintext))
    }

    @Test("seal: a keyring that refuses the key, or gives back another, keeps the plaintext file")
    func sealNeverRemovesUnverified() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try fixture.writePlaintext(key)
        fixture.lock()
        expectFailure(.unavailable, saying: "locked") { _ = try MasterKey.seal(fixture.source(.secretService)) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.plaintext)) == Data(key))
        try FileManager.default.removeItem(atPath: fixture.keyring + "/locked")
        // The keyring stores, but a lookup answers another key.
        try Data(KeyText.encode(SecureRandom.bytes(count: 32))).write(to: URL(fileURLWithPath: fixture.keyring + "/other"))
        expectFailure(.unavailable, saying: "did not give back") { _ = try MasterKey.seal(fixture.source(.secretService)) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.plaintext)) == Data(key))
    }

    @Test("seal: with no key anywhere, a first start makes one in the sealed source; beside stores it refuses")
    func sealCreates() throws {
        let fixture = try Fixture()
        #expect(try MasterKey.seal(fixture.source(.secretService)) == .created)
        #expect(fixture.keyringKey()?.count == 32)
        let other = try Fixture()
        try other.makeStore()
        expectFailure(.missing, saying: "none is made") { _ = try MasterKey.seal(other.source(.secretService)) }
    }

    @Test("seal: the plaintext file is not a sealed source")
    func sealToFile() throws {
        let fixture = try Fixture()
        expectFailure(.invalid, saying: "not a sealed source") { _ = try MasterKey.seal(fixture.source(.file)) }
    }

    @Test(
        "seal: into a systemd credential (systemd-creds, host key), which decrypts to the same key; twice is safe",
        .enabled(if: KeyTool.find("systemd-creds") != nil && geteuid() == 0)
    )
    func sealIntoSystemdCredential() throws {
        let fixture = try Fixture()
        let key = SecureRandom.bytes(count: 32)
        try fixture.writePlaintext(key)
        let source = fixture.source(.systemdCredential)
        #expect(try MasterKey.seal(source) == .moved)
        #expect(!fixture.exists(fixture.plaintext))
        #expect(try SystemdCredentialFile(source: source).load() == key)
        #expect(SystemdCredentialFile.sealing(ofFile: source.credentialFile) == "host")
        #expect(!contains(fileBytes(source.credentialFile), key))
        #expect(try MasterKey.seal(source) == .alreadySealed)
        // Another machine's host key cannot open it: an error, never a new key.
        var elsewhere = source
        elsewhere.environment["SYSTEMD_CREDENTIAL_SECRET"] = fixture.directory.file("other-host.secret")
        expectFailure(.unavailable, saying: "cannot decrypt") { _ = try MasterKey.seal(elsewhere) }
    }
}
