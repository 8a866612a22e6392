// The key manager's side of the CI control plane: overrides, single
// credentials, clearing and seeding credentials.

import CTAP
import Foundation
import LatchkeyCrypto
import LatchkeyContract
import LatchkeyJSON

extension KeyManager {
    /// Queues an override for the key's next operations.
    package func addOverride(_ grant: KeyGrant, _ request: OverrideRequest) throws(CoreError)
        -> OverrideDocument
    {
        let key = try require(grant, .use).key
        let count = request.count ?? 1
        guard (1...1000).contains(count) else { throw .invalid("count must be between 1 and 1000") }
        if let operations = request.operations, operations.isEmpty {
            throw .invalid("operations, when given, lists at least one operation")
        }
        if request.action == .uvFalse, !key.presence.builtInUserVerification {
            throw .invalid("uv-false needs a key with built-in user verification (hasUserVerification, or a policy user-verification other than deny)")
        }
        let entry = key.overrides.add(request.action, count: count, operations: request.operations)
        key.logger.notice(
            "override queued",
            metadata: [
                "override": "\(entry.action.rawValue)", "count": "\(count)",
                "operations": "\(entry.operations.map(\.rawValue))",
            ]
        )
        return entry
    }

    /// The key's queued overrides.
    package func overrides(_ grant: KeyGrant) throws(CoreError) -> [OverrideDocument] {
        try require(grant, .use).key.overrides.entries
    }

    /// Drops the key's queued overrides.
    package func clearOverrides(_ grant: KeyGrant) throws(CoreError) {
        try require(grant, .use).key.overrides.clear()
    }

    /// One stored credential; with its PKCS#8 private key when asked, which
    /// takes the export tier: the owner's request for an exportable key (a
    /// GET carries no PIN; a key that is not exportable exports with its PIN
    /// through `exportCXF`).
    package func credential(_ grant: KeyGrant, id: String, includePrivateKey: Bool)
        async throws(CoreError) -> CredentialDocument
    {
        let managed = try require(grant, includePrivateKey ? .export : .use)
        let key = managed.key
        if includePrivateKey {
            _ = try grantExport(managed, by: grant.caller, evidence: try await exportEvidence(managed, pin: nil))
        }
        guard let bytes = Base64URL.decode(id, standardAlphabet: true) else { throw .invalid("credential id is not base64url") }
        let found = try await administering(grant.name) { () throws(AdministrationError) in
            try await key.authenticator.storedCredentials().first { $0.id == bytes }
        }
        guard let found else { throw .notFound("key \(grant.name) has no credential \(id)") }
        var document = await Self.document(found, of: key)
        if includePrivateKey {
            let pkcs8 = try await administering(grant.name) { () throws(AdministrationError) in
                try await key.authenticator.exportPrivateKey(credentialId: bytes)
            }
            document.privateKey = Base64URL.encode(pkcs8)
            noteExport(of: managed, by: grant.caller, grant: .exportable, format: "pkcs8", count: 1, credentialId: id)
        }
        return document
    }

    /// A stored credential's document, with the counter and large blob the
    /// daemon knows of.
    static func document(_ credential: StoredCredential, of key: VirtualKey) async -> CredentialDocument {
        var document = CredentialDocument(
            credential,
            signCount: key.lastSignCount(of: credential.id).map { Int($0) }
        )
        if let largeBlobKey = credential.largeBlobKey,
            let serialized = try? await key.authenticator.largeBlobArray(),
            let entries = try? LargeBlobEntry.entries(ofSerialized: serialized),
            let blob = LargeBlobEntry.open(entries, largeBlobKey: largeBlobKey)
        {
            document.largeBlob = Base64URL.encode(blob)
        }
        return document
    }

    /// Deletes every stored credential of the key (each through the engine,
    /// which publishes credential.deleted).
    package func clearCredentials(_ grant: KeyGrant) async throws(CoreError) {
        let key = try require(grant, .use).key
        let deleted = try await administering(grant.name) { () throws(AdministrationError) in
            var deleted = 0
            for credential in try await key.authenticator.storedCredentials() {
                if try await key.authenticator.deleteStoredCredential(id: credential.id) { deleted += 1 }
            }
            return deleted
        }
        key.logger.info("credentials cleared", metadata: ["count": "\(deleted)"])
    }

