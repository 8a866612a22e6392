// A credential's key pair in every algorithm latchkey supports, with its
// COSE_Key form (RFC 9053 §2, §7.1–7.2; RFC 8230 §4 for RSA) and its
// WebAuthn signature. ML-DSA keys are AKP COSE keys
// (draft-ietf-cose-dilithium).

public import CBOR
public import LatchkeyCrypto

/// COSE algorithm identifiers latchkey signs with (IANA "COSE Algorithms").
///
/// The fully specified identifiers of RFC 9864 (ESP256, ESP384, ESP512,
/// Ed25519) name the same keys and signatures as the polymorphic ones they
/// refine (ES256, ES384, ES512, EdDSA); only the `alg` in the COSE_Key and
/// the attestation statement differs.
public enum COSEAlgorithm: Int, Sendable, CaseIterable {
    /// ES256: ECDSA with SHA-256 on P-256.
    case es256 = -7
    /// EdDSA: Ed25519.
    case edDSA = -8
    /// ESP256: ECDSA with SHA-256 on P-256, fully specified (RFC 9864).
    case esp256 = -9
    /// Ed25519, fully specified (RFC 9864).
    case ed25519 = -19
    /// ES384: ECDSA with SHA-384 on P-384.
    case es384 = -35
    /// ES512: ECDSA with SHA-512 on P-521.
    case es512 = -36
    /// PS256: RSASSA-PSS with SHA-256, MGF1-SHA-256, 32-byte salt (RFC 8230).
    case ps256 = -37
    /// ES256K: ECDSA with SHA-256 on secp256k1 (RFC 8812).
    case es256K = -47
    /// ESP384: ECDSA with SHA-384 on P-384, fully specified (RFC 9864).
    case esp384 = -51
    /// ESP512: ECDSA with SHA-512 on P-521, fully specified (RFC 9864).
    case esp512 = -52
    /// RS256: RSASSA-PKCS1-v1_5 with SHA-256, RSA-2048 (RFC 8812).
    case rs256 = -257
    /// ML-DSA-65 (FIPS 204, pure, empty context).
    case mldsa65 = -49
    /// ML-DSA-87 (FIPS 204, pure, empty context).
    case mldsa87 = -50

    /// What a key offers unless configured otherwise, in preference order:
    /// ES256 and EdDSA first as before, then the order a YubiKey 5.7 lists
    /// (ES384, RS256), then the rest, the fully specified ones, then ML-DSA
    /// (whose keys and signatures are kilobytes) last.
    public static let defaultOrder: [COSEAlgorithm] = [
        .es256, .edDSA, .es384, .rs256, .es512, .ps256, .es256K, .esp256, .esp384, .esp512, .ed25519, .mldsa65,
        .mldsa87,
    ]

    /// The IANA name ("ES256", "EdDSA", "ESP384", ...), as configuration names it.
    public var name: String {
        switch self {
        case .es256: "ES256"
        case .edDSA: "EdDSA"
        case .esp256: "ESP256"
        case .ed25519: "Ed25519"
        case .es384: "ES384"
        case .es512: "ES512"
        case .ps256: "PS256"
        case .es256K: "ES256K"
        case .esp384: "ESP384"
        case .esp512: "ESP512"
        case .rs256: "RS256"
        case .mldsa65: "ML-DSA-65"
        case .mldsa87: "ML-DSA-87"
        }
    }

    /// The algorithm named `name` (case-insensitive) or numbered `name`.
    public init?(name: String) {
        if let number = Int(name), let algorithm = COSEAlgorithm(rawValue: number) {
            self = algorithm
            return
        }
        guard let algorithm = Self.allCases.first(where: { $0.name.lowercased() == name.lowercased() }) else {
            return nil
        }
        self = algorithm
    }

    /// The polymorphic algorithm a fully specified one refines (itself for the others).
    var polymorphic: COSEAlgorithm {
        switch self {
        case .esp256: .es256
        case .ed25519: .edDSA
        case .esp384: .es384
        case .esp512: .es512
        default: self
        }
    }

    /// Whether the key is stored as its 32 raw bytes (a P-256 scalar, an
    /// Ed25519 or ML-DSA seed), as every credential was before the other
    /// algorithms; the others are stored as PKCS#8.
    var storesRawKey: Bool { [.es256, .esp256, .edDSA, .ed25519, .mldsa65, .mldsa87].contains(self) }

    /// The ML-DSA parameter set of an ML-DSA algorithm.
    var mldsaParameterSet: MLDSAParameterSet? {
        switch self {
        case .mldsa65: .mldsa65
        case .mldsa87: .mldsa87
        default: nil
        }
    }
}

