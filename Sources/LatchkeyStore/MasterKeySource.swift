// Where the master key lives, and the rules for finding it there. Three
// sources (docs/security.md, "Secrets at rest"):
//
//   file                <state>/master-key, plaintext, 0600 (a developer's run)
//   systemd-credential  $CREDENTIALS_DIRECTORY/master-key, decrypted by systemd
//                       from a credential `systemd-creds encrypt` sealed (TPM2)
//   secret-service      the desktop's Secret Service (gnome-keyring), unlocked
//                       at login, through secret-tool
//
// Every source fails closed: a key that is missing, locked, unreadable or the
// wrong size stops the daemon, and no source ever falls back to another or
// makes a new key while a store exists (a new key would open none of them).
// A new key is made only on a first start, in the configured source.
//
// `seal` moves a plaintext key into a sealed source: it stores it there,
// reads it back, and only when the copy read back is the same key removes the
// plaintext file. Run twice, or after an interruption, it finishes what is
// left and changes nothing else.

import CTAP
import Foundation
import Glibc
public import LatchkeyErrors
import LatchkeyCrypto

/// A master key source that cannot give its key.
public typealias MasterKeyError = CodedError<MasterKeyErrorCode>

/// The kind of a `MasterKeyError`.
public enum MasterKeyErrorCode: String, ErrorCode {
    /// The source holds no key (and none may be made).
    case missing
    /// What the source holds is not a key (size, format, permissions).
    case invalid
    /// The source cannot be reached: no session bus, keyring locked, helper
    /// program missing or failing.
    case unavailable
    /// Two places hold a key where there must be one (a plaintext file beside
    /// a sealed source, or two different keys).
    case conflict

    public var title: String { "master key \(rawValue)" }
}

/// Where the daemon keeps its master key.
public enum MasterKeySourceKind: String, Sendable, CaseIterable {
    /// `<state>/master-key`, a plaintext file (0600).
    case file
    /// `$CREDENTIALS_DIRECTORY/master-key`, from systemd's `LoadCredentialEncrypted=`.
    case systemdCredential = "systemd-credential"
    /// The Secret Service of the user's session (org.freedesktop.secrets).
    case secretService = "secret-service"
}

/// A configured source: the kind and everything it needs to find the key.
public struct MasterKeySource: Sendable {
    public var kind: MasterKeySourceKind
    /// The daemon's state directory (absolute).
    public var stateDirectory: String
    /// The encrypted credential the seal step writes and systemd loads
    /// (`LoadCredentialEncrypted=master-key:PATH`); systemd-credential only.
    public var credentialFile: String
    /// `systemd-creds encrypt --with-key=`: "auto" (tpm2 where systemd finds a
    /// TPM2, else host), or any of systemd-creds' own values.
    public var withKey: String
    /// The process environment ($CREDENTIALS_DIRECTORY, the session bus).
    public var environment: [String: String]

    /// The name the credential has inside systemd (`--name=`, the file in
    /// `$CREDENTIALS_DIRECTORY`).
    public static let credentialName = "master-key"

    public init(
        kind: MasterKeySourceKind,
        stateDirectory: String,
        credentialFile: String? = nil,
        withKey: String = "auto",
        environment: [String: String]
    ) {
        self.kind = kind
        self.stateDirectory = stateDirectory
        self.credentialFile = credentialFile ?? stateDirectory + "/master-key.cred"
        self.withKey = withKey
        self.environment = environment
    }

    /// The plaintext key file of the state directory.
    public var plaintextFile: String { stateDirectory + "/master-key" }

    /// Whether any key's store exists (`keys/*/credentials.db`): then a
    /// missing key is lost, never made anew.
    public var storesExist: Bool {
        let keys = stateDirectory + "/keys"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: keys) else { return false }
        return names.contains { name in
            var status = stat()
            return lstat("\(keys)/\(name)/credentials.db", &status) == 0
        }
    }
}

/// How the daemon got its key, for the log.
public struct MasterKeyOrigin: Sendable, Equatable, CustomStringConvertible {
    public var source: MasterKeySourceKind
    /// Whether the key was made just now (a first start).
    public var created: Bool
    /// Where exactly: the file, the credential, the keyring item.
    public var detail: String
    /// For a systemd credential, the key systemd sealed it with ("tpm2",
    /// "host", …) as its file's header says; nil where that is not known.
    public var sealing: String? = nil

    public var description: String { "\(source.rawValue)\(created ? " (created)" : ""): \(detail)" }
}

/// What `MasterKey.seal` did.
public enum SealOutcome: Sendable, Equatable {
    /// The plaintext key is now in the sealed source, and the file is gone.
    case moved
    /// The sealed source already held this key; the leftover plaintext file
    /// (an interrupted run) is gone.
    case removedLeftover
    /// Nothing to move: the sealed source holds the key, no plaintext file.
    case alreadySealed
    /// A first start: a new key, made in the sealed source.
    case created
}

