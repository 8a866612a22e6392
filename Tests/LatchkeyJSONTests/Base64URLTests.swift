// base64url as latchkey reads and writes it everywhere (LatchkeyJSON/Base64URL.swift):
// RFC 4648's vectors, no padding written, padding and the standard alphabet read only
// where asked, and everything that is not an encoding refused.

import LatchkeyJSON
import Testing

@Suite("base64url")
struct Base64URLTests {
    /// RFC 4648 §10's vectors, unpadded.
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ]

    @Test("RFC 4648's vectors encode without padding and decode, padded or not", arguments: rfc4648)
    func vectors(_ text: String, _ encoded: String) {
        let bytes = Array(text.utf8)
        #expect(Base64URL.encode(bytes) == encoded)
        #expect(Base64URL.decode(encoded) == bytes)
        let padded = encoded + String(repeating: "=", count: (4 - encoded.count % 4) % 4)
        #expect(Base64URL.decode(padded) == bytes)
        #expect(Base64URL.decode(padded, padding: false) == (padded == encoded ? bytes : nil))
        #expect(Base64URL.canonical(padded) == encoded)
    }

    @Test("the URL alphabet, and standard base64's + and / only where asked")
    func alphabets() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64URL.encode(bytes) == "-_-_")
        #expect(Base64URL.decode("-_-_") == bytes)
        #expect(Base64URL.decode("+/+/") == nil)
        #expect(Base64URL.decode("+/+/", standardAlphabet: true) == bytes)
        #expect(Base64URL.unpadded("+/+/a===") == "-_-_a")
    }

    @Test("what is not an encoding is refused", arguments: ["A", "AAAAA", "AA=A", "A=AA", "Zm9v Yg", "Zm9v\n", "Zm9vYg==x", "é", "Zm9."])
    func refused(_ text: String) {
        #expect(Base64URL.decode(text) == nil, "\(text.debugDescription)")
        #expect(Base64URL.decode(text, standardAlphabet: true) == nil, "\(text.debugDescription)")
    }

    @Test("trailing padding is dropped whatever its count, and refused where padding is not allowed")
    func padding() {
        #expect(Base64URL.decode("AA=") == [0] && Base64URL.decode("AA===") == [0])
        #expect(Base64URL.decode("AA=", padding: false) == nil)
        #expect(Base64URL.decode("=") == [] && Base64URL.decode("=", padding: false) == nil)
    }
}
