// What the engine offers the daemon's policy and CI control plane: built-in
// user verification decided by the presence decider, per-key feature
// switches, credential events, importing and exporting credentials, and the
// raw large-blob array.

import CBOR
import LatchkeyCrypto
import Testing

@testable import CTAP

@Suite("engine support for policy and automation")
struct AutomationSupportTests {
    // MARK: Built-in user verification

    @Test("uv: true needs a key configured with built-in UV; the decider's .verified sets UV")
    func builtInUserVerification() async throws {
        var create = MakeCredentialBuilder()
        create.uv = true
        create.rk = true
        #expect(try await TestKey().send(.makeCredential, create.cbor).0 == .invalidOption)

        let key = TestKey { $0.builtInUserVerification = true }
        let options = try #require(try await key.send(.getInfo).1).mapValue().required(4, "options").mapValue()
        #expect(options[text: "uv"] == true)

        key.presence.enqueue(.verified)
        let made = try await key.makeCredential(create)
        #expect(made.flags & 0x05 == 0x05, "UP and UV")
        #expect(key.presence.requests.count == 1, "one touch does both")
        let request = try #require(key.presence.requests.last)
        #expect(request.userVerification && request.discoverable)
        #expect(request.userId == create.userId && request.userDisplayName == "Alice")

        key.presence.enqueue(.approved)
        #expect(try await key.send(.makeCredential, create.cbor).0 == .uvInvalid, "presence without verification")
        key.presence.enqueue(.denied)
        #expect(try await key.send(.makeCredential, create.cbor).0 == .operationDenied)

        var get = GetAssertionBuilder()
        get.uv = true
        key.presence.enqueue(.verified)
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.flags & 0x05 == 0x05)
        #expect(try #require(assertion.user).entries.count == 1, "one account: the user handle alone, even verified")
        key.presence.enqueue(.approved)
        #expect(try await key.send(.getAssertion, get.cbor).0 == .uvInvalid)
        get.up = false
        key.presence.enqueue(.verified)
        #expect(try Assertion(try await key.getAssertion(get)).flags & 0x05 == 0x04, "up: false, uv: true: UV only")
    }

    @Test("getPinUvAuthTokenUsingUvWithPermissions: a token through built-in UV; getUVRetries", arguments: [1, 2])
    func userVerificationToken(version: Int) async throws {
        let plain = TestKey()
        let platform0 = try await plain.platform(version)
        let request = TestKey.clientPINRequest(
            protocol: version, 6, keyAgreement: platform0.keyAgreement, permissions: 0x02, rpId: "example.com"
        )
        #expect(try await plain.send(.clientPIN, request).0 == .invalidSubcommand)
        #expect(try await plain.send(.clientPIN, TestKey.clientPINRequest(protocol: nil, 7)).0 == .invalidSubcommand)

        let key = TestKey { $0.builtInUserVerification = true }
        let (status, body) = try await key.send(.clientPIN, TestKey.clientPINRequest(protocol: nil, 7))
        #expect(status == .ok)
        #expect(try #require(body).mapValue()[int: 5] == 8, "uvRetries")

        // Made first: its touch would spend the token's ga permission.
        let made = try await key.makeCredential(MakeCredentialBuilder())
        let platform = try await key.platform(version)
        let uvRequest = TestKey.clientPINRequest(
            protocol: version, 6, keyAgreement: platform.keyAgreement, permissions: 0x02, rpId: "example.com"
        )
        key.presence.enqueue(.approved)
        #expect(try await key.send(.clientPIN, uvRequest).0 == .uvInvalid)
        #expect(key.presence.requests.last?.operation == .userVerificationToken)
        key.presence.enqueue(.verified)
        let (granted, tokenBody) = try await key.send(.clientPIN, uvRequest)
        #expect(granted == .ok)
        let token = platform.decrypt(try #require(tokenBody).mapValue().required(2, "token").bytesValue())
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        get.pinUvAuthParam = platform.authenticate(key: token, get.clientDataHash)
        get.pinUvAuthProtocol = version
        #expect(try Assertion(try await key.getAssertion(get)).flags & 0x04 != 0, "UV from the token")
    }

    // MARK: Feature switches

    @Test("residentKeys, largeBlobs and extensions can be switched off; getInfo follows")
    func featureSwitches() async throws {
        let key = TestKey {
            $0.residentKeys = false
            $0.largeBlobs = false
            $0.enabledExtensions = [ExtensionIdentifier.credProtect]
        }
        let info = try #require(try await key.send(.getInfo).1).mapValue()
        let options = try info.required(4, "options").mapValue()
        #expect(options[text: "rk"] == false)
        #expect(options[text: "largeBlobs"] == nil)
        #expect(info[int: 0x0B] == nil)
        #expect(try info.required(2, "extensions").arrayValue() == ["credProtect"])
        #expect(info[int: 0x0F] == nil, "maxCredBlobLength only with credBlob (CTAP 2.1 §6.4)")

        var create = MakeCredentialBuilder(rk: true)
        #expect(try await key.send(.makeCredential, create.cbor).0 == .unsupportedOption)
        #expect(try await key.send(.largeBlobs, .intMap([(1, 16), (3, 0)])).0 == .invalidCommand)
        create.rk = nil
        create.extensions = [("hmac-secret", true), ("credBlob", .bytes([1])), ("credProtect", 2)]
        let made = try await key.makeCredential(create)
        #expect(made.extensions?[text: "hmac-secret"] == nil, "an extension switched off is ignored")
        #expect(made.extensions?[text: "credBlob"] == nil)
        #expect(made.extensions?[text: "credProtect"] == 2)
    }

    @Test("a U2F-only key answers no CTAP2 command but still speaks U2F")
    func u2fOnly() async throws {
        let key = TestKey { $0.ctap2Enabled = false }
        for command in [CTAPCommand.getInfo, .makeCredential, .getAssertion, .clientPIN, .reset] {
            #expect(try await key.sendRaw([command.rawValue]).0 == .invalidCommand)
        }
        #expect(await key.authenticator.handleAPDU(apdu(ins: 0x03)) == Array("U2F_V2".utf8) + [0x90, 0x00])
    }

    // MARK: Events

    @Test("events: created, asserted, updated and deleted, with what the daemon shows")
    func events() async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder(rk: true)
        let made = try await key.makeCredential(create)
        var get = GetAssertionBuilder()
        let assertion = try Assertion(try await key.getAssertion(get))
        create.rk = false
        let wrapped = try await key.makeCredential(create)
        get.allowList = [wrapped.credentialId]
        _ = try await key.getAssertion(get)
        _ = try await key.authenticator.updateUser(credentialId: made.credentialId, name: "bob", displayName: nil)
        #expect(try await key.authenticator.deleteStoredCredential(id: made.credentialId))
        #expect(try await key.authenticator.deleteStoredCredential(id: made.credentialId) == false)

        let events = key.events.all
        #expect(
            events.map(\.kind) == [
                .credentialCreated, .credentialAsserted, .credentialCreated, .credentialAsserted,
                .credentialUpdated, .credentialDeleted,
            ]
        )
        #expect(events[0].credentialId == made.credentialId && events[0].discoverable)
        #expect(events[0].rpId == "example.com" && events[0].userName == "alice" && events[0].origin == "makeCredential")
        #expect(events[1].signCount == assertion.signCount)
        #expect(events[2].credentialId == wrapped.credentialId && !events[2].discoverable)
        #expect(events[3].rpId == "example.com", "a wrapped credential's event names the RP of the request")
        #expect(events[4].userName == "bob")
        #expect(events[5].credentialId == made.credentialId)
    }

    // MARK: Import and export

    @Test("an imported PKCS#8 credential asserts with its own key, above its counter", arguments: [-7, -8])
    func importCredential(algorithm: Int) async throws {
        let key = TestKey()
        let privateKey = try CredentialPrivateKey.generate(
            COSEAlgorithm(rawValue: algorithm)!, entropy: DeterministicEntropy(seed: [9])
        )
        let id = Array("seeded-credential".utf8)
        let imported = ImportedCredential(
            id: id, rpId: "example.com", userId: [7, 7], userName: "seed", userDisplayName: "Seed",
            privateKeyPKCS8: privateKey.pkcs8Representation, signCount: 41
        )
        #expect(try await key.authenticator.importCredential(imported) == id)
        #expect(key.events.all.last?.origin == "import")

        let assertion = try Assertion(try await key.getAssertion(GetAssertionBuilder()))
        #expect(assertion.credentialId == id)
        #expect(assertion.signCount > 41)
        let spki = try spki(cose: try privateKey.publicCOSEKey.mapValue())
        #expect(
            opensslVerify(spki: spki, signature: assertion.signature, message: assertion.authData + Array(repeating: 0xA5, count: 32))
        )
        #expect(try await key.authenticator.exportPrivateKey(credentialId: id) == privateKey.pkcs8Representation)

        // The same ID, or the same account, is refused rather than replaced.
        let again = await #expect(throws: AdministrationError.self) { try await key.authenticator.importCredential(imported) }
        #expect(again?.code == .duplicate)
        var sameUser = imported
        sameUser.id = [1, 2, 3]
        let duplicate = await #expect(throws: AdministrationError.self) {
            try await key.authenticator.importCredential(sameUser)
        }
        #expect(duplicate?.code == .duplicate)
        var garbage = imported
        garbage.id = [4]
        garbage.privateKeyPKCS8 = [0x30, 0x03, 0x02, 0x01, 0x00]
        let bad = await #expect(throws: AdministrationError.self) { try await key.authenticator.importCredential(garbage) }
        #expect(bad?.code == .invalidParameter)
    }

    @Test("a non-discoverable import comes back as a wrapped ID that asserts")
    func importNonDiscoverable() async throws {
        let key = TestKey()
        let privateKey = try CredentialPrivateKey.generate(.es256, entropy: DeterministicEntropy(seed: [3]))
        let id = try await key.authenticator.importCredential(
            ImportedCredential(
                id: [1], rpId: "example.com", userId: [1], privateKeyPKCS8: privateKey.pkcs8Representation,
                signCount: 1000, discoverable: false
            )
        )
        #expect(CredentialWrapper.credentialIdLengths.contains(id.count))
        #expect(try key.store.credentialCount() == 0)
        var get = GetAssertionBuilder()
        get.allowList = [id]
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.signCount > 1000)
        let spki = try spki(cose: try privateKey.publicCOSEKey.mapValue())
        #expect(opensslVerify(spki: spki, signature: assertion.signature, message: assertion.authData + get.clientDataHash))
    }

    // MARK: The large-blob array

    @Test("the raw large-blob array: read, replace with a valid array, refuse a bad hash or size")
    func largeBlobArray() async throws {
        let key = TestKey()
        let initial = try await key.authenticator.largeBlobArray()
        #expect(initial == [0x80] + Array(opensslSHA256([0x80]).prefix(16)))
        let array: [UInt8] = [0x81, 0xA1, 0x01, 0x41, 0x00]
        let serialized = array + Array(opensslSHA256(array).prefix(16))
        try await key.authenticator.replaceLargeBlobArray(serialized)
        #expect(try await key.authenticator.largeBlobArray() == serialized)
        var tampered = serialized
        tampered[tampered.count - 1] ^= 1
        let bad = await #expect(throws: AdministrationError.self) { try await key.authenticator.replaceLargeBlobArray(tampered) }
        #expect(bad?.code == .invalidParameter)
        let huge = [UInt8](repeating: 0x40, count: 5000)
        let full = await #expect(throws: AdministrationError.self) { try await key.authenticator.replaceLargeBlobArray(huge) }
        #expect(full?.code == .full)
        #expect(try await key.authenticator.largeBlobArray() == serialized, "a refused replacement changes nothing")
    }
}

@Suite("built-in UV protects like a PIN")
struct BuiltInUVProtectionTests {
    @Test("a key with built-in UV and no PIN wants a token for authenticatorConfig and large-blob writes")
    func protectedWithoutPIN() async throws {
        let key = TestKey { $0.builtInUserVerification = true }
        #expect(try await key.config(0x03, .intMap([(1, 6)])) == .pinUvAuthTokenRequired)
        let array: [UInt8] = [0x80] + Array(opensslSHA256([0x80]).prefix(16))
        let write = CBORValue.intMap([(2, .bytes(array)), (3, 0), (4, .int(array.count))])
        #expect(try await key.send(.largeBlobs, write).0 == .pinUvAuthTokenRequired)
        // The empty-pinUvAuthParam probe says UV is configured.
        var probe = MakeCredentialBuilder()
        probe.pinUvAuthParam = []
        probe.pinUvAuthProtocol = 2
        #expect(try await key.send(.makeCredential, probe.cbor).0 == .pinInvalid)
        #expect(try await TestKey().send(.makeCredential, probe.cbor).0 == .pinNotSet)
    }
}