/// Finds, makes and moves the master key.
public enum MasterKey {
    /// The daemon's key from its configured source; see the file's comment
    /// for the rules.
    public static func obtain(_ source: MasterKeySource) throws(MasterKeyError) -> ([UInt8], MasterKeyOrigin) {
        switch source.kind {
        case .file:
            if let directory = source.environment["CREDENTIALS_DIRECTORY"],
                FileManager.default.fileExists(atPath: "\(directory)/\(MasterKeySource.credentialName)")
            {
                throw MasterKeyError(
                    .conflict,
                    "systemd passes a master-key credential ($CREDENTIALS_DIRECTORY), but the master key source is"
                        + " file; set [master-key] source = \"systemd-credential\" (or --master-key systemd-credential)"
                )
            }
            let path = source.plaintextFile
            let existed = try readPlaintext(source) != nil
            if !existed && source.storesExist { throw lost(source, "\(path) is missing") }
            do {
                let key = try MasterKeyFile.loadOrCreate(at: path)
                return (key, MasterKeyOrigin(source: .file, created: !existed, detail: path))
            } catch {
                throw MasterKeyError(.invalid, error.reason)
            }
        case .systemdCredential:
            try refusePlaintext(source)
            guard let directory = source.environment["CREDENTIALS_DIRECTORY"] else {
                throw MasterKeyError(
                    .missing,
                    "the master key source is systemd-credential, but systemd passed no credentials"
                        + " ($CREDENTIALS_DIRECTORY is not set): the unit needs"
                        + " LoadCredentialEncrypted=\(MasterKeySource.credentialName):\(source.credentialFile)"
                )
            }
            let path = "\(directory)/\(MasterKeySource.credentialName)"
            guard let key = try readKeyFile(path, what: "the systemd credential") else {
                throw MasterKeyError(
                    .missing,
                    "systemd passed no \(MasterKeySource.credentialName) credential (\(path) does not exist): the"
                        + " unit needs LoadCredentialEncrypted=\(MasterKeySource.credentialName):\(source.credentialFile)"
                )
            }
            return (
                key,
                MasterKeyOrigin(
                    source: .systemdCredential, created: false, detail: path,
                    sealing: SystemdCredentialFile.sealing(ofFile: source.credentialFile)
                )
            )
        case .secretService:
            try refusePlaintext(source)
            let keyring = SecretServiceKeyring(source: source)
            if let key = try keyring.load() {
                return (key, MasterKeyOrigin(source: .secretService, created: false, detail: keyring.description))
            }
            if source.storesExist {
                throw lost(source, "the Secret Service holds no latchkey master key for \(source.stateDirectory)")
            }
            let key = try storeNew(SecureRandom.bytes(count: MasterKeyFile.keySize), in: keyring)
            return (key, MasterKeyOrigin(source: .secretService, created: true, detail: keyring.description))
        }
    }

    /// Moves the state directory's plaintext key into the sealed `source`
    /// (or, on a first start, makes a new key there). The caller holds the
    /// state directory's lock, so no daemon uses it meanwhile.
    public static func seal(_ source: MasterKeySource) throws(MasterKeyError) -> SealOutcome {
        let sealed: any SealedKeyStore
        switch source.kind {
        case .file:
            throw MasterKeyError(
                .invalid, "the plaintext file is not a sealed source: choose systemd-credential or secret-service"
            )
        case .systemdCredential: sealed = SystemdCredentialFile(source: source)
        case .secretService: sealed = SecretServiceKeyring(source: source)
        }
        var plaintext = try readPlaintext(source)
        defer { wipe(&plaintext) }
        var existing = try sealed.load()
        defer { wipe(&existing) }
        switch (plaintext, existing) {
        case (nil, nil):
            if source.storesExist {
                throw lost(source, "neither \(source.plaintextFile) nor \(sealed.description) holds a key")
            }
            _ = try storeNew(SecureRandom.bytes(count: MasterKeyFile.keySize), in: sealed)
            return .created
        case (nil, .some):
            return .alreadySealed
        case (.some(let key), .some(let stored)):
            guard key == stored else {
                throw MasterKeyError(
                    .conflict,
                    "\(source.plaintextFile) and \(sealed.description) hold different keys; nothing was changed."
                        + " Keep the one that opens the stores and remove the other by hand"
                )
            }
            try removePlaintext(source)
            return .removedLeftover
        case (.some(let key), nil):
            _ = try storeNew(key, in: sealed)
            try removePlaintext(source)
            return .moved
        }
    }

    // MARK: - Internals

