// The authenticator engine: CTAP2 requests (CTAPHID_CBOR payloads) and U2F
// APDUs (CTAPHID_MSG payloads) in, responses out. No I/O: the store, the
// clock, randomness and user presence are injected.

import CBOR
import LatchkeyCrypto
public import LatchkeyErrors

/// Settings of one virtual key.
public struct AuthenticatorConfiguration: Sendable {
    /// The AAGUID (16 bytes) in authenticatorData and the attestation certificate.
    public var aaguid: [UInt8]
    /// Which attestation statement makeCredential returns.
    public var attestation: AttestationMode
    /// The batch attestation key and chain: needed for `.batch` and for U2F.
    public var attestationIdentity: AttestationIdentity?
    /// Algorithms offered, in preference order when a client lists several.
    public var algorithms: [COSEAlgorithm]
    /// How many discoverable credentials the key holds before
    /// CTAP2_ERR_KEY_STORE_FULL.
    public var maxDiscoverableCredentials: Int
    /// maxCredentialCountInList advertised in getInfo.
    public var maxCredentialCountInList: Int
    /// How long after power-up authenticatorReset is allowed (CTAP 2.1 §6.6
    /// lets keys limit it; hardware keys use 10 s).
    public var resetWindowMilliseconds: UInt64
    /// How long getNextAssertion stays possible after the previous assertion
    /// (CTAP 2.1 §6.3: 30 s).
    public var getNextAssertionWindowMilliseconds: UInt64
    /// firmwareVersion advertised in getInfo.
    public var firmwareVersion: UInt64
    /// Whether CTAP1/U2F answers (needs `attestationIdentity`).
    public var u2fEnabled: Bool
    /// The minimum PIN length in Unicode code points (CTAP 2.1 §6.4
    /// minPINLength; the spec's default and floor is 4).
    public var minPINLength: Int
    /// How many RP IDs setMinPINLength keeps for the minPinLength extension
    /// (getInfo maxRPIDsForSetMinPINLength).
    public var maxRPIDsForSetMinPINLength: Int
    /// The largest serialized large-blob array the key keeps, in bytes
    /// (advertised as maxSerializedLargeBlobArray; CTAP 2.1 §6.10.2 asks for
    /// at least 1024). The whole array is one sealed secret in the store.
    public var maxSerializedLargeBlobArray: Int
    /// Whether CTAP2 answers at all; false makes a U2F-only key (every CBOR
    /// command is CTAP1_ERR_INVALID_COMMAND; the transport drops the CBOR
    /// capability from CTAPHID_INIT).
    public var ctap2Enabled: Bool
    /// Whether discoverable credentials are offered (getInfo `rk`).
    public var residentKeys: Bool
    /// Whether authenticatorLargeBlobs answers (getInfo `largeBlobs`).
    public var largeBlobs: Bool
    /// The extensions this key offers, a subset of
    /// `ExtensionIdentifier.supported`; inputs of others are ignored.
    public var enabledExtensions: Set<String>
    /// Built-in user verification (getInfo `uv`): the key's presence
    /// decider verifies the user (`PresenceOutcome.verified`) — a CI rig's
    /// policy, never a silent grant for a person.
    public var builtInUserVerification: Bool
    /// The persistent pinUvAuthToken (CTAP 2.2): the pcmr permission,
    /// getInfo's perCredMgmtRO, encIdentifier and encCredStoreState.
    public var persistentPinUvAuthToken: Bool
    /// The enterprise attestation key and chain (CTAP 2.1 §7.1), apart from
    /// the batch one; nil: the key is not enterprise attestation capable.
    public var enterpriseAttestationIdentity: AttestationIdentity?
    /// The RP IDs vendor-facilitated enterprise attestation (1) serves.
    public var enterpriseAttestationRpIds: Set<String>

