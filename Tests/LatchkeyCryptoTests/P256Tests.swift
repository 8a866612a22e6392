// P-256: key construction and validation, ECDSA signatures checked by
// verification (ours and raw OpenSSL), ECDH agreement, and serialisations.

import COpenSSL
import LatchkeyCrypto
import Testing

@Suite("P-256")
struct P256Tests {
    /// The group order n (SEC 2 §2.4.2), big-endian.
    static let order = [UInt8](hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")

    @Test("derives the public key of a known scalar (NIST CAVS KAS ECC CDH P-256, COUNT 0)")
    func derivesPublicKey() throws {
        // NIST CAVP "ECC CDH Primitive" test vectors (ecccdhtestvectors.zip,
        // KAS_ECC_CDH_PrimitiveTest.txt, [P-256] COUNT = 0); public domain.
        let key = try P256PrivateKey(
            rawRepresentation: [UInt8](hex: "7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534")
        )
        #expect(key.publicKey.x == [UInt8](hex: "ead218590119e8876b29146ff89ca61770c4edbbf97d38ce385ed281d8a6b230"))
        #expect(key.publicKey.y == [UInt8](hex: "28af61281fd35e2fa7002523acc85a429cb06ee6648325389f59edfce1405141"))
    }

    @Test("computes the ECDH shared secret of NIST CAVS KAS ECC CDH P-256, COUNT 0")
    func ecdhVector() throws {
        // Same source as above.
        let ours = try P256PrivateKey(
            rawRepresentation: [UInt8](hex: "7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534")
        )
        let peer = try P256PublicKey(
            x: [UInt8](hex: "700c48f77f56584c5cc632ca65640db91b6bacce3a4df6b42ce7cc838833d287"),
            y: [UInt8](hex: "db71e509e3fd9b060ddb20ba5c51dcc5948d46fbf640dfe0441782cab85fa4ac")
        )
        #expect(
            try ours.sharedSecret(with: peer)
                == [UInt8](hex: "46fc62106420ff012e54a434fbdd2d25ccc5852060561e68040dd7778997bd7b")
        )
    }

    @Test("agrees on one shared secret from both sides")
    func ecdhAgreement() throws {
        let alice = try P256PrivateKey()
        let bob = try P256PrivateKey()
        let aliceSecret = try alice.sharedSecret(with: bob.publicKey)
        #expect(aliceSecret.count == 32)
        #expect(aliceSecret == (try bob.sharedSecret(with: alice.publicKey)))
    }

