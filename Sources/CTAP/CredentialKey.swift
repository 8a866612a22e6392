// A credential's key pair in either algorithm latchkey supports, with its
// COSE_Key form (RFC 9053 §2, §7.1–7.2) and its WebAuthn signature.

public import CBOR
public import LatchkeyCrypto

/// COSE algorithm identifiers latchkey signs with.
public enum COSEAlgorithm: Int, Sendable, CaseIterable {
    /// ES256: ECDSA with SHA-256 on P-256.
    case es256 = -7
    /// EdDSA: Ed25519.
    case edDSA = -8
}

/// The private key of one credential.
///
/// A struct with one optional reference per algorithm rather than an enum with
/// class payloads: Swift keeps such an enum's case in the spare bits of the
/// pointer, which LeakSanitizer cannot follow, so every cached Ed25519 key
/// looked leaked under the fuzzers.
public struct CredentialPrivateKey: Sendable {
    /// The algorithm.
    public let algorithm: COSEAlgorithm
    /// The key, for ES256.
    public let p256: P256PrivateKey?
    /// The key, for EdDSA.
    public let ed25519: Ed25519PrivateKey?

    /// An ES256 key.
    public static func p256(_ key: P256PrivateKey) -> Self {
        Self(algorithm: .es256, p256: key, ed25519: nil)
    }

    /// An EdDSA key.
    public static func ed25519(_ key: Ed25519PrivateKey) -> Self {
        Self(algorithm: .edDSA, p256: nil, ed25519: key)
    }

    private init(algorithm: COSEAlgorithm, p256: P256PrivateKey?, ed25519: Ed25519PrivateKey?) {
        self.algorithm = algorithm
        self.p256 = p256
        self.ed25519 = ed25519
    }

    /// Generates a key from `entropy`, drawing 32 bytes until they form a valid
    /// key (a P-256 scalar must lie in [1, n-1]).
    public static func generate(_ algorithm: COSEAlgorithm, entropy: any EntropySource) throws(CryptoError) -> Self {
        switch algorithm {
        case .es256:
            while true {
                if let key = try? P256PrivateKey(rawRepresentation: entropy.bytes(count: 32)) { return .p256(key) }
            }
        case .edDSA:
            return .ed25519(try Ed25519PrivateKey(rawRepresentation: entropy.bytes(count: 32)))
        }
    }

    /// Rebuilds a key from its algorithm and 32 raw bytes.
    public init(algorithm: COSEAlgorithm, rawRepresentation: [UInt8]) throws(CryptoError) {
        switch algorithm {
        case .es256: self = .p256(try P256PrivateKey(rawRepresentation: rawRepresentation))
        case .edDSA: self = .ed25519(try Ed25519PrivateKey(rawRepresentation: rawRepresentation))
        }
    }

    /// A key from PKCS#8 PrivateKeyInfo DER: P-256 (ES256) or Ed25519
    /// (EdDSA), whichever it holds; anything else throws `.invalidKey`.
    public init(pkcs8: [UInt8]) throws(CryptoError) {
        if let key = try? P256PrivateKey(pkcs8DERRepresentation: pkcs8) {
            self = .p256(key)
        } else {
            self = .ed25519(try Ed25519PrivateKey(pkcs8DERRepresentation: pkcs8))
        }
    }

    /// The key as PKCS#8 PrivateKeyInfo DER.
    public var pkcs8Representation: [UInt8] {
        if let p256 { return p256.pkcs8DERRepresentation }
        return ed25519!.pkcs8DERRepresentation
    }

    /// The 32 raw private key bytes.
    public var rawRepresentation: [UInt8] {
        if let p256 { return p256.rawRepresentation }
        return ed25519!.rawRepresentation
    }

    /// The public key as a COSE_Key: EC2 {1: 2, 3: -7, -1: 1, -2: x, -3: y} or
    /// OKP {1: 1, 3: -8, -1: 6, -2: x}.
    public var publicCOSEKey: CBORValue {
        if let p256 {
            let publicKey = p256.publicKey
            return .intMap([(1, 2), (3, -7), (-1, 1), (-2, .bytes(publicKey.x)), (-3, .bytes(publicKey.y))])
        }
        return .intMap([(1, 1), (3, -8), (-1, 6), (-2, .bytes(ed25519!.publicKey.rawRepresentation))])
    }

    /// The WebAuthn signature over `message`: DER ECDSA for ES256, the 64-byte
    /// Ed25519 signature for EdDSA.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        if let p256 { return try p256.signature(for: message) }
        return try ed25519!.signature(for: message)
    }
}
