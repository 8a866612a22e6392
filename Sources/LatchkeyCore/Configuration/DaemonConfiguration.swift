// latchkeyd's configuration: an embedded default, a TOML file, then
// command-line flags, each overriding the one before. Every default is
// written out in `DaemonConfiguration.documentedDefaults` (the README shows
// the same text).

public import CTAP
import Foundation
import LatchkeyContract
public import LatchkeyStore
import TOMLKit

/// How user presence is decided for a key.
public enum PresenceMode: String, Sendable, Codable, CaseIterable {
    /// Approve every request at once (CI rigs, no human present).
    case auto
    /// Hold each request until someone approves or denies it through the
    /// control API (`latchkeyctl approve|deny`), or it times out.
    case prompt
    /// Refuse every request.
    case deny
}

/// The protocols a key speaks (WebDriver's authenticator `protocol`).
public enum ProtocolMode: String, Sendable, Codable, CaseIterable {
    /// CTAP 2.1, and U2F over CTAPHID_MSG.
    case ctap21 = "ctap2.1"
    /// CTAP1/U2F only: no CBOR capability, CBOR commands refused.
    case u2fOnly = "u2f-only"
}

/// Whether a transport is on.
public enum TransportSwitch: String, Sendable, Codable {
    /// On; failing to start it is an error.
    case on
    /// Off.
    case off
    /// On where the machine supports it (uhid: `/dev/uhid` can be opened).
    case auto
}

/// One virtual key.
public struct KeyConfiguration: Sendable, Equatable {
    /// The key's name (KeyName's grammar); it names the key's directory too.
    public var name: KeyName
    /// Presence mode; nil means the daemon's `[presence] mode`.
    public var presence: PresenceMode?
    /// Whether this key gets a uhid device (when the daemon's uhid transport is on).
    public var uhid: Bool = true
    /// Whether this key is exported over USB/IP (when the daemon's USB/IP server is on).
    public var usbip: Bool = true
    /// USB vendor id shown to hosts.
    public var vendorId: UInt16 = 0x1209
    /// USB product id shown to hosts.
    public var productId: UInt16 = 0x0001
    /// Product string (uhid device name, USB iProduct).
    public var productName: String = "Virtual FIDO2 Key"
    /// Manufacturer string (USB iManufacturer).
    public var manufacturer: String = "latchkey"
    /// Attestation statement for makeCredential: batch, self or none.
    public var attestation: String = "batch"
    /// What the key speaks: CTAP 2.1 (with U2F), or U2F alone.
    public var protocolMode: ProtocolMode = .ctap21
    /// Whether built-in user verification may succeed (WebDriver's
    /// isUserVerified, set through the control API); whether the key offers
    /// it at all, and how, is the policy's user-verification.
    public var userVerified = true
    /// The feature switches (LatchkeyContract's `KeyFeature` table): resident
    /// keys, large blobs, the extensions, the persistent pinUvAuthToken and
    /// enterprise attestation (CTAP 2.1 §7.1: on, the key gets a certificate of
    /// its own and getInfo's ep, false until authenticatorConfig enables it).
    /// Each at its default unless the configuration or the request names it.
    public var features = KeyFeatures()
    /// The RP IDs vendor-facilitated enterprise attestation serves.
    public var enterpriseAttestationRpIds: [String] = []
    /// The credential algorithms offered, in preference order (getInfo
    /// algorithms; makeCredential takes the first of the RP's list offered).
    public var algorithms = COSEAlgorithm.defaultOrder
    /// How many discoverable credentials the key holds before it refuses
    /// another (CTAP2_ERR_KEY_STORE_FULL; getInfo's
    /// remainingDiscoverableCredentials counts down from it).
    public var maxDiscoverableCredentials = 1000
    /// This key's changes to the daemon's `[policy]`.
    public var policy = PolicyOverrides()
    /// The account the key belongs to (Keys/Access.swift): the uid that created it
    /// through the control API, or `owner = "NAME"` in its `[[keys]]` table; nil
    /// means the daemon's own uid.
    public var owner: UInt32?
    /// Whether its private keys may leave the daemon without its PIN (export,
    /// `?privateKey=true`): off for a person's key, on for automation keys. Set
    /// when the key is made, never changed through the control API.
    public var exportable = false

