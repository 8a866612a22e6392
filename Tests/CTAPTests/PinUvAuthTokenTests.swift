// makeCredential and getAssertion with a PIN (CTAP 2.1 §6.1.2 steps 1–2, 5,
// 7–8, 11, 13; §6.2.2 steps 1–2, 5–6, 9): the pinUvAuthParam, the token's
// permissions, RP ID, lifetime and single use, the UV flag, and the rules for
// requests without a token once a PIN is set.

import CBOR
import Testing

@testable import CTAP

@Suite("pinUvAuthToken in makeCredential and getAssertion")
struct PinUvAuthTokenTests {
    static let protocols = [1, 2]

    /// A key with PIN "1234" set.
    func keyWithPIN() async throws -> TestKey {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        return key
    }

    /// `Request` (as `edit` leaves it) sent with a pinUvAuthParam over its clientDataHash
    /// from `token`, as `platform` computes it.
    func send<Request: PinUvAuthenticatedRequest>(
        _ key: TestKey,
        _ request: Request,
        token: [UInt8],
        platform: TestPlatform,
        edit: (inout Request) -> Void
    ) async throws -> (CTAPStatus, CBORValue?) {
        var request = request
        edit(&request)
        request.pinUvAuthProtocol = platform.version
        request.pinUvAuthParam = platform.authenticate(key: token, request.clientDataHash)
        return try await key.send(Request.command, request.cbor)
    }

    func makeCredential(
        _ key: TestKey, token: [UInt8], platform: TestPlatform, edit: (inout MakeCredentialBuilder) -> Void = { _ in }
    ) async throws -> (CTAPStatus, CBORValue?) {
        try await send(key, MakeCredentialBuilder(), token: token, platform: platform, edit: edit)
    }

    func getAssertion(
        _ key: TestKey, token: [UInt8], platform: TestPlatform, edit: (inout GetAssertionBuilder) -> Void = { _ in }
    ) async throws -> (CTAPStatus, CBORValue?) {
        try await send(key, GetAssertionBuilder(), token: token, platform: platform, edit: edit)
    }

