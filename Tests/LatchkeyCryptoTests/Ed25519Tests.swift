// Ed25519 against RFC 8032 and RFC 8410, signatures checked by verification
// (ours and raw OpenSSL), and key round trips.

import COpenSSL
import LatchkeyCrypto
import Testing

@Suite("Ed25519")
struct Ed25519Tests {
    // RFC 8032 §7.1, TEST 1, 2 and 3. RFC text © IETF Trust, code components
    // under the Revised BSD License.
    static let vectors: [(name: String, seed: String, publicKey: String, message: String, signature: String)] = [
        (
            "TEST 1",
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            "",
            """
            e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155
            5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b
            """
        ),
        (
            "TEST 2",
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            "72",
            """
            92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da
            085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00
            """
        ),
        (
            "TEST 3",
            "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
            "af82",
            """
            6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac
            18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a
            """
        ),
    ]

    @Test("derives the RFC 8032 public key and signature, which both verifiers accept", arguments: vectors)
    func rfc8032(name: String, seed: String, publicKey: String, message: String, signature: String) throws {
        let key = try Ed25519PrivateKey(rawRepresentation: [UInt8](hex: seed))
        let message = [UInt8](hex: message)
        #expect(key.publicKey.rawRepresentation == [UInt8](hex: publicKey), "\(name)")
        // Ed25519 is deterministic, so comparing bytes is meaningful here.
        let produced = try key.signature(for: message)
        #expect(produced == [UInt8](hex: signature), "\(name)")
        let published = try Ed25519PublicKey(rawRepresentation: [UInt8](hex: publicKey))
        #expect(published.isValidSignature(produced, for: message))
        #expect(openSSLVerifies(spki: published.derRepresentation, signature: produced, message: message, digest: nil))
    }

    @Test("rejects a tampered message, a tampered signature, or another key's signature")
    func rejectsTampering() throws {
        let key = try Ed25519PrivateKey()
        let message = Array("authenticatorData || clientDataHash".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 64)
        let spki = key.publicKey.derRepresentation
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(openSSLVerifies(spki: spki, signature: signature, message: message, digest: nil))
        #expect(!key.publicKey.isValidSignature(signature, for: message.flippingBit(at: 5)))
        #expect(!key.publicKey.isValidSignature(signature.flippingBit(at: 10), for: message))
        #expect(!key.publicKey.isValidSignature(Array(signature.prefix(63)), for: message))
        #expect(!openSSLVerifies(spki: spki, signature: signature, message: message.flippingBit(at: 5), digest: nil))
        #expect(!openSSLVerifies(spki: spki, signature: signature.flippingBit(at: 10), message: message, digest: nil))
        #expect(!(try Ed25519PrivateKey()).publicKey.isValidSignature(signature, for: message))
    }

    @Test("encodes PKCS#8 and SubjectPublicKeyInfo as in the RFC 8410 §10 examples")
    func rfc8410() throws {
        // RFC 8410 §10.3 (private key) and §10.1 (public key), base64 decoded
        // to hex. RFC text © IETF Trust, code components under the Revised BSD License.
        let pkcs8 = [UInt8](
            hex: "302e020100300506032b657004220420d4ee72dbf913584ad5b6d8f1f769f8ad3afe7c28cbf1d4fbe097a88f44755842"
        )
        let key = try Ed25519PrivateKey(pkcs8DERRepresentation: pkcs8)
        #expect(key.rawRepresentation == Array(pkcs8.suffix(32)))
        #expect(key.pkcs8DERRepresentation == pkcs8)
        let spki = [UInt8](
            hex: "302a300506032b657003210019bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"
        )
        #expect(try Ed25519PublicKey(rawRepresentation: Array(spki.suffix(32))).derRepresentation == spki)
    }

    @Test("round-trips the seed and PKCS#8")
    func roundTrips() throws {
        let key = try Ed25519PrivateKey()
        #expect(key.rawRepresentation.count == 32)
        let fromRaw = try Ed25519PrivateKey(rawRepresentation: key.rawRepresentation)
        #expect(fromRaw.publicKey.rawRepresentation == key.publicKey.rawRepresentation)
        let fromPKCS8 = try Ed25519PrivateKey(pkcs8DERRepresentation: key.pkcs8DERRepresentation)
        #expect(fromPKCS8.rawRepresentation == key.rawRepresentation)
        #expect(fromPKCS8.publicKey.rawRepresentation == key.publicKey.rawRepresentation)
    }

    @Test("rejects seeds, public keys and PKCS#8 of the wrong size or type")
    func rejectsBadKeys() throws {
        for raw in [[UInt8](repeating: 7, count: 31), [UInt8](repeating: 7, count: 33), []] {
            #expect(throws: CryptoError(.invalidKey, "")) { try Ed25519PrivateKey(rawRepresentation: raw) }
            #expect(throws: CryptoError(.invalidKey, "")) { try Ed25519PublicKey(rawRepresentation: raw) }
        }
        let p256 = try P256PrivateKey().pkcs8DERRepresentation
        let valid = try Ed25519PrivateKey().pkcs8DERRepresentation
        for der in [p256, valid + [0], Array(valid.dropLast())] {
            #expect(throws: CryptoError(.invalidKey, "")) { try Ed25519PrivateKey(pkcs8DERRepresentation: der) }
        }
    }
}
