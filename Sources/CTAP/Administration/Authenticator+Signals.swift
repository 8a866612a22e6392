// The WebAuthn Signal API (WebAuthn Level 3 §5.1.10–§5.1.12) applied to a
// key's store: a relying party tells which of a user's credentials it still
// accepts, what the user is now called, or that it knows nothing of a
// credential. A browser hides or updates the passkeys of its own provider;
// here the control API hands the signal to the key, and the key deletes or
// renames its discoverable credentials.
//
// Each signal goes through the internals credential management uses
// (`delete(_:)`, `updateUser(credentialId:name:displayName:)`), so a
// deleted credential's cached key goes too, credential.deleted and
// credential.updated events follow, and the user-name rules are the same. A signal that matches nothing is not an error: the answer says that
// nothing changed, as WebAuthn's signals never tell the RP what happened.

import LatchkeyCrypto

extension Authenticator {
    /// What a signal changed in the store.
    public struct SignalOutcome: Sendable, Equatable {
        /// The credentials deleted, as they were.
        public var deleted: [StoredCredential] = []
        /// The credentials renamed, as they are now.
        public var updated: [StoredCredential] = []
    }

    /// signalAllAcceptedCredentials (WebAuthn §5.1.10.2): every discoverable
    /// credential of `rpId` whose user handle is `userHandle` and whose ID is
    /// not in `acceptedCredentialIds` is deleted. Credentials of other users
    /// and of other RPs stay.
    public func signalAcceptedCredentials(
        rpId: String,
        userHandle: [UInt8],
        acceptedCredentialIds: [[UInt8]]
    ) throws(AdministrationError) -> SignalOutcome {
        let accepted = Set(acceptedCredentialIds)
        return try administering { () throws(CTAPStatus) in
            var outcome = SignalOutcome()
            for credential in try userCredentials(rpId: rpId, userHandle: userHandle)
            where !accepted.contains(credential.id) {
                try delete(credential)
                outcome.deleted.append(credential)
            }
            return outcome
        }
    }

    /// signalCurrentUserDetails (WebAuthn §5.1.10.3): every discoverable
    /// credential of `rpId` for `userHandle` gets the user name and display
    /// name, under updateUser's rules (at most 64 bytes each; an empty one
    /// is removed).
    public func signalCurrentUserDetails(
        rpId: String,
        userHandle: [UInt8],
        name: String,
        displayName: String
    ) throws(AdministrationError) -> SignalOutcome {
        let matching = try administering { () throws(CTAPStatus) in
            try userCredentials(rpId: rpId, userHandle: userHandle)
        }
        var outcome = SignalOutcome()
        for credential in matching {
            let updated = try updateUser(credentialId: credential.id, name: name, displayName: displayName)
            if updated != credential { outcome.updated.append(updated) }
        }
        return outcome
    }

    /// signalUnknownCredential (WebAuthn §5.1.10.1): the discoverable
    /// credential `credentialId` of `rpId` is deleted. A credential of
    /// another RP with that ID stays: an RP speaks only for its own.
    public func signalUnknownCredential(rpId: String, credentialId: [UInt8]) throws(AdministrationError)
        -> SignalOutcome
    {
        try administering { () throws(CTAPStatus) in
            let found = try storing("looking up a credential") { () throws(StoreError) in
                try store.credential(id: credentialId)
            }
            guard let credential = found, credential.rpId == rpId else { return SignalOutcome() }
            try delete(credential)
            return SignalOutcome(deleted: [credential])
        }
    }

    /// The discoverable credentials of `rpId` for `userHandle`, newest first.
    private func userCredentials(rpId: String, userHandle: [UInt8]) throws(CTAPStatus) -> [StoredCredential] {
        let rpIdHash = SHA256.hash(Array(rpId.utf8))
        return try storing("listing credentials") { () throws(StoreError) in
            try store.credentials(rpIdHash: rpIdHash)
        }.filter { $0.rpId == rpId && $0.userId == userHandle }
    }
}
