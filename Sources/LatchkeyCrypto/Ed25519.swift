// Ed25519 (RFC 8032, pure variant): the EdDSA credential algorithm (COSE -8).

import COpenSSL

/// An Ed25519 key pair, built from its 32-byte seed (RFC 8032 §5.1.5).
public final class Ed25519PrivateKey: @unchecked Sendable {
    private let key: EVPKey

    /// The public half of this key pair.
    public let publicKey: Ed25519PublicKey

    /// A fresh key pair from a random seed.
    public convenience init() throws(CryptoError) {
        try self.init(rawRepresentation: SecureRandom.bytes(count: Ed25519.keyByteCount))
    }

    /// The key pair whose seed is `rawRepresentation`; throws `.invalidKey` unless it is 32 bytes.
    public init(rawRepresentation: [UInt8]) throws(CryptoError) {
        guard rawRepresentation.count == Ed25519.keyByteCount else {
            throw CryptoError(
                .invalidKey,
                "Ed25519 seed must be \(Ed25519.keyByteCount) bytes, got \(rawRepresentation.count)"
            )
        }
        key = try EVPKey(
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, rawRepresentation, rawRepresentation.count),
            creator: "EVP_PKEY_new_raw_private_key"
        )
        var publicBytes = [UInt8](repeating: 0, count: Ed25519.keyByteCount)
        var length = publicBytes.count
        guard EVP_PKEY_get_raw_public_key(key.pointer, &publicBytes, &length) == 1, length == publicBytes.count else {
            throw .openSSL("EVP_PKEY_get_raw_public_key")
        }
        publicKey = try Ed25519PublicKey(rawRepresentation: publicBytes)
    }

    /// The key pair in a PKCS#8 PrivateKeyInfo DER (RFC 8410 §7); throws
    /// `.invalidKey` unless it is exactly one Ed25519 key.
    public convenience init(pkcs8DERRepresentation: [UInt8]) throws(CryptoError) {
        let decoded = try EVPKey.fromPKCS8(pkcs8DERRepresentation, algorithm: "ED25519")
        try self.init(rawRepresentation: decoded.rawPrivateKey())
    }

    /// The 32-byte seed.
    public var rawRepresentation: [UInt8] {
        // Reading back the seed this code set cannot fail short of memory exhaustion.
        try! key.rawPrivateKey()
    }

    /// The key pair as PKCS#8 PrivateKeyInfo DER (RFC 8410 §7).
    public var pkcs8DERRepresentation: [UInt8] {
        key.pkcs8PrivateKeyInfo
    }

    /// The 64-byte pure Ed25519 signature of `message` (RFC 8032 §5.1.6); deterministic.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.sign(message, digest: nil)
    }
}

/// An Ed25519 public key: the 32-byte encoded point A (RFC 8032 §5.1.5).
public final class Ed25519PublicKey: @unchecked Sendable {
    private let key: EVPKey

    /// The 32-byte encoded point.
    public let rawRepresentation: [UInt8]

    /// The key whose encoding is `rawRepresentation`; throws `.invalidKey` unless it is 32 bytes.
    ///
    /// The point itself is decoded when a signature is checked: a key that is
    /// not a valid point verifies nothing.
    public init(rawRepresentation: [UInt8]) throws(CryptoError) {
        guard rawRepresentation.count == Ed25519.keyByteCount else {
            throw CryptoError(
                .invalidKey,
                "Ed25519 public key must be \(Ed25519.keyByteCount) bytes, got \(rawRepresentation.count)"
            )
        }
        self.rawRepresentation = rawRepresentation
        key = try EVPKey(
            EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, rawRepresentation, rawRepresentation.count),
            creator: "EVP_PKEY_new_raw_public_key"
        )
    }

    /// The key as SubjectPublicKeyInfo DER (RFC 8410 §4).
    public var derRepresentation: [UInt8] {
        key.subjectPublicKeyInfo
    }

    /// Whether `signature` is a valid pure Ed25519 signature of `message` under this key.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        key.isValidSignature(signature, for: message, digest: nil)
    }
}

/// Ed25519 constants.
enum Ed25519 {
    /// The length of a seed and of a public key, in bytes.
    static let keyByteCount = 32
}

extension EVPKey {
    /// The raw private key of an Ed25519 key pair (its seed).
    fileprivate func rawPrivateKey() throws(CryptoError) -> [UInt8] {
        var seed = [UInt8](repeating: 0, count: Ed25519.keyByteCount)
        var length = seed.count
        guard EVP_PKEY_get_raw_private_key(pointer, &seed, &length) == 1, length == seed.count else {
            throw .openSSL("EVP_PKEY_get_raw_private_key")
        }
        return seed
    }
}
