// Enterprise attestation (CTAP 2.1 §7.1): an attestation that may identify
// this very key, for relying parties an enterprise deploys it with. A key
// is capable when it is configured with an enterprise attestation identity
// (a certificate of its own, apart from the batch certificate; getInfo then
// has the "ep" option); it stays disabled until authenticatorConfig's
// enableEnterpriseAttestation (§6.11.1), and authenticatorReset disables it
// again (§7.1.2). Once enabled, makeCredential's enterpriseAttestation
// parameter (§6.1.2 step 9) selects it: 1 (vendor-facilitated) for the RP
// IDs the key is configured with, 2 (platform-managed) for any RP the
// platform vouches for. The response then says epAtt: true.
//
// | secret                          | value |
// |---------------------------------|-------|
// | config.enterpriseAttestation    | present (1 byte, 1) while enabled |

extension ConfigSecret {
    static let enterpriseAttestation = "config.enterpriseAttestation"
}

extension Authenticator {
    /// Whether the key can give enterprise attestation at all (getInfo "ep" present).
    var enterpriseAttestationCapable: Bool { configuration.enterpriseAttestationIdentity != nil }

    /// Whether enterprise attestation is enabled (getInfo "ep").
    func enterpriseAttestationEnabled() throws(CTAPStatus) -> Bool {
        guard enterpriseAttestationCapable else { return false }
        return try storing("reading enterprise attestation") { () throws(StoreError) in
            try store.secret(named: ConfigSecret.enterpriseAttestation)
        } == [1]
    }

    /// §6.11.1 enableEnterpriseAttestation: enabled until authenticatorReset.
    func enableEnterpriseAttestation() throws(CTAPStatus) {
        try storing("enabling enterprise attestation") { () throws(StoreError) in
            try store.setSecret([1], named: ConfigSecret.enterpriseAttestation)
        }
    }

    /// §6.1.2 step 9: whether this makeCredential gets enterprise
    /// attestation. A request on a key that is not capable, or not enabled,
    /// is CTAP1_ERR_INVALID_PARAMETER; a value other than 1 or 2
    /// CTAP2_ERR_INVALID_OPTION; vendor-facilitated for an RP ID the key was
    /// not configured with falls back to the key's usual attestation.
    func enterpriseAttestation(_ requested: UInt64?, rpId: String) throws(CTAPStatus) -> AttestationIdentity? {
        guard let requested else { return nil }
        guard let identity = configuration.enterpriseAttestationIdentity, try enterpriseAttestationEnabled() else {
            throw .invalidParameter
        }
        switch requested {
        case 1: return configuration.enterpriseAttestationRpIds.contains(rpId) ? identity : nil
        case 2: return identity
        default: throw .invalidOption
        }
    }
}
