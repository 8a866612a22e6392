// X.509 attestation certificates: built by LatchkeyCrypto, then parsed and
// checked field by field with raw OpenSSL calls (d2i_X509, X509_verify,
// X509_verify_cert).

import COpenSSL
import LatchkeyCrypto
import Testing

/// A certificate parsed by OpenSSL, owned for the length of a test.
private final class ParsedCertificate {
    let pointer: OpaquePointer

    init(der: [UInt8]) throws {
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            let certificate = d2i_X509(nil, &cursor, buffer.count)
            // The whole input must be one certificate.
            if certificate != nil, cursor != buffer.baseAddress! + buffer.count {
                X509_free(certificate)
                return nil
            }
            return certificate
        }
        pointer = try #require(parsed)
    }

    deinit {
        X509_free(pointer)
    }

    /// The value of the first `nid` attribute of the subject name, and its ASN.1 string type.
    func subjectAttribute(_ nid: Int32) -> (value: String, type: Int32)? {
        let name = X509_get_subject_name(pointer)
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)) else {
            return nil
        }
        let bytes = UnsafeBufferPointer(start: ASN1_STRING_get0_data(data), count: Int(ASN1_STRING_length(data)))
        return (String(decoding: bytes, as: UTF8.self), ASN1_STRING_type(data))
    }

    /// basicConstraints: (cA, critical), or nil when absent.
    var basicConstraints: (isCA: Bool, isCritical: Bool)? {
        var critical: Int32 = -1
        guard let raw = X509_get_ext_d2i(pointer, NID_basic_constraints, &critical, nil) else {
            return nil
        }
        let constraints = raw.assumingMemoryBound(to: BASIC_CONSTRAINTS.self)
        defer { BASIC_CONSTRAINTS_free(constraints) }
        return (constraints.pointee.ca != 0, critical == 1)
    }

    /// The extnValue (the OCTET STRING's content) of the extension `oid`, and its criticality.
    func extensionValue(oid: String) -> (value: [UInt8], isCritical: Bool)? {
        let object = OBJ_txt2obj(oid, 1)
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(pointer, object, -1)
        guard index >= 0, let ext = X509_get_ext(pointer, index), let data = X509_EXTENSION_get_data(ext) else {
            return nil
        }
        let bytes = UnsafeBufferPointer(start: ASN1_STRING_get0_data(data), count: Int(ASN1_STRING_length(data)))
        return (Array(bytes), X509_EXTENSION_get_critical(ext) == 1)
    }

    /// Whether the signature verifies under the key in `spki` (SubjectPublicKeyInfo DER).
    func isSigned(byKeyIn spki: [UInt8]) -> Bool {
        let key = spki.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        defer { EVP_PKEY_free(key) }
        let verdict = X509_verify(pointer, key)
        ERR_clear_error()
        return verdict == 1
    }
}

@Suite("X.509 attestation certificates")
struct X509CertificateTests {
    static let aaguid = [UInt8](hex: "6c6174636826b6b965792d6b6579a0a1")
    static let now: Int64 = 1_767_225_600  // 2026-01-01T00:00:00Z
    static let caName = DistinguishedName(
        country: "DE",
        organization: "latchkey",
        organizationalUnit: "Authenticator Attestation",
        commonName: "latchkey batch CA"
    )
    static let leafName = DistinguishedName(
        country: "DE",
        organization: "latchkey",
        organizationalUnit: "Authenticator Attestation",
        commonName: "latchkey batch attestation"
    )

    /// A self-signed CA, a leaf it issued with the AAGUID, and their keys.
    private static func makeChain() throws -> (
        caKey: P256PrivateKey, ca: [UInt8], leafKey: P256PrivateKey, leaf: [UInt8]
    ) {
        let caKey = try P256PrivateKey()
        let ca = try X509Certificate.make(
            serialNumber: [0x01],
            issuer: caName,
            subject: caName,
            subjectPublicKey: caKey.publicKey,
            issuerKey: caKey,
            notBefore: now,
            notAfter: now + 20 * 365 * 86_400,
            isCA: true,
            aaguid: nil
        )
        let leafKey = try P256PrivateKey()
        let leaf = try X509Certificate.make(
            serialNumber: [0x8f, 0x00, 0x12],
            issuer: caName,
            subject: leafName,
            subjectPublicKey: leafKey.publicKey,
            issuerKey: caKey,
            notBefore: now,
            notAfter: now + 10 * 365 * 86_400,
            isCA: false,
            aaguid: aaguid
        )
        return (caKey, ca, leafKey, leaf)
    }

