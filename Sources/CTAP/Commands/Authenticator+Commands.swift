// The CTAP2 commands latchkey implements. Checks run in the spec's order
// (CTAP 2.1 §6.1.2, §6.2.2): which error wins is behaviour.

import CBOR
import LatchkeyCrypto

extension Authenticator {
    // MARK: - authenticatorMakeCredential (CTAP 2.1 §6.1.2)

    func makeCredential(_ cbor: CBORValue) async throws(CTAPStatus) -> MakeCredentialResponse {
        let request = try reading { () throws(CBORError) in
            try MakeCredentialRequest(cbor: cbor, offering: configuration.enabledExtensions)
        }
        guard request.clientDataHash.count == 32 else { throw .invalidLength }
        // A user handle is 1 to 64 bytes (WebAuthn §5.4.3, CTAP 2.1 §6.1); an
        // empty one breaks platforms at getAssertion (w3c/webauthn#1536), so it
        // is refused like an overlong one (README "CBOR strictness").
        guard UserEntity.idLengths.contains(request.user.id.count) else { throw .invalidLength }

        // Steps 1–2: touch probe and pinUvAuthProtocol.
        let pinUvAuthProtocol = try await checkPinUvAuthProbe(
            param: request.pinUvAuthParam, pinUvAuthProtocol: request.pinUvAuthProtocol, rpId: request.rp.id
        )

        // Step 3: the first listed public-key algorithm we support.
        guard
            let algorithm = request.pubKeyCredParams.lazy
                .filter({ $0.type == "public-key" })
                .compactMap({ COSEAlgorithm(rawValue: $0.alg) })
                .first(where: { self.configuration.algorithms.contains($0) })
        else { throw .unsupportedAlgorithm }

        // Step 5: options. A pinUvAuthParam makes "uv" count as false; without
        // one, "uv" asks for built-in user verification, which only a key
        // configured with it has.
        if request.options.up == false { throw .invalidOption }
        var builtInUv = request.pinUvAuthParam == nil && request.options.uv == true
        if builtInUv, !configuration.builtInUserVerification { throw .invalidOption }
        let discoverable = request.options.rk ?? false
        if discoverable, !configuration.residentKeys { throw .unsupportedOption }
        let extensions = request.extensions
        // §12.3: largeBlobKey's only value is true.
        if extensions.largeBlobKey == false { throw .invalidOption }
        let previewSign = try extensions.previewSign.map { input throws(CTAPStatus) in
            try checkPreviewSignGenerateKey(input)
        }

        // Step 6: with alwaysUv every credential is made with user
        // verification: built-in when the key has it, else a pinUvAuthToken.
        if request.pinUvAuthParam == nil, !builtInUv, try alwaysUv() {
            guard configuration.builtInUserVerification else { throw .pinUvAuthTokenRequired }
            builtInUv = true
        }

        // Steps 7–8: getInfo advertises makeCredUvNotRqd, so once a PIN is set
        // only a discoverable credential needs user verification
        // (CTAP2_ERR_PUAT_REQUIRED); a non-discoverable one is still made
        // without it, just without the UV flag.
        if request.pinUvAuthParam == nil, !builtInUv, discoverable, try storedPIN() != nil {
            throw .pinUvAuthTokenRequired
        }

        // Step 9: enterprise attestation (Authenticator+EnterpriseAttestation.swift).
        let enterpriseIdentity = try enterpriseAttestation(request.enterpriseAttestation, rpId: request.rp.id)

        // Step 11.1: the pinUvAuthParam proves user verification for this RP.
        var flags: AuthenticatorDataFlags = []
        if let pinUvAuthParam = request.pinUvAuthParam, let pinUvAuthProtocol {
            try verifyPinUvAuthParam(
                pinUvAuthParam, version: pinUvAuthProtocol, clientDataHash: request.clientDataHash,
                permission: .makeCredential, rpId: request.rp.id
            )
            flags.insert(.userVerified)
        }

        // hmac-secret-mc (CTAP 2.2 §12.7) goes with hmac-secret; its inputs
        // are checked before anything asks the user for a touch.
        let mcSalts = try extensions.hmacSecretMakeCredential.map { input throws(CTAPStatus) in
            try checkHmacSecret(input)
        }

        // Step 11.2: built-in user verification, one touch that also counts
        // as the presence of step 13.
        let consent = PresenceRequest(
            operation: .makeCredential, rpId: request.rp.id, userName: request.user.name, userId: request.user.id,
            userDisplayName: request.user.displayName, discoverable: discoverable
        )
        if builtInUv {
            try await collectVerifiedPresence(consent)
            flags.formUnion([.userVerified, .userPresent])
        }
        let userVerified = flags.contains(.userVerified)

        // Step 12: excludeList. The touch comes before the answer, so that a
        // page cannot probe for credentials without the user noticing. A
        // credential that needs user verification is invisible without it
        // (credProtect, §12.1).
        let rpIdHash = SHA256.hash(Array(request.rp.id.utf8))
        for descriptor in request.excludeList where descriptor.type == "public-key" {
            if let excluded = try findCredential(id: descriptor.id, rpIdHash: rpIdHash),
                excluded.credProtect.permits(userVerified: userVerified, listed: true)
            {
                if !flags.contains(.userPresent) {
                    try await collectPresence(PresenceRequest(operation: .excludedCredential, rpId: request.rp.id))
                }
                throw .credentialExcluded
            }
        }

        // Step 13: user presence (a PIN-issued token never carries it), after
        // which the token's user verified flag and mc/ga permissions are spent.
        if !flags.contains(.userPresent) {
            try await collectPresence(consent)
            flags.insert(.userPresent)
        }
        pinUvAuth.token.clearAfterUserPresence()

        // Step 15: a discoverable credential needs room (replacing one for
        // the same user takes none).
        if discoverable {
            let replacing = try storing("looking up the user's credential") { () throws(StoreError) in
                try store.containsCredential(rpIdHash: rpIdHash, userId: request.user.id)
            }
            let count = try storing("counting credentials") { () throws(StoreError) in try store.credentialCount() }
            if !replacing && count >= configuration.maxDiscoverableCredentials { throw .keyStoreFull }
        }

        // Step 14: the key pair, its extension data and its credential ID.
        let credProtect = extensions.credProtect ?? .optional
        // §12.2: a credBlob too long to keep is refused (output false), not
        // truncated.
        let credBlob = extensions.credBlob.flatMap { $0.count <= Self.maxCredBlobLength ? $0 : nil }
        let privateKey = try signing("generating a key") { () throws(CryptoError) in
            try CredentialPrivateKey.generate(algorithm, entropy: entropy)
        }
        // previewSign's key derives from the credential's; made before
        // anything is stored, so a failure leaves no credential behind.
        let signingKey = try previewSign.map { (signAlgorithm, signFlags) throws(CTAPStatus) in
            try generatePreviewSignKey(signAlgorithm, flags: signFlags, for: privateKey)
        }
        let credentialId: [UInt8]
        let counterScope: [UInt8]
        var largeBlobKey: [UInt8]?
        let found: FoundCredential
        if discoverable {
            credentialId = entropy.bytes(count: 32)
            counterScope = credentialId
            // §12.3: a large-blob key only for a discoverable credential (the
            // large-blob array is found through credentialManagement).
            if extensions.largeBlobKey == true { largeBlobKey = entropy.bytes(count: 32) }
            let credential = StoredCredential(
                id: credentialId, rpId: request.rp.id, rpIdHash: rpIdHash, rpName: request.rp.name,
                userId: request.user.id, userName: request.user.name, userDisplayName: request.user.displayName,
                algorithm: algorithm.rawValue, privateKey: privateKey.storedRepresentation,
                credProtect: credProtect.rawValue,
                credRandom: extensions.hmacSecret ? entropy.bytes(count: 64) : nil,
                credBlob: credBlob, largeBlobKey: largeBlobKey, thirdPartyPayment: extensions.thirdPartyPayment
            )
            // Durable before the answer leaves (docs/ARCHITECTURE.md, durability).
            let stored = try storing("saving a credential") { () throws(StoreError) in try store.save(credential) }
            try credentialStoreChanged()
            found = FoundCredential(id: credentialId, privateKey: privateKey, stored: stored)
        } else {
            let wrapped = WrappedCredential(
                privateKey: privateKey, credProtect: credProtect.rawValue, hmacSecret: extensions.hmacSecret,
                credBlob: credBlob, thirdPartyPayment: extensions.thirdPartyPayment
            )
            credentialId = try signing("wrapping a credential") { () throws(CryptoError) in
                try wrapper.wrap(wrapped, rpIdHash: rpIdHash, entropy: entropy)
            }
            counterScope = []
            found = FoundCredential(id: credentialId, privateKey: privateKey, wrapped: wrapped)
        }
        let signCount = try storing("taking a signature counter") { () throws(StoreError) in
            try store.nextSignatureCounter(scope: counterScope)
        }
        events?(
            AuthenticatorEvent(
                kind: .credentialCreated, credentialId: credentialId, rpId: request.rp.id, userId: request.user.id,
                userName: request.user.name, userDisplayName: request.user.displayName, discoverable: discoverable,
                signCount: signCount, userVerified: flags.contains(.userVerified), origin: "makeCredential"
            )
        )

        // Extension outputs in authenticatorData, for the extensions asked for.
        var outputs: [(String, CBORValue)] = []
        if extensions.credBlob != nil { outputs.append((ExtensionIdentifier.credBlob, .boolean(credBlob != nil))) }
        if let level = extensions.credProtect { outputs.append((ExtensionIdentifier.credProtect, .int(Int(level.rawValue)))) }
        if extensions.hmacSecret {
            outputs.append((ExtensionIdentifier.hmacSecret, .boolean(true)))
            if let mcSalts, let credRandom = credRandom(of: found, userVerified: userVerified) {
                outputs.append(
                    (ExtensionIdentifier.hmacSecretMakeCredential, .bytes(try evaluateHmacSecret(mcSalts, credRandom: credRandom)))
                )
            }
        }
        // thirdPartyPayment (CTAP 2.2 §12.9) has no makeCredential output: the
        // flag is kept with the credential and told at getAssertion.
        // §12.4: only RPs setMinPINLength named may learn the minimum.
        if extensions.minPinLength, try minPinLengthRPIDs().contains(request.rp.id) {
            outputs.append((ExtensionIdentifier.minPinLength, .int(try minPINLength())))
        }
        var unsignedOutputs: [(String, CBORValue)] = []
        if let signingKey {
            let generated = previewSignOutputs(signingKey, rpIdHash: rpIdHash, authenticatorFlags: flags)
            outputs.append((ExtensionIdentifier.previewSign, generated.signed))
            unsignedOutputs.append((ExtensionIdentifier.previewSign, generated.unsigned))
        }

        let authData = AuthenticatorData(
            rpIdHash: rpIdHash, flags: flags, signCount: signCount,
            attestedCredential: (configuration.aaguid, credentialId, privateKey.publicCOSEKey),
            extensions: outputs.isEmpty ? nil : .textMap(outputs)
        ).bytes

        // Step 16: the attestation statement.
        var response = try attestation(
            signed: authData + request.clientDataHash, authData: authData, privateKey: privateKey,
            largeBlobKey: largeBlobKey, enterpriseIdentity: enterpriseIdentity,
            preference: request.attestationFormatsPreference
        )
        response.unsignedExtensionOutputs = unsignedOutputs
        return response
    }

