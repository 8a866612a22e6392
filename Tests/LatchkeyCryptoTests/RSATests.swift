// RSA-2048 for RS256 and PS256: keys derived from seeds, PKCS#8, and
// signatures checked by our verifier and by raw OpenSSL.

import COpenSSL
import LatchkeyCrypto
import Testing

@Suite("RSA")
struct RSATests {
    static let seed = [UInt8](repeating: 0x42, count: 32)

    @Test("a seed derives one 2048-bit key with e = 65537, the same every time")
    func derivation() throws {
        let key = try RSAPrivateKey(seed: Self.seed, scheme: .pkcs1v15)
        #expect(key.publicKey.modulus.count == 256)
        #expect(key.publicKey.modulus[0] & 0x80 != 0)
        #expect(key.publicKey.exponent == [0x01, 0x00, 0x01])
        #expect((try RSAPrivateKey(seed: Self.seed, scheme: .pss)).publicKey.modulus == key.publicKey.modulus)
        let other = try RSAPrivateKey(seed: Self.seed.flippingBit(at: 0), scheme: .pkcs1v15)
        #expect(other.publicKey.modulus != key.publicKey.modulus)
    }

    @Test("RS256 signs PKCS#1 v1.5 with SHA-256; raw OpenSSL agrees")
    func rs256() throws {
        let key = try RSAPrivateKey(seed: Self.seed, scheme: .pkcs1v15)
        let message = Array("latchkey".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 256)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(signature, for: message.flippingBit(at: 1)))
        #expect(
            openSSLVerifies(spki: key.publicKey.derRepresentation, signature: signature, message: message, digest: EVP_sha256())
        )
        // Deterministic padding: the same signature twice.
        #expect(try key.signature(for: message) == signature)
    }

    @Test("PS256 signs PSS (randomised); a PKCS#1 verifier refuses it")
    func ps256() throws {
        let key = try RSAPrivateKey(seed: Self.seed, scheme: .pss)
        let message = Array("latchkey".utf8)
        let signature = try key.signature(for: message)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(try key.signature(for: message) != signature)
        let pkcs1 = try RSAPublicKey(modulus: key.publicKey.modulus, exponent: key.publicKey.exponent, scheme: .pkcs1v15)
        #expect(!pkcs1.isValidSignature(signature, for: message))
    }

    @Test("PKCS#8 round trip keeps the scheme: rsaEncryption is RS256, id-RSASSA-PSS is PS256")
    func pkcs8() throws {
        for scheme in [RSAScheme.pkcs1v15, .pss] {
            let key = try RSAPrivateKey(seed: Self.seed, scheme: scheme)
            let decoded = try RSAPrivateKey(pkcs8DERRepresentation: key.pkcs8DERRepresentation)
            #expect(decoded.scheme == scheme)
            #expect(decoded.publicKey.modulus == key.publicKey.modulus)
            #expect(decoded.publicKey.isValidSignature(try key.signature(for: [1]), for: [1]))
        }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try RSAPrivateKey(pkcs8DERRepresentation: try P256PrivateKey().pkcs8DERRepresentation)
        }
    }
}
