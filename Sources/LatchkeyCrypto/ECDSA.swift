// ECDSA on the curves credentials use besides P-256: P-384 (ES384, ESP384),
// P-521 (ES512, ESP512) and secp256k1 (ES256K) (RFC 9053 §2.1, RFC 8812
// §3.2, RFC 9864 §2.1). P-256 keeps its own tuned type (P256.swift); the key
// construction from OpenSSL parameters is shared with it.

import COpenSSL

/// A curve of `ECPrivateKey`, with the hash its COSE algorithms sign with.
public enum ECCurve: Sendable, CaseIterable {
    /// NIST P-384 (secp384r1), with SHA-384.
    case p384
    /// NIST P-521 (secp521r1), with SHA-512.
    case p521
    /// SEC 2 secp256k1, with SHA-256.
    case secp256k1

    /// The length of a scalar and of a coordinate, in bytes.
    public var scalarByteCount: Int {
        switch self {
        case .p384: 48
        case .p521: 66
        case .secp256k1: 32
        }
    }

    /// OpenSSL's name for the curve, as a key's group parameter reports it.
    var groupName: StaticString {
        switch self {
        case .p384: "secp384r1"
        case .p521: "secp521r1"
        case .secp256k1: "secp256k1"
        }
    }

    var nid: Int32 {
        switch self {
        case .p384: NID_secp384r1
        case .p521: NID_secp521r1
        case .secp256k1: NID_secp256k1
        }
    }

    /// The hash ECDSA applies to the message first.
    var digest: OpaquePointer {
        switch self {
        case .p384: EVP_sha384()
        case .p521: EVP_sha512()
        case .secp256k1: EVP_sha256()
        }
    }

    /// The curve whose OpenSSL group name is `name`, if it is one of these.
    static func named(_ name: String?) -> ECCurve? {
        allCases.first { "\($0.groupName)" == name }
    }

    /// A new handle on the curve's group (only ever read).
    func group() throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        try OpenSSLObject(EC_GROUP_new_by_curve_name(nid), freedBy: EC_GROUP_free, creator: "EC_GROUP_new_by_curve_name")
    }
}

/// An ECDSA key pair on an `ECCurve`, built from its private scalar.
public final class ECPrivateKey: @unchecked Sendable {
    /// The curve.
    public let curve: ECCurve
    private let key: EVPKey
    /// The public half of this key pair.
    public let publicKey: ECPublicKey

    /// The key pair whose private scalar is `rawRepresentation`
    /// (`curve.scalarByteCount` bytes, big-endian); throws `.invalidKey`
    /// unless the length is right and the scalar lies in [1, n-1].
    public init(curve: ECCurve, rawRepresentation: [UInt8]) throws(CryptoError) {
        let group = try curve.group()
        let scalar = try ECKeyParameters.scalar(rawRepresentation, byteCount: curve.scalarByteCount, group: group)
        let point = try OpenSSLObject(EC_POINT_new(group.pointer), freedBy: EC_POINT_free, creator: "EC_POINT_new")
        guard EC_POINT_mul(group.pointer, point.pointer, scalar.pointer, nil, nil, nil) == 1 else {
            throw .openSSL("EC_POINT_mul")
        }
        let pointLength = 1 + 2 * curve.scalarByteCount
        var publicBytes = [UInt8](repeating: 0, count: pointLength)
        guard
            EC_POINT_point2oct(
                group.pointer, point.pointer, POINT_CONVERSION_UNCOMPRESSED, &publicBytes, pointLength, nil
            ) == pointLength
        else {
            throw .openSSL("EC_POINT_point2oct")
        }
        self.curve = curve
        key = try ECKeyParameters.makeKey(group: curve.groupName, publicKey: publicBytes, scalar: scalar)
        publicKey = try ECPublicKey(curve: curve, x963Representation: publicBytes)
    }

    /// The key pair derived from a 32-byte `seed`, always the same one for
    /// the same seed: HKDF-SHA-256 over the seed (info names the curve and
    /// a counter) gives candidate scalars, the top bits beyond the order's
    /// length cleared, until one lies in [1, n-1]. This lets a credential ID
    /// carry 32 bytes whatever the curve, and an injected entropy source
    /// make keys deterministically.
    public convenience init(curve: ECCurve, seed: [UInt8]) throws(CryptoError) {
        guard seed.count == 32 else { throw CryptoError(.invalidKey, "an EC key seed is 32 bytes") }
        let excessBits = curve.scalarByteCount * 8 - (curve == .p521 ? 521 : curve.scalarByteCount * 8)
        for counter in 0...UInt8.max {
            var candidate = HKDFSHA256.deriveKey(
                inputKeyMaterial: seed, salt: [],
                info: Array("latchkey/ec-scalar/\(curve.groupName)".utf8) + [counter],
                outputByteCount: curve.scalarByteCount
            )
            candidate[0] &= UInt8(0xFF >> excessBits)
            if let key = try? ECPrivateKey(curve: curve, rawRepresentation: candidate) {
                self.init(copying: key)
                return
            }
        }
        // 256 candidates all out of range: about 2^-8000 for these curves.
        throw CryptoError(.invalidKey, "no scalar in range derived from the seed")
    }

