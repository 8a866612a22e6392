// The extensions (CTAP 2.1 §12, hmac-secret-mc and thirdPartyPayment from
// CTAP 2.2): credProtect, hmac-secret and hmac-secret-mc, credBlob,
// largeBlobKey, minPinLength and thirdPartyPayment,
// for discoverable and non-discoverable credentials, and their error paths.
// The platform side (key agreement, salt encryption, output decryption) is
// TestPlatform's independent OpenSSL code, not the engine's.

import CBOR
import LatchkeyCrypto
import Testing

@testable import CTAP

/// The extension outputs of an assertion's authData, when ED is set.
private func extensionOutputs(_ authData: [UInt8]) throws -> CBORMap? {
    guard authData[32] & 0x80 != 0 else {
        #expect(authData.count == 37, "no bytes after the counter without ED")
        return nil
    }
    let rest = Array(authData[37...])
    let outputs = try CBORDecoder().decode(rest)
    #expect(outputs.encoded() == rest)
    return try outputs.mapValue()
}

private let pin = "1234"

extension TestKey {
    /// A fresh token's pinUvAuthParam over `clientDataHash` (a token's UV is
    /// spent by each touch, so every verified operation takes a new one).
    func uvParam(_ clientDataHash: [UInt8], protocol version: Int = 2, permissions: Int = 0x03) async throws -> [UInt8] {
        let (status, token, platform) = try await pinToken(pin, protocol: version, permissions: permissions)
        try #require(status == .ok)
        return platform.authenticate(key: try #require(token), clientDataHash)
    }

    /// hmac-secret inputs for `salts` with a fresh platform session.
    func hmacSecretInput(_ salts: [UInt8], protocol version: Int) async throws -> (CBORValue, TestPlatform) {
        let platform = try await platform(version)
        let saltEnc = platform.encrypt(salts)
        let input = CBORValue.intMap([
            (1, platform.keyAgreement), (2, .bytes(saltEnc)), (3, .bytes(platform.authenticate(saltEnc))),
            (4, .int(version)),
        ])
        return (input, platform)
    }

    /// hmac-secret's decrypted output for one assertion with `credentialId`.
    func hmacSecret(
        _ credentialId: [UInt8],
        salts: [UInt8],
        protocol version: Int,
        userVerified: Bool = false
    ) async throws -> [UInt8]? {
        let (input, platform) = try await hmacSecretInput(salts, protocol: version)
        var get = GetAssertionBuilder()
        get.allowList = [credentialId]
        get.extensions = [("hmac-secret", input)]
        if userVerified {
            get.pinUvAuthParam = try await uvParam(get.clientDataHash, protocol: version)
            get.pinUvAuthProtocol = version
        }
        let assertion = try Assertion(try await getAssertion(get))
        guard let output = try extensionOutputs(assertion.authData)?[text: "hmac-secret"] else { return nil }
        return platform.decrypt(try output.bytesValue())
    }
}

@Suite("extensions")
struct ExtensionsTests {
    // MARK: credProtect

    @Test("credProtect: the level is echoed, kept, and reported by credentialManagement", arguments: [1, 2, 3])
    func credProtectEchoed(level: Int) async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder(rk: true)
        create.extensions = [("credProtect", .int(level))]
        let made = try await key.makeCredential(create)
        #expect(made.flags & 0x80 != 0, "ED set")
        #expect(made.extensions?[text: "credProtect"] == .int(level))
        #expect(try key.store.credential(id: made.credentialId)?.credProtect == UInt8(level))
        create.rk = false
        let wrapped = try await key.makeCredential(create)
        #expect(wrapped.extensions?[text: "credProtect"] == .int(level))
    }

    @Test("credProtect: levels outside 1...3 and non-integers are refused")
    func credProtectInvalid() async throws {
        let key = TestKey()
        for value: CBORValue in [0, 4, "high", -1] {
            var create = MakeCredentialBuilder()
            create.extensions = [("credProtect", value)]
            #expect(try await key.send(.makeCredential, create.cbor).0 == .cborUnexpectedType)
        }
        #expect(key.presence.requests.isEmpty, "refused before any touch")
    }

