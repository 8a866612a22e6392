// The benchmarks' baselines: a signature straight through OpenSSL's EVP API (or, for
// ML-DSA, which Debian 12's OpenSSL lacks, straight through swift-crypto), with no latchkey
// code in between. Every other figure is read as a multiple of one of them.

import CBenchOpenSSL
import Crypto

/// The key types latchkey signs with, as the baselines make them.
public enum RawAlgorithm: String, CaseIterable, Sendable {
    case es256 = "ES256"
    case edDSA = "EdDSA"
    case es384 = "ES384"
    case es512 = "ES512"
    case es256K = "ES256K"
    case rs256 = "RS256"
    case ps256 = "PS256"
    case mldsa65 = "ML-DSA-65"
    case mldsa87 = "ML-DSA-87"

    /// Its COSE algorithm identifier. The fully specified ESP256, ESP384, ESP512 and
    /// Ed25519 are the keys and signatures of ES256, ES384, ES512 and EdDSA.
    public var coseIdentifier: Int {
        switch self {
        case .es256: -7
        case .edDSA: -8
        case .es384: -35
        case .es512: -36
        case .es256K: -47
        case .rs256: -257
        case .ps256: -37
        case .mldsa65: -49
        case .mldsa87: -50
        }
    }
}

/// A key of one algorithm and a signing call with nothing of latchkey's in between.
public final class RawSigner {
    private let algorithm: RawAlgorithm
    private let key: OpaquePointer?
    private let mldsa65: MLDSA65.PrivateKey?
    private let mldsa87: MLDSA87.PrivateKey?

    /// A P-256 signer: the baseline of the ES256 benchmarks.
    public convenience init() { self.init(.es256) }

    public init(_ algorithm: RawAlgorithm) {
        self.algorithm = algorithm
        mldsa65 = algorithm == .mldsa65 ? try! MLDSA65.PrivateKey() : nil
        mldsa87 = algorithm == .mldsa87 ? try! MLDSA87.PrivateKey() : nil
        switch algorithm {
        case .mldsa65, .mldsa87:
            key = nil
        case .edDSA:
            key = Self.generate(EVP_PKEY_ED25519) { _ in }
        case .rs256, .ps256:
            key = Self.generate(EVP_PKEY_RSA) { precondition(EVP_PKEY_CTX_set_rsa_keygen_bits($0, 2048) == 1) }
        case .es256, .es384, .es512, .es256K:
            let curve = [.es256: NID_X9_62_prime256v1, .es384: NID_secp384r1, .es512: NID_secp521r1][algorithm]
                ?? NID_secp256k1
            key = Self.generate(EVP_PKEY_EC) { precondition(EVP_PKEY_CTX_set_ec_paramgen_curve_nid($0, curve) == 1) }
        }
    }

    private static func generate(_ type: Int32, _ configure: (OpaquePointer?) -> Void) -> OpaquePointer {
        let context = EVP_PKEY_CTX_new_id(type, nil)
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer? = nil
        precondition(EVP_PKEY_keygen_init(context) == 1)
        configure(context)
        precondition(EVP_PKEY_keygen(context, &generated) == 1)
        return generated!
    }

    deinit { EVP_PKEY_free(key) }

    /// Signs `message` as the algorithm does (hashing it with the algorithm's digest; PSS
    /// with a 32-byte salt) and returns the signature's length.
    public func sign(_ message: [UInt8]) -> Int {
        if let mldsa65 { return try! mldsa65.signature(for: message).count }
        if let mldsa87 { return try! mldsa87.signature(for: message).count }
        let digest: OpaquePointer?
        switch algorithm {
        case .edDSA: digest = nil
        case .es384: digest = EVP_sha384()
        case .es512: digest = EVP_sha512()
        default: digest = EVP_sha256()
        }
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        var parameters: OpaquePointer? = nil
        precondition(EVP_DigestSignInit(context, &parameters, digest, nil, key) == 1)
        if algorithm == .ps256 {
            precondition(EVP_PKEY_CTX_set_rsa_padding(parameters, RSA_PKCS1_PSS_PADDING) == 1)
            precondition(EVP_PKEY_CTX_set_rsa_pss_saltlen(parameters, 32) == 1)
        }
        // One call with room for the longest (RSA-2048's 256 bytes), as ES256's baseline
        // always made.
        var length = 256
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(context, &signature, &length, message, message.count) == 1)
        return length
    }
}
