// X.509 v3 certificates for attestation: the batch CA and the packed / U2F
// attestation certificates it signs (WebAuthn §8.2.1, FIDO U2F raw message
// formats §4.3). Built and signed by OpenSSL; only the values are ours.

import COpenSSL

/// An X.509 distinguished name, limited to the attributes attestation certificates use.
///
/// WebAuthn §8.2.1 requires, for a packed attestation certificate, C (ISO 3166
/// code), O (the vendor), OU the literal "Authenticator Attestation", and CN.
public struct DistinguishedName: Sendable, Equatable {
    /// countryName (C): a two-letter ISO 3166 code.
    public var country: String?
    /// organizationName (O).
    public var organization: String?
    /// organizationalUnitName (OU).
    public var organizationalUnit: String?
    /// commonName (CN): 1 to 64 characters.
    public var commonName: String

    /// A name with the given attributes; nil attributes are left out.
    public init(
        country: String? = nil,
        organization: String? = nil,
        organizationalUnit: String? = nil,
        commonName: String
    ) {
        self.country = country
        self.organization = organization
        self.organizationalUnit = organizationalUnit
        self.commonName = commonName
    }
}

/// Issues X.509 v3 certificates (RFC 5280) signed with ECDSA-SHA256.
public enum X509Certificate {
    /// id-fido-gen-ce-aaguid (FIDO Metadata / WebAuthn §8.2.1): the AAGUID extension.
    static let aaguidExtensionOID: StaticString = "1.3.6.1.4.1.45724.1.1.4"
    /// RFC 5280 §4.1.2.2: a serial number is at most 20 octets of content.
    static let maximumSerialNumberByteCount = 20
    /// The length of an AAGUID, in bytes.
    static let aaguidByteCount = 16

    /// A DER X.509 v3 certificate for `subjectPublicKey`, signed ECDSA-SHA256 by `issuerKey`.
    ///
    /// - `serialNumber`: a positive big-endian integer whose DER content is at
    ///   most 20 octets (RFC 5280 §4.1.2.2), else `.invalidInput`.
    /// - `notBefore`, `notAfter`: Unix seconds, injected by the caller;
    ///   `notBefore` after `notAfter` is `.invalidInput`.
    /// - `isCA`: basicConstraints critical CA:TRUE and keyUsage (critical)
    ///   keyCertSign, cRLSign; otherwise basicConstraints CA:FALSE, non-critical,
    ///   as WebAuthn §8.2.1 requires of a packed attestation certificate.
    /// - `aaguid`: 16 bytes (else `.invalidInput`) for the non-critical
    ///   id-fido-gen-ce-aaguid extension, whose extnValue is an OCTET STRING
    ///   wrapping an OCTET STRING of the AAGUID.
    ///
    /// Every certificate carries a subjectKeyIdentifier and an
    /// authorityKeyIdentifier, each the SHA-1 of the key's subjectPublicKey
    /// bits (RFC 5280 §4.2.1.2, method 1). A name attribute OpenSSL refuses
    /// (a country that is not two printable letters, an empty or overlong CN)
    /// is `.invalidInput`.
    public static func make(
        serialNumber: [UInt8],
        issuer: DistinguishedName,
        subject: DistinguishedName,
        subjectPublicKey: P256PublicKey,
        issuerKey: P256PrivateKey,
        notBefore: Int64,
        notAfter: Int64,
        isCA: Bool,
        aaguid: [UInt8]?
    ) throws(CryptoError) -> [UInt8] {
        let significant = serialNumber.drop { $0 == 0 }
        let contentByteCount = significant.count + (significant.first.map { $0 >= 0x80 ? 1 : 0 } ?? 0)
        guard !significant.isEmpty, contentByteCount <= maximumSerialNumberByteCount else {
            throw CryptoError(.invalidInput, "serial number must be positive and at most 20 octets in DER")
        }
        guard notBefore <= notAfter else {
            throw CryptoError(.invalidInput, "notBefore is after notAfter")
        }
        if let aaguid, aaguid.count != aaguidByteCount {
            throw CryptoError(.invalidInput, "AAGUID must be \(aaguidByteCount) bytes, got \(aaguid.count)")
        }

        let certificate = try OpenSSLObject(X509_new(), freedBy: X509_free, creator: "X509_new")
        let x509 = certificate.pointer
        // The version field holds the version minus one: 2 means v3.
        guard X509_set_version(x509, 2) == 1 else {
            throw .openSSL("X509_set_version")
        }
        let serial = try OpenSSLObject(BN_new(), freedBy: BN_free, creator: "BN_new")
        guard BN_bin2bn(serialNumber, Int32(serialNumber.count), serial.pointer) != nil,
            BN_to_ASN1_INTEGER(serial.pointer, X509_get_serialNumber(x509)) != nil
        else {
            throw .openSSL("BN_to_ASN1_INTEGER")
        }
        try add(issuer, to: X509_get_issuer_name(x509))
        try add(subject, to: X509_get_subject_name(x509))
        // ASN1_TIME_set picks UTCTime through 2049 and GeneralizedTime after, as RFC 5280 §4.1.2.5 requires.
        guard ASN1_TIME_set(X509_getm_notBefore(x509), time_t(notBefore)) != nil,
            ASN1_TIME_set(X509_getm_notAfter(x509), time_t(notAfter)) != nil
        else {
            throw .rejected(.invalidInput, "validity time not representable")
        }
        guard X509_set_pubkey(x509, subjectPublicKey.key.pointer) == 1 else {
            throw .openSSL("X509_set_pubkey")
        }

        try addBasicConstraintsAndKeyUsage(isCA: isCA, to: x509)
        try addKeyIdentifiers(subjectPublicKey: subjectPublicKey, issuerPublicKey: issuerKey.publicKey, to: x509)
        if let aaguid {
            try addAAGUIDExtension(aaguid, to: x509)
        }

        guard X509_sign(x509, issuerKey.key.pointer, EVP_sha256()) > 0 else {
            throw .openSSL("X509_sign")
        }
        return derEncoded { i2d_X509(x509, $0) }
    }

