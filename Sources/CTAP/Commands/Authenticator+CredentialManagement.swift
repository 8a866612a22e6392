// authenticatorCredentialManagement (0x0A, and the prototype 0x41 answered
// the same way), CTAP 2.1 §6.8. Each subcommand checks in the spec's order:
// its parameters, then pinUvAuthParam (CTAP2_ERR_PUAT_REQUIRED), the
// protocol, the MAC, the cm permission and the permissions RP ID, then the
// credentials. Which error wins is behaviour.
//
// Order of enumeration: RPs by their newest credential, newest first;
// credentials newest first (the store's order).

import CBOR
import LatchkeyCrypto

/// What a GetNext subcommand continues: the rest of an enumeration, kept only
/// while credentialManagement commands follow one another (§6.8.3, §6.8.4).
enum CredentialManagementEnumeration: Sendable {
    /// enumerateRPsBegin's remaining RPs.
    case relyingParties([StoredCredential])
    /// enumerateCredentialsBegin's remaining credentials.
    case credentials([StoredCredential])
}

extension Authenticator {
    // MARK: - authenticatorCredentialManagement (CTAP 2.1 §6.8)

    func credentialManagement(_ request: CredentialManagementRequest, from origin: RequestOrigin) throws(CTAPStatus)
        -> CredentialManagementResponse
    {
        let subCommand = CredentialManagementSubcommand(rawValue: request.subCommand)
        // An enumeration continues only with its own GetNext (§6.8.3, §6.8.4:
        // the state lasts between consecutive calls), from the conversation
        // that began it: GetNext carries no pinUvAuthParam, so the state is
        // all that authorizes it.
        let enumeration = conversations[origin].enumeration
        conversations[origin].enumeration = nil
        switch subCommand {
        case .getCredsMetadata: return try getCredsMetadata(request)
        case .enumerateRPsBegin: return try enumerateRPsBegin(request, from: origin)
        case .enumerateRPsGetNextRP:
            guard case .relyingParties(let remaining) = enumeration else { throw .notAllowed }
            return nextRP(remaining, from: origin)
        case .enumerateCredentialsBegin: return try enumerateCredentialsBegin(request, from: origin)
        case .enumerateCredentialsGetNextCredential:
            guard case .credentials(let remaining) = enumeration else { throw .notAllowed }
            return try nextCredential(remaining, from: origin)
        case .deleteCredential: try deleteCredential(request)
        case .updateUserInformation: try updateUserInformation(request)
        case nil: throw .invalidSubcommand
        }
        return CredentialManagementResponse()
    }

    /// §6.8.2 getCredsMetadata.
    private func getCredsMetadata(_ request: CredentialManagementRequest) throws(CTAPStatus)
        -> CredentialManagementResponse
    {
        // Steps 1–5; a token bound to one RP may not see the whole key.
        try authenticate(request, .getCredsMetadata, rpIdHash: nil)
        let count = try storing("counting credentials") { () throws(StoreError) in try store.credentialCount() }
        var response = CredentialManagementResponse()
        response.existingResidentCredentialsCount = count
        response.maxPossibleRemainingResidentCredentialsCount = max(0, configuration.maxDiscoverableCredentials - count)
        return response
    }

    /// §6.8.3 enumerateRPsBegin: the first RP and how many there are.
    private func enumerateRPsBegin(_ request: CredentialManagementRequest, from origin: RequestOrigin) throws(CTAPStatus)
        -> CredentialManagementResponse
    {
        try authenticate(request, .enumerateRPsBegin, rpIdHash: nil)
        let all = try storing("listing credentials") { () throws(StoreError) in try store.allCredentials() }
        // One entry per RP: its newest credential, with the newest rp.name known.
        var relyingParties: [StoredCredential] = []
        var index: [[UInt8]: Int] = [:]
        for credential in all {
            if let at = index[credential.rpIdHash] {
                if relyingParties[at].rpName == nil { relyingParties[at].rpName = credential.rpName }
            } else {
                index[credential.rpIdHash] = relyingParties.count
                relyingParties.append(credential)
            }
        }
        guard !relyingParties.isEmpty else { throw .noCredentials }
        var response = nextRP(relyingParties, from: origin)
        response.totalRPs = relyingParties.count
        return response
    }

