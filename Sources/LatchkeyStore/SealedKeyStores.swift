// The two sealed places for the master key:
//
// - SecretServiceKeyring: an item of the session's Secret Service
//   (org.freedesktop.secrets; gnome-keyring on Debian), found by the
//   attributes application=latchkey and state-directory=<state>, read and
//   written with secret-tool (libsecret-tools). The keyring is encrypted
//   under the login password and unlocked at login: the user unit's seal,
//   as Debian 12's systemd 252 has no `systemd-creds --user`.
// - SystemdCredentialFile: the encrypted credential systemd decrypts for the
//   unit (LoadCredentialEncrypted=), written and read back with
//   `systemd-creds encrypt|decrypt` by the seal step, as root (only root may
//   use the host key and the TPM).

import Foundation
import Glibc

/// The master key as a Secret Service item.
struct SecretServiceKeyring: SealedKeyStore {
    let stateDirectory: String
    let environment: [String: String]

    init(source: MasterKeySource) {
        stateDirectory = source.stateDirectory
        environment = source.environment
    }

    var description: String { "the Secret Service item for \(stateDirectory)" }

    private var attributes: [String] { ["application", "latchkey", "state-directory", stateDirectory] }

    private func tool(_ arguments: [String]) -> KeyTool {
        KeyTool(program: "secret-tool", arguments: arguments, environment: environment)
    }

    private func checkBus() throws(MasterKeyError) {
        guard environment["DBUS_SESSION_BUS_ADDRESS"] != nil || environment["XDG_RUNTIME_DIR"] != nil else {
            throw MasterKeyError(
                .unavailable,
                "the master key source is secret-service, but there is no session bus"
                    + " ($DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR are unset): run latchkeyd in the user's session"
            )
        }
    }

    private static let notInstalled = MasterKeyError(
        .unavailable, "secret-tool is not installed (Debian: apt install libsecret-tools)"
    )

    func load() throws(MasterKeyError) -> [UInt8]? {
        try checkBus()
        guard var outcome = try tool(["lookup"] + attributes).run() else { throw Self.notInstalled }
        defer { outcome.wipe() }
        // secret-tool says nothing and exits 1 when no item matches; any message is a failure.
        if outcome.status != 0 {
            guard outcome.errors.isEmpty else {
                throw MasterKeyError(
                    .unavailable, "the Secret Service did not answer (locked, or not running?): \(outcome.errors)"
                )
            }
            // A locked keyring answers a lookup as if it held nothing (secret-tool
            // cannot show the unlock prompt without a display): ask it.
            if try defaultCollectionIsLocked() {
                throw MasterKeyError(
                    .unavailable,
                    "the Secret Service's default keyring is locked: unlock it (log in to the desktop session) and"
                        + " start latchkeyd again"
                )
            }
            return nil
        }
        guard let key = KeyText.decode(outcome.output) else {
            throw MasterKeyError(.invalid, "\(description) does not hold a 32-byte key in hexadecimal")
        }
        return key
    }

    /// Whether the default collection says it is locked (org.freedesktop.Secret.Collection's
    /// Locked property, through gdbus); false when it cannot be asked.
    private func defaultCollectionIsLocked() throws(MasterKeyError) -> Bool {
        let arguments = [
            "call", "--session", "--dest", "org.freedesktop.secrets",
            "--object-path", "/org/freedesktop/secrets/aliases/default",
            "--method", "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Collection", "Locked",
        ]
        guard let outcome = try KeyTool(program: "gdbus", arguments: arguments, environment: environment).run(),
            outcome.status == 0
        else { return false }
        return String(decoding: outcome.output, as: UTF8.self).contains("true")
    }

    func store(_ key: [UInt8]) throws(MasterKeyError) {
        try checkBus()
        let label = "latchkey master key (\(stateDirectory))"
        guard var outcome = try tool(["store", "--label", label] + attributes).run(input: KeyText.encode(key)) else {
            throw Self.notInstalled
        }
        defer { outcome.wipe() }
        guard outcome.status == 0 else {
            throw MasterKeyError(
                .unavailable,
                "the Secret Service refused to store the key (locked, or not running?): "
                    + (outcome.errors.isEmpty ? "secret-tool exited \(outcome.status)" : outcome.errors)
            )
        }
    }
}

/// The master key as a systemd encrypted credential file.
struct SystemdCredentialFile: SealedKeyStore {
    let path: String
    let withKey: String
    let environment: [String: String]

