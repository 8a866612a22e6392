// The control API's view of a key's credentials: list, delete, import (a CI
// rig's seeded credential, a CXF passkey), and the raw large-blob array a
// seeded large blob goes into. Each reuses the engine's own steps, so the
// key cache, events and durability rules hold as for CTAP commands.

import CBOR
import LatchkeyCrypto

/// A credential to import: what WebDriver's "Credential Parameters" and a
/// CXF passkey item carry.
public struct ImportedCredential: Sendable {
    public var id: [UInt8]
    public var rpId: String
    public var rpName: String?
    public var userId: [UInt8]
    public var userName: String?
    public var userDisplayName: String?
    /// The private key as PKCS#8 DER (P-256, P-384, P-521, secp256k1, Ed25519 or RSA).
    public var privateKeyPKCS8: [UInt8]
    /// The counter the credential has reached: its next assertion signs a
    /// larger value. 0 for a fresh one (CXF imports start there).
    public var signCount: UInt32
    /// Discoverable credentials are stored; a non-discoverable one comes back
    /// as a wrapped credential ID (the given `id` cannot be kept).
    public var discoverable: Bool
    public var credProtect: UInt8
    /// hmac-secret's CredRandom (64 bytes: with UV, then without), if any.
    public var credRandom: [UInt8]?
    public var credBlob: [UInt8]?
    /// A largeBlobKey (32 bytes) to keep with it, if any.
    public var largeBlobKey: [UInt8]?

    public init(
        id: [UInt8],
        rpId: String,
        rpName: String? = nil,
        userId: [UInt8],
        userName: String? = nil,
        userDisplayName: String? = nil,
        privateKeyPKCS8: [UInt8],
        signCount: UInt32 = 0,
        discoverable: Bool = true,
        credProtect: UInt8 = 1,
        credRandom: [UInt8]? = nil,
        credBlob: [UInt8]? = nil,
        largeBlobKey: [UInt8]? = nil
    ) {
        self.id = id
        self.rpId = rpId
        self.rpName = rpName
        self.userId = userId
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.privateKeyPKCS8 = privateKeyPKCS8
        self.signCount = signCount
        self.discoverable = discoverable
        self.credProtect = credProtect
        self.credRandom = credRandom
        self.credBlob = credBlob
        self.largeBlobKey = largeBlobKey
    }
}

extension Authenticator {
    /// The stored credentials, newest first; only those of `rpId` when given.
    public func storedCredentials(rpId: String? = nil) throws(AdministrationError) -> [StoredCredential] {
        try administering { () throws(CTAPStatus) in
            try storing("listing credentials") { () throws(StoreError) in
                if let rpId { return try store.credentials(rpIdHash: SHA256.hash(Array(rpId.utf8))) }
                return try store.allCredentials()
            }
        }
    }

    /// Deletes a stored credential. Returns false when there is none.
    @discardableResult
    public func deleteStoredCredential(id: [UInt8]) throws(AdministrationError) -> Bool {
        try administering { () throws(CTAPStatus) in
            guard let credential = try storing("looking up a credential", { () throws(StoreError) in
                try store.credential(id: id)
            }) else { return false }
            try delete(credential)
            return true
        }
    }

