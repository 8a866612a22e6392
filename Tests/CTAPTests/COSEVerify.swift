// Verifying a WebAuthn signature with whatever COSE public key a test holds,
// ML-DSA included (OpenSSL 3.0 has none, so swift-crypto's own checks it).

import CBOR
import Crypto

/// Verifies a WebAuthn signature with a COSE public key: ML-DSA (AKP) with
/// swift-crypto's own ML-DSA, every other key through OpenSSL directly.
func verify(cose: CBORMap, signature: [UInt8], message: [UInt8]) throws -> Bool {
    let alg = try cose.required(3, "alg").intValue()
    guard try cose.required(1, "kty").intValue() == 7 else {
        return opensslVerify(spki: try spki(cose: cose), signature: signature, message: message, pss: alg == -37)
    }
    let publicKey = try cose.required(-1, "pub").bytesValue()
    switch alg {
    case -49: return try MLDSA65.PublicKey(rawRepresentation: publicKey).isValidSignature(signature, for: message)
    case -50: return try MLDSA87.PublicKey(rawRepresentation: publicKey).isValidSignature(signature, for: message)
    default: throw CBORError(.unexpectedType, "unknown AKP alg")
    }
}
