// Processing of previewSign (PreviewSign.swift) for makeCredential and
// getAssertion. Inputs are checked before the user is asked for a touch;
// the signature itself is made only once the assertion is granted.
//
// Statuses, as Yubico's device suite (test_sign_extension_v4.py) expects them:
//
// | when                                                            | status |
// |-----------------------------------------------------------------|--------|
// | generateKey flags other than 0b000, 0b001, 0b101                | CTAP2_ERR_INVALID_OPTION |
// | generateKey without an algorithm latchkey has                   | CTAP2_ERR_UNSUPPORTED_ALGORITHM |
// | sign without an allowList, keyHandle or tbs                     | CTAP2_ERR_INVALID_OPTION |
// | a keyHandle that is not the credential's                        | CTAP2_ERR_INVALID_CREDENTIAL |
// | a key made with UP required, asked with up = false             | CTAP2_ERR_UP_REQUIRED |
// | a key made with UV required, asked without user verification   | CTAP2_ERR_PUAT_REQUIRED |
// | a split algorithm's tbs that is not a SHA-256 digest            | CTAP1_ERR_INVALID_LENGTH |
// | ARKG without additionalArgs                                     | CTAP2_ERR_MISSING_PARAMETER |
// | ARKG additionalArgs with another alg, or a kh or ctx that fails | CTAP2_ERR_INVALID_CREDENTIAL |

import CBOR
import LatchkeyCrypto

/// A previewSign signature to make once the assertion is granted.
struct PreviewSignSigner: Sendable {
    var key: P256PrivateKey
    var tbs: [UInt8]
    var prehashed: Bool

    func signature() throws(CryptoError) -> [UInt8] {
        prehashed ? try key.signature(forDigest: tbs) : try key.signature(for: tbs)
    }
}

extension Authenticator {
    // MARK: - makeCredential (generateKey)

    /// The algorithm (the first of the request's that latchkey has) and
    /// flags a generateKey input asks for.
    func checkPreviewSignGenerateKey(
        _ input: PreviewSignGenerateKeyInput
    ) throws(CTAPStatus) -> (PreviewSignAlgorithm, PreviewSignFlags) {
        guard let flags = PreviewSignFlags(input.flags) else { throw .invalidOption }
        guard let algorithm = input.algorithms.lazy.compactMap(PreviewSignAlgorithm.init(rawValue:)).first else {
            throw .unsupportedAlgorithm
        }
        return (algorithm, flags)
    }

    /// Generates a signing key for the credential whose key is
    /// `credentialKey`, before anything about the credential is stored.
    func generatePreviewSignKey(
        _ algorithm: PreviewSignAlgorithm,
        flags: PreviewSignFlags,
        for credentialKey: CredentialPrivateKey
    ) throws(CTAPStatus) -> PreviewSignKey {
        let secret = Self.previewSignSecret(credentialKey)
        return try signing("generating a previewSign key") { () throws(CryptoError) in
            try PreviewSignKey.generate(algorithm, flags: flags, secret: secret, entropy: entropy)
        }
    }

    /// makeCredential's outputs for the signing key `key`: the signed {3:
    /// alg} and the unsigned {7: attestation object}.
    func previewSignOutputs(
        _ key: PreviewSignKey,
        rpIdHash: [UInt8],
        authenticatorFlags: AuthenticatorDataFlags
    ) -> (signed: CBORValue, unsigned: CBORValue) {
        let alg = CBORValue.int(key.algorithm.rawValue)
        // The inner authenticatorData attests the signing key, with a counter
        // of 0: it is never a credential's assertion.
        let authData = AuthenticatorData(
            rpIdHash: rpIdHash,
            flags: authenticatorFlags,
            signCount: 0,
            attestedCredential: (configuration.aaguid, key.keyHandle, key.publicCOSEKey),
            extensions: .textMap([
                (ExtensionIdentifier.previewSign, .intMap([(3, alg), (4, .int(Int(key.flags.rawValue)))]))
            ])
        ).bytes
        var attestationObject: [UInt8] = []
        CBORValue.intMap([(1, .text("none")), (2, .bytes(authData)), (3, .map([]))]).encode(into: &attestationObject)
        return (.intMap([(3, alg)]), .intMap([(7, .bytes(attestationObject))]))
    }

    // MARK: - getAssertion (sign)

    /// What is checked before any credential is looked up: a signature is
    /// made for a credential the RP names, with a key handle and data.
    func checkPreviewSignRequest(
        _ input: PreviewSignSignInput,
        allowList: [CredentialDescriptor]
    ) throws(CTAPStatus) {
        guard !allowList.isEmpty, input.keyHandle != nil, input.tbs != nil else { throw .invalidOption }
    }

    /// Opens the request's signing key for the located `credential` and
    /// checks it may sign now. `userPresence`: the platform asked for a
    /// touch (up), which the assertion will have.
    func preparePreviewSign(
        _ input: PreviewSignSignInput,
        for credential: FoundCredential,
        userPresence: Bool,
        userVerified: Bool
    ) throws(CTAPStatus) -> PreviewSignSigner {
        guard let keyHandle = input.keyHandle, let tbs = input.tbs else { throw .invalidOption }
        guard let key = PreviewSignKey.open(keyHandle, secret: Self.previewSignSecret(credential.privateKey)) else {
            throw .invalidCredential
        }
        // The key's own policy, before its arguments are read.
        if key.flags.requiresUserPresence, !userPresence { throw .upRequired }
        if key.flags.requiresUserVerification, !userVerified { throw .pinUvAuthTokenRequired }
        if key.algorithm.prehashed, tbs.count != 32 { throw .invalidLength }  // a SHA-256 digest
        guard let seed = key.arkgSeed else {
            return PreviewSignSigner(key: key.key, tbs: tbs, prehashed: key.algorithm.prehashed)
        }
        guard let encoded = input.additionalArgs else { throw .missingParameter }
        let arguments = try reading { () throws(CBORError) in try ARKGSignArguments(decoding: encoded) }
        guard arguments.alg == PreviewSignAlgorithm.esp256SplitARKG.rawValue,
            let derived = try? ARKGP256.derivePrivateKey(seed, keyHandle: arguments.keyHandle, ctx: arguments.ctx)
        else { throw .invalidCredential }
        return PreviewSignSigner(key: derived, tbs: tbs, prehashed: true)
    }

    /// What a credential's signing keys are derived from: its key's seed,
    /// or the PKCS#8 of an imported key that has none.
    static func previewSignSecret(_ key: CredentialPrivateKey) -> [UInt8] {
        key.seed ?? key.pkcs8Representation
    }
}