    /// Appends the attributes of `name` to an X509_NAME in the order C, O, OU, CN.
    private static func add(_ name: DistinguishedName, to x509Name: OpaquePointer?) throws(CryptoError) {
        let attributes: [(field: String, value: String?)] = [
            ("C", name.country),
            ("O", name.organization),
            ("OU", name.organizationalUnit),
            ("CN", name.commonName),
        ]
        for (field, value) in attributes {
            guard let value else {
                continue
            }
            let bytes = Array(value.utf8)
            // OpenSSL applies each attribute's ASN.1 string type and size bounds here (C: PrintableString of 2).
            guard X509_NAME_add_entry_by_txt(x509Name, field, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1
            else {
                throw .rejected(.invalidInput, "name attribute \(field) rejected")
            }
        }
    }

    /// basicConstraints, and for a CA the keyUsage a certificate signer needs.
    private static func addBasicConstraintsAndKeyUsage(isCA: Bool, to x509: OpaquePointer) throws(CryptoError) {
        let basicConstraints = try OpenSSLObject(
            BASIC_CONSTRAINTS_new(),
            freedBy: BASIC_CONSTRAINTS_free,
            creator: "BASIC_CONSTRAINTS_new"
        )
        // DER's BOOLEAN TRUE; FALSE is the DEFAULT and so leaves an empty SEQUENCE.
        basicConstraints.pointer.pointee.ca = isCA ? 0xFF : 0
        // RFC 5280 §4.2.1.9: critical in a CA; WebAuthn §8.2.1 asks for CA:FALSE in a leaf.
        try addExtension(NID_basic_constraints, basicConstraints.pointer, critical: isCA, to: x509)
        guard isCA else {
            return
        }
        let keyUsage = try OpenSSLObject(
            ASN1_BIT_STRING_new(),
            freedBy: ASN1_BIT_STRING_free,
            creator: "ASN1_BIT_STRING_new"
        )
        // KeyUsage bits (RFC 5280 §4.2.1.3): keyCertSign (5), cRLSign (6).
        guard ASN1_BIT_STRING_set_bit(keyUsage.pointer, 5, 1) == 1,
            ASN1_BIT_STRING_set_bit(keyUsage.pointer, 6, 1) == 1
        else {
            throw .openSSL("ASN1_BIT_STRING_set_bit")
        }
        try addExtension(NID_key_usage, keyUsage.pointer, critical: true, to: x509)
    }

    /// subjectKeyIdentifier and authorityKeyIdentifier (keyIdentifier only), RFC 5280 §4.2.1.1–2.
    private static func addKeyIdentifiers(
        subjectPublicKey: P256PublicKey,
        issuerPublicKey: P256PublicKey,
        to x509: OpaquePointer
    ) throws(CryptoError) {
        let subjectKeyIdentifier = try octetString(keyIdentifier(of: subjectPublicKey))
        try addExtension(NID_subject_key_identifier, subjectKeyIdentifier.pointer, critical: false, to: x509)

        let authorityKeyIdentifier = try OpenSSLObject(
            AUTHORITY_KEYID_new(),
            freedBy: AUTHORITY_KEYID_free,
            creator: "AUTHORITY_KEYID_new"
        )
        let issuerKeyIdentifier = try keyIdentifier(of: issuerPublicKey)
        guard let keyid = ASN1_OCTET_STRING_new() else {
            throw .openSSL("ASN1_OCTET_STRING_new")
        }
        // From here authorityKeyIdentifier owns keyid: AUTHORITY_KEYID_free frees it.
        authorityKeyIdentifier.pointer.pointee.keyid = keyid
        guard ASN1_OCTET_STRING_set(keyid, issuerKeyIdentifier, Int32(issuerKeyIdentifier.count)) == 1 else {
            throw .openSSL("ASN1_OCTET_STRING_set(keyid)")
        }
        try addExtension(NID_authority_key_identifier, authorityKeyIdentifier.pointer, critical: false, to: x509)
    }

    /// Adds an extension OpenSSL knows by NID, DER-encoding `value`.
    private static func addExtension(
        _ nid: Int32,
        _ value: UnsafeMutableRawPointer,
        critical: Bool,
        to x509: OpaquePointer
    ) throws(CryptoError) {
        guard X509_add1_ext_i2d(x509, nid, value, critical ? 1 : 0, UInt(X509V3_ADD_DEFAULT)) == 1 else {
            throw .openSSL("X509_add1_ext_i2d(\(nid))")
        }
    }

    /// Adds id-fido-gen-ce-aaguid: extnValue = OCTET STRING { OCTET STRING (16 bytes) }.
    private static func addAAGUIDExtension(_ aaguid: [UInt8], to x509: OpaquePointer) throws(CryptoError) {
        let inner = try octetString(aaguid)
        let outer = try octetString(derEncoded { i2d_ASN1_OCTET_STRING(inner.pointer, $0) })
        // Numeric form only (the 1): the OID has no OpenSSL short name.
        let oid = try OpenSSLObject(
            OBJ_txt2obj(cString(aaguidExtensionOID), 1),
            freedBy: ASN1_OBJECT_free,
            creator: "OBJ_txt2obj"
        )
        let `extension` = try OpenSSLObject(
            X509_EXTENSION_create_by_OBJ(nil, oid.pointer, 0, outer.pointer),
            freedBy: X509_EXTENSION_free,
            creator: "X509_EXTENSION_create_by_OBJ"
        )
        guard X509_add_ext(x509, `extension`.pointer, -1) == 1 else {
            throw .openSSL("X509_add_ext(aaguid)")
        }
    }

    /// An owned ASN1_OCTET_STRING holding `bytes`.
    private static func octetString(_ bytes: [UInt8]) throws(CryptoError) -> OpenSSLObject<
        UnsafeMutablePointer<ASN1_OCTET_STRING>
    > {
        let string = try OpenSSLObject(
            ASN1_OCTET_STRING_new(),
            freedBy: ASN1_OCTET_STRING_free,
            creator: "ASN1_OCTET_STRING_new"
        )
        guard ASN1_OCTET_STRING_set(string.pointer, bytes, Int32(bytes.count)) == 1 else {
            throw .openSSL("ASN1_OCTET_STRING_set")
        }
        return string
    }

    /// RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING's
    /// value, which for an EC key is the uncompressed point.
    private static func keyIdentifier(of key: P256PublicKey) throws(CryptoError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        guard EVP_Digest(key.x963Representation, key.x963Representation.count, &digest, &length, EVP_sha1(), nil) == 1
        else {
            throw .openSSL("EVP_Digest(SHA-1)")
        }
        return digest
    }
}
