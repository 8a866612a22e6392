// previewSign (the drafted WebAuthn sign extension, v4): key generation
// for every algorithm, signatures verified with the public key the
// registration returned (for ARKG, a key the RP side derives from the
// seed), the key's UP/UV flags, and every refusal with its status.

import CBOR
import LatchkeyCrypto
import Testing

@testable import CTAP

private let pin = "1234"

/// A key that offers previewSign.
private func signingKey(seed: String = "preview-sign") -> TestKey {
    TestKey(seed: seed) { $0.enabledExtensions.insert(ExtensionIdentifier.previewSign) }
}

/// What registration returned for a signing key.
private struct GeneratedKey {
    var credentialId: [UInt8]
    var algorithm: Int
    var keyHandle: [UInt8]
    var publicKey: CBORMap
    var inner: MadeCredential

    init(_ response: CBORValue, made: MadeCredential) throws {
        credentialId = made.credentialId
        algorithm = try #require(made.extensions?[text: "previewSign"]).mapValue().required(3, "alg").intValue()
        let unsigned = try response.mapValue().required(6, "unsignedExtensionOutputs").mapValue()
        let encoded = try unsigned.required("previewSign").mapValue().required(7, "attObj").bytesValue()
        inner = try MadeCredential(response: CBORDecoder().decode(encoded), clientDataHash: [])
        keyHandle = inner.credentialId
        publicKey = inner.publicKey
    }
}

extension TestKey {
    fileprivate func generate(
        _ algorithms: [Int],
        flags: Int = 0,
        rk: Bool = false,
        userId: [UInt8] = [1, 2, 3, 4]
    ) async throws -> (CTAPStatus, GeneratedKey?) {
        var create = MakeCredentialBuilder(rk: rk)
        create.userId = userId
        create.extensions = [("previewSign", .intMap([(3, .array(algorithms.map { .int($0) })), (4, .int(flags))]))]
        let (status, body) = try await send(.makeCredential, create.cbor)
        guard status == .ok, let body else { return (status, nil) }
        return (
            status, try GeneratedKey(body, made: MadeCredential(response: body, clientDataHash: create.clientDataHash))
        )
    }

    /// A signature request; `input` entries replace the defaults.
    fileprivate func sign(
        _ key: GeneratedKey,
        tbs: [UInt8],
        args: CBORValue? = nil,
        up: Bool? = false,
        allowList: [[UInt8]]? = nil,
        input: [(Int, CBORValue?)]? = nil,
        verified: Bool = false
    ) async throws -> (CTAPStatus, [UInt8]?) {
        var get = GetAssertionBuilder()
        get.allowList = allowList ?? [key.credentialId]
        get.up = up
        var entries: [(Int, CBORValue?)] = input ?? [(2, .bytes(key.keyHandle)), (6, .bytes(tbs))]
        if let args {
            var encoded: [UInt8] = []
            args.encode(into: &encoded)
            entries.append((7, .bytes(encoded)))
        }
        get.extensions = [("previewSign", CBORValue.intMap(present: entries))]
        if verified {
            get.pinUvAuthParam = try await uvParam(get.clientDataHash)
            get.pinUvAuthProtocol = 2
        }
        let (status, body) = try await send(.getAssertion, get.cbor)
        guard status == .ok, let body else { return (status, nil) }
        let authData = try body.mapValue().required(2, "authData").bytesValue()
        let outputs = try CBORDecoder().decode(Array(authData[37...])).mapValue()
        return (status, try outputs.required("previewSign").mapValue().required(6, "signature").bytesValue())
    }
}

/// The RP side of ARKG: a public key and COSE_Sign_Args from the seed.
private func arkgDerive(_ seed: CBORMap, ctx: [UInt8] = Array("latchkey test".utf8)) throws -> (
    P256PublicKey, CBORValue
) {
    func point(_ key: CBORValue) throws -> P256PublicKey {
        let map = try key.mapValue()
        return try P256PublicKey(x: map.required(-2, "x").bytesValue(), y: map.required(-3, "y").bytesValue())
    }
    let publicSeed = ARKGP256.PublicSeed(
        blinding: try point(seed.required(-1, "pk_bl")),
        kem: try point(seed.required(-2, "pk_kem"))
    )
    let (publicKey, keyHandle) = try ARKGP256.derivePublicKey(publicSeed, ikm: Array(repeating: 7, count: 32), ctx: ctx)
    return (publicKey, .intMap([(3, .int(-65539)), (-1, .bytes(keyHandle)), (-2, .bytes(ctx))]))
}

