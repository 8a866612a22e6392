// Enterprise attestation (CTAP 2.1 §7.1, §6.1.2 step 9, §6.11.1): absent
// without an enterprise certificate, disabled until authenticatorConfig
// enables it and again after a reset, vendor-facilitated only for the
// configured RP IDs, platform-managed for any, and the statement signed by
// the enterprise certificate with epAtt true.

import CBOR
import Testing

@testable import CTAP

/// An enterprise identity apart from the batch one.
private let enterpriseIdentity: AttestationIdentity = try! AttestationIdentity.generate(
    aaguid: testAAGUID, entropy: DeterministicEntropy(seed: Array("enterprise".utf8)), now: 1_790_000_000,
    commonName: "latchkey enterprise attestation test"
)

extension TestKey {
    /// makeCredential with `enterpriseAttestation` for `rpId`: the status,
    /// and on success the leaf certificate, epAtt, and whether the
    /// signature verifies with that certificate.
    func enterpriseCredential(_ value: Int, rpId: String = "example.com") async throws
        -> (CTAPStatus, leaf: [UInt8]?, epAtt: Bool?, verifies: Bool)
    {
        var create = MakeCredentialBuilder()
        create.rpId = rpId
        create.enterpriseAttestation = value
        let (status, body) = try await send(.makeCredential, create.cbor)
        guard status == .ok else { return (status, nil, nil, false) }
        let map = try #require(body).mapValue()
        let authData = try map.required(2, "authData").bytesValue()
        let statement = try map.required(3, "attStmt").mapValue()
        let leaf = try statement.required("x5c").arrayValue()[0].bytesValue()
        let signature = try statement.required("sig").bytesValue()
        return (
            status, leaf, try map[int: 4]?.boolValue(),
            opensslVerify(certificate: leaf, signature: signature, message: authData + create.clientDataHash)
        )
    }

    /// getInfo's ep option: nil when absent.
    func epOption() async throws -> Bool? {
        try await authenticator.getInfo().options.first { $0.0 == "ep" }?.1
    }
}

@Suite("enterprise attestation")
struct EnterpriseAttestationTests {
    static func capableKey() -> TestKey {
        TestKey {
            $0.enterpriseAttestationIdentity = enterpriseIdentity
            $0.enterpriseAttestationRpIds = ["corp.example"]
        }
    }

    @Test("getInfo: a none key that can attest for an enterprise lists packed too, and subcommand 1")
    func getInfoFormats() async throws {
        let key = TestKey(attestation: .none) { $0.enterpriseAttestationIdentity = enterpriseIdentity }
        let info = try await key.authenticator.getInfo()
        #expect(info.attestationFormats == ["none", "packed"])
        #expect(info.authenticatorConfigCommands == [1, 2, 3])
    }

    @Test("a key without an enterprise certificate: no ep, no subcommand, INVALID_PARAMETER at makeCredential")
    func notCapable() async throws {
        let key = TestKey()
        #expect(try await key.epOption() == nil)
        #expect(try await key.config(0x01) == .invalidSubcommand)
        #expect(try await key.enterpriseCredential(2).0 == .invalidParameter)
    }

    @Test("disabled until enabled: ep false, makeCredential INVALID_PARAMETER; a reset disables it again")
    func enabling() async throws {
        let key = Self.capableKey()
        #expect(try await key.epOption() == false)
        #expect(try await key.enterpriseCredential(2).0 == .invalidParameter)
        #expect(try await key.config(0x01) == .ok)
        #expect(try await key.epOption() == true)
        await key.authenticator.powerCycle()
        #expect(try await key.epOption() == true, "enabled until reset")
        #expect(try await key.enterpriseCredential(2).0 == .ok)
        #expect(try await key.send(.reset).0 == .ok)
        #expect(try await key.epOption() == false)
        #expect(try await key.enterpriseCredential(2).0 == .invalidParameter)
    }

    @Test("with a PIN, enabling takes a token with acfg")
    func enablingNeedsToken() async throws {
        let key = Self.capableKey()
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await key.config(0x01) == .pinUvAuthTokenRequired)
        #expect(try await key.config(0x01, token: try await key.configToken()) == .ok)
        #expect(try await key.epOption() == true)
    }

    @Test("platform-managed for any RP, vendor-facilitated for the configured ones: the enterprise certificate and epAtt")
    func statements() async throws {
        let key = Self.capableKey()
        #expect(try await key.config(0x01) == .ok)
        let batch = sharedIdentity.certificateChain[0]
        let enterprise = enterpriseIdentity.certificateChain[0]

        let platform = try await key.enterpriseCredential(2)
        #expect(platform.0 == .ok && platform.leaf == enterprise && platform.epAtt == true && platform.verifies)
        let vendor = try await key.enterpriseCredential(1, rpId: "corp.example")
        #expect(vendor.0 == .ok && vendor.leaf == enterprise && vendor.epAtt == true && vendor.verifies)
        let unlisted = try await key.enterpriseCredential(1)
        #expect(unlisted.0 == .ok && unlisted.leaf == batch && unlisted.epAtt == nil && unlisted.verifies)
        #expect(try await key.enterpriseCredential(3).0 == .invalidOption)
        #expect(try await key.enterpriseCredential(0).0 == .invalidOption)
    }
}
