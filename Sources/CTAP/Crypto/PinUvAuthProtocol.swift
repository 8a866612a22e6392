// PIN/UV auth protocols One and Two (CTAP 2.1 §6.5.4 abstract definition,
// §6.5.6 protocol One, §6.5.7 protocol Two): the key agreement that gives the
// platform and the authenticator a shared secret, and the symmetric operations
// both sides run on it. Pure: randomness comes from the injected EntropySource,
// every primitive from LatchkeyCrypto.

public import CBOR
public import LatchkeyCrypto
public import LatchkeyErrors

/// A PIN/UV auth protocol version, as `pinUvAuthProtocol` carries it.
///
/// The symmetric operations depend on the version alone, so they live here;
/// the key agreement key and the pinUvAuthToken live in `PinUvAuthProtocol`.
public enum PinUvAuthProtocolVersion: UInt64, Sendable, CaseIterable {
    /// PIN/UV auth protocol One (§6.5.6): SHA-256 KDF, AES-256-CBC with a zero
    /// IV, HMAC-SHA-256 truncated to 16 bytes.
    case one = 1
    /// PIN/UV auth protocol Two (§6.5.7): HKDF-SHA-256 into separate HMAC and
    /// AES keys, AES-256-CBC with a random IV prefix, full HMAC-SHA-256.
    case two = 2

    static let blockByteCount = 16
    static let hkdfSalt = [UInt8](repeating: 0, count: 32)
    static let hmacKeyInfo = Array("CTAP2 HMAC key".utf8)
    static let aesKeyInfo = Array("CTAP2 AES key".utf8)

    /// The length of a shared secret: 32 bytes for One, 64 (HMAC key then AES
    /// key) for Two.
    public var sharedSecretByteCount: Int { self == .one ? 32 : 64 }

    /// kdf(Z): SHA-256(Z) for One; for Two HKDF-SHA-256(salt = 32 zero bytes,
    /// IKM = Z, L = 32) with info "CTAP2 HMAC key", then with info "CTAP2 AES key".
    public func kdf(_ z: [UInt8]) -> [UInt8] {
        switch self {
        case .one:
            return SHA256.hash(z)
        case .two:
            let hmacKey = HKDFSHA256.deriveKey(
                inputKeyMaterial: z, salt: Self.hkdfSalt, info: Self.hmacKeyInfo, outputByteCount: 32
            )
            let aesKey = HKDFSHA256.deriveKey(
                inputKeyMaterial: z, salt: Self.hkdfSalt, info: Self.aesKeyInfo, outputByteCount: 32
            )
            return hmacKey + aesKey
        }
    }

    /// encrypt(key, demPlaintext): AES-256-CBC without padding. One uses the
    /// whole 32-byte key and a zero IV; Two uses the AES half of the shared
    /// secret and a random IV drawn from `entropy`, which prefixes the result.
    ///
    /// The authenticator only encrypts pinUvAuthTokens, so a plaintext that is
    /// not whole blocks, or a key of the wrong length, is a programmer error.
    public func encrypt(key: [UInt8], plaintext: [UInt8], entropy: any EntropySource) throws(CryptoError) -> [UInt8] {
        precondition(plaintext.count % Self.blockByteCount == 0, "PIN/UV plaintexts are whole AES blocks")
        switch self {
        case .one:
            precondition(key.count == 32, "a protocol One key is 32 bytes")
            return try AES256CBC.encrypt(plaintext, key: key, iv: Self.zeroIV)
        case .two:
            let iv = entropy.bytes(count: Self.blockByteCount)
            return iv + (try AES256CBC.encrypt(plaintext, key: aesKey(key), iv: iv))
        }
    }

    /// decrypt(key, demCiphertext): the inverse of `encrypt`. Throws
    /// `.invalidLength` when the ciphertext is not whole AES blocks (after the
    /// 16-byte IV, for Two).
    public func decrypt(key: [UInt8], ciphertext: [UInt8]) throws(PinUvAuthError) -> [UInt8] {
        let iv: [UInt8]
        let body: [UInt8]
        let aesKey: [UInt8]
        switch self {
        case .one:
            precondition(key.count == 32, "a protocol One key is 32 bytes")
            (iv, body, aesKey) = (Self.zeroIV, ciphertext, key)
        case .two:
            guard ciphertext.count >= Self.blockByteCount else {
                throw PinUvAuthError(.invalidLength, "protocol Two ciphertext shorter than its IV")
            }
            (iv, body, aesKey) = (
                Array(ciphertext.prefix(Self.blockByteCount)), Array(ciphertext.dropFirst(Self.blockByteCount)),
                self.aesKey(key)
            )
        }
        guard body.count % Self.blockByteCount == 0 else {
            throw PinUvAuthError(.invalidLength, "ciphertext of \(body.count) bytes is not whole AES blocks")
        }
        do {
            return try AES256CBC.decrypt(body, key: aesKey, iv: iv)
        } catch {
            // Lengths were checked above; what is left is OpenSSL failing.
            throw PinUvAuthError(.crypto, "AES-256-CBC: \(error)")
        }
    }

    /// authenticate(key, message): HMAC-SHA-256, its first 16 bytes for One.
    /// Two keys the HMAC with the first 32 bytes of `key`, so a 64-byte shared
    /// secret and a 32-byte pinUvAuthToken both work.
    public func authenticate(key: [UInt8], message: [UInt8]) -> [UInt8] {
        switch self {
        case .one:
            return Array(HMACSHA256.authenticationCode(key: key, message: message).prefix(16))
        case .two:
            return HMACSHA256.authenticationCode(key: Array(key.prefix(32)), message: message)
        }
    }

