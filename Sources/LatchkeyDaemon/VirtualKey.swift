// One virtual key of the daemon: its store, its authenticator, its presence
// broker and the identity (AAGUID, attestation certificate) it keeps across
// resets.

import CBOR
import CTAP
import CTAPHID
import Foundation
import LatchkeyCrypto
import LatchkeyStore
import Logging

/// A running virtual key.
public final class VirtualKey: Sendable {
    /// Secrets under this prefix are the device's identity; authenticatorReset
    /// keeps them (see `CredentialStore.reset()`).
    static let aaguidSecret = "device.aaguid"
    static let attestationKeySecret = "device.attestation-key"
    static let attestationChainSecret = "device.attestation-chain"

    public let configuration: KeyConfiguration
    public let aaguid: [UInt8]
    public let store: SQLiteCredentialStore
    public let authenticator: Authenticator
    public let presence: PresenceBroker
    /// The key's queued CI overrides (POST /v1/keys/{name}/overrides).
    public let overrides = OverrideQueue()
    /// Where the key's events go.
    public let events: EventBus
    let logger: Logger

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
        presence = PresenceBroker(
            key: configuration.name, mode: configuration.presence ?? defaults.presence,
            timeoutSeconds: defaults.presenceTimeoutSeconds, board: board, logger: logger,
            overrides: overrides, events: events
        )
        presence.isUserVerified = configuration.userVerified
        let keyLogger = logger
        authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(
                aaguid: aaguid,
                attestation: AttestationMode(rawValue: configuration.attestation) ?? .batch,
                attestationIdentity: identity,
                resetWindowMilliseconds: UInt64(defaults.resetWindowSeconds) * 1000
            ),
            store: store, presence: presence, clock: SystemMonotonicClock(), entropy: entropy,
            diagnostics: { keyLogger.error("authenticator: \($0)") }
        )
    }

    /// The attestation identity kept in the store, generated on first start.
    private static func loadIdentity(
        store: SQLiteCredentialStore, aaguid: [UInt8], logger: Logger
    ) throws -> AttestationIdentity {
        if let key = try store.secret(named: attestationKeySecret),
            let chain = try store.secret(named: attestationChainSecret),
            let certificates = try? CBORDecoder().decode(chain).arrayValue().map({ try $0.bytesValue() }),
            let privateKey = try? P256PrivateKey(rawRepresentation: key), !certificates.isEmpty
        {
            return AttestationIdentity(privateKey: privateKey, certificateChain: certificates)
        }
        let identity = try AttestationIdentity.generate(
            aaguid: aaguid, entropy: SystemEntropy(), now: Int64(Date().timeIntervalSince1970)
        )
        try store.setSecret(identity.privateKey.rawRepresentation, named: attestationKeySecret)
        try store.setSecret(
            CBORValue.array(identity.certificateChain.map { .bytes($0) }).encoded(), named: attestationChainSecret
        )
        logger.info("generated the batch attestation certificate")
        return identity
    }

    /// The serial number hosts see on either transport (USB iSerialNumber, uhid
    /// uniq): the key's name after part of its AAGUID, at most 63 bytes.
    var serialNumber: String {
        let tag = aaguid.prefix(4).map { String(format: "%02x", $0) }.joined()
        return String("latchkey-\(tag)-\(configuration.name)".prefix(63))
    }

    /// CTAPHID_INIT's capability flags: a U2F-only key offers no CBOR.
    var hidCapabilities: UInt8 {
        configuration.protocolMode == .u2fOnly
            ? CTAPHIDConstants.capabilityWink
            : CTAPHIDConstants.capabilityWink | CTAPHIDConstants.capabilityCBOR
    }

    /// A transport's session hooks: the override queue, events for the
    /// overrides that act, and `drop` to yank the key from that transport.
    func sessionHooks(drop: @escaping @Sendable () -> Void) -> SessionHooks {
        let events = self.events
        let name = configuration.name
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
