// authenticatorCredentialManagement (CTAP 2.1 §6.8): every subcommand's
// success and error paths with their exact statuses and order, enumeration
// order and counts, deletes and updates reaching the store, the cm permission
// and the permissions RP ID, with pinUvAuthParam from both PIN protocols.

import CBOR
import Testing

@testable import CTAP

/// A key holding three discoverable credentials, newest last:
/// example.com users 1 and 2, then other.org user 3, with the PIN "1234".
struct CredentialManagementFixture {
    let key: TestKey
    let made: [MadeCredential]

    static let credentials: [(rpId: String, rpName: String?, userId: [UInt8], name: String)] = [
        ("example.com", "Example", [1], "alice"),
        ("example.com", "Example", [2], "bob"),
        ("other.org", nil, [3], "carol"),
    ]

    static func displayName(_ name: String) -> String { name.uppercased() }

    init(key: TestKey, made: [MadeCredential]) {
        self.key = key
        self.made = made
    }

    init(pin: Bool = true) async throws {
        key = TestKey()
        var made: [MadeCredential] = []
        // Made before the PIN, so that no pinUvAuthToken is needed for rk.
        for credential in Self.credentials {
            var request = MakeCredentialBuilder()
            request.rpId = credential.rpId
            request.rpName = credential.rpName
            request.userId = credential.userId
            request.userName = credential.name
            request.displayName = Self.displayName(credential.name)
            request.rk = true
            made.append(try await key.makeCredential(request))
        }
        self.made = made
        if pin { #expect(try await key.setPIN("1234") == .ok) }
    }

    /// A fixture with a PIN and a cm token with `version` for it.
    static func withToken(
        _ version: Int
    ) async throws -> (CredentialManagementFixture, (token: [UInt8], platform: TestPlatform)) {
        let fixture = try await CredentialManagementFixture()
        return (fixture, try await fixture.token(version))
    }

    /// A cm token (or the given permissions) with `version`: its bytes and
    /// the platform that authenticates with it.
    func token(
        _ version: Int = 2,
        permissions: Int = 0x04,
        rpId: String? = nil
    ) async throws -> (token: [UInt8], platform: TestPlatform) {
        let (status, token, platform) = try await key.pinToken(
            "1234", protocol: version, permissions: permissions, rpId: rpId
        )
        try #require(status == .ok)
        return (try #require(token), platform)
    }

    /// `send` that must answer CTAP2_OK with a map: the map.
    func sendOK(
        _ subCommand: Int,
        _ params: CBORValue? = nil,
        token: (token: [UInt8], platform: TestPlatform)?,
        command: CTAPCommand = .credentialManagement,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> CBORMap {
        let (status, body) = try await send(subCommand, params, token: token, command: command)
        #expect(status == .ok, sourceLocation: sourceLocation)
        return try #require(body, sourceLocation: sourceLocation)
    }

    /// Sends subCommand with subCommandParams, authenticated with `token`
    /// over subCommand || subCommandParams unless `auth` is false.
    func send(
        _ subCommand: Int,
        _ params: CBORValue? = nil,
        token: (token: [UInt8], platform: TestPlatform)?,
        command: CTAPCommand = .credentialManagement,
        from origin: RequestOrigin = .solitary
    ) async throws -> (CTAPStatus, CBORMap?) {
        var entries: [(Int, CBORValue)] = [(1, .int(subCommand))]
        if let params { entries.append((2, params)) }
        if let token {
            var message = [UInt8(subCommand)]
            if let params { message += params.encoded() }
            entries.append((3, .int(token.platform.version)))
            entries.append((4, .bytes(token.platform.authenticate(key: token.token, message))))
        }
        let (status, body) = try await key.send(command, .intMap(entries), from: origin)
        return (status, try body?.mapValue())
    }
}

func rpIDHashParams(_ rpId: String) -> CBORValue { .intMap([(1, .bytes(opensslSHA256(Array(rpId.utf8))))]) }

func credentialParams(_ id: [UInt8], user: CBORValue? = nil) -> CBORValue {
    var entries: [(Int, CBORValue)] = [(2, .textMap([("id", .bytes(id)), ("type", "public-key")]))]
    if let user { entries.append((3, user)) }
    return .intMap(entries)
}

@Suite("authenticatorCredentialManagement")
struct CredentialManagementTests {
    static let protocols = [1, 2]

    // MARK: getCredsMetadata

    @Test("getCredsMetadata counts stored and remaining credentials, with either protocol", arguments: protocols)
    func metadata(version: Int) async throws {
        let (fixture, token) = try await CredentialManagementFixture.withToken(version)
        let map = try await fixture.sendOK(0x01, token: token)
        #expect(try map.required(1, "existingResidentCredentialsCount").intValue() == 3)
        #expect(try map.required(2, "maxPossibleRemainingResidentCredentialsCount").intValue() == 997)
        #expect(map.entries.count == 2)
        #expect(fixture.key.presence.requests.count == 3, "only the three makeCredentials asked for a touch")
    }

    @Test("the prototype command 0x41 answers the same", arguments: protocols)
    func prototypeCommand(version: Int) async throws {
        let (fixture, token) = try await CredentialManagementFixture.withToken(version)
        let metadata = try await fixture.sendOK(0x01, token: token, command: .credentialManagementPreview)
        #expect(try metadata.required(1, "existingResidentCredentialsCount").intValue() == 3)
        let rps = try await fixture.sendOK(0x02, token: token, command: .credentialManagementPreview)
        #expect(try rps.required(5, "totalRPs").intValue() == 2)
        #expect(try await fixture.send(0x03, token: nil, command: .credentialManagementPreview).0 == .ok)
    }

    // MARK: enumerateRPs

    @Test("enumerateRPs: each RP once, newest first, totalRPs on the first answer", arguments: protocols)
    func enumerateRPs(version: Int) async throws {
        let (fixture, token) = try await CredentialManagementFixture.withToken(version)
        let firstMap = try await fixture.sendOK(0x02, token: token)
        #expect(try firstMap.required(5, "totalRPs").intValue() == 2)
        let rp = try firstMap.required(3, "rp").mapValue()
        #expect(try rp.required("id").textValue() == "other.org")
        #expect(rp[text: "name"] == nil, "no name was given")
        #expect(try firstMap.required(4, "rpIDHash").bytesValue() == opensslSHA256(Array("other.org".utf8)))

        let nextMap = try await fixture.sendOK(0x03, token: nil)
        #expect(nextMap[int: 5] == nil, "totalRPs only on the first")
        let nextRP = try nextMap.required(3, "rp").mapValue()
        #expect(try nextRP.required("id").textValue() == "example.com")
        #expect(try nextRP.required("name").textValue() == "Example")
        #expect(try nextMap.required(4, "rpIDHash").bytesValue() == opensslSHA256(Array("example.com".utf8)))

        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed, "past the last RP")
    }

    @Test("enumerateRPsBegin without credentials is NO_CREDENTIALS; GetNext then is NOT_ALLOWED")
    func enumerateRPsEmpty() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let fixture = CredentialManagementFixture(key: key, made: [])
        let token = try await fixture.token()
        #expect(try await fixture.send(0x02, token: token).0 == .noCredentials)
        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed)
        let metadata = try await fixture.sendOK(0x01, token: token)
        #expect(try metadata.required(1, "existingResidentCredentialsCount").intValue() == 0)
    }

