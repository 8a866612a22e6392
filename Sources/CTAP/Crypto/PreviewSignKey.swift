// previewSign's signing keys (the extension's wire side is PreviewSign.swift).
//
// Signing keys are not stored. A key handle is
//
// | version (1) | alg tag (1) | flags (1) | nonce (16) | MAC (16) |
//
// and the key is derived from the credential's own secret (its key's
// 32-byte seed, or its PKCS#8 for an imported key without one) and the
// handle's first 19 bytes: root = HKDF-SHA-256(secret, info
// "latchkey/previewSign/v1"); MAC = HMAC(root, 0x00 || header)[0..16];
// the P-256 scalar = HMAC(root, 0x01 || header); ARKG's ikm_bl and ikm_kem
// = HMAC(root, 0x02 || header) and HMAC(root, 0x03 || header). A handle
// is usable only with the credential it was made for, and its flags
// cannot be changed without changing the key. The keys therefore live as
// long as the credential does: they survive a CXF export and import with
// it, and go with it.

import CBOR
import LatchkeyCrypto

/// A signing key bound to a credential, as its handle describes it.
struct PreviewSignKey: Sendable {
    static let version: UInt8 = 1
    static let nonceLength = 16
    static let macLength = 16
    static let headerLength = 3 + nonceLength
    /// The length of every handle latchkey issues.
    static let keyHandleLength = headerLength + macLength
    static let rootInfo = Array("latchkey/previewSign/v1".utf8)

    var algorithm: PreviewSignAlgorithm
    var flags: PreviewSignFlags
    var keyHandle: [UInt8]
    /// The P-256 key, or for ESP256-split-ARKG the blinding half of the seed.
    var key: P256PrivateKey
    /// The ARKG seed, for ESP256-split-ARKG.
    var arkgSeed: ARKGP256.PrivateSeed?

    /// A new key for the credential whose secret is `secret`. The nonce is
    /// drawn again in the (2^-32) case that it gives no valid P-256 scalar;
    /// failing eight times means the crypto library itself fails.
    static func generate(
        _ algorithm: PreviewSignAlgorithm,
        flags: PreviewSignFlags,
        secret: [UInt8],
        entropy: any EntropySource
    ) throws(CryptoError) -> Self {
        let root = rootKey(secret)
        var attempt = 0
        while true {
            let header = [version, algorithm.tag, flags.rawValue] + entropy.bytes(count: nonceLength)
            let handle =
                header + Array(HMACSHA256.authenticationCode(key: root, message: [0x00] + header).prefix(macLength))
            do {
                return try derive(header: header, handle: handle, algorithm: algorithm, flags: flags, root: root)
            } catch {
                attempt += 1
                if attempt == 8 { throw error }
            }
        }
    }

    /// The key `keyHandle` names for the credential whose secret is
    /// `secret`, or nil when it is not one of that credential's handles.
    static func open(_ keyHandle: [UInt8], secret: [UInt8]) -> Self? {
        guard keyHandle.count == keyHandleLength, keyHandle[0] == version,
            let algorithm = PreviewSignAlgorithm(tag: keyHandle[1]),
            let flags = PreviewSignFlags(UInt64(keyHandle[2]))
        else { return nil }
        let root = rootKey(secret)
        let header = Array(keyHandle[..<headerLength])
        let mac = HMACSHA256.authenticationCode(key: root, message: [0x00] + header).prefix(macLength)
        guard constantTimeEqual(Array(mac), Array(keyHandle[headerLength...])) else { return nil }
        return try? derive(header: header, handle: keyHandle, algorithm: algorithm, flags: flags, root: root)
    }

    private static func rootKey(_ secret: [UInt8]) -> [UInt8] {
        HKDFSHA256.deriveKey(inputKeyMaterial: secret, salt: [], info: rootInfo, outputByteCount: 32)
    }

    private static func derive(
        header: [UInt8],
        handle: [UInt8],
        algorithm: PreviewSignAlgorithm,
        flags: PreviewSignFlags,
        root: [UInt8]
    ) throws(CryptoError) -> Self {
        func material(_ label: UInt8) -> [UInt8] { HMACSHA256.authenticationCode(key: root, message: [label] + header) }
        guard algorithm == .esp256SplitARKG else {
            let key = try P256PrivateKey(rawRepresentation: material(0x01))
            return Self(algorithm: algorithm, flags: flags, keyHandle: handle, key: key)
        }
        let seed = try ARKGP256.deriveSeed(ikmBlinding: material(0x02), ikmKEM: material(0x03))
        return Self(algorithm: algorithm, flags: flags, keyHandle: handle, key: seed.blinding, arkgSeed: seed)
    }

    /// The public key as the inner attestation carries it: an EC2 COSE_Key
    /// with the verification algorithm, or for ARKG the public seed
    /// {1: kty ARKG-pub, 3: ARKG-P256, -1: pk_bl, -2: pk_kem, -3: ESP256}.
    var publicCOSEKey: CBORValue {
        func ec2(_ key: P256PublicKey, alg: Int) -> CBORValue {
            .intMap([(1, 2), (3, .int(alg)), (-1, 1), (-2, .bytes(key.x)), (-3, .bytes(key.y))])
        }
        guard let seed = arkgSeed?.publicSeed else {
            return ec2(key.publicKey, alg: algorithm.verificationAlgorithm.rawValue)
        }
        return .intMap([
            (1, .int(PreviewSignAlgorithm.arkgPublicKeyType)), (3, .int(PreviewSignAlgorithm.arkgP256)),
            // pk_bl is an ES256 key, pk_kem an ECDH-ES + HKDF-256 one (-25),
            // as the draft's examples label them.
            (-1, ec2(seed.blinding, alg: COSEAlgorithm.es256.rawValue)), (-2, ec2(seed.kem, alg: -25)),
            (-3, .int(COSEAlgorithm.esp256.rawValue)),
        ])
    }
}
