// AES-256 in the two modes CTAP uses: CBC without padding (PIN/UV auth
// protocols 1 and 2, CTAP 2.1 §6.5.6–6.5.7) and GCM (credential IDs and
// secrets at rest).

import COpenSSL

/// AES-256 in CBC mode without padding.
public enum AES256CBC {
    /// The key length, in bytes.
    static let keyByteCount = 32
    /// The block and IV length, in bytes.
    static let blockByteCount = 16

    /// Encrypts `plaintext`, whose length must be a multiple of 16 (else `.invalidInput`),
    /// under a 32-byte `key` (else `.invalidKey`) and a 16-byte `iv` (else `.invalidInput`).
    public static func encrypt(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(plaintext, key: key, iv: iv, encrypting: true, cipher: EVP_aes_256_cbc(), keyByteCount: keyByteCount)
    }

    /// Decrypts `ciphertext`, whose length must be a multiple of 16 (else `.invalidInput`),
    /// under a 32-byte `key` (else `.invalidKey`) and a 16-byte `iv` (else `.invalidInput`).
    public static func decrypt(_ ciphertext: [UInt8], key: [UInt8], iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(ciphertext, key: key, iv: iv, encrypting: false, cipher: EVP_aes_256_cbc(), keyByteCount: keyByteCount)
    }

    /// CBC without padding with `cipher`, an AES of `keyByteCount`-byte keys
    /// (AES128CBC shares it).
    static func run(
        _ input: [UInt8],
        key: [UInt8],
        iv: [UInt8],
        encrypting: Bool,
        cipher: OpaquePointer?,
        keyByteCount: Int
    ) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else {
            throw CryptoError(.invalidKey, "AES-\(keyByteCount * 8) key must be \(keyByteCount) bytes, got \(key.count)")
        }
        guard iv.count == blockByteCount else {
            throw CryptoError(.invalidInput, "CBC IV must be \(blockByteCount) bytes, got \(iv.count)")
        }
        guard input.count % blockByteCount == 0 else {
            throw CryptoError(
                .invalidInput,
                "CBC input must be a multiple of \(blockByteCount) bytes, got \(input.count)"
            )
        }
        let context = try CipherContext()
        guard EVP_CipherInit_ex(context.pointer, cipher, nil, key, iv, encrypting ? 1 : 0) == 1 else {
            throw .openSSL("EVP_CipherInit_ex")
        }
        guard EVP_CIPHER_CTX_set_padding(context.pointer, 0) == 1 else {
            throw .openSSL("EVP_CIPHER_CTX_set_padding")
        }
        var output = [UInt8](repeating: 0, count: input.count + blockByteCount)
        let written = try context.update(input, into: &output, at: 0)
        let finished = try context.finish(into: &output, at: written)
        output.removeSubrange((written + finished)...)
        return output
    }
}

/// AES-256 in GCM mode: a 32-byte key, a 12-byte nonce and a 16-byte tag
/// appended to the ciphertext.
public enum AES256GCM {
    /// The key length, in bytes.
    static let keyByteCount = 32
    /// The nonce length, in bytes (the GCM default, NIST SP 800-38D §5.2.1.1).
    static let nonceByteCount = 12
    /// The authentication tag length, in bytes.
    static let tagByteCount = 16

