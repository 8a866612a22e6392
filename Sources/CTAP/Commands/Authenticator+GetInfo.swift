// authenticatorGetInfo (0x04), CTAP 2.1 §6.4: what this key advertises, from
// its configuration and its stored state. The response map is
// GetInfoResponse (Wire/GetInfo.swift).

extension Authenticator {
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
}