    public init(
        aaguid: [UInt8],
        attestation: AttestationMode = .batch,
        attestationIdentity: AttestationIdentity? = nil,
        algorithms: [COSEAlgorithm] = COSEAlgorithm.defaultOrder,
        maxDiscoverableCredentials: Int = 1000,
        maxCredentialCountInList: Int = 16,
        resetWindowMilliseconds: UInt64 = 10_000,
        getNextAssertionWindowMilliseconds: UInt64 = 30_000,
        firmwareVersion: UInt64 = 1,
        u2fEnabled: Bool = true,
        minPINLength: Int = 4,
        maxRPIDsForSetMinPINLength: Int = 8,
        maxSerializedLargeBlobArray: Int = 4096,
        ctap2Enabled: Bool = true,
        residentKeys: Bool = true,
        largeBlobs: Bool = true,
        enabledExtensions: Set<String> = Set(ExtensionIdentifier.offeredByDefault),
        builtInUserVerification: Bool = false,
        persistentPinUvAuthToken: Bool = true,
        enterpriseAttestationIdentity: AttestationIdentity? = nil,
        enterpriseAttestationRpIds: Set<String> = []
    ) {
        precondition(aaguid.count == 16, "an AAGUID is 16 bytes")
        precondition((4...63).contains(minPINLength), "a minimum PIN length is 4 to 63 code points")
        // The upper bound keeps every offset within the uint32 the pinUvAuthParam covers.
        precondition(
            (1024...Int(UInt32.max)).contains(maxSerializedLargeBlobArray),
            "a large-blob array limit is 1024 bytes to 4 GiB"
        )
        self.aaguid = aaguid
        self.attestation = attestation
        self.attestationIdentity = attestationIdentity
        self.algorithms = algorithms
        self.maxDiscoverableCredentials = maxDiscoverableCredentials
        self.maxCredentialCountInList = maxCredentialCountInList
        self.resetWindowMilliseconds = resetWindowMilliseconds
        self.getNextAssertionWindowMilliseconds = getNextAssertionWindowMilliseconds
        self.firmwareVersion = firmwareVersion
        self.u2fEnabled = u2fEnabled
        self.minPINLength = minPINLength
        self.maxRPIDsForSetMinPINLength = maxRPIDsForSetMinPINLength
        self.maxSerializedLargeBlobArray = maxSerializedLargeBlobArray
        self.ctap2Enabled = ctap2Enabled
        self.residentKeys = residentKeys
        self.largeBlobs = largeBlobs
        self.enabledExtensions = enabledExtensions.intersection(ExtensionIdentifier.supported)
        self.builtInUserVerification = builtInUserVerification
        self.persistentPinUvAuthToken = persistentPinUvAuthToken
        self.enterpriseAttestationIdentity = enterpriseAttestationIdentity
        self.enterpriseAttestationRpIds = enterpriseAttestationRpIds
    }

    /// Whether the extension `identifier` is offered.
    func offers(_ identifier: String) -> Bool { enabledExtensions.contains(identifier) }

    /// Whether U2F is really available: enabled and with a certificate to sign with.
    var u2fAvailable: Bool { u2fEnabled && attestationIdentity != nil }
}

