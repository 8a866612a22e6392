// authenticatorClientPIN (0x06), CTAP 2.1 §6.5.5, and the pinUvAuthParam
// checks the other commands share (makeCredential and getAssertion: §6.1.2
// step 11.1, §6.2.2 step 6.1; credentialManagement, largeBlobs and
// authenticatorConfig). Each subcommand checks in the spec's order: which
// error wins is behaviour.
//
// PIN state lives in store secrets (encrypted at rest by persistent stores;
// authenticatorReset deletes them with every other non-`device.` secret):
//
// | secret             | value |
// |--------------------|-------|
// | pin.hash           | LEFT(SHA-256(PIN), 16) then the PIN's length in code points (1 byte) |
// | pin.retries        | pinRetries (1 byte); absent means the maximum, 8 |
// | pin.forceChange    | present (1 byte, 1) while forcePINChange is true |
// | pin.minLength      | the current minimum PIN length (1 byte); absent means the configured default |
// | pin.persistentToken | the persistent pinUvAuthToken (32 bytes), see Authenticator+PersistentToken.swift |
//
// Per power cycle, in memory: the key agreement keys, the pinUvAuthTokens and
// their state with its usage timer (`PinUvAuthTokenState`), and the count of
// consecutive mismatches (`PinUvAuthSession`).

import CBOR
import LatchkeyCrypto

/// Names and limits of the persisted PIN state.
enum PINSecret {
    static let hash = "pin.hash"
    static let retries = "pin.retries"
    static let forceChange = "pin.forceChange"
    static let minLength = "pin.minLength"
    static let persistentToken = "pin.persistentToken"
    /// The maximum value of pinRetries (§6.5.2.2: 8).
    static let maxRetries = 8
    /// Consecutive mismatches after which a power cycle is needed (§6.5.5.7: 3).
    static let maxConsecutiveMismatches = 3
    /// paddedNewPin is 64 bytes (§6.5.5.5), so a PIN has at most 63.
    static let paddedLength = 64
    static let maxByteCount = 63
}

/// The stored PIN: CurrentStoredPIN and its length in code points.
struct StoredPIN: Sendable {
    var hash: [UInt8]
    var codePointCount: Int
}

/// What lasts until the next power cycle (CTAP 2.1 §6.5.2): both protocols'
/// key agreement keys and pinUvAuthTokens, the token state, and the count of
/// consecutive PIN mismatches.
struct PinUvAuthSession: Sendable {
    private var one: PinUvAuthProtocol
    private var two: PinUvAuthProtocol
    var token = PinUvAuthTokenState()
    var consecutiveMismatches = 0

    /// initialize() for every protocol.
    init(entropy: any EntropySource) {
        one = PinUvAuthProtocol(version: .one, entropy: entropy)
        two = PinUvAuthProtocol(version: .two, entropy: entropy)
    }

    subscript(version: PinUvAuthProtocolVersion) -> PinUvAuthProtocol {
        get { version == .one ? one : two }
        set {
            if version == .one { one = newValue } else { two = newValue }
        }
    }

    /// resetPinUvAuthToken() for every protocol, and the token stops being in use.
    mutating func resetTokens(entropy: any EntropySource) {
        one.resetPinUvAuthToken(entropy: entropy)
        two.resetPinUvAuthToken(entropy: entropy)
        token.stopUsing()
    }
}

/// The pinUvAuthToken state (CTAP 2.1 §6.5.2.1–§6.5.2.2), shared by both
/// protocols: whether a token is in use, its permissions and permissions RP
/// ID, the user verified flag, and the usage timer.
///
/// The user present flag is not modelled: a token obtained with a PIN starts
/// with it false (beginUsingPinUvAuthToken(userIsPresent: false)) and only
/// built-in UV, which latchkey lacks, could set it, so every operation with a
/// token still asks for a touch.
struct PinUvAuthTokenState: Sendable {
    /// initialUsageTimeLimit for USB (§6.5.2.1: 30 s): a token not used by then expires.
    static let initialUsageTimeLimit: UInt64 = 30_000
    /// maxUsageTimePeriod (§6.5.2.1 suggests 10 minutes): no token outlives it.
    static let maxUsageTimePeriod: UInt64 = 600_000

