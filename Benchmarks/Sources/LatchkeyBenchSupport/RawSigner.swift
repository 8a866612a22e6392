// The benchmarks' baseline: an ECDSA P-256 / SHA-256 signature straight through OpenSSL's
// EVP API, with no latchkey code in between. Every other figure is read as a multiple of it.

import CBenchOpenSSL

/// An EVP P-256 key and a signing call with nothing of latchkey's in between.
public final class RawSigner {
    private let key: OpaquePointer

    public init() {
        let context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil)
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer? = nil
        precondition(EVP_PKEY_keygen_init(context) == 1)
        precondition(EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime256v1) == 1)
        precondition(EVP_PKEY_keygen(context, &generated) == 1)
        key = generated!
    }

    deinit { EVP_PKEY_free(key) }

    /// Signs `message` (hashing it with SHA-256) and returns the DER signature's length.
    public func sign(_ message: [UInt8]) -> Int {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1)
        var length = 80
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(context, &signature, &length, message, message.count) == 1)
        return length
    }
}
