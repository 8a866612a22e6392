// ECDSA and ECDH over NIST P-256 (secp256r1): the ES256 credential algorithm
// (COSE -7), the PIN/UV auth protocol key agreement and attestation signatures.

import COpenSSL
import Synchronization

/// A P-256 key pair.
///
/// Built from a 32-byte scalar so an injected entropy source can make keys
/// deterministically; `init()` draws that scalar from `SecureRandom`.
public final class P256PrivateKey: @unchecked Sendable {
    /// The private scalar alone: all that ECDSA and ECDH need. The public point
    /// costs a scalar multiplication, as much as a signature, so it is derived
    /// only when asked for (an assertion never needs it).
    let key: EVPKey
    private let derived = Mutex<(publicKey: P256PublicKey, keyPair: EVPKey)?>(nil)

    /// A fresh random key pair.
    public convenience init() throws(CryptoError) {
        // Rejection sampling keeps the scalar uniform in [1, n-1]; a draw falls
        // outside it with probability about 2^-32.
        var scalar = SecureRandom.bytes(count: P256.scalarByteCount)
        while (try? P256.scalar(scalar)) == nil {
            scalar = SecureRandom.bytes(count: P256.scalarByteCount)
        }
        try self.init(rawRepresentation: scalar)
    }

    /// The key pair whose private scalar is `rawRepresentation`, 32 bytes big-endian.
    ///
    /// Throws `.invalidKey` unless the length is 32 and the scalar lies in [1, n-1].
    public init(rawRepresentation: [UInt8]) throws(CryptoError) {
        let scalar = try P256.scalar(rawRepresentation)
        key = try P256.makeKey(publicKey: nil, scalar: scalar)
    }

    /// The public half of this key pair.
    public var publicKey: P256PublicKey {
        // Deriving from a scalar this type validated cannot fail short of memory exhaustion.
        try! derivedKeyPair().publicKey
    }

