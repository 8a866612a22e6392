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
public enum CredentialPrivateKey: Sendable {
    /// A P-256 key (ES256).
    case p256(P256PrivateKey)
    /// An Ed25519 key (EdDSA).
    case ed25519(Ed25519PrivateKey)

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

    /// The algorithm.
    public var algorithm: COSEAlgorithm {
        switch self {
        case .p256: .es256
        case .ed25519: .edDSA
        }
    }

    /// The 32 raw private key bytes.
    public var rawRepresentation: [UInt8] {
        switch self {
        case .p256(let key): key.rawRepresentation
        case .ed25519(let key): key.rawRepresentation
        }
    }

    /// The public key as a COSE_Key: EC2 {1: 2, 3: -7, -1: 1, -2: x, -3: y} or
    /// OKP {1: 1, 3: -8, -1: 6, -2: x}.
    public var publicCOSEKey: CBORValue {
        switch self {
        case .p256(let key):
            let publicKey = key.publicKey
            return .intMap([(1, 2), (3, -7), (-1, 1), (-2, .bytes(publicKey.x)), (-3, .bytes(publicKey.y))])
        case .ed25519(let key):
            return .intMap([(1, 1), (3, -8), (-1, 6), (-2, .bytes(key.publicKey.rawRepresentation))])
        }
    }

    /// The WebAuthn signature over `message`: DER ECDSA for ES256, the 64-byte
    /// Ed25519 signature for EdDSA.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        switch self {
        case .p256(let key): try key.signature(for: message)
        case .ed25519(let key): try key.signature(for: message)
        }
    }
}
