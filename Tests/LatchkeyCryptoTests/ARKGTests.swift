// ARKG-P256: the draft's test vectors (seed from ikm_bl and ikm_kem, the
// derived public key for ikm and ctx, and the private key derived back from
// the key handle), expand_message_xmd against RFC 9380's vectors, and the
// refusals of a key handle that is not the seed's.

@testable import LatchkeyCrypto
import Testing

@Suite("ARKG-P256")
struct ARKGTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var ctx: String
        var ikm: String
        var pkPrime: String
        var skPrime: String
        var testDescription: String { "ctx \(ctx), ikm \(ikm.prefix(8))…" }
    }

    // draft-bradleylundberg-cfrg-arkg-10, test vectors for ARKG-P256 (as
    // python-fido2 2.2.1 tests/test_arkg.py reproduces them): one seed from
    // ikm_bl = 00..1f and ikm_kem = 20..3f, three derivations.
    static let ikmBlinding = [UInt8](hex: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    static let ikmKEM = [UInt8](hex: "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f")
    static let skBlinding = "d959500a78ccf850ce46c80a8c5043c9a2e33844232b3829df37d05b3069f455"
    static let skKEM = "74e0a4cd81ca2d24246ff75bfd6d4fb7f9dfc938372627feb2c2348f8b1493b5"
    static let pkBlinding = """
        046d3bdf31d0db48988f16d47048fdd24123cd286e42d0512daa9f726b4ecf18df\
        65ed42169c69675f936ff7de5f9bd93adbc8ea73036b16e8d90adbfabdaddba7
        """
    static let pkKEM = """
        04c38bbdd7286196733fa177e43b73cfd3d6d72cd11cc0bb2c9236cf85a42dcff5\
        dfa339c1e07dfcdfda8d7be2a5a3c7382991f387dfe332b1dd8da6e0622cfb35
        """
    static let vectors = [
        Vector(
            ctx: "ARKG-P256.test vectors",
            ikm: "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",
            pkPrime: """
                04572a111ce5cfd2a67d56a0f7c684184b16ccd212490dc9c5b579df749647d107\
                dac2a1b197cc10d2376559ad6df6bc107318d5cfb90def9f4a1f5347e086c2cd
                """,
            skPrime: "775d7fe9a6dfba43ce671cb38afca3d272c4d14aff97bd67559eb500a092e5e7"
        ),
        Vector(
            ctx: "ARKG-P256.test vectors",
            ikm: "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf",
            pkPrime: """
                04ea7d962c9f44ffe8b18f1058a471f394ef81b674948eefc1865b5c021cf858f5\
                77f9632b84220e4a1444a20b9430b86731c37e4dcb285eda38d76bf758918d86
                """,
            skPrime: "6228e470290e9d7cc0feff32a74caafa14c608c956337eba23997f5904cff226"
        ),
        Vector(
            ctx: "ARKG-P256.test vectors.0",
            ikm: "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",
            pkPrime: """
                04b79b65d6bbb419ff97006a1bd52e3f4ad53042173992423e06e52987a037cb61\
                dd82b126b162e4e7e8dc5c9fd86e82769d402a1968c7c547ef53ae4f96e10b0e
                """,
            skPrime: "2a97f4232f9abba32fbfc28c6686f8afd2d851c2a95a3ed2f0a384b9ad55068d"
        ),
    ]

    static func seed() throws -> ARKGP256.PrivateSeed {
        try ARKGP256.deriveSeed(ikmBlinding: ikmBlinding, ikmKEM: ikmKEM)
    }

    @Test("derives the draft's seed from ikm_bl and ikm_kem")
    func seedVector() throws {
        let seed = try Self.seed()
        #expect(seed.blinding.rawRepresentation.hex == Self.skBlinding)
        #expect(seed.kem.rawRepresentation.hex == Self.skKEM)
        #expect(seed.publicSeed.blinding.x963Representation.hex == Self.pkBlinding)
        #expect(seed.publicSeed.kem.x963Representation.hex == Self.pkKEM)
    }

    @Test("derives the draft's public and private keys", arguments: vectors)
    func derivation(_ vector: Vector) throws {
        let seed = try Self.seed()
        let ctx = Array(vector.ctx.utf8)
        let (publicKey, keyHandle) = try ARKGP256.derivePublicKey(
            seed.publicSeed,
            ikm: [UInt8](hex: vector.ikm),
            ctx: ctx
        )
        #expect(publicKey.x963Representation.hex == vector.pkPrime)
        #expect(keyHandle.count == ARKGP256.keyHandleLength)
        let privateKey = try ARKGP256.derivePrivateKey(seed, keyHandle: keyHandle, ctx: ctx)
        #expect(privateKey.rawRepresentation.hex == vector.skPrime)
        #expect(privateKey.publicKey.x963Representation == publicKey.x963Representation)
        let message = Array("signed with a derived key".utf8)
        #expect(publicKey.isValidSignature(try privateKey.signature(for: message), for: message))
    }

    @Test("refuses a key handle with a changed byte, another ctx, a wrong length or a long ctx")
    func refusals() throws {
        let seed = try Self.seed()
        let ctx = Array("ctx".utf8)
        let (_, keyHandle) = try ARKGP256.derivePublicKey(seed.publicSeed, ikm: Self.ikmKEM, ctx: ctx)
        for index in [0, 15, 16, 40, 80] {
            #expect(throws: CryptoError.self) {
                try ARKGP256.derivePrivateKey(seed, keyHandle: keyHandle.flippingBit(at: index), ctx: ctx)
            }
        }
        #expect(throws: CryptoError.self) {
            try ARKGP256.derivePrivateKey(seed, keyHandle: keyHandle, ctx: Array("other".utf8))
        }
        #expect(throws: CryptoError.self) {
            try ARKGP256.derivePrivateKey(seed, keyHandle: Array(keyHandle.dropLast()), ctx: ctx)
        }
        #expect(throws: CryptoError.self) {
            try ARKGP256.derivePrivateKey(seed, keyHandle: keyHandle, ctx: [UInt8](repeating: 1, count: 65))
        }
    }

    @Test("expand_message_xmd matches RFC 9380 K.1 (SHA-256)")
    func expandMessage() throws {
        // RFC 9380 Appendix K.1, DST QUUX-V01-CS02-with-expander-SHA256-128, len_in_bytes 0x20.
        let dst = Array("QUUX-V01-CS02-with-expander-SHA256-128".utf8)
        #expect(
            try ARKGP256.expandMessageXMD([], dst: dst, length: 0x20).hex
                == "68a985b87eb6b46952128911f2a4412bbc302a9d759667f87f7a21d803f07235"
        )
        #expect(
            try ARKGP256.expandMessageXMD(Array("abc".utf8), dst: dst, length: 0x20).hex
                == "d8ccab23b5985ccea865c6c97b6e5b8350e794e603b4b97902f53a8a0d605615"
        )
    }

    @Test("a prehashed ESP256-split signature verifies as ECDSA with SHA-256 over the message")
    func prehashedSignature() throws {
        let key = try P256PrivateKey()
        let message = Array("two-party signing".utf8)
        let signature = try key.signature(forDigest: SHA256.hash(message))
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(throws: CryptoError.self) { try key.signature(forDigest: message) }
    }
}
