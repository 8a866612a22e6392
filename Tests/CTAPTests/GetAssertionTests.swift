// authenticatorGetAssertion and GetNextAssertion: allowList and discoverable,
// user, numberOfCredentials, newest first, the 30 s window.

import CBOR
import Testing

@testable import CTAP

/// A parsed assertion.
struct Assertion {
    var credentialId: [UInt8]
    var authData: [UInt8]
    var signature: [UInt8]
    var user: CBORMap?
    var numberOfCredentials: Int?
    var signCount: UInt32 { authData[33..<37].reduce(0) { $0 << 8 | UInt32($1) } }
    var flags: UInt8 { authData[32] }

    init(_ map: CBORMap) throws {
        credentialId = try map.required(1, "credential").mapValue().required("id").bytesValue()
        #expect(try map.required(1, "credential").mapValue().required("type").textValue() == "public-key")
        authData = try map.required(2, "authData").bytesValue()
        signature = try map.required(3, "signature").bytesValue()
        user = try map[int: 4]?.mapValue()
        numberOfCredentials = try map[int: 5]?.intValue()
    }
}

@Suite("getAssertion")
struct GetAssertionTests {
    @Test("asserts with a wrapped credential from the allowList", arguments: [-7, -8])
    func allowList(algorithm: Int) async throws {
        let key = TestKey()
        var create = MakeCredentialBuilder()
        create.algorithms = [algorithm]
        let made = try await key.makeCredential(create)
        var get = GetAssertionBuilder()
        get.allowList = [Array(repeating: 7, count: 63), made.credentialId]
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.credentialId == made.credentialId)
        #expect(assertion.flags == 0x01)
        #expect(assertion.authData.count == 37)
        #expect(assertion.authData.prefix(32) == made.authData.prefix(32))
        #expect(assertion.signCount > made.signCount)
        #expect(assertion.user == nil, "no user for a non-discoverable credential")
        #expect(
            opensslVerify(spki: made.publicKeySPKI, signature: assertion.signature, message: assertion.authData + get.clientDataHash)
        )
    }

    @Test("a wrapped credential only works for its own relying party")
    func boundToRP() async throws {
        let key = TestKey()
        let made = try await key.makeCredential(MakeCredentialBuilder())
        var get = GetAssertionBuilder()
        get.rpId = "evil.example"
        get.allowList = [made.credentialId]
        let (status, _) = try await key.send(.getAssertion, get.cbor)
        #expect(status == .noCredentials)
        #expect(key.presence.requests.count == 1, "no touch is asked for a credential we do not have")
    }

    @Test("discoverable: newest first, user handle only, numberOfCredentials, then getNextAssertion")
    func discoverable() async throws {
        let key = TestKey()
        var made: [MadeCredential] = []
        for index in 0..<3 {
            var create = MakeCredentialBuilder(rk: true)
            create.userId = [UInt8(index)]
            create.userName = "user\(index)"
            made.append(try await key.makeCredential(create))
        }
        // Another RP's credential must not show up.
        var other = MakeCredentialBuilder()
        other.rpId = "other.example"
        other.rk = true
        _ = try await key.makeCredential(other)

        let get = GetAssertionBuilder()
        let first = try Assertion(try await key.getAssertion(get))
        #expect(first.credentialId == made[2].credentialId)
        #expect(first.numberOfCredentials == 3)
        #expect(try first.user?.required("id").bytesValue() == [2])
        #expect(first.user?[text: "name"] == nil, "no identifying information without UV")
        // Each stored credential counts on its own, above the value its creation used.
        #expect(first.signCount > made[2].signCount)
        for expected in [made[1], made[0]] {
            let (status, body) = try await key.send(.getNextAssertion)
            #expect(status == .ok)
            let next = try Assertion(try #require(body).mapValue())
            #expect(next.credentialId == expected.credentialId)
            #expect(next.numberOfCredentials == nil)
            #expect(opensslVerify(spki: expected.publicKeySPKI, signature: next.signature, message: next.authData + get.clientDataHash))
            #expect(next.signCount > expected.signCount)
        }
        #expect(try await key.send(.getNextAssertion).0 == .notAllowed)
        #expect(key.presence.requests.filter { $0.operation == .getAssertion }.count == 1)
    }

    @Test(
        "one account: the user handle alone, verified or not, no numberOfCredentials, no userSelected",
        arguments: [false, true]
    )
    func singleAccountUserEntity(verified: Bool) async throws {
        let key = TestKey { $0.builtInUserVerification = true }
        let create = MakeCredentialBuilder(rk: true)
        let made = try await key.makeCredential(create)
        var get = GetAssertionBuilder()
        get.uv = verified ? true : nil
        if verified { key.presence.enqueue(.verified) }
        let response = try await key.getAssertion(get)
        let assertion = try Assertion(response)
        #expect(assertion.credentialId == made.credentialId)
        #expect(assertion.flags & 0x04 == (verified ? 0x04 : 0))
        #expect(assertion.user?.entries.map(\.key) == [.text("id")], "no name or displayName for one account")
        #expect(try assertion.user?.required("id").bytesValue() == create.userId)
        #expect(assertion.numberOfCredentials == nil)
        #expect(response[int: 6] == nil, "userSelected: nobody chose on the key")
    }

    @Test("an allowList naming a discoverable credential is one account: the user handle alone after UV")
    func allowListUserEntity() async throws {
        let key = TestKey { $0.builtInUserVerification = true }
        var made: [MadeCredential] = []
        for index in 0..<2 {
            var create = MakeCredentialBuilder(rk: true)
            create.userId = [UInt8(index)]
            made.append(try await key.makeCredential(create))
        }
        var get = GetAssertionBuilder()
        get.uv = true
        get.allowList = made.map(\.credentialId)
        key.presence.enqueue(.verified)
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.flags & 0x04 == 0x04)
        #expect(assertion.user?.entries.map(\.key) == [.text("id")])
        #expect(assertion.numberOfCredentials == nil)
        #expect(try await key.send(.getNextAssertion).0 == .notAllowed)
    }

    @Test("several accounts after UV: every assertion of the sequence names its user for the chooser")
    func multipleAccountsUserEntity() async throws {
        let key = TestKey { $0.builtInUserVerification = true }
        let displayNames = ["alice": "Alice A.", "bob": "Bob B."]
        for (index, name) in ["alice", "bob"].enumerated() {
            var create = MakeCredentialBuilder(rk: true)
            create.userId = [UInt8(index)]
            create.userName = name
            create.displayName = displayNames[name]
            _ = try await key.makeCredential(create)
        }
        var get = GetAssertionBuilder()
        get.uv = true
        key.presence.enqueue(.verified)
        let firstResponse = try await key.getAssertion(get)
        let first = try Assertion(firstResponse)
        #expect(first.numberOfCredentials == 2)
        #expect(firstResponse[int: 6] == nil, "userSelected: the platform's chooser decides")
        let next = try Assertion(try #require(try await key.send(.getNextAssertion).1).mapValue())
        var seen: [[UInt8]: String] = [:]
        for assertion in [first, next] {
            let user = try #require(assertion.user)
            let name = try user.required("name").textValue()
            #expect(try user.required("displayName").textValue() == displayNames[name])
            seen[try user.required("id").bytesValue()] = name
        }
        #expect(seen == [[1]: "bob", [0]: "alice"], "newest first, each with its own names")
    }

    @Test("getNextAssertion expires 30 s after the last assertion and after any other command")
    func nextAssertionWindow() async throws {
        let key = TestKey()
        for index in 0..<3 {
            var create = MakeCredentialBuilder(rk: true)
            create.userId = [UInt8(index)]
            _ = try await key.makeCredential(create)
        }
        _ = try await key.getAssertion(GetAssertionBuilder())
        key.clock.advance(by: 29_000)
        #expect(try await key.send(.getNextAssertion).0 == .ok)
        key.clock.advance(by: 30_001)
        #expect(try await key.send(.getNextAssertion).0 == .notAllowed)

        _ = try await key.getAssertion(GetAssertionBuilder())
        #expect(try await key.send(.getInfo).0 == .ok)
        #expect(try await key.send(.getNextAssertion).0 == .notAllowed)
    }

    @Test("getNextAssertion without a getAssertion is not allowed")
    func nextWithoutAssertion() async throws {
        #expect(try await TestKey().send(.getNextAssertion).0 == .notAllowed)
    }

    @Test("a silent assertion (up=false) asks nobody and leaves UP clear")
    func silent() async throws {
        let key = TestKey()
        let made = try await key.makeCredential(MakeCredentialBuilder())
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        get.up = false
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.flags == 0x00)
        #expect(key.presence.requests.count == 1)
    }

    @Test("an allowList of several of our credentials answers with the first")
    func firstOfAllowList() async throws {
        let key = TestKey()
        let a = try await key.makeCredential(MakeCredentialBuilder())
        let b = try await key.makeCredential(MakeCredentialBuilder())
        var get = GetAssertionBuilder()
        get.allowList = [b.credentialId, a.credentialId]
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(assertion.credentialId == b.credentialId)
        #expect(assertion.numberOfCredentials == nil)
    }

    @Test("a discoverable credential in an allowList returns its user handle")
    func discoverableInAllowList() async throws {
        let key = TestKey()
        let made = try await key.makeCredential(MakeCredentialBuilder(rk: true))
        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        let assertion = try Assertion(try await key.getAssertion(get))
        #expect(try assertion.user?.required("id").bytesValue() == [1, 2, 3, 4])
    }
}
