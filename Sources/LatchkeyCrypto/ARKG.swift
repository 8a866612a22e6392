// ARKG-P256: Asynchronous Remote Key Generation over P-256
// (draft-bradleylundberg-cfrg-arkg-10, the ARKG-P256 instance): EC key
// blinding (§3.1) with the HMAC-wrapped ECDH KEM (§3.2, §3.3), SHA-256 and
// hash_to_field from the P256_XMD:SHA-256_SSWU_RO_ suite (RFC 9380 §5). A
// holder of the public seed derives public keys and key handles; only the
// holder of the private seed derives the matching private keys. The scalar
// and point arithmetic is OpenSSL's (BN_mod_add, BN_nnmod, EC_POINT_mul).

import COpenSSL

/// ARKG-P256 (draft-bradleylundberg-cfrg-arkg-10 §5, "ARKG-P256").
public enum ARKGP256 {
    /// DST_ext of the key blinding scheme.
    static let blindingDST = Array("ARKG-P256".utf8)
    /// DST_ext of the KEM.
    static let kemDST = Array("ARKG-ECDH.ARKG-P256".utf8)
    /// The length of the KEM's HMAC tag in a key handle (HMAC-SHA-256-128).
    static let tagLength = 16
    /// A key handle: the tag, then the ephemeral public point (uncompressed).
    public static let keyHandleLength = tagLength + P256.x963ByteCount
    /// The longest `ctx` ARKG takes (ARKG-Derive-Public-Key, "Inputs").
    public static let maxContextLength = 64
    /// L of hash_to_field for P-256 (RFC 9380 §8.2): 48 bytes per element.
    static let fieldElementLength = 48

    /// The public seed (pk_bl, pk_kem) a relying party derives public keys from.
    public struct PublicSeed: Sendable {
        /// pk_bl, the blinding public key.
        public let blinding: P256PublicKey
        /// pk_kem, the KEM public key.
        public let kem: P256PublicKey

        public init(blinding: P256PublicKey, kem: P256PublicKey) {
            self.blinding = blinding
            self.kem = kem
        }
    }

    /// The private seed (sk_bl, sk_kem).
    public struct PrivateSeed: Sendable {
        /// sk_bl, the blinding private key.
        public let blinding: P256PrivateKey
        /// sk_kem, the KEM private key.
        public let kem: P256PrivateKey

        /// The matching public seed.
        public var publicSeed: PublicSeed { PublicSeed(blinding: blinding.publicKey, kem: kem.publicKey) }
    }

    /// ARKG-Derive-Seed with the derive-key-pair functions of both schemes:
    /// sk_bl = hash_to_field(ikm_bl) with DST 'ARKG-BL-EC-KG.' || DST_ext,
    /// sk_kem = hash_to_field(ikm_kem) with DST 'ARKG-KEM-ECDH-KG.' || DST_ext.
    public static func deriveSeed(ikmBlinding: [UInt8], ikmKEM: [UInt8]) throws(CryptoError) -> PrivateSeed {
        PrivateSeed(
            blinding: try P256PrivateKey(
                rawRepresentation: hashToScalar(ikmBlinding, dst: Array("ARKG-BL-EC-KG.".utf8) + blindingDST)
            ),
            kem: try ecdhKeyPair(ikmKEM)
        )
    }

    /// ARKG-Derive-Public-Key: the blinded public key pk' and the key handle
    /// its private key is derived from. Throws `.invalidKey` for a `ctx`
    /// longer than 64 bytes.
    public static func derivePublicKey(
        _ seed: PublicSeed,
        ikm: [UInt8],
        ctx: [UInt8]
    ) throws(CryptoError) -> (publicKey: P256PublicKey, keyHandle: [UInt8]) {
        let (ctxBlinding, ctxKEM) = try contexts(ctx)
        // KEM-Encaps: the ephemeral pair comes from ikm, as Sub-Kem-Derive-Key-Pair.
        let ephemeral = try ecdhKeyPair(ikm)
        let ciphertext = ephemeral.publicKey.x963Representation
        let shared = try ephemeral.sharedSecret(with: seed.kem)
        let (tag, ikmTau) = macAndShared(shared, ciphertext: ciphertext, ctx: ctxKEM)
        let tau = try tauScalar(ikmTau, ctx: ctxBlinding)
        return (try blind(seed.blinding, tau: tau), tag + ciphertext)
    }