    /// §6.8.3 enumerateRPsGetNextRP, and the first answer of enumerateRPsBegin.
    private func nextRP(_ remaining: [StoredCredential], from origin: RequestOrigin) -> CredentialManagementResponse {
        var remaining = remaining
        let first = remaining.removeFirst()
        if !remaining.isEmpty { conversations[origin].enumeration = .relyingParties(remaining) }
        var response = CredentialManagementResponse()
        response.rp = RelyingPartyEntity(id: first.rpId, name: first.rpName)
        response.rpIDHash = first.rpIdHash
        return response
    }

    /// §6.8.4 enumerateCredentialsBegin: the RP's first credential and how many there are.
    private func enumerateCredentialsBegin(
        _ request: CredentialManagementRequest,
        from origin: RequestOrigin
    ) throws(CTAPStatus)
        -> CredentialManagementResponse
    {
        // Step 1: rpIDHash.
        guard let rpIdHash = request.rpIDHash else { throw .missingParameter }
        // Steps 2–6, the permissions RP ID against rpIDHash.
        try authenticate(request, .enumerateCredentialsBegin, rpIdHash: rpIdHash)
        let credentials = try storing("listing credentials") { () throws(StoreError) in
            try store.credentials(rpIdHash: rpIdHash)
        }
        guard !credentials.isEmpty else { throw .noCredentials }
        var response = try nextCredential(credentials, from: origin)
        response.totalCredentials = credentials.count
        return response
    }

    /// §6.8.4 enumerateCredentialsGetNextCredential, and the first answer of
    /// enumerateCredentialsBegin.
    private func nextCredential(_ remaining: [StoredCredential], from origin: RequestOrigin) throws(CTAPStatus)
        -> CredentialManagementResponse
    {
        var remaining = remaining
        let credential = remaining.removeFirst()
        if !remaining.isEmpty { conversations[origin].enumeration = .credentials(remaining) }
        guard let algorithm = COSEAlgorithm(rawValue: credential.algorithm),
            let key = try? CredentialPrivateKey(algorithm: algorithm, storedRepresentation: credential.privateKey)
        else {
            diagnostics?("stored credential has an unusable key")
            throw .other
        }
        var response = CredentialManagementResponse()
        response.user = UserEntity(
            id: credential.userId, name: credential.userName, displayName: credential.userDisplayName
        )
        response.credentialID = CredentialDescriptor(id: credential.id)
        response.publicKey = key.publicCOSEKey
        response.credProtect = Int(credential.credProtect)
        // §6.8.4: the key, so that a platform can find the credential's blob.
        response.largeBlobKey = credential.largeBlobKey
        // CTAP 2.2 §6.8.4: the payment flag, from keys that offer the extension.
        if configuration.offers(ExtensionIdentifier.thirdPartyPayment) {
            response.thirdPartyPayment = credential.thirdPartyPayment
        }
        return response
    }

    /// §6.8.5 deleteCredential.
    private func deleteCredential(_ request: CredentialManagementRequest) throws(CTAPStatus) {
        guard let descriptor = request.credentialID else { throw .missingParameter }
        let credential = try authenticatedCredential(request, .deleteCredential, descriptor: descriptor)
        try delete(credential)
    }

    /// deleteCredential's change, shared with the control API and signals:
    /// the record, its counter and its cached key go; an event follows.
    func delete(_ credential: StoredCredential) throws(CTAPStatus) {
        try storing("deleting a credential") { () throws(StoreError) in
            _ = try store.deleteCredential(id: credential.id)
        }
        try credentialStoreChanged()
        keyCache[credential.rpIdHash + credential.id] = nil
        events?(AuthenticatorEvent(.credentialDeleted, credential))
    }

