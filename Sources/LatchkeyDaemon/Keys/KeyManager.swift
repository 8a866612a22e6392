// The daemon's keys: those of the configuration file and those created
// through the control API (remembered in their directory as key.json, so
// they survive a restart), each with its transports.

import CTAP
import Foundation
import LatchkeyNames
import Logging

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
    }

    private let configuration: DaemonConfiguration
    private let masterKey: [UInt8]
    private let board: PresenceBoard
    private let transports: any TransportHub
    private let logger: Logger
    /// Where the keys' events go (GET /v1/events).
    nonisolated let events: EventBus
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
        let attachment = await transports.attach(virtualKey)
        let managed = Managed(key: virtualKey, attachment: attachment, fromConfiguration: fromConfiguration)
        keys[key.name] = managed
        order.append(key.name)
        logger.info("key ready", metadata: ["key": "\(key.name)", "presence": "\(virtualKey.presence.current.mode)"])
        return managed
    }

    static func keyConfiguration(_ request: CreateKeyRequest, name: KeyName, defaultPresence: PresenceMode)
        -> KeyConfiguration
    {
        var key = KeyConfiguration(name: name)
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

    // MARK: - Control API

    func documents() async -> [KeyDocument] {
        var result: [KeyDocument] = []
        for name in order {
            if let managed = keys[name] { result.append(await document(managed)) }
        }
        return result
    }

    func document(named name: KeyName) async throws(ControlError) -> KeyDocument {
        await document(try managed(name))
    }

    private func document(_ managed: Managed) async -> KeyDocument {
        KeyDocument(
            name: managed.key.configuration.name.rawValue,
            aaguid: managed.key.aaguid.map { String(format: "%02x", $0) }.joined(),
            presence: managed.key.presence.current.mode.rawValue,
            credentials: (try? managed.key.store.credentialCount()) ?? 0,
            uhid: await managed.attachment.uhidStatus(),
            usbip: await managed.attachment.usbipStatus(),
            options: KeyOptionsDocument(managed.key.configuration, presence: managed.key.presence)
        )
    }

    func create(_ request: CreateKeyRequest) async throws(ControlError) -> KeyDocument {
        let name: KeyName
        do {
            name = try KeyName(request.name)
        } catch {
            throw .badRequest("name: \(error)")
        }
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
            events.publish(.keyCreated, key: name.rawValue, ["protocol": .string(key.protocolMode.rawValue)])
            return await document(managed)
        } catch {
            try? state.removeKeyDirectory(name)
            throw .internalError("cannot create key \(name): \(error)")
        }
    }

    /// Removes a key created through the API, and erases its credentials.
    func delete(_ name: KeyName) async throws(ControlError) {
        let managed = try managed(name)
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
        logger.info("key deleted", metadata: ["key": "\(name)"])
    }

    func credentials(_ name: KeyName) async throws(ControlError) -> [CredentialDocument] {
        let managed = try managed(name)
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

    func deleteCredential(_ name: KeyName, id: String) async throws(ControlError) {
        let managed = try managed(name)
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

    func pinStatus(_ name: KeyName) async throws(ControlError) -> PINDocument {
        let managed = try managed(name)
        return try await administering(name) { () throws(AdministrationError) in
            PINDocument(try await managed.key.authenticator.pinStatus())
        }
    }

    /// Sets the first PIN, or changes it when the request carries the
    /// current one. PINs are normalized to NFC, as a platform does (CTAP 2.1
    /// §6.5.1), so that a PIN matches whether an input method composed its
    /// accented characters or not; they are never logged.
    func updatePIN(_ name: KeyName, _ request: PINRequest) async throws(ControlError) -> PINDocument {
        let managed = try managed(name)
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
        return try await pinStatus(name)
    }

    func updateUser(_ name: KeyName, id: String, _ request: UserUpdateRequest) async throws(ControlError)
        -> CredentialDocument
    {
        let managed = try managed(name)
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

    func configuration(_ name: KeyName) async throws(ControlError) -> ConfigDocument {
        let managed = try managed(name)
        return try await administering(name) { () throws(AdministrationError) in
            ConfigDocument(try await managed.key.authenticator.pinStatus())
        }
    }

    /// Applies the minimum PIN length (with the forced change and the RP
    /// IDs) before alwaysUv: only the first can be refused, so a refusal
    /// changes nothing.
    func updateConfiguration(_ name: KeyName, _ request: ConfigDocument) async throws(ControlError) -> ConfigDocument {
        let authenticator = try managed(name).key.authenticator
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
        return try await configuration(name)
    }

    /// authenticatorReset without its window and touch: the socket's
    /// permissions already say who may. Requests waiting for presence are
    /// denied first, so that none completes into the erased store.
    func reset(_ name: KeyName) async throws(ControlError) -> KeyDocument {
        let managed = try managed(name)
        board.answerAll(key: name.rawValue, .denied)
        try await administering(name) { () throws(AdministrationError) in
            try await managed.key.authenticator.administrativeReset()
        }
        logger.notice("key reset through the control API", metadata: ["key": "\(name)"])
        return await document(managed)
    }

    func largeBlobs(_ name: KeyName) async throws(ControlError) -> LargeBlobsDocument {
        let managed = try managed(name)
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

    func presence(_ name: KeyName) throws(ControlError) -> PresenceBroker {
        try managed(name).key.presence
    }

    func replug(_ name: KeyName) async throws(ControlError) {
        let managed = try managed(name)
        board.answerAll(key: name.rawValue, .cancelled)
        await managed.key.authenticator.powerCycle()
        await managed.attachment.replug()
        events.publish(.keyReplugged, key: name.rawValue, ["reason": "control API"])
        logger.info("key replugged", metadata: ["key": "\(name)"])
    }

    /// The key's running parts, for the automation endpoints.
    func key(_ name: KeyName) throws(ControlError) -> VirtualKey { try managed(name).key }

    /// Sets what the key's built-in user verification answers, and remembers
    /// it for a key created through the API.
    func setUserVerified(_ name: KeyName, _ value: Bool) throws(ControlError) -> UserVerifiedDocument {
        let managed = try managed(name)
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

    func managed(_ name: KeyName) throws(ControlError) -> Managed {
        guard let managed = keys[name] else { throw .notFound("no key named \(name)") }
        return managed
    }
}