    /// ARKG-Derive-Private-Key: the private key sk' for `keyHandle` and
    /// `ctx`. Throws `.invalidKey` when the handle is not one this seed's
    /// public half made for `ctx` (wrong length, a point off the curve, a tag
    /// that does not verify) or `ctx` is longer than 64 bytes.
    public static func derivePrivateKey(
        _ seed: PrivateSeed,
        keyHandle: [UInt8],
        ctx: [UInt8]
    ) throws(CryptoError) -> P256PrivateKey {
        let (ctxBlinding, ctxKEM) = try contexts(ctx)
        guard keyHandle.count == keyHandleLength else {
            throw CryptoError(.invalidKey, "an ARKG-P256 key handle is \(keyHandleLength) bytes")
        }
        // KEM-Decaps: check the tag before the shared secret is used.
        let ciphertext = Array(keyHandle[tagLength...])
        let shared = try seed.kem.sharedSecret(with: P256PublicKey(x963Representation: ciphertext))
        let (tag, ikmTau) = macAndShared(shared, ciphertext: ciphertext, ctx: ctxKEM)
        guard CRYPTO_memcmp(tag, Array(keyHandle[..<tagLength]), tagLength) == 0 else {
            throw CryptoError(.invalidKey, "ARKG key handle tag does not verify")
        }
        let tau = try tauScalar(ikmTau, ctx: ctxBlinding)
        // BL-Blind-Private-Key: sk' = sk_bl + tau mod N, never zero.
        let group = try P256.group()
        let sum = try OpenSSLObject(BN_secure_new(), freedBy: BN_clear_free, creator: "BN_secure_new")
        let context = try OpenSSLObject(BN_CTX_secure_new(), freedBy: BN_CTX_free, creator: "BN_CTX_secure_new")
        let blinding = try P256.scalar(seed.blinding.rawRepresentation)
        guard
            BN_mod_add(sum.pointer, blinding.pointer, tau.pointer, EC_GROUP_get0_order(group.pointer), context.pointer)
                == 1
        else { throw .openSSL("BN_mod_add") }
        return try P256PrivateKey(rawRepresentation: bigEndian(sum))
    }

    // MARK: - The steps

    /// ctx_bl and ctx_kem: 'ARKG-Derive-Key-BL.' or 'ARKG-Derive-Key-KEM.',
    /// then I2OSP(LEN(ctx), 1) || ctx.
    private static func contexts(_ ctx: [UInt8]) throws(CryptoError) -> (blinding: [UInt8], kem: [UInt8]) {
        guard ctx.count <= maxContextLength else {
            throw CryptoError(.invalidKey, "an ARKG ctx is at most \(maxContextLength) bytes")
        }
        let prefixed = [UInt8(ctx.count)] + ctx
        return (Array("ARKG-Derive-Key-BL.".utf8) + prefixed, Array("ARKG-Derive-Key-KEM.".utf8) + prefixed)
    }

    /// The ECDH KEM's key pair from `ikm` (Sub-Kem-Derive-Key-Pair).
    private static func ecdhKeyPair(_ ikm: [UInt8]) throws(CryptoError) -> P256PrivateKey {
        try P256PrivateKey(rawRepresentation: hashToScalar(ikm, dst: Array("ARKG-KEM-ECDH-KG.".utf8) + kemDST))
    }

    /// The HMAC KEM's tag over the ciphertext and its shared secret k, both
    /// from the ECDH secret k' through HKDF-SHA-256 without salt.
    private static func macAndShared(
        _ shared: [UInt8],
        ciphertext: [UInt8],
        ctx: [UInt8]
    ) -> (tag: [UInt8], shared: [UInt8]) {
        let macKey = HKDFSHA256.deriveKey(
            inputKeyMaterial: shared,
            salt: [],
            info: Array("ARKG-KEM-HMAC-mac.".utf8) + kemDST + ctx,
            outputByteCount: SHA256.byteCount
        )
        let tag = Array(HMACSHA256.authenticationCode(key: macKey, message: ciphertext).prefix(tagLength))
        let derived = HKDFSHA256.deriveKey(
            inputKeyMaterial: shared,
            salt: [],
            info: Array("ARKG-KEM-HMAC-shared.".utf8) + kemDST + ctx,
            outputByteCount: shared.count
        )
        return (tag, derived)
    }

