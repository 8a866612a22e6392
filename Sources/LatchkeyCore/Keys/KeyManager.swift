// The daemon's keys: those of the configuration file and those created
// through the control API (remembered in their directory as key.json, so
// they survive a restart), each with its transports and its owner.
//
// Every entry point that touches a key takes the `Caller` and asks
// Keys/Access.swift for its tier before anything else (`managed(_:_:by:)`);
// a refusal is one `access.refused` event on the key's stream and one
// journal line, and the caller gets 403 with the rule. Listings show only
// what the caller holds a tier on.

import CTAP
import Foundation
import LatchkeyNames
import Logging
import Synchronization

/// Attaches a key to the daemon's transports.
protocol TransportHub: Sendable {
    /// Starts the key's uhid device and/or USB/IP export, as configured.
    func attach(_ key: VirtualKey) async -> any KeyAttachment
}

/// A key's live transports.
protocol KeyAttachment: Sendable {
    /// Where the transports stand, for the control API.
    func uhidStatus() async -> KeyDocument.UHIDStatus
    func usbipStatus() async -> KeyDocument.USBIPStatus?
    /// Waits until hosts can see the key (hidraw node found, export listed).
    func waitUntilVisible(timeout: Duration) async -> Bool
    /// Removes the key from every transport.
    func detach() async
    /// Simulates unplugging and plugging the key in again.
    func replug() async
}

