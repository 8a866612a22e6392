// One virtual key of the daemon: its store, its authenticator, its presence
// broker and the identity (AAGUID, attestation certificate) it keeps across
// resets.

import CBOR
import CTAP
import Foundation
import LatchkeyContract
import LatchkeyCrypto
import LatchkeyJSON
import LatchkeyStore
import Logging
import Synchronization

/// A running virtual key.
public final class VirtualKey: Sendable {
    /// Secrets under this prefix are the device's identity; authenticatorReset
    /// keeps them (see `CredentialStore.reset()`).
    static let aaguidSecret = "device.aaguid"
    static let attestationKeySecret = "device.attestation-key"
    static let attestationChainSecret = "device.attestation-chain"
    static let enterpriseAttestationKeySecret = "device.enterprise-attestation-key"
    static let enterpriseAttestationChainSecret = "device.enterprise-attestation-chain"

    public let configuration: KeyConfiguration
    public let aaguid: [UInt8]
    public let store: SQLiteCredentialStore
    public let authenticator: Authenticator
    public let presence: PresenceBroker
    /// Where the requests of the key's transports run (KeyEngineExecutor.swift).
    package let engineExecutor: KeyEngineExecutor
    /// The key's queued CI overrides (POST /v1/keys/{name}/overrides).
    public let overrides = OverrideQueue()
    /// Where the key's events go.
    public let events: EventBus
    private let signCounts = SignCountBook()
    package let logger: Logger