    /// makeCredential's response for `authData` with the attestation
    /// statement over `signed`: enterprise when asked and allowed, else the
    /// key's mode, unless the platform prefers none.
    private func attestation(
        signed: [UInt8],
        authData: [UInt8],
        privateKey: CredentialPrivateKey,
        largeBlobKey: [UInt8]?,
        enterpriseIdentity: AttestationIdentity?,
        preference: [String]?
    ) throws(CTAPStatus) -> MakeCredentialResponse {
        if let enterpriseIdentity {
            var response = try batchAttestation(
                enterpriseIdentity, signed: signed, authData: authData, largeBlobKey: largeBlobKey
            )
            response.epAtt = true
            return response
        }
        // CTAP 2.2: a platform that prefers "none" to "packed" gets none.
        let preferred = preference?.first { attestationFormats.contains($0) }
        switch preferred == "none" ? .none : configuration.attestation {
        case .none:
            return MakeCredentialResponse(fmt: "none", authData: authData, attStmt: .map([]), largeBlobKey: largeBlobKey)
        case .selfAttestation:
            let sig = try signing("self attestation") { () throws(CryptoError) in try privateKey.signature(for: signed) }
            return MakeCredentialResponse(
                fmt: "packed", authData: authData,
                attStmt: .textMap([("alg", .int(privateKey.algorithm.rawValue)), ("sig", .bytes(sig))]),
                largeBlobKey: largeBlobKey
            )
        case .batch:
            guard let identity = configuration.attestationIdentity else {
                diagnostics?("batch attestation configured without an attestation identity")
                throw .other
            }
            return try batchAttestation(identity, signed: signed, authData: authData, largeBlobKey: largeBlobKey)
        }
    }