    public init(name: KeyName) { self.name = name }

    /// The algorithms `names` name (IANA names such as "ES256" or "RS256",
    /// any case, or COSE numbers), in their order; an unknown or repeated
    /// name, or none at all, is an error.
    public static func algorithms(named names: [String]) throws(ConfigurationError) -> [COSEAlgorithm] {
        var algorithms: [COSEAlgorithm] = []
        for name in names {
            guard let algorithm = COSEAlgorithm(name: name) else {
                let known = COSEAlgorithm.defaultOrder.map(\.name).joined(separator: ", ")
                throw ConfigurationError("algorithm \"\(name)\" is not one of \(known)")
            }
            guard !algorithms.contains(algorithm) else {
                throw ConfigurationError("algorithm \(algorithm.name) is listed twice")
            }
            algorithms.append(algorithm)
        }
        guard !algorithms.isEmpty else { throw ConfigurationError("algorithms lists none") }
        return algorithms
    }

    /// The most discoverable credentials a key may be given. The store is
    /// SQLite and would hold more, but getAssertion, credential management
    /// and the control API enumerate a key's (or an RP's) credentials in
    /// memory, and makeCredential lists an RP's to find the one it replaces:
    /// past this a full key answers slowly rather than plainly full.
    public static let discoverableCredentialCeiling = 100_000

    /// `value` as a discoverable credential limit: 1 to
    /// `discoverableCredentialCeiling`, else an error.
    public static func discoverableCredentialLimit(_ value: Int) throws(ConfigurationError) -> Int {
        guard (1...discoverableCredentialCeiling).contains(value) else {
            throw ConfigurationError(
                "a limit of discoverable credentials is 1 to \(discoverableCredentialCeiling), not \(value)"
            )
        }
        return value
    }
}

/// Everything latchkeyd needs to start.
public struct DaemonConfiguration: Sendable, Equatable {
    /// Where keys' stores, the master key and the lock live.
    public var stateDirectory: String
    /// The control API socket.
    public var controlSocket: String
    /// swift-log level: trace, debug, info, notice, warning, error, critical.
    public var logLevel: String = "info"
    /// The uhid transport.
    public var uhid: TransportSwitch = .auto
    /// The uhid character device.
    public var uhidPath: String = "/dev/uhid"
    /// The USB/IP server.
    public var usbip: TransportSwitch = .auto
    /// Where the USB/IP server listens (host:port).
    public var usbipListen: String = "127.0.0.1:3240"
    /// Whether the USB/IP server may listen beyond loopback.
    public var usbipAllowRemote: Bool = false
    /// The default presence mode of keys.
    public var presence: PresenceMode = .prompt
    /// How long a prompted request waits for an answer.
    public var presenceTimeoutSeconds: Int = 30
    /// How long after a key powers up authenticatorReset is allowed.
    public var resetWindowSeconds: Int = 10
    /// Where the master key is kept (`[master-key] source`).
    public var masterKeySource: MasterKeySourceKind = .file
    /// The encrypted credential systemd loads and `--seal-master-key` writes
    /// (systemd-credential); nil means `<state>/master-key.cred`.
    public var masterKeyCredentialFile: String?
    /// `systemd-creds encrypt --with-key=` for `--seal-master-key`.
    public var masterKeyWithKey: String = "auto"
    /// Consent policy of every key (`[policy]`); keys override it.
    public var policy = PolicySettings()
    /// The keys: the `[[keys]]` tables; without any, one key named "default" owned
    /// by the daemon's account, unless `default-key = false` (the system unit's
    /// packaged configuration: each person makes a key of their own).
    public var keys: [KeyConfiguration] = [KeyConfiguration(name: "default")]