    private(set) var inUse = false
    var permissions: PinUvAuthTokenPermissions = []
    var permissionsRpId: String?
    private(set) var userVerified = false
    private var startedAt: UInt64 = 0
    private var used = false

    /// beginUsingPinUvAuthToken(userIsPresent: false): starts the usage timer.
    mutating func beginUsing(at now: UInt64) {
        self = PinUvAuthTokenState()
        inUse = true
        userVerified = true
        startedAt = now
    }

    /// stopUsingPinUvAuthToken(): the token is no longer usable.
    mutating func stopUsing() {
        self = PinUvAuthTokenState()
    }

    /// pinUvAuthTokenUsageTimerObserver(): stops a token that was not used
    /// within the initial usage time limit, or that reached the maximum usage
    /// time period. Run before a token is looked at.
    mutating func observe(at now: UInt64) {
        guard inUse else { return }
        let elapsed = now &- startedAt
        if (!used && elapsed > Self.initialUsageTimeLimit) || elapsed > Self.maxUsageTimePeriod {
            stopUsing()
        }
    }

    /// A pinUvAuthParam was verified with the token: the initial usage limit
    /// no longer applies.
    mutating func markUsed() {
        used = true
    }

    /// The clears that end a makeCredential or getAssertion that collected
    /// user presence (§6.1.2 step 13, §6.2.2 step 9): clearUserVerifiedFlag()
    /// and clearPinUvAuthTokenPermissionsExceptLbw().
    mutating func clearAfterUserPresence() {
        guard inUse else { return }
        userVerified = false
        permissions = permissions.intersection(.largeBlobWrite)
    }
}

extension Authenticator {
    // MARK: - authenticatorClientPIN (CTAP 2.1 §6.5.5)

    func clientPIN(_ request: ClientPINRequest) async throws(CTAPStatus) -> ClientPINResponse {
        switch ClientPINSubcommand(rawValue: request.subCommand) {
        case .getPINRetries: return try getPINRetries()
        case .getKeyAgreement: return try getKeyAgreement(request)
        case .setPIN: try setPIN(request)
        case .changePIN: try changePIN(request)
        case .getPinToken: return try getPinToken(request)
        case .getPinUvAuthTokenUsingPinWithPermissions: return try getPinUvAuthTokenUsingPinWithPermissions(request)
        // Built-in user verification exists only where the configuration
        // grants it to the key's presence decider (a CI rig's policy); without
        // it these subcommands are not implemented (CTAP2_ERR_INVALID_SUBCOMMAND,
        // §8.2), as getInfo says by omitting the "uv" option.
        case .getPinUvAuthTokenUsingUvWithPermissions where configuration.builtInUserVerification:
            return try await getPinUvAuthTokenUsingUvWithPermissions(request)
        case .getUVRetries where configuration.builtInUserVerification:
            // The decider's refusals are not counted: it is a policy, not a
            // sensor a person could wear out.
            return ClientPINResponse(uvRetries: PINSecret.maxRetries)
        case .getPinUvAuthTokenUsingUvWithPermissions, .getUVRetries, nil: throw .invalidSubcommand
        }
        return ClientPINResponse()
    }

    /// §6.5.5.2: pinRetries, and powerCycleState (true after three consecutive
    /// mismatches). pinUvAuthProtocol is not needed and not checked.
    ///
    /// A key without a PIN has no retries to count: CTAP2_ERR_PIN_NOT_SET.
    /// The spec has no step for it, the status exists for exactly this case
    /// ("no PIN has been set"), and YubiKeys and Yubico's device suite
    /// (python-fido2 `tests/device/test_clientpin.py`) expect it; platforms
    /// read getInfo's clientPin first and ask only when it is true.
    private func getPINRetries() throws(CTAPStatus) -> ClientPINResponse {
        guard try storedPIN() != nil else { throw .pinNotSet }
        return ClientPINResponse(
            pinRetries: try pinRetries(),
            powerCycleState: pinUvAuth.consecutiveMismatches >= PINSecret.maxConsecutiveMismatches
        )
    }

