// authenticatorConfig (0x0D), CTAP 2.1 §6.11: the request map and the subcommands.

public import CBOR

/// authenticatorConfig subCommand values (CTAP 2.1 §6.11).
public enum AuthenticatorConfigSubcommand: UInt64, Sendable, CaseIterable {
    /// enableEnterpriseAttestation (keys with an enterprise attestation certificate)
    case enableEnterpriseAttestation = 0x01
    /// toggleAlwaysUv
    case toggleAlwaysUv = 0x02
    /// setMinPINLength
    case setMinPINLength = 0x03
    /// vendorPrototype (latchkey defines no vendor commands)
    case vendorPrototype = 0xFF
}

/// The authenticatorConfig request (CTAP 2.1 §6.11). Every subcommand
/// answers with the status alone.
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | subCommand        | unsigned, required |
/// | 0x02 | subCommandParams  | map |
/// | 0x03 | pinUvAuthProtocol | unsigned |
/// | 0x04 | pinUvAuthParam    | bytes |
///
/// subCommandParams of setMinPINLength (§6.11.4):
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | newMinPINLength   | unsigned |
/// | 0x02 | minPinLengthRPIDs | array of text |
/// | 0x03 | forceChangePin    | boolean |
public struct AuthenticatorConfigRequest: Sendable, CBORDecodable {
    public var subCommand: UInt64
    /// subCommandParams exactly as sent (the decoder accepts only canonical
    /// CBOR, so this encodes to the bytes the platform authenticated).
    public var subCommandParams: CBORValue?
    public var pinUvAuthProtocol: UInt64?
    public var pinUvAuthParam: [UInt8]?
    public var newMinPINLength: UInt64?
    public var minPinLengthRPIDs: [String]?
    public var forceChangePin: Bool?

    /// Reads the request map.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("authenticatorConfig parameters")
        subCommand = try map.required(0x01, "subCommand").unsignedValue("subCommand")
        if let params = map[int: 0x02] {
            let paramsMap = try params.mapValue("subCommandParams")
            subCommandParams = params
            // Only setMinPINLength defines parameters; for the others the
            // keys mean nothing and are not read.
            if subCommand == AuthenticatorConfigSubcommand.setMinPINLength.rawValue {
                newMinPINLength = try paramsMap[int: 0x01]?.unsignedValue("newMinPINLength")
                minPinLengthRPIDs = try paramsMap[int: 0x02]?
                    .textArrayValue("minPinLengthRPIDs", element: "minPinLengthRPIDs[]")
                forceChangePin = try paramsMap[int: 0x03]?.boolValue("forceChangePin")
            }
        }
        pinUvAuthProtocol = try map[int: 0x03]?.unsignedValue("pinUvAuthProtocol")
        pinUvAuthParam = try map[int: 0x04]?.bytesValue("pinUvAuthParam")
    }
}