    /// A packed statement signed by `identity` with its chain in x5c: the
    /// batch identity, or the enterprise one.
    private func batchAttestation(
        _ identity: AttestationIdentity,
        signed: [UInt8],
        authData: [UInt8],
        largeBlobKey: [UInt8]?
    ) throws(CTAPStatus) -> MakeCredentialResponse {
        let sig = try signing("packed attestation") { () throws(CryptoError) in
            try identity.privateKey.signature(for: signed)
        }
        return MakeCredentialResponse(
            fmt: "packed", authData: authData,
            attStmt: .textMap([
                ("alg", .int(COSEAlgorithm.es256.rawValue)), ("sig", .bytes(sig)),
                ("x5c", .array(identity.certificateChain.map { .bytes($0) })),
            ]),
            largeBlobKey: largeBlobKey
        )
    }

    // MARK: - authenticatorGetAssertion (CTAP 2.1 §6.2.2)

    func getAssertion(_ cbor: CBORValue, from origin: RequestOrigin) async throws(CTAPStatus) -> GetAssertionResponse {
        let request = try reading { () throws(CBORError) in
            try GetAssertionRequest(cbor: cbor, offering: configuration.enabledExtensions)
        }
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

    // MARK: - authenticatorGetInfo (CTAP 2.1 §6.4)

    func getInfo() throws(CTAPStatus) -> GetInfoResponse {
        let stored = try storing("counting credentials") { () throws(StoreError) in try store.credentialCount() }
        // FIDO_2_1 (§6.4): clientPIN with pinUvAuthToken, credential
        // management, authenticatorConfig, large blobs and the extensions
        // credProtect and (with setMinPINLength) minPinLength all work.
        var versions = ["FIDO_2_0", "FIDO_2_1"]
        let alwaysUv = try alwaysUv()
        if configuration.u2fAvailable && !alwaysUv { versions.insert("U2F_V2", at: 0) }
        var options: [(String, Bool)] = [
            ("rk", configuration.residentKeys), ("up", true), ("plat", false),
            ("clientPin", try storedPIN() != nil), ("credMgmt", true), ("authnrCfg", true),
            ("setMinPINLength", true), ("alwaysUv", alwaysUv), ("pinUvAuthToken", true),
            ("makeCredUvNotRqd", !alwaysUv),
        ]
        // Options a key does not have are left out rather than said false:
        // false would mean "supported, not configured" (§6.4).
        if configuration.builtInUserVerification { options.append(("uv", true)) }
        if configuration.largeBlobs { options.append(("largeBlobs", true)) }
        if configuration.persistentPinUvAuthToken { options.append(("perCredMgmtRO", true)) }
        // ep: absent on a key that is not capable, else whether it is enabled (§7.1).
        if enterpriseAttestationCapable { options.append(("ep", try enterpriseAttestationEnabled())) }
        let identity = try encryptedIdentity()
        return GetInfoResponse(
            versions: versions,
            extensions: ExtensionIdentifier.supported.filter(configuration.offers),
            aaguid: configuration.aaguid,
            options: options,
            maxMsgSize: Self.maxMessageSize,
            pinUvAuthProtocols: [PinUvAuthProtocolVersion.two.rawValue, PinUvAuthProtocolVersion.one.rawValue],
            maxCredentialCountInList: configuration.maxCredentialCountInList,
            maxCredentialIdLength: Self.maxCredentialIdLength,
            transports: ["usb"],
            algorithms: configuration.algorithms.map { CredentialParameters(alg: $0.rawValue) },
            maxSerializedLargeBlobArray: configuration.largeBlobs ? configuration.maxSerializedLargeBlobArray : nil,
            forcePINChange: try forcePINChange(),
            minPINLength: try minPINLength(),
            firmwareVersion: configuration.firmwareVersion,
            // present if, and only if, credBlob is offered (CTAP 2.1 §6.4): Chromium
            // takes a key that says otherwise for U2F-only
            maxCredBlobLength: configuration.offers(ExtensionIdentifier.credBlob) ? Self.maxCredBlobLength : nil,
            maxRPIDsForSetMinPINLength: configuration.maxRPIDsForSetMinPINLength,
            remainingDiscoverableCredentials: max(0, configuration.maxDiscoverableCredentials - stored),
            attestationFormats: attestationFormats,
            encIdentifier: identity?.identifier,
            maxPINLength: PINSecret.maxByteCount,
            encCredStoreState: identity?.credentialStoreState,
            authenticatorConfigCommands: AuthenticatorConfigSubcommand.allCases.filter(supportsConfig).map(\.rawValue)
        )
    }

    /// The attestation statement formats makeCredential can return (CTAP 2.2
    /// §6.4 attestationFormats), the configured mode's first: "packed" for
    /// self and batch attestation, then "none" for a platform whose
    /// attestationFormatsPreference puts it before "packed"; "none" for
    /// none, which still returns "packed" to an enterprise attestation
    /// request on a capable key.
    var attestationFormats: [String] {
        switch configuration.attestation {
        case .selfAttestation, .batch: ["packed", "none"]
        case .none: enterpriseAttestationCapable ? ["none", "packed"] : ["none"]
        }
    }

    // MARK: - authenticatorReset (CTAP 2.1 §6.6)

    func reset() async throws(CTAPStatus) {
        // Only soon after power-up, as hardware keys do, so that malware on the
        // host cannot wipe a key that has been plugged in for a while.
        guard clock.milliseconds - poweredUpAt <= configuration.resetWindowMilliseconds else { throw .notAllowed }
        try await collectPresence(PresenceRequest(operation: .reset))
        try erase()
    }

    /// Erases all but the device's identity, as authenticatorReset does (and
    /// the control API's reset): the store drops credentials, the PIN, its
    /// retries, forcePINChange, the minimum PIN length, alwaysUv and large
    /// blobs with every non-`device.` secret; a new wrapping secret makes
    /// every wrapped credential ID unusable; tokens, key agreement keys and
    /// every sequence in progress go too.
    func erase() throws(CTAPStatus) {
        // Dropped first: a reset that fails halfway must not leave a stale value.
        alwaysUvCache = nil
        wrapper = try storing("resetting the store") { () throws(StoreError) in
            try store.reset()
            return try Self.loadWrapper(store: store, entropy: entropy)
        }
        keyCache.removeAll()
        conversations.removeAll()
        pinUvAuth = PinUvAuthSession(entropy: entropy)
    }
}

/// The authenticatorGetInfo response (CTAP 2.1 §6.4). Only what latchkey does
/// is advertised.
///
/// | key  | name                             |
/// |------|----------------------------------|
/// | 0x01 | versions                         |
/// | 0x02 | extensions                       |
/// | 0x03 | aaguid                           |
/// | 0x04 | options                          |
/// | 0x05 | maxMsgSize                       |
/// | 0x06 | pinUvAuthProtocols               |
/// | 0x07 | maxCredentialCountInList         |
/// | 0x08 | maxCredentialIdLength            |
/// | 0x09 | transports                       |
/// | 0x0A | algorithms                       |
/// | 0x0B | maxSerializedLargeBlobArray      |
/// | 0x0C | forcePINChange                   |
/// | 0x0D | minPINLength                     |
/// | 0x0E | firmwareVersion                  |
/// | 0x0F | maxCredBlobLength                |
/// | 0x10 | maxRPIDsForSetMinPINLength       |
/// | 0x14 | remainingDiscoverableCredentials |
/// | 0x16 | attestationFormats (CTAP 2.2)    |
/// | 0x19 | encIdentifier (CTAP 2.2)         |
/// | 0x1B | pinComplexityPolicy (CTAP 2.2)   |
/// | 0x1D | maxPINLength (CTAP 2.2)          |
/// | 0x1E | encCredStoreState (CTAP 2.2)     |
/// | 0x1F | authenticatorConfigCommands (2.2)|
///
/// Left out, as their absence says what is true of latchkey (CTAP 2.2
/// §6.4): 0x11–0x13 (no UV modality, certifications or preferred platform
/// UV attempts: built-in UV is a consent policy, not a sensor), 0x15
/// vendorPrototypeConfigCommands (none), 0x17 uvCountSinceLastPinEntry
/// (optional; built-in UV has no failure count to report), 0x18
/// longTouchForReset (absent is false), 0x1A transportsForReset (absent is
/// every transport in 0x09) and 0x1C pinComplexityPolicyURL (no policy).
public struct GetInfoResponse: Sendable {
    public var versions: [String]
    public var extensions: [String]
    public var aaguid: [UInt8]
    public var options: [(String, Bool)]
    public var maxMsgSize: Int
    /// In order of preference (§6.4).
    public var pinUvAuthProtocols: [UInt64]
    public var maxCredentialCountInList: Int
    public var maxCredentialIdLength: Int
    public var transports: [String]
    public var algorithms: [CredentialParameters]
    public var maxSerializedLargeBlobArray: Int?
    public var forcePINChange: Bool
    public var minPINLength: Int
    public var firmwareVersion: UInt64
    /// Only when credBlob is offered.
    public var maxCredBlobLength: Int?
    public var maxRPIDsForSetMinPINLength: Int
    public var remainingDiscoverableCredentials: Int
    /// The first is what makeCredential returns unless asked for
    /// enterprise attestation.
    public var attestationFormats: [String]
    /// Encrypted to the persistent pinUvAuthToken (Authenticator+PersistentToken.swift).
    public var encIdentifier: [UInt8]?
    /// latchkey enforces no PIN complexity policy beyond minPINLength.
    public var pinComplexityPolicy = false
    /// In Unicode code points; a PIN is also at most that many UTF-8 bytes.
    public var maxPINLength: Int
    public var encCredStoreState: [UInt8]?
    /// The authenticatorConfig subcommands this key accepts.
    public var authenticatorConfigCommands: [UInt64]