    /// §6.5.5.4: the selected protocol's key agreement public key.
    private func getKeyAgreement(_ request: ClientPINRequest) throws(CTAPStatus) -> ClientPINResponse {
        guard let raw = request.pinUvAuthProtocol else { throw .missingParameter }
        let version = try supportedProtocol(raw)
        return ClientPINResponse(keyAgreement: pinUvAuth[version].getPublicKey())
    }

    /// §6.5.5.5 setPIN.
    private func setPIN(_ request: ClientPINRequest) throws(CTAPStatus) {
        // Step 1: mandatory parameters.
        guard let raw = request.pinUvAuthProtocol, let keyAgreement = request.keyAgreement,
            let newPinEnc = request.newPinEnc, let pinUvAuthParam = request.pinUvAuthParam
        else { throw .missingParameter }
        // Step 2: the protocol.
        let version = try supportedProtocol(raw)
        // Step 3: a PIN already set is changed with changePIN, never set again.
        if try storedPIN() != nil { throw .pinAuthInvalid }
        // Steps 4–6: the shared secret, the platform's MAC over newPinEnc, the PIN.
        let sharedSecret = try decapsulate(keyAgreement, version)
        guard version.verify(key: sharedSecret, message: newPinEnc, signature: pinUvAuthParam) else {
            throw .pinAuthInvalid
        }
        let newPin = try decryptNewPin(newPinEnc, sharedSecret, version)
        // Steps 7–10: the policy, then CurrentStoredPIN with a full retries counter.
        try storeFirstPIN(try checkedNewPin(newPin))
    }

    /// §6.5.5.5 step 10, shared with the control API's setPIN: CurrentStoredPIN
    /// with a full retries counter.
    func storeFirstPIN(_ pin: StoredPIN) throws(CTAPStatus) {
        try storing("setting the PIN") { () throws(StoreError) in
            try store.setSecret([UInt8(PINSecret.maxRetries)], named: PINSecret.retries)
            // No persistent token may outlive the PIN that issued it.
            try store.setSecret(nil, named: PINSecret.persistentToken)
            try store.setSecret(pin.hash + [UInt8(pin.codePointCount)], named: PINSecret.hash)
        }
    }

    /// §6.5.5.6 changePIN.
    private func changePIN(_ request: ClientPINRequest) throws(CTAPStatus) {
        // Step 1: mandatory parameters.
        guard let raw = request.pinUvAuthProtocol, let keyAgreement = request.keyAgreement,
            let pinHashEnc = request.pinHashEnc, let newPinEnc = request.newPinEnc,
            let pinUvAuthParam = request.pinUvAuthParam
        else { throw .missingParameter }
        // Step 2: the protocol.
        let version = try supportedProtocol(raw)
        // The spec has no step for a key without a PIN; there is nothing to
        // change, so say so (the status setPIN's caller expects to act on).
        guard let current = try storedPIN() else { throw .pinNotSet }
        // Step 3: a blocked PIN stays blocked until authenticatorReset.
        if try pinRetries() == 0 { throw .pinBlocked }
        // Steps 4–5: the shared secret and the platform's MAC over both ciphertexts.
        let sharedSecret = try decapsulate(keyAgreement, version)
        guard version.verify(key: sharedSecret, message: newPinEnc + pinHashEnc, signature: pinUvAuthParam) else {
            throw .pinAuthInvalid
        }
        // Steps 6–8: the current PIN, which costs a retry until it matches.
        try checkPinHash(pinHashEnc, sharedSecret: sharedSecret, version: version, against: current)
        // Steps 9–13: the new PIN and the policy, then the PIN replaced.
        try replacePIN(current, with: try checkedNewPin(try decryptNewPin(newPinEnc, sharedSecret, version)))
    }