    @Test("rejects a point that is not on the curve")
    func rejectsOffCurvePoint() throws {
        let valid = try P256PrivateKey().publicKey.x963Representation
        #expect(throws: CryptoError(.invalidKey, "")) {
            try P256PublicKey(x963Representation: valid.flippingBit(at: 64))
        }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try P256PublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32))
        }
    }

    @Test("rejects compressed, truncated and mis-tagged point encodings")
    func rejectsOtherEncodings() throws {
        let valid = try P256PrivateKey().publicKey.x963Representation
        var compressed = Array(valid.prefix(33))
        compressed[0] = 0x02 | (valid[64] & 1)
        var hybrid = valid
        hybrid[0] = 0x06 | (valid[64] & 1)
        for encoding in [compressed, Array(valid.dropLast()), valid + [0], hybrid, []] {
            #expect(throws: CryptoError(.invalidKey, "")) { try P256PublicKey(x963Representation: encoding) }
        }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try P256PublicKey(x: Array(valid[1...31]), y: Array(valid[33...]))
        }
    }

    @Test("rejects private scalars 0, n, n + 1 and all-ones, and lengths other than 32")
    func rejectsOutOfRangeScalars() {
        var orderPlusOne = Self.order
        orderPlusOne[31] += 1
        let rejected: [[UInt8]] = [
            [UInt8](repeating: 0, count: 32),
            Self.order,
            orderPlusOne,
            [UInt8](repeating: 0xff, count: 32),
            [UInt8](repeating: 1, count: 31),
            [UInt8](repeating: 1, count: 33),
        ]
        for raw in rejected {
            #expect(throws: CryptoError(.invalidKey, "")) { try P256PrivateKey(rawRepresentation: raw) }
        }
    }

    @Test("accepts the extreme scalars 1 and n - 1")
    func acceptsExtremeScalars() throws {
        var orderMinusOne = Self.order
        orderMinusOne[31] -= 1
        let one = [UInt8](repeating: 0, count: 31) + [1]
        for raw in [one, orderMinusOne] {
            let key = try P256PrivateKey(rawRepresentation: raw)
            #expect(key.rawRepresentation == raw)
        }
        // 1·G is the generator (SEC 2 §2.4.2).
        #expect(
            try P256PrivateKey(rawRepresentation: one).publicKey.x
                == [UInt8](hex: "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296")
        )
    }

    @Test("signs ECDSA-SHA256 verifiably by our verifier and by raw OpenSSL")
    func signAndVerify() throws {
        let key = try P256PrivateKey()
        let message = Array("latchkey attestation".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.first == 0x30)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(
            openSSLVerifies(
                spki: key.publicKey.derRepresentation,
                signature: signature,
                message: message,
                digest: EVP_sha256()
            )
        )
    }

    @Test("rejects a signature over a tampered message, a tampered signature, or another key's signature")
    func rejectsTampering() throws {
        let key = try P256PrivateKey()
        let message = Array("clientDataHash".utf8)
        let signature = try key.signature(for: message)
        let spki = key.publicKey.derRepresentation
        let tamperedMessage = message.flippingBit(at: 0)
        let tamperedSignature = signature.flippingBit(at: signature.count - 1)
        #expect(!key.publicKey.isValidSignature(signature, for: tamperedMessage))
        #expect(!key.publicKey.isValidSignature(tamperedSignature, for: message))
        #expect(!key.publicKey.isValidSignature(signature + [0], for: message))
        #expect(!key.publicKey.isValidSignature([], for: message))
        #expect(!openSSLVerifies(spki: spki, signature: signature, message: tamperedMessage, digest: EVP_sha256()))
        #expect(!openSSLVerifies(spki: spki, signature: tamperedSignature, message: message, digest: EVP_sha256()))
        #expect(!(try P256PrivateKey()).publicKey.isValidSignature(signature, for: message))
    }

    @Test("signs the empty message verifiably")
    func signsEmptyMessage() throws {
        let key = try P256PrivateKey()
        let signature = try key.signature(for: [])
        #expect(key.publicKey.isValidSignature(signature, for: []))
        #expect(
            openSSLVerifies(
                spki: key.publicKey.derRepresentation,
                signature: signature,
                message: [],
                digest: EVP_sha256()
            )
        )
    }

    @Test("verifies the RFC 6979 A.2.5 signature of \"sample\" with SHA-256")
    func rfc6979() throws {
        // RFC 6979 Appendix A.2.5 (P-256, SHA-256, message "sample"): the
        // public key U and (r, s), here DER-encoded. RFC text © IETF Trust,
        // code components under the Revised BSD License.
        let key = try P256PublicKey(
            x: [UInt8](hex: "60fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6"),
            y: [UInt8](hex: "7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299")
        )
        let r = [UInt8](hex: "efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716")
        let s = [UInt8](hex: "f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8")
        let der: [UInt8] = [0x30, 0x46, 0x02, 0x21, 0x00] + r + [0x02, 0x21, 0x00] + s
        #expect(key.isValidSignature(der, for: Array("sample".utf8)))
        #expect(!key.isValidSignature(der, for: Array("Sample".utf8)))
        // The same key pair from its published private scalar.
        let privateKey = try P256PrivateKey(
            rawRepresentation: [UInt8](hex: "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721")
        )
        #expect(privateKey.publicKey.x963Representation == key.x963Representation)
    }

    @Test("round-trips the raw scalar and PKCS#8")
    func privateKeyRoundTrips() throws {
        let key = try P256PrivateKey()
        #expect(key.rawRepresentation.count == 32)
        let fromRaw = try P256PrivateKey(rawRepresentation: key.rawRepresentation)
        #expect(fromRaw.publicKey.x963Representation == key.publicKey.x963Representation)
        let fromPKCS8 = try P256PrivateKey(pkcs8DERRepresentation: key.pkcs8DERRepresentation)
        #expect(fromPKCS8.rawRepresentation == key.rawRepresentation)
        #expect(fromPKCS8.publicKey.x963Representation == key.publicKey.x963Representation)
        #expect(fromPKCS8.pkcs8DERRepresentation == key.pkcs8DERRepresentation)
        // A key made from PKCS#8 still signs for the original public key.
        let signature = try fromPKCS8.signature(for: [1, 2, 3])
        #expect(key.publicKey.isValidSignature(signature, for: [1, 2, 3]))
    }

    @Test("left-pads a short scalar to 32 bytes")
    func leftPadsScalar() throws {
        let raw = [UInt8](repeating: 0, count: 3) + [UInt8](repeating: 0x5a, count: 29)
        #expect(try P256PrivateKey(rawRepresentation: raw).rawRepresentation == raw)
    }

    @Test("rejects PKCS#8 of another key type, with trailing bytes, or truncated")
    func rejectsBadPKCS8() throws {
        let ed25519 = try Ed25519PrivateKey().pkcs8DERRepresentation
        let valid = try P256PrivateKey().pkcs8DERRepresentation
        for der in [ed25519, valid + [0], Array(valid.dropLast()), []] {
            #expect(throws: CryptoError(.invalidKey, "")) { try P256PrivateKey(pkcs8DERRepresentation: der) }
        }
    }

    @Test("rejects PKCS#8 whose embedded public key belongs to another scalar")
    func rejectsMismatchedPKCS8() throws {
        let key = try P256PrivateKey()
        let other = try P256PrivateKey().publicKey.x963Representation
        // OpenSSL writes the RFC 5915 publicKey BIT STRING last: its 65 bytes end the DER.
        let der = key.pkcs8DERRepresentation
        #expect(Array(der.suffix(65)) == key.publicKey.x963Representation)
        let spliced = Array(der.dropLast(65)) + other
        #expect(throws: CryptoError(.invalidKey, "")) { try P256PrivateKey(pkcs8DERRepresentation: spliced) }
    }

    @Test("round-trips the public key through SubjectPublicKeyInfo and coordinates")
    func publicKeyRoundTrips() throws {
        let key = try P256PrivateKey().publicKey
        #expect(key.x963Representation.count == 65)
        #expect(key.x963Representation == [0x04] + key.x + key.y)
        let fromDER = try P256PublicKey(derRepresentation: key.derRepresentation)
        #expect(fromDER.x963Representation == key.x963Representation)
        #expect(fromDER.derRepresentation == key.derRepresentation)
        #expect(try P256PublicKey(x: key.x, y: key.y).x963Representation == key.x963Representation)
        // RFC 5480 §2: id-ecPublicKey with namedCurve secp256r1, then the 65-byte point.
        #expect(
            Array(key.derRepresentation.prefix(26))
                == [UInt8](hex: "3059301306072a8648ce3d020106082a8648ce3d030107034200")
        )
    }

    @Test("rejects SubjectPublicKeyInfo of another key type or with trailing bytes")
    func rejectsBadSPKI() throws {
        let ed25519 = try Ed25519PrivateKey().publicKey.derRepresentation
        let valid = try P256PrivateKey().publicKey.derRepresentation
        for der in [ed25519, valid + [0], Array(valid.dropLast()), []] {
            #expect(throws: CryptoError(.invalidKey, "")) { try P256PublicKey(derRepresentation: der) }
        }
    }
}
