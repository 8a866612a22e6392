// Conversation state is bound to the conversation that began it (CTAP 2.1
// §6.3 getNextAssertion, §6.8.3–§6.8.4 the credentialManagement GetNext
// subcommands, §6.10.2 a fragmented large-blob write): another origin — a
// channel, or the same channel number on another transport connection —
// never continues it and never gets its data.

import CBOR
import Testing

@testable import CTAP

private let channelA = RequestOrigin(connection: 1, channel: 1)
private let channelB = RequestOrigin(connection: 1, channel: 2)
/// Channel 1 again, on another connection (a new USB/IP import starts at 1).
private let otherConnection = RequestOrigin(connection: 2, channel: 1)

/// Discoverable credentials for two RPs, newest last.
private func keyWithAccounts(a: Int = 3, b: Int = 2) async throws -> (TestKey, a: [MadeCredential], b: [MadeCredential]) {
    let key = TestKey()
    var made: [String: [MadeCredential]] = [:]
    for (rpId, count) in [("a.example", a), ("b.example", b)] {
        for index in 0..<count {
            var create = MakeCredentialBuilder()
            create.rpId = rpId
            create.rk = true
            create.userId = Array("\(rpId)/\(index)".utf8)
            made[rpId, default: []].append(try await key.makeCredential(create))
        }
    }
    return (key, made["a.example"] ?? [], made["b.example"] ?? [])
}

private func getAssertion(_ rpId: String, _ clientDataHash: UInt8) -> CBORValue {
    var get = GetAssertionBuilder()
    get.rpId = rpId
    get.clientDataHash = Array(repeating: clientDataHash, count: 32)
    return get.cbor
}

/// Checks an assertion is for one of `expected`, signed over `clientDataHash`.
private func check(
    _ body: CBORValue?,
    among expected: [MadeCredential],
    clientDataHash: UInt8,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> [UInt8] {
    let assertion = try Assertion(try #require(body, sourceLocation: sourceLocation).mapValue())
    let made = try #require(
        expected.first { $0.credentialId == assertion.credentialId }, "another RP's credential",
        sourceLocation: sourceLocation
    )
    #expect(
        opensslVerify(
            spki: made.publicKeySPKI, signature: assertion.signature,
            message: assertion.authData + Array(repeating: clientDataHash, count: 32)
        ),
        "signed over the asking conversation's clientDataHash", sourceLocation: sourceLocation
    )
    return assertion.credentialId
}

@Suite("conversation state per origin")
struct ConversationTests {
    @Test("two channels interleave getAssertion sequences; each getNextAssertion continues its own")
    func interleavedAssertions() async throws {
        let (key, a, b) = try await keyWithAccounts()
        let (statusA, firstA) = try await key.send(.getAssertion, getAssertion("a.example", 0xA1), from: channelA)
        let (statusB, firstB) = try await key.send(.getAssertion, getAssertion("b.example", 0xB1), from: channelB)
        #expect(statusA == .ok && statusB == .ok)
        var seenA = [try check(firstA, among: a, clientDataHash: 0xA1)]
        var seenB = [try check(firstB, among: b, clientDataHash: 0xB1)]
        for origin in [channelB, channelA, channelB, channelA] {
            let (status, body) = try await key.send(.getNextAssertion, from: origin)
            if origin == channelA {
                #expect(status == .ok)
                seenA.append(try check(body, among: a, clientDataHash: 0xA1))
            } else if seenB.count < b.count {
                #expect(status == .ok)
                seenB.append(try check(body, among: b, clientDataHash: 0xB1))
            } else {
                #expect(status == .notAllowed, "B's sequence is over: nothing of A's")
                #expect(body == nil)
            }
        }
        #expect(Set(seenA) == Set(a.map(\.credentialId)) && seenA.count == a.count)
        #expect(Set(seenB) == Set(b.map(\.credentialId)) && seenB.count == b.count)
        #expect(try await key.send(.getNextAssertion, from: channelA).0 == .notAllowed)
    }

    @Test(
        "a getNextAssertion with no sequence of its own is NOT_ALLOWED, on another channel or connection",
        arguments: [channelB, otherConnection, RequestOrigin.solitary]
    )
    func nextFromAnotherOrigin(other: RequestOrigin) async throws {
        let (key, a, _) = try await keyWithAccounts()
        #expect(try await key.send(.getAssertion, getAssertion("a.example", 0xA1), from: channelA).0 == .ok)
        let (status, body) = try await key.send(.getNextAssertion, from: other)
        #expect(status == .notAllowed && body == nil)
        // Another origin's commands are not between this sequence's calls.
        #expect(try await key.send(.getInfo, from: other).0 == .ok)
        let (next, nextBody) = try await key.send(.getNextAssertion, from: channelA)
        #expect(next == .ok)
        _ = try check(nextBody, among: a, clientDataHash: 0xA1)
        // The sequence's own channel ends it with any other command.
        #expect(try await key.send(.getInfo, from: channelA).0 == .ok)
        #expect(try await key.send(.getNextAssertion, from: channelA).0 == .notAllowed)
    }