/// The private key of one credential.
///
/// A struct with one optional reference per key type rather than an enum with
/// class payloads: Swift keeps such an enum's case in the spare bits of the
/// pointer, which LeakSanitizer cannot follow, so every cached Ed25519 key
/// looked leaked under the fuzzers.
///
/// Keys latchkey makes come from a 32-byte seed, which is all a
/// non-discoverable credential ID carries: for P-256, Ed25519 and ML-DSA
/// (FIPS 204 ML-DSA.KeyGen_internal) the seed is the key itself; P-384, P-521 and secp256k1 scalars and RSA-2048 keys are
/// derived from it deterministically (`ECPrivateKey(curve:seed:)`,
/// `RSAPrivateKey(seed:scheme:)`). A YubiKey likewise derives its
/// non-discoverable keys from what the credential ID carries. An imported
/// key of those algorithms has no seed, so it can only be discoverable.
public struct CredentialPrivateKey: Sendable {
    /// The algorithm.
    public let algorithm: COSEAlgorithm
    /// The key, for ES256 and ESP256.
    public let p256: P256PrivateKey?
    /// The key, for EdDSA and Ed25519.
    public let ed25519: Ed25519PrivateKey?
    /// The key, for ES384, ESP384, ES512, ESP512 and ES256K.
    public let ec: ECPrivateKey?
    /// The key, for RS256 and PS256.
    public let rsa: RSAPrivateKey?
    /// The key, for ML-DSA-65 and ML-DSA-87.
    public let mldsa: MLDSAPrivateKey?
    /// The 32 bytes the key was made from, when it was made from a seed.
    public let seed: [UInt8]?

    /// An ES256 key.
    public static func p256(_ key: P256PrivateKey) -> Self {
        Self(algorithm: .es256, p256: key)
    }

    /// An EdDSA key.
    public static func ed25519(_ key: Ed25519PrivateKey) -> Self {
        Self(algorithm: .edDSA, ed25519: key)
    }

    private init(
        algorithm: COSEAlgorithm,
        p256: P256PrivateKey? = nil,
        ed25519: Ed25519PrivateKey? = nil,
        ec: ECPrivateKey? = nil,
        rsa: RSAPrivateKey? = nil,
        mldsa: MLDSAPrivateKey? = nil,
        seed: [UInt8]? = nil
    ) {
        self.algorithm = algorithm
        self.p256 = p256
        self.ed25519 = ed25519
        self.ec = ec
        self.rsa = rsa
        self.mldsa = mldsa
        self.seed = seed ?? p256?.rawRepresentation ?? ed25519?.rawRepresentation ?? mldsa?.seed
    }

    /// The same key for another algorithm over the same key type (ES256 and
    /// ESP256, for instance).
    private func relabelled(_ algorithm: COSEAlgorithm) -> Self {
        Self(algorithm: algorithm, p256: p256, ed25519: ed25519, ec: ec, rsa: rsa, mldsa: mldsa, seed: seed)
    }

    /// The curve of an ECDSA algorithm other than P-256's.
    private static func curve(of algorithm: COSEAlgorithm) -> ECCurve? {
        switch algorithm {
        case .es384, .esp384: .p384
        case .es512, .esp512: .p521
        case .es256K: .secp256k1
        default: nil
        }
    }

    /// Generates a key from `entropy`: 32 bytes, drawn again until they form
    /// a valid P-256 scalar for ES256 (it must lie in [1, n-1]), the seed of
    /// the key for the others.
    public static func generate(_ algorithm: COSEAlgorithm, entropy: any EntropySource) throws(CryptoError) -> Self {
        switch algorithm {
        case .es256, .esp256:
            while true {
                if let key = try? Self(algorithm: algorithm, seed: entropy.bytes(count: 32)) { return key }
            }
        default:
            return try Self(algorithm: algorithm, seed: entropy.bytes(count: 32))
        }
    }

    /// The key of `algorithm` made from the 32-byte `seed`.
    public init(algorithm: COSEAlgorithm, seed: [UInt8]) throws(CryptoError) {
        switch algorithm {
        case .es256, .esp256: self = Self.p256(try P256PrivateKey(rawRepresentation: seed)).relabelled(algorithm)
        case .edDSA, .ed25519: self = Self.ed25519(try Ed25519PrivateKey(rawRepresentation: seed)).relabelled(algorithm)
        case .rs256, .ps256:
            let scheme: RSAScheme = algorithm == .rs256 ? .pkcs1v15 : .pss
            self = Self(algorithm: algorithm, rsa: try RSAPrivateKey(seed: seed, scheme: scheme), seed: seed)
        case .es384, .esp384, .es512, .esp512, .es256K:
            // `curve(of:)` names a curve for exactly these.
            let key = try ECPrivateKey(curve: Self.curve(of: algorithm)!, seed: seed)
            self = Self(algorithm: algorithm, ec: key, seed: seed)
        case .mldsa65, .mldsa87:
            // `mldsaParameterSet` names a parameter set for exactly these.
            self = Self(algorithm: algorithm, mldsa: try MLDSAPrivateKey(algorithm.mldsaParameterSet!, seed: seed))
        }
    }