    @Test("a token makes a discoverable credential with UP and UV, and gets an assertion with UV and the user's names",
          arguments: protocols)
    func endToEnd(version: Int) async throws {
        let key = try await keyWithPIN()
        let (_, mcToken, mcPlatform) = try await key.pinToken("1234", protocol: version, permissions: 0x01)
        let (status, body) = try await makeCredential(key, token: try #require(mcToken), platform: mcPlatform) {
            $0.rk = true
        }
        #expect(status == .ok)
        let made = try MadeCredential(response: try #require(body), clientDataHash: MakeCredentialBuilder().clientDataHash)
        #expect(made.flags == 0x45, "UP, UV and AT")
        let attStmt = made.attStmt
        #expect(
            opensslVerify(
                certificate: try attStmt.required("x5c").arrayValue()[0].bytesValue(),
                signature: try attStmt.required("sig").bytesValue(), message: made.authData + made.clientDataHash
            )
        )

        let (_, gaToken, gaPlatform) = try await key.pinToken("1234", protocol: version, permissions: 0x02)
        let (gaStatus, gaBody) = try await getAssertion(key, token: try #require(gaToken), platform: gaPlatform)
        #expect(gaStatus == .ok)
        let assertion = try Assertion(try #require(gaBody).mapValue())
        #expect(assertion.authData[32] == 0x05, "UP and UV")
        #expect(opensslVerify(spki: made.publicKeySPKI, signature: assertion.signature, message: assertion.authData + GetAssertionBuilder().clientDataHash))
        let user = try #require(assertion.user)
        #expect(try user.required("id").bytesValue() == [1, 2, 3, 4])
        #expect(user.entries.count == 1, "one account: the user handle alone, even verified (§6.2.2)")

        // Without a token: no UV flag and only the user handle.
        let plain = try Assertion(try await key.getAssertion(GetAssertionBuilder()))
        #expect(plain.authData[32] == 0x01)
        #expect(plain.user?[text: "name"] == nil)
        #expect(plain.user?[text: "displayName"] == nil)
    }

    @Test("getNextAssertion keeps the first assertion's UV flag and names")
    func nextAssertionKeepsUV() async throws {
        let key = try await keyWithPIN()
        for (index, name) in ["alice", "bob"].enumerated() {
            let (_, token, platform) = try await key.pinToken("1234", permissions: 0x01)
            #expect(
                try await makeCredential(key, token: try #require(token), platform: platform) {
                    $0.rk = true
                    $0.userId = [UInt8(index)]
                    $0.userName = name
                }.0 == .ok
            )
        }
        let (_, token, platform) = try await key.pinToken("1234", permissions: 0x02)
        let (status, body) = try await getAssertion(key, token: try #require(token), platform: platform)
        #expect(status == .ok)
        let first = try Assertion(try #require(body).mapValue())
        #expect(first.numberOfCredentials == 2)
        let next = try Assertion(try #require(try await key.send(.getNextAssertion).1).mapValue())
        #expect(next.authData[32] == 0x05)
        #expect(Set([try first.user?.required("name").textValue(), try next.user?.required("name").textValue()]) == ["alice", "bob"])
    }

    @Test("the token's permission must cover the command", arguments: protocols)
    func permissionChecked(version: Int) async throws {
        let key = try await keyWithPIN()
        _ = try await key.makeCredential(MakeCredentialBuilder())
        let (_, gaToken, gaPlatform) = try await key.pinToken("1234", protocol: version, permissions: 0x02)
        #expect(try await makeCredential(key, token: try #require(gaToken), platform: gaPlatform).0 == .pinAuthInvalid)
        let (_, mcToken, mcPlatform) = try await key.pinToken("1234", protocol: version, permissions: 0x01)
        var get = GetAssertionBuilder()
        get.allowList = [try await key.makeCredential(MakeCredentialBuilder()).credentialId]
        #expect(
            try await getAssertion(key, token: try #require(mcToken), platform: mcPlatform) { $0 = get }.0
                == .pinAuthInvalid
        )
    }

    @Test("a token bound to one RP ID fails for another with PIN_AUTH_INVALID", arguments: protocols)
    func rpIdBinding(version: Int) async throws {
        let key = try await keyWithPIN()
        let (_, token, platform) = try await key.pinToken("1234", protocol: version, permissions: 0x03, rpId: "example.com")
        let tokenBytes = try #require(token)
        #expect(
            try await makeCredential(key, token: tokenBytes, platform: platform) { $0.rpId = "evil.example" }.0
                == .pinAuthInvalid
        )
        #expect(
            try await getAssertion(key, token: tokenBytes, platform: platform) { $0.rpId = "evil.example" }.0
                == .pinAuthInvalid
        )
        #expect(key.presence.requests.isEmpty, "refused before any touch")
        #expect(try await makeCredential(key, token: tokenBytes, platform: platform).0 == .ok)
    }

    @Test("a getPinToken token binds to the first RP ID it is used for")
    func legacyTokenBindsOnFirstUse() async throws {
        let key = try await keyWithPIN()
        let made = try await key.makeCredential(MakeCredentialBuilder())
        let (_, token, platform) = try await key.pinToken("1234", permissions: nil)
        let tokenBytes = try #require(token)
        // Silent (up=false) assertions leave the token's permissions in place.
        let (status, body) = try await getAssertion(key, token: tokenBytes, platform: platform) {
            $0.allowList = [made.credentialId]
            $0.up = false
        }
        #expect(status == .ok)
        #expect(try Assertion(try #require(body).mapValue()).authData[32] == 0x04, "UV without UP")
        #expect(
            try await getAssertion(key, token: tokenBytes, platform: platform) {
                $0.rpId = "other.example"
                $0.up = false
            }.0 == .pinAuthInvalid
        )
    }

    @Test("a touch spends the token: the next command with it fails", arguments: protocols)
    func singleUse(version: Int) async throws {
        let key = try await keyWithPIN()
        let (_, token, platform) = try await key.pinToken("1234", protocol: version)
        let tokenBytes = try #require(token)
        #expect(try await makeCredential(key, token: tokenBytes, platform: platform).0 == .ok)
        #expect(try await makeCredential(key, token: tokenBytes, platform: platform).0 == .pinAuthInvalid)
        #expect(try await getAssertion(key, token: tokenBytes, platform: platform).0 == .pinAuthInvalid)
    }

    @Test("a token's MAC must be right, for the protocol that issued it")
    func wrongMAC() async throws {
        let key = try await keyWithPIN()
        let (_, token, platform) = try await key.pinToken("1234", protocol: 2)
        let tokenBytes = try #require(token)
        var request = MakeCredentialBuilder()
        request.pinUvAuthProtocol = 2
        var mac = platform.authenticate(key: tokenBytes, request.clientDataHash)
        mac[0] ^= 1
        request.pinUvAuthParam = mac
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinAuthInvalid)
        request.pinUvAuthParam = Array(platform.authenticate(key: tokenBytes, request.clientDataHash).prefix(16))
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinAuthInvalid, "protocol Two MACs are 32 bytes")
        request.pinUvAuthProtocol = 1
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinAuthInvalid, "protocol One has its own token")
        request.pinUvAuthProtocol = 3
        #expect(try await key.send(.makeCredential, request.cbor).0 == .invalidParameter)
        #expect(key.presence.requests.isEmpty)
        #expect(try await makeCredential(key, token: tokenBytes, platform: platform).0 == .ok, "still usable")
    }

    @Test("an unused token expires after 30 s; a used one after 10 minutes")
    func expiry() async throws {
        let key = try await keyWithPIN()
        let made = try await key.makeCredential(MakeCredentialBuilder())
        var (_, token, platform) = try await key.pinToken("1234", permissions: 0x02)
        key.clock.advance(by: 30_001)
        #expect(
            try await getAssertion(key, token: try #require(token), platform: platform) { $0.allowList = [made.credentialId] }.0
                == .pinAuthInvalid
        )

        (_, token, platform) = try await key.pinToken("1234", permissions: 0x02)
        key.clock.advance(by: 29_000)
        let silent: (inout GetAssertionBuilder) -> Void = {
            $0.allowList = [made.credentialId]
            $0.up = false
        }
        #expect(try await getAssertion(key, token: try #require(token), platform: platform, edit: silent).0 == .ok)
        key.clock.advance(by: 60_000)
        #expect(try await getAssertion(key, token: try #require(token), platform: platform, edit: silent).0 == .ok, "used: the 30 s limit is over")
        key.clock.advance(by: 600_000 - 89_000 + 1)
        #expect(try await getAssertion(key, token: try #require(token), platform: platform, edit: silent).0 == .pinAuthInvalid)
    }

    @Test("without a token: a discoverable credential needs one (PUAT_REQUIRED), a non-discoverable one is made without UV")
    func withoutToken() async throws {
        let key = try await keyWithPIN()
        let resident = MakeCredentialBuilder(rk: true)
        #expect(try await key.send(.makeCredential, resident.cbor).0 == .pinUvAuthTokenRequired)
        #expect(key.presence.requests.isEmpty)
        let made = try await key.makeCredential(MakeCredentialBuilder())
        #expect(made.flags == 0x41, "UP and AT, no UV")
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        #expect(try Assertion(try await key.getAssertion(get)).authData[32] == 0x01)
        // Without a PIN, discoverable credentials need nothing.
        #expect(try await TestKey().send(.makeCredential, resident.cbor).0 == .ok)
    }

    @Test("uv=true counts as false next to a pinUvAuthParam, and is refused without one")
    func uvOption() async throws {
        let key = try await keyWithPIN()
        let (_, token, platform) = try await key.pinToken("1234")
        let tokenBytes = try #require(token)
        #expect(try await makeCredential(key, token: tokenBytes, platform: platform) { $0.uv = true }.0 == .ok)
        var request = MakeCredentialBuilder()
        request.uv = true
        #expect(try await key.send(.makeCredential, request.cbor).0 == .invalidOption)
        var get = GetAssertionBuilder()
        get.uv = true
        #expect(try await key.send(.getAssertion, get.cbor).0 == .invalidOption)
    }

    @Test("a pinUvAuthParam on a key without a PIN is PIN_NOT_SET")
    func noPIN() async throws {
        let key = TestKey()
        var request = MakeCredentialBuilder()
        request.pinUvAuthProtocol = 2
        request.pinUvAuthParam = Array(repeating: 1, count: 32)
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinNotSet)
        var get = GetAssertionBuilder()
        get.pinUvAuthProtocol = 1
        get.pinUvAuthParam = Array(repeating: 1, count: 16)
        #expect(try await key.send(.getAssertion, get.cbor).0 == .pinNotSet)
        #expect(key.presence.requests.isEmpty)
    }

    @Test("the touch probe answers PIN_INVALID once a PIN is set")
    func touchProbeWithPIN() async throws {
        let key = try await keyWithPIN()
        for version in Self.protocols {
            var request = MakeCredentialBuilder()
            request.pinUvAuthParam = []
            request.pinUvAuthProtocol = version
            #expect(try await key.send(.makeCredential, request.cbor).0 == .pinInvalid)
            var get = GetAssertionBuilder()
            get.pinUvAuthParam = []
            get.pinUvAuthProtocol = version
            #expect(try await key.send(.getAssertion, get.cbor).0 == .pinInvalid)
        }
        #expect(key.presence.requests.map(\.operation) == Array(repeating: .touchProbe, count: 4))
        #expect(try await key.pinRetries().0 == 8, "a probe is not a PIN attempt")
    }

    @Test("a token from before authenticatorReset is dead")
    func resetKillsToken() async throws {
        let key = try await keyWithPIN()
        let (_, token, platform) = try await key.pinToken("1234")
        #expect(try await key.send(.reset).0 == .ok)
        #expect(try key.store.secret(named: "pin.hash") == nil)
        #expect(try key.store.secret(named: "pin.retries") == nil)
        #expect(try await makeCredential(key, token: try #require(token), platform: platform).0 == .pinNotSet)
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await makeCredential(key, token: try #require(token), platform: platform).0 == .pinAuthInvalid)
    }
}
