// authenticatorCredentialManagement (0x0A, and the prototype 0x41), CTAP 2.1
// §6.8: the request and response maps and the subcommands.

public import CBOR

/// authenticatorCredentialManagement subCommand values (CTAP 2.1 §6.8).
public enum CredentialManagementSubcommand: UInt64, Sendable {
    /// getCredsMetadata
    case getCredsMetadata = 0x01
    /// enumerateRPsBegin
    case enumerateRPsBegin = 0x02
    /// enumerateRPsGetNextRP
    case enumerateRPsGetNextRP = 0x03
    /// enumerateCredentialsBegin
    case enumerateCredentialsBegin = 0x04
    /// enumerateCredentialsGetNextCredential
    case enumerateCredentialsGetNextCredential = 0x05
    /// deleteCredential
    case deleteCredential = 0x06
    /// updateUserInformation
    case updateUserInformation = 0x07

    /// Whether the subcommand only reads, so that the persistent
    /// pinUvAuthToken may authorize it (CTAP 2.2 pcmr). The GetNext
    /// subcommands carry no pinUvAuthParam: they continue a Begin.
    var isReadOnly: Bool {
        self == .getCredsMetadata || self == .enumerateRPsBegin || self == .enumerateCredentialsBegin
    }
}

/// The authenticatorCredentialManagement request (CTAP 2.1 §6.8).
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | subCommand        | unsigned, required |
/// | 0x02 | subCommandParams  | map |
/// | 0x03 | pinUvAuthProtocol | unsigned |
/// | 0x04 | pinUvAuthParam    | bytes |
///
/// subCommandParams:
///
/// | key  | name         | type |
/// |------|--------------|------|
/// | 0x01 | rpIDHash     | bytes |
/// | 0x02 | credentialID | PublicKeyCredentialDescriptor |
/// | 0x03 | user         | PublicKeyCredentialUserEntity |
///
/// Which parameters a subcommand needs is its handler's check
/// (CTAP2_ERR_MISSING_PARAMETER), only their types here.
public struct CredentialManagementRequest: Sendable, CBORDecodable {
    public var subCommand: UInt64
    /// subCommandParams exactly as sent: the decoder accepts only canonical
    /// CBOR, so its encoding is the bytes the platform authenticated.
    public var subCommandParams: CBORValue?
    public var pinUvAuthProtocol: UInt64?
    public var pinUvAuthParam: [UInt8]?
    public var rpIDHash: [UInt8]?
    public var credentialID: CredentialDescriptor?
    public var user: UserEntity?

    /// Reads the request map.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("credentialManagement parameters")
        subCommand = try map.required(0x01, "subCommand").unsignedValue("subCommand")
        if let params = map[int: 0x02] {
            let paramsMap = try params.mapValue("subCommandParams")
            subCommandParams = params
            rpIDHash = try paramsMap[int: 0x01]?.bytesValue("rpIDHash")
            credentialID = try paramsMap[int: 0x02]?.decoded()
            user = try paramsMap[int: 0x03]?.decoded()
        }
        pinUvAuthProtocol = try map[int: 0x03]?.unsignedValue("pinUvAuthProtocol")
        pinUvAuthParam = try map[int: 0x04]?.bytesValue("pinUvAuthParam")
    }
}

/// The authenticatorCredentialManagement response (CTAP 2.1 §6.8).
/// deleteCredential and updateUserInformation answer with the status alone.
///
/// | key  | name                                         | type |
/// |------|----------------------------------------------|------|
/// | 0x01 | existingResidentCredentialsCount             | unsigned |
/// | 0x02 | maxPossibleRemainingResidentCredentialsCount | unsigned |
/// | 0x03 | rp                                           | PublicKeyCredentialRpEntity |
/// | 0x04 | rpIDHash                                     | bytes |
/// | 0x05 | totalRPs                                     | unsigned |
/// | 0x06 | user                                         | PublicKeyCredentialUserEntity |
/// | 0x07 | credentialID                                 | PublicKeyCredentialDescriptor |
/// | 0x08 | publicKey                                    | COSE_Key |
/// | 0x09 | totalCredentials                             | unsigned |
/// | 0x0A | credProtect                                  | unsigned |
/// | 0x0B | largeBlobKey                                 | bytes |
/// | 0x0C | thirdPartyPayment (CTAP 2.2)                 | boolean |
public struct CredentialManagementResponse: Sendable, CBOREncodable {
    public var existingResidentCredentialsCount: Int?
    public var maxPossibleRemainingResidentCredentialsCount: Int?
    public var rp: RelyingPartyEntity?
    public var rpIDHash: [UInt8]?
    public var totalRPs: Int?
    public var user: UserEntity?
    public var credentialID: CredentialDescriptor?
    public var publicKey: CBORValue?
    public var totalCredentials: Int?
    public var credProtect: Int?
    public var largeBlobKey: [UInt8]?
    public var thirdPartyPayment: Bool?

    public init() {}

    /// The response map of the members that are set; without any, the
    /// engine answers with the status alone.
    public var cbor: CBORValue {
        var entries: [(Int, CBORValue)] = []
        if let existingResidentCredentialsCount { entries.append((0x01, .int(existingResidentCredentialsCount))) }
        if let maxPossibleRemainingResidentCredentialsCount {
            entries.append((0x02, .int(maxPossibleRemainingResidentCredentialsCount)))
        }
        if let rp { entries.append((0x03, rp.cbor)) }
        if let rpIDHash { entries.append((0x04, .bytes(rpIDHash))) }
        if let totalRPs { entries.append((0x05, .int(totalRPs))) }
        // The platform proved user verification with the token: the whole entity.
        if let user { entries.append((0x06, user.cbor)) }
        if let credentialID { entries.append((0x07, credentialID.cbor)) }
        if let publicKey { entries.append((0x08, publicKey)) }
        if let totalCredentials { entries.append((0x09, .int(totalCredentials))) }
        if let credProtect { entries.append((0x0A, .int(credProtect))) }
        if let largeBlobKey { entries.append((0x0B, .bytes(largeBlobKey))) }
        if let thirdPartyPayment { entries.append((0x0C, .boolean(thirdPartyPayment))) }
        return .intMap(entries)
    }
}
