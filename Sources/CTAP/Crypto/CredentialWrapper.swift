// Non-discoverable credential IDs: the private key sealed with AES-256-GCM
// under the key's wrapping secret and bound to the rpIdHash through the AAD
// (only discoverable credentials live in the store). Nothing is stored
// for such a credential; a reset replaces the secret, which invalidates them.
//
// Layouts (version byte first, then nonce (12), then the sealed fields, then
// the GCM tag (16)):
//
// | version | sealed fields                                                 | ID length |
// |---------|---------------------------------------------------------------|-----------|
// | 0x01    | alg (1) credProtect (1) key (32)                              | 63        |
// | 0x02    | alg (1) credProtect (1) flags (1) key (32) credBlob (0...32)  | 64...96   |
//
// Version 2 adds the extensions a non-discoverable credential carries with
// it: flags bit 0 is hmac-secret, bit 1 thirdPartyPayment (CTAP 2.2 §12.9),
// and credBlob rides at the end. Version 1
// IDs, issued before extensions existed, are still accepted.
//
// `key` is the 32-byte seed of the credential's key (`CredentialPrivateKey`):
// the P-256 scalar or Ed25519 seed itself, or what the P-384, P-521,
// secp256k1 or RSA-2048 key is derived from, so every algorithm fits the
// same layout and RS256 and PS256 credentials can be non-discoverable
// without the key store. `alg` is one byte per algorithm (`algorithmTags`).
//
// hmac-secret's CredRandom for these credentials is derived, not stored:
// HMAC-SHA-256 under a key derived from the wrapping secret, over the
// private key and whether the user was verified (two independent values, as
// CTAP 2.1 §12.5 asks), so a reset changes it along with every wrapped ID.

public import LatchkeyCrypto

/// What a wrapped credential ID carries.
public struct WrappedCredential: Sendable {
    /// The key.
    public var privateKey: CredentialPrivateKey
    /// The credProtect level it was made with.
    public var credProtect: UInt8
    /// Whether it was made with hmac-secret.
    public var hmacSecret: Bool = false
    /// The credBlob it was made with.
    public var credBlob: [UInt8]?
    /// Whether it was made as a payment credential (thirdPartyPayment).
    public var thirdPartyPayment: Bool = false
}

/// Seals and opens non-discoverable credential IDs.
public struct CredentialWrapper: Sendable {
    static let version1: UInt8 = 0x01
    static let version2: UInt8 = 0x02
    static let nonceLength = 12
    static let tagLength = 16
    static let keyLength = 32
    /// The longest credBlob a wrapped ID carries (getInfo maxCredBlobLength).
    public static let maxCredBlobLength = 32
    /// The ID lengths this wrapper issues and opens.
    public static let credentialIdLengths = 63...(64 + maxCredBlobLength)
    static let domain = Array("latchkey/wrapped-credential/v1".utf8)
    /// The `alg` byte of each algorithm; a released value never changes.
    static let algorithmTags: [(tag: UInt8, algorithm: COSEAlgorithm)] = [
        (1, .es256), (2, .edDSA), (3, .es384), (4, .es512), (5, .ps256), (6, .rs256), (7, .es256K),
        (8, .esp256), (9, .esp384), (10, .esp512), (11, .ed25519), (12, .mldsa65), (13, .mldsa87),
    ]
    static let credRandomInfo = Array("latchkey/cred-random/v1".utf8)

    private let key: [UInt8]
    private let credRandomKey: [UInt8]

    /// A wrapper using the 32-byte wrapping secret.
    public init(secret: [UInt8]) {
        precondition(secret.count == 32, "the wrapping secret is 32 bytes")
        key = secret
        credRandomKey = HKDFSHA256.deriveKey(
            inputKeyMaterial: secret, salt: [], info: Self.credRandomInfo, outputByteCount: 32
        )
    }

    /// A credential ID that only this key can open, and only for `rpIdHash`.
    /// Throws `.invalidKey` for a key without a seed (an imported key of an
    /// algorithm whose key is derived from one).
    public func wrap(
        _ credential: WrappedCredential,
        rpIdHash: [UInt8],
        entropy: any EntropySource
    ) throws(CryptoError) -> [UInt8] {
        let credBlob = credential.credBlob ?? []
        precondition(credBlob.count <= Self.maxCredBlobLength, "a wrapped credBlob has at most 32 bytes")
        let nonce = entropy.bytes(count: Self.nonceLength)
        guard let seed = credential.privateKey.seed,
            let tag = Self.algorithmTags.first(where: { $0.algorithm == credential.privateKey.algorithm })?.tag
        else {
            throw CryptoError(.invalidKey, "a \(credential.privateKey.algorithm.name) key without a seed cannot be wrapped")
        }
        let flags: UInt8 = (credential.hmacSecret ? 0x01 : 0x00) | (credential.thirdPartyPayment ? 0x02 : 0x00)
        let plaintext = [tag, credential.credProtect, flags] + seed + credBlob
        let sealed = try AES256GCM.seal(plaintext, key: key, nonce: nonce, authenticating: Self.domain + rpIdHash)
        return [Self.version2] + nonce + sealed
    }

    /// The credential inside `credentialId`, or nil when it is not one of ours
    /// for `rpIdHash` (wrong length, version, relying party or key).
    public func unwrap(_ credentialId: [UInt8], rpIdHash: [UInt8]) -> WrappedCredential? {
        guard Self.credentialIdLengths.contains(credentialId.count) else { return nil }
        let version = credentialId[0]
        guard version == Self.version1 || version == Self.version2 else { return nil }
        let nonce = Array(credentialId[1...Self.nonceLength])
        let sealed = Array(credentialId[(1 + Self.nonceLength)...])
        guard
            let plaintext = try? AES256GCM.open(sealed, key: key, nonce: nonce, authenticating: Self.domain + rpIdHash)
        else { return nil }
        let headerLength = version == Self.version1 ? 2 : 3
        guard plaintext.count >= headerLength + Self.keyLength else { return nil }
        if version == Self.version1, plaintext.count != headerLength + Self.keyLength { return nil }
        guard let algorithm = Self.algorithmTags.first(where: { $0.tag == plaintext[0] })?.algorithm else { return nil }
        let keyEnd = headerLength + Self.keyLength
        guard let key = try? CredentialPrivateKey(algorithm: algorithm, seed: Array(plaintext[headerLength..<keyEnd]))
        else { return nil }
        let flags = version == Self.version1 ? 0 : plaintext[2]
        let credBlob = Array(plaintext[keyEnd...])
        return WrappedCredential(
            privateKey: key, credProtect: plaintext[1], hmacSecret: flags & 0x01 != 0,
            credBlob: credBlob.isEmpty ? nil : credBlob, thirdPartyPayment: flags & 0x02 != 0
        )
    }

    /// hmac-secret's CredRandom for a wrapped credential: one value with user
    /// verification and an independent one without (CTAP 2.1 §12.5). Over
    /// the key's seed, which every wrapped key has (for ES256 and EdDSA the
    /// raw key, as before the other algorithms).
    public func credRandom(for privateKey: CredentialPrivateKey, userVerified: Bool) -> [UInt8] {
        HMACSHA256.authenticationCode(
            key: credRandomKey, message: [userVerified ? 1 : 0] + (privateKey.seed ?? privateKey.pkcs8Representation)
        )
    }
}