    /// verify(key, message, signature): whether `signature` is
    /// authenticate(key, message), compared in constant time. A signature of
    /// the wrong length never verifies.
    public func verify(key: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
        constantTimeEqual(authenticate(key: key, message: message), signature)
    }

    private static let zeroIV = [UInt8](repeating: 0, count: blockByteCount)

    private func aesKey(_ sharedSecret: [UInt8]) -> [UInt8] {
        precondition(sharedSecret.count == 64, "a protocol Two shared secret is 64 bytes")
        return Array(sharedSecret.suffix(32))
    }
}

/// One PIN/UV auth protocol as the authenticator runs it (§6.5.4): its key
/// agreement key pair and its pinUvAuthToken, both regenerated at power-up
/// (`init`) and on demand.
public struct PinUvAuthProtocol: Sendable {
    /// The length of a pinUvAuthToken (§6.5.2: 32 bytes for both protocols).
    public static let tokenByteCount = 32

    /// The version this instance runs.
    public let version: PinUvAuthProtocolVersion
    /// The authenticator's key agreement key (P-256).
    public private(set) var keyAgreementKey: P256PrivateKey
    /// The current pinUvAuthToken. Whether it may be used is the token state's
    /// business (`PinUvAuthTokenState`).
    public private(set) var pinUvAuthToken: [UInt8]

    /// initialize(): a fresh key agreement key and pinUvAuthToken.
    public init(version: PinUvAuthProtocolVersion, entropy: any EntropySource) {
        self.version = version
        keyAgreementKey = Self.generateKey(entropy)
        pinUvAuthToken = entropy.bytes(count: Self.tokenByteCount)
    }

    /// regenerate(): a new key agreement key, so that shared secrets made with
    /// the old one stop working.
    public mutating func regenerate(entropy: any EntropySource) {
        keyAgreementKey = Self.generateKey(entropy)
    }

    /// resetPinUvAuthToken(): a new random pinUvAuthToken.
    public mutating func resetPinUvAuthToken(entropy: any EntropySource) {
        pinUvAuthToken = entropy.bytes(count: Self.tokenByteCount)
    }

    /// getPublicKey(): the key agreement public key as a COSE_Key,
    /// {1: 2 (EC2), 3: -25 (ECDH-ES+HKDF-256), -1: 1 (P-256), -2: x, -3: y}.
    /// The spec names alg -25 although the KDF actually used is the protocol's.
    public func getPublicKey() -> CBORValue {
        let publicKey = keyAgreementKey.publicKey
        return .intMap([(1, 2), (3, -25), (-1, 1), (-2, .bytes(publicKey.x)), (-3, .bytes(publicKey.y))])
    }

    /// decapsulate(peerCoseKey): kdf(ecdh(peerCoseKey)), the shared secret.
    ///
    /// The peer key must be an EC2 (kty 2) P-256 (crv 1) COSE_Key with 32-byte
    /// x and y naming a point on the curve; anything else throws `.malformedKey`
    /// (CTAP1_ERR_INVALID_PARAMETER at the command boundary). `alg` is not
    /// checked: the spec itself says -25 is not the algorithm used.
    public func decapsulate(_ peerCoseKey: CBORValue) throws(PinUvAuthError) -> [UInt8] {
        guard case .map(let entries) = peerCoseKey else {
            throw PinUvAuthError(.malformedKey, "keyAgreement is \(peerCoseKey.typeName), not a COSE_Key map")
        }
        let map = CBORMap(entries: entries)
        guard map[int: 1] == .int(2) else { throw PinUvAuthError(.malformedKey, "kty is not EC2") }
        guard map[int: -1] == .int(1) else { throw PinUvAuthError(.malformedKey, "crv is not P-256") }
        guard case .bytes(let x) = map[int: -2], case .bytes(let y) = map[int: -3], x.count == 32, y.count == 32
        else { throw PinUvAuthError(.malformedKey, "x and y must be 32-byte byte strings") }
        let z: [UInt8]
        do {
            z = try keyAgreementKey.sharedSecret(with: P256PublicKey(x: x, y: y))
        } catch {
            throw PinUvAuthError(.malformedKey, "peer key rejected: \(error)")
        }
        return version.kdf(z)
    }

    /// A P-256 key from `entropy`, drawing again in the rare case 32 bytes are
    /// not a valid scalar.
    private static func generateKey(_ entropy: any EntropySource) -> P256PrivateKey {
        while true {
            if let key = try? P256PrivateKey(rawRepresentation: entropy.bytes(count: 32)) { return key }
        }
    }
}

/// A failure inside a PIN/UV auth protocol operation: a malformed peer key or
/// a ciphertext of the wrong length. Equal by code, so tests can match it; the
/// command handlers turn it into the status the spec gives for their step.
/// The reason never contains key material.
public typealias PinUvAuthError = CodedError<PinUvAuthErrorCode>

/// The kind of a `PinUvAuthError`.
public enum PinUvAuthErrorCode: String, ErrorCode {
    /// The platform's COSE_Key is not a P-256 point.
    case malformedKey
    /// A ciphertext is not whole AES blocks.
    case invalidLength
    /// OpenSSL failed on valid input.
    case crypto

    public var title: String { "PIN/UV auth \(rawValue)" }
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for index in a.indices { difference |= a[index] ^ b[index] }
    return difference == 0
}
