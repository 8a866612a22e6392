// Encryption at rest: AES-256-GCM under the store's master key, with a fresh
// 96-bit nonce per value and a domain string plus the value's identity (the
// credential ID, the secret's name) as associated data, so a sealed value
// cannot be moved to another row or reused as another kind of value.
// Stored layout: nonce (12) || ciphertext || tag (16).

import CTAP
import LatchkeyCrypto

/// Seals and opens values under one master key.
struct Sealer: Sendable {
    /// What a sealed value is; the raw value starts the associated data.
    enum Domain: String {
        case credential = "latchkey/credential/v1"
        case credRandom = "latchkey/credential-cred-random/v1"
        case credBlob = "latchkey/credential-cred-blob/v1"
        case largeBlobKey = "latchkey/credential-large-blob-key/v1"
        case secret = "latchkey/secret/v1"
        case keyCheck = "latchkey/key-check/v1"
    }

    static let keySize = 32
    static let nonceSize = 12
    static let tagSize = 16

    private let key: [UInt8]

    init(key: [UInt8]) {
        precondition(key.count == Self.keySize, "the master key is 32 bytes")
        self.key = key
    }

    static func associatedData(_ domain: Domain, _ context: [UInt8]) -> [UInt8] {
        Array(domain.rawValue.utf8) + context
    }

    /// Seals `plaintext`; `what` names the value for the error (never its content).
    func seal(_ plaintext: [UInt8], _ domain: Domain, context: [UInt8], what: String) throws(StoreError) -> [UInt8] {
        let nonce = SecureRandom.bytes(count: Self.nonceSize)
        do {
            let sealed = try AES256GCM.seal(
                plaintext,
                key: key,
                nonce: nonce,
                authenticating: Self.associatedData(domain, context)
            )
            return nonce + sealed
        } catch {
            throw StoreError(.io, "cannot encrypt \(what): \(error)")
        }
    }

    /// Opens a stored value; a short, tampered or foreign value (or a wrong
    /// master key) is `.corrupt`.
    func open(_ stored: [UInt8], _ domain: Domain, context: [UInt8], what: String) throws(StoreError) -> [UInt8] {
        guard stored.count >= Self.nonceSize + Self.tagSize else {
            throw StoreError(.corrupt, "\(what) is too short to be sealed (\(stored.count) bytes)")
        }
        do {
            return try AES256GCM.open(
                Array(stored[Self.nonceSize...]),
                key: key,
                nonce: Array(stored[..<Self.nonceSize]),
                authenticating: Self.associatedData(domain, context)
            )
        } catch {
            throw StoreError(.corrupt, "\(what) does not decrypt under the master key (wrong key or tampered row)")
        }
    }
}
