// The previewSign extension (the WebAuthn sign extension, version 4 as
// python-fido2 2.2.1 and Yubico's device suite speak it): its inputs and
// outputs on the wire and its algorithms; its signing keys are
// PreviewSignKey.swift.
//
// makeCredential input "previewSign" (generateKey):
//
// | key | name       | type |
// |-----|------------|------|
// | 3   | algorithms | array of COSE algorithm identifiers, most preferred first |
// | 4   | flags      | unsigned: 0b000 none, 0b001 UP required, 0b101 UP and UV required |
//
// getAssertion input "previewSign" (sign):
//
// | key | name           | type |
// |-----|----------------|------|
// | 2   | keyHandle      | bytes: the signing key's handle (its credential ID in the inner attestation) |
// | 6   | tbs            | bytes: the message, or its SHA-256 digest for a split algorithm |
// | 7   | additionalArgs | bytes: CBOR COSE_Sign_Args, {3: alg, -1: kh, -2: ctx} for ARKG |
//
// Outputs: makeCredential's signed {3: alg} in authenticatorData and the
// unsigned {7: attestation object} (a CBOR map {1: fmt, 2: authData, 3:
// attStmt} whose attested credential is the signing key: its handle and
// public key, with {3: alg, 4: flags} as the inner authData's previewSign
// output); getAssertion's signed {6: signature}.

public import CBOR

/// The algorithms previewSign generates keys for, in the order a request's
/// list is tried against (the request's own order decides).
public enum PreviewSignAlgorithm: Int, Sendable, CaseIterable {
    /// ESP256 (RFC 9864): ECDSA P-256 with SHA-256 over `tbs`.
    case esp256 = -9
    /// ES256: the same signature, the polymorphic identifier.
    case es256 = -7
    /// ESP256-split (draft-lundberg-cose-two-party-signing-algs-06, the
    /// requested assignment): `tbs` is the SHA-256 digest, signed as given.
    case esp256Split = -300
    /// ESP256-split under the placeholder some prototypes use.
    case esp256SplitPlaceholder = -70009
    /// ESP256-split with a key derived by ARKG-P256
    /// (draft-bradleylundberg-cfrg-arkg-10 §8.3, placeholder value).
    case esp256SplitARKG = -65539

    /// The COSE identifier of ARKG-P256 public seeds (placeholder).
    public static let arkgP256 = -65700
    /// The COSE key type of ARKG public seeds (placeholder).
    public static let arkgPublicKeyType = -65537

    /// Whether `tbs` is a SHA-256 digest the platform computed.
    public var prehashed: Bool { self != .esp256 && self != .es256 }

    /// The algorithm third parties verify signatures with (the public key's
    /// `alg`): ES256 for ES256, ESP256 for the rest.
    var verificationAlgorithm: COSEAlgorithm { self == .es256 ? .es256 : .esp256 }

    /// The handle's algorithm byte; a released value never changes.
    var tag: UInt8 {
        switch self {
        case .esp256: 1
        case .es256: 2
        case .esp256Split: 3
        case .esp256SplitPlaceholder: 4
        case .esp256SplitARKG: 5
        }
    }

    init?(tag: UInt8) {
        guard let algorithm = Self.allCases.first(where: { $0.tag == tag }) else { return nil }
        self = algorithm
    }
}

/// The flags a signing key is made with (generateKey input 4).
public struct PreviewSignFlags: Sendable, Equatable {
    public var rawValue: UInt8

    /// Every signature needs user presence.
    public var requiresUserPresence: Bool { rawValue & 0b001 != 0 }
    /// Every signature needs user verification.
    public var requiresUserVerification: Bool { rawValue & 0b100 != 0 }

    /// The flags for `value`, or nil unless it is 0b000, 0b001 or 0b101
    /// (user verification only with presence).
    public init?(_ value: UInt64) {
        guard value == 0b000 || value == 0b001 || value == 0b101 else { return nil }
        rawValue = UInt8(value)
    }
}

/// The previewSign input of makeCredential (generateKey).
public struct PreviewSignGenerateKeyInput: Sendable, CBORDecodable {
    /// 3, algorithms: COSE identifiers, most preferred first.
    public var algorithms: [Int]
    /// 4, flags, as sent (checked by the command: a bad value is an option
    /// error, not a type error).
    public var flags: UInt64

    /// Reads the map.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("previewSign")
        var algorithms: [Int] = []
        for element in try map.required(0x03, "previewSign.algorithms").arrayValue("previewSign.algorithms") {
            algorithms.append(try element.intValue("previewSign.algorithms[]"))
        }
        self.algorithms = algorithms
        flags = try map.required(0x04, "previewSign.flags").unsignedValue("previewSign.flags")
    }
}

/// The previewSign input of getAssertion (sign). keyHandle and tbs are
/// optional here because their absence is CTAP2_ERR_INVALID_OPTION, which
/// the command answers.
public struct PreviewSignSignInput: Sendable, CBORDecodable {
    /// 2, keyHandle.
    public var keyHandle: [UInt8]?
    /// 6, tbs.
    public var tbs: [UInt8]?
    /// 7, additionalArgs: encoded COSE_Sign_Args.
    public var additionalArgs: [UInt8]?

    /// Reads the map.
    public init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("previewSign")
        keyHandle = try map[int: 0x02]?.bytesValue("previewSign.keyHandle")
        tbs = try map[int: 0x06]?.bytesValue("previewSign.tbs")
        additionalArgs = try map[int: 0x07]?.bytesValue("previewSign.additionalArgs")
    }
}

/// COSE_Sign_Args for ESP256-split-ARKG (draft-bradleylundberg-cfrg-arkg-10
/// §8.4): {3: alg, -1: kh, -2: ctx}; other keys are ignored.
struct ARKGSignArguments: Sendable, CBORDecodable {
    /// 3, alg; nil when absent.
    var alg: Int?
    /// -1, the ARKG key handle.
    var keyHandle: [UInt8]
    /// -2, the ARKG ctx.
    var ctx: [UInt8]

    init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("additionalArgs")
        alg = try map[int: 3]?.intValue("additionalArgs.alg")
        keyHandle = try map.required(-1, "additionalArgs.kh").bytesValue("additionalArgs.kh")
        ctx = try map.required(-2, "additionalArgs.ctx").bytesValue("additionalArgs.ctx")
    }
}