    /// Imports a credential. A discoverable one is stored under its own ID
    /// (an ID or account already on the key is refused, not replaced); a
    /// non-discoverable one is wrapped, and its new ID returned. The
    /// counter continues above `signCount`.
    public func importCredential(_ imported: ImportedCredential) throws(AdministrationError) -> [UInt8] {
        let privateKey: CredentialPrivateKey
        do {
            privateKey = try CredentialPrivateKey(pkcs8: imported.privateKeyPKCS8)
        } catch {
            throw AdministrationError(
                .invalidParameter,
                "the private key is not PKCS#8 of P-256, P-384, P-521, secp256k1, Ed25519 or RSA: \(error)"
            )
        }
        guard configuration.algorithms.contains(privateKey.algorithm) else {
            throw AdministrationError(.invalidParameter, "this key does not offer \(privateKey.algorithm)")
        }
        // A wrapped ID carries a 32-byte seed (CredentialWrapper): an
        // imported P-384, P-521, secp256k1 or RSA key has none.
        guard imported.discoverable || privateKey.seed != nil else {
            throw AdministrationError(
                .invalidParameter, "an imported \(privateKey.algorithm.name) key can only be a discoverable credential"
            )
        }
        guard !imported.id.isEmpty, imported.id.count <= Self.maxCredentialIdLength else {
            throw AdministrationError(.invalidParameter, "a credential ID is 1 to \(Self.maxCredentialIdLength) bytes")
        }
        guard imported.userId.count <= 64 else {
            throw AdministrationError(.invalidParameter, "a user handle is at most 64 bytes")
        }
        guard (1...3).contains(imported.credProtect) else {
            throw AdministrationError(.invalidParameter, "credProtect is 1, 2 or 3")
        }
        if let credRandom = imported.credRandom, credRandom.count != 64 {
            throw AdministrationError(.invalidParameter, "CredRandom is 64 bytes (with UV, then without)")
        }
        if let credBlob = imported.credBlob, credBlob.count > Self.maxCredBlobLength {
            throw AdministrationError(.invalidParameter, "a credBlob is at most \(Self.maxCredBlobLength) bytes")
        }
        if let largeBlobKey = imported.largeBlobKey, largeBlobKey.count != 32 {
            throw AdministrationError(.invalidParameter, "a largeBlobKey is 32 bytes")
        }
        let rpIdHash = SHA256.hash(Array(imported.rpId.utf8))
        return try administering { () throws(CTAPStatus) in
            guard imported.discoverable else {
                let wrapped = WrappedCredential(
                    privateKey: privateKey, credProtect: imported.credProtect,
                    hmacSecret: imported.credRandom != nil, credBlob: imported.credBlob
                )
                let id = try signing("wrapping an imported credential") { () throws(CryptoError) in
                    try wrapper.wrap(wrapped, rpIdHash: rpIdHash, entropy: entropy)
                }
                // Wrapped credentials share one counter: it only has to pass
                // the imported value.
                try storing("raising the signature counter") { () throws(StoreError) in
                    try store.raiseSignatureCounter(scope: [], above: imported.signCount)
                }
                events?(
                    AuthenticatorEvent(
                        kind: .credentialCreated, credentialId: id, rpId: imported.rpId, userId: imported.userId,
                        userName: imported.userName, userDisplayName: imported.userDisplayName, discoverable: false,
                        origin: "import"
                    )
                )
                return id
            }
            if try storing("looking up the user's credential", { () throws(StoreError) in
                try store.containsCredential(rpIdHash: rpIdHash, userId: imported.userId)
            }) {
                throw .credentialExcluded
            }
            if try storing("looking up a credential", { () throws(StoreError) in try store.credential(id: imported.id) })
                != nil
            {
                throw .credentialExcluded
            }
            let count = try storing("counting credentials") { () throws(StoreError) in try store.credentialCount() }
            guard count < configuration.maxDiscoverableCredentials else { throw .keyStoreFull }
            let credential = StoredCredential(
                id: imported.id, rpId: imported.rpId, rpIdHash: rpIdHash, rpName: imported.rpName,
                userId: imported.userId, userName: imported.userName, userDisplayName: imported.userDisplayName,
                algorithm: privateKey.algorithm.rawValue, privateKey: privateKey.storedRepresentation,
                credProtect: imported.credProtect, credRandom: imported.credRandom, credBlob: imported.credBlob,
                largeBlobKey: imported.largeBlobKey
            )
            let stored = try storing("saving an imported credential") { () throws(StoreError) in
                let stored = try store.save(credential)
                try store.raiseSignatureCounter(scope: imported.id, above: imported.signCount)
                return stored
            }
            try credentialStoreChanged()
            var event = AuthenticatorEvent(.credentialCreated, stored)
            event.origin = "import"
            events?(event)
            return imported.id
        }
    }

    /// The private key of a stored credential as PKCS#8 DER, for export.
    public func exportPrivateKey(credentialId: [UInt8]) throws(AdministrationError) -> [UInt8] {
        try administering { () throws(CTAPStatus) in
            guard let stored = try storing("looking up a credential", { () throws(StoreError) in
                try store.credential(id: credentialId)
            }) else { throw .noCredentials }
            guard let algorithm = COSEAlgorithm(rawValue: stored.algorithm),
                let key = try? CredentialPrivateKey(algorithm: algorithm, storedRepresentation: stored.privateKey)
            else { throw .other }
            return key.pkcs8Representation
        }
    }

    // MARK: - The large-blob array

    /// The serialized large-blob array as stored (CBOR array, then the
    /// 16-byte truncated SHA-256).
    public func largeBlobArray() throws(AdministrationError) -> [UInt8] {
        try administering { () throws(CTAPStatus) in try storedLargeBlobArray() }
    }

    /// Replaces the serialized large-blob array, checked as a largeBlobs
    /// write is (size limit, trailing hash); a write in progress is dropped.
    public func replaceLargeBlobArray(_ serialized: [UInt8]) throws(AdministrationError) {
        conversations.removeLargeBlobWrites()
        try administering { () throws(CTAPStatus) in try commitLargeBlobArray(serialized) }
    }
}