    @Test("makes a v3 leaf with the packed-attestation subject, CA:FALSE and the AAGUID extension")
    func leafFields() throws {
        let chain = try Self.makeChain()
        let leaf = try ParsedCertificate(der: chain.leaf)
        // The version field holds v3 as 2.
        #expect(X509_get_version(leaf.pointer) == 2)
        let unit = try #require(leaf.subjectAttribute(NID_organizationalUnitName))
        #expect(unit.value == "Authenticator Attestation")
        #expect(unit.type == V_ASN1_UTF8STRING)
        let country = try #require(leaf.subjectAttribute(NID_countryName))
        #expect(country.value == "DE")
        #expect(country.type == V_ASN1_PRINTABLESTRING)
        #expect(leaf.subjectAttribute(NID_organizationName)?.value == "latchkey")
        #expect(leaf.subjectAttribute(NID_commonName)?.value == "latchkey batch attestation")
        let constraints = try #require(leaf.basicConstraints)
        #expect(!constraints.isCA)
        #expect(!constraints.isCritical)
        let aaguidExtension = try #require(leaf.extensionValue(oid: "1.3.6.1.4.1.45724.1.1.4"))
        #expect(aaguidExtension.value == [0x04, 0x10] + Self.aaguid)
        #expect(!aaguidExtension.isCritical)
        // The certified key is the one we asked for.
        let certifiedKey = try #require(X509_get0_pubkey(leaf.pointer))
        let spki = derOfPublicKey(certifiedKey)
        #expect(spki == chain.leafKey.publicKey.derRepresentation)
    }

