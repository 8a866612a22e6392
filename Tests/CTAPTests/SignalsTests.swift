// The WebAuthn signals applied by the engine (Authenticator+Signals.swift),
// and passkey export and import (Authenticator+Exchange.swift): what each
// deletes or renames, what it leaves alone, and that the keys exported sign
// for the same public keys once imported elsewhere.

import CBOR
import LatchkeyCrypto
import Testing

@testable import CTAP

@Suite("signals")
struct SignalsTests {
    /// alice and bob at example.com, carol at other.org (discoverable).
    func fixture() async throws -> CredentialManagementFixture {
        try await CredentialManagementFixture(pin: false)
    }

    func assertion(_ key: TestKey, rpId: String = "example.com", allow: [[UInt8]] = []) async throws
        -> (CTAPStatus, CBORValue?)
    {
        var request = GetAssertionBuilder()
        request.rpId = rpId
        request.allowList = allow
        return try await key.send(.getAssertion, request.cbor)
    }

    @Test("accepted-credentials deletes the user's credential that is not in the list, and nothing else")
    func acceptedCredentials() async throws {
        let fixture = try await fixture()
        let key = fixture.key
        let (alice, bob, carol) = (fixture.made[0], fixture.made[1], fixture.made[2])
        // Warm the key cache, so that the deletion must drop it.
        #expect(try await assertion(key, allow: [alice.credentialId]).0 == .ok)

        var outcome = try await key.authenticator.signalAcceptedCredentials(
            rpId: "example.com",
            userHandle: [1],
            acceptedCredentialIds: [alice.credentialId]
        )
        #expect(outcome == .init(), "alice's only credential is accepted")

        outcome = try await key.authenticator.signalAcceptedCredentials(
            rpId: "example.com",
            userHandle: [1],
            acceptedCredentialIds: [bob.credentialId, [9, 9]]
        )
        #expect(outcome.deleted.map(\.id) == [alice.credentialId] && outcome.updated.isEmpty)
        #expect(
            key.events.all.last?.kind == .credentialDeleted && key.events.all.last?.credentialId == alice.credentialId
        )
        #expect(try key.store.credential(id: alice.credentialId) == nil)
        #expect(try key.store.credential(id: bob.credentialId) != nil)
        #expect(try key.store.credential(id: carol.credentialId) != nil)
        #expect(try await assertion(key, allow: [alice.credentialId]).0 == .noCredentials, "the cached key is gone")

        // Another RP's user with the same handle is not this RP's to judge.
        outcome = try await key.authenticator.signalAcceptedCredentials(
            rpId: "example.com",
            userHandle: [3],
            acceptedCredentialIds: []
        )
        #expect(outcome == .init())
        #expect(try key.store.credential(id: carol.credentialId) != nil)
    }

    @Test("current-user-details renames the user's credentials at that RP only, under updateUser's rules")
    func currentUserDetails() async throws {
        let fixture = try await fixture()
        let key = fixture.key
        let (alice, bob) = (fixture.made[0], fixture.made[1])

        let outcome = try await key.authenticator.signalCurrentUserDetails(
            rpId: "example.com",
            userHandle: [1],
            name: "alice@example.com",
            displayName: "Alice Liddell"
        )
        #expect(outcome.deleted.isEmpty && outcome.updated.map(\.id) == [alice.credentialId])
        let updated = try #require(key.events.all.last)
        #expect(updated.kind == .credentialUpdated && updated.userName == "alice@example.com")
        let stored = try #require(try key.store.credential(id: alice.credentialId))
        #expect(stored.userName == "alice@example.com" && stored.userDisplayName == "Alice Liddell")
        #expect(try key.store.credential(id: bob.credentialId)?.userName == "bob")

        // The same details again change nothing, and say so.
        let again = try await key.authenticator.signalCurrentUserDetails(
            rpId: "example.com",
            userHandle: [1],
            name: "alice@example.com",
            displayName: "Alice Liddell"
        )
        #expect(again == .init())
        // The wrong RP matches nothing.
        #expect(
            try await key.authenticator.signalCurrentUserDetails(
                rpId: "other.org",
                userHandle: [1],
                name: "x",
                displayName: "y"
            ) == .init()
        )
        let long = await key.refusal {
            _ = try await $0.signalCurrentUserDetails(
                rpId: "example.com",
                userHandle: [1],
                name: String(repeating: "n", count: 65),
                displayName: ""
            )
        }
        #expect(long?.code == .invalidParameter)

        // Renaming deletes nothing: both example.com credentials are still offered.
        let (status, body) = try await assertion(key)
        #expect(status == .ok)
        #expect(try #require(body).mapValue()[int: 5] == .int(2), "numberOfCredentials")
    }

    @Test("unknown-credential deletes that credential of that RP, and no other RP's")
    func unknownCredential() async throws {
        let fixture = try await fixture()
        let key = fixture.key
        let (alice, carol) = (fixture.made[0], fixture.made[2])

        #expect(
            try await key.authenticator.signalUnknownCredential(rpId: "example.com", credentialId: carol.credentialId)
                == .init(),
            "carol's credential is other.org's"
        )
        #expect(try key.store.credential(id: carol.credentialId) != nil)
        #expect(
            try await key.authenticator.signalUnknownCredential(rpId: "example.com", credentialId: [1, 2, 3])
                == .init()
        )
        let before = key.events.all.count
        let outcome = try await key.authenticator.signalUnknownCredential(
            rpId: "example.com",
            credentialId: alice.credentialId
        )
        #expect(key.events.all.dropFirst(before).map(\.kind) == [.credentialDeleted])
        #expect(outcome.deleted.map(\.id) == [alice.credentialId])
        #expect(try key.store.credential(id: alice.credentialId) == nil)
        #expect(try await assertion(key, allow: [alice.credentialId]).0 == .noCredentials)
        #expect(try key.store.credentialCount() == 2)
    }
}