    /// §6.5.5.6 steps 11–13, shared with the control API's changePIN once
    /// the current PIN matched.
    func replacePIN(_ current: StoredPIN, with newPin: StoredPIN) throws(CTAPStatus) {
        // While a change is forced, the new PIN must differ from the old one.
        if try forcePINChange(), constantTimeEqual(newPin.hash, current.hash) { throw .pinPolicyViolation }
        // Step 12: the new CurrentStoredPIN; a forced change is done. The
        // persistent pinUvAuthToken goes first (CTAP 2.2 §6.5.5.6,
        // resetPersistentPinUvAuthToken): whoever knew only the old PIN
        // keeps no grant, even if the change is cut short.
        try storing("changing the PIN") { () throws(StoreError) in
            try store.setSecret(nil, named: PINSecret.persistentToken)
            try store.setSecret(newPin.hash + [UInt8(newPin.codePointCount)], named: PINSecret.hash)
            try store.setSecret(nil, named: PINSecret.forceChange)
        }
        // Step 13: every outstanding pinUvAuthToken stops working.
        pinUvAuth.resetTokens(entropy: entropy)
    }

    /// §6.5.5.7.1 getPinToken: a token with the default permissions (mc and
    /// ga) and no permissions RP ID.
    private func getPinToken(_ request: ClientPINRequest) throws(CTAPStatus) -> ClientPINResponse {
        // Step 1: mandatory parameters.
        guard let raw = request.pinUvAuthProtocol, let keyAgreement = request.keyAgreement,
            let pinHashEnc = request.pinHashEnc
        else { throw .missingParameter }
        // Step 2: the protocol.
        let version = try supportedProtocol(raw)
        // Permissions belong to subcommand 0x09; this one takes none.
        if request.permissions != nil || request.rpId != nil { throw .invalidParameter }
        // While a change is forced the legacy subcommand answers PIN_INVALID
        // (0x09 answers PIN_POLICY_VIOLATION, which CTAP 2.0 clients don't know).
        return try issueToken(
            version: version, keyAgreement: keyAgreement, pinHashEnc: pinHashEnc,
            permissions: [.makeCredential, .getAssertion], permissionsRpId: nil, whenForced: .pinInvalid
        )
    }

    /// §6.5.5.7.2 getPinUvAuthTokenUsingPinWithPermissions.
    private func getPinUvAuthTokenUsingPinWithPermissions(
        _ request: ClientPINRequest
    ) throws(CTAPStatus) -> ClientPINResponse {
        // Step 1: mandatory parameters (pinHashEnc here, the rest below).
        guard let pinHashEnc = request.pinHashEnc else { throw .missingParameter }
        let (version, keyAgreement, permissions) = try tokenParameters(request)
        return try issueToken(
            version: version, keyAgreement: keyAgreement, pinHashEnc: pinHashEnc,
            permissions: permissions, permissionsRpId: request.rpId, whenForced: .pinPolicyViolation
        )
    }

    /// §6.5.5.8 getPinUvAuthTokenUsingUvWithPermissions: the same parameter
    /// checks as with a PIN, then built-in user verification (one touch that
    /// the presence decider verifies), then a new token.
    private func getPinUvAuthTokenUsingUvWithPermissions(
        _ request: ClientPINRequest
    ) async throws(CTAPStatus) -> ClientPINResponse {
        let (version, keyAgreement, permissions) = try tokenParameters(request)
        let sharedSecret = try decapsulate(keyAgreement, version)
        try await collectVerifiedPresence(PresenceRequest(operation: .userVerificationToken, rpId: request.rpId))
        return try newToken(version: version, sharedSecret: sharedSecret, permissions: permissions, rpId: request.rpId)
    }