    /// The defaults for this process: systemd's directories when it passes
    /// them, root's system paths, otherwise the user's XDG directories.
    public static func defaults(environment: [String: String] = ProcessInfo.processInfo.environment) -> Self {
        let isRoot = geteuid() == 0
        let home = environment["HOME"] ?? "/root"
        let state: String
        if let fromSystemd = environment["STATE_DIRECTORY"]?.split(separator: ":").first {
            state = String(fromSystemd)
        } else if isRoot {
            state = "/var/lib/latchkeyd"
        } else {
            state = (environment["XDG_STATE_HOME"] ?? "\(home)/.local/state") + "/latchkeyd"
        }
        let socket: String
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first {
            socket = "\(runtime)/control.sock"
        } else if isRoot {
            socket = "/run/latchkeyd/control.sock"
        } else if let runtime = environment["XDG_RUNTIME_DIR"] {
            socket = "\(runtime)/latchkeyd/control.sock"
        } else {
            socket = "\(state)/control.sock"
        }
        return DaemonConfiguration(stateDirectory: state, controlSocket: socket)
    }

    /// The [[keys]] table's feature lines of `documentedDefaults`, one per row of
    /// the `KeyFeature` table: `# key = default`, its comment from column 28.
    private static var featureLines: String {
        KeyFeature.all.map { feature in
            let line = "# \(feature.configurationKey) = \(feature.defaultValue)"
            return line + String(repeating: " ", count: max(2, 28 - line.count)) + "# \(feature.configurationComment)"
        }.joined(separator: "\n")
    }

    /// The configuration file format with every key and its default.
    public static let documentedDefaults = """
        # latchkeyd configuration (TOML). Every key is optional; shown with its default.
        # state-directory = "/var/lib/latchkeyd"          # $STATE_DIRECTORY under systemd; ~/.local/state/latchkeyd for a user
        # control-socket = "/run/latchkeyd/control.sock"  # $RUNTIME_DIRECTORY/control.sock; $XDG_RUNTIME_DIR/latchkeyd/control.sock for a user
        # log-level = "info"                               # trace, debug, info, notice, warning, error, critical
        # reset-window-seconds = 10                        # authenticatorReset only this long after a key powers up
        # default-key = true                               # without [[keys]], one key "default" owned by the daemon's account

        [master-key]                # where the key that seals every store is kept (docs/security.md)
        # source = "file"           # file (<state>/master-key, plaintext) | systemd-credential | secret-service
        # credential-file = "/var/lib/latchkeyd/master-key.cred"  # systemd-credential: LoadCredentialEncrypted= loads it; <state>/master-key.cred
        # with-key = "auto"         # systemd-credential: systemd-creds --with-key when sealing; auto: tpm2, else host

        [uhid]
        # enabled = "auto"          # on | off | auto (on when /dev/uhid can be opened)
        # path = "/dev/uhid"

        [usbip]
        # enabled = "auto"          # on | off | auto (on when uhid is not available)
        # listen = "127.0.0.1:3240"
        # allow-remote = false      # listening beyond loopback needs this, and logs a warning

        [presence]
        # mode = "prompt"           # auto | prompt | deny
        # timeout-seconds = 30      # a prompted request fails with CTAP2_ERR_USER_ACTION_TIMEOUT after this

        [policy]
        # user-verification = "deny"         # deny | prompt | auto: built-in UV when a platform asks for it; auto needs presence auto
        # notifications = true               # desktop notifications with Allow/Deny for prompts (the session D-Bus)
        # conditional-registration = true    # password-used signals let a makeCredential for that (rp, user) through silently
        # signal-window-seconds = 300        # how long a password-used signal stays usable (once)
        # on-mismatch = "fallback"           # fallback (presence mode decides) | deny (CTAP2_ERR_OPERATION_DENIED at once)
        # allow-rp-ids = []                  # RPs that may be registered conditionally ("example.com", "*.example.com"); empty: all
        # deny-rp-ids = []                   # RPs never registered conditionally; wins over allow-rp-ids
        # require-pin = false                # conditional registration only once the key has a PIN
        # rate-limit-per-hour = 3            # conditional registrations per RP in any hour
        # prompts-per-minute = 10            # prompts a key shows in any minute; more are refused without one
        # deny-cooldown-seconds = 10         # after a Deny, requests are refused without a prompt this long (0: off)

        # One [[keys]] table per virtual key; without any, one key named "default".
        # [[keys]]
        # name = "default"
        # owner = "alice"           # the account the key belongs to (a name or a uid); default: the daemon's own
        # exportable = false        # private keys may leave without the key's PIN (export, ?privateKey=true): for CI keys
        # presence = "prompt"       # overrides [presence] mode for this key
        # uhid = true               # this key gets a uhid device when uhid is enabled
        # usbip = true              # this key is exported when USB/IP is enabled
        # vendor-id = 0x1209        # pid.codes; 0x0001 is its test PID: set your own for real deployments
        # product-id = 0x0001
        # product-name = "Virtual FIDO2 Key"  # hosts show "<manufacturer> <product-name>"
        # manufacturer = "latchkey"
        # attestation = "batch"     # batch | self | none
        # protocol = "ctap2.1"      # ctap2.1 | u2f-only
        \(featureLines)
        # enterprise-attestation-rp-ids = ["corp.example"]  # RP IDs for vendor-facilitated enterprise attestation
        # algorithms = ["ES256", "EdDSA", "ES384", "RS256", "ES512", "PS256", "ES256K", "ESP256", "ESP384", "ESP512", "Ed25519", "ML-DSA-65", "ML-DSA-87"]
        # max-discoverable-credentials = 1000  # then CTAP2_ERR_KEY_STORE_FULL; 1 to 100000
        # [keys.policy]             # any [policy] key, for this key only
        # user-verification = "deny"
        """

