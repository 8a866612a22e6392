// The glue between Swift and OpenSSL: owning wrappers for the C objects this
// target creates, and helpers that turn OpenSSL's error queue into CryptoError.
// Every OpenSSL pointer in LatchkeyCrypto lives in one of these classes and is
// freed in its deinit, so no code path can leak or double-free it.

import COpenSSL

extension CryptoError {
    /// An `.openSSL` error for a failed call, carrying OpenSSL's reason.
    ///
    /// Drains this thread's OpenSSL error queue so a stale entry never shows
    /// up in a later, unrelated error.
    static func openSSL(_ function: String, file: String = #fileID, line: Int = #line) -> CryptoError {
        CryptoError(.openSSL, "\(function) failed: \(drainOpenSSLErrors())", file: file, line: line)
    }

    /// An error of `code` for a call whose failure means bad input, not a bug.
    ///
    /// Clears the OpenSSL error queue, which the failed call filled.
    static func rejected(
        _ code: Code,
        _ reason: String,
        file: String = #fileID,
        line: Int = #line
    ) -> CryptoError {
        ERR_clear_error()
        return CryptoError(code, reason, file: file, line: line)
    }
}

/// Empties this thread's OpenSSL error queue and describes its oldest entry.
func drainOpenSSLErrors() -> String {
    let first = ERR_get_error()
    ERR_clear_error()
    guard first != 0 else {
        return "no OpenSSL error reported"
    }
    let library = ERR_lib_error_string(first).map { String(cString: $0) } ?? "unknown library"
    let reason = ERR_reason_error_string(first).map { String(cString: $0) } ?? "reason \(first & 0x7F_FFFF)"
    return "\(library): \(reason)"
}

/// An OpenSSL object this code owns; `free` runs exactly once, in deinit.
///
/// `Pointer` is `OpaquePointer` for OpenSSL's opaque types (`EVP_MD_CTX`,
/// `BIGNUM`, `X509`, ...) and a typed pointer for the few public structs
/// (`ASN1_STRING`, `BASIC_CONSTRAINTS`). The creating call's name goes into
/// the error when it returns NULL.
final class OpenSSLObject<Pointer> {
    /// The owned object; valid for the lifetime of this wrapper.
    let pointer: Pointer
    private let free: (Pointer) -> Void

    /// Takes ownership of `pointer`, or throws when the creating call returned NULL.
    init(
        _ pointer: Pointer?,
        freedBy free: @escaping (Pointer) -> Void,
        creator: String,
        file: String = #fileID,
        line: Int = #line
    ) throws(CryptoError) {
        guard let pointer else {
            throw .openSSL(creator, file: file, line: line)
        }
        self.pointer = pointer
        self.free = free
    }

    deinit {
        free(pointer)
    }
}

/// A fresh `EVP_KDF_CTX` for the key derivation function `name` ("HKDF", "SCRYPT"). The
/// context holds its own reference to the fetched KDF (`EVP_KDF_CTX_new` takes one).
func makeKDFContext(_ name: String) throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
    let kdf = try OpenSSLObject(EVP_KDF_fetch(nil, name, nil), freedBy: EVP_KDF_free, creator: "EVP_KDF_fetch")
    return try OpenSSLObject(EVP_KDF_CTX_new(kdf.pointer), freedBy: EVP_KDF_CTX_free, creator: "EVP_KDF_CTX_new")
}

/// An `EVP_PKEY`: a public key or a key pair, shared read-only once built.
///
/// OpenSSL 3 allows concurrent use of one `EVP_PKEY` from several threads as
/// long as nobody mutates it; this code never mutates a key after building it,
/// which is what makes the key classes `Sendable`.
final class EVPKey {
    /// The owned `EVP_PKEY *`.
    let pointer: OpaquePointer

    /// Takes ownership of an `EVP_PKEY *`, or throws when the creating call returned NULL.
    init(_ pointer: OpaquePointer?, creator: String, file: String = #fileID, line: Int = #line) throws(CryptoError) {
        guard let pointer else {
            throw .openSSL(creator, file: file, line: line)
        }
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// The SubjectPublicKeyInfo DER of the key's public part.
    var subjectPublicKeyInfo: [UInt8] {
        derEncoded { i2d_PUBKEY(pointer, $0) }
    }

    /// Reads a BIGNUM parameter (`priv`, `qx`, `qy`) as `count` big-endian bytes.
    func bigEndianParameter(_ name: StaticString, count: Int) throws(CryptoError) -> [UInt8] {
        var result: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, cString(name), &result) == 1 else {
            throw .openSSL("EVP_PKEY_get_bn_param(\(name))")
        }
        let number = try OpenSSLObject(result, freedBy: BN_clear_free, creator: "EVP_PKEY_get_bn_param(\(name))")
        var bytes = [UInt8](repeating: 0, count: count)
        guard BN_bn2binpad(number.pointer, &bytes, Int32(count)) == Int32(count) else {
            throw .openSSL("BN_bn2binpad(\(name))")
        }
        return bytes
    }