/// One virtual FIDO2 key.
public actor Authenticator {
    /// The longest credential ID latchkey accepts in a list (advertised as
    /// maxCredentialIdLength); longer IDs cannot be ours.
    public static let maxCredentialIdLength = 128
    /// The CTAPHID message limit, advertised as maxMsgSize.
    public static let maxMessageSize = 7609
    static let wrappingSecretName = "credential-wrapping-secret"
    /// How many conversations keep state at once (the most recently used):
    /// more than the channels of every client a person runs, few enough that
    /// a host opening channels by the thousand cannot grow the key's memory.
    static let maxConversations = 16

    let configuration: AuthenticatorConfiguration
    let store: any CredentialStore
    let presence: any UserPresence
    let clock: any MonotonicClock
    let entropy: any EntropySource
    let diagnostics: (@Sendable (String) -> Void)?
    let events: (@Sendable (AuthenticatorEvent) -> Void)?

    var wrapper: CredentialWrapper
    var poweredUpAt: UInt64
    /// getNextAssertion's sequences, credentialManagement enumerations and
    /// large-blob writes in progress, each bound to the conversation that
    /// began it (Conversations.swift).
    var conversations = ConversationTable(capacity: Authenticator.maxConversations)
    /// Recently used credential keys, so that repeated assertions skip the
    /// unwrap and the key import (each about half a signature's cost).
    var keyCache = CredentialKeyCache(capacity: 64)
    /// Key agreement keys, pinUvAuthTokens and mismatch count: new at every
    /// power-up (CTAP 2.1 §6.5.2).
    var pinUvAuth: PinUvAuthSession
    /// alwaysUv as last read or written (see `alwaysUv()`); nil: read it.
    var alwaysUvCache: Bool?

    /// A key over `store`. Creates the wrapping secret on first use.
    /// `diagnostics` receives internal failure detail for the log (never key
    /// material); the host only ever sees a status. `events` hears of every
    /// credential created, used, deleted or updated, once it is durable.
    public init(
        configuration: AuthenticatorConfiguration,
        store: any CredentialStore,
        presence: any UserPresence,
        clock: any MonotonicClock,
        entropy: any EntropySource = SystemEntropy(),
        diagnostics: (@Sendable (String) -> Void)? = nil,
        events: (@Sendable (AuthenticatorEvent) -> Void)? = nil
    ) throws(StoreError) {
        self.configuration = configuration
        self.store = store
        self.presence = presence
        self.clock = clock
        self.entropy = entropy
        self.diagnostics = diagnostics
        self.events = events
        self.wrapper = try Self.loadWrapper(store: store, entropy: entropy)
        self.poweredUpAt = clock.milliseconds
        self.pinUvAuth = PinUvAuthSession(entropy: entropy)
    }

    /// The wrapper over the store's wrapping secret, made (and stored) when
    /// the store has none: on first use, and after a reset erased it.
    static func loadWrapper(store: any CredentialStore, entropy: any EntropySource) throws(StoreError)
        -> CredentialWrapper
    {
        if let secret = try store.secret(named: wrappingSecretName), secret.count == 32 {
            return CredentialWrapper(secret: secret)
        }
        let secret = entropy.bytes(count: 32)
        try store.setSecret(secret, named: wrappingSecretName)
        return CredentialWrapper(secret: secret)
    }

    /// The key was plugged in again (or the daemon restarted it): opens the
    /// reset window and drops per-session state: new key agreement keys and
    /// pinUvAuthTokens, no conversation in progress (sequences, enumerations,
    /// large-blob writes), and PIN attempts are allowed again after three
    /// consecutive mismatches (CTAP 2.1 §6.5.2, §6.5.5.7). pinRetries persist.
    public func powerCycle() {
        poweredUpAt = clock.milliseconds
        conversations.removeAll()
        pinUvAuth = PinUvAuthSession(entropy: entropy)
    }

    /// CTAPHID_INIT gave the channel of `origin` to a client anew (allocated
    /// or re-synchronized it): the conversation it had is over.
    public func endConversation(_ origin: RequestOrigin) {
        conversations[origin] = Conversation()
    }

    /// A transport connection went away (uhid closed, USB/IP disconnected):
    /// every conversation on it is over.
    public func endConversations(connection: UInt64) {
        conversations.removeAll(connection: connection)
    }

    /// Handles one CTAPHID_CBOR request from `origin`: command byte then CBOR
    /// parameters. Returns the status byte followed by the CBOR response, if
    /// any. A "next" request continues only what the same origin began.
    public func handleCBOR(_ request: [UInt8], from origin: RequestOrigin = .solitary) async -> [UInt8] {
        guard let first = request.first else { return [CTAPStatus.invalidLength.rawValue] }
        let command = CTAPCommand(rawValue: first)
        // Any command but getNextAssertion ends the conversation's getAssertion
        // sequence (CTAP 2.1 §6.3: the state is kept only between consecutive
        // calls). Another conversation's commands leave it alone: they are
        // not between this conversation's calls.
        if command != .getNextAssertion { conversations[origin].assertions = nil }
        // Likewise an enumeration of credential management (§6.8.3, §6.8.4).
        if command != .credentialManagement && command != .credentialManagementPreview {
            conversations[origin].enumeration = nil
        }
        var response: [UInt8] = [CTAPStatus.ok.rawValue]
        do throws(CTAPStatus) {
            guard configuration.ctap2Enabled else { throw .invalidCommand }
            let parameters = Array(request.dropFirst())
            switch command {
            case .makeCredential:
                let offered = configuration.enabledExtensions
                append(try await makeCredential(decode(parameters, offering: offered)), to: &response)
            case .getAssertion:
                let offered = configuration.enabledExtensions
                append(try await getAssertion(decode(parameters, offering: offered), from: origin), to: &response)
            case .getNextAssertion:
                append(try getNextAssertion(from: origin), to: &response)
            case .getInfo:
                append(try getInfo(), to: &response)
            case .clientPIN:
                append(try await clientPIN(decode(parameters)), to: &response)
            case .credentialManagement, .credentialManagementPreview:
                // The prototype command (0x41) of pre-2.1 clients is answered
                // the same way: its subcommands are a subset with the same numbers.
                append(try credentialManagement(decode(parameters), from: origin), to: &response)
            case .largeBlobs:
                guard configuration.largeBlobs else { throw CTAPStatus.invalidCommand }
                // A write answers with the status alone.
                if let read = try largeBlobs(decode(parameters), from: origin) { append(read, to: &response) }
            case .config:
                try authenticatorConfig(decode(parameters))
            case .reset:
                try await reset()
            case .selection:
                try await selection()
            default:
                throw CTAPStatus.invalidCommand
            }
            return response
        } catch {
            return [error.rawValue]
        }
    }

    /// Reads a command's parameters as its request: strict CBOR first, then
    /// the typed read; either failure answers with its status
    /// (StatusMapping.swift), and an empty body is a missing parameter. A
    /// request that carries extension inputs takes the overload below.
    private func decode<Request: CBORDecodable>(_ parameters: [UInt8]) throws(CTAPStatus) -> Request {
        try decode(parameters) { cbor throws(CBORError) in try Request(cbor: cbor) }
    }

    /// Reads a request that carries extension inputs (makeCredential,
    /// getAssertion) with the inputs of `extensions`, the key's offered set,
    /// only: `ExtensionInputsDecodable` says why that is part of reading.
    private func decode<Request: ExtensionInputsDecodable>(
        _ parameters: [UInt8],
        offering extensions: Set<String>
    ) throws(CTAPStatus) -> Request {
        try decode(parameters) { cbor throws(CBORError) in try Request(cbor: cbor, offering: extensions) }
    }

    /// What both overloads do around their typed read.
    private func decode<Request>(
        _ parameters: [UInt8],
        _ read: (CBORValue) throws(CBORError) -> Request
    ) throws(CTAPStatus) -> Request {
        guard !parameters.isEmpty else { throw .missingParameter }
        return try reading { () throws(CBORError) in try read(CBORDecoder().decode(parameters)) }
    }

    /// Appends a command's response map after the status byte. A response
    /// without members is the status alone (setPIN, changePIN,
    /// deleteCredential and updateUserInformation answer so), never an
    /// empty map.
    private func append(_ body: some CBOREncodable, to response: inout [UInt8]) {
        let map = body.cbor
        guard map != .map([]) else { return }
        map.encode(into: &response)
    }

    // MARK: - Shared steps

    /// Asks for user presence and maps a refusal to its status.
    func collectPresence(_ request: PresenceRequest) async throws(CTAPStatus) {
        switch await presence.requestPresence(request) {
        case .approved, .verified: return
        case .denied: throw .operationDenied
        case .timedOut: throw .userActionTimeout
        case .cancelled: throw .keepaliveCancel
        }
    }

    /// Asks for presence and built-in user verification in one touch (the
    /// request says `userVerification`): presence without verification is
    /// CTAP2_ERR_UV_INVALID (CTAP 2.1 §6.1.2 step 11.2, §6.5.5.8: the
    /// built-in UV failed); refusals map as in `collectPresence`.
    func collectVerifiedPresence(_ request: PresenceRequest) async throws(CTAPStatus) {
        var request = request
        request.userVerification = true
        switch await presence.requestPresence(request) {
        case .verified: return
        case .approved: throw .uvInvalid
        case .denied: throw .operationDenied
        case .timedOut: throw .userActionTimeout
        case .cancelled: throw .keepaliveCancel
        }
    }

    /// A store call whose failure is logged once and answered with its status.
    func storing<T>(_ what: String, _ body: () throws(StoreError) -> T) throws(CTAPStatus) -> T {
        try diagnosing(what, body, CTAPStatus.init)
    }

    /// A crypto call whose failure is logged once and answered with CTAP1_ERR_OTHER.
    func signing<T>(_ what: String, _ body: () throws(CryptoError) -> T) throws(CTAPStatus) -> T {
        try diagnosing(what, body, CTAPStatus.init)
    }

    /// Runs `body`; its failure goes to the diagnostics once, with `what`, and is answered
    /// with `status(error)`.
    private func diagnosing<T, Code>(
        _ what: String,
        _ body: () throws(CodedError<Code>) -> T,
        _ status: (CodedError<Code>) -> CTAPStatus
    ) throws(CTAPStatus) -> T {
        do {
            return try body()
        } catch {
            diagnostics?("\(what): \(error)")
            throw status(error)
        }
    }

    /// The wrapped or stored credential with `id` for `rpIdHash`, if any.
    /// Unwrapping comes first: it is one AES-GCM open, where the store is a
    /// database read, and it fails at once for IDs of any other shape.
    func findCredential(id: [UInt8], rpIdHash: [UInt8]) throws(CTAPStatus) -> FoundCredential? {
        guard id.count <= Self.maxCredentialIdLength else { return nil }
        let cacheKey = rpIdHash + id
        let cached = keyCache[cacheKey]
        if let cached, cached.fromWrappedId {
            return FoundCredential(id: id, privateKey: cached.credential.privateKey, wrapped: cached.credential)
        }
        if cached == nil, CredentialWrapper.credentialIdLengths.contains(id.count),
            let wrapped = wrapper.unwrap(id, rpIdHash: rpIdHash)
        {
            keyCache[cacheKey] = CachedCredentialKey(credential: wrapped, fromWrappedId: true)
            return FoundCredential(id: id, privateKey: wrapped.privateKey, wrapped: wrapped)
        }
        // A stored credential is read every time: the control API may have
        // deleted or renamed it since.
        guard
            let stored = try storing("looking up a credential", { () throws(StoreError) in
                try store.credential(id: id)
            }), stored.rpIdHash == rpIdHash
        else { return nil }
        if let key = cached?.credential.privateKey, key.storedRepresentation == stored.privateKey {
            return FoundCredential(id: id, privateKey: key, stored: stored)
        }
        guard let algorithm = COSEAlgorithm(rawValue: stored.algorithm),
            let key = try? CredentialPrivateKey(algorithm: algorithm, storedRepresentation: stored.privateKey)
        else {
            diagnostics?("stored credential has an unusable key")
            throw .other
        }
        keyCache[cacheKey] = CachedCredentialKey(
            credential: WrappedCredential(privateKey: key, credProtect: stored.credProtect), fromWrappedId: false
        )
        return FoundCredential(id: id, privateKey: key, stored: stored)
    }
}

