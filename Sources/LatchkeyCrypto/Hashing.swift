// Hashing, message authentication and key derivation over SHA-256, plus the
// system random generator: the symmetric primitives CTAP needs (rpIdHash,
// PIN/UV auth protocols 1 and 2, hmac-secret).

import COpenSSL

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    /// The length of a digest, in bytes.
    static let byteCount = 32

    /// The 32-byte SHA-256 digest of `data`.
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let succeeded = data.withUnsafeBufferPointer { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &digest, &length, EVP_sha256(), nil)
        }
        // Hashing in memory fails only when OpenSSL cannot allocate.
        precondition(succeeded == 1 && length == byteCount, "EVP_Digest failed: \(drainOpenSSLErrors())")
        return digest
    }
}

/// HMAC with SHA-256 (RFC 2104).
public enum HMACSHA256 {
    /// The 32-byte HMAC-SHA-256 of `message` under `key` (any length, including empty).
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length = 0
        // HMAC reads a NULL key as "keep the previous key", not as empty.
        let succeeded = key.withNonNullBytes { keyBytes, keyCount in
            message.withUnsafeBufferPointer { messageBytes in
                EVP_Q_mac(
                    nil,
                    "HMAC",
                    nil,
                    "SHA256",
                    nil,
                    keyBytes,
                    keyCount,
                    messageBytes.baseAddress,
                    messageBytes.count,
                    &code,
                    code.count,
                    &length
                )
            }
        }
        precondition(succeeded != nil && length == SHA256.byteCount, "EVP_Q_mac failed: \(drainOpenSSLErrors())")
        return code
    }
}

/// HKDF with SHA-256 (RFC 5869), extract then expand, through OpenSSL's `EVP_KDF` "HKDF".
public enum HKDFSHA256 {
    /// Derives `outputByteCount` bytes from `inputKeyMaterial`.
    ///
    /// An empty `salt` means HashLen zero bytes (RFC 5869 §2.2). Asking for
    /// fewer than 1 or more than 255 × 32 bytes is a programmer error and traps.
    public static func deriveKey(
        inputKeyMaterial: [UInt8],
        salt: [UInt8],
        info: [UInt8],
        outputByteCount: Int
    ) -> [UInt8] {
        precondition((1...255 * SHA256.byteCount).contains(outputByteCount), "HKDF output length out of range")
        do {
            return try derive(inputKeyMaterial, salt: salt, info: info, count: outputByteCount)
        } catch {
            // HKDF over valid parameters fails only when OpenSSL cannot allocate.
            preconditionFailure("HKDF failed: \(error)")
        }
    }

    private static func derive(
        _ inputKeyMaterial: [UInt8],
        salt: [UInt8],
        info: [UInt8],
        count: Int
    ) throws(CryptoError) -> [UInt8] {
        let context = try makeKDFContext("HKDF")
        var output = [UInt8](repeating: 0, count: count)
        // An empty IKM must still be a non-NULL pointer, or OpenSSL reports a missing key.
        let succeeded = inputKeyMaterial.withNonNullBytes { ikm, ikmCount in
            salt.withNonNullBytes { saltBytes, saltCount in
                info.withNonNullBytes { infoBytes, infoCount in
                    // OSSL_PARAM keeps the name pointers, so they must be static C strings.
                    var parameters = [
                        OSSL_PARAM_construct_utf8_string(cString(OSSLName.digest), cMutableString(OSSLName.sha256), 0),
                        OSSL_PARAM_construct_octet_string(
                            cString(OSSLName.key),
                            UnsafeMutableRawPointer(mutating: ikm),
                            ikmCount
                        ),
                        OSSL_PARAM_construct_octet_string(
                            cString(OSSLName.salt),
                            UnsafeMutableRawPointer(mutating: saltBytes),
                            saltCount
                        ),
                        OSSL_PARAM_construct_octet_string(
                            cString(OSSLName.info),
                            UnsafeMutableRawPointer(mutating: infoBytes),
                            infoCount
                        ),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_KDF_derive(context.pointer, &output, output.count, &parameters)
                }
            }
        }
        guard succeeded == 1 else {
            throw .openSSL("EVP_KDF_derive")
        }
        return output
    }
}

/// The operating system's cryptographically secure random generator, through OpenSSL's `RAND_bytes`.
public enum SecureRandom {
    /// `count` random bytes. Traps if the generator cannot be seeded: no key
    /// may ever be made from predictable bytes.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else {
            return bytes
        }
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed: \(drainOpenSSLErrors())")
        return bytes
    }
}