    /// Appends the response map.
    public func encode(into out: inout [UInt8]) {
        var entries: [(Int, CBORValue)] = [
            (0x01, .array(versions.map { .text($0) })),
            (0x02, .array(extensions.map { .text($0) })),
            (0x03, .bytes(aaguid)),
            (0x04, .textMap(options.map { ($0.0, .boolean($0.1)) })),
            (0x05, .int(maxMsgSize)),
            (0x06, .array(pinUvAuthProtocols.map { .unsigned($0) })),
            (0x07, .int(maxCredentialCountInList)),
            (0x08, .int(maxCredentialIdLength)),
            (0x09, .array(transports.map { .text($0) })),
            (0x0A, .array(algorithms.map(\.cbor))),
        ]
        if let maxSerializedLargeBlobArray { entries.append((0x0B, .int(maxSerializedLargeBlobArray))) }
        entries += [
            (0x0C, .boolean(forcePINChange)),
            (0x0D, .int(minPINLength)),
            (0x0E, .unsigned(firmwareVersion)),
        ]
        if let maxCredBlobLength { entries.append((0x0F, .int(maxCredBlobLength))) }
        entries += [
            (0x10, .int(maxRPIDsForSetMinPINLength)),
            (0x14, .int(remainingDiscoverableCredentials)),
            (0x16, .array(attestationFormats.map { .text($0) })),
        ]
        if let encIdentifier { entries.append((0x19, .bytes(encIdentifier))) }
        entries += [(0x1B, .boolean(pinComplexityPolicy)), (0x1D, .int(maxPINLength))]
        if let encCredStoreState { entries.append((0x1E, .bytes(encCredStoreState))) }
        entries.append((0x1F, .array(authenticatorConfigCommands.map { .unsigned($0) })))
        CBORValue.intMap(entries).encode(into: &out)
    }
}