    /// Reads a UTF-8 string parameter, such as the EC group name.
    func stringParameter(_ name: StaticString) -> String? {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, cString(name), &buffer, buffer.count, &length) == 1 else {
            ERR_clear_error()
            return nil
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A fresh `EVP_PKEY_CTX` for an operation with this key.
    func makeContext() throws(CryptoError) -> OpenSSLObject<OpaquePointer> {
        try OpenSSLObject(
            EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil),
            freedBy: EVP_PKEY_CTX_free,
            creator: "EVP_PKEY_CTX_new_from_pkey"
        )
    }
}

/// OpenSSL parameter and algorithm names (`core_names.h`). They are static
/// strings because OSSL_PARAM arrays and builders keep the name pointers they
/// are given rather than copying the names.
enum OSSLName {
    static let digest: StaticString = "digest"
    static let key: StaticString = "key"
    static let salt: StaticString = "salt"
    static let info: StaticString = "info"
    static let sha256: StaticString = "SHA256"
    static let groupName: StaticString = "group"
    static let publicKey: StaticString = "pub"
    static let privateKey: StaticString = "priv"
    static let publicX: StaticString = "qx"
    static let publicY: StaticString = "qy"
    static let prime256v1: StaticString = "prime256v1"
    static let rsaModulus: StaticString = "n"
    static let rsaExponent: StaticString = "e"
    static let rsaPrivateExponent: StaticString = "d"
    static let rsaFactor1: StaticString = "rsa-factor1"
    static let rsaFactor2: StaticString = "rsa-factor2"
    static let rsaExponent1: StaticString = "rsa-exponent1"
    static let rsaExponent2: StaticString = "rsa-exponent2"
    static let rsaCoefficient1: StaticString = "rsa-coefficient1"
}