    /// Applies a TOML document on top of this configuration.
    public mutating func apply(toml text: String, source: String) throws(ConfigurationError) {
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch {
            throw ConfigurationError("\(source): not valid TOML: \(error)")
        }
        var reader = TableReader(table: table, path: source)
        if let value = try reader.string("state-directory") { stateDirectory = value }
        if let value = try reader.string("control-socket") { controlSocket = value }
        if let value = try reader.string("log-level") { logLevel = value }
        if let value = try reader.int("reset-window-seconds") { resetWindowSeconds = value }
        // Without [[keys]] tables the implicit key stays, unless this file says there is none.
        if let value = try reader.bool("default-key"), !value, try reader.tables("keys") == nil { keys = [] }
        if var section = try reader.table("master-key") {
            if let value = try section.string("source") {
                guard let kind = MasterKeySourceKind(rawValue: value) else {
                    throw ConfigurationError(
                        "\(section.path): source must be \"file\", \"systemd-credential\" or \"secret-service\", not \"\(value)\""
                    )
                }
                masterKeySource = kind
            }
            if let value = try section.string("credential-file") { masterKeyCredentialFile = value }
            if let value = try section.string("with-key") { masterKeyWithKey = value }
            try section.finish()
        }
        if var section = try reader.table("uhid") {
            if let value = try section.transportSwitch("enabled") { uhid = value }
            if let value = try section.string("path") { uhidPath = value }
            try section.finish()
        }
        if var section = try reader.table("usbip") {
            if let value = try section.transportSwitch("enabled") { usbip = value }
            if let value = try section.string("listen") { usbipListen = value }
            if let value = try section.bool("allow-remote") { usbipAllowRemote = value }
            try section.finish()
        }
        if var section = try reader.table("presence") {
            if let value = try section.presenceMode("mode") { presence = value }
            if let value = try section.int("timeout-seconds") { presenceTimeoutSeconds = value }
            try section.finish()
        }
        if var section = try reader.table("policy") {
            policy = try section.policyOverrides().applied(to: policy)
        }
        if let tables = try reader.tables("keys") {
            var parsed: [KeyConfiguration] = []
            for var section in tables {
                guard let text = try section.string("name") else {
                    throw ConfigurationError("\(section.path): every [[keys]] table needs a name")
                }
                let name: KeyName
                do {
                    name = try KeyName(text)
                } catch {
                    throw ConfigurationError("\(section.path): name: \(error)")
                }
                var key = KeyConfiguration(name: name)
                key.presence = try section.presenceMode("presence")
                if let value = try section.bool("uhid") { key.uhid = value }
                if let value = try section.bool("usbip") { key.usbip = value }
                if let value = try section.int("vendor-id") { key.vendorId = try section.uint16(value, "vendor-id") }
                if let value = try section.int("product-id") { key.productId = try section.uint16(value, "product-id") }
                if let value = try section.string("product-name") { key.productName = value }
                if let value = try section.string("manufacturer") { key.manufacturer = value }
                if let value = try section.string("attestation") { key.attestation = value }
                key.owner = try section.account("owner")
                if let value = try section.bool("exportable") { key.exportable = value }
                try section.features(into: &key)
                if var policy = try section.table("policy") { key.policy = try policy.policyOverrides() }
                try section.finish()
                parsed.append(key)
            }
            if !parsed.isEmpty { keys = parsed }
        }
        try reader.finish()
    }

