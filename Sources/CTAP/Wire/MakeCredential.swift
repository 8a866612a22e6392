// authenticatorMakeCredential (0x01), CTAP 2.1 §6.1.

public import CBOR

/// The authenticatorMakeCredential request (CTAP 2.1 §6.1).
///
/// | key  | name                  | type       |
/// |------|-----------------------|------------|
/// | 0x01 | clientDataHash        | bytes, required |
/// | 0x02 | rp                    | map, required |
/// | 0x03 | user                  | map, required |
/// | 0x04 | pubKeyCredParams      | array, required |
/// | 0x05 | excludeList           | array |
/// | 0x06 | extensions            | map |
/// | 0x07 | options               | map of booleans |
/// | 0x08 | pinUvAuthParam        | bytes |
/// | 0x09 | pinUvAuthProtocol     | unsigned |
/// | 0x0A | enterpriseAttestation | unsigned |
/// | 0x0B | attestationFormatsPreference | array of text (CTAP 2.2) |
public struct MakeCredentialRequest: Sendable, ExtensionInputsDecodable {
    public var clientDataHash: [UInt8]
    public var rp: RelyingPartyEntity
    public var user: UserEntity
    public var pubKeyCredParams: [CredentialParameters]
    public var excludeList: [CredentialDescriptor]
    public var extensions: MakeCredentialExtensions
    public var options: AuthenticatorOptions
    public var pinUvAuthParam: [UInt8]?
    public var pinUvAuthProtocol: UInt64?
    public var enterpriseAttestation: UInt64?
    /// The platform's attestation statement formats, most preferred first.
    public var attestationFormatsPreference: [String]?

    /// Reads the request map; a missing required key or a value of the wrong
    /// type throws. Only the inputs of the extensions in `extensions` (the
    /// key's offered set) are read; the rest are ignored unread.
    public init(cbor: CBORValue, offering extensions: Set<String>) throws(CBORError) {
        let map = try cbor.mapValue("makeCredential parameters")
        clientDataHash = try map.required(0x01, "clientDataHash").bytesValue("clientDataHash")
        rp = try RelyingPartyEntity(cbor: map.required(0x02, "rp"))
        user = try UserEntity(cbor: map.required(0x03, "user"))
        pubKeyCredParams = try map.required(0x04, "pubKeyCredParams")
            .arrayValue(of: CredentialParameters.self, "pubKeyCredParams")
        excludeList = try map[int: 0x05]?.arrayValue(of: CredentialDescriptor.self, "excludeList") ?? []
        self.extensions = try map[int: 0x06]?.decoded(offering: extensions) ?? MakeCredentialExtensions()
        options = try map[int: 0x07]?.decoded() ?? AuthenticatorOptions()
        pinUvAuthParam = try map[int: 0x08]?.bytesValue("pinUvAuthParam")
        pinUvAuthProtocol = try map[int: 0x09]?.unsignedValue("pinUvAuthProtocol")
        enterpriseAttestation = try map[int: 0x0A]?.unsignedValue("enterpriseAttestation")
        attestationFormatsPreference = try map[int: 0x0B]?
            .textArrayValue("attestationFormatsPreference", element: "attestation format")
    }
}

/// The authenticatorMakeCredential response (CTAP 2.1 §6.1.2).
///
/// | key  | name     | type |
/// |------|----------|------|
/// | 0x01 | fmt      | text |
/// | 0x02 | authData | bytes |
/// | 0x03 | attStmt  | map |
/// | 0x05 | largeBlobKey | bytes, with the largeBlobKey extension |
/// | 0x06 | unsignedExtensionOutputs | map, extension identifier to output (CTAP 2.2) |
public struct MakeCredentialResponse: Sendable, CBOREncodable {
    public var fmt: String
    public var authData: [UInt8]
    public var attStmt: CBORValue
    public var largeBlobKey: [UInt8]?
    /// epAtt (0x04): true when the statement is an enterprise attestation.
    public var epAtt: Bool?
    /// Extension outputs outside authenticatorData (previewSign's
    /// attestation object).
    public var unsignedExtensionOutputs: [(String, CBORValue)] = []

    /// The response map.
    public var cbor: CBORValue {
        var entries: [(Int, CBORValue)] = [(0x01, .text(fmt)), (0x02, .bytes(authData)), (0x03, attStmt)]
        if let epAtt { entries.append((0x04, .boolean(epAtt))) }
        if let largeBlobKey { entries.append((0x05, .bytes(largeBlobKey))) }
        if !unsignedExtensionOutputs.isEmpty { entries.append((0x06, .textMap(unsignedExtensionOutputs))) }
        return .intMap(entries)
    }
}

/// The `options` map of makeCredential and getAssertion: each known key is a
/// boolean; unknown keys are ignored (CTAP 2.1 §6.1.2 step 5).
public struct AuthenticatorOptions: Sendable, Equatable {
    /// `rk`, if present.
    public var rk: Bool?
    /// `up`, if present.
    public var up: Bool?
    /// `uv`, if present.
    public var uv: Bool?
}

extension AuthenticatorOptions: CBORDecodable {
    /// Reads the map. A request without one has every option unset
    /// (`AuthenticatorOptions()`).
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("options")
        for entry in map.entries {
            let key = try entry.key.textValue("options key")
            switch key {
            case "rk": rk = try entry.value.boolValue("options.rk")
            case "up": up = try entry.value.boolValue("options.up")
            case "uv": uv = try entry.value.boolValue("options.uv")
            default: continue
            }
        }
    }
}