    /// Steps 1–4 both ...WithPermissions subcommands share: the mandatory
    /// parameters, the protocol, and the permissions.
    private func tokenParameters(_ request: ClientPINRequest) throws(CTAPStatus)
        -> (PinUvAuthProtocolVersion, CBORValue, PinUvAuthTokenPermissions)
    {
        // Step 1: mandatory parameters.
        guard let raw = request.pinUvAuthProtocol, let keyAgreement = request.keyAgreement,
            let rawPermissions = request.permissions
        else { throw .missingParameter }
        // Step 2: the protocol.
        let version = try supportedProtocol(raw)
        // Step 3: no permission at all is meaningless.
        guard rawPermissions != 0 else { throw .invalidParameter }
        // mc and ga need a permissions RP ID (§6.5.5.7's permissions table),
        // so that the token cannot be spent on another relying party.
        let permissions = PinUvAuthTokenPermissions(rawValue: rawPermissions).intersection(.defined)
        if !permissions.isDisjoint(with: [.makeCredential, .getAssertion]), request.rpId == nil {
            throw .invalidParameter
        }
        // Step 4: a defined permission for a feature latchkey lacks is not
        // granted; undefined bits are ignored (step 10).
        guard permissions.isSubset(of: .supported) else { throw .unauthorizedPermission }
        // pcmr (CTAP 2.2) is granted alone, by keys that offer it.
        if permissions.contains(.persistentCredentialManagementReadOnly),
            !configuration.persistentPinUvAuthToken || permissions != .persistentCredentialManagementReadOnly
        {
            throw .unauthorizedPermission
        }
        return (version, keyAgreement, permissions)
    }

    /// The steps getPinToken and getPinUvAuthTokenUsingPinWithPermissions
    /// share once their parameters are checked: the PIN, then a new token.
    private func issueToken(
        version: PinUvAuthProtocolVersion,
        keyAgreement: CBORValue,
        pinHashEnc: [UInt8],
        permissions: PinUvAuthTokenPermissions,
        permissionsRpId: String?,
        whenForced: CTAPStatus
    ) throws(CTAPStatus) -> ClientPINResponse {
        // The spec has no step for a key without a PIN: there is no PIN to check.
        guard let current = try storedPIN() else { throw .pinNotSet }
        // A blocked PIN stays blocked until authenticatorReset.
        if try pinRetries() == 0 { throw .pinBlocked }
        let sharedSecret = try decapsulate(keyAgreement, version)
        try checkPinHash(pinHashEnc, sharedSecret: sharedSecret, version: version, against: current)
        // Checked after the PIN matched (and the retries were restored), so
        // the client knows the PIN was right and must be changed.
        if try forcePINChange() { throw whenForced }
        return try newToken(version: version, sharedSecret: sharedSecret, permissions: permissions, rpId: permissionsRpId)
    }

    /// A new pinUvAuthToken with `permissions`, encrypted to the platform.
    private func newToken(
        version: PinUvAuthProtocolVersion,
        sharedSecret: [UInt8],
        permissions: PinUvAuthTokenPermissions,
        rpId permissionsRpId: String?
    ) throws(CTAPStatus) -> ClientPINResponse {
        // pcmr is answered with the persistent token; the session's token is
        // left as it is (CTAP 2.2 §6.5.5.7.2).
        if permissions == .persistentCredentialManagementReadOnly {
            let token = try newPersistentToken()
            return ClientPINResponse(
                pinUvAuthToken: try signing("encrypting the persistent pinUvAuthToken") { () throws(CryptoError) in
                    try version.encrypt(key: sharedSecret, plaintext: token, entropy: entropy)
                }
            )
        }
        // A new token for every protocol; only the selected one leaves, encrypted.
        pinUvAuth.resetTokens(entropy: entropy)
        pinUvAuth.token.beginUsing(at: clock.milliseconds)
        pinUvAuth.token.permissions = permissions
        pinUvAuth.token.permissionsRpId = permissionsRpId
        let token = pinUvAuth[version].pinUvAuthToken
        let encrypted = try signing("encrypting the pinUvAuthToken") { () throws(CryptoError) in
            try version.encrypt(key: sharedSecret, plaintext: token, entropy: entropy)
        }
        return ClientPINResponse(pinUvAuthToken: encrypted)
    }