    /// §6.8.6 updateUserInformation: name and displayName are replaced; an
    /// empty or absent field is removed.
    private func updateUserInformation(_ request: CredentialManagementRequest) throws(CTAPStatus) {
        guard let descriptor = request.credentialID, let user = request.user else { throw .missingParameter }
        let credential = try authenticatedCredential(request, .updateUserInformation, descriptor: descriptor)
        try updateUser(of: credential, to: user)
    }

    /// updateUserInformation's change to the credential, shared with the
    /// control API. Returns the credential as stored.
    @discardableResult
    func updateUser(of credential: StoredCredential, to user: UserEntity) throws(CTAPStatus) -> StoredCredential {
        // The user handle names the account; it cannot change.
        guard user.id == credential.userId else { throw .invalidParameter }
        var credential = credential
        credential.userName = user.name.flatMap { $0.isEmpty ? nil : $0 }
        credential.userDisplayName = user.displayName.flatMap { $0.isEmpty ? nil : $0 }
        let stored = credential
        try storing("updating a credential") { () throws(StoreError) in _ = try store.update(stored) }
        try credentialStoreChanged()
        events?(AuthenticatorEvent(.credentialUpdated, stored))
        return stored
    }

    // MARK: - Shared steps

    /// The steps deleteCredential and updateUserInformation share after
    /// their parameters: authentication, the credential (NO_CREDENTIALS),
    /// then the permissions RP ID against the credential's RP.
    private func authenticatedCredential(
        _ request: CredentialManagementRequest,
        _ subCommand: CredentialManagementSubcommand,
        descriptor: CredentialDescriptor
    ) throws(CTAPStatus) -> StoredCredential {
        try authenticate(request, subCommand, rpIdHash: nil, checkRpId: false)
        guard
            let credential = try storing("looking up a credential", { () throws(StoreError) in
                try store.credential(id: descriptor.id)
            })
        else { throw .noCredentials }
        try checkPermissionsRpId(credential.rpIdHash)
        return credential
    }

    /// pinUvAuthParam for a credentialManagement subcommand: present
    /// (PUAT_REQUIRED), the protocol (MISSING_PARAMETER, INVALID_PARAMETER),
    /// a PIN set (PIN_NOT_SET, as for makeCredential), then verify(token,
    /// subCommand || subCommandParams), the cm permission and the permissions
    /// RP ID, each failure PIN_AUTH_INVALID.
    ///
    /// `rpIdHash` nil with `checkRpId`: the subcommand concerns every RP, so
    /// an RP-bound token is refused (§6.8.2 step 5, §6.8.3 step 5).
    private func authenticate(
        _ request: CredentialManagementRequest,
        _ subCommand: CredentialManagementSubcommand,
        rpIdHash: [UInt8]?,
        checkRpId: Bool = true
    ) throws(CTAPStatus) {
        var message = [UInt8(subCommand.rawValue)]
        if let params = request.subCommandParams { params.encode(into: &message) }
        // The persistent pinUvAuthToken (CTAP 2.2) reads the whole key: no
        // permissions RP ID, and never a change.
        if subCommand.isReadOnly,
            try verifiesWithPersistentToken(request.pinUvAuthParam, protocol: request.pinUvAuthProtocol, message: message)
        {
            return
        }
        try authenticatePinUvAuthParam(
            request.pinUvAuthParam, protocol: request.pinUvAuthProtocol, message: message,
            permission: .credentialManagement
        )
        guard checkRpId else { return }
        if let rpIdHash {
            try checkPermissionsRpId(rpIdHash)
        } else if pinUvAuth.token.permissionsRpId != nil {
            throw .pinAuthInvalid
        }
    }

    /// A token with a permissions RP ID serves that RP only.
    private func checkPermissionsRpId(_ rpIdHash: [UInt8]) throws(CTAPStatus) {
        guard let bound = pinUvAuth.token.permissionsRpId else { return }
        guard constantTimeEqual(SHA256.hash(Array(bound.utf8)), rpIdHash) else { throw .pinAuthInvalid }
    }
}
