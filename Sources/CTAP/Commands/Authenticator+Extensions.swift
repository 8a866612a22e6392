// Processing of the extensions in Extensions.swift for makeCredential and
// getAssertion (CTAP 2.1 §12, CTAP 2.2 §12.7 hmac-secret-mc, §12.9
// thirdPartyPayment; previewSign has its own file). The commands
// call in here at their extension steps; what is checked before user
// presence (the hmac-secret inputs) is checked here too, so that a malformed
// input never costs the user a touch.
//
// minPinLength's RP IDs (§6.11.4, §12.4) persist in a store secret, which
// authenticatorReset deletes:
//
// | secret                     | value |
// |----------------------------|-------|
// | config.minPinLengthRPIDs   | CBOR array of the RP IDs allowed to read the minimum PIN length |

import CBOR
import LatchkeyCrypto

extension ConfigSecret {
    static let minPinLengthRPIDs = "config.minPinLengthRPIDs"
}

/// hmac-secret salts that passed their checks, with what encrypts the output.
struct HmacSecretSalts: Sendable {
    var version: PinUvAuthProtocolVersion
    var sharedSecret: [UInt8]
    /// salt1, or salt1 || salt2 (32 or 64 bytes).
    var salts: [UInt8]
}

/// What getAssertion's extensions ask of every assertion in its sequence
/// (getNextAssertion answers them too).
struct AssertionExtensionRequest: Sendable {
    var hmacSecret: HmacSecretSalts?
    var credBlob = false
    var largeBlobKey = false
    var thirdPartyPayment = false
    /// previewSign's signature, for the single credential an allowList
    /// names (never part of a getNextAssertion sequence).
    var previewSign: PreviewSignSigner?
}

extension Authenticator {
    /// The longest credBlob kept (getInfo maxCredBlobLength): what a wrapped
    /// credential ID can carry, so both kinds of credential take the same.
    static let maxCredBlobLength = CredentialWrapper.maxCredBlobLength

    // MARK: - hmac-secret (§12.5) and hmac-secret-mc

    /// Checks an hmac-secret (or hmac-secret-mc) input and decrypts its salts:
    /// an unsupported protocol or a keyAgreement that is not a P-256 point is
    /// INVALID_PARAMETER, a saltAuth that does not verify PIN_AUTH_INVALID,
    /// salts that are not 32 or 64 bytes INVALID_LENGTH.
    func checkHmacSecret(_ input: HmacSecretInput) throws(CTAPStatus) -> HmacSecretSalts {
        let version = try supportedProtocol(input.pinUvAuthProtocol)
        let sharedSecret = try decapsulate(input.keyAgreement, version)
        guard version.verify(key: sharedSecret, message: input.saltEnc, signature: input.saltAuth) else {
            throw .pinAuthInvalid
        }
        let salts: [UInt8]
        do {
            salts = try version.decrypt(key: sharedSecret, ciphertext: input.saltEnc)
        } catch {
            throw .invalidLength
        }
        guard salts.count == 32 || salts.count == 64 else { throw .invalidLength }
        return HmacSecretSalts(version: version, sharedSecret: sharedSecret, salts: salts)
    }

    /// output1 (|| output2) = HMAC-SHA-256(CredRandom, salt1 (|| salt2)),
    /// encrypted to the platform.
    func evaluateHmacSecret(_ salts: HmacSecretSalts, credRandom: [UInt8]) throws(CTAPStatus) -> [UInt8] {
        var output = HMACSHA256.authenticationCode(key: credRandom, message: Array(salts.salts[0..<32]))
        if salts.salts.count == 64 {
            output += HMACSHA256.authenticationCode(key: credRandom, message: Array(salts.salts[32...]))
        }
        return try signing("encrypting hmac-secret output") { () throws(CryptoError) in
            try salts.version.encrypt(key: salts.sharedSecret, plaintext: output, entropy: entropy)
        }
    }

    /// The CredRandom for this use of a credential made with hmac-secret, or
    /// nil for one made without.
    func credRandom(of credential: FoundCredential, userVerified: Bool) -> [UInt8]? {
        if let stored = credential.stored {
            guard let both = stored.credRandom, both.count == 64 else { return nil }
            return userVerified ? Array(both[0..<32]) : Array(both[32...])
        }
        guard credential.wrapped?.hmacSecret == true else { return nil }
        return wrapper.credRandom(for: credential.privateKey, userVerified: userVerified)
    }

    // MARK: - getAssertion outputs

    /// The authenticator extension outputs of one assertion, or nil when
    /// there are none (then authenticatorData has no ED flag).
    func assertionExtensionOutputs(
        _ request: AssertionExtensionRequest,
        for credential: FoundCredential,
        userVerified: Bool
    ) throws(CTAPStatus) -> CBORValue? {
        var outputs: [(String, CBORValue)] = []
        if request.credBlob {
            // §12.2: an empty byte string when the credential has none.
            outputs.append((ExtensionIdentifier.credBlob, .bytes(credential.credBlob ?? [])))
        }
        if let salts = request.hmacSecret, let credRandom = credRandom(of: credential, userVerified: userVerified) {
            outputs.append((ExtensionIdentifier.hmacSecret, .bytes(try evaluateHmacSecret(salts, credRandom: credRandom))))
        }
        if request.thirdPartyPayment {
            // §12.9: whether the credential was made as a payment credential,
            // false as well as true.
            outputs.append((ExtensionIdentifier.thirdPartyPayment, .boolean(credential.thirdPartyPayment)))
        }
        if let signer = request.previewSign {
            let signature = try signing("signing for previewSign") { () throws(CryptoError) in try signer.signature() }
            outputs.append((ExtensionIdentifier.previewSign, .intMap([(6, .bytes(signature))])))
        }
        return outputs.isEmpty ? nil : .textMap(outputs)
    }

    // MARK: - minPinLength (§12.4)

    /// The RP IDs setMinPINLength allowed to read the minimum PIN length.
    func minPinLengthRPIDs() throws(CTAPStatus) -> [String] {
        guard
            let encoded = try storing("reading minPinLengthRPIDs", { () throws(StoreError) in
                try store.secret(named: ConfigSecret.minPinLengthRPIDs)
            })
        else { return [] }
        do throws(CBORError) {
            return try CBORDecoder().decode(encoded).textArrayValue("minPinLengthRPIDs", element: "minPinLengthRPIDs[]")
        } catch {
            diagnostics?("stored minPinLengthRPIDs: \(error)")
            throw .other
        }
    }

    /// Replaces the RP IDs allowed to read the minimum PIN length: more than
    /// maxRPIDsForSetMinPINLength is KEY_STORE_FULL (§6.11.4).
    func setMinPinLengthRPIDs(_ rpIds: [String]) throws(CTAPStatus) {
        guard rpIds.count <= configuration.maxRPIDsForSetMinPINLength else { throw .keyStoreFull }
        var encoded: [UInt8] = []
        CBORValue.array(rpIds.map { .text($0) }).encode(into: &encoded)
        try storing("setting minPinLengthRPIDs") { () throws(StoreError) in
            try store.setSecret(encoded, named: ConfigSecret.minPinLengthRPIDs)
        }
    }
}
