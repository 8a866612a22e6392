// The key manager's side of the CI control plane: overrides, single
// credentials, clearing and seeding credentials.

import CTAP
import Foundation

extension KeyManager {
    /// Queues an override for the key's next operations.
    func addOverride(_ name: String, _ request: OverrideRequest) throws(ControlError) -> OverrideDocument {
        let key = try key(name)
        let count = request.count ?? 1
        guard (1...1000).contains(count) else { throw .badRequest("count must be between 1 and 1000") }
        if let operations = request.operations, operations.isEmpty {
            throw .badRequest("operations, when given, lists at least one operation")
        }
        let entry = key.overrides.add(request.action, count: count, operations: request.operations)
        key.logger.notice(
            "override queued",
            metadata: ["override": "\(entry.action.rawValue)", "count": "\(count)", "operations": "\(entry.operations.map(\.rawValue))"]
        )
        return entry
    }

    /// One stored credential.
    func credential(_ name: String, id: String, includePrivateKey: Bool) throws(ControlError) -> CredentialDocument {
        let key = try key(name)
        guard let bytes = Base64URL.decode(id) else { throw .badRequest("credential id is not base64url") }
        let found: StoredCredential?
        do {
            found = try key.store.credential(id: bytes)
        } catch {
            throw .internalError("cannot read the credential: \(error)")
        }
        guard let found else { throw .notFound("key \(name) has no credential \(id)") }
        return CredentialDocument(found)
    }

    /// Deletes every stored credential of the key.
    func clearCredentials(_ name: String) throws(ControlError) {
        let key = try key(name)
        let all: [StoredCredential]
        do {
            all = try key.credentials()
            for credential in all { try key.store.deleteCredential(id: credential.id) }
        } catch {
            throw .internalError("cannot clear the credentials of \(name): \(error)")
        }
        for credential in all {
            events.publish(
                .credentialDeleted, key: name,
                ["credentialId": .string(Base64URL.encode(credential.id)), "rpId": .string(credential.rpId)]
            )
        }
        key.logger.info("credentials cleared", metadata: ["count": "\(all.count)"])
    }
}