    /// Rebuilds a key from its algorithm and stored form
    /// (`storedRepresentation`); throws `.invalidKey` when they disagree.
    public init(algorithm: COSEAlgorithm, storedRepresentation: [UInt8]) throws(CryptoError) {
        if algorithm.storesRawKey {
            self = try Self(algorithm: algorithm, seed: storedRepresentation)
            return
        }
        let key = try Self(pkcs8: storedRepresentation)
        guard key.algorithm == algorithm.polymorphic else {
            throw CryptoError(.invalidKey, "a stored \(algorithm.name) key is a \(key.algorithm.name) key")
        }
        self = key.relabelled(algorithm)
    }

    /// A key from PKCS#8 PrivateKeyInfo DER, with the polymorphic algorithm
    /// its type implies: P-256 is ES256, Ed25519 EdDSA, P-384 ES384, P-521
    /// ES512, secp256k1 ES256K, rsaEncryption RS256, id-RSASSA-PSS PS256,
    /// and id-ml-dsa-65/87 (seed form) ML-DSA-65/87. Anything else throws
    /// `.invalidKey`.
    public init(pkcs8: [UInt8]) throws(CryptoError) {
        if let key = try? P256PrivateKey(pkcs8DERRepresentation: pkcs8) {
            self = .p256(key)
        } else if let key = try? Ed25519PrivateKey(pkcs8DERRepresentation: pkcs8) {
            self = .ed25519(key)
        } else if let key = try? ECPrivateKey(pkcs8DERRepresentation: pkcs8) {
            let algorithm: COSEAlgorithm
            switch key.curve {
            case .p384: algorithm = .es384
            case .p521: algorithm = .es512
            case .secp256k1: algorithm = .es256K
            }
            self = Self(algorithm: algorithm, ec: key)
        } else if let key = try? MLDSAPrivateKey(pkcs8DERRepresentation: pkcs8) {
            self = Self(algorithm: key.parameterSet == .mldsa65 ? .mldsa65 : .mldsa87, mldsa: key)
        } else {
            let key = try RSAPrivateKey(pkcs8DERRepresentation: pkcs8)
            self = Self(algorithm: key.scheme == .pss ? .ps256 : .rs256, rsa: key)
        }
    }

    /// The key as PKCS#8 PrivateKeyInfo DER.
    public var pkcs8Representation: [UInt8] {
        if let p256 { return p256.pkcs8DERRepresentation }
        if let ec { return ec.pkcs8DERRepresentation }
        if let rsa { return rsa.pkcs8DERRepresentation }
        if let mldsa { return mldsa.pkcs8DERRepresentation }
        return ed25519!.pkcs8DERRepresentation
    }

    /// The form a store keeps: the 32 raw bytes for ES256, ESP256, EdDSA and
    /// Ed25519 (as every credential was stored before the other
    /// algorithms, so old records read unchanged), PKCS#8 for the others (a
    /// derived RSA key is not derived again at each use).
    public var storedRepresentation: [UInt8] {
        if algorithm.storesRawKey { return seed! }
        return pkcs8Representation
    }

    /// The public key as a COSE_Key (RFC 9053 §7, RFC 8230 §4): EC2 {1: 2,
    /// 3: alg, -1: crv, -2: x, -3: y}, OKP {1: 1, 3: alg, -1: 6, -2: x},
    /// RSA {1: 3, 3: alg, -1: n, -2: e} or AKP {1: 7, 3: alg, -1: pub}.
    public var publicCOSEKey: CBORValue {
        let alg = CBORValue.int(algorithm.rawValue)
        if let p256 {
            let publicKey = p256.publicKey
            return .intMap([(1, 2), (3, alg), (-1, 1), (-2, .bytes(publicKey.x)), (-3, .bytes(publicKey.y))])
        }
        if let ec {
            let crv: Int
            switch ec.curve {
            case .p384: crv = 2
            case .p521: crv = 3
            case .secp256k1: crv = 8
            }
            return .intMap([
                (1, 2), (3, alg), (-1, .int(crv)), (-2, .bytes(ec.publicKey.x)), (-3, .bytes(ec.publicKey.y)),
            ])
        }
        if let rsa {
            return .intMap([(1, 3), (3, alg), (-1, .bytes(rsa.publicKey.modulus)), (-2, .bytes(rsa.publicKey.exponent))])
        }
        if let mldsa {
            return .intMap([(1, 7), (3, alg), (-1, .bytes(mldsa.publicKey))])
        }
        return .intMap([(1, 1), (3, alg), (-1, 6), (-2, .bytes(ed25519!.publicKey.rawRepresentation))])
    }

    /// The WebAuthn signature over `message`: DER ECDSA, the 64-byte Ed25519
    /// signature, the RSA signature (as long as the modulus) or the ML-DSA
    /// signature.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        if let p256 { return try p256.signature(for: message) }
        if let ec { return try ec.signature(for: message) }
        if let rsa { return try rsa.signature(for: message) }
        if let mldsa { return try mldsa.signature(for: message) }
        return try ed25519!.signature(for: message)
    }
}