    // MARK: - Shared steps

    /// The protocol for a pinUvAuthProtocol value: CTAP1_ERR_INVALID_PARAMETER
    /// for any latchkey does not support.
    func supportedProtocol(_ raw: UInt64) throws(CTAPStatus) -> PinUvAuthProtocolVersion {
        guard let version = PinUvAuthProtocolVersion(rawValue: raw) else { throw .invalidParameter }
        return version
    }

    /// decapsulate(keyAgreement): a key that is not a P-256 point is
    /// CTAP1_ERR_INVALID_PARAMETER.
    func decapsulate(_ keyAgreement: CBORValue, _ version: PinUvAuthProtocolVersion) throws(CTAPStatus)
        -> [UInt8]
    {
        do {
            return try pinUvAuth[version].decapsulate(keyAgreement)
        } catch {
            throw CTAPStatus(error)
        }
    }

    /// Compares the platform's encrypted PIN hash with CurrentStoredPIN
    /// (§6.5.5.6 steps 6–8, §6.5.5.7.1 steps 5–7); a ciphertext that does not
    /// decrypt is a mismatch.
    private func checkPinHash(
        _ pinHashEnc: [UInt8],
        sharedSecret: [UInt8],
        version: PinUvAuthProtocolVersion,
        against current: StoredPIN
    ) throws(CTAPStatus) {
        let presented = try? version.decrypt(key: sharedSecret, ciphertext: pinHashEnc)
        try checkPIN(presented, against: current, regenerating: version)
    }

    /// Compares a presented LEFT(SHA-256(PIN), 16) with CurrentStoredPIN: the
    /// one place that spends and restores PIN retries, for clientPIN and the
    /// control API alike.
    ///
    /// The decremented retries counter reaches the store before the
    /// comparison, so pulling the plug mid-check still costs the attempt. A
    /// mismatch regenerates `version`'s key agreement key (clientPIN's; the
    /// control API has none) and answers PIN_BLOCKED at 0 retries,
    /// PIN_AUTH_BLOCKED at the third consecutive mismatch, PIN_INVALID
    /// otherwise. After three, attempts are refused unspent until the next
    /// power cycle.
    func checkPIN(
        _ presented: [UInt8]?,
        against current: StoredPIN,
        regenerating version: PinUvAuthProtocolVersion?
    ) throws(CTAPStatus) {
        if pinUvAuth.consecutiveMismatches >= PINSecret.maxConsecutiveMismatches { throw .pinAuthBlocked }
        // Callers refuse a blocked PIN earlier, in their spec position; this
        // guard only keeps a store changed meanwhile from underflowing.
        let retries = try pinRetries() - 1
        guard retries >= 0 else { throw .pinBlocked }
        try storing("persisting pinRetries") { () throws(StoreError) in
            try store.setSecret([UInt8(retries)], named: PINSecret.retries)
        }
        guard let presented, constantTimeEqual(presented, current.hash) else {
            if let version { pinUvAuth[version].regenerate(entropy: entropy) }
            if retries == 0 { throw .pinBlocked }
            pinUvAuth.consecutiveMismatches += 1
            if pinUvAuth.consecutiveMismatches >= PINSecret.maxConsecutiveMismatches { throw .pinAuthBlocked }
            throw .pinInvalid
        }
        try storing("restoring pinRetries") { () throws(StoreError) in
            try store.setSecret([UInt8(PINSecret.maxRetries)], named: PINSecret.retries)
        }
        pinUvAuth.consecutiveMismatches = 0
    }