    init(source: MasterKeySource) {
        path = source.credentialFile
        withKey = source.withKey
        environment = source.environment
    }

    var description: String { "the systemd credential \(path)" }

    private static let notInstalled = MasterKeyError(.unavailable, "systemd-creds is not installed (systemd 250 or later)")

    func load() throws(MasterKeyError) -> [UInt8]? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        let arguments = ["decrypt", "--name=\(MasterKeySource.credentialName)", path, "-"]
        guard var outcome = try KeyTool(program: "systemd-creds", arguments: arguments, environment: environment).run()
        else { throw Self.notInstalled }
        defer { outcome.wipe() }
        guard outcome.status == 0 else {
            throw MasterKeyError(
                .unavailable,
                "systemd-creds cannot decrypt \(path) (another machine's TPM or host key?): \(outcome.errors)"
            )
        }
        guard outcome.output.count == MasterKeyFile.keySize else {
            throw MasterKeyError(.invalid, "\(path) holds \(outcome.output.count) bytes; a master key is 32")
        }
        return outcome.output
    }

    /// The key systemd-creds seals with: "auto" is the TPM2 where systemd
    /// finds one, else the host key (on the same disk: a copy of the disk
    /// opens it), which the seal step says.
    var resolvedWithKey: String {
        guard withKey == "auto" else { return withKey }
        let probe = try? KeyTool(program: "systemd-creds", arguments: ["has-tpm2"], environment: environment)
            .run()
        return probe?.status == 0 ? "tpm2" : "host"
    }

    func store(_ key: [UInt8]) throws(MasterKeyError) {
        // Written under a temporary name, then linked: the path never holds a
        // partial credential, and an existing one is never replaced.
        let temporary = "\(path).tmp-\(getpid())"
        unlink(temporary)
        defer { unlink(temporary) }
        let arguments = [
            "encrypt", "--name=\(MasterKeySource.credentialName)", "--with-key=\(resolvedWithKey)", "-", temporary,
        ]
        guard var outcome = try KeyTool(program: "systemd-creds", arguments: arguments, environment: environment)
            .run(input: key)
        else { throw Self.notInstalled }
        defer { outcome.wipe() }
        guard outcome.status == 0 else {
            throw MasterKeyError(.unavailable, "systemd-creds cannot encrypt the key: \(outcome.errors)")
        }
        do {
            let descriptor = try Posix.open(temporary, O_RDONLY | O_NOFOLLOW)
            defer { Posix.close(descriptor) }
            try Posix.fchmod(descriptor, 0o600, path: temporary)
            // The state directory's owner (the daemon's account) may read the
            // file's header, to log how it is sealed; it is useless without the
            // TPM or host key anyway.
            var directory = stat()
            if stat(Posix.directory(of: path), &directory) == 0, geteuid() == 0 {
                try Posix.call("fchown", path: temporary) { fchown(descriptor, directory.st_uid, directory.st_gid) }
            }
            try Posix.fsync(descriptor, path: temporary)
            try Posix.call("link", path: path) { link(temporary, path) }
            try Posix.fsyncDirectory(of: path)
        } catch {
            throw MasterKeyError(.unavailable, "cannot write \(path): \(error)")
        }
    }
}

extension SystemdCredentialFile {
    /// The key systemd sealed a credential file with, from the 16-byte ID
    /// that starts it (systemd's creds-util.h), or nil when the file cannot be
    /// read or is not a credential.
    static func sealing(ofFile path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        // 24 base64 characters are 18 bytes: the ID and a little more.
        guard let head = try? Posix.read(descriptor, count: 24, path: path), head.count == 24,
            let decoded = Data(base64Encoded: Data(head))
        else { return nil }
        let id = decoded.prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return sealings[id] ?? "unknown (\(id))"
    }

    private static let sealings: [String: String] = [
        "5a1c6a86df9d4096b1d5a65e0862f19a": "host",
        "0c7cc07b117645919c4b0bea08bc20fe": "tpm2",
        "93a894094874449090caf2fc93cab553": "host+tpm2",
        "faf7eb9341e3412ca1a436f95a29362f": "tpm2 with a public key",
        "af4950a849134eb1a73846304ff30c05": "host+tpm2 with a public key",
        "058469daf6f54324800549da0f8ea2fb": "null (no key at all)",
    ]
}
