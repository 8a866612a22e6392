// authenticatorGetAssertion (0x02) and authenticatorGetNextAssertion (0x08),
// CTAP 2.1 §6.2.2 and §6.3: the first assertion, and the rest of a sequence
// of discoverable credentials, which the conversation that began it keeps
// (Conversations.swift). Checks run in the spec's order: which error wins is
// behaviour.

import CBOR
import LatchkeyCrypto

extension Authenticator {
    // MARK: - authenticatorGetAssertion (CTAP 2.1 §6.2.2)

    func getAssertion(
        _ request: GetAssertionRequest,
        from origin: RequestOrigin
    ) async throws(CTAPStatus) -> GetAssertionResponse {
        guard request.clientDataHash.count == 32 else { throw .invalidLength }

        // Steps 1–2: touch probe and pinUvAuthProtocol.
        let pinUvAuthProtocol = try await checkPinUvAuthProbe(
            param: request.pinUvAuthParam, pinUvAuthProtocol: request.pinUvAuthProtocol, rpId: request.rpId
        )

        // Step 5: options. "rk" means nothing for getAssertion; a
        // pinUvAuthParam makes "uv" count as false; without one "uv" asks for
        // built-in user verification, which only a key configured with it has.
        if request.options.rk != nil { throw .unsupportedOption }
        var builtInUv = request.pinUvAuthParam == nil && request.options.uv == true
        if builtInUv, !configuration.builtInUserVerification { throw .invalidOption }
        var userPresence = request.options.up ?? true
        let requested = request.extensions
        if requested.largeBlobKey == false { throw .invalidOption }
        // hmac-secret is bound to a touch: a silent assertion cannot carry it
        // (as OpenSK answers).
        if requested.hmacSecret != nil, !userPresence { throw .unsupportedOption }
        if let previewSign = requested.previewSign {
            try checkPreviewSignRequest(previewSign, allowList: request.allowList)
        }

        // Before step 6: with alwaysUv every assertion verifies the user:
        // built-in when the key has it, else with a pinUvAuthToken.
        if request.pinUvAuthParam == nil, !builtInUv, try alwaysUv() {
            guard configuration.builtInUserVerification else { throw .pinUvAuthTokenRequired }
            builtInUv = true
        }

        // Step 6.1: the pinUvAuthParam proves user verification for this RP.
        // Without one the assertion simply lacks the UV flag.
        var flags: AuthenticatorDataFlags = []
        if let pinUvAuthParam = request.pinUvAuthParam, let pinUvAuthProtocol {
            try verifyPinUvAuthParam(
                pinUvAuthParam, version: pinUvAuthProtocol, clientDataHash: request.clientDataHash,
                permission: .getAssertion, rpId: request.rpId
            )
            flags.insert(.userVerified)
        }

        // The extensions every assertion of the sequence answers; the
        // hmac-secret inputs are checked before the user is asked for a touch.
        var extensions = AssertionExtensionRequest(
            hmacSecret: try requested.hmacSecret.map { input throws(CTAPStatus) in try checkHmacSecret(input) },
            credBlob: requested.credBlob,
            largeBlobKey: requested.largeBlobKey == true,
            thirdPartyPayment: requested.thirdPartyPayment
        )

        // Step 6.2: built-in user verification, before credentials are looked
        // up (what a credential needs depends on it); the touch is also the
        // presence of step 9.
        if builtInUv {
            try await collectVerifiedPresence(PresenceRequest(operation: .getAssertion, rpId: request.rpId))
            flags.insert(.userVerified)
            // UP only when the platform asked for presence: `up: false` keeps
            // the flag clear even though the verifying touch was there.
            if userPresence { flags.insert(.userPresent) }
            pinUvAuth.token.clearAfterUserPresence()
            userPresence = false
        }
        let userVerified = flags.contains(.userVerified)

        // Step 7: locate credentials; with an allowList the first match,
        // without one every discoverable credential for the RP, newest first.
        // credProtect hides what needs user verification (§12.1).
        let rpIdHash = SHA256.hash(Array(request.rpId.utf8))
        var found: FoundCredential?
        var others: [StoredCredential] = []
        if request.allowList.isEmpty {
            var stored = try storing("listing credentials") { () throws(StoreError) in
                try store.credentials(rpIdHash: rpIdHash)
            }
            stored.removeAll {
                !(CredentialProtection(rawValue: $0.credProtect) ?? .required)
                    .permits(userVerified: userVerified, listed: false)
            }
            if !stored.isEmpty {
                let newest = stored.removeFirst()
                found = try findCredential(id: newest.id, rpIdHash: rpIdHash)
                others = stored
            }
        } else {
            for descriptor in request.allowList where descriptor.type == "public-key" {
                if let credential = try findCredential(id: descriptor.id, rpIdHash: rpIdHash),
                    credential.credProtect.permits(userVerified: userVerified, listed: true)
                {
                    found = credential
                    break
                }
            }
        }
        guard let credential = found else { throw .noCredentials }
        // previewSign (only with an allowList, so for this one credential):
        // the signing key's own UP and UV rules, before the touch.
        if let previewSign = requested.previewSign {
            extensions.previewSign = try preparePreviewSign(
                previewSign, for: credential, userPresence: request.options.up ?? true, userVerified: userVerified
            )
        }

        // Step 9: user presence, unless the client asked for a silent check;
        // a touch spends the token's user verified flag and mc/ga permissions.
        if userPresence {
            try await collectPresence(
                PresenceRequest(operation: .getAssertion, rpId: request.rpId, userName: credential.stored?.userName)
            )
            flags.insert(.userPresent)
            pinUvAuth.token.clearAfterUserPresence()
        }

        // An allowList names the account, so it is the single-account case
        // however many credentials it lists; without one, every discoverable
        // credential found is an account the platform chooses among.
        var response = try assertion(
            for: credential, rpIdHash: rpIdHash, flags: flags, extensions: extensions,
            clientDataHash: request.clientDataHash, multipleAccounts: !others.isEmpty, rpId: request.rpId
        )
        if !others.isEmpty {
            response.numberOfCredentials = others.count + 1
            conversations[origin].assertions = PendingAssertions(
                remaining: others, clientDataHash: request.clientDataHash, rpIdHash: rpIdHash, flags: flags,
                extensions: extensions, lastAt: clock.milliseconds
            )
        }
        return response
    }

