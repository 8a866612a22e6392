// authenticatorMakeCredential: outputs verified with OpenSSL directly.

import CBOR
import Testing

@testable import CTAP

@Suite("makeCredential")
struct MakeCredentialTests {
    @Test("batch packed attestation verifies under the certificate chain", arguments: [-7, -8])
    func batchAttestation(algorithm: Int) async throws {
        let key = TestKey()
        var request = MakeCredentialBuilder()
        request.algorithms = [algorithm]
        let made = try await key.makeCredential(request)
        #expect(made.fmt == "packed")
        #expect(made.flags == 0x41, "UP and AT")
        #expect(made.aaguid == testAAGUID)
        #expect(try made.publicKey.required(3, "alg").intValue() == algorithm)
        #expect(try made.attStmt.required("alg").intValue() == -7, "the batch key is P-256")
        let x5c = try made.attStmt.required("x5c").arrayValue().map { try $0.bytesValue() }
        #expect(x5c.count == 2)
        let signature = try made.attStmt.required("sig").bytesValue()
        #expect(opensslVerify(certificate: x5c[0], signature: signature, message: made.authData + made.clientDataHash))
        #expect(!opensslVerify(certificate: x5c[0], signature: signature, message: made.authData + [0]))
        let checks = opensslCertificateChecks(leaf: x5c[0], issuer: x5c[1])
        #expect(checks.organizationalUnit == "Authenticator Attestation")
        #expect(checks.verifies)
        #expect(key.presence.requests.map(\.operation) == [.makeCredential])
        #expect(key.presence.requests.first?.rpId == "example.com")
    }

    @Test("self attestation is signed by the credential's own key", arguments: [-7, -8])
    func selfAttestation(algorithm: Int) async throws {
        let key = TestKey(attestation: .selfAttestation)
        var request = MakeCredentialBuilder()
        request.algorithms = [algorithm]
        let made = try await key.makeCredential(request)
        #expect(made.fmt == "packed")
        #expect(try made.attStmt.required("alg").intValue() == algorithm)
        #expect(made.attStmt[text: "x5c"] == nil)
        let signature = try made.attStmt.required("sig").bytesValue()
        #expect(opensslVerify(spki: made.publicKeySPKI, signature: signature, message: made.authData + made.clientDataHash))
    }

    @Test("none attestation has an empty statement")
    func noneAttestation() async throws {
        let made = try await TestKey(attestation: .none).makeCredential(MakeCredentialBuilder())
        #expect(made.fmt == "none")
        #expect(made.attStmt.entries.isEmpty)
    }

    @Test("attestationFormatsPreference: the first format the key supports wins (CTAP 2.2)")
    func attestationFormatsPreference() async throws {
        let key = TestKey()
        for (preference, fmt) in [
            (["tpm", "none", "packed"], "none"), (["packed", "none"], "packed"), (["tpm"], "packed"), ([], "packed"),
        ] {
            var request = MakeCredentialBuilder()
            request.attestationFormatsPreference = preference
            #expect(try await key.makeCredential(request).fmt == fmt, "\(preference)")
        }
        var request = MakeCredentialBuilder()
        request.attestationFormatsPreference = ["packed"]
        #expect(try await TestKey(attestation: .none).makeCredential(request).fmt == "none", "a none key has no packed to give")
    }

    @Test("picks the first listed algorithm the key supports")
    func algorithmChoice() async throws {
        var request = MakeCredentialBuilder()
        request.algorithms = [-257, -8, -7]
        let made = try await TestKey().makeCredential(request)
        #expect(try made.publicKey.required(3, "alg").intValue() == -8)
    }

    @Test("skips parameters whose type is not public-key")
    func skipsForeignTypes() async throws {
        var request = MakeCredentialBuilder().cbor
        guard case .map(var entries) = request else { return }
        entries.removeAll { $0.key == 4 }
        entries.append(
            CBORMapEntry(
                key: 4,
                value: .array([
                    .textMap([("alg", -7), ("type", "future-key")]), .textMap([("alg", -8), ("type", "public-key")]),
                ])
            )
        )
        request = .map(entries)
        let (status, body) = try await TestKey().send(.makeCredential, request)
        #expect(status == .ok)
        let made = try MadeCredential(response: try #require(body), clientDataHash: MakeCredentialBuilder().clientDataHash)
        #expect(try made.publicKey.required(3, "alg").intValue() == -8)
    }

    @Test("a discoverable credential is stored with its user; a wrapped one is not")
    func storage() async throws {
        let key = TestKey()
        var request = MakeCredentialBuilder(rk: true)
        let made = try await key.makeCredential(request)
        let stored = try #require(try key.store.credential(id: made.credentialId))
        #expect(stored.userId == [1, 2, 3, 4])
        #expect(stored.userName == "alice")
        #expect(stored.rpId == "example.com")
        request.rk = false
        let wrapped = try await key.makeCredential(request)
        #expect(wrapped.credentialId.count == 64)  // version 2, no credBlob
        #expect(try key.store.credentialCount() == 1)
    }

    @Test("a new discoverable credential for the same user replaces the old one")
    func replacesSameUser() async throws {
        let key = TestKey()
        let request = MakeCredentialBuilder(rk: true)
        let first = try await key.makeCredential(request)
        let second = try await key.makeCredential(request)
        #expect(first.credentialId != second.credentialId)
        #expect(try key.store.credentialCount() == 1)
        #expect(try key.store.credential(id: first.credentialId) == nil)
    }

    @Test("signature counters strictly increase across operations")
    func counters() async throws {
        let key = TestKey()
        let a = try await key.makeCredential(MakeCredentialBuilder())
        let b = try await key.makeCredential(MakeCredentialBuilder())
        #expect(b.signCount > a.signCount)
    }
}
