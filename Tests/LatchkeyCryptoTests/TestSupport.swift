// Helpers for the crypto tests: hex literals, and independent checks that
// call OpenSSL directly rather than through LatchkeyCrypto.

import COpenSSL

extension Array where Element == UInt8 {
    /// Bytes from a hex string; whitespace is ignored so vectors can wrap.
    init(hex: String) {
        let digits = hex.filter { !$0.isWhitespace }
        precondition(digits.count % 2 == 0, "odd-length hex")
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            bytes.append(UInt8(digits[index..<next], radix: 16)!)
            index = next
        }
        self = bytes
    }

    /// The bytes as lowercase hex.
    var hex: String {
        map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// A copy with bit 0 of byte `index` flipped.
    func flippingBit(at index: Int) -> [UInt8] {
        var copy = self
        copy[index] ^= 0x01
        return copy
    }
}

/// Verifies `signature` over `message` with raw OpenSSL calls on a key decoded
/// from SubjectPublicKeyInfo DER; `digest` is EVP_sha256() for ECDSA, nil for Ed25519.
func openSSLVerifies(spki: [UInt8], signature: [UInt8], message: [UInt8], digest: OpaquePointer?) -> Bool {
    let key = spki.withUnsafeBufferPointer { buffer -> OpaquePointer? in
        var cursor = buffer.baseAddress
        return d2i_PUBKEY(nil, &cursor, buffer.count)
    }
    guard let key else {
        return false
    }
    defer { EVP_PKEY_free(key) }
    let context = EVP_MD_CTX_new()
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestVerifyInit(context, nil, digest, nil, key) == 1 else {
        return false
    }
    var placeholder: UInt8 = 0
    let result =
        message.isEmpty
        ? EVP_DigestVerify(context, signature, signature.count, &placeholder, 0)
        : EVP_DigestVerify(context, signature, signature.count, message, message.count)
    ERR_clear_error()
    return result == 1
}