    private init(copying other: ECPrivateKey) {
        curve = other.curve
        key = other.key
        publicKey = other.publicKey
    }

    /// The key pair in a PKCS#8 PrivateKeyInfo DER (RFC 5208, RFC 5915
    /// inside) on any `ECCurve`; throws `.invalidKey` for anything else.
    public convenience init(pkcs8DERRepresentation: [UInt8]) throws(CryptoError) {
        let decoded = try EVPKey.fromPKCS8(pkcs8DERRepresentation, algorithm: "EC")
        guard let curve = ECCurve.named(decoded.stringParameter(OSSLName.groupName)) else {
            throw CryptoError(.invalidKey, "PKCS#8 EC key is not on P-384, P-521 or secp256k1")
        }
        try self.init(
            curve: curve,
            rawRepresentation: decoded.bigEndianParameter(OSSLName.privateKey, count: curve.scalarByteCount)
        )
        guard EVP_PKEY_eq(key.pointer, decoded.pointer) == 1 else {
            throw .rejected(.invalidKey, "PKCS#8 public key does not match its private key")
        }
    }

    /// The private scalar, big-endian, `curve.scalarByteCount` bytes.
    public var rawRepresentation: [UInt8] {
        // Reading back a parameter this code set cannot fail short of memory exhaustion.
        try! key.bigEndianParameter(OSSLName.privateKey, count: curve.scalarByteCount)
    }

    /// The key pair as PKCS#8 PrivateKeyInfo DER, with the public point.
    public var pkcs8DERRepresentation: [UInt8] { key.pkcs8PrivateKeyInfo }

    /// An ECDSA signature over `message` with the curve's hash, DER-encoded
    /// (`Ecdsa-Sig-Value`, RFC 3279 §2.2.3), as WebAuthn expects.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.sign(message, digest: curve.digest)
    }
}

/// An ECDSA public key on an `ECCurve`.
public final class ECPublicKey: @unchecked Sendable {
    /// The curve.
    public let curve: ECCurve
    private let key: EVPKey
    /// The uncompressed point, 0x04 || X || Y.
    public let x963Representation: [UInt8]

    /// The key at the uncompressed point 0x04 || X || Y; throws
    /// `.invalidKey` for any other form or a point not on the curve.
    public init(curve: ECCurve, x963Representation: [UInt8]) throws(CryptoError) {
        try ECKeyParameters.checkPoint(
            x963Representation, byteCount: curve.scalarByteCount, group: curve.group(), curveName: "\(curve.groupName)"
        )
        self.curve = curve
        self.x963Representation = x963Representation
        key = try ECKeyParameters.makeKey(group: curve.groupName, publicKey: x963Representation, scalar: nil)
    }

    /// The key at (`x`, `y`), each coordinate `curve.scalarByteCount` bytes, as a COSE_Key carries them.
    public convenience init(curve: ECCurve, x: [UInt8], y: [UInt8]) throws(CryptoError) {
        try self.init(curve: curve, x963Representation: [0x04] + x + y)
    }

    /// The x coordinate, big-endian.
    public var x: [UInt8] { Array(x963Representation[1...curve.scalarByteCount]) }

    /// The y coordinate, big-endian.
    public var y: [UInt8] { Array(x963Representation[(1 + curve.scalarByteCount)...]) }

    /// The key as SubjectPublicKeyInfo DER (RFC 5480), with the named curve.
    public var derRepresentation: [UInt8] { key.subjectPublicKeyInfo }

    /// Whether `derSignature` is a valid ECDSA signature of `message` with the curve's hash.
    public func isValidSignature(_ derSignature: [UInt8], for message: [UInt8]) -> Bool {
        key.isValidSignature(derSignature, for: message, digest: curve.digest)
    }
}