    /// Seeds a credential (WebDriver's Add Credential): a discoverable one
    /// keeps its ID; a non-discoverable one gets a wrapped ID, which the
    /// answer carries. A large blob goes into the key's large-blob array
    /// under a fresh largeBlobKey.
    package func seedCredential(_ grant: KeyGrant, _ request: SeedCredentialRequest)
        async throws(CoreError) -> CredentialDocument
    {
        let key = try require(grant, .use).key
        func bytes(_ text: String?, _ field: String) throws(CoreError) -> [UInt8]? {
            guard let text else { return nil }
            guard let value = Base64URL.decode(text, standardAlphabet: true) else { throw .invalid("\(field) is not base64url") }
            return value
        }
        let resident = request.isResidentCredential ?? true
        guard let id = try bytes(request.credentialId, "credentialId"), !id.isEmpty else {
            throw .invalid("credentialId is required")
        }
        guard let privateKey = try bytes(request.privateKey, "privateKey") else {
            throw .invalid("privateKey (base64url PKCS#8) is required")
        }
        let userHandle = try bytes(request.userHandle, "userHandle")
        let largeBlob = try bytes(request.largeBlob, "largeBlob")
        guard !request.rpId.isEmpty else { throw .invalid("rpId is required") }
        guard let signCount = UInt32(exactly: request.signCount ?? 0) else {
            throw .invalid("signCount is 0 to 4294967295")
        }
        if resident {
            guard key.configuration.features[.residentKeys] else {
                throw .invalid("key \(grant.name) has no resident keys (hasResidentKey false)")
            }
            guard let userHandle, !userHandle.isEmpty else {
                throw .invalid("a resident credential needs a userHandle")
            }
        }
        if largeBlob != nil {
            guard resident else { throw .invalid("only a resident credential can have a largeBlob") }
            guard key.configuration.features[.largeBlob] else {
                throw .invalid("key \(grant.name) has no large blobs (hasLargeBlob false)")
            }
        }
        let largeBlobKey = largeBlob == nil ? nil : SecureRandom.bytes(count: 32)
        let imported = ImportedCredential(
            id: id,
            rpId: request.rpId,
            rpName: request.rpName,
            userId: userHandle ?? [],
            userName: request.userName,
            userDisplayName: request.userDisplayName,
            privateKeyPKCS8: privateKey,
            signCount: signCount,
            discoverable: resident,
            largeBlobKey: largeBlobKey
        )
        let authenticator = key.authenticator
        let newId = try await administering(grant.name) { () throws(AdministrationError) in
            try await authenticator.importCredential(imported)
        }
        if signCount > 0 { key.noteSignCount(signCount, of: newId) }
        if let largeBlob, let largeBlobKey {
            do {
                try await Self.appendLargeBlob(largeBlob, largeBlobKey: largeBlobKey, to: authenticator)
            } catch {
                _ = try? await authenticator.deleteStoredCredential(id: newId)
                throw error
            }
        }
        key.logger.notice("credential seeded", metadata: ["rp": "\(request.rpId)", "resident": "\(resident)"])
        guard resident else {
            return CredentialDocument(
                nonResident: newId,
                rpId: request.rpId,
                userHandle: userHandle ?? [],
                algorithm: (try? CredentialPrivateKey(pkcs8: privateKey))?.algorithm.rawValue ?? 0,
                signCount: signCount > 0 ? Int(signCount) : nil
            )
        }
        let stored = try await administering(grant.name) { () throws(AdministrationError) in
            try await authenticator.storedCredentials().first { $0.id == newId }
        }
        guard let stored else { throw .internalError("the seeded credential is not in the store") }
        return await Self.document(stored, of: key)
    }

    private static func appendLargeBlob(_ blob: [UInt8], largeBlobKey: [UInt8], to authenticator: Authenticator)
        async throws(CoreError)
    {
        do {
            let serialized = try await authenticator.largeBlobArray()
            var entries = try LargeBlobEntry.entries(ofSerialized: serialized)
            entries.append(
                try LargeBlobEntry.seal(blob, largeBlobKey: largeBlobKey, nonce: SecureRandom.bytes(count: 12))
            )
            try await authenticator.replaceLargeBlobArray(LargeBlobEntry.serialize(entries))
        } catch let error as AdministrationError {
            throw CoreError(error, key: "large blob")
        } catch {
            throw .invalid("cannot store the large blob: \(error)")
        }
    }
}

/// POST /v1/keys/{name}/credentials: WebDriver's Credential Parameters, and
/// optionally the names a browser shows.
public struct SeedCredentialRequest: Codable, Sendable {
    public var credentialId: String?
    public var isResidentCredential: Bool?
    public var rpId: String
    /// base64url PKCS#8 (P-256, P-384, P-521, secp256k1, Ed25519, RSA or ML-DSA-65/87).
    public var privateKey: String?
    public var userHandle: String?
    public var signCount: Int?
    public var largeBlob: String?
    public var rpName: String?
    public var userName: String?
    public var userDisplayName: String?
}