/// The C string of a static string; valid for the life of the process.
func cString(_ string: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// The same, for the OpenSSL calls that take `char *` but only read it.
func cMutableString(_ string: StaticString) -> UnsafeMutablePointer<CChar> {
    UnsafeMutablePointer(mutating: cString(string))
}

/// Runs an OpenSSL `i2d_*` function twice, to size and then to fill, and
/// returns the DER. Encoding an object this code built cannot fail short of
/// memory exhaustion, which traps.
func derEncoded(_ encode: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) -> [UInt8] {
    let count = encode(nil)
    precondition(count > 0, "DER encoding failed: \(drainOpenSSLErrors())")
    var der = [UInt8](repeating: 0, count: Int(count))
    let written = der.withUnsafeMutableBufferPointer { buffer in
        var cursor = buffer.baseAddress
        return encode(&cursor)
    }
    precondition(written == count, "DER encoding changed length")
    return der
}

/// Runs an OpenSSL `d2i_*` function over all of `der`; nil when it fails or
/// leaves trailing bytes, so only exact encodings are accepted. The caller
/// owns the result and hands it straight to an owning wrapper.
func derDecoded(
    _ der: [UInt8],
    _ decode: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> OpaquePointer?,
    free: (OpaquePointer) -> Void
) -> OpaquePointer? {
    der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
        guard let start = buffer.baseAddress else {
            return nil
        }
        var cursor: UnsafePointer<UInt8>? = start
        guard let object = decode(&cursor, buffer.count) else {
            ERR_clear_error()
            return nil
        }
        guard cursor == start + buffer.count else {
            free(object)
            return nil
        }
        return object
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with a pointer that is never NULL, even for an empty array.
    ///
    /// Some OpenSSL calls (HMAC and HKDF keys) treat NULL as "not given"
    /// rather than "empty", and `withUnsafeBufferPointer` gives NULL for [].
    func withNonNullBytes<Result, Failure: Error>(
        _ body: (UnsafePointer<UInt8>, Int) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        if isEmpty {
            var placeholder: UInt8 = 0
            return try body(&placeholder, 0)
        }
        return try withUnsafeBufferPointer { (buffer) throws(Failure) -> Result in
            try body(buffer.baseAddress!, buffer.count)
        }
    }
}

extension EVPKey {
    /// Signs `message` with this key pair through `EVP_DigestSign`.
    ///
    /// `digest` is the hash the signature scheme applies first (SHA-256 for
    /// ECDSA), or nil for a scheme that hashes internally (pure Ed25519).
    /// With `pss`, an RSA key signs RSASSA-PSS with MGF1 over `digest` and a
    /// salt as long as the digest (RFC 8230 §2); otherwise RSA signs PKCS#1 v1.5.
    func sign(_ message: [UInt8], digest: OpaquePointer?, pss: Bool = false) throws(CryptoError) -> [UInt8] {
        let context = try OpenSSLObject(EVP_MD_CTX_new(), freedBy: EVP_MD_CTX_free, creator: "EVP_MD_CTX_new")
        var keyContext: OpaquePointer?
        guard EVP_DigestSignInit(context.pointer, &keyContext, digest, nil, pointer) == 1 else {
            throw .openSSL("EVP_DigestSignInit")
        }
        if pss, let digest, !Self.usePSS(keyContext, digest: digest) {
            throw .openSSL("EVP_PKEY_CTX_set_rsa_padding")
        }
        return try message.withNonNullBytes { (bytes, count) throws(CryptoError) -> [UInt8] in
            var length = 0
            guard EVP_DigestSign(context.pointer, nil, &length, bytes, count) == 1 else {
                throw .openSSL("EVP_DigestSign")
            }
            var signature = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSign(context.pointer, &signature, &length, bytes, count) == 1 else {
                throw .openSSL("EVP_DigestSign")
            }
            // An ECDSA signature's DER is often shorter than the maximum first reported.
            signature.removeSubrange(length...)
            return signature
        }
    }

    /// Whether `signature` is valid for `message` under this key, through `EVP_DigestVerify`.
    func isValidSignature(
        _ signature: [UInt8],
        for message: [UInt8],
        digest: OpaquePointer?,
        pss: Bool = false
    ) -> Bool {
        var keyContext: OpaquePointer?
        guard let context = try? OpenSSLObject(EVP_MD_CTX_new(), freedBy: EVP_MD_CTX_free, creator: "EVP_MD_CTX_new"),
            EVP_DigestVerifyInit(context.pointer, &keyContext, digest, nil, pointer) == 1,
            !pss || digest.map({ Self.usePSS(keyContext, digest: $0) }) == true
        else {
            ERR_clear_error()
            return false
        }
        let verdict = signature.withNonNullBytes { signatureBytes, signatureCount in
            message.withNonNullBytes { messageBytes, messageCount in
                EVP_DigestVerify(context.pointer, signatureBytes, signatureCount, messageBytes, messageCount)
            }
        }
        // A bad signature leaves decoding errors in the queue; they are an answer, not a failure.
        ERR_clear_error()
        return verdict == 1
    }

    /// Switches an RSA signing or verifying context to PSS with MGF1 over
    /// `digest` and a salt of the digest's length.
    private static func usePSS(_ keyContext: OpaquePointer?, digest: OpaquePointer) -> Bool {
        EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
            && EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, digest) == 1
            && EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, EVP_MD_get_size(digest)) == 1
    }

    /// The key pair as PKCS#8 PrivateKeyInfo DER (RFC 5208), unencrypted.
    var pkcs8PrivateKeyInfo: [UInt8] {
        let info: OpenSSLObject<OpaquePointer>
        do {
            info = try OpenSSLObject(
                EVP_PKEY2PKCS8(pointer),
                freedBy: PKCS8_PRIV_KEY_INFO_free,
                creator: "EVP_PKEY2PKCS8"
            )
        } catch {
            // Exporting a key this code built fails only when OpenSSL cannot allocate.
            preconditionFailure("\(error)")
        }
        return derEncoded { i2d_PKCS8_PRIV_KEY_INFO(info.pointer, $0) }
    }

    /// Decodes PKCS#8 PrivateKeyInfo DER into a key pair of algorithm `algorithm` (an OpenSSL key type name).
    static func fromPKCS8(_ der: [UInt8], algorithm: String) throws(CryptoError) -> EVPKey {
        let decodedInfo = derDecoded(der, { d2i_PKCS8_PRIV_KEY_INFO(nil, $0, $1) }, free: PKCS8_PRIV_KEY_INFO_free)
        guard let decodedInfo else {
            throw CryptoError(.invalidKey, "not a PKCS#8 PrivateKeyInfo")
        }
        let info = try OpenSSLObject(decodedInfo, freedBy: PKCS8_PRIV_KEY_INFO_free, creator: "d2i_PKCS8_PRIV_KEY_INFO")
        guard let decoded = EVP_PKCS82PKEY(info.pointer) else {
            throw .rejected(.invalidKey, "PKCS#8 key not understood")
        }
        let key = try EVPKey(decoded, creator: "EVP_PKCS82PKEY")
        guard EVP_PKEY_is_a(key.pointer, algorithm) == 1 else {
            throw CryptoError(.invalidKey, "PKCS#8 key is not \(algorithm)")
        }
        return key
    }
}