/// Building EC keys from OpenSSL parameters, for every curve.
enum ECKeyParameters {
    /// The BIGNUM of a big-endian scalar, in secure memory and flagged
    /// constant-time; throws `.invalidKey` unless it is `byteCount` bytes
    /// and in [1, n-1] for `group`.
    static func scalar(
        _ bytes: [UInt8],
        byteCount: Int,
        group: OpenSSLObject<OpaquePointer>
    ) throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        guard bytes.count == byteCount else {
            throw CryptoError(.invalidKey, "EC private key must be \(byteCount) bytes, got \(bytes.count)")
        }
        let scalar = try OpenSSLObject(BN_secure_new(), freedBy: BN_clear_free, creator: "BN_secure_new")
        BN_set_flags(scalar.pointer, BN_FLG_CONSTTIME)
        guard BN_bin2bn(bytes, Int32(bytes.count), scalar.pointer) != nil else {
            throw .openSSL("BN_bin2bn")
        }
        guard BN_is_zero(scalar.pointer) == 0, BN_cmp(scalar.pointer, EC_GROUP_get0_order(group.pointer)) < 0 else {
            throw CryptoError(.invalidKey, "EC private scalar is not in [1, n-1]")
        }
        return scalar
    }

    /// Throws `.invalidKey` unless `x963` is an uncompressed point 0x04 || X
    /// || Y (coordinates of `byteCount` bytes) on `group`'s curve; accepting
    /// a point off the curve would open ECDH to invalid-curve attacks.
    static func checkPoint(
        _ x963: [UInt8],
        byteCount: Int,
        group: OpenSSLObject<OpaquePointer>,
        curveName: String
    ) throws(CryptoError) {
        guard x963.count == 1 + 2 * byteCount, x963.first == 0x04 else {
            throw CryptoError(.invalidKey, "a \(curveName) public key is \(1 + 2 * byteCount) bytes starting 0x04")
        }
        let point = try OpenSSLObject(EC_POINT_new(group.pointer), freedBy: EC_POINT_free, creator: "EC_POINT_new")
        // EC_POINT_oct2point refuses points off the curve; checking again states the intent.
        guard EC_POINT_oct2point(group.pointer, point.pointer, x963, x963.count, nil) == 1,
            EC_POINT_is_on_curve(group.pointer, point.pointer, nil) == 1
        else {
            throw .rejected(.invalidKey, "point is not on \(curveName)")
        }
    }

    /// An `EVP_PKEY` on the named group for the validated point `publicKey`
    /// and/or the validated `scalar` (a private-only key signs and derives).
    static func makeKey(
        group: StaticString,
        publicKey: [UInt8]?,
        scalar: OpenSSLObject<OpaquePointer>?
    ) throws(CryptoError) -> EVPKey {
        let builder = try OpenSSLObject(OSSL_PARAM_BLD_new(), freedBy: OSSL_PARAM_BLD_free, creator: "OSSL_PARAM_BLD_new")
        // The builder keeps name pointers, so names are static strings; values are copied.
        guard OSSL_PARAM_BLD_push_utf8_string(builder.pointer, cString(OSSLName.groupName), cString(group), 0) == 1
        else {
            throw .openSSL("OSSL_PARAM_BLD_push")
        }
        if let publicKey {
            guard
                OSSL_PARAM_BLD_push_octet_string(
                    builder.pointer, cString(OSSLName.publicKey), publicKey, publicKey.count
                ) == 1
            else {
                throw .openSSL("OSSL_PARAM_BLD_push_octet_string")
            }
        }
        if let scalar {
            guard OSSL_PARAM_BLD_push_BN(builder.pointer, cString(OSSLName.privateKey), scalar.pointer) == 1 else {
                throw .openSSL("OSSL_PARAM_BLD_push_BN")
            }
        }
        let selection = scalar == nil ? P256.publicKeySelection : P256.keyPairSelection
        return try EVPKey.fromParameters(builder, type: "EC", selection: selection)
    }
}

extension EVPKey {
    /// The key of OpenSSL type `type` ("EC", "RSA", "RSA-PSS") that the
    /// parameters in `builder` describe.
    static func fromParameters(
        _ builder: OpenSSLObject<OpaquePointer>,
        type: String,
        selection: Int32
    ) throws(CryptoError) -> EVPKey {
        let parameters = try OpenSSLObject(
            OSSL_PARAM_BLD_to_param(builder.pointer), freedBy: OSSL_PARAM_free, creator: "OSSL_PARAM_BLD_to_param"
        )
        let context = try OpenSSLObject(
            EVP_PKEY_CTX_new_from_name(nil, type, nil), freedBy: EVP_PKEY_CTX_free,
            creator: "EVP_PKEY_CTX_new_from_name"
        )
        guard EVP_PKEY_fromdata_init(context.pointer) == 1 else {
            throw .openSSL("EVP_PKEY_fromdata_init")
        }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata(context.pointer, &key, selection, parameters.pointer) == 1 else {
            throw .openSSL("EVP_PKEY_fromdata")
        }
        return try EVPKey(key, creator: "EVP_PKEY_fromdata")
    }
}
