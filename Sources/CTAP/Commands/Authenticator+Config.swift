// authenticatorConfig (0x0D), CTAP 2.1 §6.11: enableEnterpriseAttestation
// (on keys capable of it), toggleAlwaysUv and setMinPINLength. Persisted in store secrets, which authenticatorReset
// deletes (so both return to their defaults, §6.6):
//
// | secret          | value |
// |-----------------|-------|
// | config.alwaysUv | present (1 byte, 1) while alwaysUv is true |
// | pin.minLength   | the minimum PIN length set (1 byte), see Authenticator+ClientPIN.swift |

import CBOR

enum ConfigSecret {
    static let alwaysUv = "config.alwaysUv"
}

extension Authenticator {
    // MARK: - authenticatorConfig (CTAP 2.1 §6.11)

    func authenticatorConfig(_ request: AuthenticatorConfigRequest) throws(CTAPStatus) {
        // A subcommand latchkey does not implement is refused before any
        // token is looked at: there is nothing to authorize. Enterprise
        // attestation needs an enterprise certificate, which only keys
        // configured with one have ("ep" in getInfo), and no vendor commands
        // are defined (vendorPrototypeConfigCommands is absent).
        guard let subCommand = AuthenticatorConfigSubcommand(rawValue: request.subCommand), supportsConfig(subCommand)
        else { throw .invalidSubcommand }
        try authenticateConfig(request, subCommand)
        switch subCommand {
        case .enableEnterpriseAttestation: try enableEnterpriseAttestation()
        case .toggleAlwaysUv: try toggleAlwaysUv()
        case .setMinPINLength: try setMinPINLength(request)
        case .vendorPrototype: preconditionFailure("refused above")
        }
    }

    /// Whether this key accepts `subCommand`; getInfo lists these as
    /// authenticatorConfigCommands (CTAP 2.2).
    func supportsConfig(_ subCommand: AuthenticatorConfigSubcommand) -> Bool {
        switch subCommand {
        case .toggleAlwaysUv, .setMinPINLength: true
        case .enableEnterpriseAttestation: enterpriseAttestationCapable
        case .vendorPrototype: false
        }
    }

    /// §6.11.3 toggleAlwaysUv. latchkey supports turning it off again, so
    /// OPERATION_DENIED never arises; makeCredUvNotRqd follows it in getInfo.
    func toggleAlwaysUv() throws(CTAPStatus) {
        let enable = !(try alwaysUv())
        alwaysUvCache = nil
        try storing("toggling alwaysUv") { () throws(StoreError) in
            try store.setSecret(enable ? [1] : nil, named: ConfigSecret.alwaysUv)
        }
        alwaysUvCache = enable
    }

    /// §6.11.4 setMinPINLength.
    func setMinPINLength(_ request: AuthenticatorConfigRequest) throws(CTAPStatus) {
        let current = try minPINLength()
        // An absent newMinPINLength keeps the current one.
        let requested = request.newMinPINLength ?? UInt64(current)
        // The minimum never decreases (only authenticatorReset restores the
        // default); above 63 code points no PIN could meet it (a PIN has at
        // most 63 bytes).
        guard requested >= UInt64(current), requested <= UInt64(PINSecret.maxByteCount) else {
            throw .pinPolicyViolation
        }
        let newMinPINLength = Int(requested)
        // More RP IDs than maxRPIDsForSetMinPINLength: KEY_STORE_FULL, before
        // anything changes.
        if let rpIds = request.minPinLengthRPIDs, rpIds.count > configuration.maxRPIDsForSetMinPINLength {
            throw .keyStoreFull
        }
        // A change can only be forced on a PIN that exists.
        let pin = try storedPIN()
        if request.forceChangePin == true, pin == nil { throw .pinNotSet }
        // A PIN shorter than the new minimum must be changed too.
        let forceChange = request.forceChangePin == true || (pin.map { $0.codePointCount < newMinPINLength } ?? false)
        try storing("setting minPINLength") { () throws(StoreError) in
            try store.setSecret([UInt8(newMinPINLength)], named: PINSecret.minLength)
            if forceChange { try store.setSecret([1], named: PINSecret.forceChange) }
        }
        // The list replaces the previous one (minPinLength extension, §12.4).
        if let rpIds = request.minPinLengthRPIDs { try setMinPinLengthRPIDs(rpIds) }
    }

    /// §6.11's checks before a subcommand runs. A key protected by a PIN, or
    /// with alwaysUv on, wants a pinUvAuthParam (PUAT_REQUIRED), the protocol
    /// (MISSING_PARAMETER, INVALID_PARAMETER), then verify(token, 32×0xff ||
    /// 0x0d || uint8(subCommand) || subCommandParams) and the acfg permission,
    /// each failure PIN_AUTH_INVALID. An unprotected key is configured
    /// without one (that is how a fresh key gets its minimum PIN length
    /// before the PIN is set).
    private func authenticateConfig(
        _ request: AuthenticatorConfigRequest,
        _ subCommand: AuthenticatorConfigSubcommand
    ) throws(CTAPStatus) {
        // Protected by some form of user verification (a PIN, or built-in
        // UV), or by alwaysUv.
        let protected = try userVerificationConfigured() ? true : alwaysUv()
        guard protected else { return }
        var message = [UInt8](repeating: 0xFF, count: 32) + [CTAPCommand.config.rawValue, UInt8(subCommand.rawValue)]
        if let params = request.subCommandParams { params.encode(into: &message) }
        try authenticatePinUvAuthParam(
            request.pinUvAuthParam, protocol: request.pinUvAuthProtocol, message: message,
            permission: .authenticatorConfiguration
        )
    }

    // MARK: - Persisted configuration

    /// alwaysUv (§6.4 options): off until toggled on. Read from the store
    /// once, then kept: every makeCredential and getAssertion asks, and only
    /// this actor changes it (toggleAlwaysUv, erase).
    func alwaysUv() throws(CTAPStatus) -> Bool {
        if let alwaysUvCache { return alwaysUvCache }
        let value = try storing("reading alwaysUv") { () throws(StoreError) in
            try store.secret(named: ConfigSecret.alwaysUv)
        } == [1]
        alwaysUvCache = value
        return value
    }
}
