// authenticatorGetAssertion (0x02) and authenticatorGetNextAssertion (0x08),
// CTAP 2.1 §6.2 and §6.3.

public import CBOR

/// The authenticatorGetAssertion request (CTAP 2.1 §6.2).
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | rpId              | text, required |
/// | 0x02 | clientDataHash    | bytes, required |
/// | 0x03 | allowList         | array |
/// | 0x04 | extensions        | map |
/// | 0x05 | options           | map of booleans |
/// | 0x06 | pinUvAuthParam    | bytes |
/// | 0x07 | pinUvAuthProtocol | unsigned |
public struct GetAssertionRequest: Sendable, ExtensionInputsDecodable {
    public var rpId: String
    public var clientDataHash: [UInt8]
    public var allowList: [CredentialDescriptor]
    public var extensions: GetAssertionExtensions
    public var options: AuthenticatorOptions
    public var pinUvAuthParam: [UInt8]?
    public var pinUvAuthProtocol: UInt64?

    /// Reads the request map, and the inputs of the extensions in
    /// `extensions` only.
    public init(cbor: CBORValue, offering extensions: Set<String>) throws(CBORError) {
        let map = try cbor.mapValue("getAssertion parameters")
        rpId = try map.required(0x01, "rpId").textValue("rpId")
        clientDataHash = try map.required(0x02, "clientDataHash").bytesValue("clientDataHash")
        allowList = try map[int: 0x03]?.arrayValue(of: CredentialDescriptor.self, "allowList") ?? []
        self.extensions = try map[int: 0x04]?.decoded(offering: extensions) ?? GetAssertionExtensions()
        options = try map[int: 0x05]?.decoded() ?? AuthenticatorOptions()
        pinUvAuthParam = try map[int: 0x06]?.bytesValue("pinUvAuthParam")
        pinUvAuthProtocol = try map[int: 0x07]?.unsignedValue("pinUvAuthProtocol")
    }
}

/// The authenticatorGetAssertion / GetNextAssertion response (CTAP 2.1 §6.2.2).
///
/// | key  | name                | type |
/// |------|---------------------|------|
/// | 0x01 | credential          | map (descriptor) |
/// | 0x02 | authData            | bytes |
/// | 0x03 | signature           | bytes |
/// | 0x04 | user                | map, for discoverable credentials: `id` alone, or with names for several accounts after UV |
/// | 0x05 | numberOfCredentials | unsigned, first response only, when > 1 |
/// | 0x06 | userSelected        | never: no account is chosen on the key (it has no display) |
/// | 0x07 | largeBlobKey        | bytes, with the largeBlobKey extension |
public struct GetAssertionResponse: Sendable, CBOREncodable {
    public var credential: CredentialDescriptor
    public var authData: [UInt8]
    public var signature: [UInt8]
    public var user: CBORValue?
    public var numberOfCredentials: Int?
    public var largeBlobKey: [UInt8]?

    /// The response map.
    public var cbor: CBORValue {
        var entries: [(Int, CBORValue)] = [
            (0x01, credential.cbor), (0x02, .bytes(authData)), (0x03, .bytes(signature)),
        ]
        if let user { entries.append((0x04, user)) }
        if let numberOfCredentials { entries.append((0x05, .int(numberOfCredentials))) }
        if let largeBlobKey { entries.append((0x07, .bytes(largeBlobKey))) }
        return .intMap(entries)
    }
}