@Suite("previewSign")
struct PreviewSignTests {
    @Test("getInfo lists previewSign only on a key switched to it")
    func advertised() async throws {
        for (key, offered) in [(TestKey(), false), (signingKey(), true)] {
            let info = try #require(try await key.send(.getInfo).1).mapValue()
            let extensions = try info.required(2, "extensions").textArrayValue("extensions", element: "extension")
            #expect(extensions.contains("previewSign") == offered)
        }
    }

    @Test("a key without previewSign ignores its input", arguments: [false, true])
    func ignoredWhenOff(rk: Bool) async throws {
        var create = MakeCredentialBuilder(rk: rk)
        create.extensions = [("previewSign", .intMap([(3, .array([.int(-9)])), (4, .int(0))]))]
        let (status, body) = try await TestKey().send(.makeCredential, create.cbor)
        #expect(status == .ok)
        let response = try #require(body)
        #expect(try response.mapValue()[int: 6] == nil, "no unsigned outputs")
        #expect(try MadeCredential(response: response, clientDataHash: create.clientDataHash).extensions == nil)
    }

    @Test(
        "signs with a generated key, verified with the public key registration returned",
        arguments: [(-9, false), (-7, false), (-300, false), (-70009, true), (-9, true), (-300, true)]
    )
    func signs(algorithm: Int, rk: Bool) async throws {
        let key = signingKey()
        let (status, generated) = try await key.generate([-18, algorithm, -7], rk: rk)
        #expect(status == .ok)
        let made = try #require(generated)
        #expect(made.algorithm == algorithm, "the first algorithm the key has")
        #expect(made.keyHandle != made.credentialId)
        #expect(made.inner.signCount == 0)
        #expect(made.inner.aaguid == testAAGUID)
        let innerOutputs = try #require(made.inner.extensions?[text: "previewSign"]).mapValue()
        #expect(innerOutputs[int: 3] == .int(algorithm) && innerOutputs[int: 4] == .int(0))
        #expect(try made.publicKey.required(3, "alg").intValue() == (algorithm == -7 ? -7 : -9))

        let message = Array("sign me, not the challenge".utf8)
        let prehashed = algorithm == -300 || algorithm == -70009
        let (signed, signature) = try await key.sign(made, tbs: prehashed ? SHA256.hash(message) : message)
        #expect(signed == .ok)
        #expect(try verify(cose: made.publicKey, signature: try #require(signature), message: message))
    }

