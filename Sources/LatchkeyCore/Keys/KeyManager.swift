// The daemon's keys: those of the configuration file and those created
// through the control API (remembered in their directory as key.json, so
// they survive a restart), each with its transports and its owner.
//
// Every entry point that touches a key takes a `KeyGrant`: the key, looked up
// once, and the `Caller` that Keys/Access.swift let through for a tier
// (`grant(_:_:by:)`; an entry point that needs another tier asks again);
// a refusal is one `access.refused` event on the key's stream and one
// journal line, and the caller gets `forbidden` with the rule. Listings show only
// what the caller holds a tier on.

import CTAP
import Foundation
import LatchkeyContract
import LatchkeyJSON
import Logging
import Synchronization

/// Attaches a key to the daemon's transports.
package protocol TransportHub: Sendable {
    /// Starts the key's uhid device and/or USB/IP export, as configured.
    func attach(_ key: VirtualKey) async -> any KeyAttachment
}

/// A key's live transports.
package protocol KeyAttachment: Sendable {
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

/// A key and a caller the access rules let through for a tier: what the key
/// manager's entry points on a key take. Only the key manager makes one
/// (`KeyManager.grant(_:_:by:)`).
package struct KeyGrant: Sendable {
    let managed: KeyManager.Managed
    /// Who asked.
    package let caller: Caller
    /// The tier the access rules granted.
    package let access: KeyAccess
    /// The key's name.
    package var name: KeyName { managed.key.configuration.name }
}

/// Every key of the daemon.
package actor KeyManager {
    struct Managed: Sendable {
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
    /// Where scrypt runs for an export's or an import's envelope.
    let blocking: any BlockingWork
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

    package init(
        configuration: DaemonConfiguration,
        masterKey: [UInt8],
        board: PresenceBoard,
        transports: any TransportHub,
        events: EventBus = EventBus(),
        blocking: any BlockingWork = InPlaceWork(),
        logger: Logger
    ) {
        self.events = events
        self.blocking = blocking
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
    package func startAll() async throws {
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
    package func waitUntilVisible(timeout: Duration) async -> Bool {
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
        for (feature, value) in request.features.values { key.features[feature] = value }
        // WebDriver's hasUserVerification is the policy's user-verification,
        // unless the request's policy names it: silent in auto mode, a
        // person's approval otherwise (a person is never verified silently).
        if let value = request.hasUserVerification, key.policy.userVerification == nil {
            key.policy.userVerification = value ? ((key.presence ?? defaultPresence) == .auto ? .auto : .prompt) : .deny
        }
        if let value = request.isUserVerified { key.userVerified = value }
        if let value = request.enterpriseAttestationRpIds { key.enterpriseAttestationRpIds = value }
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

    /// The key `name`, once `caller` holds `access` on it: what every entry point on
    /// a key takes. The key is looked up and the access rules asked once, here; a key
    /// that does not exist is `notFound`; a refusal is published on the key's stream,
    /// logged, and `forbidden` naming the rule. The control API asks for the tier a
    /// route declares before it reads the request's body.
    package func grant(_ name: KeyName, _ access: KeyAccess, by caller: Caller) throws(CoreError) -> KeyGrant {
        let managed = try lookUp(name)
        try check(access, on: managed, by: caller)
        return KeyGrant(managed: managed, caller: caller, access: access)
    }

    /// The grant's key, for an entry point that needs `access`: a grant of that tier
    /// as it is, any other asked of the access rules again (a refusal is published
    /// and logged like any other).
    nonisolated func require(_ grant: KeyGrant, _ access: KeyAccess) throws(CoreError) -> Managed {
        if grant.access != access { try check(access, on: grant.managed, by: grant.caller) }
        return grant.managed
    }

    private nonisolated func check(_ access: KeyAccess, on managed: Managed, by caller: Caller) throws(CoreError) {
        do {
            try AccessRules.check(access, caller: caller, key: managed.key.configuration.name.rawValue, owner: managed.owner)
        } catch {
            throw refused(error)
        }
    }

    /// A refusal as the caller gets it, once it is an event on the key's
    /// stream (for its owner to see; `onStream` false for a key not made)
    /// and a journal line.
    nonisolated func refused(_ refusal: AccessRefusal, onStream: Bool = true) -> CoreError {
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
        return CoreError(refusal)
    }

    // MARK: - Control API

    /// The keys `caller` may see.
    package func documents(by caller: Caller) async -> [KeyDocument] {
        var result: [KeyDocument] = []
        for name in order {
            if let managed = keys[name], AccessRules.allows(.see, caller: caller, owner: managed.owner) {
                result.append(await document(managed))
            }
        }
        return result
    }

    package func document(_ grant: KeyGrant) async throws(CoreError) -> KeyDocument {
        await document(try require(grant, .see))
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
    package func create(_ request: CreateKeyRequest, by caller: Caller) async throws(CoreError) -> KeyDocument {
        let name: KeyName
        do {
            name = try KeyName(request.name)
        } catch {
            throw .invalid("name: \(error)")
        }
        var request = request
        let owner: UInt32
        if let named = request.owner {
            guard let uid = named.uid else { throw .invalid("owner: no account named \"\(named)\"") }
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
            throw .invalid("attestation must be batch, self or none")
        }
        guard CreateKeyRequest.protocolMode(request.protocol) != nil else {
            throw .invalid("protocol must be ctap2.1 or u2f-only")
        }
        if let names = request.algorithms {
            do throws(ConfigurationError) {
                _ = try KeyConfiguration.algorithms(named: names)
            } catch {
                throw .invalid("algorithms: \(error.message)")
            }
        }
        if let value = request.maxDiscoverableCredentials {
            do throws(ConfigurationError) {
                _ = try KeyConfiguration.discoverableCredentialLimit(value)
            } catch {
                throw .invalid("maxDiscoverableCredentials: \(error.message)")
            }
        }
        if let has = request.hasUserVerification, let named = request.policy?.userVerification, has != (named != .deny) {
            throw .invalid("hasUserVerification \(has) contradicts the policy's userVerification \"\(named.rawValue)\"")
        }
        let key = Self.keyConfiguration(request, name: name, defaultPresence: configuration.presence)
        do throws(ConfigurationError) {
            try key.policy.applied(to: configuration.policy).validate(mode: key.presence ?? configuration.presence)
        } catch {
            throw .invalid("policy: \(error.message)")
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
    package func delete(_ grant: KeyGrant) async throws(CoreError) {
        let managed = try current(require(grant, .manage))
        guard !managed.fromConfiguration else {
            throw .conflict("key \(grant.name) comes from the configuration file; remove it there")
        }
        // Checked before anything changes: a directory that resolves outside
        // the keys directory leaves the key as it was.
        do {
            _ = try state.contained(state.directory(of: grant.name))
        } catch {
            logger.error("key directory refused", metadata: ["key": "\(grant.name)", "error": "\(error)"])
            throw .internalError("key \(grant.name): its directory is not inside the state directory; nothing was deleted")
        }
        board.answerAll(key: grant.name.rawValue, .denied)
        await managed.attachment.detach()
        keys[grant.name] = nil
        order.removeAll { $0 == grant.name }
        do {
            try state.removeKeyDirectory(grant.name)
        } catch {
            throw .internalError("key \(grant.name) is detached but its directory could not be removed: \(error)")
        }
        events.publish(.keyDeleted, key: grant.name.rawValue)
        owners[grant.name.rawValue] = nil
        logger.info("key deleted", metadata: ["key": "\(grant.name)", "uid": "\(grant.caller.uid)"])
    }

    package func credentials(_ grant: KeyGrant) async throws(CoreError) -> [CredentialDocument] {
        let managed = try require(grant, .use)
        let stored: [StoredCredential]
        do {
            stored = try managed.key.credentials()
        } catch {
            throw .internalError("cannot read the credentials of \(grant.name): \(error)")
        }
        var documents: [CredentialDocument] = []
        for credential in stored { documents.append(await Self.document(credential, of: managed.key)) }
        return documents
    }

    package func deleteCredential(_ grant: KeyGrant, id: String) async throws(CoreError) {
        let managed = try require(grant, .use)
        guard let bytes = Base64URL.decode(id, standardAlphabet: true) else { throw .invalid("credential id is not base64url") }
        // Through the engine: its key cache forgets the key and it emits
        // credential.deleted.
        let deleted = try await administering(grant.name) { () throws(AdministrationError) in
            try await managed.key.authenticator.deleteStoredCredential(id: bytes)
        }
        guard deleted else { throw .notFound("key \(grant.name) has no credential \(id)") }
        logger.info("credential deleted", metadata: ["key": "\(grant.name)"])
    }

    // MARK: PIN, configuration, reset (the engine's administration)

    package func pinStatus(_ grant: KeyGrant) async throws(CoreError) -> PINDocument {
        let managed = try require(grant, .see)
        return try await administering(grant.name) { () throws(AdministrationError) in
            PINDocument(try await managed.key.authenticator.pinStatus())
        }
    }

    /// Sets the first PIN, or changes it when the request carries the
    /// current one. PINs are normalized to NFC, as a platform does (CTAP 2.1
    /// §6.5.1), so that a PIN matches whether an input method composed its
    /// accented characters or not; they are never logged.
    package func updatePIN(_ grant: KeyGrant, _ request: PINRequest) async throws(CoreError)
        -> PINDocument
    {
        let managed = try require(grant, .use)
        let authenticator = managed.key.authenticator
        let newPin = request.newPin.precomposedStringWithCanonicalMapping
        if let current = request.currentPin {
            let current = current.precomposedStringWithCanonicalMapping
            do {
                try await authenticator.changePIN(from: current, to: newPin)
            } catch {
                logger.notice("PIN change refused", metadata: ["key": "\(grant.name)", "reason": "\(error.code)"])
                throw CoreError(error, key: grant.name.rawValue)
            }
            logger.info("PIN changed", metadata: ["key": "\(grant.name)"])
        } else {
            try await administering(grant.name) { () throws(AdministrationError) in try await authenticator.setPIN(newPin) }
            logger.info("PIN set", metadata: ["key": "\(grant.name)"])
        }
        return try await pinStatus(grant)
    }

    package func updateUser(_ grant: KeyGrant, id: String, _ request: UserUpdateRequest)
        async throws(CoreError) -> CredentialDocument
    {
        let managed = try require(grant, .use)
        guard let bytes = Base64URL.decode(id, standardAlphabet: true) else { throw .invalid("credential id is not base64url") }
        let credential = try await administering(grant.name) { () throws(AdministrationError) in
            try await managed.key.authenticator.updateUser(
                credentialId: bytes,
                name: request.name,
                displayName: request.displayName
            )
        }
        logger.info("credential user updated", metadata: ["key": "\(grant.name)"])
        return CredentialDocument(credential)
    }

    package func configuration(_ grant: KeyGrant) async throws(CoreError) -> ConfigDocument {
        let managed = try require(grant, .see)
        return try await administering(grant.name) { () throws(AdministrationError) in
            ConfigDocument(try await managed.key.authenticator.pinStatus())
        }
    }

    /// Applies the minimum PIN length (with the forced change and the RP
    /// IDs) before alwaysUv: only the first can be refused, so a refusal
    /// changes nothing.
    package func updateConfiguration(_ grant: KeyGrant, _ request: ConfigDocument) async throws(CoreError)
        -> ConfigDocument
    {
        let authenticator = try require(grant, .manage).key.authenticator
        if request.exportable != nil {
            throw .invalid("exportable is chosen when a key is created (POST /v1/keys) and never changes")
        }
        if request.forcePINChange == false {
            throw .invalid("forcePINChange can only be set to true; changing the PIN clears it")
        }
        if request.minPINLength != nil || request.forcePINChange == true || request.minPinLengthRPIDs != nil {
            try await administering(grant.name) { () throws(AdministrationError) in
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
                    "key": "\(grant.name)", "minPINLength": "\(length)",
                    "forcePINChange": "\(request.forcePINChange == true)",
                    "rpIds": "\(request.minPinLengthRPIDs.map { $0.joined(separator: ",") } ?? "unchanged")",
                ]
            )
        }
        if let alwaysUv = request.alwaysUv {
            try await administering(grant.name) { () throws(AdministrationError) in
                try await authenticator.setAlwaysUv(alwaysUv)
            }
            logger.info("alwaysUv set", metadata: ["key": "\(grant.name)", "alwaysUv": "\(alwaysUv)"])
        }
        return try await configuration(grant)
    }

    /// authenticatorReset without its window and touch: the socket's
    /// permissions already say who may. Requests waiting for presence are
    /// denied first, so that none completes into the erased store.
    package func reset(_ grant: KeyGrant) async throws(CoreError) -> KeyDocument {
        let managed = try require(grant, .manage)
        board.answerAll(key: grant.name.rawValue, .denied)
        try await administering(grant.name) { () throws(AdministrationError) in
            try await managed.key.authenticator.administrativeReset()
        }
        logger.notice("key reset through the control API", metadata: ["key": "\(grant.name)", "uid": "\(grant.caller.uid)"])
        return await document(managed)
    }

    package func largeBlobs(_ grant: KeyGrant) async throws(CoreError) -> LargeBlobsDocument {
        let managed = try require(grant, .use)
        return try await administering(grant.name) { () throws(AdministrationError) in
            LargeBlobsDocument(try await managed.key.authenticator.largeBlobStatus())
        }
    }

    func administering<T>(
        _ name: KeyName,
        _ body: () async throws(AdministrationError) -> T
    ) async throws(CoreError) -> T {
        do {
            return try await body()
        } catch {
            throw CoreError(error, key: name.rawValue)
        }
    }

    // MARK: Presence and policy

    /// The key's presence mode and timeout.
    package func presenceSettings(_ grant: KeyGrant) throws(CoreError) -> PresenceDocument {
        PresenceDocument(try require(grant, .see).key.presence.current)
    }

    /// Sets the key's presence mode and/or timeout (1 to 600 s).
    package func updatePresence(_ grant: KeyGrant, _ request: PresenceDocument) throws(CoreError)
        -> PresenceDocument
    {
        let broker = try require(grant, .use).key.presence
        if let timeout = request.timeoutSeconds, !(1...600).contains(timeout) {
            throw .invalid("timeoutSeconds must be between 1 and 600")
        }
        broker.update(mode: request.mode, timeoutSeconds: request.timeoutSeconds)
        return PresenceDocument(broker.current)
    }

    /// The key's policy settings and its open password-used windows.
    package func policy(_ grant: KeyGrant) throws(CoreError) -> PolicyDocument {
        PolicyDocument(try require(grant, .use).key.presence)
    }

    /// Changes the key's policy; the result must hold for its presence mode.
    package func updatePolicy(_ grant: KeyGrant, _ overrides: PolicyOverrides) throws(CoreError) -> PolicyDocument {
        let broker = try require(grant, .use).key.presence
        do throws(ConfigurationError) {
            _ = try broker.update(policy: overrides)
        } catch {
            throw .invalid(error.message)
        }
        return PolicyDocument(broker)
    }

    /// Opens a password-used window for (rpId, userName): a makeCredential for them
    /// may then be approved without a prompt (conditional registration).
    package func passwordUsed(_ grant: KeyGrant, _ request: PasswordUsedRequest) throws(CoreError) -> PasswordUsedDocument {
        let broker = try require(grant, .use).key.presence
        guard RPPattern.isValid(request.rpId), !request.rpId.hasPrefix("*.") else {
            throw .invalid("rpId must be an RP ID such as example.com")
        }
        guard !request.userName.isEmpty, request.userName.utf8.count <= 256 else {
            throw .invalid("userName must be 1 to 256 bytes")
        }
        guard broker.policySettings.conditionalRegistration else {
            throw .conflict("conditional registration is off for key \(grant.name)")
        }
        let signal = broker.passwordUsed(rpId: request.rpId, userName: request.userName)
        let now = broker.now
        return PasswordUsedDocument(
            key: grant.name.rawValue,
            rpId: signal.rpId,
            userName: signal.userName,
            expiresInMs: Int(signal.expiresAt > now ? signal.expiresAt - now : 0)
        )
    }

    /// The key's last `limit` policy decisions (1 to the log's capacity; all it
    /// keeps when nil).
    package func decisions(_ grant: KeyGrant, limit: Int?) throws(CoreError) -> [PolicyDecisionRecord] {
        let broker = try require(grant, .use).key.presence
        let capacity = PolicyDecisionLog.defaultCapacity
        if let limit, !(1...capacity).contains(limit) {
            throw .invalid("limit must be between 1 and \(capacity)")
        }
        return broker.decisions.latest(limit ?? capacity)
    }

    /// The pending presence requests whose prompts `caller` may answer.
    package nonisolated func pending(by caller: Caller) -> [PendingPresence] {
        board.pending().filter { entry in
            owners[entry.key].map { AccessRules.allows(.answer, caller: caller, owner: $0) } ?? false
        }
    }

    /// Answers the pending request `id`, when `caller` may answer its key's prompts.
    package func answerPending(_ id: String, _ outcome: PresenceOutcome, by caller: Caller) throws(CoreError) {
        guard let entry = board.pending().first(where: { $0.id == id }), let key = try? KeyName(entry.key) else {
            throw .notFound("no pending presence request \(id)")
        }
        _ = try grant(key, .answer, by: caller)
        guard board.answer(id, outcome) else { throw .notFound("no pending presence request \(id)") }
    }

    /// A subscription to the events of the keys `caller` may use (of the key
    /// `key` alone, when given: another owner's key is refused; a key that
    /// does not exist yet is not, as it may be created later).
    package func subscribe(key: KeyName?, by caller: Caller) throws(CoreError) -> EventSubscription {
        if let key, keys[key] != nil { _ = try grant(key, .use, by: caller) }
        let owners = self.owners
        return events.subscribe(key: key?.rawValue) { event in
            // A daemon-wide event (no key) is everyone's; a key's goes to who may use it.
            guard let name = event.key else { return true }
            return owners[name].map { AccessRules.allows(.use, caller: caller, owner: $0) } ?? false
        }
    }

    // MARK: Transports and automation

    package func replug(_ grant: KeyGrant) async throws(CoreError) -> KeyDocument {
        let managed = try current(require(grant, .manage))
        board.answerAll(key: grant.name.rawValue, .cancelled)
        await managed.key.authenticator.powerCycle()
        await managed.attachment.replug()
        events.publish(.keyReplugged, key: grant.name.rawValue, ["reason": "control API"])
        logger.info("key replugged", metadata: ["key": "\(grant.name)", "uid": "\(grant.caller.uid)"])
        return await document(managed)
    }

    /// What the key's built-in user verification answers.
    package func userVerified(_ grant: KeyGrant) throws(CoreError) -> UserVerifiedDocument {
        UserVerifiedDocument(isUserVerified: try require(grant, .see).key.presence.isUserVerified)
    }

    /// Sets what the key's built-in user verification answers, and remembers
    /// it for a key created through the API.
    package func setUserVerified(_ grant: KeyGrant, _ value: Bool) throws(CoreError)
        -> UserVerifiedDocument
    {
        let managed = try require(grant, .use)
        managed.key.presence.isUserVerified = value
        if !managed.fromConfiguration, let data = state.readMarker(of: grant.name),
            var request = try? JSONDecoder().decode(CreateKeyRequest.self, from: data)
        {
            request.isUserVerified = value
            do {
                try state.writeMarker(try JSONEncoder().encode(request), of: grant.name)
            } catch {
                logger.error("cannot remember isUserVerified", metadata: ["key": "\(grant.name)", "error": "\(error)"])
            }
        }
        logger.info("isUserVerified set", metadata: ["key": "\(grant.name)", "isUserVerified": "\(value)"])
        return UserVerifiedDocument(isUserVerified: value)
    }

    /// Detaches every key (shutdown).
    package func detachAll() async {
        for name in order.reversed() {
            if let managed = keys[name] {
                board.answerAll(key: name.rawValue, .denied)
                await managed.attachment.detach()
            }
        }
    }

    /// `managed` if it is still the key of its name: a grant made before the key
    /// was deleted (or deleted and made again) does not delete or replug.
    private func current(_ managed: Managed) throws(CoreError) -> Managed {
        let name = managed.key.configuration.name
        guard keys[name]?.key === managed.key else { throw .notFound("no key named \(name)") }
        return managed
    }

    /// The key `name`, unchecked: only `grant(_:_:by:)` calls it.
    private func lookUp(_ name: KeyName) throws(CoreError) -> Managed {
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
