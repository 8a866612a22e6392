// RSA-2048 signatures with SHA-256: RS256 (RSASSA-PKCS1-v1_5, RFC 8812 §2)
// and PS256 (RSASSA-PSS with MGF1-SHA-256 and a 32-byte salt, RFC 8230 §2).
//
// Keys are derived from a 32-byte seed rather than made by OpenSSL's RSA
// key generator: OpenSSL draws from its own random generator, which an
// injected entropy source cannot feed, and a 2048-bit key is far too big to
// seal into a credential ID. From the seed, HKDF-SHA-256 yields 1024-bit
// candidates (top two bits and the low bit set, so that n has exactly 2048
// bits) until OpenSSL's BN_check_prime accepts one for p and then one for q;
// e is 65537 and d, the CRT exponents and coefficient follow (d modulo
// lcm(p-1, q-1), as FIPS 186-5 A.1.1 asks). The same seed always gives the
// same key, so a non-discoverable credential ID carries 32 bytes, like the
// other algorithms'. A derivation costs about 0.15 s on a loaded machine.

import COpenSSL

/// The RSA signature scheme a key signs with, always over SHA-256.
public enum RSAScheme: Sendable {
    /// RSASSA-PKCS1-v1_5 (RS256).
    case pkcs1v15
    /// RSASSA-PSS, MGF1 with SHA-256, 32-byte salt (PS256).
    case pss

    /// OpenSSL's key type for keys of this scheme: a PSS key is an "RSA-PSS"
    /// key, so that its PKCS#8 says id-RSASSA-PSS and reads back as PS256.
    var keyType: String { self == .pss ? "RSA-PSS" : "RSA" }
}

/// An RSA key pair that signs with SHA-256 in one `RSAScheme`.
public final class RSAPrivateKey: @unchecked Sendable {
    /// The modulus length of derived keys.
    public static let modulusBitCount = 2048
    /// The moduli an imported key may have.
    public static let importableModulusBitCounts = 2048...4096
    static let publicExponent: UInt = 65537  // BN_ULONG is UInt on 64-bit Linux

    /// The scheme it signs with.
    public let scheme: RSAScheme
    private let key: EVPKey
    /// The public half.
    public let publicKey: RSAPublicKey

    private init(key: EVPKey, scheme: RSAScheme) throws(CryptoError) {
        self.key = key
        self.scheme = scheme
        publicKey = try RSAPublicKey(
            modulus: key.minimalBigEndianParameter(OSSLName.rsaModulus),
            exponent: key.minimalBigEndianParameter(OSSLName.rsaExponent),
            scheme: scheme
        )
    }

    /// The RSA-2048 key pair derived from the 32-byte `seed` (see the top of this file).
    public convenience init(seed: [UInt8], scheme: RSAScheme) throws(CryptoError) {
        guard seed.count == 32 else { throw CryptoError(.invalidKey, "an RSA key seed is 32 bytes") }
        let context = try OpenSSLObject(BN_CTX_secure_new(), freedBy: BN_CTX_free, creator: "BN_CTX_secure_new")
        let p = try Self.derivePrime(seed: seed, label: "p", avoiding: nil, context: context)
        let q = try Self.derivePrime(seed: seed, label: "q", avoiding: p, context: context)
        try self.init(key: Self.makeKey(p: p, q: q, scheme: scheme, context: context), scheme: scheme)
    }

    /// The key pair in a PKCS#8 PrivateKeyInfo DER: rsaEncryption (an RS256
    /// key) or id-RSASSA-PSS (a PS256 key), 2048 to 4096 bits. Throws
    /// `.invalidKey` for anything else, or a PSS key restricted to other
    /// parameters than PS256's.
    public convenience init(pkcs8DERRepresentation: [UInt8]) throws(CryptoError) {
        var decoded = try? EVPKey.fromPKCS8(pkcs8DERRepresentation, algorithm: "RSA-PSS")
        let scheme: RSAScheme = decoded == nil ? .pkcs1v15 : .pss
        if decoded == nil { decoded = try EVPKey.fromPKCS8(pkcs8DERRepresentation, algorithm: "RSA") }
        guard let decoded else { preconditionFailure("decoded or thrown above") }
        guard Self.importableModulusBitCounts.contains(Int(EVP_PKEY_get_bits(decoded.pointer))) else {
            throw CryptoError(.invalidKey, "an RSA key has 2048 to 4096 bits")
        }
        try self.init(key: decoded, scheme: scheme)
        guard (try? signature(for: [])) != nil else {
            throw CryptoError(.invalidKey, "the RSA key cannot sign with SHA-256 in its scheme")
        }
    }