    /// Stores `key` in `sealed` and reads it back: only a key that comes back
    /// the same is returned (and may replace the plaintext file).
    private static func storeNew(_ key: [UInt8], in sealed: any SealedKeyStore) throws(MasterKeyError) -> [UInt8] {
        try sealed.store(key)
        var readBack = try sealed.load()
        defer { wipe(&readBack) }
        guard readBack == key else {
            throw MasterKeyError(
                .unavailable,
                "\(sealed.description) did not give back the key just stored; the plaintext file, if any, is kept"
            )
        }
        return key
    }

    private static func lost(_ source: MasterKeySource, _ what: String) -> MasterKeyError {
        MasterKeyError(
            .missing,
            "\(what), but \(source.stateDirectory)/keys holds stores sealed under a master key; a new key would"
                + " open none of them, so none is made. Restore the key (or move the stores away)"
        )
    }

    /// The plaintext key of the state directory, nil when there is none.
    private static func readPlaintext(_ source: MasterKeySource) throws(MasterKeyError) -> [UInt8]? {
        do {
            return try MasterKeyFile.load(at: source.plaintextFile)
        } catch {
            throw MasterKeyError(.invalid, error.reason)
        }
    }

    /// A sealed source never runs beside a plaintext copy of its key.
    private static func refusePlaintext(_ source: MasterKeySource) throws(MasterKeyError) {
        var status = stat()
        guard lstat(source.plaintextFile, &status) == 0 else { return }
        throw MasterKeyError(
            .conflict,
            "the master key source is \(source.kind.rawValue), but a plaintext \(source.plaintextFile) is still there;"
                + " move it with `latchkeyd --state-dir \(source.stateDirectory) --master-key \(source.kind.rawValue)"
                + " --seal-master-key`\(source.kind == .systemdCredential ? " as root" : "") (it removes the file once"
                + " the sealed copy reads back)"
        )
    }

    private static func removePlaintext(_ source: MasterKeySource) throws(MasterKeyError) {
        let path = source.plaintextFile
        guard unlink(path) == 0 || errno == ENOENT else {
            throw MasterKeyError(.unavailable, "cannot remove \(path): \(String(cString: strerror(errno)))")
        }
        do {
            try Posix.fsyncDirectory(of: path)
        } catch {
            throw MasterKeyError(.unavailable, "removed \(path), but cannot make that durable: \(error)")
        }
    }

    /// A file that must hold exactly the 32 key bytes; nil when it does not exist.
    static func readKeyFile(_ path: String, what: String) throws(MasterKeyError) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw MasterKeyError(.unavailable, "cannot open \(what) \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let bytes: [UInt8]
        do {
            bytes = try Posix.read(descriptor, count: MasterKeyFile.keySize + 1, path: path)
        } catch {
            throw MasterKeyError(.unavailable, "cannot read \(what): \(error)")
        }
        guard bytes.count == MasterKeyFile.keySize else {
            throw MasterKeyError(
                .invalid,
                "\(what) \(path) holds \(bytes.count > MasterKeyFile.keySize ? "more than \(MasterKeyFile.keySize)" : "\(bytes.count)") bytes; a master key is \(MasterKeyFile.keySize)"
            )
        }
        return bytes
    }
}

/// Overwrites a key's bytes before its array goes (copies made earlier are
/// not reached: docs/security.md).
func wipe(_ bytes: inout [UInt8]?) {
    guard var value = bytes else { return }
    bytes = nil
    value.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
}

/// A sealed place for the key, which the seal step can write and read back.
protocol SealedKeyStore {
    /// Names the place in messages.
    var description: String { get }
    /// The key, nil when the place holds none.
    func load() throws(MasterKeyError) -> [UInt8]?
    /// Stores the key; never replaces one already there.
    func store(_ key: [UInt8]) throws(MasterKeyError)
}

/// The key as a hexadecimal string (what secret-tool and the keyring keep), and back.
enum KeyText {
    static func encode(_ key: [UInt8]) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(key.count * 2)
        for byte in key {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return text
    }

    /// The key in `text` (surrounding whitespace ignored), nil when it is not 64 hex digits.
    static func decode(_ text: [UInt8]) -> [UInt8]? {
        let trimmed = text.drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }
            .reversed().drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }.reversed()
        let digits = Array(trimmed)
        guard digits.count == MasterKeyFile.keySize * 2 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case 0x30...0x39: return digit - 0x30
            case 0x61...0x66: return digit - 0x61 + 10
            case 0x41...0x46: return digit - 0x41 + 10
            default: return nil
            }
        }
        var key: [UInt8] = []
        key.reserveCapacity(MasterKeyFile.keySize)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            key.append(high << 4 | low)
        }
        return key
    }
}