    /// Encrypts `plaintext` and authenticates it with `aad`; returns ciphertext || tag.
    ///
    /// Throws `.invalidKey` unless `key` is 32 bytes and `.invalidInput` unless `nonce` is 12 bytes.
    public static func seal(
        _ plaintext: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        authenticating aad: [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        let context = try start(key: key, nonce: nonce, aad: aad, encrypting: true)
        var output = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        let written = try context.update(plaintext, into: &output, at: 0)
        let finished = try context.finish(into: &output, at: written)
        precondition(written + finished == plaintext.count, "GCM changed the length")
        let tagged = output.withUnsafeMutableBufferPointer { buffer in
            EVP_CIPHER_CTX_ctrl(
                context.pointer,
                EVP_CTRL_GCM_GET_TAG,
                Int32(tagByteCount),
                buffer.baseAddress! + plaintext.count
            )
        }
        guard tagged == 1 else {
            throw .openSSL("EVP_CTRL_GCM_GET_TAG")
        }
        return output
    }

    /// Checks the tag of `sealed` (ciphertext || tag) over the ciphertext and
    /// `aad`, and returns the plaintext only when it matches.
    ///
    /// Throws `.authenticationFailure` when the tag does not match or `sealed`
    /// is shorter than a tag, `.invalidKey` unless `key` is 32 bytes and
    /// `.invalidInput` unless `nonce` is 12 bytes.
    public static func open(
        _ sealed: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        authenticating aad: [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        let context = try start(key: key, nonce: nonce, aad: aad, encrypting: false)
        guard sealed.count >= tagByteCount else {
            throw CryptoError(.authenticationFailure, "sealed box shorter than its tag")
        }
        let ciphertext = Array(sealed.dropLast(tagByteCount))
        var tag = Array(sealed.suffix(tagByteCount))
        guard EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &tag) == 1 else {
            throw .openSSL("EVP_CTRL_GCM_SET_TAG")
        }
        var output = [UInt8](repeating: 0, count: ciphertext.count + AES256CBC.blockByteCount)
        let written = try context.update(ciphertext, into: &output, at: 0)
        let finished = output.withUnsafeMutableBufferPointer { buffer in
            var count: Int32 = 0
            return EVP_DecryptFinal_ex(context.pointer, buffer.baseAddress! + written, &count) == 1 ? Int(count) : nil
        }
        guard let finished else {
            // The plaintext written so far is unauthenticated; wipe it before it goes.
            OPENSSL_cleanse(&output, output.count)
            throw .rejected(.authenticationFailure, "GCM tag mismatch")
        }
        output.removeSubrange((written + finished)...)
        return output
    }

    /// A cipher context keyed for one message, with `aad` already absorbed.
    private static func start(
        key: [UInt8],
        nonce: [UInt8],
        aad: [UInt8],
        encrypting: Bool
    ) throws(CryptoError) -> CipherContext {
        guard key.count == keyByteCount else {
            throw CryptoError(.invalidKey, "AES-256 key must be \(keyByteCount) bytes, got \(key.count)")
        }
        guard nonce.count == nonceByteCount else {
            throw CryptoError(.invalidInput, "GCM nonce must be \(nonceByteCount) bytes, got \(nonce.count)")
        }
        let context = try CipherContext()
        guard EVP_CipherInit_ex(context.pointer, EVP_aes_256_gcm(), nil, key, nonce, encrypting ? 1 : 0) == 1 else {
            throw .openSSL("EVP_CipherInit_ex")
        }
        var ignored: Int32 = 0
        let absorbed = aad.withUnsafeBufferPointer { buffer in
            // With a NULL output pointer, an update feeds AAD instead of data.
            buffer.isEmpty
                ? 1 : EVP_CipherUpdate(context.pointer, nil, &ignored, buffer.baseAddress, Int32(buffer.count))
        }
        guard absorbed == 1 else {
            throw .openSSL("EVP_CipherUpdate(aad)")
        }
        return context
    }
}

/// An owned `EVP_CIPHER_CTX`.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let pointer = EVP_CIPHER_CTX_new() else {
            throw .openSSL("EVP_CIPHER_CTX_new")
        }
        self.pointer = pointer
    }

    deinit {
        EVP_CIPHER_CTX_free(pointer)
    }

    /// Feeds `input` and writes its output at `offset`; returns the bytes written.
    func update(_ input: [UInt8], into output: inout [UInt8], at offset: Int) throws(CryptoError) -> Int {
        guard !input.isEmpty else {
            return 0
        }
        var count: Int32 = 0
        let succeeded = output.withUnsafeMutableBufferPointer { buffer in
            EVP_CipherUpdate(pointer, buffer.baseAddress! + offset, &count, input, Int32(input.count))
        }
        guard succeeded == 1 else {
            throw .openSSL("EVP_CipherUpdate")
        }
        return Int(count)
    }

    /// Finishes the message, writing any last output at `offset`; returns the bytes written.
    func finish(into output: inout [UInt8], at offset: Int) throws(CryptoError) -> Int {
        var count: Int32 = 0
        let succeeded = output.withUnsafeMutableBufferPointer { buffer in
            EVP_CipherFinal_ex(pointer, buffer.baseAddress! + offset, &count)
        }
        guard succeeded == 1 else {
            throw .openSSL("EVP_CipherFinal_ex")
        }
        return Int(count)
    }
}