    /// The key pair as PKCS#8 PrivateKeyInfo DER.
    public var pkcs8DERRepresentation: [UInt8] { key.pkcs8PrivateKeyInfo }

    /// The signature over `message`: SHA-256, then PKCS#1 v1.5 or PSS padding.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.sign(message, digest: EVP_sha256(), pss: scheme == .pss)
    }

    /// A 1024-bit prime from the seed, with p-1 prime to e and, for q, far
    /// from `other` (|p-q| > 2^(1024-100), FIPS 186-5 A.1.3).
    private static func derivePrime(
        seed: [UInt8],
        label: String,
        avoiding other: OpenSSLObject<OpaquePointer>?,
        context: OpenSSLObject<OpaquePointer>
    ) throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        let byteCount = modulusBitCount / 16
        let difference = try OpenSSLObject(BN_new(), freedBy: BN_free, creator: "BN_new")
        for counter in UInt32(0)..<(1 << 20) {
            let info = Array("latchkey/rsa-\(modulusBitCount)/\(label)".utf8)
                + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: counter >> $0) }
            var bytes = HKDFSHA256.deriveKey(inputKeyMaterial: seed, salt: [], info: info, outputByteCount: byteCount)
            bytes[0] |= 0xC0
            bytes[byteCount - 1] |= 0x01
            let candidate = try OpenSSLObject(BN_secure_new(), freedBy: BN_clear_free, creator: "BN_secure_new")
            BN_set_flags(candidate.pointer, BN_FLG_CONSTTIME)
            guard BN_bin2bn(bytes, Int32(byteCount), candidate.pointer) != nil else { throw .openSSL("BN_bin2bn") }
            // e is prime, so gcd(p-1, e) = 1 unless p ≡ 1 (mod e).
            if BN_mod_word(candidate.pointer, publicExponent) == 1 { continue }
            if let other {
                guard BN_sub(difference.pointer, candidate.pointer, other.pointer) == 1 else { throw .openSSL("BN_sub") }
                if BN_num_bits(difference.pointer) <= Int32(modulusBitCount / 2 - 100) { continue }
            }
            switch BN_check_prime(candidate.pointer, context.pointer, nil) {
            case 1: return candidate
            case 0: continue
            default: throw .openSSL("BN_check_prime")
            }
        }
        throw CryptoError(.invalidKey, "no prime derived from the seed")
    }

    /// The key (n, e, d, p, q, d mod p-1, d mod q-1, q^-1 mod p) for the primes.
    private static func makeKey(
        p: OpenSSLObject<OpaquePointer>,
        q: OpenSSLObject<OpaquePointer>,
        scheme: RSAScheme,
        context: OpenSSLObject<OpaquePointer>
    ) throws(CryptoError) -> EVPKey {
        func number() throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
            let value = try OpenSSLObject(BN_secure_new(), freedBy: BN_clear_free, creator: "BN_secure_new")
            BN_set_flags(value.pointer, BN_FLG_CONSTTIME)
            return value
        }
        func check(_ result: Int32, _ function: String) throws(CryptoError) {
            guard result == 1 else { throw .openSSL(function) }
        }
        let (n, e, d, pMinus1, qMinus1) = (try number(), try number(), try number(), try number(), try number())
        let (gcd, lambda, product, dp, dq, qInverse) = (
            try number(), try number(), try number(), try number(), try number(), try number()
        )
        try check(BN_mul(n.pointer, p.pointer, q.pointer, context.pointer), "BN_mul")
        try check(BN_set_word(e.pointer, publicExponent), "BN_set_word")
        guard BN_copy(pMinus1.pointer, p.pointer) != nil, BN_copy(qMinus1.pointer, q.pointer) != nil else {
            throw .openSSL("BN_copy")
        }
        try check(BN_sub_word(pMinus1.pointer, 1), "BN_sub_word")
        try check(BN_sub_word(qMinus1.pointer, 1), "BN_sub_word")
        try check(BN_gcd(gcd.pointer, pMinus1.pointer, qMinus1.pointer, context.pointer), "BN_gcd")
        try check(BN_mul(product.pointer, pMinus1.pointer, qMinus1.pointer, context.pointer), "BN_mul")
        try check(BN_div(lambda.pointer, nil, product.pointer, gcd.pointer, context.pointer), "BN_div")
        guard BN_mod_inverse(d.pointer, e.pointer, lambda.pointer, context.pointer) != nil,
            BN_mod_inverse(qInverse.pointer, q.pointer, p.pointer, context.pointer) != nil
        else { throw .openSSL("BN_mod_inverse") }
        try check(BN_div(nil, dp.pointer, d.pointer, pMinus1.pointer, context.pointer), "BN_div")
        try check(BN_div(nil, dq.pointer, d.pointer, qMinus1.pointer, context.pointer), "BN_div")

        let builder = try OpenSSLObject(OSSL_PARAM_BLD_new(), freedBy: OSSL_PARAM_BLD_free, creator: "OSSL_PARAM_BLD_new")
        let parameters: [(StaticString, OpenSSLObject<OpaquePointer>)] = [
            (OSSLName.rsaModulus, n), (OSSLName.rsaExponent, e), (OSSLName.rsaPrivateExponent, d),
            (OSSLName.rsaFactor1, p), (OSSLName.rsaFactor2, q), (OSSLName.rsaExponent1, dp),
            (OSSLName.rsaExponent2, dq), (OSSLName.rsaCoefficient1, qInverse),
        ]
        for (name, value) in parameters {
            try check(OSSL_PARAM_BLD_push_BN(builder.pointer, cString(name), value.pointer), "OSSL_PARAM_BLD_push_BN")
        }
        // The builder keeps the BIGNUM pointers until it makes the parameters.
        return try withExtendedLifetime(parameters) { () throws(CryptoError) in
            try EVPKey.fromParameters(builder, type: scheme.keyType, selection: P256.keyPairSelection)
        }
    }
}