    /// decrypt(sharedSecret, newPinEnc) and the 64-byte padding check
    /// (§6.5.5.5 steps 6–7): a ciphertext that does not decrypt is
    /// PIN_AUTH_INVALID, a plaintext of another length INVALID_PARAMETER.
    private func decryptNewPin(_ newPinEnc: [UInt8], _ sharedSecret: [UInt8], _ version: PinUvAuthProtocolVersion)
        throws(CTAPStatus) -> [UInt8]
    {
        guard let padded = try? version.decrypt(key: sharedSecret, ciphertext: newPinEnc) else {
            throw .pinAuthInvalid
        }
        guard padded.count == PINSecret.paddedLength else { throw .invalidParameter }
        return padded
    }

    /// The PIN inside `paddedNewPin` checked against the PIN policy (§6.5.5.5
    /// steps 8–10): trailing zero bytes dropped, at least the minimum length in
    /// code points, at most 63 bytes; else PIN_POLICY_VIOLATION. The control
    /// API passes its PIN unpadded, having refused NUL in it.
    func checkedNewPin(_ paddedNewPin: [UInt8]) throws(CTAPStatus) -> StoredPIN {
        var newPin = paddedNewPin
        while newPin.last == 0 { newPin.removeLast() }
        // Code points of the UTF-8 the platform sent (in NFC, §6.5.1): every
        // byte that is not a continuation byte starts one.
        let codePoints = newPin.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
        guard codePoints >= (try minPINLength()), newPin.count <= PINSecret.maxByteCount else {
            throw .pinPolicyViolation
        }
        return StoredPIN(hash: Array(SHA256.hash(newPin).prefix(16)), codePointCount: codePoints)
    }

    // MARK: - Persisted PIN state

    /// CurrentStoredPIN, if a PIN is set.
    func storedPIN() throws(CTAPStatus) -> StoredPIN? {
        guard let value = try storing("reading the PIN", { () throws(StoreError) in
            try store.secret(named: PINSecret.hash)
        }) else { return nil }
        guard value.count == 17 else {
            diagnostics?("stored PIN hash has \(value.count) bytes")
            throw .other
        }
        return StoredPIN(hash: Array(value.prefix(16)), codePointCount: Int(value[16]))
    }

    /// pinRetries: the maximum until a PIN check first fails.
    func pinRetries() throws(CTAPStatus) -> Int {
        guard let value = try storing("reading pinRetries", { () throws(StoreError) in
            try store.secret(named: PINSecret.retries)
        }) else { return PINSecret.maxRetries }
        guard value.count == 1, Int(value[0]) <= PINSecret.maxRetries else {
            diagnostics?("stored pinRetries is malformed")
            throw .other
        }
        return Int(value[0])
    }

    /// forcePINChange (§6.4 getInfo 0x0C).
    func forcePINChange() throws(CTAPStatus) -> Bool {
        try storing("reading forcePINChange") { () throws(StoreError) in
            try store.secret(named: PINSecret.forceChange)
        } == [1]
    }

    /// The current minimum PIN length in code points (§6.4 getInfo 0x0D).
    func minPINLength() throws(CTAPStatus) -> Int {
        guard let value = try storing("reading minPINLength", { () throws(StoreError) in
            try store.secret(named: PINSecret.minLength)
        }), value.count == 1 else { return configuration.minPINLength }
        return max(Int(value[0]), configuration.minPINLength)
    }

    // MARK: - pinUvAuthParam in makeCredential and getAssertion

    /// §6.1.2 steps 1–2 and §6.2.2 steps 1–2: the empty pinUvAuthParam touch
    /// probe, then the protocol. Returns the protocol when a pinUvAuthParam
    /// is to be verified.
    /// Whether the key is protected by some form of user verification: a
    /// PIN, or built-in UV (CTAP 2.1 §6.1.2 step 1.1.2).
    func userVerificationConfigured() throws(CTAPStatus) -> Bool {
        if configuration.builtInUserVerification { return true }
        return try storedPIN() != nil
    }