    @Test(
        "ESP256-split-ARKG: the seed's derived key verifies, for a stored and a wrapped credential",
        arguments: [false, true]
    )
    func signsARKG(rk: Bool) async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-65539], rk: rk).1)
        #expect(made.algorithm == -65539)
        #expect(made.publicKey[int: 1] == .int(-65537) && made.publicKey[int: 3] == .int(-65700))
        #expect(made.publicKey[int: -3] == .int(-9))
        let (publicKey, args) = try arkgDerive(made.publicKey)
        let message = Array("derived on the RP side".utf8)
        let (status, signature) = try await key.sign(made, tbs: SHA256.hash(message), args: args)
        #expect(status == .ok)
        #expect(publicKey.isValidSignature(try #require(signature), for: message))

        // Unknown COSE_Sign_Args members are ignored.
        var extended = try args.mapValue().entries
        extended.append(CBORMapEntry(key: .int(42), value: .int(1337)))
        #expect(try await key.sign(made, tbs: SHA256.hash(message), args: .map(extended)).0 == .ok)
    }

    @Test("two keys of one algorithm differ, and neither key's signature verifies under the other")
    func distinctKeys() async throws {
        let key = signingKey()
        let first = try #require(try await key.generate([-9]).1)
        let second = try #require(try await key.generate([-9]).1)
        #expect(
            first.keyHandle != second.keyHandle
                && CBORValue.map(first.publicKey.entries) != CBORValue.map(second.publicKey.entries)
        )
        let message = Array("one message".utf8)
        let signature = try #require(try await key.sign(first, tbs: message).1)
        #expect(try verify(cose: first.publicKey, signature: signature, message: message))
        #expect(try !verify(cose: second.publicKey, signature: signature, message: message))
    }

    @Test("generateKey refuses flags other than 0b000, 0b001 and 0b101", arguments: [2, 3, 4, 5, 6, 7, 8, 255])
    func badFlags(flags: Int) async throws {
        let expected: CTAPStatus = flags == 5 ? .ok : .invalidOption
        #expect(try await signingKey().generate([-9], flags: flags).0 == expected)
    }

    @Test("generateKey without an algorithm latchkey has is UNSUPPORTED_ALGORITHM")
    func unsupportedAlgorithm() async throws {
        #expect(try await signingKey().generate([-18]).0 == .unsupportedAlgorithm)
        #expect(try await signingKey().generate([]).0 == .unsupportedAlgorithm)
    }

    @Test("sign without an allowList, keyHandle or tbs is INVALID_OPTION")
    func missingInputs() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-9], rk: true).1)
        let tbs = Array("x".utf8)
        #expect(try await key.sign(made, tbs: tbs, allowList: []).0 == .invalidOption)
        #expect(try await key.sign(made, tbs: tbs, input: [(6, .bytes(tbs))]).0 == .invalidOption)
        #expect(try await key.sign(made, tbs: tbs, input: [(2, .bytes(made.keyHandle))]).0 == .invalidOption)
    }

    @Test("a key handle of another credential, or with its flags changed, is INVALID_CREDENTIAL")
    func foreignHandle() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-9]).1)
        var other = try #require(try await key.generate([-9]).1)
        other.keyHandle = made.keyHandle
        #expect(try await key.sign(other, tbs: [1]).0 == .invalidCredential)
        var relaxed = try #require(try await key.generate([-9], flags: 1).1)
        relaxed.keyHandle[2] = 0
        #expect(try await key.sign(relaxed, tbs: [1]).0 == .invalidCredential)
        relaxed.keyHandle = Array(relaxed.keyHandle.dropLast())
        #expect(try await key.sign(relaxed, tbs: [1]).0 == .invalidCredential)
    }

    @Test("UP required: a silent request is UP_REQUIRED, a touched one signs")
    func upRequired() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-9], flags: 0b001).1)
        #expect(try await key.sign(made, tbs: [1], up: false).0 == .upRequired)
        #expect(try await key.sign(made, tbs: [1], up: nil).0 == .ok)
    }

    @Test("UV required: without user verification PUAT_REQUIRED, with a PIN token it signs")
    func uvRequired() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-9], flags: 0b101).1)
        #expect(try await key.sign(made, tbs: [1], up: true).0 == .pinUvAuthTokenRequired)
        #expect(try await key.setPIN(pin) == .ok)
        let (status, signature) = try await key.sign(made, tbs: [1], up: true, verified: true)
        #expect(status == .ok)
        #expect(try verify(cose: made.publicKey, signature: try #require(signature), message: [1]))
    }

    @Test("a split algorithm's tbs must be a SHA-256 digest")
    func prehashLength() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-300]).1)
        #expect(try await key.sign(made, tbs: Array(repeating: 1, count: 31)).0 == .invalidLength)
        #expect(try await key.sign(made, tbs: Array(repeating: 1, count: 33)).0 == .invalidLength)
    }

    @Test("ARKG: no args is MISSING_PARAMETER; another or no alg, or a bad kh or ctx, INVALID_CREDENTIAL")
    func arkgRefusals() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-65539]).1)
        let tbs = Array(repeating: UInt8(9), count: 32)
        let (_, args) = try arkgDerive(made.publicKey)
        let kh = try args.mapValue().required(-1, "kh").bytesValue()
        let ctx = try args.mapValue().required(-2, "ctx")
        var tampered = kh
        tampered[3] ^= 1
        let cases: [(CBORValue?, CTAPStatus)] = [
            (nil, .missingParameter),
            (.intMap([(-1, .bytes(kh)), (-2, ctx)]), .invalidCredential),
            (.intMap([(3, .int(-65538)), (-1, .bytes(kh)), (-2, ctx)]), .invalidCredential),
            (.intMap([(3, .int(-65539)), (-1, .bytes(tampered)), (-2, ctx)]), .invalidCredential),
            (.intMap([(3, .int(-65539)), (-1, .bytes(kh)), (-2, .bytes([1]))]), .invalidCredential),
            (.intMap([(3, .int(-65539))]), .missingParameter),
            (.text("not a map"), .cborUnexpectedType),
        ]
        for (arguments, expected) in cases {
            #expect(
                try await key.sign(made, tbs: tbs, args: arguments).0 == expected,
                "\(String(describing: arguments))"
            )
        }
    }

    @Test("the signing key follows its credential: after export and import elsewhere it still signs")
    func followsExport() async throws {
        let key = signingKey()
        let made = try #require(try await key.generate([-7], rk: true).1)
        let exported = try await key.authenticator.exportPrivateKey(credentialId: made.credentialId)
        let elsewhere = signingKey(seed: "another key")
        _ = try await elsewhere.authenticator.importCredential(
            ImportedCredential(
                id: made.credentialId,
                rpId: "example.com",
                userId: [1, 2, 3, 4],
                privateKeyPKCS8: exported
            )
        )
        let (status, signature) = try await elsewhere.sign(made, tbs: [5, 6])
        #expect(status == .ok)
        #expect(try verify(cose: made.publicKey, signature: try #require(signature), message: [5, 6]))
    }
}
