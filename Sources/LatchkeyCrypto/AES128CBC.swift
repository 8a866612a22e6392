// AES-128 in CBC mode without padding: what CTAP 2.2 §6.4 encrypts getInfo's
// encIdentifier and encCredStoreState with (a 16-byte key derived from the
// persistent pinUvAuthToken). The PIN/UV auth protocols use AES-256
// (AES.swift), whose CBC code this shares.

import COpenSSL

/// AES-128 in CBC mode without padding.
public enum AES128CBC {
    /// The key length, in bytes.
    static let keyByteCount = 16

    /// Encrypts `plaintext`, whose length must be a multiple of 16 (else `.invalidInput`),
    /// under a 16-byte `key` (else `.invalidKey`) and a 16-byte `iv` (else `.invalidInput`).
    public static func encrypt(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try AES256CBC.run(
            plaintext, key: key, iv: iv, encrypting: true, cipher: EVP_aes_128_cbc(), keyByteCount: keyByteCount
        )
    }

    /// Decrypts `ciphertext` under the same rules as `encrypt`.
    public static func decrypt(_ ciphertext: [UInt8], key: [UInt8], iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try AES256CBC.run(
            ciphertext, key: key, iv: iv, encrypting: false, cipher: EVP_aes_128_cbc(), keyByteCount: keyByteCount
        )
    }
}
