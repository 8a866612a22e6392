// The authenticator extensions latchkey implements (CTAP 2.1 §12; hmac-secret-mc
// and thirdPartyPayment from CTAP 2.2, and the drafted previewSign,
// PreviewSign.swift): their request inputs, read strictly. Extensions the key
// does not offer (unknown to latchkey, or switched off for this key) are ignored
// unread (§6.1.2 step 4, §6.2.2 step 4); an offered one with a value of the
// wrong type is a CBOR type error, as in any other parameter. Which are offered
// is context a request's reading takes (`ExtensionInputsDecodable`).

public import CBOR

/// Extension identifiers, in the order getInfo lists them.
public enum ExtensionIdentifier {
    public static let credProtect = "credProtect"
    public static let hmacSecret = "hmac-secret"
    public static let hmacSecretMakeCredential = "hmac-secret-mc"
    public static let credBlob = "credBlob"
    public static let largeBlobKey = "largeBlobKey"
    public static let minPinLength = "minPinLength"
    public static let thirdPartyPayment = "thirdPartyPayment"
    /// The drafted WebAuthn sign extension, version 4 (PreviewSign.swift).
    public static let previewSign = "previewSign"

    /// Every extension latchkey supports (getInfo 0x02).
    public static let supported = [
        credProtect, hmacSecret, hmacSecretMakeCredential, credBlob, largeBlobKey, minPinLength, thirdPartyPayment,
        previewSign,
    ]

    /// What a key offers unless configured otherwise: all but previewSign,
    /// a draft that is off until a key is switched to it.
    public static let offeredByDefault = supported.filter { $0 != previewSign }

    /// Every supported identifier, as a set: what a request is read against
    /// when no key's configuration narrows it.
    public static let all = Set(supported)
}

/// A wire type that carries extension inputs, read against the extensions a
/// key offers: makeCredential's and getAssertion's requests and their
/// extensions maps.
///
/// Its `CBORDecodable` reading, `init(cbor:)`, offers every extension
/// latchkey supports: the message as the spec defines it, for callers that
/// are no particular key (tests, fuzzers, tools). The engine reads with its
/// key's own set (`init(cbor:offering:)`) and cannot leave that to a later
/// step: the input of an extension the key does not offer must be ignored
/// unread (CTAP 2.1 §6.1.2 step 4, §6.2.2 step 4), so a malformed one is no
/// error on that key, while an offered one is read where the spec reads it,
/// among the other parameters, so that which of two malformed parameters
/// answers stays as it was.
public protocol ExtensionInputsDecodable: CBORDecodable {
    /// Reads the value, and the inputs of the extensions in `extensions` only.
    init(cbor: CBORValue, offering extensions: Set<String>) throws(CBORError)
}

extension ExtensionInputsDecodable {
    /// Reads the value with every supported extension offered.
    public init(cbor: CBORValue) throws(CBORError) {
        try self.init(cbor: cbor, offering: ExtensionIdentifier.all)
    }
}

extension CBORValue {
    /// The value read as `Value`, with the inputs of the extensions in
    /// `extensions` only.
    func decoded<Value: ExtensionInputsDecodable>(
        as _: Value.Type = Value.self,
        offering extensions: Set<String>
    ) throws(CBORError) -> Value {
        try Value(cbor: self, offering: extensions)
    }
}

/// credProtect levels (CTAP 2.1 §12.1).
public enum CredentialProtection: UInt8, Sendable, Comparable {
    /// userVerificationOptional: usable without user verification.
    case optional = 1
    /// userVerificationOptionalWithCredentialIDList: without user
    /// verification only when the RP names the credential (allowList), so a
    /// discoverable credential cannot be found by an unverified user.
    case optionalWithCredentialIDList = 2
    /// userVerificationRequired: never usable without user verification.
    case required = 3

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether a credential at this level may be used: `listed` says the
    /// platform named it in an allowList (or excludeList).
    public func permits(userVerified: Bool, listed: Bool) -> Bool {
        switch self {
        case .optional: true
        case .optionalWithCredentialIDList: userVerified || listed
        case .required: userVerified
        }
    }
}

/// The hmac-secret input of getAssertion, and the hmac-secret-mc input of
/// makeCredential (CTAP 2.1 §12.5, CTAP 2.2 §12.7).
///
/// | key  | name              | type |
/// |------|-------------------|------|
/// | 0x01 | keyAgreement      | COSE_Key, required |
/// | 0x02 | saltEnc           | bytes, required |
/// | 0x03 | saltAuth          | bytes, required |
/// | 0x04 | pinUvAuthProtocol | unsigned, default 1 |
public struct HmacSecretInput: Sendable, CBORDecodable {
    public var keyAgreement: CBORValue
    public var saltEnc: [UInt8]
    public var saltAuth: [UInt8]
    public var pinUvAuthProtocol: UInt64

    /// Reads getAssertion's hmac-secret input.
    public init(cbor: CBORValue) throws(CBORError) {
        try self.init(cbor: cbor, ExtensionIdentifier.hmacSecret)
    }

