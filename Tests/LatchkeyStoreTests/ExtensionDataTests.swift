// Schema v2: the extension data of discoverable credentials (CredRandom,
// credBlob, largeBlobKey) — kept, sealed at rest, and added to a v1 store
// without losing what it held.

import CTAP
import Foundation
import GRDB
import LatchkeyCrypto
import Testing

@testable import LatchkeyStore

@Suite("SQLite store: extension data")
struct ExtensionDataTests {
    private func credentialWithExtensions() -> StoredCredential {
        var credential = sampleCredential()
        credential.credProtect = 3
        credential.credRandom = SecureRandom.bytes(count: 64)
        credential.credBlob = Array("a blob for the RP".utf8)
        credential.largeBlobKey = SecureRandom.bytes(count: 32)
        credential.thirdPartyPayment = true
        return credential
    }

    @Test("CredRandom, credBlob and largeBlobKey round-trip, and survive update and reopening")
    func roundTrip() throws {
        let directory = try TemporaryDirectory()
        let saved: StoredCredential
        do {
            let store = try openStore(directory)
            saved = try store.save(credentialWithExtensions())
            var renamed = saved
            renamed.userName = "renamed"
            renamed.credBlob = nil
            renamed.largeBlobKey = nil
            #expect(try store.update(renamed))
            let read = try #require(try store.credential(id: saved.id))
            #expect(read.userName == "renamed")
            #expect(read.credRandom == saved.credRandom, "update keeps extension data")
            #expect(read.credBlob == saved.credBlob)
            #expect(read.largeBlobKey == saved.largeBlobKey)
            #expect(read.thirdPartyPayment, "update keeps the payment flag")
        }
        let reopened = try openStore(directory)
        let read = try #require(try reopened.credential(id: saved.id))
        #expect(read.credRandom == saved.credRandom)
        #expect(read.credBlob == saved.credBlob)
        #expect(read.largeBlobKey == saved.largeBlobKey)
        #expect(read.credProtect == 3)
        #expect(read.thirdPartyPayment)
        let plain = try reopened.save(sampleCredential())
        let readPlain = try #require(try reopened.credential(id: plain.id))
        #expect(readPlain.credRandom == nil && readPlain.credBlob == nil && readPlain.largeBlobKey == nil)
        #expect(!readPlain.thirdPartyPayment)
    }

    @Test("extension data is sealed: none of it appears in the database files")
    func sealedAtRest() throws {
        let directory = try TemporaryDirectory()
        let credential = credentialWithExtensions()
        do {
            let store = try openStore(directory)
            try store.save(credential)
        }
        for file in ["store.db", "store.db-wal"] {
            let bytes = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: directory.file(file)))) ?? Data())
            for secret in [credential.credRandom!, credential.credBlob!, credential.largeBlobKey!] {
                #expect(!contains(bytes, secret), "\(file) holds extension data in the clear")
            }
        }
    }

    @Test("a sealed value moved to another credential's row does not open")
    func boundToItsRow() throws {
        let directory = try TemporaryDirectory()
        let first: StoredCredential
        let second: StoredCredential
        do {
            let store = try openStore(directory)
            first = try store.save(credentialWithExtensions())
            second = try store.save(credentialWithExtensions())
        }
        try rawDatabase(directory).write { db in
            try db.execute(
                sql: "UPDATE credential SET sealedLargeBlobKey = (SELECT sealedLargeBlobKey FROM credential WHERE id = ?) WHERE id = ?",
                arguments: [Data(first.id), Data(second.id)]
            )
        }
        let store = try openStore(directory)
        let error = #expect(throws: StoreError.self) { try store.credential(id: second.id) }
        #expect(error?.code == .corrupt)
    }

    @Test("a v1 store migrates to v2, v3 and v4 and keeps every credential, secret and counter")
    func migratesFromV1() throws {
        let directory = try TemporaryDirectory()
        var saved: [StoredCredential] = []
        do {
            // What v1 wrote: no extension columns, names in the clear, sealed under the master key.
            let legacy = try LegacyStore(directory, version: "v1")
            for _ in 0..<3 { saved.append(try legacy.insert(sampleCredential())) }
            try legacy.setSecret([7, 7], named: "credential-wrapping-secret")
            try legacy.reserve(scope: saved[0].id, upTo: 37)
        }
        let store = try openStore(directory)
        #expect(try store.allCredentials() == saved.reversed())
        #expect(try store.secret(named: "credential-wrapping-secret") == [7, 7])
        #expect(try store.nextSignatureCounter(scope: saved[0].id) >= 37)
        let migrations = try rawDatabase(directory).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(migrations == ["v1", "v2", "v3", "v4"])
        let withExtensions = try store.save(credentialWithExtensions())
        #expect(try store.credential(id: withExtensions.id) == withExtensions)
    }
}

@Suite("SQLite store: raising a signature counter")
struct RaiseSignatureCounterTests {
    @Test("an imported counter continues above its value, across reopening, and is never lowered")
    func raise() throws {
        let directory = try TemporaryDirectory()
        let scope: [UInt8] = [1, 2, 3]
        var last: UInt32 = 0
        do {
            let store = try openStore(directory)
            #expect(try store.nextSignatureCounter(scope: scope) == 1)
            try store.raiseSignatureCounter(scope: scope, above: 1000)
            last = try store.nextSignatureCounter(scope: scope)
            #expect(last > 1000)
            try store.raiseSignatureCounter(scope: scope, above: 5)
            let next = try store.nextSignatureCounter(scope: scope)
            #expect(next > last, "raising below the current value lowers nothing")
            last = next
        }
        let reopened = try openStore(directory)
        #expect(try reopened.nextSignatureCounter(scope: scope) > last)
        try reopened.raiseSignatureCounter(scope: [9], above: UInt32.max - 1)
        #expect(try reopened.nextSignatureCounter(scope: [9]) == UInt32.max)
    }
}
