// authenticatorClientPIN (0x06), CTAP 2.1 §6.5: the request and response maps,
// the subcommands and the pinUvAuthToken permissions. The token's state
// (§6.5.2) with its usage timer is the command's (Authenticator+ClientPIN.swift).

public import CBOR

/// authenticatorClientPIN subCommand values (CTAP 2.1 §6.5.5).
public enum ClientPINSubcommand: UInt64, Sendable {
    /// getPINRetries
    case getPINRetries = 0x01
    /// getKeyAgreement
    case getKeyAgreement = 0x02
    /// setPIN
    case setPIN = 0x03
    /// changePIN
    case changePIN = 0x04
    /// getPinToken (superseded by 0x09; tokens get the default permissions mc and ga)
    case getPinToken = 0x05
    /// getPinUvAuthTokenUsingUvWithPermissions (built-in UV only)
    case getPinUvAuthTokenUsingUvWithPermissions = 0x06
    /// getUVRetries (built-in UV only)
    case getUVRetries = 0x07
    /// getPinUvAuthTokenUsingPinWithPermissions
    case getPinUvAuthTokenUsingPinWithPermissions = 0x09
}

/// The authenticatorClientPIN request (CTAP 2.1 §6.5.4).
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | pinUvAuthProtocol | unsigned |
/// | 0x02 | subCommand        | unsigned, required |
/// | 0x03 | keyAgreement      | COSE_Key map |
/// | 0x04 | pinUvAuthParam    | bytes |
/// | 0x05 | newPinEnc         | bytes |
/// | 0x06 | pinHashEnc        | bytes |
/// | 0x09 | permissions       | unsigned |
/// | 0x0A | rpId              | text |
///
/// Which of the optional keys a subcommand needs is its handler's check, in
/// its step 1 (CTAP2_ERR_MISSING_PARAMETER). The content of `keyAgreement` is
/// checked by `decapsulate` (CTAP1_ERR_INVALID_PARAMETER), only its type here.
public struct ClientPINRequest: Sendable, CBORDecodable {
    public var pinUvAuthProtocol: UInt64?
    public var subCommand: UInt64
    public var keyAgreement: CBORValue?
    public var pinUvAuthParam: [UInt8]?
    public var newPinEnc: [UInt8]?
    public var pinHashEnc: [UInt8]?
    public var permissions: UInt64?
    public var rpId: String?

    /// Reads the request map.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("clientPIN parameters")
        pinUvAuthProtocol = try map[int: 0x01]?.unsignedValue("pinUvAuthProtocol")
        subCommand = try map.required(0x02, "subCommand").unsignedValue("subCommand")
        if let keyAgreement = map[int: 0x03] {
            _ = try keyAgreement.mapValue("keyAgreement")
            self.keyAgreement = keyAgreement
        }
        pinUvAuthParam = try map[int: 0x04]?.bytesValue("pinUvAuthParam")
        newPinEnc = try map[int: 0x05]?.bytesValue("newPinEnc")
        pinHashEnc = try map[int: 0x06]?.bytesValue("pinHashEnc")
        permissions = try map[int: 0x09]?.unsignedValue("permissions")
        rpId = try map[int: 0x0A]?.textValue("rpId")
    }
}

/// The authenticatorClientPIN response (CTAP 2.1 §6.5.4). setPIN and
/// changePIN answer with the status alone.
///
/// | key  | name            | type |
/// |------|-----------------|------|
/// | 0x01 | keyAgreement    | COSE_Key |
/// | 0x02 | pinUvAuthToken  | bytes (encrypted) |
/// | 0x03 | pinRetries      | unsigned |
/// | 0x04 | powerCycleState | boolean |
/// | 0x05 | uvRetries       | unsigned |
public struct ClientPINResponse: Sendable, CBOREncodable {
    public var keyAgreement: CBORValue?
    public var pinUvAuthToken: [UInt8]?
    public var pinRetries: Int?
    public var powerCycleState: Bool?
    public var uvRetries: Int?

    /// The response map of the members that are set; without any, the
    /// engine answers with the status alone.
    public var cbor: CBORValue {
        var entries: [(Int, CBORValue)] = []
        if let keyAgreement { entries.append((0x01, keyAgreement)) }
        if let pinUvAuthToken { entries.append((0x02, .bytes(pinUvAuthToken))) }
        if let pinRetries { entries.append((0x03, .int(pinRetries))) }
        if let powerCycleState { entries.append((0x04, .boolean(powerCycleState))) }
        if let uvRetries { entries.append((0x05, .int(uvRetries))) }
        return .intMap(entries)
    }
}

/// pinUvAuthToken permissions (CTAP 2.1 §6.5.5.7). An open set of wire bits.
public struct PinUvAuthTokenPermissions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// mc (0x01): authenticatorMakeCredential. Needs a permissions RP ID.
    public static let makeCredential = PinUvAuthTokenPermissions(rawValue: 0x01)
    /// ga (0x02): authenticatorGetAssertion. Needs a permissions RP ID.
    public static let getAssertion = PinUvAuthTokenPermissions(rawValue: 0x02)
    /// cm (0x04): authenticatorCredentialManagement.
    public static let credentialManagement = PinUvAuthTokenPermissions(rawValue: 0x04)
    /// be (0x08): authenticatorBioEnrollment.
    public static let bioEnrollment = PinUvAuthTokenPermissions(rawValue: 0x08)
    /// lbw (0x10): authenticatorLargeBlobs writes.
    public static let largeBlobWrite = PinUvAuthTokenPermissions(rawValue: 0x10)
    /// acfg (0x20): authenticatorConfig.
    public static let authenticatorConfiguration = PinUvAuthTokenPermissions(rawValue: 0x20)
    /// pcmr (0x40, CTAP 2.2): persistent read-only credential management,
    /// granted alone and answered with the persistent pinUvAuthToken
    /// (Authenticator+PersistentToken.swift).
    public static let persistentCredentialManagementReadOnly = PinUvAuthTokenPermissions(rawValue: 0x40)

    /// Every permission CTAP 2.2 defines; other bits are ignored when a token
    /// is issued (§6.5.5.7.2: "ignoring any undefined permissions").
    public static let defined: PinUvAuthTokenPermissions = [
        .makeCredential, .getAssertion, .credentialManagement, .bioEnrollment, .largeBlobWrite,
        .authenticatorConfiguration, .persistentCredentialManagementReadOnly,
    ]
    /// The permissions latchkey can grant: it has no bio enrollment, so a
    /// request for be is CTAP2_ERR_UNAUTHORIZED_PERMISSION (so is pcmr on a
    /// key configured without the persistent token).
    public static let supported: PinUvAuthTokenPermissions = [
        .makeCredential, .getAssertion, .credentialManagement, .largeBlobWrite, .authenticatorConfiguration,
        .persistentCredentialManagementReadOnly,
    ]
}