    func checkPinUvAuthProbe(param: [UInt8]?, pinUvAuthProtocol: UInt64?, rpId: String) async throws(CTAPStatus)
        -> PinUvAuthProtocolVersion?
    {
        guard let param else { return nil }
        if param.isEmpty {
            // A client picking a key asks for a touch; then the PIN state.
            try await collectPresence(PresenceRequest(operation: .touchProbe, rpId: rpId))
            throw try userVerificationConfigured() ? .pinInvalid : .pinNotSet
        }
        guard let pinUvAuthProtocol else { throw .missingParameter }
        return try supportedProtocol(pinUvAuthProtocol)
    }

    /// §6.1.2 step 11.1 and §6.2.2 step 6.1: verifies `param` as
    /// authenticate(pinUvAuthToken, clientDataHash) and checks the token's
    /// `permission`, its permissions RP ID and its user verified flag, each
    /// failure CTAP2_ERR_PIN_AUTH_INVALID. A token without a permissions RP ID
    /// (from getPinToken) is bound to `rpId` from here on.
    func verifyPinUvAuthParam(
        _ param: [UInt8],
        version: PinUvAuthProtocolVersion,
        clientDataHash: [UInt8],
        permission: PinUvAuthTokenPermissions,
        rpId: String
    ) throws(CTAPStatus) {
        try verifyPinUvAuthToken(param, version: version, message: clientDataHash, permission: permission)
        if let bound = pinUvAuth.token.permissionsRpId, bound != rpId { throw .pinAuthInvalid }
        guard pinUvAuth.token.userVerified else { throw .pinAuthInvalid }
        if pinUvAuth.token.permissionsRpId == nil { pinUvAuth.token.permissionsRpId = rpId }
    }

    // MARK: - pinUvAuthParam in every command

    /// The pinUvAuthParam checks of the commands a token authorizes without
    /// a touch (credentialManagement §6.8, largeBlobs §6.10.2 step 5.5,
    /// authenticatorConfig §6.11), in their shared order: present
    /// (CTAP2_ERR_PUAT_REQUIRED), the protocol (CTAP2_ERR_MISSING_PARAMETER,
    /// CTAP1_ERR_INVALID_PARAMETER), then `verifyPinUvAuthToken` over
    /// `message`.
    func authenticatePinUvAuthParam(
        _ param: [UInt8]?,
        protocol raw: UInt64?,
        message: [UInt8],
        permission: PinUvAuthTokenPermissions
    ) throws(CTAPStatus) {
        guard let param else { throw .pinUvAuthTokenRequired }
        guard let raw else { throw .missingParameter }
        let version = try supportedProtocol(raw)
        try verifyPinUvAuthToken(param, version: version, message: message, permission: permission)
    }

    /// verify(pinUvAuthToken, message, param), then the token's `permission`,
    /// each failure CTAP2_ERR_PIN_AUTH_INVALID.
    func verifyPinUvAuthToken(
        _ param: [UInt8],
        version: PinUvAuthProtocolVersion,
        message: [UInt8],
        permission: PinUvAuthTokenPermissions
    ) throws(CTAPStatus) {
        // A token can only exist once a PIN is set or built-in UV is
        // configured (alwaysUv alone protects a key without either); say so
        // rather than check a MAC that cannot be right.
        guard try userVerificationConfigured() else { throw .pinNotSet }
        pinUvAuth.token.observe(at: clock.milliseconds)
        // verify() refuses a token that is not in use.
        guard pinUvAuth.token.inUse,
            version.verify(key: pinUvAuth[version].pinUvAuthToken, message: message, signature: param)
        else { throw .pinAuthInvalid }
        pinUvAuth.token.markUsed()
        guard pinUvAuth.token.permissions.contains(permission) else { throw .pinAuthInvalid }
    }
}
