// Encryption at rest: AES-256-GCM with a fresh 96-bit nonce per value and a
// domain string plus the value's identity (the credential ID, the secret's
// name) as associated data, so a sealed value cannot be moved to another row
// or reused as another kind of value. Stored layout: nonce (12) || ciphertext
// || tag (16).
//
// Two levels of key (schema v4): the master key seals only the store's key
// check and its data key; the data key (random, one per store, replaced by
// every reset) seals everything else and keys the hashes rows are looked up
// by. A reset therefore makes every row sealed before it unreadable, wherever
// a copy of it survives.

import CTAP
import LatchkeyCrypto

/// Seals and opens values under one key (the master key or a data key).
struct Sealer: Sendable {
    /// What a sealed value is; the raw value starts the associated data.
    enum Domain: String {
        case credential = "latchkey/credential/v1"
        case credRandom = "latchkey/credential-cred-random/v1"
        case credBlob = "latchkey/credential-cred-blob/v1"
        case largeBlobKey = "latchkey/credential-large-blob-key/v1"
        case secret = "latchkey/secret/v1"
        case keyCheck = "latchkey/key-check/v1"
        /// The store's data key, sealed under the master key.
        case dataKey = "latchkey/data-key/v1"
        /// A credential's relying party and user (`AccountRecord`).
        case account = "latchkey/credential-account/v1"
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
            throw StoreError(
                .corrupt,
                "\(what) does not decrypt (wrong key, a row from before a reset, or a tampered row)"
            )
        }
    }
}

/// What a store's data key gives: the sealer of its values and the key of the
/// hashes its rows are found by, each derived with HKDF so that no key is used
/// for two purposes.
struct DataKeys: Sendable {
    let sealer: Sealer
    private let lookupKey: [UInt8]

    init(dataKey: [UInt8]) {
        sealer = Sealer(
            key: HKDFSHA256.deriveKey(
                inputKeyMaterial: dataKey, salt: [], info: Array("latchkey/store-seal/v1".utf8), outputByteCount: 32
            )
        )
        lookupKey = HKDFSHA256.deriveKey(
            inputKeyMaterial: dataKey, salt: [], info: Array("latchkey/store-lookup/v1".utf8), outputByteCount: 32
        )
    }

    /// The indexed stand-in for a relying party: HMAC of its rpIdHash. Without
    /// the data key nobody can test a guessed RP ID against it, as anyone can
    /// against the SHA-256 the protocol uses.
    func relyingPartyKey(rpIdHash: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(key: lookupKey, message: [0x01] + rpIdHash)
    }

    /// The indexed stand-in for an account at a relying party (the pair a new
    /// credential replaces, CTAP 2.1 §6.1.2 step 18).
    func userKey(rpIdHash: [UInt8], userId: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(key: lookupKey, message: [0x02] + rpIdHash + userId)
    }
}
