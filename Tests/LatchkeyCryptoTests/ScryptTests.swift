// scrypt against RFC 7914's test vectors, and the parameter checks that keep
// an imported file's costs bounded.

import LatchkeyCrypto
import Testing

@Suite("scrypt")
struct ScryptTests {
    // RFC 7914 §12, the first three vectors (RFC text © IETF Trust, code
    // components under the Revised BSD License). The fourth (N = 2^20, r = 8)
    // takes 1 GiB; it stands below as the memory limit's example instead.
    static let vectors: [(passphrase: String, salt: String, n: UInt64, r: UInt32, p: UInt32, key: String)] = [
        (
            "", "", 16, 1, 1,
            """
            77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442\
            fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906
            """
        ),
        (
            "password", "NaCl", 1024, 8, 16,
            """
            fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162\
            2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640
            """
        ),
        (
            "pleaseletmein", "SodiumChloride", 16384, 8, 1,
            """
            7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2\
            d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887
            """
        ),
    ]

    @Test("derives RFC 7914's test vectors", arguments: 0..<vectors.count)
    func rfcVectors(index: Int) throws {
        let vector = Self.vectors[index]
        let key = try Scrypt.deriveKey(
            passphrase: Array(vector.passphrase.utf8),
            salt: Array(vector.salt.utf8),
            parameters: Scrypt.Parameters(n: vector.n, r: vector.r, p: vector.p),
            outputByteCount: 64
        )
        #expect(key == [UInt8](hex: vector.key))
    }

    @Test("a shorter output is a prefix of the longer one (PBKDF2 at the end)")
    func outputLength() throws {
        let parameters = Scrypt.Parameters(n: 16, r: 1, p: 1)
        let long = try Scrypt.deriveKey(passphrase: [], salt: [], parameters: parameters, outputByteCount: 64)
        let short = try Scrypt.deriveKey(passphrase: [], salt: [], parameters: parameters, outputByteCount: 32)
        #expect(short == Array(long.prefix(32)))
    }

    static let refused: [(n: UInt64, r: UInt32, p: UInt32)] = [
        (0, 8, 1), (1, 8, 1), (1000, 8, 1), (16, 0, 1), (16, 1, 0), (16, 1 << 15, 1 << 15),
        // RFC 7914's fourth vector: 128·r·N is just over 1 GiB.
        (1 << 20, 8, 1),
    ]

    @Test("refuses N not a power of two over 1, r or p of 0, r·p ≥ 2^30, and over 1 GiB", arguments: refused)
    func refusesParameters(n: UInt64, r: UInt32, p: UInt32) {
        #expect(throws: CryptoError(.invalidInput, "")) {
            try Scrypt.deriveKey(
                passphrase: Array("x".utf8),
                salt: [],
                parameters: Scrypt.Parameters(n: n, r: r, p: p),
                outputByteCount: 32
            )
        }
    }

    @Test("a caller's lower memory limit is enforced")
    func memoryLimit() {
        #expect(Scrypt.Parameters.export.memoryByteCount == 128 * 8 * (1 << 17) + 128 * 8)
        #expect(throws: CryptoError(.invalidInput, "")) {
            try Scrypt.deriveKey(
                passphrase: [],
                salt: [],
                parameters: .export,
                outputByteCount: 32,
                memoryLimit: 64 << 20
            )
        }
    }
}
