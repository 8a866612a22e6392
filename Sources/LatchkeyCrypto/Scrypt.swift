// scrypt (RFC 7914), the passphrase KDF of latchkey's encrypted passkey
// exports, through OpenSSL's `EVP_KDF` "SCRYPT". The cost parameters travel
// with the export, so they are checked here before OpenSSL sees them.

import COpenSSL

/// scrypt, RFC 7914 §6: a memory-hard key derivation from a passphrase.
public enum Scrypt {
    /// The cost parameters of one derivation (RFC 7914 §2).
    public struct Parameters: Sendable, Equatable {
        /// CPU/memory cost N: a power of two greater than 1.
        public var n: UInt64
        /// Block size r.
        public var r: UInt32
        /// Parallelization p.
        public var p: UInt32

        public init(n: UInt64, r: UInt32, p: UInt32) {
            self.n = n
            self.r = r
            self.p = p
        }

        /// What latchkey's exports use: N = 2^17, r = 8, p = 1 — 128 MiB and
        /// about half a second, OWASP's recommended minimum for scrypt.
        public static let export = Parameters(n: 1 << 17, r: 8, p: 1)

        /// The memory one derivation takes, in bytes: 128·r·N for V and
        /// 128·r·p for B (RFC 7914 §6), nil when it overflows.
        public var memoryByteCount: UInt64? {
            let (v, vOverflow) = UInt64(128 * UInt64(r)).multipliedReportingOverflow(by: n)
            let (b, bOverflow) = UInt64(128 * UInt64(r)).multipliedReportingOverflow(by: UInt64(p))
            guard !vOverflow, !bOverflow else { return nil }
            let (total, overflow) = v.addingReportingOverflow(b)
            return overflow ? nil : total
        }
    }

    /// Derives `outputByteCount` bytes from `passphrase` and `salt` (either may be empty).
    ///
    /// Throws `.invalidInput` unless N is a power of two greater than 1, r and
    /// p are at least 1, r·p < 2^30 (RFC 7914 §2) and one derivation takes at
    /// most `memoryLimit` bytes; `.openSSL` when OpenSSL cannot allocate.
    public static func deriveKey(
        passphrase: [UInt8],
        salt: [UInt8],
        parameters: Parameters,
        outputByteCount: Int,
        memoryLimit: UInt64 = 1 << 30
    ) throws(CryptoError) -> [UInt8] {
        let (n, r, p) = (parameters.n, parameters.r, parameters.p)
        guard n > 1, n & (n - 1) == 0, r >= 1, p >= 1, UInt64(r) * UInt64(p) < 1 << 30 else {
            throw CryptoError(.invalidInput, "scrypt needs N a power of two over 1, r and p at least 1, r·p < 2^30")
        }
        guard let memory = parameters.memoryByteCount, memory <= memoryLimit else {
            throw CryptoError(.invalidInput, "scrypt parameters need more than \(memoryLimit) bytes of memory")
        }
        guard outputByteCount >= 1 else {
            throw CryptoError(.invalidInput, "scrypt output must be at least 1 byte")
        }
        let context = try makeKDFContext("SCRYPT")
        var output = [UInt8](repeating: 0, count: outputByteCount)
        // OSSL_PARAM keeps pointers to the numbers, so they live in memory
        // that outlasts every call below, not in temporaries.
        let costs = UnsafeMutablePointer<UInt64>.allocate(capacity: 2)
        let blocks = UnsafeMutablePointer<UInt32>.allocate(capacity: 2)
        defer {
            costs.deallocate()
            blocks.deallocate()
        }
        // OpenSSL's own ceiling; a little above the need, for its bookkeeping.
        costs.initialize(to: n)
        (costs + 1).initialize(to: memory + (1 << 20))
        blocks.initialize(to: r)
        (blocks + 1).initialize(to: p)
        // An empty passphrase must still be a non-NULL pointer, or OpenSSL reports a missing password.
        let succeeded = passphrase.withNonNullBytes { passBytes, passCount in
            salt.withNonNullBytes { saltBytes, saltCount in
                var parameters = [
                    OSSL_PARAM_construct_octet_string(
                        cString(OSSLName.password),
                        UnsafeMutableRawPointer(mutating: passBytes),
                        passCount
                    ),
                    OSSL_PARAM_construct_octet_string(
                        cString(OSSLName.salt),
                        UnsafeMutableRawPointer(mutating: saltBytes),
                        saltCount
                    ),
                    OSSL_PARAM_construct_uint64(cString(OSSLName.scryptN), costs),
                    OSSL_PARAM_construct_uint32(cString(OSSLName.scryptR), blocks),
                    OSSL_PARAM_construct_uint32(cString(OSSLName.scryptP), blocks + 1),
                    OSSL_PARAM_construct_uint64(cString(OSSLName.scryptMaximumMemory), costs + 1),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_KDF_derive(context.pointer, &output, output.count, &parameters)
            }
        }
        guard succeeded == 1 else {
            throw .openSSL("EVP_KDF_derive(SCRYPT)")
        }
        return output
    }
}

extension OSSLName {
    // OSSL_KDF_PARAM_PASSWORD, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P, _SCRYPT_MAXMEM (core_names.h).
    static let password: StaticString = "pass"
    static let scryptN: StaticString = "n"
    static let scryptR: StaticString = "r"
    static let scryptP: StaticString = "p"
    static let scryptMaximumMemory: StaticString = "maxmem_bytes"
}