    // MARK: enumerateCredentials

    @Test("enumerateCredentials: the RP's credentials newest first, with user, key and credProtect", arguments: protocols)
    func enumerateCredentials(version: Int) async throws {
        let (fixture, token) = try await CredentialManagementFixture.withToken(version)
        let firstMap = try await fixture.sendOK(0x04, rpIDHashParams("example.com"), token: token)
        #expect(try firstMap.required(9, "totalCredentials").intValue() == 2)
        let nextMap = try await fixture.sendOK(0x05, token: nil)
        #expect(nextMap[int: 9] == nil, "totalCredentials only on the first")

        for (map, made, userId, name) in [
            (firstMap, fixture.made[1], [UInt8(2)], "bob"), (nextMap, fixture.made[0], [UInt8(1)], "alice"),
        ] {
            let user = try map.required(6, "user").mapValue()
            #expect(try user.required("id").bytesValue() == userId)
            #expect(try user.required("name").textValue() == name)
            #expect(try user.required("displayName").textValue() == CredentialManagementFixture.displayName(name))
            let descriptor = try map.required(7, "credentialID").mapValue()
            #expect(try descriptor.required("id").bytesValue() == made.credentialId)
            #expect(try descriptor.required("type").textValue() == "public-key")
            #expect(try map.required(8, "publicKey").mapValue().entries == made.publicKey.entries)
            #expect(try map.required(10, "credProtect").intValue() == 1)
        }
        #expect(try await fixture.send(0x05, token: nil).0 == .notAllowed, "past the last credential")
    }