    @Test("credentialManagement enumerations of two channels continue each on its own channel")
    func interleavedEnumerations() async throws {
        let fixture = try await CredentialManagementFixture()
        let key = fixture.key
        // A enumerates RPs (2), B the credentials of example.com (2).
        let tokenA = try await fixture.token()
        let (beginA, rpA) = try await fixture.send(0x02, token: tokenA, from: channelA)
        #expect(beginA == .ok && rpA?[int: 5] == 2, "totalRPs")
        let tokenB = try await fixture.token()
        let (beginB, credentialB) = try await fixture.send(
            0x04, rpIDHashParams("example.com"), token: tokenB, from: channelB
        )
        #expect(beginB == .ok && credentialB?[int: 9] == 2, "totalCredentials")

        let (nextA, secondRP) = try await fixture.send(0x03, token: nil, from: channelA)
        #expect(nextA == .ok)
        #expect(try secondRP?.required(3, "rp").mapValue()[text: "id"] != nil, "an RP, not a credential")
        #expect(secondRP?[int: 7] == nil)
        let (nextB, secondCredential) = try await fixture.send(0x05, token: nil, from: channelB)
        #expect(nextB == .ok)
        #expect(secondCredential?[int: 7] != nil && secondCredential?[int: 3] == nil, "a credential, not an RP")
        let ids = [credentialB?[int: 7], secondCredential?[int: 7]].compactMap { $0 }
        #expect(Set(ids).count == 2, "each credential once")

        // Both are over now; neither continues the other's, and a third channel gets nothing.
        for (origin, subCommand) in [(channelA, 0x03), (channelB, 0x05), (otherConnection, 0x03), (channelA, 0x05)] {
            #expect(try await fixture.send(subCommand, token: nil, from: origin).0 == .notAllowed)
        }
        _ = key
    }

    @Test("a large-blob write belongs to the channel that began it; another channel's fragments are INVALID_SEQ")
    func largeBlobWritePerChannel() async throws {
        let key = TestKey()
        let mine = sampleLargeBlobArray(count: 1, size: 280)
        let theirs = sampleLargeBlobArray(count: 1, size: 280, seed: 9)
        func write(_ array: [UInt8], from origin: RequestOrigin, first: Bool) async throws -> CTAPStatus {
            let request =
                first
                ? largeBlobsRequest(set: Array(array[..<100]), offset: 0, length: array.count)
                : largeBlobsRequest(set: Array(array[100...]), offset: 100)
            return try await key.send(.largeBlobs, request, from: origin).0
        }
        #expect(try await write(mine, from: channelA, first: true) == .ok)
        #expect(try await write(theirs, from: channelB, first: false) == .invalidSequence, "no write of its own")
        #expect(try await write(theirs, from: otherConnection, first: false) == .invalidSequence)
        // B's own write does not disturb A's.
        #expect(try await write(theirs, from: channelB, first: true) == .ok)
        #expect(try await write(mine, from: channelA, first: false) == .ok)
        #expect(try await key.readLargeBlobArray() == mine)
        #expect(try await write(theirs, from: channelB, first: false) == .ok)
        #expect(try await key.readLargeBlobArray() == theirs)
    }

    @Test("endConversation, endConversations(connection:) and a power cycle end what they cover")
    func endingConversations() async throws {
        let (key, _, _) = try await keyWithAccounts()
        let origins = [channelA, channelB, otherConnection]
        func start() async throws {
            for origin in origins {
                #expect(try await key.send(.getAssertion, getAssertion("a.example", 1), from: origin).0 == .ok)
            }
        }
        func continues(_ origin: RequestOrigin) async throws -> Bool {
            try await key.send(.getNextAssertion, from: origin).0 == .ok
        }
        try await start()
        await key.authenticator.endConversation(channelA)
        #expect(try await continues(channelA) == false, "INIT on the channel ended its sequence")
        #expect(try await continues(channelB))
        #expect(try await continues(otherConnection))

        try await start()
        await key.authenticator.endConversations(connection: 1)
        #expect(try await continues(channelA) == false)
        #expect(try await continues(channelB) == false)
        #expect(try await continues(otherConnection), "another connection's conversation goes on")

        try await start()
        await key.authenticator.powerCycle()
        for origin in origins { #expect(try await continues(origin) == false) }
    }

    @Test("the key keeps the 16 most recently used conversations; an older one ends")
    func capacity() async throws {
        let (key, _, _) = try await keyWithAccounts(a: 2, b: 0)
        let origins = (1...17).map { RequestOrigin(connection: 7, channel: UInt32($0)) }
        for origin in origins {
            #expect(try await key.send(.getAssertion, getAssertion("a.example", 1), from: origin).0 == .ok)
        }
        #expect(try await key.send(.getNextAssertion, from: origins[0]).0 == .notAllowed, "pushed out")
        for origin in origins.dropFirst() {
            #expect(try await key.send(.getNextAssertion, from: origin).0 == .ok)
        }
    }
}