    /// Checks values that TOML types alone cannot.
    public func validate() throws(ConfigurationError) {
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(logLevel) else {
            throw ConfigurationError("log-level \"\(logLevel)\" is not one of trace, debug, info, notice, warning, error, critical")
        }
        guard presenceTimeoutSeconds > 0, presenceTimeoutSeconds <= 600 else {
            throw ConfigurationError("presence timeout-seconds must be between 1 and 600, not \(presenceTimeoutSeconds)")
        }
        guard resetWindowSeconds >= 0, resetWindowSeconds <= 3600 else {
            throw ConfigurationError("reset-window-seconds must be between 0 and 3600")
        }
        _ = try ListenAddress(usbipListen)
        guard ["auto", "host", "tpm2", "host+tpm2"].contains(masterKeyWithKey) else {
            throw ConfigurationError("master-key with-key must be auto, host, tpm2 or host+tpm2, not \"\(masterKeyWithKey)\"")
        }
        if let file = masterKeyCredentialFile, !file.hasPrefix("/") {
            throw ConfigurationError("master-key credential-file must be an absolute path, not \"\(file)\"")
        }
        var seen: Set<KeyName> = []
        for key in keys {
            guard seen.insert(key.name).inserted else { throw ConfigurationError("two keys are named \"\(key.name)\"") }
            guard ["batch", "self", "none"].contains(key.attestation) else {
                throw ConfigurationError("key \(key.name): attestation must be batch, self or none")
            }
            do {
                try key.policy.applied(to: policy).validate(mode: key.presence ?? presence)
            } catch {
                throw ConfigurationError("key \(key.name): policy: \(error.message)")
            }
        }
    }
}

/// A host:port to listen on.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    /// Parses "host:port" or "[v6]:port".
    public init(_ text: String) throws(ConfigurationError) {
        let host: Substring
        let port: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw ConfigurationError("\"\(text)\" is not HOST:PORT") }
            port = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ConfigurationError("\"\(text)\" is not HOST:PORT") }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let number = Int(port), (0...65535).contains(number) else {
            throw ConfigurationError("\"\(text)\" is not HOST:PORT with a port from 0 to 65535")
        }
        self.host = String(host)
        self.port = number
    }

    /// Whether the host is a loopback address or name.
    public var isLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A configuration the daemon cannot start with; the message says what and where.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Typed reads from a TOML table that remember which keys were read, so
/// that an unknown (misspelt) key is an error rather than silently ignored.
struct TableReader {
    let table: TOMLTable
    let path: String
    private var seen: Set<String> = []

    init(table: TOMLTable, path: String) {
        self.table = table
        self.path = path
    }

    mutating func value(_ key: String) -> (any TOMLValueConvertible)? {
        seen.insert(key)
        return table[key]
    }

    mutating func string(_ key: String) throws(ConfigurationError) -> String? { try typed(key, \.string, "a string") }

    mutating func int(_ key: String) throws(ConfigurationError) -> Int? { try typed(key, \.int, "an integer") }

    mutating func bool(_ key: String) throws(ConfigurationError) -> Bool? { try typed(key, \.bool, "true or false") }

    /// The value of `key` as `read` sees it, nil when the key is absent; a value of another
    /// type is an error saying what it must be.
    private mutating func typed<Value>(
        _ key: String,
        _ read: (any TOMLValueConvertible) -> Value?,
        _ mustBe: String
    ) throws(ConfigurationError) -> Value? {
        guard let value = value(key) else { return nil }
        guard let typed = read(value) else { throw ConfigurationError("\(path): \(key) must be \(mustBe)") }
        return typed
    }

