// AES-256-CBC and AES-256-GCM against published vectors, and their failure modes.

import LatchkeyCrypto
import Testing

@Suite("AES-256-CBC")
struct AES256CBCTests {
    // NIST SP 800-38A (2001) Appendix F.2.5 CBC-AES256.Encrypt and F.2.6
    // CBC-AES256.Decrypt; US government work, public domain.
    static let key = [UInt8](hex: "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
    static let iv = [UInt8](hex: "000102030405060708090a0b0c0d0e0f")
    static let plaintext = [UInt8](
        hex: """
            6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
            30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710
            """
    )
    static let ciphertext = [UInt8](
        hex: """
            f58c4c04d6e5f1ba779eabfb5f7bfbd6 9cfc4e967edb808d679f777bc6702c7d
            39f23369a9d9bacfa530e26304231461 b2eb05e2c39be9fcda6c19078c6a9d1b
            """
    )

    @Test("encrypts SP 800-38A F.2.5")
    func encryptVector() throws {
        #expect(try AES256CBC.encrypt(Self.plaintext, key: Self.key, iv: Self.iv) == Self.ciphertext)
    }

    @Test("decrypts SP 800-38A F.2.6")
    func decryptVector() throws {
        #expect(try AES256CBC.decrypt(Self.ciphertext, key: Self.key, iv: Self.iv) == Self.plaintext)
    }

    @Test("rejects input that is not a whole number of blocks", arguments: [1, 15, 17, 63])
    func rejectsPartialBlocks(count: Int) {
        let input = [UInt8](repeating: 0x42, count: count)
        #expect(throws: CryptoError(.invalidInput, "")) { try AES256CBC.encrypt(input, key: Self.key, iv: Self.iv) }
        #expect(throws: CryptoError(.invalidInput, "")) { try AES256CBC.decrypt(input, key: Self.key, iv: Self.iv) }
    }

    @Test("rejects a key that is not 32 bytes and an IV that is not 16 bytes")
    func rejectsBadSizes() {
        #expect(throws: CryptoError(.invalidKey, "")) {
            try AES256CBC.encrypt(Self.plaintext, key: Array(Self.key.prefix(16)), iv: Self.iv)
        }
        #expect(throws: CryptoError(.invalidInput, "")) {
            try AES256CBC.decrypt(Self.ciphertext, key: Self.key, iv: Array(Self.iv.prefix(12)))
        }
    }
}

@Suite("AES-256-GCM")
struct AES256GCMTests {
    // McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)",
    // Appendix B, as submitted to and hosted by NIST CSRC
    // (gcm-revised-spec.pdf); published test data. Test Case 16: AES-256,
    // 60-byte plaintext, 20-byte AAD.
    static let key = [UInt8](hex: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
    static let nonce = [UInt8](hex: "cafebabefacedbaddecaf888")
    static let aad = [UInt8](hex: "feedfacedeadbeeffeedfacedeadbeefabaddad2")
    static let plaintext = [UInt8](
        hex: """
            d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72
            1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39
            """
    )
    static let sealed = [UInt8](
        hex: """
            522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa
            8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662
            76fc6ece0f4e1768cddf8853bb2d551b
            """
    )

    @Test("seals GCM Test Case 16 to ciphertext followed by tag")
    func sealVector() throws {
        #expect(
            try AES256GCM.seal(Self.plaintext, key: Self.key, nonce: Self.nonce, authenticating: Self.aad)
                == Self.sealed
        )
    }

    @Test("opens GCM Test Case 16")
    func openVector() throws {
        #expect(
            try AES256GCM.open(Self.sealed, key: Self.key, nonce: Self.nonce, authenticating: Self.aad)
                == Self.plaintext
        )
    }

    // Same source: Test Case 13 (empty plaintext) and 14 (one zero block),
    // zero key and nonce, no AAD.
    @Test("seals GCM Test Cases 13 and 14 (empty and one-block plaintext, no AAD)")
    func zeroKeyVectors() throws {
        let key = [UInt8](repeating: 0, count: 32)
        let nonce = [UInt8](repeating: 0, count: 12)
        #expect(
            try AES256GCM.seal([], key: key, nonce: nonce, authenticating: [])
                == [UInt8](hex: "530f8afbc74536b9a963b4f1c4cb738b")
        )
        let oneBlock = [UInt8](repeating: 0, count: 16)
        let sealed = try AES256GCM.seal(oneBlock, key: key, nonce: nonce, authenticating: [])
        #expect(sealed == [UInt8](hex: "cea7403d4d606b6e074ec5d3baf39d18 d0d1c8a799996bf0265b98b5d48ab919"))
        #expect(try AES256GCM.open(sealed, key: key, nonce: nonce, authenticating: []) == oneBlock)
    }

    @Test("rejects a flipped bit in the ciphertext, the tag or the AAD", arguments: ["ciphertext", "tag", "aad"])
    func rejectsTampering(part: String) {
        var sealed = Self.sealed
        var aad = Self.aad
        switch part {
        case "ciphertext": sealed = sealed.flippingBit(at: 0)
        case "tag": sealed = sealed.flippingBit(at: sealed.count - 1)
        default: aad = aad.flippingBit(at: 3)
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES256GCM.open(sealed, key: Self.key, nonce: Self.nonce, authenticating: aad)
        }
    }

    @Test("rejects a sealed box shorter than its tag as unauthentic")
    func rejectsShortInput() {
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES256GCM.open(
                Array(Self.sealed.prefix(15)),
                key: Self.key,
                nonce: Self.nonce,
                authenticating: Self.aad
            )
        }
    }

    @Test("rejects a key that is not 32 bytes and a nonce that is not 12 bytes")
    func rejectsBadSizes() {
        #expect(throws: CryptoError(.invalidKey, "")) {
            try AES256GCM.seal(Self.plaintext, key: Array(Self.key.prefix(16)), nonce: Self.nonce, authenticating: [])
        }
        #expect(throws: CryptoError(.invalidInput, "")) {
            try AES256GCM.open(Self.sealed, key: Self.key, nonce: Self.nonce + [0], authenticating: Self.aad)
        }
    }

    @Test("round-trips random messages")
    func roundTrip() throws {
        let key = SecureRandom.bytes(count: 32)
        for length in [0, 1, 15, 16, 17, 100] {
            let message = SecureRandom.bytes(count: length)
            let nonce = SecureRandom.bytes(count: 12)
            let sealed = try AES256GCM.seal(message, key: key, nonce: nonce, authenticating: [1, 2, 3])
            #expect(sealed.count == length + 16)
            #expect(try AES256GCM.open(sealed, key: key, nonce: nonce, authenticating: [1, 2, 3]) == message)
        }
    }
}
