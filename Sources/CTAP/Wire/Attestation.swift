// Attestation: the batch identity (a P-256 key and its certificate chain,
// generated at first start), and the statement formats `packed` (batch or
// self), `none` (WebAuthn §8.2, §8.7) and, for U2F, `fido-u2f`.

import CBOR
public import LatchkeyCrypto

/// The batch attestation key and certificate chain (leaf first).
public struct AttestationIdentity: Sendable {
    /// The attestation private key.
    public var privateKey: P256PrivateKey
    /// DER certificates, the attestation certificate first.
    public var certificateChain: [[UInt8]]

    public init(privateKey: P256PrivateKey, certificateChain: [[UInt8]]) {
        self.privateKey = privateKey
        self.certificateChain = certificateChain
    }

    /// Generates a root CA and a batch attestation certificate under it that
    /// meet WebAuthn §8.2.1 (subject OU "Authenticator Attestation",
    /// CA:FALSE, the AAGUID extension). `now` is Unix seconds; `commonName`
    /// names the leaf (an enterprise attestation certificate names the key).
    public static func generate(
        aaguid: [UInt8],
        entropy: any EntropySource,
        now: Int64,
        organization: String = "latchkey",
        commonName: String? = nil,
        validity: Int64 = 20 * 365 * 86_400
    ) throws(CryptoError) -> AttestationIdentity {
        let rootKey = try p256Key(entropy)
        let leafKey = try p256Key(entropy)
        let rootName = DistinguishedName(
            country: "US", organization: organization, organizationalUnit: "Authenticator Attestation CA",
            commonName: "\(organization) attestation root"
        )
        let leafName = DistinguishedName(
            country: "US", organization: organization, organizationalUnit: "Authenticator Attestation",
            commonName: commonName ?? "\(organization) batch attestation"
        )
        let notBefore = now - 86_400
        let root = try X509Certificate.make(
            serialNumber: serial(entropy), issuer: rootName, subject: rootName, subjectPublicKey: rootKey.publicKey,
            issuerKey: rootKey, notBefore: notBefore, notAfter: notBefore + validity, isCA: true, aaguid: nil
        )
        let leaf = try X509Certificate.make(
            serialNumber: serial(entropy), issuer: rootName, subject: leafName, subjectPublicKey: leafKey.publicKey,
            issuerKey: rootKey, notBefore: notBefore, notAfter: notBefore + validity, isCA: false, aaguid: aaguid
        )
        return AttestationIdentity(privateKey: leafKey, certificateChain: [leaf, root])
    }

    private static func p256Key(_ entropy: any EntropySource) throws(CryptoError) -> P256PrivateKey {
        guard let key = try CredentialPrivateKey.generate(.es256, entropy: entropy).p256 else {
            preconditionFailure("ES256 generation yields a P-256 key")
        }
        return key
    }

    private static func serial(_ entropy: any EntropySource) -> [UInt8] {
        var bytes = entropy.bytes(count: 16)
        bytes[0] &= 0x7F  // a positive INTEGER
        bytes[0] |= 0x01  // and never a shorter encoding
        return bytes
    }
}

/// Which attestation statement makeCredential returns.
public enum AttestationMode: String, Sendable, CaseIterable {
    /// `packed` signed by the batch attestation key, with x5c (WebAuthn §8.2).
    case batch
    /// `packed` self attestation: signed by the credential's own key (WebAuthn §8.2).
    case selfAttestation = "self"
    /// `none` (WebAuthn §8.7).
    case none
}