    mutating func transportSwitch(_ key: String) throws(ConfigurationError) -> TransportSwitch? {
        guard let raw = value(key) else { return nil }
        if let bool = raw.bool { return bool ? .on : .off }
        guard let string = raw.string, let value = TransportSwitch(rawValue: string) else {
            throw ConfigurationError("\(path): \(key) must be \"on\", \"off\", \"auto\", true or false")
        }
        return value
    }

    /// An account: a user name, or a uid as an integer (or a string of
    /// digits). A name the password database does not know is an error.
    mutating func account(_ key: String) throws(ConfigurationError) -> UInt32? {
        guard let raw = value(key) else { return nil }
        let reference: AccountReference
        if let number = raw.int {
            guard let uid = UInt32(exactly: number) else {
                throw ConfigurationError("\(path): \(key) \(number) is not a uid")
            }
            reference = .uid(uid)
        } else if let name = raw.string {
            reference = .name(name)
        } else {
            throw ConfigurationError("\(path): \(key) must be an account's name or uid")
        }
        guard let uid = reference.uid else {
            throw ConfigurationError("\(path): \(key): no account named \"\(reference)\" on this system")
        }
        return uid
    }

    mutating func presenceMode(_ key: String) throws(ConfigurationError) -> PresenceMode? {
        guard let string = try self.string(key) else { return nil }
        guard let mode = PresenceMode(rawValue: string) else {
            throw ConfigurationError("\(path): \(key) must be \"auto\", \"prompt\" or \"deny\", not \"\(string)\"")
        }
        return mode
    }

    /// A [[keys]] table's feature switches (the control API's key options).
    mutating func features(into key: inout KeyConfiguration) throws(ConfigurationError) {
        if let value = try string("protocol") {
            guard let mode = ProtocolMode(rawValue: value) else {
                throw ConfigurationError("\(path): protocol must be \"ctap2.1\" or \"u2f-only\", not \"\(value)\"")
            }
            key.protocolMode = mode
        }
        for feature in KeyFeature.all {
            if let value = try bool(feature.configurationKey) { key.features[feature] = value }
        }
        if let value = try strings("enterprise-attestation-rp-ids") { key.enterpriseAttestationRpIds = value }
        if let value = value("algorithms") {
            let names = value.array.map { $0.compactMap(\.string) }
            guard let names, names.count == value.array?.count else {
                throw ConfigurationError("\(path): algorithms must be a list of algorithm names")
            }
            do {
                key.algorithms = try KeyConfiguration.algorithms(named: names)
            } catch {
                throw ConfigurationError("\(path): \(error.message)")
            }
        }
        if let value = try int("max-discoverable-credentials") {
            do {
                key.maxDiscoverableCredentials = try KeyConfiguration.discoverableCredentialLimit(value)
            } catch {
                throw ConfigurationError("\(path) (key \(key.name)): max-discoverable-credentials: \(error.message)")
            }
        }
    }

    func uint16(_ value: Int, _ key: String) throws(ConfigurationError) -> UInt16 {
        guard let narrow = UInt16(exactly: value) else {
            throw ConfigurationError("\(path): \(key) must be between 0 and 0xFFFF")
        }
        return narrow
    }

    mutating func table(_ key: String) throws(ConfigurationError) -> TableReader? {
        guard let value = value(key) else { return nil }
        guard let table = value.table else { throw ConfigurationError("\(path): [\(key)] must be a table") }
        return TableReader(table: table, path: "\(path) [\(key)]")
    }

    mutating func tables(_ key: String) throws(ConfigurationError) -> [TableReader]? {
        guard let value = value(key) else { return nil }
        guard let array = value.array else { throw ConfigurationError("\(path): \(key) must be [[\(key)]] tables") }
        var readers: [TableReader] = []
        for (index, element) in array.enumerated() {
            guard let table = element.table else {
                throw ConfigurationError("\(path): \(key)[\(index)] must be a table")
            }
            readers.append(TableReader(table: table, path: "\(path) [[\(key)]] #\(index + 1)"))
        }
        return readers
    }

    /// Throws for any key that was never read.
    func finish() throws(ConfigurationError) {
        let unknown = table.keys.filter { !seen.contains($0) }.sorted()
        if !unknown.isEmpty {
            throw ConfigurationError("\(path): unknown key\(unknown.count > 1 ? "s" : "") \(unknown.joined(separator: ", "))")
        }
    }
}