    @Test("credProtect 2: a discoverable credential is hidden from unverified discovery, usable by ID")
    func credProtectLevel2() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder(rk: true)
        create.extensions = [("credProtect", 2)]
        let protected = try await key.makeCredential(create)
        create.userId = [9, 9]
        create.extensions = []
        let open = try await key.makeCredential(create)

        let discovered = try Assertion(try await key.getAssertion(GetAssertionBuilder()))
        #expect(discovered.credentialId == open.credentialId)
        #expect(discovered.numberOfCredentials == nil, "the protected one is not counted")

        var listed = GetAssertionBuilder()
        listed.allowList = [protected.credentialId]
        #expect(try Assertion(try await key.getAssertion(listed)).credentialId == protected.credentialId)

        // With user verification both are found.
        #expect(try await key.setPIN(pin) == .ok)
        var verified = GetAssertionBuilder()
        verified.pinUvAuthParam = try await key.uvParam(verified.clientDataHash)
        verified.pinUvAuthProtocol = 2
        let first = try Assertion(try await key.getAssertion(verified))
        #expect(first.numberOfCredentials == 2)
    }

    @Test("credProtect 3: unusable without user verification, by ID or by discovery, and over U2F")
    func credProtectLevel3() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.extensions = [("credProtect", 3)]
        let wrapped = try await key.makeCredential(create)
        create.rk = true
        let stored = try await key.makeCredential(create)

        for id in [wrapped.credentialId, stored.credentialId] {
            var get = GetAssertionBuilder()
            get.allowList = [id]
            #expect(try await key.send(.getAssertion, get.cbor).0 == .noCredentials)
        }
        #expect(try await key.send(.getAssertion, GetAssertionBuilder().cbor).0 == .noCredentials)

        // U2F AUTHENTICATE cannot verify the user: the handle is not ours.
        let application = SHA256.hash(Array("example.com".utf8))
        let challenge = [UInt8](repeating: 0x11, count: 32)
        let data = challenge + application + [UInt8(wrapped.credentialId.count)] + wrapped.credentialId
        #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x03, data: data))) == 0x6A80)

        // excludeList: without UV a level-3 credential is invisible, so the
        // new credential is made; with UV it is excluded.
        var exclude = MakeCredentialBuilder()
        exclude.userId = [5]
        exclude.excludeList = [wrapped.credentialId]
        #expect(try await key.send(.makeCredential, exclude.cbor).0 == .ok)
        #expect(try await key.setPIN(pin) == .ok)
        exclude.pinUvAuthParam = try await key.uvParam(exclude.clientDataHash)
        exclude.pinUvAuthProtocol = 2
        #expect(try await key.send(.makeCredential, exclude.cbor).0 == .credentialExcluded)

        for id in [wrapped.credentialId, stored.credentialId] {
            var get = GetAssertionBuilder()
            get.allowList = [id]
            get.pinUvAuthParam = try await key.uvParam(get.clientDataHash)
            get.pinUvAuthProtocol = 2
            let assertion = try Assertion(try await key.getAssertion(get))
            #expect(assertion.credentialId == id)
            #expect(assertion.flags & 0x04 != 0, "UV")
        }
    }

    // MARK: hmac-secret

    @Test("hmac-secret: outputs are stable per credential, salt and UV state", arguments: [1, 2])
    func hmacSecret(version: Int) async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.extensions = [("hmac-secret", true)]
        let wrapped = try await key.makeCredential(create)
        #expect(wrapped.extensions?[text: "hmac-secret"] == true)
        create.rk = true
        let stored = try await key.makeCredential(create)
        #expect(stored.extensions?[text: "hmac-secret"] == true)
        #expect(try key.store.credential(id: stored.credentialId)?.credRandom?.count == 64)

        let salt1 = [UInt8](repeating: 0x01, count: 32)
        let salt2 = [UInt8](repeating: 0x02, count: 32)
        for id in [wrapped.credentialId, stored.credentialId] {
            let one = try #require(try await key.hmacSecret(id, salts: salt1, protocol: version))
            #expect(one.count == 32)
            #expect(try await key.hmacSecret(id, salts: salt1, protocol: version) == one, "same salt, same output")
            let two = try #require(try await key.hmacSecret(id, salts: salt1 + salt2, protocol: version))
            #expect(two.count == 64)
            #expect(Array(two.prefix(32)) == one)
            #expect(Array(two.suffix(32)) == (try await key.hmacSecret(id, salts: salt2, protocol: version)))
            #expect(Array(two.suffix(32)) != one)
        }
        let otherIds = try #require(try await key.hmacSecret(wrapped.credentialId, salts: salt1, protocol: version))
        let storedOut = try #require(try await key.hmacSecret(stored.credentialId, salts: salt1, protocol: version))
        #expect(otherIds != storedOut, "each credential has its own CredRandom")
        // The output is HMAC-SHA-256(CredRandom, salt) (§12.5), computed here by
        // OpenSSL from the stored CredRandom: its second half serves without UV.
        let credRandom = try #require(try key.store.credential(id: stored.credentialId)?.credRandom)
        #expect(storedOut == opensslHMAC(key: Array(credRandom.suffix(32)), salt1))

        // With user verification the other CredRandom answers.
        #expect(try await key.setPIN(pin) == .ok)
        for id in [wrapped.credentialId, stored.credentialId] {
            let plain = try await key.hmacSecret(id, salts: salt1, protocol: version)
            let verified = try await key.hmacSecret(id, salts: salt1, protocol: version, userVerified: true)
            #expect(verified != nil && plain != nil && verified != plain)
            if id == stored.credentialId {
                #expect(verified == opensslHMAC(key: Array(credRandom.prefix(32)), salt1), "the first half with UV")
            }
            #expect(try await key.hmacSecret(id, salts: salt1, protocol: version, userVerified: true) == verified)
        }
    }

    @Test("hmac-secret: a credential made without it answers without the extension")
    func hmacSecretAbsent() async throws {
        let key = TestKey()
        let made = try await key.makeCredential(MakeCredentialBuilder())
        #expect(made.extensions == nil)
        #expect(try await key.hmacSecret(made.credentialId, salts: Array(repeating: 1, count: 32), protocol: 2) == nil)
    }

    @Test("hmac-secret: bad inputs are refused before the touch")
    func hmacSecretErrors() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.extensions = [("hmac-secret", true)]
        let made = try await key.makeCredential(create)
        let touches = key.presence.requests.count
        let salt = [UInt8](repeating: 0x01, count: 32)

        func send(_ input: CBORValue, up: Bool? = nil) async throws -> CTAPStatus {
            var get = GetAssertionBuilder()
            get.allowList = [made.credentialId]
            get.up = up
            get.extensions = [("hmac-secret", input)]
            return try await key.send(.getAssertion, get.cbor).0
        }
        let (good, platform) = try await key.hmacSecretInput(salt, protocol: 2)
        let saltEnc = try good.mapValue().required(2, "saltEnc").bytesValue()
        var badAuth = platform.authenticate(saltEnc)
        badAuth[0] ^= 1
        #expect(try await send(good.replacing(3, .bytes(badAuth))) == .pinAuthInvalid)
        let shortEnc = platform.encrypt(Array(salt.prefix(16)))
        let short = good.replacing(2, .bytes(shortEnc)).replacing(3, .bytes(platform.authenticate(shortEnc)))
        #expect(try await send(short) == .invalidLength)
        #expect(try await send(good.replacing(4, 3)) == .invalidParameter, "protocol 3")
        let offCurve = CBORValue.intMap([(1, 2), (3, -25), (-1, 1), (-2, .bytes(salt)), (-3, .bytes(salt))])
        #expect(try await send(good.replacing(1, offCurve)) == .invalidParameter)
        #expect(try await send(good.replacing(2, nil)) == .missingParameter)
        #expect(try await send(good.replacing(3, .text("x"))) == .cborUnexpectedType)
        #expect(try await send(true) == .cborUnexpectedType)
        #expect(try await send(good, up: false) == .unsupportedOption, "hmac-secret needs a touch")
        #expect(key.presence.requests.count == touches)
        #expect(try await send(good) == .ok)
    }

    @Test("hmac-secret-mc: makeCredential evaluates the salts as a later getAssertion does", arguments: [1, 2])
    func hmacSecretMakeCredential(version: Int) async throws {
        let key = TestKey()
        let salts = [UInt8](repeating: 0x42, count: 64)
        for rk in [false, true] {
            let (input, platform) = try await key.hmacSecretInput(salts, protocol: version)
            var create = MakeCredentialBuilder()
            create.rk = rk
            create.extensions = [("hmac-secret", true), ("hmac-secret-mc", input)]
            let made = try await key.makeCredential(create)
            let output = platform.decrypt(try #require(made.extensions?[text: "hmac-secret-mc"]).bytesValue())
            #expect(output.count == 64)
            #expect(try await key.hmacSecret(made.credentialId, salts: salts, protocol: version) == output)
        }
        // Without hmac-secret: true there is no CredRandom to evaluate.
        let (input, _) = try await key.hmacSecretInput(salts, protocol: version)
        var create = MakeCredentialBuilder()
        create.extensions = [("hmac-secret-mc", input)]
        #expect(try await key.makeCredential(create).extensions == nil)
    }

    // MARK: credBlob

    @Test("credBlob: kept up to 32 bytes and returned on request; longer is refused, not cut")
    func credBlob() async throws {
        let key = TestKey()
        for rk in [false, true] {
            for blob in [[UInt8](), Array("thirty-two bytes of RP data ....".utf8), Array(repeating: 7, count: 33)] {
                var create = MakeCredentialBuilder()
                create.rk = rk
                create.userId = [UInt8(blob.count)]
                create.extensions = [("credBlob", .bytes(blob))]
                let made = try await key.makeCredential(create)
                #expect(made.extensions?[text: "credBlob"] == .boolean(blob.count <= 32))
                var get = GetAssertionBuilder()
                get.allowList = [made.credentialId]
                get.extensions = [("credBlob", true)]
                let assertion = try Assertion(try await key.getAssertion(get))
                let returned = try extensionOutputs(assertion.authData)?[text: "credBlob"]
                #expect(returned == .bytes(blob.count <= 32 ? blob : []))
                get.extensions = []
                #expect(try extensionOutputs(try Assertion(try await key.getAssertion(get)).authData) == nil)
            }
        }
        #expect(try await key.authenticator.getInfo().maxCredBlobLength == 32)
    }

    // MARK: largeBlobKey

    @Test("largeBlobKey: a discoverable credential gets a key, returned on request and by credentialManagement")
    func largeBlobKey() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder(rk: true)
        create.extensions = [("largeBlobKey", true)]
        let made = try await key.makeCredential(create)
        let largeBlobKey = try #require(made.largeBlobKey)
        #expect(largeBlobKey.count == 32)
        #expect(made.extensions == nil, "largeBlobKey is not an authData output")
        #expect(try key.store.credential(id: made.credentialId)?.largeBlobKey == largeBlobKey)

        var get = GetAssertionBuilder()
        get.extensions = [("largeBlobKey", true)]
        #expect(try await key.getAssertion(get)[int: 7] == .bytes(largeBlobKey))
        get.extensions = []
        #expect(try await key.getAssertion(get)[int: 7] == nil)

        // credentialManagement enumerateCredentialsBegin carries it (0x0B).
        #expect(try await key.setPIN(pin) == .ok)
        let (status, token, platform) = try await key.pinToken(pin, permissions: 0x04, rpId: nil)
        try #require(status == .ok)
        let params = CBORValue.intMap([(1, .bytes(SHA256.hash(Array("example.com".utf8))))])
        let message = [0x04] + params.encoded()
        let request = CBORValue.intMap([
            (1, 0x04), (2, params), (3, 2), (4, .bytes(platform.authenticate(key: try #require(token), message))),
        ])
        let (cmStatus, body) = try await key.send(.credentialManagement, request)
        #expect(cmStatus == .ok)
        #expect(try #require(body).mapValue()[int: 0x0B] == .bytes(largeBlobKey))
    }

    @Test("largeBlobKey: false is an invalid option; a non-discoverable credential gets no key")
    func largeBlobKeyErrors() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.extensions = [("largeBlobKey", false)]
        #expect(try await key.send(.makeCredential, create.cbor).0 == .invalidOption)
        create.extensions = [("largeBlobKey", true)]
        let made = try await key.makeCredential(create)
        #expect(made.largeBlobKey == nil)
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        get.extensions = [("largeBlobKey", true)]
        #expect(try await key.getAssertion(get)[int: 7] == nil)
        get.extensions = [("largeBlobKey", false)]
        #expect(try await key.send(.getAssertion, get.cbor).0 == .invalidOption)
    }

    // MARK: minPinLength

    @Test("minPinLength: only RPs setMinPINLength named learn the minimum; reset forgets them")
    func minPinLength() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.extensions = [("minPinLength", true)]
        #expect(try await key.makeCredential(create).extensions == nil, "example.com is not permitted yet")
        #expect(try await key.config(0x03, .intMap([(1, 6), (2, .array(["example.com", "other.example"]))])) == .ok)
        #expect(try await key.makeCredential(create).extensions?[text: "minPinLength"] == 6)
        create.rpId = "third.example"
        #expect(try await key.makeCredential(create).extensions == nil)
        #expect(try await key.send(.reset).0 == .ok)
        create.rpId = "example.com"
        #expect(try await key.makeCredential(create).extensions == nil)
    }

    // MARK: thirdPartyPayment (CTAP 2.2 §12.9)

    @Test(
        "thirdPartyPayment: the flag is kept with both kinds of credential, told at getAssertion and by credentialManagement",
        arguments: [false, true]
    )
    func thirdPartyPayment(discoverable: Bool) async throws {
        let key = TestKey()
        #expect(try await key.authenticator.getInfo().extensions.contains("thirdPartyPayment"))
        var made: [Bool: MadeCredential] = [:]
        for payment in [false, true] {
            var create = MakeCredentialBuilder()
            create.rk = discoverable
            create.userId = [payment ? 1 : 0]
            if payment { create.extensions = [("thirdPartyPayment", true)] }
            made[payment] = try await key.makeCredential(create)
            #expect(made[payment]?.extensions == nil, "no makeCredential output")
        }
        for payment in [false, true] {
            var get = GetAssertionBuilder()
            get.allowList = [try #require(made[payment]).credentialId]
            get.extensions = [("thirdPartyPayment", true)]
            let outputs = try extensionOutputs(try Assertion(try await key.getAssertion(get)).authData)
            #expect(outputs?[text: "thirdPartyPayment"] == .boolean(payment))
            get.extensions = [("thirdPartyPayment", false)]
            #expect(try extensionOutputs(try Assertion(try await key.getAssertion(get)).authData) == nil)
        }
        guard discoverable else { return }
        #expect(try await key.setPIN(pin) == .ok)
        let fixture = CredentialManagementFixture(key: key, made: [])
        let (status, first) = try await fixture.send(0x04, rpIDHashParams("example.com"), token: try await fixture.token())
        #expect(status == .ok)
        let (_, second) = try await fixture.send(0x05, token: nil)
        // Newest first: the payment credential, then the other.
        #expect(first?[int: 0x0C] == true && second?[int: 0x0C] == false)
    }

    @Test("thirdPartyPayment: a key without it ignores the input and leaves it out of getInfo and credentialManagement")
    func thirdPartyPaymentOff() async throws {
        let key = TestKey { _ = $0.enabledExtensions.remove("thirdPartyPayment") }
        let extensions = try await key.authenticator.getInfo().extensions
        #expect(!extensions.contains("thirdPartyPayment"))
        var create = MakeCredentialBuilder(rk: true)
        create.extensions = [("thirdPartyPayment", true)]
        let made = try await key.makeCredential(create)
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        get.extensions = [("thirdPartyPayment", true)]
        #expect(try extensionOutputs(try Assertion(try await key.getAssertion(get)).authData) == nil)
        #expect(try key.store.credential(id: made.credentialId)?.thirdPartyPayment == false)
        #expect(try await key.setPIN(pin) == .ok)
        let fixture = CredentialManagementFixture(key: key, made: [])
        let (status, body) = try await fixture.send(0x04, rpIDHashParams("example.com"), token: try await fixture.token())
        #expect(status == .ok && body?[int: 0x0C] == nil)
    }

    @Test("thirdPartyPayment: an input that is not a boolean is a CBOR type error")
    func thirdPartyPaymentType() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.extensions = [("thirdPartyPayment", 1)]
        #expect(try await key.send(.makeCredential, create.cbor).0 == .cborUnexpectedType)
        var get = GetAssertionBuilder()
        get.extensions = [("thirdPartyPayment", "yes")]
        #expect(try await key.send(.getAssertion, get.cbor).0 == .cborUnexpectedType)
    }

    @Test(
        "an extension the key does not offer is ignored unread: a malformed input for it is no error",
        arguments: ExtensionIdentifier.supported
    )
    func switchedOffExtensionIgnoredUnread(identifier: String) async throws {
        let key = TestKey { $0.enabledExtensions = Set(ExtensionIdentifier.supported).subtracting([identifier]) }
        // A text string is the wrong type for every extension's input.
        let malformed: CBORValue = "not an input"
        var create = MakeCredentialBuilder(rk: true)
        create.extensions = [(identifier, malformed)]
        let made = try await key.makeCredential(create)
        #expect(made.extensions == nil, "nothing is answered for an extension the key does not offer")
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        get.extensions = [(identifier, malformed)]
        #expect(try await key.send(.getAssertion, get.cbor).0 == .ok)

        // Offered, the same input is a CBOR type error (getAssertion reads
        // only the extensions it defines inputs for).
        let offering = TestKey { $0.enabledExtensions = Set(ExtensionIdentifier.supported) }
        #expect(try await offering.send(.makeCredential, create.cbor).0 == .cborUnexpectedType)
        let readByGetAssertion: Set = [
            ExtensionIdentifier.hmacSecret, ExtensionIdentifier.credBlob, ExtensionIdentifier.largeBlobKey,
            ExtensionIdentifier.thirdPartyPayment, ExtensionIdentifier.previewSign,
        ]
        if readByGetAssertion.contains(identifier) {
            #expect(try await offering.send(.getAssertion, get.cbor).0 == .cborUnexpectedType)
        }
    }

    // MARK: Credential IDs

    @Test("a version-1 credential ID (issued before extensions) still asserts")
    func versionOneCredentialId() async throws {
        let key = TestKey()
        let secret = try #require(try key.store.secret(named: "credential-wrapping-secret"))
        let privateKey = try CredentialPrivateKey.generate(.es256, entropy: DeterministicEntropy(seed: [1]))
        let rpIdHash = SHA256.hash(Array("example.com".utf8))
        let nonce = [UInt8](repeating: 0x5A, count: 12)
        let sealed = try AES256GCM.seal(
            [1, 1] + privateKey.seed!, key: secret, nonce: nonce,
            authenticating: Array("latchkey/wrapped-credential/v1".utf8) + rpIdHash
        )
        let id = [0x01] + nonce + sealed
        #expect(id.count == 63)
        var get = GetAssertionBuilder()
        get.allowList = [id]
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.credentialId == id)
        let spki = try spki(cose: try privateKey.publicCOSEKey.mapValue())
        #expect(opensslVerify(spki: spki, signature: assertion.signature, message: assertion.authData + get.clientDataHash))
    }
}

extension CBORValue {
    /// This integer-keyed map with `key` set to `value`, or removed for nil.
    fileprivate func replacing(_ key: Int, _ value: CBORValue?) -> CBORValue {
        guard case .map(let entries) = self else { return self }
        var pairs = entries.filter { $0.key != .int(key) }.map { (try! $0.key.intValue(), $0.value) }
        if let value { pairs.append((key, value)) }
        return .intMap(pairs.sorted { $0.0 < $1.0 })
    }
}