    /// Reads the map; `what` names the extension in failures.
    init(cbor: CBORValue, _ what: String) throws(CBORError) {
        let map = try cbor.mapValue(what)
        keyAgreement = try map.required(0x01, "\(what).keyAgreement")
        _ = try keyAgreement.mapValue("\(what).keyAgreement")
        saltEnc = try map.required(0x02, "\(what).saltEnc").bytesValue("\(what).saltEnc")
        saltAuth = try map.required(0x03, "\(what).saltAuth").bytesValue("\(what).saltAuth")
        // Protocol 1 is implied for clients older than protocol 2 (§12.5).
        pinUvAuthProtocol = try map[int: 0x04]?.unsignedValue("\(what).pinUvAuthProtocol") ?? 1
    }
}

/// The extensions of a makeCredential request latchkey acts on.
public struct MakeCredentialExtensions: Sendable, ExtensionInputsDecodable {
    /// credProtect: the level asked for.
    public var credProtect: CredentialProtection?
    /// hmac-secret: true asks for a credential with CredRandom.
    public var hmacSecret = false
    /// hmac-secret-mc: salts to evaluate at once with the new credential.
    public var hmacSecretMakeCredential: HmacSecretInput?
    /// credBlob: bytes to keep with the credential.
    public var credBlob: [UInt8]?
    /// largeBlobKey: true asks for a large-blob key (discoverable
    /// credentials); false is an invalid option (§12.3).
    public var largeBlobKey: Bool?
    /// minPinLength: true asks for the minimum PIN length, for permitted RPs.
    public var minPinLength = false
    /// thirdPartyPayment: true makes a payment credential (CTAP 2.2 §12.9).
    public var thirdPartyPayment = false
    /// previewSign: a signing key to generate with the credential.
    public var previewSign: PreviewSignGenerateKeyInput?

    public init() {}

    /// Reads the extensions map, and the inputs of the extensions in
    /// `offered` only; a key configured without an extension ignores it
    /// unread, as one that never knew it would (§6.1.2 step 4).
    public init(cbor: CBORValue, offering offered: Set<String>) throws(CBORError) {
        for entry in try cbor.mapValue("extensions").entries {
            guard case .text(let identifier) = entry.key, offered.contains(identifier) else { continue }
            switch identifier {
            case ExtensionIdentifier.credProtect:
                let level = try entry.value.unsignedValue("credProtect")
                // An unknown level is not a type this key can hold (as OpenSK
                // answers; CTAP 2.1 §12.1 defines exactly three).
                guard level <= 3, let protection = CredentialProtection(rawValue: UInt8(level)) else {
                    throw CBORError(.unexpectedType, "credProtect \(level) is not 1, 2 or 3")
                }
                credProtect = protection
            case ExtensionIdentifier.hmacSecret:
                hmacSecret = try entry.value.boolValue("hmac-secret")
            case ExtensionIdentifier.hmacSecretMakeCredential:
                hmacSecretMakeCredential = try HmacSecretInput(cbor: entry.value, "hmac-secret-mc")
            case ExtensionIdentifier.credBlob:
                credBlob = try entry.value.bytesValue("credBlob")
            case ExtensionIdentifier.largeBlobKey:
                largeBlobKey = try entry.value.boolValue("largeBlobKey")
            case ExtensionIdentifier.minPinLength:
                minPinLength = try entry.value.boolValue("minPinLength")
            case ExtensionIdentifier.thirdPartyPayment:
                thirdPartyPayment = try entry.value.boolValue("thirdPartyPayment")
            case ExtensionIdentifier.previewSign:
                previewSign = try PreviewSignGenerateKeyInput(cbor: entry.value)
            default:
                continue
            }
        }
        // hmac-secret-mc rides on hmac-secret: without it there is no
        // CredRandom to evaluate (CTAP 2.2 §12.7).
        if !hmacSecret { hmacSecretMakeCredential = nil }
    }
}

/// The extensions of a getAssertion request latchkey acts on.
public struct GetAssertionExtensions: Sendable, ExtensionInputsDecodable {
    /// hmac-secret: salts to evaluate with the credential's CredRandom.
    public var hmacSecret: HmacSecretInput?
    /// credBlob: true asks for the credential's blob.
    public var credBlob = false
    /// largeBlobKey: true asks for the credential's large-blob key; false is
    /// an invalid option (§12.3).
    public var largeBlobKey: Bool?
    /// thirdPartyPayment: true asks whether the credential is a payment
    /// credential (CTAP 2.2 §12.9).
    public var thirdPartyPayment = false
    /// previewSign: data to sign with one of the credential's signing keys.
    public var previewSign: PreviewSignSignInput?

    public init() {}

    /// Reads the extensions map, and the inputs of the extensions in
    /// `offered` only; others are ignored unread (§6.2.2 step 4).
    public init(cbor: CBORValue, offering offered: Set<String>) throws(CBORError) {
        for entry in try cbor.mapValue("extensions").entries {
            guard case .text(let identifier) = entry.key, offered.contains(identifier) else { continue }
            switch identifier {
            case ExtensionIdentifier.hmacSecret:
                hmacSecret = try HmacSecretInput(cbor: entry.value)
            case ExtensionIdentifier.credBlob:
                credBlob = try entry.value.boolValue("credBlob")
            case ExtensionIdentifier.largeBlobKey:
                largeBlobKey = try entry.value.boolValue("largeBlobKey")
            case ExtensionIdentifier.thirdPartyPayment:
                thirdPartyPayment = try entry.value.boolValue("thirdPartyPayment")
            case ExtensionIdentifier.previewSign:
                previewSign = try PreviewSignSignInput(cbor: entry.value)
            default:
                continue
            }
        }
    }
}