/// An RSA public key, as a COSE_Key (kty 3) carries it.
public final class RSAPublicKey: @unchecked Sendable {
    private let key: EVPKey
    /// The scheme its signatures are checked in.
    public let scheme: RSAScheme
    /// The modulus n, big-endian without leading zeros.
    public let modulus: [UInt8]
    /// The public exponent e, big-endian without leading zeros.
    public let exponent: [UInt8]

    /// The key (n, e); throws `.invalidKey` when OpenSSL refuses them.
    public init(modulus: [UInt8], exponent: [UInt8], scheme: RSAScheme) throws(CryptoError) {
        let builder = try OpenSSLObject(OSSL_PARAM_BLD_new(), freedBy: OSSL_PARAM_BLD_free, creator: "OSSL_PARAM_BLD_new")
        // The builder keeps the BIGNUM pointers until it makes the parameters.
        var numbers: [OpenSSLObject<OpaquePointer>] = []
        for (name, bytes) in [(OSSLName.rsaModulus, modulus), (OSSLName.rsaExponent, exponent)] {
            let number = try OpenSSLObject(BN_bin2bn(bytes, Int32(bytes.count), nil), freedBy: BN_free, creator: "BN_bin2bn")
            numbers.append(number)
            guard OSSL_PARAM_BLD_push_BN(builder.pointer, cString(name), number.pointer) == 1 else {
                throw .openSSL("OSSL_PARAM_BLD_push_BN")
            }
        }
        do {
            key = try withExtendedLifetime(numbers) { () throws(CryptoError) in
                try EVPKey.fromParameters(builder, type: "RSA", selection: P256.publicKeySelection)
            }
        } catch {
            throw .rejected(.invalidKey, "not an RSA public key: \(error)")
        }
        self.modulus = modulus
        self.exponent = exponent
        self.scheme = scheme
    }

    /// The key as SubjectPublicKeyInfo DER (rsaEncryption, RFC 8017 A.1.1).
    public var derRepresentation: [UInt8] { key.subjectPublicKeyInfo }

    /// Whether `signature` is valid for `message` in the key's scheme with SHA-256.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        key.isValidSignature(signature, for: message, digest: EVP_sha256(), pss: scheme == .pss)
    }
}

extension EVPKey {
    /// Reads a BIGNUM parameter (RSA `n`, `e`) as big-endian bytes without leading zeros.
    fileprivate func minimalBigEndianParameter(_ name: StaticString) throws(CryptoError) -> [UInt8] {
        var result: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, cString(name), &result) == 1 else {
            throw .openSSL("EVP_PKEY_get_bn_param(\(name))")
        }
        let number = try OpenSSLObject(result, freedBy: BN_clear_free, creator: "EVP_PKEY_get_bn_param(\(name))")
        return try bigEndianParameter(name, count: Int((BN_num_bits(number.pointer) + 7) / 8))
    }
}
