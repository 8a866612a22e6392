// ML-DSA-65/87 from a seed: public keys against another implementation
// (Python's `cryptography` over OpenSSL 3.5+), signatures, and the PKCS#8
// forms of RFC 9881.

import LatchkeyCrypto
import Testing

@Suite("ML-DSA")
struct MLDSATests {
    static let seed = [UInt8](0..<32)

    /// SHA-256 of the public key made from bytes 0…31, from
    /// `cryptography`'s `MLDSA65PrivateKey.from_seed_bytes(bytes(range(32)))`
    /// (and 87), with its length.
    static let publicKeys: [(MLDSAParameterSet, count: Int, sha256: String)] = [
        (.mldsa65, 1952, "d666806e11cee19a7c989f7445f90dd419cf4d2d51db8c0fdb4c0f0a542238c9"),
        (.mldsa87, 2592, "91dc389cfaa01470b7f66eee45a4ae9026d154817c754dfe22298b3fa241ffcd"),
    ]

    @Test("the public key of a seed matches another implementation's", arguments: publicKeys)
    func publicKey(parameterSet: MLDSAParameterSet, count: Int, sha256: String) throws {
        let key = try MLDSAPrivateKey(parameterSet, seed: Self.seed)
        #expect(key.publicKey.count == count)
        #expect(SHA256.hash(key.publicKey).hex == sha256)
        #expect(key.seed == Self.seed)
    }

    @Test("signatures verify, hedged, and fail for another message", arguments: MLDSAParameterSet.allCases)
    func signatures(parameterSet: MLDSAParameterSet) throws {
        let key = try MLDSAPrivateKey(parameterSet, seed: Self.seed)
        let message = Array("authenticatorData || clientDataHash".utf8)
        let first = try key.signature(for: message)
        let second = try key.signature(for: message)
        #expect(first.count == (parameterSet == .mldsa65 ? 3309 : 4627))
        #expect(first != second)
        #expect(key.isValidSignature(first, for: message))
        #expect(key.isValidSignature(second, for: message))
        #expect(!key.isValidSignature(first, for: message + [0]))
        #expect(!key.isValidSignature(first.flippingBit(at: 100), for: message))
    }

    @Test("a seed of another length is refused")
    func seedLength() {
        for count in [0, 31, 33, 64] {
            #expect(throws: CryptoError(.invalidKey, "")) {
                try MLDSAPrivateKey(.mldsa65, seed: [UInt8](repeating: 1, count: count))
            }
        }
    }

    @Test("PKCS#8: the seed form round-trips (the bytes `cryptography` writes); the both form is read")
    func pkcs8() throws {
        let key = try MLDSAPrivateKey(.mldsa65, seed: Self.seed)
        let der = key.pkcs8DERRepresentation
        #expect(Array(der.prefix(21)).hex == "3034020100300b0609608648016503040312042280")
        #expect(try MLDSAPrivateKey(pkcs8DERRepresentation: der).publicKey == key.publicKey)
        let der87 = try MLDSAPrivateKey(.mldsa87, seed: Self.seed).pkcs8DERRepresentation
        #expect(try MLDSAPrivateKey(pkcs8DERRepresentation: der87).parameterSet == .mldsa87)

        // `both`: SEQUENCE { OCTET STRING seed, OCTET STRING expandedKey }, the
        // expanded key starting with the public ρ (the rest is not read).
        func both(expanded: [UInt8]) -> [UInt8] {
            func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
                [tag, 0x82, UInt8(content.count >> 8), UInt8(content.count & 0xFF)] + content
            }
            let choice = tlv(0x30, [0x04, 0x20] + Self.seed + tlv(0x04, expanded))
            let algorithm: [UInt8] = Array(der[5..<18])
            return tlv(0x30, [0x02, 0x01, 0x00] + algorithm + tlv(0x04, choice))
        }
        let rho = Array(key.publicKey.prefix(32))
        #expect(try MLDSAPrivateKey(pkcs8DERRepresentation: both(expanded: rho + [UInt8](repeating: 7, count: 4000))).seed == Self.seed)
        #expect(throws: CryptoError(.invalidKey, "")) {
            try MLDSAPrivateKey(pkcs8DERRepresentation: both(expanded: [UInt8](repeating: 7, count: 4032)))
        }
    }

    @Test("PKCS#8: truncated, extended, expanded-only or another algorithm's key is refused")
    func pkcs8Refused() throws {
        let der = try MLDSAPrivateKey(.mldsa65, seed: Self.seed).pkcs8DERRepresentation
        var expandedOnly = der
        expandedOnly[20] = 0x04
        var otherOID = der
        otherOID[17] = 0x11  // id-ml-dsa-44
        for bad in [[], Array(der.dropLast()), der + [0], expandedOnly, otherOID, Array(der.prefix(20))] {
            #expect(throws: CryptoError(.invalidKey, "")) { try MLDSAPrivateKey(pkcs8DERRepresentation: bad) }
        }
    }
}
