// SHA-256, HMAC-SHA-256, HKDF-SHA-256 and SecureRandom against published vectors.

import LatchkeyCrypto
import Testing

@Suite("SHA-256")
struct SHA256Tests {
    // FIPS 180-4 examples (NIST CSRC "Cryptographic Standards and Guidelines:
    // Examples with Intermediate Values", SHA256.pdf, SHA256_2.pdf); US
    // government work, public domain. The empty-string digest is the well-known
    // value reproduced in NIST's SHAVS short-message vectors (Len = 0).
    static let vectors: [(message: String, digest: String)] = [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ]

    @Test("hashes the FIPS 180 examples", arguments: vectors)
    func fipsVectors(message: String, digest: String) {
        #expect(SHA256.hash(Array(message.utf8)) == [UInt8](hex: digest))
    }
}

@Suite("HMAC-SHA-256")
struct HMACSHA256Tests {
    // RFC 4231 §4 test cases 1, 2, 3, 4, 6 and 7 (HMAC-SHA-256 rows). Case 5
    // is left out: it checks truncated output. RFC text © IETF Trust, code
    // components under the Revised BSD License.
    static let vectors: [(name: String, key: [UInt8], data: [UInt8], mac: String)] = [
        (
            "case 1", [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            "case 2", Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            "case 3", [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            "case 4", Array(1...25), [UInt8](repeating: 0xcd, count: 50),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        (
            "case 6", [UInt8](repeating: 0xaa, count: 131),
            Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            "case 7", [UInt8](repeating: 0xaa, count: 131),
            Array(
                ("This is a test using a larger than block-size key and a larger than block-size data. "
                    + "The key needs to be hashed before being used by the HMAC algorithm.").utf8
            ),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ]

    @Test("computes the RFC 4231 test cases", arguments: vectors)
    func rfc4231(name: String, key: [UInt8], data: [UInt8], mac: String) {
        #expect(HMACSHA256.authenticationCode(key: key, message: data) == [UInt8](hex: mac), "\(name)")
    }

    // HMAC-SHA-256 with an empty key over an empty message: a well-known value
    // (the same in every conforming implementation) that checks an empty key
    // is treated as empty, not as "no key".
    @Test("treats an empty key as the empty string")
    func emptyKey() {
        #expect(
            HMACSHA256.authenticationCode(key: [], message: [])
                == [UInt8](hex: "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        )
    }
}

@Suite("HKDF-SHA-256")
struct HKDFSHA256Tests {
    // RFC 5869 Appendix A, test cases 1–3 (SHA-256). RFC text © IETF Trust,
    // code components under the Revised BSD License.
    static let vectors: [(name: String, ikm: [UInt8], salt: [UInt8], info: [UInt8], length: Int, okm: String)] = [
        (
            "case 1", [UInt8](repeating: 0x0b, count: 22), Array(0x00...0x0c), Array(0xf0...0xf9), 42,
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        ),
        (
            "case 2", Array(0x00...0x4f), Array(0x60...0xaf), Array(0xb0...0xff), 82,
            """
            b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c
            59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71
            cc30c58179ec3e87c14c01d5c1f3434f1d87
            """
        ),
        (
            "case 3", [UInt8](repeating: 0x0b, count: 22), [], [], 42,
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
        ),
    ]

    @Test("derives the RFC 5869 test cases", arguments: vectors)
    func rfc5869(name: String, ikm: [UInt8], salt: [UInt8], info: [UInt8], length: Int, okm: String) {
        let derived = HKDFSHA256.deriveKey(inputKeyMaterial: ikm, salt: salt, info: info, outputByteCount: length)
        #expect(derived == [UInt8](hex: okm), "\(name)")
    }

    // Cross-checked with pyca/cryptography's HKDF: an empty input key is
    // legal in RFC 5869 and must not be mistaken for a missing key.
    @Test("accepts empty input key material")
    func emptyInputKeyMaterial() {
        let derived = HKDFSHA256.deriveKey(inputKeyMaterial: [], salt: [], info: [], outputByteCount: 32)
        #expect(derived == [UInt8](hex: "eb70f01dede9afafa449eee1b1286504e1f62388b3f7dd4f956697b0e828fe18"))
    }
}

@Suite("SecureRandom")
struct SecureRandomTests {
    @Test("returns the requested number of bytes, fresh on every call")
    func freshBytes() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        let first = SecureRandom.bytes(count: 32)
        let second = SecureRandom.bytes(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
    }
}
