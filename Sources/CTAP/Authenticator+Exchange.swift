// Passkey export for the Credential Exchange Format: the one way a private
// key leaves the engine. Only discoverable credentials can go — a
// non-discoverable credential's key is its credential ID, wrapped under this
// key's wrapping secret, and useless elsewhere. The caller (the daemon's
// control API) is trusted by the control socket's permissions and must never
// write what this returns to disk unencrypted.

public import LatchkeyCrypto

/// A discoverable credential with its private key in PKCS#8, as CXF carries it.
public struct ExportedCredential: Sendable {
    /// The credential as stored; its `privateKey` is the raw 32 bytes.
    public var credential: StoredCredential
    /// The private key as PKCS#8 PrivateKeyInfo DER (RFC 5208; RFC 5915 for
    /// P-256, RFC 8410 for Ed25519).
    public var pkcs8: [UInt8]
}

extension Authenticator {
    /// Every discoverable credential with its private key in PKCS#8, oldest
    /// first (the order they were made in, so that an import keeps it).
    public func exportCredentials() throws(AdministrationError) -> [ExportedCredential] {
        try administering { () throws(CTAPStatus) in
            let all = try storing("listing credentials") { () throws(StoreError) in try store.allCredentials() }
            return try all.reversed().map { (credential) throws(CTAPStatus) in
                guard let algorithm = COSEAlgorithm(rawValue: credential.algorithm),
                    let key = try? CredentialPrivateKey(algorithm: algorithm, rawRepresentation: credential.privateKey)
                else {
                    diagnostics?("stored credential has an unusable key")
                    throw .other
                }
                return ExportedCredential(credential: credential, pkcs8: key.pkcs8DERRepresentation)
            }
        }
    }
}

extension CredentialPrivateKey {
    /// The key as PKCS#8 PrivateKeyInfo DER.
    public var pkcs8DERRepresentation: [UInt8] {
        if let p256 { return p256.pkcs8DERRepresentation }
        return ed25519!.pkcs8DERRepresentation
    }

    /// A key of `algorithm` from PKCS#8 PrivateKeyInfo DER; throws
    /// `.invalidKey` unless the DER is exactly one key of that algorithm
    /// (for ES256, on P-256 with a matching public key if it carries one).
    public init(algorithm: COSEAlgorithm, pkcs8DERRepresentation der: [UInt8]) throws(CryptoError) {
        switch algorithm {
        case .es256: self = .p256(try P256PrivateKey(pkcs8DERRepresentation: der))
        case .edDSA: self = .ed25519(try Ed25519PrivateKey(pkcs8DERRepresentation: der))
        }
    }

    /// The algorithm of a PKCS#8 key: ES256 for a P-256 key, EdDSA for an
    /// Ed25519 one, nil for anything else (RSA, another curve, garbage).
    public static func algorithm(ofPKCS8 der: [UInt8]) -> COSEAlgorithm? {
        if (try? P256PrivateKey(pkcs8DERRepresentation: der)) != nil { return .es256 }
        if (try? Ed25519PrivateKey(pkcs8DERRepresentation: der)) != nil { return .edDSA }
        return nil
    }
}

/// A passkey to import (a CXF "passkey" credential, checked for shape).
public struct PasskeyImport: Sendable {
    public var rpId: String
    public var credentialId: [UInt8]
    public var userHandle: [UInt8]
    public var userName: String?
    public var userDisplayName: String?
    /// PKCS#8 PrivateKeyInfo DER of a P-256 or Ed25519 key.
    public var pkcs8: [UInt8]
    /// hmac-secret's CredRandom: with UV (32 bytes) then without (32 bytes).
    public var credRandom: [UInt8]?
    public var credBlob: [UInt8]?

    public init(
        rpId: String, credentialId: [UInt8], userHandle: [UInt8], userName: String?, userDisplayName: String?,
        pkcs8: [UInt8], credRandom: [UInt8]? = nil, credBlob: [UInt8]? = nil
    ) {
        self.rpId = rpId
        self.credentialId = credentialId
        self.userHandle = userHandle
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.pkcs8 = pkcs8
        self.credRandom = credRandom
        self.credBlob = credBlob
    }
}

/// What became of one passkey of an import.
public enum PasskeyImportOutcome: Sendable, Equatable {
    /// Stored, as this credential.
    case imported(StoredCredential)
    /// Left out, and why (for the person importing).
    case skipped(String)
}

extension Authenticator {
    /// Imports passkeys in order, each on its own: one that duplicates a
    /// credential of the key (the same credential ID, or the same RP and
    /// user handle, which a new credential would replace) or of an earlier
    /// passkey of the same import, one whose key does not decode, and any
    /// once the key is full, are skipped with their reason; the others are
    /// stored, durably, before this returns. The whole batch runs on the
    /// actor, so no CTAP command interleaves with it.
    ///
    /// Imported credentials are discoverable, credProtect level 1 (CXF does
    /// not carry the level), and their signature counter starts afresh: the
    /// first assertion carries 1 (CXF asks importers for zero; latchkey's
    /// counters are per credential and never repeat a value, so the closest
    /// it comes is that the count starts again).
    public func importPasskeys(_ passkeys: [PasskeyImport]) throws(AdministrationError) -> [PasskeyImportOutcome] {
        try administering { () throws(CTAPStatus) in
            var outcomes: [PasskeyImportOutcome] = []
            for passkey in passkeys {
                outcomes.append(try importPasskey(passkey))
            }
            return outcomes
        }
    }

    private func importPasskey(_ passkey: PasskeyImport) throws(CTAPStatus) -> PasskeyImportOutcome {
        guard let algorithm = CredentialPrivateKey.algorithm(ofPKCS8: passkey.pkcs8),
            let key = try? CredentialPrivateKey(algorithm: algorithm, pkcs8DERRepresentation: passkey.pkcs8)
        else { return .skipped("the key is not a PKCS#8 P-256 or Ed25519 private key") }
        let rpIdHash = SHA256.hash(Array(passkey.rpId.utf8))
        let (existing, sameUser, count) = try storing("checking for duplicates") { () throws(StoreError) in
            (
                try store.credential(id: passkey.credentialId),
                try store.credentials(rpIdHash: rpIdHash).first { $0.userId == passkey.userHandle },
                try store.credentialCount()
            )
        }
        if existing != nil { return .skipped("the key has a credential with this ID already") }
        if sameUser != nil { return .skipped("the key has a passkey for this user at this RP already") }
        if count >= configuration.maxDiscoverableCredentials { return .skipped("the key is full") }
        let credential = StoredCredential(
            id: passkey.credentialId, rpId: passkey.rpId, rpIdHash: rpIdHash, userId: passkey.userHandle,
            userName: passkey.userName.flatMap { $0.isEmpty ? nil : $0 },
            userDisplayName: passkey.userDisplayName.flatMap { $0.isEmpty ? nil : $0 },
            algorithm: algorithm.rawValue, privateKey: key.rawRepresentation, credProtect: 1,
            credRandom: passkey.credRandom, credBlob: passkey.credBlob
        )
        let stored = try storing("importing a credential") { () throws(StoreError) in try store.save(credential) }
        return .imported(stored)
    }
}
