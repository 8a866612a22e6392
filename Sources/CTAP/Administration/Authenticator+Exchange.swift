// Passkey export and import for the Credential Exchange Format, in batches
// over the engine's own exportPrivateKey and importCredential
// (Authenticator+Credentials.swift). Only discoverable credentials can go —
// a non-discoverable credential's key is its credential ID, wrapped under
// this key's wrapping secret, and useless elsewhere. The caller (the
// daemon's control API) is trusted by the control socket's permissions and
// must never write what the export returns to disk unencrypted.

import LatchkeyCrypto

/// A discoverable credential with its private key in PKCS#8, as CXF carries it.
public struct ExportedCredential: Sendable {
    /// The credential as stored.
    public var credential: StoredCredential
    /// The private key as PKCS#8 PrivateKeyInfo DER (RFC 5208; RFC 5915 for
    /// P-256, RFC 8410 for Ed25519).
    public var pkcs8: [UInt8]
}

/// A passkey to import (a CXF "passkey" credential, checked for shape).
public struct PasskeyImport: Sendable {
    public var rpId: String
    public var credentialId: [UInt8]
    public var userHandle: [UInt8]
    public var userName: String?
    public var userDisplayName: String?
    /// PKCS#8 PrivateKeyInfo DER of a P-256, P-384, P-521, secp256k1, Ed25519 or RSA key.
    public var pkcs8: [UInt8]
    /// hmac-secret's CredRandom: with UV (32 bytes) then without (32 bytes).
    public var credRandom: [UInt8]?
    public var credBlob: [UInt8]?

    public init(
        rpId: String,
        credentialId: [UInt8],
        userHandle: [UInt8],
        userName: String?,
        userDisplayName: String?,
        pkcs8: [UInt8],
        credRandom: [UInt8]? = nil,
        credBlob: [UInt8]? = nil
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
    /// Every discoverable credential with its private key in PKCS#8, oldest
    /// first (the order they were made in, so that an import keeps it).
    public func exportCredentials() throws(AdministrationError) -> [ExportedCredential] {
        var exported: [ExportedCredential] = []
        for credential in try storedCredentials().reversed() {
            exported.append(
                ExportedCredential(credential: credential, pkcs8: try exportPrivateKey(credentialId: credential.id))
            )
        }
        return exported
    }

    /// Imports passkeys in order, each through importCredential and each on
    /// its own: one that duplicates a credential of the key (the same
    /// credential ID, or the same RP and user handle, which a new
    /// credential would replace) or an earlier passkey of the same import,
    /// one the engine refuses (a key of an algorithm this key does not
    /// offer, values out of range), and any once the key is full, are
    /// skipped with their reason; the others are stored, durably, with a
    /// credential.created event each. The batch runs on the actor, so no
    /// CTAP command interleaves with it; a store failure ends it (what was
    /// imported before stays).
    ///
    /// Imported credentials are discoverable, credProtect level 1 (CXF does
    /// not carry the level), and their counter starts from zero as CXF asks:
    /// the first assertion carries 1, since latchkey's counters increase
    /// with every signature.
    public func importPasskeys(_ passkeys: [PasskeyImport]) throws(AdministrationError) -> [PasskeyImportOutcome] {
        var outcomes: [PasskeyImportOutcome] = []
        for passkey in passkeys {
            let imported = ImportedCredential(
                id: passkey.credentialId,
                rpId: passkey.rpId,
                userId: passkey.userHandle,
                userName: passkey.userName.flatMap { $0.isEmpty ? nil : $0 },
                userDisplayName: passkey.userDisplayName.flatMap { $0.isEmpty ? nil : $0 },
                privateKeyPKCS8: passkey.pkcs8,
                signCount: 0,
                discoverable: true,
                credProtect: 1,
                credRandom: passkey.credRandom,
                credBlob: passkey.credBlob
            )
            do throws(AdministrationError) {
                let id = try importCredential(imported)
                let stored = try administering { () throws(CTAPStatus) in
                    try storing("reading an imported credential") { () throws(StoreError) in
                        try store.credential(id: id)
                    }
                }
                guard let stored else { throw AdministrationError(.storage, "an imported credential vanished") }
                outcomes.append(.imported(stored))
            } catch {
                switch error.code {
                case .duplicate:
                    // importCredential refuses both kinds alike; the person
                    // importing is told which.
                    let sameId = try administering { () throws(CTAPStatus) in
                        try storing("looking up a credential") { () throws(StoreError) in
                            try store.credential(id: passkey.credentialId)
                        }
                    }
                    outcomes.append(
                        .skipped(
                            sameId != nil
                                ? "the key has a credential with this ID already"
                                : "the key has a passkey for this user at this RP already"
                        )
                    )
                case .full: outcomes.append(.skipped("the key is full"))
                case .invalidParameter: outcomes.append(.skipped("refused: \(error.reason)"))
                default: throw error
                }
            }
        }
        return outcomes
    }
}
