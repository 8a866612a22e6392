// ECDSA on P-384, P-521 and secp256k1: keys from scalars, seeds and PKCS#8,
// signatures checked by our verifier and by raw OpenSSL.

import COpenSSL
import LatchkeyCrypto
import Testing

@Suite("ECDSA (P-384, P-521, secp256k1)")
struct ECDSATests {
    static func digest(_ curve: ECCurve) -> OpaquePointer? {
        switch curve {
        case .p384: EVP_sha384()
        case .p521: EVP_sha512()
        case .secp256k1: EVP_sha256()
        }
    }

    @Test("signs with the curve's hash; both verifiers accept, a changed message fails", arguments: ECCurve.allCases)
    func signsAndVerifies(curve: ECCurve) throws {
        let key = try ECPrivateKey(curve: curve, seed: [UInt8](repeating: 7, count: 32))
        let message = Array("latchkey".utf8)
        let signature = try key.signature(for: message)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(signature, for: message.flippingBit(at: 0)))
        #expect(
            openSSLVerifies(
                spki: key.publicKey.derRepresentation, signature: signature, message: message, digest: Self.digest(curve)
            )
        )
        let rebuilt = try ECPublicKey(curve: curve, x: key.publicKey.x, y: key.publicKey.y)
        #expect(rebuilt.isValidSignature(signature, for: message))
        #expect(key.publicKey.x.count == curve.scalarByteCount)
    }

    @Test("a seed always derives the same key, another seed another key", arguments: ECCurve.allCases)
    func seedIsDeterministic(curve: ECCurve) throws {
        let seed = [UInt8](repeating: 1, count: 32)
        let first = try ECPrivateKey(curve: curve, seed: seed)
        #expect(first.rawRepresentation == (try ECPrivateKey(curve: curve, seed: seed)).rawRepresentation)
        #expect(first.rawRepresentation != (try ECPrivateKey(curve: curve, seed: seed.flippingBit(at: 3))).rawRepresentation)
        #expect(throws: CryptoError(.invalidKey, "")) { try ECPrivateKey(curve: curve, seed: [1, 2, 3]) }
    }

    @Test("PKCS#8 round trip keeps the curve and scalar", arguments: ECCurve.allCases)
    func pkcs8RoundTrip(curve: ECCurve) throws {
        let key = try ECPrivateKey(curve: curve, seed: [UInt8](repeating: 9, count: 32))
        let decoded = try ECPrivateKey(pkcs8DERRepresentation: key.pkcs8DERRepresentation)
        #expect(decoded.curve == curve)
        #expect(decoded.rawRepresentation == key.rawRepresentation)
    }

    @Test("refuses a P-256 PKCS#8, a zero scalar and a point off the curve")
    func refusesOthers() throws {
        #expect(throws: CryptoError(.invalidKey, "")) {
            try ECPrivateKey(pkcs8DERRepresentation: try P256PrivateKey().pkcs8DERRepresentation)
        }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try ECPrivateKey(curve: .p384, rawRepresentation: [UInt8](repeating: 0, count: 48))
        }
        let point = try ECPrivateKey(curve: .p521, seed: [UInt8](repeating: 2, count: 32)).publicKey.x963Representation
        #expect(throws: CryptoError(.invalidKey, "")) {
            try ECPublicKey(curve: .p521, x963Representation: point.flippingBit(at: point.count - 1))
        }
    }
}
