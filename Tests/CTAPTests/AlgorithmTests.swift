// Every credential algorithm end to end through the engine: register (self
// attestation), assert with a wrapped and with a stored credential, and
// check each signature with the COSE public key through OpenSSL directly.

import CBOR
import LatchkeyCrypto
import Testing

@testable import CTAP

@Suite("Credential algorithms")
struct AlgorithmTests {
    /// The COSE_Key members each algorithm's public key has (kty, crv).
    static func expectShape(_ key: CBORMap, _ algorithm: COSEAlgorithm) throws {
        let kty = try key.required(1, "kty").intValue()
        let crv = kty == 3 || kty == 7 ? nil : try key[int: -1]?.intValue()
        switch algorithm {
        case .es256, .esp256: #expect(kty == 2 && crv == 1)
        case .es384, .esp384: #expect(kty == 2 && crv == 2)
        case .es512, .esp512: #expect(kty == 2 && crv == 3)
        case .es256K: #expect(kty == 2 && crv == 8)
        case .edDSA, .ed25519: #expect(kty == 1 && crv == 6)
        case .rs256, .ps256:
            #expect(kty == 3)
            #expect(try key.required(-1, "n").bytesValue().count == 256)
            #expect(try key.required(-2, "e").bytesValue() == [1, 0, 1])
        case .mldsa65, .mldsa87:
            #expect(kty == 7)
            #expect(try key.required(-1, "pub").bytesValue().count == (algorithm == .mldsa65 ? 1952 : 2592))
        }
    }

