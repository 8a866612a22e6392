// The WebAuthn structures CTAP requests carry (CTAP 2.1 §6.1 and WebAuthn §5.4):
// relying party, user and credential descriptors, as CBOR maps with text keys.
// Each is read from its map and written as one (CBORDecodable, CBOREncodable).

public import CBOR

/// PublicKeyCredentialRpEntity: `id` (required), `name`.
public struct RelyingPartyEntity: Sendable, Equatable {
    /// `id`: the RP ID.
    public var id: String
    /// `name`.
    public var name: String?
}

extension RelyingPartyEntity: CBORDecodable, CBOREncodable {
    /// Reads the map; unknown keys (`icon`) are ignored.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("rp")
        id = try map.required("id").textValue("rp.id")
        name = try map[text: "name"]?.textValue("rp.name")
    }

    /// The map form credentialManagement returns: `id`, and `name` when known.
    public var cbor: CBORValue {
        var entries: [(String, CBORValue)] = [("id", .text(id))]
        if let name { entries.append(("name", .text(name))) }
        return .textMap(entries)
    }
}

/// PublicKeyCredentialUserEntity: `id` (required, 1 to 64 bytes), `name`,
/// `displayName`.
public struct UserEntity: Sendable, Equatable {
    /// The lengths a user handle may have in a makeCredential: 1 to 64 bytes.
    /// CTAP 2.1 §6.1 takes the user entity from WebAuthn, whose user handle
    /// has "a maximum size of 64 bytes" (§5.4.3) and, since Level 3, must not
    /// be empty (w3c/webauthn#1536: empty handles break platforms). Outside
    /// them the request gets CTAP1_ERR_INVALID_LENGTH.
    public static let idLengths = 1...64

    /// `id`: the user handle.
    public var id: [UInt8]
    /// `name`.
    public var name: String?
    /// `displayName`.
    public var displayName: String?
}

extension UserEntity: CBORDecodable, CBOREncodable {
    /// Reads the map; unknown keys (`icon`) are ignored.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("user")
        id = try map.required("id").bytesValue("user.id")
        name = try map[text: "name"]?.textValue("user.name")
        displayName = try map[text: "displayName"]?.textValue("user.displayName")
    }

    /// The whole entity: `id`, and `name` and `displayName` when known.
    public var cbor: CBORValue { cbor(identifying: true) }

    /// The map form: `id` always; `name` and `displayName` only when
    /// `identifying` (CTAP 2.1 §6.2.2: an assertion names the user only for
    /// an account chooser of several accounts, and only after user
    /// verification).
    public func cbor(identifying: Bool) -> CBORValue {
        var entries: [(String, CBORValue)] = [("id", .bytes(id))]
        if identifying {
            if let name { entries.append(("name", .text(name))) }
            if let displayName { entries.append(("displayName", .text(displayName))) }
        }
        return .textMap(entries)
    }
}

/// PublicKeyCredentialDescriptor: `type` and `id` (required), `transports`.
public struct CredentialDescriptor: Sendable, Equatable, CBORDecodable, CBOREncodable {
    /// `type`; only "public-key" names a credential this key can know.
    public var type: String
    /// `id`: the credential ID.
    public var id: [UInt8]

    public init(type: String = "public-key", id: [UInt8]) {
        self.type = type
        self.id = id
    }

    /// Reads the map; `transports` is checked for type only.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("credential descriptor")
        type = try map.required("type").textValue("descriptor.type")
        id = try map.required("id").bytesValue("descriptor.id")
        if let transports = map[text: "transports"] {
            for transport in try transports.arrayValue("descriptor.transports") {
                _ = try transport.textValue("descriptor.transports[]")
            }
        }
    }

    /// The map form the authenticator returns.
    public var cbor: CBORValue { .textMap([("type", .text(type)), ("id", .bytes(id))]) }
}

/// PublicKeyCredentialParameters: `type` and `alg`.
public struct CredentialParameters: Sendable, Equatable, CBORDecodable, CBOREncodable {
    /// `type`.
    public var type: String
    /// `alg`: a COSE algorithm identifier.
    public var alg: Int

    public init(type: String = "public-key", alg: Int) {
        self.type = type
        self.alg = alg
    }

    /// Reads the map (both keys required).
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("pubKeyCredParams[]")
        type = try map.required("type").textValue("pubKeyCredParams[].type")
        alg = try map.required("alg").intValue("pubKeyCredParams[].alg")
    }

    /// The map form used in getInfo's `algorithms`.
    public var cbor: CBORValue { .textMap([("alg", .int(alg)), ("type", .text(type))]) }
}