    // MARK: - authenticatorGetNextAssertion (CTAP 2.1 §6.3)

    /// The next assertion of the sequence `origin` began; any other origin's
    /// sequence is not this one's to continue (CTAP2_ERR_NOT_ALLOWED, as
    /// with no sequence at all).
    func getNextAssertion(from origin: RequestOrigin) throws(CTAPStatus) -> GetAssertionResponse {
        guard var pending = conversations[origin].assertions, !pending.remaining.isEmpty else { throw .notAllowed }
        let now = clock.milliseconds
        guard now - pending.lastAt <= configuration.getNextAssertionWindowMilliseconds else {
            conversations[origin].assertions = nil
            throw .notAllowed
        }
        let next = pending.remaining.removeFirst()
        pending.lastAt = now
        conversations[origin].assertions = pending.remaining.isEmpty ? nil : pending
        // The credential may have been deleted meanwhile (control API): then
        // the sequence is over.
        guard let credential = try findCredential(id: next.id, rpIdHash: pending.rpIdHash) else {
            conversations[origin].assertions = nil
            throw .notAllowed
        }
        return try assertion(
            for: credential, rpIdHash: pending.rpIdHash, flags: pending.flags, extensions: pending.extensions,
            clientDataHash: pending.clientDataHash, multipleAccounts: true
        )
    }

    /// Signs one assertion with a fresh counter value. `multipleAccounts`:
    /// the assertion is one of a sequence of several discoverable credentials
    /// (numberOfCredentials > 1).
    private func assertion(
        for credential: FoundCredential,
        rpIdHash: [UInt8],
        flags: AuthenticatorDataFlags,
        extensions: AssertionExtensionRequest,
        clientDataHash: [UInt8],
        multipleAccounts: Bool,
        rpId: String? = nil
    ) throws(CTAPStatus) -> GetAssertionResponse {
        let outputs = try assertionExtensionOutputs(
            extensions, for: credential, userVerified: flags.contains(.userVerified)
        )
        let scope = credential.stored == nil ? [] : credential.id
        let signCount = try storing("taking a signature counter") { () throws(StoreError) in
            try store.nextSignatureCounter(scope: scope)
        }
        let authData = AuthenticatorData(
            rpIdHash: rpIdHash, flags: flags, signCount: signCount, extensions: outputs
        ).bytes
        let signature = try signing("signing an assertion") { () throws(CryptoError) in
            try credential.privateKey.signature(for: authData + clientDataHash)
        }
        events?(
            credential.event(
                .credentialAsserted, rpId: rpId, signCount: signCount, userVerified: flags.contains(.userVerified)
            )
        )
        // §6.2.2, member `user`: for a single account the key returns only
        // the user handle, which is what reaches the relying party. For
        // several accounts a key without a display (latchkey lets nobody pick
        // an account on the key, so `userSelected` is never sent) adds name
        // and displayName for the platform's account chooser, but only after
        // user verification: no user-identifiable information otherwise. A
        // platform given names for a single account shows a chooser of one
        // (Chromium stops there).
        let user = credential.stored.map {
            UserEntity(id: $0.userId, name: $0.userName, displayName: $0.userDisplayName)
                .cbor(identifying: multipleAccounts && flags.contains(.userVerified))
        }
        return GetAssertionResponse(
            credential: CredentialDescriptor(id: credential.id), authData: authData, signature: signature, user: user,
            largeBlobKey: extensions.largeBlobKey ? credential.stored?.largeBlobKey : nil
        )
    }
}