    @Test("registers and asserts, wrapped and stored; every signature verifies", arguments: COSEAlgorithm.allCases)
    func registerAndAssert(algorithm: COSEAlgorithm) async throws {
        let key = TestKey(attestation: .selfAttestation, algorithms: [algorithm])
        for discoverable in [false, true] {
            var create = MakeCredentialBuilder()
            create.algorithms = [-65535, algorithm.rawValue]
            create.rk = discoverable
            let made = try await key.makeCredential(create)
            #expect(try made.publicKey.required(3, "alg").intValue() == algorithm.rawValue)
            try Self.expectShape(made.publicKey, algorithm)
            #expect(try made.attStmt.required("alg").intValue() == algorithm.rawValue)
            let attestation = try made.attStmt.required("sig").bytesValue()
            let signed = made.authData + made.clientDataHash
            #expect(try verify(cose: made.publicKey, signature: attestation, message: signed))
            #expect(try !verify(cose: made.publicKey, signature: attestation, message: signed + [0]))

            var get = GetAssertionBuilder()
            if !discoverable { get.allowList = [made.credentialId] }
            let assertion = try Assertion(try await key.getAssertion(get))
            #expect(assertion.credentialId == made.credentialId)
            #expect(
                try verify(cose: made.publicKey, signature: assertion.signature, message: assertion.authData + get.clientDataHash)
            )
        }
    }

    @Test("a key that offers none of the RP's algorithms answers CTAP2_ERR_UNSUPPORTED_ALGORITHM")
    func unsupportedOnly() async throws {
        let key = TestKey(algorithms: [.es256, .edDSA])
        var create = MakeCredentialBuilder()
        create.algorithms = [-257, -37, -35, -36, -47, -48]
        let (status, _) = try await key.send(.makeCredential, create.cbor)
        #expect(status == .unsupportedAlgorithm)
    }

    @Test("picks the RP's first listed algorithm the key offers; getInfo lists the key's order")
    func preference() async throws {
        let key = TestKey(algorithms: COSEAlgorithm.defaultOrder)
        var create = MakeCredentialBuilder()
        create.algorithms = [-65535, -36, -257, -7]
        let made = try await key.makeCredential(create)
        #expect(try made.publicKey.required(3, "alg").intValue() == -36)

        let (status, body) = try await key.send(.getInfo)
        #expect(status == .ok)
        let info = try #require(body).mapValue()
        let offered = try info.required(10, "algorithms").arrayValue().map { try $0.mapValue().required("alg").intValue() }
        #expect(offered == [-7, -8, -35, -257, -36, -37, -47, -9, -51, -52, -19, -49, -50])
    }

    @Test("the same entropy makes the same RSA and P-521 keys (derived from a seed)")
    func deterministic() async throws {
        for algorithm in [COSEAlgorithm.rs256, .es512] {
            var keys: [[CBORMapEntry]] = []
            for _ in 0..<2 {
                var create = MakeCredentialBuilder()
                create.algorithms = [algorithm.rawValue]
                keys.append(try await TestKey(algorithms: [algorithm], seed: "same").makeCredential(create).publicKey.entries)
            }
            #expect(keys[0] == keys[1])
        }
    }

    @Test("stored form: raw 32 bytes for ES256, EdDSA and ML-DSA, PKCS#8 for the others, read back with its algorithm")
    func storedForm() throws {
        for algorithm in COSEAlgorithm.allCases {
            let key = try CredentialPrivateKey.generate(algorithm, entropy: DeterministicEntropy(seed: [3]))
            let stored = key.storedRepresentation
            #expect((stored.count == 32) == [.es256, .esp256, .edDSA, .ed25519, .mldsa65, .mldsa87].contains(algorithm))
            let read = try CredentialPrivateKey(algorithm: algorithm, storedRepresentation: stored)
            #expect(read.algorithm == algorithm)
            #expect(read.publicCOSEKey == key.publicCOSEKey)
        }
        let rsa = try CredentialPrivateKey.generate(.rs256, entropy: DeterministicEntropy(seed: [3]))
        #expect(throws: CryptoError(.invalidKey, "")) {
            try CredentialPrivateKey(algorithm: .es384, storedRepresentation: rsa.storedRepresentation)
        }
    }

    @Test("imports: PKCS#8 names the algorithm; a derived-key algorithm is discoverable only")
    func imports() async throws {
        let key = TestKey(algorithms: COSEAlgorithm.defaultOrder)
        for algorithm in [COSEAlgorithm.es384, .es512, .es256K, .rs256, .ps256] {
            let privateKey = try CredentialPrivateKey.generate(algorithm, entropy: DeterministicEntropy(seed: [5]))
            #expect(try CredentialPrivateKey(pkcs8: privateKey.pkcs8Representation).algorithm == algorithm)
            var imported = ImportedCredential(
                id: Array("imported \(algorithm.name)".utf8), rpId: "\(algorithm.name).example", userId: [1],
                userName: "seed", userDisplayName: "Seed", privateKeyPKCS8: privateKey.pkcs8Representation, signCount: 0
            )
            imported.discoverable = false
            let refused = await #expect(throws: AdministrationError.self) {
                try await key.authenticator.importCredential(imported)
            }
            #expect(refused?.code == .invalidParameter)
            imported.discoverable = true
            #expect(try await key.authenticator.importCredential(imported) == imported.id)
            var get = GetAssertionBuilder()
            get.rpId = imported.rpId
            let assertion = try Assertion(try await key.getAssertion(get))
            let spki = try spki(cose: try privateKey.publicCOSEKey.mapValue())
            #expect(
                opensslVerify(
                    spki: spki, signature: assertion.signature, message: assertion.authData + get.clientDataHash,
                    pss: algorithm == .ps256
                )
            )
            #expect(try await key.authenticator.exportPrivateKey(credentialId: imported.id) == privateKey.pkcs8Representation)
        }
    }

    @Test("ML-DSA: PKCS#8 in RFC 9881's seed form round-trips, and a seeded key may be non-discoverable")
    func mldsaImports() async throws {
        let key = TestKey(algorithms: COSEAlgorithm.defaultOrder)
        for algorithm in [COSEAlgorithm.mldsa65, .mldsa87] {
            let privateKey = try CredentialPrivateKey.generate(algorithm, entropy: DeterministicEntropy(seed: [6]))
            let pkcs8 = privateKey.pkcs8Representation
            #expect(pkcs8.count == 54)
            let read = try CredentialPrivateKey(pkcs8: pkcs8)
            #expect(read.algorithm == algorithm)
            #expect(read.publicCOSEKey == privateKey.publicCOSEKey)
            var imported = ImportedCredential(
                id: Array("imported \(algorithm.name)".utf8), rpId: "\(algorithm.name).example", userId: [1],
                userName: "seed", userDisplayName: "Seed", privateKeyPKCS8: pkcs8, signCount: 0
            )
            imported.discoverable = false
            let id = try await key.authenticator.importCredential(imported)
            var get = GetAssertionBuilder()
            get.rpId = imported.rpId
            get.allowList = [id]
            let assertion = try Assertion(try await key.getAssertion(get))
            #expect(
                try verify(
                    cose: try privateKey.publicCOSEKey.mapValue(), signature: assertion.signature,
                    message: assertion.authData + get.clientDataHash
                )
            )
        }
        // The expanded-key form (no seed) is refused, as is a truncated seed form.
        let pkcs8 = try CredentialPrivateKey.generate(.mldsa65, entropy: DeterministicEntropy(seed: [6])).pkcs8Representation
        #expect(throws: CryptoError(.invalidKey, "")) { try CredentialPrivateKey(pkcs8: Array(pkcs8.dropLast())) }
    }
}