    /// The public point and an `EVP_PKEY` holding both halves, made once.
    private func derivedKeyPair() throws(CryptoError) -> (publicKey: P256PublicKey, keyPair: EVPKey) {
        let result: Result<(publicKey: P256PublicKey, keyPair: EVPKey), CryptoError> = derived.withLock { cached in
            if let cached { return .success(cached) }
            do throws(CryptoError) {
                let scalar = try P256.scalar(try key.bigEndianParameter(OSSLName.privateKey, count: P256.scalarByteCount))
                let group = try P256.group()
                let point = try OpenSSLObject(
                    EC_POINT_new(group.pointer), freedBy: EC_POINT_free, creator: "EC_POINT_new"
                )
                guard EC_POINT_mul(group.pointer, point.pointer, scalar.pointer, nil, nil, nil) == 1 else {
                    throw .openSSL("EC_POINT_mul")
                }
                var publicBytes = [UInt8](repeating: 0, count: P256.x963ByteCount)
                let encoded = EC_POINT_point2oct(
                    group.pointer,
                    point.pointer,
                    POINT_CONVERSION_UNCOMPRESSED,
                    &publicBytes,
                    publicBytes.count,
                    nil
                )
                guard encoded == P256.x963ByteCount else {
                    throw .openSSL("EC_POINT_point2oct")
                }
                let pair = (
                    publicKey: try P256PublicKey(x963Representation: publicBytes),
                    keyPair: try P256.makeKey(publicKey: publicBytes, scalar: scalar)
                )
                cached = pair
                return .success(pair)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The key pair in a PKCS#8 PrivateKeyInfo DER (RFC 5208, RFC 5915 inside).
    ///
    /// Throws `.invalidKey` unless the DER is exactly one P-256 key whose
    /// scalar is in range and whose embedded public key, if any, matches it.
    public convenience init(pkcs8DERRepresentation: [UInt8]) throws(CryptoError) {
        let decoded = try EVPKey.fromPKCS8(pkcs8DERRepresentation, algorithm: "EC")
        guard decoded.stringParameter(OSSLName.groupName) == P256.groupName else {
            throw CryptoError(.invalidKey, "PKCS#8 EC key is not on P-256")
        }
        try self.init(
            rawRepresentation: decoded.bigEndianParameter(OSSLName.privateKey, count: P256.scalarByteCount)
        )
        guard EVP_PKEY_eq(try derivedKeyPair().keyPair.pointer, decoded.pointer) == 1 else {
            throw .rejected(.invalidKey, "PKCS#8 public key does not match its private key")
        }
    }

    /// The private scalar, 32 bytes big-endian (left-padded with zeros).
    public var rawRepresentation: [UInt8] {
        // Reading back a parameter this code set cannot fail short of memory exhaustion.
        try! key.bigEndianParameter(OSSLName.privateKey, count: P256.scalarByteCount)
    }

    /// The key pair as PKCS#8 PrivateKeyInfo DER.
    public var pkcs8DERRepresentation: [UInt8] {
        // With the public point, as RFC 5915 recommends and other tools expect.
        try! derivedKeyPair().keyPair.pkcs8PrivateKeyInfo
    }

    /// An ECDSA signature with SHA-256 over `message`, DER-encoded
    /// (`Ecdsa-Sig-Value`, RFC 3279 §2.2.3), as WebAuthn ES256 and U2F use.
    ///
    /// The nonce comes from OpenSSL's random generator, so two signatures of
    /// one message differ; verify them, never compare them.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.sign(message, digest: EVP_sha256())
    }

    /// An ECDSA signature over `digest`, a SHA-256 digest another party
    /// computed (the split signing algorithms of
    /// draft-lundberg-cose-two-party-signing-algs, ESP256-split): the digest
    /// is signed as it is, not hashed again, so the signature verifies as
    /// ECDSA with SHA-256 over the message the digest was made from.
    /// Throws `.invalidKey` for a digest that is not 32 bytes.
    public func signature(forDigest digest: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard digest.count == SHA256.byteCount else {
            throw CryptoError(.invalidKey, "a SHA-256 digest is 32 bytes, got \(digest.count)")
        }
        let context = try key.makeContext()
        guard EVP_PKEY_sign_init(context.pointer) == 1 else { throw .openSSL("EVP_PKEY_sign_init") }
        var length = 0
        guard EVP_PKEY_sign(context.pointer, nil, &length, digest, digest.count) == 1 else {
            throw .openSSL("EVP_PKEY_sign")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_sign(context.pointer, &signature, &length, digest, digest.count) == 1 else {
            throw .openSSL("EVP_PKEY_sign")
        }
        signature.removeSubrange(length...)
        return signature
    }

    /// The ECDH shared secret with `peer`: the 32-byte x coordinate of the
    /// shared point, as CTAP 2.1 §6.5.6 (PIN/UV auth protocol 1) calls Z.
    public func sharedSecret(with peer: P256PublicKey) throws(CryptoError) -> [UInt8] {
        let context = try key.makeContext()
        guard EVP_PKEY_derive_init(context.pointer) == 1 else {
            throw .openSSL("EVP_PKEY_derive_init")
        }
        // Validate the peer again here: the point was checked on import, and
        // this keeps ECDH safe even if that ever changes.
        guard EVP_PKEY_derive_set_peer_ex(context.pointer, peer.key.pointer, 1) == 1 else {
            throw .rejected(.invalidKey, "ECDH peer key rejected")
        }
        var secret = [UInt8](repeating: 0, count: P256.coordinateByteCount)
        var length = secret.count
        guard EVP_PKEY_derive(context.pointer, &secret, &length) == 1, length == P256.coordinateByteCount else {
            throw .openSSL("EVP_PKEY_derive")
        }
        return secret
    }
}

/// A P-256 public key: a point on the curve, never the point at infinity.
public final class P256PublicKey: @unchecked Sendable {
    let key: EVPKey

    /// The uncompressed point, 0x04 || X || Y (SEC 1 §2.3.3), 65 bytes.
    public let x963Representation: [UInt8]

    /// The key at the uncompressed point 0x04 || X || Y (65 bytes).
    ///
    /// Throws `.invalidKey` for any other length or form, or a point not on
    /// the curve; accepting such a point would open ECDH to invalid-curve attacks.
    public init(x963Representation: [UInt8]) throws(CryptoError) {
        try ECKeyParameters.checkPoint(
            x963Representation, byteCount: P256.coordinateByteCount, group: P256.group(), curveName: "P-256"
        )
        self.x963Representation = x963Representation
        self.key = try P256.makeKey(publicKey: x963Representation, scalar: nil)
    }

    /// The key at the point (`x`, `y`), each coordinate 32 bytes big-endian, as
    /// a COSE_Key (-2, -3) carries them.
    public convenience init(x: [UInt8], y: [UInt8]) throws(CryptoError) {
        guard x.count == P256.coordinateByteCount, y.count == P256.coordinateByteCount else {
            throw CryptoError(.invalidKey, "P-256 coordinates must be 32 bytes each")
        }
        try self.init(x963Representation: [0x04] + x + y)
    }

    /// The key in a SubjectPublicKeyInfo DER (RFC 5480), with the named curve P-256.
    public convenience init(derRepresentation: [UInt8]) throws(CryptoError) {
        guard let decoded = derDecoded(derRepresentation, { d2i_PUBKEY(nil, $0, $1) }, free: EVP_PKEY_free) else {
            throw CryptoError(.invalidKey, "not a SubjectPublicKeyInfo")
        }
        let key = try EVPKey(decoded, creator: "d2i_PUBKEY")
        guard EVP_PKEY_is_a(key.pointer, "EC") == 1, key.stringParameter(OSSLName.groupName) == P256.groupName
        else {
            throw CryptoError(.invalidKey, "SubjectPublicKeyInfo is not a P-256 key")
        }
        // Rebuilding from the coordinates accepts a compressed point too and normalises it.
        try self.init(
            x: key.bigEndianParameter(OSSLName.publicX, count: P256.coordinateByteCount),
            y: key.bigEndianParameter(OSSLName.publicY, count: P256.coordinateByteCount)
        )
    }

    /// The x coordinate, 32 bytes big-endian.
    public var x: [UInt8] {
        Array(x963Representation[1...P256.coordinateByteCount])
    }

    /// The y coordinate, 32 bytes big-endian.
    public var y: [UInt8] {
        Array(x963Representation[(1 + P256.coordinateByteCount)...])
    }

    /// The key as SubjectPublicKeyInfo DER (RFC 5480), with the named curve P-256.
    public var derRepresentation: [UInt8] {
        key.subjectPublicKeyInfo
    }

    /// Whether `derSignature` is a valid ECDSA-with-SHA-256 signature of
    /// `message` under this key. Signatures not in strict DER are invalid.
    public func isValidSignature(_ derSignature: [UInt8], for message: [UInt8]) -> Bool {
        key.isValidSignature(derSignature, for: message, digest: EVP_sha256())
    }
}

/// Curve constants and the key construction both key types share.
enum P256 {
    /// The length of a scalar and of a coordinate, in bytes.
    static let scalarByteCount = 32
    static let coordinateByteCount = 32
    /// The length of an uncompressed point, in bytes.
    static let x963ByteCount = 65
    /// OpenSSL's name for P-256, as a key's group parameter reports it.
    static let groupName = "\(OSSLName.prime256v1)"

    // EVP_PKEY_PUBLIC_KEY and EVP_PKEY_KEYPAIR (evp.h) are multi-line macros
    // Swift cannot import; these spell out the same bit sets.
    private static let allParameters = OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS
    static let publicKeySelection = Int32(allParameters | OSSL_KEYMGMT_SELECT_PUBLIC_KEY)
    static let keyPairSelection = publicKeySelection | Int32(OSSL_KEYMGMT_SELECT_PRIVATE_KEY)

    /// A new handle on the P-256 group.
    static func group() throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        sharedGroup
    }

    /// One P-256 group for the process: building it (and its precomputation)
    /// costs about as much as a signature, and OpenSSL only reads it here.
    nonisolated(unsafe) private static let sharedGroup: OpenSSLObject<OpaquePointer> = {
        // Failure means memory exhaustion at first use.
        try! OpenSSLObject(
            EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1),
            freedBy: EC_GROUP_free,
            creator: "EC_GROUP_new_by_curve_name"
        )
    }()

    /// The BIGNUM of a 32-byte big-endian scalar, in secure memory and
    /// flagged constant-time; throws `.invalidKey` unless it is in [1, n-1].
    static func scalar(_ bytes: [UInt8]) throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        try ECKeyParameters.scalar(bytes, byteCount: scalarByteCount, group: group())
    }

    /// An `EVP_PKEY` for the validated point `publicKey` and/or the validated
    /// `scalar` (a private-only key signs and derives; it has no public point).
    static func makeKey(publicKey: [UInt8]?, scalar: OpenSSLObject<OpaquePointer>?) throws(CryptoError) -> EVPKey {
        try ECKeyParameters.makeKey(group: OSSLName.prime256v1, publicKey: publicKey, scalar: scalar)
    }
}