    /// BL-PRF: tau = hash_to_field(ikm_tau) with DST 'ARKG-BL-EC.' || DST_ext || ctx_bl.
    private static func tauScalar(_ ikmTau: [UInt8], ctx: [UInt8]) throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        let tau = try hashToField(ikmTau, dst: Array("ARKG-BL-EC.".utf8) + blindingDST + ctx)
        guard BN_is_zero(tau.pointer) == 0 else { throw CryptoError(.invalidKey, "ARKG tau is zero") }
        return tau
    }

    /// BL-Blind-Public-Key: pk' = pk_bl + tau * G.
    private static func blind(
        _ publicKey: P256PublicKey,
        tau: OpenSSLObject<OpaquePointer>
    ) throws(CryptoError) -> P256PublicKey {
        let group = try P256.group()
        let point = try OpenSSLObject(EC_POINT_new(group.pointer), freedBy: EC_POINT_free, creator: "EC_POINT_new")
        let blinded = try OpenSSLObject(EC_POINT_new(group.pointer), freedBy: EC_POINT_free, creator: "EC_POINT_new")
        let encoded = publicKey.x963Representation
        guard EC_POINT_oct2point(group.pointer, point.pointer, encoded, encoded.count, nil) == 1 else {
            throw .openSSL("EC_POINT_oct2point")
        }
        // EC_POINT_mul computes tau * G + 1 * pk_bl.
        guard EC_POINT_mul(group.pointer, blinded.pointer, tau.pointer, point.pointer, BN_value_one(), nil) == 1 else {
            throw .openSSL("EC_POINT_mul")
        }
        guard EC_POINT_is_at_infinity(group.pointer, blinded.pointer) == 0 else {
            throw CryptoError(.invalidKey, "ARKG blinded public key is the point at infinity")
        }
        var bytes = [UInt8](repeating: 0, count: P256.x963ByteCount)
        guard
            EC_POINT_point2oct(group.pointer, blinded.pointer, POINT_CONVERSION_UNCOMPRESSED, &bytes, bytes.count, nil)
                == P256.x963ByteCount
        else { throw .openSSL("EC_POINT_point2oct") }
        return try P256PublicKey(x963Representation: bytes)
    }

    // MARK: - hash_to_field (RFC 9380 §5.2, §5.3.1)

    /// hash_to_field(msg, 1) over GF(N) of P-256 with expand_message_xmd and
    /// SHA-256, as 32 big-endian bytes.
    static func hashToScalar(_ message: [UInt8], dst: [UInt8]) throws(CryptoError) -> [UInt8] {
        try bigEndian(hashToField(message, dst: dst))
    }

    /// hash_to_field(msg, 1): the 48 expanded bytes reduced mod N.
    private static func hashToField(_ message: [UInt8], dst: [UInt8]) throws(CryptoError) -> OpenSSLObject<
        OpaquePointer
    > {
        let uniform = try expandMessageXMD(message, dst: dst, length: fieldElementLength)
        let wide = try OpenSSLObject(BN_secure_new(), freedBy: BN_clear_free, creator: "BN_secure_new")
        let element = try OpenSSLObject(BN_secure_new(), freedBy: BN_clear_free, creator: "BN_secure_new")
        BN_set_flags(element.pointer, BN_FLG_CONSTTIME)
        let context = try OpenSSLObject(BN_CTX_secure_new(), freedBy: BN_CTX_free, creator: "BN_CTX_secure_new")
        guard BN_bin2bn(uniform, Int32(uniform.count), wide.pointer) != nil else { throw .openSSL("BN_bin2bn") }
        guard
            BN_nnmod(element.pointer, wide.pointer, EC_GROUP_get0_order(try P256.group().pointer), context.pointer) == 1
        else { throw .openSSL("BN_nnmod") }
        return element
    }

    /// expand_message_xmd(msg, DST, len_in_bytes) with SHA-256 (b = 32, s = 64 bytes).
    static func expandMessageXMD(_ message: [UInt8], dst: [UInt8], length: Int) throws(CryptoError) -> [UInt8] {
        let blocks = (length + SHA256.byteCount - 1) / SHA256.byteCount
        guard blocks <= 255, length <= 65535, dst.count <= 255 else {
            throw CryptoError(.invalidKey, "expand_message_xmd input out of range")
        }
        let dstPrime = dst + [UInt8(dst.count)]
        let zPad = [UInt8](repeating: 0, count: 64)
        let lengthBytes: [UInt8] = [UInt8(length >> 8), UInt8(length & 0xFF)]
        let b0 = SHA256.hash(zPad + message + lengthBytes + [0] + dstPrime)
        var previous = SHA256.hash(b0 + [1] + dstPrime)
        var uniform = previous
        for index in stride(from: 2, through: blocks, by: 1) {
            previous = SHA256.hash(zip(b0, previous).map { $0 ^ $1 } + [UInt8(index)] + dstPrime)
            uniform += previous
        }
        return Array(uniform.prefix(length))
    }

    /// A scalar as 32 big-endian bytes.
    private static func bigEndian(_ number: OpenSSLObject<OpaquePointer>) throws(CryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: P256.scalarByteCount)
        guard BN_bn2binpad(number.pointer, &bytes, Int32(bytes.count)) == Int32(bytes.count) else {
            throw .openSSL("BN_bn2binpad")
        }
        return bytes
    }
}