    /// Opens (or creates) the key's store under `directory` and its identity.
    init(
        configuration: KeyConfiguration,
        directory: String,
        masterKey: [UInt8],
        defaults: DaemonConfiguration,
        board: PresenceBoard,
        events: EventBus,
        logger: Logger
    ) throws {
        self.events = events
        var logger = logger
        logger[metadataKey: "key"] = "\(configuration.name)"
        self.logger = logger
        self.configuration = configuration
        engineExecutor = KeyEngineExecutor(label: "latchkey.engine.\(configuration.name)")
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
        )
        store = try SQLiteCredentialStore(path: directory + "/credentials.db", masterKey: masterKey)
        let entropy = SystemEntropy()
        if let stored = try store.secret(named: Self.aaguidSecret), stored.count == 16 {
            aaguid = stored
        } else {
            aaguid = entropy.bytes(count: 16)
            try store.setSecret(aaguid, named: Self.aaguidSecret)
        }
        let identity = try Self.loadIdentity(store: store, aaguid: aaguid, logger: logger)
        let policy = configuration.policy.applied(to: defaults.policy)
        presence = PresenceBroker(
            key: configuration.name.rawValue, owner: configuration.owner,
            mode: configuration.presence ?? defaults.presence,
            timeoutSeconds: defaults.presenceTimeoutSeconds, board: board, logger: logger,
            policy: policy, builtInUserVerification: policy.userVerification != .deny,
            overrides: overrides, eventBus: events
        )
        presence.isUserVerified = configuration.userVerified
        let keyLogger = logger
        var engine = AuthenticatorConfiguration(
            aaguid: aaguid,
            attestation: AttestationMode(rawValue: configuration.attestation) ?? .batch,
            attestationIdentity: identity,
            resetWindowMilliseconds: UInt64(defaults.resetWindowSeconds) * 1000,
            // getInfo's uv is fixed for the key's life: the policy as configured
            // decides whether the key offers built-in UV at all (deny: never).
            builtInUserVerification: policy.userVerification != .deny
        )
        Self.applyFeatures(of: configuration, to: &engine)
        if configuration.features[.enterpriseAttestation] {
            engine.enterpriseAttestationIdentity = try Self.loadEnterpriseIdentity(
                store: store, aaguid: aaguid, name: configuration.name.rawValue, logger: logger
            )
        }
        let signCounts = self.signCounts
        let name = configuration.name.rawValue
        let broker = presence
        authenticator = try Authenticator(
            configuration: engine,
            store: store, presence: presence, clock: SystemMonotonicClock(), entropy: entropy,
            diagnostics: { keyLogger.error("authenticator: \($0)") },
            events: { event in
                if let signCount = event.signCount { signCounts[event.credentialId] = signCount }
                let conditional = broker.conditionalCreation(event)
                events.publish(
                    EventName(rawValue: event.kind.rawValue), key: name,
                    Self.fields(of: event).merging(conditional ?? [:]) { $1 }
                )
            }
        )
        presence.bind(facts: Self.facts(authenticator: authenticator))
        presence.connect(events: events)
    }

    /// What conditional registration asks about the key: its passkeys for
    /// an (rp, user), and whether it has a PIN.
    private static func facts(authenticator: Authenticator) -> KeyFacts {
        KeyFacts(
            passkeys: { rpId, userName, userId in
                guard let stored = try? await authenticator.storedCredentials(rpId: rpId) else { return nil }
                return stored.filter { credential in
                    credential.userName == userName || (userId != nil && credential.userId == userId)
                }.map(\.id)
            },
            pinSet: { try? await authenticator.pinStatus().isSet }
        )
    }

    /// The engine's feature switches for the key's options. An extension is off
    /// when its feature is (the `KeyFeature` table names each feature's
    /// extensions); the features that are more than extensions switch the
    /// engine's own settings.
    static func applyFeatures(of key: KeyConfiguration, to engine: inout AuthenticatorConfiguration) {
        engine.ctap2Enabled = key.protocolMode == .ctap21
        engine.residentKeys = key.features[.residentKeys]
        engine.largeBlobs = key.features[.largeBlob]
        engine.algorithms = key.algorithms
        engine.maxDiscoverableCredentials = key.maxDiscoverableCredentials
        engine.enabledExtensions = Set(ExtensionIdentifier.supported).subtracting(key.features.extensionsOff)
        engine.persistentPinUvAuthToken = key.features[.persistentToken]
        engine.enterpriseAttestationRpIds = Set(key.enterpriseAttestationRpIds)
    }

    /// An engine event's fields on the event bus.
    static func fields(of event: AuthenticatorEvent) -> [String: EventValue] {
        var fields: [String: EventValue] = [
            "credentialId": .string(Base64URL.encode(event.credentialId)),
            "discoverable": .bool(event.discoverable),
            "userVerified": .bool(event.userVerified),
        ]
        if let rpId = event.rpId { fields["rpId"] = .string(rpId) }
        if let userId = event.userId { fields["userHandle"] = .string(Base64URL.encode(userId)) }
        if let userName = event.userName { fields["userName"] = .string(userName) }
        if let displayName = event.userDisplayName { fields["userDisplayName"] = .string(displayName) }
        if let signCount = event.signCount { fields["signCount"] = .int(Int(signCount)) }
        if let origin = event.origin { fields["origin"] = .string(origin) }
        return fields
    }

    /// The last signature counter value of each credential, as the engine's
    /// events told it since the daemon started (the store keeps only a
    /// reservation ahead of it).
    func lastSignCount(of credentialId: [UInt8]) -> UInt32? {
        signCounts[credentialId]
    }

    /// Remembers a seeded credential's counter.
    func noteSignCount(_ value: UInt32, of credentialId: [UInt8]) {
        signCounts[credentialId] = value
    }

    /// The attestation identity kept in the store, generated on first start.
    private static func loadIdentity(
        store: SQLiteCredentialStore, aaguid: [UInt8], logger: Logger
    ) throws -> AttestationIdentity {
        try loadIdentity(
            store: store, aaguid: aaguid, logger: logger, keySecret: attestationKeySecret,
            chainSecret: attestationChainSecret, commonName: nil, what: "batch"
        )
    }

    /// The enterprise attestation identity (CTAP 2.1 §7.1), generated when
    /// the key first starts with enterprise attestation: a certificate of
    /// its own, naming the key, apart from the batch certificate. Kept like
    /// it (`device.` secrets), so a reset keeps it.
    private static func loadEnterpriseIdentity(
        store: SQLiteCredentialStore, aaguid: [UInt8], name: String, logger: Logger
    ) throws -> AttestationIdentity {
        try loadIdentity(
            store: store, aaguid: aaguid, logger: logger, keySecret: enterpriseAttestationKeySecret,
            chainSecret: enterpriseAttestationChainSecret,
            commonName: String("latchkey enterprise attestation \(name)".prefix(64)), what: "enterprise"
        )
    }

    private static func loadIdentity(
        store: SQLiteCredentialStore, aaguid: [UInt8], logger: Logger, keySecret: String, chainSecret: String,
        commonName: String?, what: String
    ) throws -> AttestationIdentity {
        if let key = try store.secret(named: keySecret),
            let chain = try store.secret(named: chainSecret),
            let certificates = try? CBORDecoder().decode(chain).arrayValue().map({ try $0.bytesValue() }),
            let privateKey = try? P256PrivateKey(rawRepresentation: key), !certificates.isEmpty
        {
            return AttestationIdentity(privateKey: privateKey, certificateChain: certificates)
        }
        let identity = try AttestationIdentity.generate(
            aaguid: aaguid, entropy: SystemEntropy(), now: Int64(Date().timeIntervalSince1970), commonName: commonName
        )
        try store.setSecret(identity.privateKey.rawRepresentation, named: keySecret)
        try store.setSecret(CBORValue.array(identity.certificateChain.map { .bytes($0) }).encoded(), named: chainSecret)
        logger.info("generated the \(what) attestation certificate")
        return identity
    }

    /// The serial number hosts see on either transport (USB iSerialNumber, uhid
    /// uniq): the key's name after part of its AAGUID, at most 63 bytes.
    package var serialNumber: String {
        let tag = aaguid.prefix(4).map { String(format: "%02x", $0) }.joined()
        return String("latchkey-\(tag)-\(configuration.name)".prefix(63))
    }

    /// The account the key belongs to (Keys/Access.swift): its configuration's owner, or
    /// the daemon's own uid. The transports ask the access rules with it.
    package var owner: UInt32 { configuration.owner ?? getuid() }

    /// A transport's session hooks: the override queue, events for the
    /// overrides that act, and `drop` to yank the key from that transport.
    package func sessionHooks(drop: @escaping @Sendable () -> Void) -> SessionHooks {
        let events = self.events
        let name = configuration.name.rawValue
        let authenticator = self.authenticator
        return SessionHooks(
            overrides: overrides,
            applied: { action, operation in
                events.publish(
                    .overrideApplied, key: name,
                    ["override": .string(action.rawValue), "operation": .string(operation.rawValue)]
                )
            },
            drop: {
                // A yank is a power cycle too.
                Task { await authenticator.powerCycle() }
                events.publish(.keyReplugged, key: name, ["reason": "drop-connection override"])
                drop()
            }
        )
    }

    /// The stored (discoverable) credentials.
    func credentials() throws -> [StoredCredential] { try store.allCredentials() }
}

/// The last signature counter of each credential a key used since the
/// daemon started.
final class SignCountBook: Sendable {
    private let values = Mutex<[[UInt8]: UInt32]>([:])

    subscript(credentialId: [UInt8]) -> UInt32? {
        get { values.withLock { $0[credentialId] } }
        set { values.withLock { $0[credentialId] = newValue } }
    }
}
