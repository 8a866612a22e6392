// AES-128 in CBC mode without padding: what CTAP 2.2 §6.4 encrypts getInfo's
// encIdentifier and encCredStoreState with (a 16-byte key derived from the
// persistent pinUvAuthToken). Kept apart from AES.swift's AES-256, which the
// PIN/UV auth protocols use.

import COpenSSL

/// AES-128 in CBC mode without padding.
public enum AES128CBC {
    /// The key length, in bytes.
    static let keyByteCount = 16
    /// The block and IV length, in bytes.
    static let blockByteCount = 16

    /// Encrypts `plaintext`, whose length must be a multiple of 16 (else `.invalidInput`),
    /// under a 16-byte `key` (else `.invalidKey`) and a 16-byte `iv` (else `.invalidInput`).
    public static func encrypt(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(plaintext, key: key, iv: iv, encrypting: true)
    }

    /// Decrypts `ciphertext` under the same rules as `encrypt`.
    public static func decrypt(_ ciphertext: [UInt8], key: [UInt8], iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(ciphertext, key: key, iv: iv, encrypting: false)
    }

    private static func run(
        _ input: [UInt8],
        key: [UInt8],
        iv: [UInt8],
        encrypting: Bool
    ) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else {
            throw CryptoError(.invalidKey, "AES-128 key must be \(keyByteCount) bytes, got \(key.count)")
        }
        guard iv.count == blockByteCount, input.count % blockByteCount == 0 else {
            throw CryptoError(
                .invalidInput, "CBC needs a \(blockByteCount)-byte IV and whole blocks, got \(iv.count) and \(input.count)"
            )
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw .openSSL("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_CipherInit_ex(context, EVP_aes_128_cbc(), nil, key, iv, encrypting ? 1 : 0) == 1 else {
            throw .openSSL("EVP_CipherInit_ex")
        }
        guard EVP_CIPHER_CTX_set_padding(context, 0) == 1 else { throw .openSSL("EVP_CIPHER_CTX_set_padding") }
        var output = [UInt8](repeating: 0, count: input.count + blockByteCount)
        var written: Int32 = 0
        var finished: Int32 = 0
        let succeeded = output.withUnsafeMutableBufferPointer { buffer in
            guard input.isEmpty || EVP_CipherUpdate(context, buffer.baseAddress!, &written, input, Int32(input.count)) == 1
            else { return false }
            return EVP_CipherFinal_ex(context, buffer.baseAddress! + Int(written), &finished) == 1
        }
        guard succeeded else { throw .openSSL("EVP_Cipher") }
        output.removeSubrange(Int(written + finished)...)
        return output
    }
}
