// authenticatorMakeCredential (0x01), CTAP 2.1 §6.1.2: a new credential,
// discoverable (stored) or wrapped in its ID, its extension outputs and its
// attestation statement. Checks run in the spec's order: which error wins is
// behaviour.

import CBOR
import LatchkeyCrypto

extension Authenticator {
    // MARK: - authenticatorMakeCredential (CTAP 2.1 §6.1.2)

    func makeCredential(_ request: MakeCredentialRequest) async throws(CTAPStatus) -> MakeCredentialResponse {
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
}