/// A small first-in-first-out cache of credential keys by rpIdHash and ID.
struct CredentialKeyCache {
    private var entries: [[UInt8]: CachedCredentialKey] = [:]
    private var order: [[UInt8]] = []
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    subscript(key: [UInt8]) -> CachedCredentialKey? {
        get { entries[key] }
        set {
            guard let newValue else {
                entries[key] = nil
                order.removeAll { $0 == key }
                return
            }
            if entries.updateValue(newValue, forKey: key) == nil {
                order.append(key)
                if order.count > capacity { entries[order.removeFirst()] = nil }
            }
        }
    }

    mutating func removeAll() {
        entries.removeAll()
        order.removeAll()
    }
}

/// A key in the cache: for a wrapped ID, everything the ID carried; for a
/// stored credential, the imported key alone (the record is read each time).
struct CachedCredentialKey {
    var credential: WrappedCredential
    var fromWrappedId: Bool
}

/// A credential located for an operation.
struct FoundCredential: Sendable {
    var id: [UInt8]
    var privateKey: CredentialPrivateKey
    /// The stored record, for discoverable credentials.
    var stored: StoredCredential?
    /// What the ID carried, for non-discoverable credentials.
    var wrapped: WrappedCredential?

    /// The credProtect level; a stored value this version does not know is
    /// treated as the strictest.
    var credProtect: CredentialProtection {
        CredentialProtection(rawValue: stored?.credProtect ?? wrapped?.credProtect ?? 1) ?? .required
    }

    /// The credBlob it was made with.
    var credBlob: [UInt8]? { stored?.credBlob ?? wrapped?.credBlob }

    /// Whether it was made as a payment credential (thirdPartyPayment).
    var thirdPartyPayment: Bool { stored?.thirdPartyPayment ?? wrapped?.thirdPartyPayment ?? false }

    /// An event about this credential; `rpId` for a wrapped one, which
    /// carries only the RP's hash.
    func event(
        _ kind: AuthenticatorEvent.Kind,
        rpId: String? = nil,
        signCount: UInt32? = nil,
        userVerified: Bool = false
    ) -> AuthenticatorEvent {
        if let stored { return AuthenticatorEvent(kind, stored, signCount: signCount, userVerified: userVerified) }
        return AuthenticatorEvent(
            kind: kind, credentialId: id, rpId: rpId, discoverable: false, signCount: signCount,
            userVerified: userVerified
        )
    }
}

/// What getNextAssertion needs from the getAssertion that started a sequence.
struct PendingAssertions: Sendable {
    var remaining: [StoredCredential]
    var clientDataHash: [UInt8]
    var rpIdHash: [UInt8]
    var flags: AuthenticatorDataFlags
    var extensions: AssertionExtensionRequest
    var lastAt: UInt64
}