@Suite("passkey exchange")
struct ExchangeEngineTests {
    @Test("exported keys, imported into another key, sign for the original public keys", arguments: [-7, -8])
    func exportImport(algorithm: Int) async throws {
        let source = TestKey(seed: "source")
        var request = MakeCredentialBuilder()
        request.algorithms = [algorithm]
        request.rk = true
        request.extensions = [("credBlob", .bytes([1, 2, 3])), ("hmac-secret", .boolean(true))]
        let made = try await source.makeCredential(request)

        let exported = try await source.authenticator.exportCredentials()
        #expect(exported.count == 1)
        let credential = try #require(exported.first)
        #expect(credential.credential.id == made.credentialId)
        let key = try CredentialPrivateKey(pkcs8: credential.pkcs8)
        #expect(key.algorithm.rawValue == algorithm)
        #expect(
            try spki(cose: key.publicCOSEKey.mapValue()) == made.publicKeySPKI,
            "the PKCS#8 key is the credential's"
        )

        let target = TestKey(seed: "target")
        let stored = credential.credential
        let passkey = PasskeyImport(
            rpId: stored.rpId,
            credentialId: stored.id,
            userHandle: stored.userId,
            userName: stored.userName,
            userDisplayName: stored.userDisplayName,
            pkcs8: credential.pkcs8,
            credRandom: stored.credRandom,
            credBlob: stored.credBlob
        )
        let outcomes = try await target.authenticator.importPasskeys([passkey, passkey])
        #expect(outcomes.count == 2)
        guard case .imported(let imported) = outcomes[0] else {
            Issue.record("not imported: \(outcomes[0])")
            return
        }
        #expect(imported.credBlob == [1, 2, 3] && imported.credRandom == stored.credRandom)
        #expect(outcomes[1] == .skipped("the key has a credential with this ID already"))
        #expect(target.events.all.map(\.origin) == ["import"], "one credential.created, from the import")

        // A discoverable assertion on the target, verified with the source's public key.
        var get = GetAssertionBuilder()
        get.rpId = stored.rpId
        let assertion = try await target.getAssertion(get)
        #expect(try assertion.required(1, "credential").mapValue()[text: "id"]?.bytesValue() == stored.id)
        let authData = try assertion.required(2, "authData").bytesValue()
        let signature = try assertion.required(3, "signature").bytesValue()
        #expect(opensslVerify(spki: made.publicKeySPKI, signature: signature, message: authData + get.clientDataHash))
        let counter = authData[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        #expect(counter == 1, "the counter starts afresh")
    }

    @Test("import skips the same RP and user, a key that is not PKCS#8, and a full key")
    func importSkips() async throws {
        let fixture = try await CredentialManagementFixture(pin: false)
        let exported = try await fixture.key.authenticator.exportCredentials()
        #expect(exported.map(\.credential.id) == fixture.made.map(\.credentialId), "oldest first")
        let alice = try #require(exported.first)
        let target = TestKey(maxDiscoverable: 2)
        func passkey(_ id: [UInt8], user: [UInt8], rpId: String = "example.com", pkcs8: [UInt8]) -> PasskeyImport {
            PasskeyImport(
                rpId: rpId,
                credentialId: id,
                userHandle: user,
                userName: "u",
                userDisplayName: "",
                pkcs8: pkcs8
            )
        }
        let outcomes = try await target.authenticator.importPasskeys([
            passkey([1], user: [1], pkcs8: alice.pkcs8),
            passkey([2], user: [1], pkcs8: alice.pkcs8),
            passkey([3], user: [2], pkcs8: [0x30, 0x00]),
            passkey([4], user: [2], pkcs8: alice.pkcs8),
            passkey([5], user: [3], pkcs8: alice.pkcs8),
        ])
        #expect(
            outcomes.map { if case .imported = $0 { "imported" } else { "skipped" } } == [
                "imported", "skipped", "skipped", "imported", "skipped",
            ]
        )
        #expect(outcomes[1] == .skipped("the key has a passkey for this user at this RP already"))
        guard case .skipped(let badKey) = outcomes[2] else { return }
        #expect(badKey.hasPrefix("refused: the private key is not PKCS#8 of P-256"), "\(badKey)")
        #expect(outcomes[4] == .skipped("the key is full"))
        if case .imported(let stored) = outcomes[0] {
            #expect(stored.userDisplayName == nil, "an empty display name is none")
        }
    }
}