    @Test("writes the serial number and validity as given")
    func serialAndValidity() throws {
        let chain = try Self.makeChain()
        let leaf = try ParsedCertificate(der: chain.leaf)
        let serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf.pointer), nil)
        defer { BN_free(serial) }
        var serialBytes = [UInt8](repeating: 0, count: 3)
        #expect(BN_bn2binpad(serial, &serialBytes, 3) == 3)
        #expect(serialBytes == [0x8f, 0x00, 0x12])
        #expect(ASN1_TIME_cmp_time_t(X509_get0_notBefore(leaf.pointer), time_t(Self.now)) == 0)
        #expect(ASN1_TIME_cmp_time_t(X509_get0_notAfter(leaf.pointer), time_t(Self.now + 10 * 365 * 86_400)) == 0)
    }

    @Test("makes a self-signed CA with critical CA:TRUE and keyCertSign, cRLSign")
    func caFields() throws {
        let chain = try Self.makeChain()
        let ca = try ParsedCertificate(der: chain.ca)
        #expect(X509_get_version(ca.pointer) == 2)
        let constraints = try #require(ca.basicConstraints)
        #expect(constraints.isCA)
        #expect(constraints.isCritical)
        #expect(X509_check_ca(ca.pointer) == 1)
        let usage = X509_get_key_usage(ca.pointer)
        #expect(usage & UInt32(KU_KEY_CERT_SIGN) != 0)
        #expect(usage & UInt32(KU_CRL_SIGN) != 0)
        #expect(ca.extensionValue(oid: "1.3.6.1.4.1.45724.1.1.4") == nil)
        #expect(ca.isSigned(byKeyIn: chain.caKey.publicKey.derRepresentation))
    }

    @Test("signs the leaf so that the CA key verifies it and another key does not")
    func leafSignature() throws {
        let chain = try Self.makeChain()
        let leaf = try ParsedCertificate(der: chain.leaf)
        #expect(leaf.isSigned(byKeyIn: chain.caKey.publicKey.derRepresentation))
        #expect(!leaf.isSigned(byKeyIn: chain.leafKey.publicKey.derRepresentation))
        #expect(!leaf.isSigned(byKeyIn: try P256PrivateKey().publicKey.derRepresentation))
    }

    @Test("builds a chain OpenSSL's verifier accepts, with matching key identifiers")
    func chainVerifies() throws {
        let chain = try Self.makeChain()
        let ca = try ParsedCertificate(der: chain.ca)
        let leaf = try ParsedCertificate(der: chain.leaf)
        // X509_check_issued compares names and authorityKeyIdentifier with subjectKeyIdentifier.
        #expect(X509_check_issued(ca.pointer, leaf.pointer) == X509_V_OK)
        #expect(X509_check_issued(ca.pointer, ca.pointer) == X509_V_OK)

        let store = X509_STORE_new()
        defer { X509_STORE_free(store) }
        #expect(X509_STORE_add_cert(store, ca.pointer) == 1)
        let context = X509_STORE_CTX_new()
        defer { X509_STORE_CTX_free(context) }
        #expect(X509_STORE_CTX_init(context, store, leaf.pointer, nil) == 1)
        X509_STORE_CTX_set_time(context, 0, time_t(Self.now + 86_400))
        let verified = X509_verify_cert(context)
        #expect(verified == 1, "X509_verify_cert error \(X509_STORE_CTX_get_error(context))")
        ERR_clear_error()
    }

    @Test("encodes validity after 2049 as GeneralizedTime")
    func generalizedTime() throws {
        let key = try P256PrivateKey()
        let notAfter: Int64 = 4_102_444_800  // 2100-01-01T00:00:00Z
        let der = try X509Certificate.make(
            serialNumber: [0x02],
            issuer: Self.caName,
            subject: Self.caName,
            subjectPublicKey: key.publicKey,
            issuerKey: key,
            notBefore: Self.now,
            notAfter: notAfter,
            isCA: true,
            aaguid: nil
        )
        let certificate = try ParsedCertificate(der: der)
        #expect(ASN1_STRING_type(X509_get0_notAfter(certificate.pointer)) == V_ASN1_GENERALIZEDTIME)
        #expect(ASN1_TIME_cmp_time_t(X509_get0_notAfter(certificate.pointer), time_t(notAfter)) == 0)
    }

    @Test("omits optional name attributes that are nil")
    func minimalName() throws {
        let key = try P256PrivateKey()
        let name = DistinguishedName(commonName: "only a CN")
        let der = try X509Certificate.make(
            serialNumber: [0x03],
            issuer: name,
            subject: name,
            subjectPublicKey: key.publicKey,
            issuerKey: key,
            notBefore: Self.now,
            notAfter: Self.now + 86_400,
            isCA: false,
            aaguid: nil
        )
        let certificate = try ParsedCertificate(der: der)
        #expect(X509_NAME_entry_count(X509_get_subject_name(certificate.pointer)) == 1)
        #expect(certificate.subjectAttribute(NID_commonName)?.value == "only a CN")
    }

    @Test(
        "rejects bad serial numbers, AAGUIDs, names and validity",
        arguments: [
            "empty serial", "zero serial", "21-octet serial", "20 octets with high bit",
            "short AAGUID", "three-letter country", "empty CN", "reversed validity",
        ]
    )
    func rejectsBadInput(problem: String) throws {
        let key = try P256PrivateKey()
        var serial: [UInt8] = [0x01]
        var aaguid: [UInt8]? = Self.aaguid
        var name = Self.leafName
        var notAfter = Self.now + 86_400
        switch problem {
        case "empty serial": serial = []
        case "zero serial": serial = [0x00, 0x00]
        case "21-octet serial": serial = [UInt8](repeating: 0x11, count: 21)
        case "20 octets with high bit": serial = [UInt8](repeating: 0x81, count: 20)
        case "short AAGUID": aaguid = Array(Self.aaguid.prefix(15))
        case "three-letter country": name.country = "DEU"
        case "empty CN": name.commonName = ""
        default: notAfter = Self.now - 1
        }
        #expect(throws: CryptoError(.invalidInput, ""), "\(problem)") {
            try X509Certificate.make(
                serialNumber: serial,
                issuer: Self.caName,
                subject: name,
                subjectPublicKey: key.publicKey,
                issuerKey: key,
                notBefore: Self.now,
                notAfter: notAfter,
                isCA: false,
                aaguid: aaguid
            )
        }
    }

    @Test("accepts a 20-octet serial number whose top bit is clear")
    func longestSerial() throws {
        let key = try P256PrivateKey()
        let serial = [UInt8](repeating: 0x7f, count: 20)
        let der = try X509Certificate.make(
            serialNumber: serial,
            issuer: Self.caName,
            subject: Self.caName,
            subjectPublicKey: key.publicKey,
            issuerKey: key,
            notBefore: Self.now,
            notAfter: Self.now + 86_400,
            isCA: true,
            aaguid: nil
        )
        _ = try ParsedCertificate(der: der)
    }
}

/// SubjectPublicKeyInfo DER of an EVP_PKEY OpenSSL owns.
private func derOfPublicKey(_ key: OpaquePointer) -> [UInt8] {
    let count = i2d_PUBKEY(key, nil)
    var der = [UInt8](repeating: 0, count: Int(max(count, 0)))
    der.withUnsafeMutableBufferPointer { buffer in
        var cursor = buffer.baseAddress
        _ = i2d_PUBKEY(key, &cursor)
    }
    return der
}
