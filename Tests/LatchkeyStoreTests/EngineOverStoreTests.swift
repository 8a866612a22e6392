// The store as the engine sees it: an `any CredentialStore` handed to an
// Authenticator, as latchkeyd and the benchmark use it. Run it in release too
// (`swift test -c release --filter LatchkeyStoreTests`): the benchmark once
// crashed there in `secret(named:)` (a Swift 6.3 optimizer bug in its
// top-level code, not in the store), and this is the same call path.

import CTAP
import LatchkeyStore
import Testing

@Suite("SQLite credential store under the engine")
struct EngineOverStoreTests {
    /// authenticatorMakeCredential (0x01), canonical CBOR:
    /// {1: clientDataHash (32 × 0xab), 2: {"id": "example.com"}, 3: {"id": h'01020304'},
    ///  4: [{"alg": -7, "type": "public-key"}], 7: {"rk": true}}
    static let makeCredential = bytes(
        hex: "01a5" + "015820" + String(repeating: "ab", count: 32)
            + "02a16269646b6578616d706c652e636f6d"
            + "03a16269644401020304"
            + "0481a263616c672664747970656a7075626c69632d6b6579"
            + "07a162726bf5"
    )!

    /// authenticatorGetAssertion (0x02) with no allowList (a discoverable
    /// credential answers): {1: "example.com", 2: clientDataHash (32 × 0xab)}.
    static let getAssertion = bytes(
        hex: "02a2" + "016b6578616d706c652e636f6d" + "025820" + String(repeating: "ab", count: 32)
    )!

    static func authenticator(over store: any CredentialStore) throws -> Authenticator {
        try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: [UInt8](repeating: 0x4c, count: 16), attestation: .none),
            store: store,
            presence: FixedPresence(.approved),
            clock: ManualClock()
        )
    }

    @Test("an Authenticator registers and asserts a discoverable credential, and again after a reopen")
    func registerAndAssertAcrossReopen() async throws {
        let directory = try TemporaryDirectory()
        // First run: the engine creates its wrapping secret in the store.
        do {
            let store = try openStore(directory)
            let key = try Self.authenticator(over: store)
            let registered = await key.handleCBOR(Self.makeCredential)
            #expect(registered.first == CTAPStatus.ok.rawValue)
            let asserted = await key.handleCBOR(Self.getAssertion)
            #expect(asserted.first == CTAPStatus.ok.rawValue)
            let stored = try store.allCredentials()
            #expect(stored.map(\.rpId) == ["example.com"])
            #expect(stored.map(\.userId) == [[1, 2, 3, 4]])
        }
        // Second run: the engine reads the sealed wrapping secret back
        // (`secret(named:)`, where the release benchmark crashed) and the
        // credential still signs.
        let store = try openStore(directory)
        let key = try Self.authenticator(over: store)
        let asserted = await key.handleCBOR(Self.getAssertion)
        #expect(asserted.first == CTAPStatus.ok.rawValue)
        #expect(try store.credentialCount() == 1)
    }

    /// makeCredential as above for the algorithm whose CBOR encoding is
    /// `alg` (hex), for user `user`.
    static func makeCredential(alg: String, user: UInt8) -> [UInt8] {
        bytes(
            hex: "01a5" + "015820" + String(repeating: "ab", count: 32)
                + "02a16269646b6578616d706c652e636f6d"
                + "03a162696444010203" + (user < 16 ? "0" : "") + String(user, radix: 16)
                + "0481a263616c67" + alg + "64747970656a7075626c69632d6b6579"
                + "07a162726bf5"
        )!
    }

    @Test("discoverable credentials of every algorithm survive a reopen: raw keys for ES256 and EdDSA, PKCS#8 for the rest")
    func everyAlgorithmAcrossReopen() async throws {
        // CBOR negative integers: -7 26, -8 27, -9 28, -19 32, -35 3822, -36 3823,
        // -37 3824, -47 382e, -49 3830, -50 3831, -51 3832, -52 3833, -257 390100.
        let encodings: [(COSEAlgorithm, String)] = [
            (.es256, "26"), (.edDSA, "27"), (.esp256, "28"), (.ed25519, "32"), (.es384, "3822"), (.es512, "3823"),
            (.ps256, "3824"), (.es256K, "382e"), (.esp384, "3832"), (.esp512, "3833"), (.rs256, "390100"),
            (.mldsa65, "3830"), (.mldsa87, "3831"),
        ]
        let directory = try TemporaryDirectory()
        do {
            let store = try openStore(directory)
            let key = try Self.authenticator(over: store)
            for (index, (_, alg)) in encodings.enumerated() {
                let registered = await key.handleCBOR(Self.makeCredential(alg: alg, user: UInt8(index)))
                #expect(registered.first == CTAPStatus.ok.rawValue)
            }
        }
        let store = try openStore(directory)
        let stored = try store.allCredentials()
        #expect(Set(stored.map(\.algorithm)) == Set(encodings.map(\.0.rawValue)))
        for credential in stored {
            let algorithm = try #require(COSEAlgorithm(rawValue: credential.algorithm))
            #expect(
                (credential.privateKey.count == 32) == [.es256, .edDSA, .esp256, .ed25519, .mldsa65, .mldsa87].contains(algorithm)
            )
            let key = try CredentialPrivateKey(algorithm: algorithm, storedRepresentation: credential.privateKey)
            #expect(key.algorithm == algorithm)
        }
        let key = try Self.authenticator(over: store)
        let asserted = await key.handleCBOR(Self.getAssertion)
        #expect(asserted.first == CTAPStatus.ok.rawValue)
    }
}
