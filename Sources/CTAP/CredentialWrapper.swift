// Non-discoverable credential IDs: the private key sealed with AES-256-GCM
// under the key's wrapping secret and bound to the rpIdHash through the AAD
// (DESIGN.md, "Discoverable credentials live in the store"). Nothing is stored
// for such a credential; a reset replaces the secret, which invalidates them.
//
// Layout (63 bytes): version 0x01 | nonce (12) | sealed(alg, credProtect, key[32]) (34) | tag (16)

public import LatchkeyCrypto

/// What a wrapped credential ID carries.
public struct WrappedCredential: Sendable {
    /// The key.
    public var privateKey: CredentialPrivateKey
    /// The credProtect level it was made with.
    public var credProtect: UInt8
}

/// Seals and opens non-discoverable credential IDs.
public struct CredentialWrapper: Sendable {
    static let version: UInt8 = 0x01
    /// The length of every wrapped credential ID.
    public static let credentialIdLength = 1 + 12 + 34 + 16
    static let domain = Array("latchkey/wrapped-credential/v1".utf8)

    private let key: [UInt8]

    /// A wrapper using the 32-byte wrapping secret.
    public init(secret: [UInt8]) {
        precondition(secret.count == 32, "the wrapping secret is 32 bytes")
        key = secret
    }

    /// A credential ID that only this key can open, and only for `rpIdHash`.
    public func wrap(
        _ credential: WrappedCredential,
        rpIdHash: [UInt8],
        entropy: any EntropySource
    ) throws(CryptoError) -> [UInt8] {
        let nonce = entropy.bytes(count: 12)
        let tag: UInt8 = credential.privateKey.algorithm == .es256 ? 1 : 2
        let plaintext = [tag, credential.credProtect] + credential.privateKey.rawRepresentation
        let sealed = try AES256GCM.seal(plaintext, key: key, nonce: nonce, authenticating: Self.domain + rpIdHash)
        return [Self.version] + nonce + sealed
    }

    /// The credential inside `credentialId`, or nil when it is not one of ours
    /// for `rpIdHash` (wrong length, version, relying party or key).
    public func unwrap(_ credentialId: [UInt8], rpIdHash: [UInt8]) -> WrappedCredential? {
        guard credentialId.count == Self.credentialIdLength, credentialId[0] == Self.version else { return nil }
        let nonce = Array(credentialId[1..<13])
        let sealed = Array(credentialId[13...])
        guard
            let plaintext = try? AES256GCM.open(sealed, key: key, nonce: nonce, authenticating: Self.domain + rpIdHash),
            plaintext.count == 34
        else { return nil }
        let algorithm: COSEAlgorithm
        switch plaintext[0] {
        case 1: algorithm = .es256
        case 2: algorithm = .edDSA
        default: return nil
        }
        guard let key = try? CredentialPrivateKey(algorithm: algorithm, rawRepresentation: Array(plaintext[2...]))
        else { return nil }
        return WrappedCredential(privateKey: key, credProtect: plaintext[1])
    }
}