    @Test("enumerateCredentialsBegin: parameters first, then NO_CREDENTIALS for an RP without any")
    func enumerateCredentialsErrors() async throws {
        let fixture = try await CredentialManagementFixture()
        let token = try await fixture.token()
        #expect(try await fixture.send(0x04, token: token).0 == .missingParameter, "no subCommandParams")
        #expect(try await fixture.send(0x04, .intMap([]), token: token).0 == .missingParameter, "no rpIDHash")
        #expect(try await fixture.send(0x04, .intMap([]), token: nil).0 == .missingParameter, "before PUAT_REQUIRED")
        #expect(try await fixture.send(0x04, rpIDHashParams("example.com"), token: nil).0 == .pinUvAuthTokenRequired)
        #expect(try await fixture.send(0x04, rpIDHashParams("nobody.net"), token: token).0 == .noCredentials)
        #expect(
            try await fixture.send(0x04, .intMap([(1, "example.com")]), token: token).0 == .cborUnexpectedType,
            "rpIDHash as text"
        )
    }

    @Test("GetNext needs its own Begin just before it")
    func getNextSequence() async throws {
        let fixture = try await CredentialManagementFixture()
        let token = try await fixture.token()
        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed, "no Begin")
        #expect(try await fixture.send(0x05, token: nil).0 == .notAllowed, "no Begin")

        #expect(try await fixture.send(0x02, token: token).0 == .ok)
        #expect(try await fixture.send(0x05, token: nil).0 == .notAllowed, "credentials after an RP Begin")
        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed, "the wrong GetNext ended it")

        #expect(try await fixture.send(0x04, rpIDHashParams("example.com"), token: token).0 == .ok)
        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed, "an RP after a credentials Begin")

        #expect(try await fixture.send(0x04, rpIDHashParams("example.com"), token: token).0 == .ok)
        #expect(try await fixture.key.send(.getInfo).0 == .ok)
        #expect(try await fixture.send(0x05, token: nil).0 == .notAllowed, "another command ended it")

        #expect(try await fixture.send(0x02, token: token).0 == .ok)
        #expect(try await fixture.send(0x01, token: token).0 == .ok)
        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed, "another subcommand ended it")

        #expect(try await fixture.send(0x02, token: token).0 == .ok)
        await fixture.key.authenticator.powerCycle()
        #expect(try await fixture.send(0x03, token: nil).0 == .notAllowed, "a power cycle ended it")
    }

    // MARK: deleteCredential

    @Test("deleteCredential removes the credential from the store and from getAssertion", arguments: protocols)
    func deleteCredential(version: Int) async throws {
        let (fixture, token) = try await CredentialManagementFixture.withToken(version)
        let victim = fixture.made[0].credentialId
        let (status, body) = try await fixture.send(0x06, credentialParams(victim), token: token)
        #expect(status == .ok)
        #expect(body == nil, "the status alone")
        #expect(try fixture.key.store.credential(id: victim) == nil)
        #expect(try fixture.key.store.credentialCount() == 2)

        var assertion = GetAssertionBuilder()
        assertion.allowList = [victim]
        #expect(try await fixture.key.send(.getAssertion, assertion.cbor).0 == .noCredentials)

        let metadata = try await fixture.sendOK(0x01, token: token)
        #expect(try metadata.required(1, "existingResidentCredentialsCount").intValue() == 2)
        let credentials = try await fixture.sendOK(0x04, rpIDHashParams("example.com"), token: token)
        #expect(try credentials.required(9, "totalCredentials").intValue() == 1)

        #expect(try await fixture.send(0x06, credentialParams(victim), token: token).0 == .noCredentials, "gone")
    }

    @Test("deleteCredential: the parameter before the token, unknown IDs are NO_CREDENTIALS")
    func deleteCredentialErrors() async throws {
        let fixture = try await CredentialManagementFixture()
        let token = try await fixture.token()
        #expect(try await fixture.send(0x06, token: token).0 == .missingParameter)
        #expect(try await fixture.send(0x06, .intMap([]), token: nil).0 == .missingParameter)
        #expect(
            try await fixture.send(0x06, credentialParams(fixture.made[0].credentialId), token: nil).0
                == .pinUvAuthTokenRequired
        )
        #expect(try await fixture.send(0x06, credentialParams([9, 9, 9]), token: token).0 == .noCredentials)
        #expect(try fixture.key.store.credentialCount() == 3)
    }

    // MARK: updateUserInformation

    @Test("updateUserInformation replaces name and displayName in the store", arguments: protocols)
    func updateUser(version: Int) async throws {
        let (fixture, token) = try await CredentialManagementFixture.withToken(version)
        let id = fixture.made[0].credentialId
        let user: CBORValue = .textMap([("id", .bytes([1])), ("name", "alice2"), ("displayName", "Alice Two")])
        let (status, body) = try await fixture.send(0x07, credentialParams(id, user: user), token: token)
        #expect(status == .ok)
        #expect(body == nil)
        var stored = try #require(try fixture.key.store.credential(id: id))
        #expect(stored.userName == "alice2")
        #expect(stored.userDisplayName == "Alice Two")
        #expect(stored.userId == [1])
        #expect(stored.rpName == "Example", "the RP is untouched")

        // An empty name and an absent displayName are removed.
        let cleared: CBORValue = .textMap([("id", .bytes([1])), ("name", "")])
        #expect(try await fixture.send(0x07, credentialParams(id, user: cleared), token: token).0 == .ok)
        stored = try #require(try fixture.key.store.credential(id: id))
        #expect(stored.userName == nil)
        #expect(stored.userDisplayName == nil)

        // Enumeration shows the update.
        let (enumStatus, first) = try await fixture.send(0x04, rpIDHashParams("example.com"), token: token)
        #expect(enumStatus == .ok)
        #expect(try await fixture.send(0x05, token: nil).0 == .ok)
        let enumerated = try #require(first).required(6, "user").mapValue()
        #expect(try enumerated.required("name").textValue() == "bob", "newest first; bob is untouched")
    }

    @Test("updateUserInformation: missing parameters, unknown credential, another user's handle")
    func updateUserErrors() async throws {
        let fixture = try await CredentialManagementFixture()
        let token = try await fixture.token()
        let id = fixture.made[0].credentialId
        let user: CBORValue = .textMap([("id", .bytes([1])), ("name", "mallory")])
        #expect(try await fixture.send(0x07, credentialParams(id), token: token).0 == .missingParameter, "no user")
        #expect(
            try await fixture.send(0x07, .intMap([(3, user)]), token: token).0 == .missingParameter, "no credentialID"
        )
        #expect(try await fixture.send(0x07, credentialParams(id, user: user), token: nil).0 == .pinUvAuthTokenRequired)
        #expect(
            try await fixture.send(0x07, credentialParams([7, 7], user: user), token: token).0 == .noCredentials
        )
        let otherUser: CBORValue = .textMap([("id", .bytes([2])), ("name", "mallory")])
        #expect(
            try await fixture.send(0x07, credentialParams(id, user: otherUser), token: token).0 == .invalidParameter
        )
        #expect(try fixture.key.store.credential(id: id)?.userName == "alice", "nothing changed")
    }

    // MARK: authentication

    @Test("the pinUvAuthParam checks, in order")
    func authenticationOrder() async throws {
        let noPIN = try await CredentialManagementFixture(pin: false)
        #expect(try await noPIN.key.send(.credentialManagement, .intMap([(1, 1)])).0 == .pinUvAuthTokenRequired)
        #expect(
            try await noPIN.key.send(.credentialManagement, .intMap([(1, 1), (3, 2), (4, .bytes([0]))])).0 == .pinNotSet
        )

        let fixture = try await CredentialManagementFixture()
        let key = fixture.key
        #expect(try await key.send(.credentialManagement, .intMap([(1, 1)])).0 == .pinUvAuthTokenRequired)
        #expect(
            try await key.send(.credentialManagement, .intMap([(1, 1), (4, .bytes([0]))])).0 == .missingParameter,
            "no pinUvAuthProtocol"
        )
        #expect(
            try await key.send(.credentialManagement, .intMap([(1, 1), (3, 3), (4, .bytes([0]))])).0
                == .invalidParameter,
            "an unsupported protocol"
        )
        #expect(
            try await key.send(.credentialManagement, .intMap([(1, 1), (3, 2), (4, .bytes(Array(repeating: 0, count: 32)))]))
                .0 == .pinAuthInvalid,
            "no token yet"
        )

        let token = try await fixture.token()
        // The MAC covers subCommand and subCommandParams.
        var wrong = token
        wrong.token[0] ^= 1
        #expect(try await fixture.send(0x01, token: wrong).0 == .pinAuthInvalid, "another token")
        let mac = token.platform.authenticate(key: token.token, [0x04] + rpIDHashParams("other.org").encoded())
        let swapped: CBORValue = .intMap([(1, 4), (2, rpIDHashParams("example.com")), (3, 2), (4, .bytes(mac))])
        #expect(try await key.send(.credentialManagement, swapped).0 == .pinAuthInvalid, "params not as authenticated")
        let sameMAC = token.platform.authenticate(key: token.token, [0x02])
        #expect(
            try await key.send(.credentialManagement, .intMap([(1, 1), (3, 2), (4, .bytes(sameMAC))])).0
                == .pinAuthInvalid,
            "another subCommand"
        )
        #expect(
            try await key.send(.credentialManagement, .intMap([(1, 1), (3, 1), (4, .bytes(sameMAC))])).0
                == .pinAuthInvalid,
            "the token of the other protocol"
        )
        #expect(try await fixture.send(0x01, token: token).0 == .ok)
    }

    @Test("unknown subcommands and malformed requests")
    func framing() async throws {
        let fixture = try await CredentialManagementFixture()
        let key = fixture.key
        #expect(try await key.sendRaw([0x0A]).0 == .missingParameter)
        #expect(try await key.sendRaw([0x41]).0 == .missingParameter)
        #expect(try await key.send(.credentialManagement, .intMap([(3, 2)])).0 == .missingParameter, "no subCommand")
        #expect(try await key.send(.credentialManagement, .intMap([(1, "one")])).0 == .cborUnexpectedType)
        #expect(try await key.send(.credentialManagement, .intMap([(1, 1), (2, 1)])).0 == .cborUnexpectedType)
        for subCommand in [0, 8, 0xFF] {
            #expect(
                try await key.send(.credentialManagement, .intMap([(1, .int(subCommand))])).0 == .invalidSubcommand,
                "subCommand \(subCommand)"
            )
        }
    }

    @Test("a token without cm is refused; mc and ga tokens cannot manage credentials")
    func permission() async throws {
        let fixture = try await CredentialManagementFixture()
        let mcga = try await fixture.token(permissions: 0x03, rpId: "example.com")
        #expect(try await fixture.send(0x01, token: mcga).0 == .pinAuthInvalid)
        #expect(try await fixture.send(0x04, rpIDHashParams("example.com"), token: mcga).0 == .pinAuthInvalid)
        let (status, legacy, platform) = try await fixture.key.pinToken("1234", permissions: nil)
        #expect(status == .ok)
        #expect(try await fixture.send(0x01, token: (try #require(legacy), platform)).0 == .pinAuthInvalid)
        let both = try await fixture.token(permissions: 0x07, rpId: "example.com")
        #expect(try await fixture.send(0x04, rpIDHashParams("example.com"), token: both).0 == .ok)
    }

    @Test("a token bound to an RP manages that RP's credentials only")
    func permissionsRpId() async throws {
        let fixture = try await CredentialManagementFixture()
        let token = try await fixture.token(rpId: "example.com")
        #expect(try await fixture.send(0x01, token: token).0 == .pinAuthInvalid, "metadata covers every RP")
        #expect(try await fixture.send(0x02, token: token).0 == .pinAuthInvalid, "so does enumerateRPs")
        #expect(try await fixture.send(0x04, rpIDHashParams("other.org"), token: token).0 == .pinAuthInvalid)
        #expect(try await fixture.send(0x04, rpIDHashParams("example.com"), token: token).0 == .ok)
        let carol = fixture.made[2].credentialId
        #expect(try await fixture.send(0x06, credentialParams(carol), token: token).0 == .pinAuthInvalid)
        let user: CBORValue = .textMap([("id", .bytes([3])), ("name", "eve")])
        #expect(try await fixture.send(0x07, credentialParams(carol, user: user), token: token).0 == .pinAuthInvalid)
        #expect(try fixture.key.store.credential(id: carol)?.userName == "carol")
        #expect(try await fixture.send(0x06, credentialParams(fixture.made[0].credentialId), token: token).0 == .ok)
        #expect(try fixture.key.store.credentialCount() == 2)
    }

    @Test("a token expires unused and dies with a PIN change")
    func tokenLifetime() async throws {
        let fixture = try await CredentialManagementFixture()
        let token = try await fixture.token()
        fixture.key.clock.advance(by: 31_000)
        #expect(try await fixture.send(0x01, token: token).0 == .pinAuthInvalid, "unused for 30 s")
        let fresh = try await fixture.token()
        #expect(try await fixture.send(0x01, token: fresh).0 == .ok)
        #expect(try await fixture.key.changePIN(from: "1234", to: "5678") == .ok)
        #expect(try await fixture.send(0x01, token: fresh).0 == .pinAuthInvalid)
    }
}