/// Every key of the daemon.
actor KeyManager {
    struct Managed {
        var key: VirtualKey
        var attachment: any KeyAttachment
        var fromConfiguration: Bool

        /// The uid the key belongs to (its configuration's, or the daemon's).
        var owner: UInt32 { key.owner }
    }

    private let configuration: DaemonConfiguration
    private let masterKey: [UInt8]
    private let board: PresenceBoard
    private let transports: any TransportHub
    let logger: Logger
    /// Where the keys' events go (GET /v1/events).
    nonisolated let events: EventBus
    /// Each key's owner, for the filters that run outside this actor (event
    /// subscriptions, the pending requests).
    nonisolated let owners = KeyOwners()
    private var keys: [KeyName: Managed] = [:]
    private var order: [KeyName] = []
    /// Every path built from a key's name comes from here.
    let state: StateDirectory

    init(
        configuration: DaemonConfiguration,
        masterKey: [UInt8],
        board: PresenceBoard,
        transports: any TransportHub,
        events: EventBus = EventBus(),
        logger: Logger
    ) {
        self.events = events
        self.configuration = configuration
        self.state = StateDirectory(root: configuration.stateDirectory)
        self.masterKey = masterKey
        self.board = board
        self.transports = transports
        self.logger = logger
    }

    /// Opens the configured keys and the ones created earlier through the API.
    /// A directory in `keys/` whose name is not a key name, or whose
    /// key.json names another key, is left alone and logged.
    func startAll() async throws {
        for key in configuration.keys {
            try await open(key, fromConfiguration: true)
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: state.keys)) ?? []
        for entry in entries.sorted() {
            guard let name = try? KeyName(entry) else {
                logger.warning("ignoring a directory that is not a key name", metadata: ["entry": "\(entry.debugDescription)"])
                continue
            }
            guard keys[name] == nil, let data = state.readMarker(of: name),
                let request = try? JSONDecoder().decode(CreateKeyRequest.self, from: data)
            else { continue }
            guard request.name == name.rawValue else {
                logger.warning("ignoring a key whose key.json names another key", metadata: ["key": "\(name)"])
                continue
            }
            do {
                try await open(
                    Self.keyConfiguration(request, name: name, defaultPresence: configuration.presence),
                    fromConfiguration: false
                )
            } catch {
                logger.error("cannot open key created earlier", metadata: ["key": "\(name)", "error": "\(error)"])
            }
        }
    }

    /// Waits until every key is visible to hosts, up to `timeout` in all.
    func waitUntilVisible(timeout: Duration) async -> Bool {
        var all = true
        for name in order {
            if let managed = keys[name] { all = await managed.attachment.waitUntilVisible(timeout: timeout) && all }
        }
        return all
    }

    @discardableResult
    private func open(_ key: KeyConfiguration, fromConfiguration: Bool) async throws -> Managed {
        let virtualKey = try VirtualKey(
            configuration: key, directory: try state.makeKeyDirectory(key.name), masterKey: masterKey,
            defaults: configuration, board: board, events: events, logger: logger
        )
        // Known before the key can publish anything: its events go to its owner.
        let owner = virtualKey.owner
        owners[key.name.rawValue] = owner
        let attachment = await transports.attach(virtualKey)
        let managed = Managed(key: virtualKey, attachment: attachment, fromConfiguration: fromConfiguration)
        keys[key.name] = managed
        order.append(key.name)
        logger.info(
            "key ready",
            metadata: [
                "key": "\(key.name)", "presence": "\(virtualKey.presence.current.mode)", "owner": "\(owner)",
                "exportable": "\(key.exportable)",
            ]
        )
        return managed
    }

    static func keyConfiguration(_ request: CreateKeyRequest, name: KeyName, defaultPresence: PresenceMode)
        -> KeyConfiguration
    {
        var key = KeyConfiguration(name: name)
        // create() wrote the uid it resolved; a key.json without one is from
        // before owners, and stays the daemon's.
        key.owner = request.owner?.uid
        key.exportable = request.exportable ?? false
        key.presence = request.presence ?? (request.isUserConsenting == false ? .deny : nil)
        key.uhid = request.uhid ?? true
        key.usbip = request.usbip ?? true
        if let attestation = request.attestation { key.attestation = attestation }
        if let policy = request.policy { key.policy = policy }
        key.protocolMode = CreateKeyRequest.protocolMode(request.protocol) ?? .ctap21
        if let value = request.hasResidentKey { key.residentKeys = value }
        // WebDriver's hasUserVerification is the policy's user-verification,
        // unless the request's policy names it: silent in auto mode, a
        // person's approval otherwise (a person is never verified silently).
        if let value = request.hasUserVerification, key.policy.userVerification == nil {
            key.policy.userVerification = value ? ((key.presence ?? defaultPresence) == .auto ? .auto : .prompt) : .deny
        }
        if let value = request.isUserVerified { key.userVerified = value }
        if let value = request.hasLargeBlob { key.largeBlobs = value }
        if let value = request.hasCredBlob { key.credBlob = value }
        if let value = request.hasMinPinLength { key.minPinLength = value }
        if let value = request.hasThirdPartyPayment { key.thirdPartyPayment = value }
        if let value = request.hasPersistentToken { key.persistentPinUvAuthToken = value }
        if let value = request.hasPreviewSign { key.previewSign = value }
        if let value = request.hasEnterpriseAttestation { key.enterpriseAttestation = value }
        if let value = request.enterpriseAttestationRpIds { key.enterpriseAttestationRpIds = value }
        if let value = request.hasPrf { key.prf = value }
        if let names = request.algorithms, let algorithms = try? KeyConfiguration.algorithms(named: names) {
            key.algorithms = algorithms
        }
        if let value = request.maxDiscoverableCredentials,
            let limit = try? KeyConfiguration.discoverableCredentialLimit(value)
        {
            key.maxDiscoverableCredentials = limit
        }
        return key
    }

    // MARK: - Access

    /// The key `name`, once `caller` holds `access` on it: every entry point
    /// below starts here. A key that does not exist is a 404; a refusal is
    /// published on the key's stream, logged, and a 403 naming the rule.
    func managed(_ name: KeyName, _ access: KeyAccess, by caller: Caller) throws(ControlError) -> Managed {
        let managed = try lookUp(name)
        do {
            try AccessRules.check(access, caller: caller, key: name.rawValue, owner: managed.owner)
        } catch {
            throw refused(error)
        }
        return managed
    }

    /// Checks that `caller` holds `access` on the key `name` (the control API
    /// asks before it reads a request's body).
    func authorize(_ name: KeyName, _ access: KeyAccess, by caller: Caller) throws(ControlError) {
        _ = try managed(name, access, by: caller)
    }

    /// A refusal as the caller gets it, once it is an event on the key's
    /// stream (for its owner to see; `onStream` false for a key not made)
    /// and a journal line.
    func refused(_ refusal: AccessRefusal, onStream: Bool = true) -> ControlError {
        if onStream {
            events.publish(
                .accessRefused,
                key: refusal.key,
                [
                    "access": .string(refusal.access.rawValue), "rule": .string(refusal.rule),
                    "uid": .int(Int(refusal.caller.uid)), "door": "control",
                ]
            )
        }
        logger.notice(
            "access refused",
            metadata: [
                "key": "\(refusal.key)", "uid": "\(refusal.caller.uid)", "access": "\(refusal.access.rawValue)",
                "rule": "\(refusal.rule)", "door": "control", "owner": "\(refusal.owner)",
                "pid": "\(refusal.caller.pid.map(String.init) ?? "unknown")",
            ]
        )
        return ControlError(refusal)
    }

    // MARK: - Control API

    /// The keys `caller` may see.
    func documents(by caller: Caller) async -> [KeyDocument] {
        var result: [KeyDocument] = []
        for name in order {
            if let managed = keys[name], AccessRules.allows(.see, caller: caller, owner: managed.owner) {
                result.append(await document(managed))
            }
        }
        return result
    }

    func document(named name: KeyName, by caller: Caller) async throws(ControlError) -> KeyDocument {
        await document(try managed(name, .see, by: caller))
    }

    private func document(_ managed: Managed) async -> KeyDocument {
        KeyDocument(
            name: managed.key.configuration.name.rawValue,
            owner: KeyDocument.Owner(uid: managed.owner),
            exportable: managed.key.configuration.exportable,
            aaguid: managed.key.aaguid.map { String(format: "%02x", $0) }.joined(),
            presence: managed.key.presence.current.mode.rawValue,
            credentials: (try? managed.key.store.credentialCount()) ?? 0,
            uhid: await managed.attachment.uhidStatus(),
            usbip: await managed.attachment.usbipStatus(),
            options: KeyOptionsDocument(managed.key.configuration, presence: managed.key.presence)
        )
    }

    /// Makes a key for `caller`, or for the owner the request names (root only).
    func create(_ request: CreateKeyRequest, by caller: Caller) async throws(ControlError) -> KeyDocument {
        let name: KeyName
        do {
            name = try KeyName(request.name)
        } catch {
            throw .badRequest("name: \(error)")
        }
        var request = request
        let owner: UInt32
        if let named = request.owner {
            guard let uid = named.uid else { throw .badRequest("owner: no account named \"\(named)\"") }
            owner = uid
        } else {
            owner = caller.uid
        }
        do {
            try AccessRules.checkCreate(caller: caller, key: name.rawValue, owner: owner)
        } catch {
            // No key yet, so no stream to publish on: the answer and the journal line.
            throw refused(error, onStream: false)
        }
        request.owner = .uid(owner)
        guard keys[name] == nil else { throw .conflict("a key named \(name) exists") }
        if let attestation = request.attestation, !["batch", "self", "none"].contains(attestation) {
            throw .badRequest("attestation must be batch, self or none")
        }
        guard CreateKeyRequest.protocolMode(request.protocol) != nil else {
            throw .badRequest("protocol must be ctap2.1 or u2f-only")
        }
        if let names = request.algorithms {
            do throws(ConfigurationError) {
                _ = try KeyConfiguration.algorithms(named: names)
            } catch {
                throw .badRequest("algorithms: \(error.message)")
            }
        }
        if let value = request.maxDiscoverableCredentials {
            do throws(ConfigurationError) {
                _ = try KeyConfiguration.discoverableCredentialLimit(value)
            } catch {
                throw .badRequest("maxDiscoverableCredentials: \(error.message)")
            }
        }
        if let has = request.hasUserVerification, let named = request.policy?.userVerification, has != (named != .deny) {
            throw .badRequest("hasUserVerification \(has) contradicts the policy's userVerification \"\(named.rawValue)\"")
        }
        let key = Self.keyConfiguration(request, name: name, defaultPresence: configuration.presence)
        do throws(ConfigurationError) {
            try key.policy.applied(to: configuration.policy).validate(mode: key.presence ?? configuration.presence)
        } catch {
            throw .badRequest("policy: \(error.message)")
        }
        // A directory left by something else (not a key this daemon knows) is
        // not adopted: a new key starts empty.
        guard !state.exists(name) else {
            throw .conflict("the state directory already holds a directory for \(name); remove it or choose another name")
        }
        do {
            _ = try state.makeKeyDirectory(name)
            try state.writeMarker(try JSONEncoder().encode(request), of: name)
            let managed = try await open(key, fromConfiguration: false)
            events.publish(
                .keyCreated,
                key: name.rawValue,
                [
                    "protocol": .string(key.protocolMode.rawValue), "owner": .int(Int(owner)),
                    "exportable": .bool(key.exportable),
                ]
            )
            return await document(managed)
        } catch {
            try? state.removeKeyDirectory(name)
            throw .internalError("cannot create key \(name): \(error)")
        }
    }

    /// Removes a key created through the API, and erases its credentials.
    func delete(_ name: KeyName, by caller: Caller) async throws(ControlError) {
        let managed = try managed(name, .manage, by: caller)
        guard !managed.fromConfiguration else {
            throw .conflict("key \(name) comes from the configuration file; remove it there")
        }
        // Checked before anything changes: a directory that resolves outside
        // the keys directory leaves the key as it was.
        do {
            _ = try state.contained(state.directory(of: name))
        } catch {
            logger.error("key directory refused", metadata: ["key": "\(name)", "error": "\(error)"])
            throw .internalError("key \(name): its directory is not inside the state directory; nothing was deleted")
        }
        board.answerAll(key: name.rawValue, .denied)
        await managed.attachment.detach()
        keys[name] = nil
        order.removeAll { $0 == name }
        do {
            try state.removeKeyDirectory(name)
        } catch {
            throw .internalError("key \(name) is detached but its directory could not be removed: \(error)")
        }
        events.publish(.keyDeleted, key: name.rawValue)
        owners[name.rawValue] = nil
        logger.info("key deleted", metadata: ["key": "\(name)", "uid": "\(caller.uid)"])
    }

    func credentials(_ name: KeyName, by caller: Caller) async throws(ControlError) -> [CredentialDocument] {
        let managed = try managed(name, .use, by: caller)
        let stored: [StoredCredential]
        do {
            stored = try managed.key.credentials()
        } catch {
            throw .internalError("cannot read the credentials of \(name): \(error)")
        }
        var documents: [CredentialDocument] = []
        for credential in stored { documents.append(await Self.document(credential, of: managed.key)) }
        return documents
    }

    func deleteCredential(_ name: KeyName, id: String, by caller: Caller) async throws(ControlError) {
        let managed = try managed(name, .use, by: caller)
        guard let bytes = Base64URL.decode(id) else { throw .badRequest("credential id is not base64url") }
        // Through the engine: its key cache forgets the key and it emits
        // credential.deleted.
        let deleted = try await administering(name) { () throws(AdministrationError) in
            try await managed.key.authenticator.deleteStoredCredential(id: bytes)
        }
        guard deleted else { throw .notFound("key \(name) has no credential \(id)") }
        logger.info("credential deleted", metadata: ["key": "\(name)"])
    }

    // MARK: PIN, configuration, reset (the engine's administration)

    func pinStatus(_ name: KeyName, by caller: Caller) async throws(ControlError) -> PINDocument {
        let managed = try managed(name, .see, by: caller)
        return try await administering(name) { () throws(AdministrationError) in
            PINDocument(try await managed.key.authenticator.pinStatus())
        }
    }

    /// Sets the first PIN, or changes it when the request carries the
    /// current one. PINs are normalized to NFC, as a platform does (CTAP 2.1
    /// §6.5.1), so that a PIN matches whether an input method composed its
    /// accented characters or not; they are never logged.
    func updatePIN(_ name: KeyName, _ request: PINRequest, by caller: Caller) async throws(ControlError)
        -> PINDocument
    {
        let managed = try managed(name, .use, by: caller)
        let authenticator = managed.key.authenticator
        let newPin = request.newPin.precomposedStringWithCanonicalMapping
        if let current = request.currentPin {
            let current = current.precomposedStringWithCanonicalMapping
            do {
                try await authenticator.changePIN(from: current, to: newPin)
            } catch {
                logger.notice("PIN change refused", metadata: ["key": "\(name)", "reason": "\(error.code)"])
                throw ControlError(error, key: name.rawValue)
            }
            logger.info("PIN changed", metadata: ["key": "\(name)"])
        } else {
            try await administering(name) { () throws(AdministrationError) in try await authenticator.setPIN(newPin) }
            logger.info("PIN set", metadata: ["key": "\(name)"])
        }
        return try await pinStatus(name, by: caller)
    }

    func updateUser(_ name: KeyName, id: String, _ request: UserUpdateRequest, by caller: Caller)
        async throws(ControlError) -> CredentialDocument
    {
        let managed = try managed(name, .use, by: caller)
        guard let bytes = Base64URL.decode(id) else { throw .badRequest("credential id is not base64url") }
        let credential = try await administering(name) { () throws(AdministrationError) in
            try await managed.key.authenticator.updateUser(
                credentialId: bytes,
                name: request.name,
                displayName: request.displayName
            )
        }
        logger.info("credential user updated", metadata: ["key": "\(name)"])
        return CredentialDocument(credential)
    }

    func configuration(_ name: KeyName, by caller: Caller) async throws(ControlError) -> ConfigDocument {
        let managed = try managed(name, .see, by: caller)
        return try await administering(name) { () throws(AdministrationError) in
            ConfigDocument(try await managed.key.authenticator.pinStatus())
        }
    }

    /// Applies the minimum PIN length (with the forced change and the RP
    /// IDs) before alwaysUv: only the first can be refused, so a refusal
    /// changes nothing.
    func updateConfiguration(_ name: KeyName, _ request: ConfigDocument, by caller: Caller) async throws(ControlError)
        -> ConfigDocument
    {
        let authenticator = try managed(name, .manage, by: caller).key.authenticator
        if request.exportable != nil {
            throw .badRequest("exportable is chosen when a key is created (POST /v1/keys) and never changes")
        }
        if request.forcePINChange == false {
            throw .badRequest("forcePINChange can only be set to true; changing the PIN clears it")
        }
        if request.minPINLength != nil || request.forcePINChange == true || request.minPinLengthRPIDs != nil {
            try await administering(name) { () throws(AdministrationError) in
                try await authenticator.setMinPINLength(
                    request.minPINLength,
                    forceChange: request.forcePINChange == true,
                    rpIds: request.minPinLengthRPIDs
                )
            }
            let length = request.minPINLength.map(String.init) ?? "unchanged"
            logger.info(
                "minimum PIN length set",
                metadata: [
                    "key": "\(name)", "minPINLength": "\(length)",
                    "forcePINChange": "\(request.forcePINChange == true)",
                    "rpIds": "\(request.minPinLengthRPIDs.map { $0.joined(separator: ",") } ?? "unchanged")",
                ]
            )
        }
        if let alwaysUv = request.alwaysUv {
            try await administering(name) { () throws(AdministrationError) in
                try await authenticator.setAlwaysUv(alwaysUv)
            }
            logger.info("alwaysUv set", metadata: ["key": "\(name)", "alwaysUv": "\(alwaysUv)"])
        }
        return try await configuration(name, by: caller)
    }

    /// authenticatorReset without its window and touch: the socket's
    /// permissions already say who may. Requests waiting for presence are
    /// denied first, so that none completes into the erased store.
    func reset(_ name: KeyName, by caller: Caller) async throws(ControlError) -> KeyDocument {
        let managed = try managed(name, .manage, by: caller)
        board.answerAll(key: name.rawValue, .denied)
        try await administering(name) { () throws(AdministrationError) in
            try await managed.key.authenticator.administrativeReset()
        }
        logger.notice("key reset through the control API", metadata: ["key": "\(name)", "uid": "\(caller.uid)"])
        return await document(managed)
    }

    func largeBlobs(_ name: KeyName, by caller: Caller) async throws(ControlError) -> LargeBlobsDocument {
        let managed = try managed(name, .use, by: caller)
        return try await administering(name) { () throws(AdministrationError) in
            LargeBlobsDocument(try await managed.key.authenticator.largeBlobStatus())
        }
    }

    func administering<T>(
        _ name: KeyName,
        _ body: () async throws(AdministrationError) -> T
    ) async throws(ControlError) -> T {
        do {
            return try await body()
        } catch {
            throw ControlError(error, key: name.rawValue)
        }
    }

    // MARK: Presence and policy

    /// The key's presence mode and timeout.
    func presenceSettings(_ name: KeyName, by caller: Caller) throws(ControlError) -> PresenceDocument {
        PresenceDocument(try managed(name, .see, by: caller).key.presence.current)
    }

    /// Sets the key's presence mode and/or timeout (1 to 600 s).
    func updatePresence(_ name: KeyName, _ request: PresenceDocument, by caller: Caller) throws(ControlError)
        -> PresenceDocument
    {
        let broker = try managed(name, .use, by: caller).key.presence
        if let timeout = request.timeoutSeconds, !(1...600).contains(timeout) {
            throw .badRequest("timeoutSeconds must be between 1 and 600")
        }
        broker.update(mode: request.mode, timeoutSeconds: request.timeoutSeconds)
        return PresenceDocument(broker.current)
    }

    /// The key's presence broker, for its policy: its settings, signals and decisions.
    func policy(_ name: KeyName, by caller: Caller) throws(ControlError) -> PresenceBroker {
        try managed(name, .use, by: caller).key.presence
    }

    /// The pending presence requests whose prompts `caller` may answer.
    nonisolated func pending(by caller: Caller) -> [PendingPresence] {
        board.pending().filter { entry in
            owners[entry.key].map { AccessRules.allows(.answer, caller: caller, owner: $0) } ?? false
        }
    }

    /// Answers the pending request `id`, when `caller` may answer its key's prompts.
    func answerPending(_ id: String, _ outcome: PresenceOutcome, by caller: Caller) throws(ControlError) {
        guard let entry = board.pending().first(where: { $0.id == id }), let key = try? KeyName(entry.key) else {
            throw .notFound("no pending presence request \(id)")
        }
        _ = try managed(key, .answer, by: caller)
        guard board.answer(id, outcome) else { throw .notFound("no pending presence request \(id)") }
    }

    /// A subscription to the events of the keys `caller` may use (of the key
    /// `key` alone, when given: another owner's key is refused; a key that
    /// does not exist yet is not, as it may be created later).
    func subscribe(key: KeyName?, by caller: Caller) throws(ControlError) -> EventSubscription {
        if let key, keys[key] != nil { _ = try managed(key, .use, by: caller) }
        let owners = self.owners
        return events.subscribe(key: key?.rawValue) { event in
            // A daemon-wide event (no key) is everyone's; a key's goes to who may use it.
            guard let name = event.key else { return true }
            return owners[name].map { AccessRules.allows(.use, caller: caller, owner: $0) } ?? false
        }
    }

    // MARK: Transports and automation

    func replug(_ name: KeyName, by caller: Caller) async throws(ControlError) -> KeyDocument {
        let managed = try managed(name, .manage, by: caller)
        board.answerAll(key: name.rawValue, .cancelled)
        await managed.key.authenticator.powerCycle()
        await managed.attachment.replug()
        events.publish(.keyReplugged, key: name.rawValue, ["reason": "control API"])
        logger.info("key replugged", metadata: ["key": "\(name)", "uid": "\(caller.uid)"])
        return await document(managed)
    }

    /// What the key's built-in user verification answers.
    func userVerified(_ name: KeyName, by caller: Caller) throws(ControlError) -> UserVerifiedDocument {
        UserVerifiedDocument(isUserVerified: try managed(name, .see, by: caller).key.presence.isUserVerified)
    }

    /// Sets what the key's built-in user verification answers, and remembers
    /// it for a key created through the API.
    func setUserVerified(_ name: KeyName, _ value: Bool, by caller: Caller) throws(ControlError)
        -> UserVerifiedDocument
    {
        let managed = try managed(name, .use, by: caller)
        managed.key.presence.isUserVerified = value
        if !managed.fromConfiguration, let data = state.readMarker(of: name),
            var request = try? JSONDecoder().decode(CreateKeyRequest.self, from: data)
        {
            request.isUserVerified = value
            do {
                try state.writeMarker(try JSONEncoder().encode(request), of: name)
            } catch {
                logger.error("cannot remember isUserVerified", metadata: ["key": "\(name)", "error": "\(error)"])
            }
        }
        logger.info("isUserVerified set", metadata: ["key": "\(name)", "isUserVerified": "\(value)"])
        return UserVerifiedDocument(isUserVerified: value)
    }

    /// Detaches every key (shutdown).
    func detachAll() async {
        for name in order.reversed() {
            if let managed = keys[name] {
                board.answerAll(key: name.rawValue, .denied)
                await managed.attachment.detach()
            }
        }
    }

    /// The key `name`, unchecked: only `managed(_:_:by:)` calls it.
    private func lookUp(_ name: KeyName) throws(ControlError) -> Managed {
        guard let managed = keys[name] else { throw .notFound("no key named \(name)") }
        return managed
    }
}

/// Each key's owner, readable from any thread: the event filters run under
/// the event bus's lock, outside the key manager.
final class KeyOwners: Sendable {
    private let owners = Mutex<[String: UInt32]>([:])

    subscript(key: String) -> UInt32? {
        get { owners.withLock { $0[key] } }
        set { owners.withLock { $0[key] = newValue } }
    }
}
