// Behaviour of SQLiteCredentialStore: the CredentialStore contract, secrets
// at rest, file modes, the lock, error mapping and signature counters.

import CTAP
import Foundation
import GRDB
import Glibc
import LatchkeyCrypto
import Testing

@testable import LatchkeyStore

@Suite("SQLite credential store")
struct SQLiteCredentialStoreTests {
    // MARK: Credentials

    @Test("round-trips every field of a credential and assigns a sequence")
    func roundTrip() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let credential = sampleCredential()
        let saved = try store.save(credential)
        #expect(saved.sequence > 0)
        var expected = credential
        expected.sequence = saved.sequence
        #expect(saved == expected)
        #expect(try store.credential(id: credential.id) == expected)
        #expect(try store.credentials(rpIdHash: credential.rpIdHash) == [expected])
        #expect(try store.allCredentials() == [expected])
        #expect(try store.credential(id: SecureRandom.bytes(count: 32)) == nil)
    }

    @Test("round-trips absent optional fields as nil")
    func roundTripOptionals() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        var credential = sampleCredential(userName: nil)
        credential.rpName = nil
        let saved = try store.save(credential)
        let read = try #require(try store.credential(id: credential.id))
        #expect(read == saved)
        #expect(read.rpName == nil && read.userName == nil && read.userDisplayName == nil)
    }

    @Test("lists credentials newest first by sequence")
    func newestFirst() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        var saved: [StoredCredential] = []
        for index in 0..<5 {
            saved.append(try store.save(sampleCredential(rpId: index % 2 == 0 ? "a.example" : "b.example")))
        }
        #expect(zip(saved, saved.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        #expect(try store.allCredentials() == saved.reversed())
        let rpA = SHA256.hash(Array("a.example".utf8))
        #expect(try store.credentials(rpIdHash: rpA) == saved.filter { $0.rpIdHash == rpA }.reversed())
    }

    @Test("a new credential for the same rpIdHash and userId replaces the old one")
    func replaceSameAccount() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let userId = SecureRandom.bytes(count: 16)
        let old = try store.save(sampleCredential(userId: userId))
        let otherRp = try store.save(sampleCredential(rpId: "other.example", userId: userId))
        let otherUser = try store.save(sampleCredential())
        let new = try store.save(sampleCredential(userId: userId, userName: "alice2"))
        #expect(new.sequence > otherUser.sequence)
        #expect(try store.credential(id: old.id) == nil)
        #expect(try store.credential(id: new.id) == new)
        #expect(try store.credentials(rpIdHash: new.rpIdHash) == [new, otherUser])
        #expect(try store.credential(id: otherRp.id) == otherRp)
        #expect(try store.credentialCount() == 3)
    }

    @Test("containsCredential answers for the RP and user, from the index, as the listing would")
    func containsCredential() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let userId = SecureRandom.bytes(count: 16)
        let saved = try store.save(sampleCredential(userId: userId))
        #expect(try store.containsCredential(rpIdHash: saved.rpIdHash, userId: userId))
        #expect(try !store.containsCredential(rpIdHash: saved.rpIdHash, userId: SecureRandom.bytes(count: 16)))
        #expect(try !store.containsCredential(rpIdHash: SHA256.hash(Array("other.example".utf8)), userId: userId))
        let memory = MemoryCredentialStore()
        try memory.save(saved)
        #expect(try memory.containsCredential(rpIdHash: saved.rpIdHash, userId: userId))
        #expect(try store.deleteCredential(id: saved.id))
        #expect(try !store.containsCredential(rpIdHash: saved.rpIdHash, userId: userId))
    }

    @Test("sequences keep increasing after deletes and a reset")
    func sequenceNeverReused() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let first = try store.save(sampleCredential())
        let second = try store.save(sampleCredential())
        try store.deleteCredential(id: second.id)
        let third = try store.save(sampleCredential())
        #expect(third.sequence > second.sequence && second.sequence > first.sequence)
        try store.reset()
        let fourth = try store.save(sampleCredential())
        #expect(fourth.sequence > third.sequence)
    }

    @Test("update replaces only the user and relying party names")
    func update() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let saved = try store.save(sampleCredential())
        var changed = saved
        changed.userName = "bob"
        changed.userDisplayName = nil
        changed.rpName = "Renamed"
        changed.privateKey = SecureRandom.bytes(count: 32)
        changed.algorithm = -7
        changed.credProtect = 3
        #expect(try store.update(changed))
        var expected = saved
        expected.userName = "bob"
        expected.userDisplayName = nil
        expected.rpName = "Renamed"
        #expect(try store.credential(id: saved.id) == expected)
        #expect(try !store.update(sampleCredential()))
    }

    @Test("delete removes one credential and reports whether there was one")
    func delete() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let kept = try store.save(sampleCredential())
        let deleted = try store.save(sampleCredential())
        #expect(try store.deleteCredential(id: deleted.id))
        #expect(try !store.deleteCredential(id: deleted.id))
        #expect(try store.credential(id: deleted.id) == nil)
        #expect(try store.allCredentials() == [kept])
    }

    @Test("counts the stored credentials")
    func count() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        #expect(try store.credentialCount() == 0)
        var ids: [[UInt8]] = []
        for _ in 0..<7 { ids.append(try store.save(sampleCredential()).id) }
        #expect(try store.credentialCount() == 7)
        try store.deleteCredential(id: ids[3])
        #expect(try store.credentialCount() == 6)
    }

    // MARK: Secrets

    @Test("secrets round-trip, are replaced, and are removed with nil")
    func secrets() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        #expect(try store.secret(named: "wrapping") == nil)
        let first = SecureRandom.bytes(count: 32)
        try store.setSecret(first, named: "wrapping")
        try store.setSecret([], named: "empty")
        #expect(try store.secret(named: "wrapping") == first)
        #expect(try store.secret(named: "empty") == [])
        let second = SecureRandom.bytes(count: 48)
        try store.setSecret(second, named: "wrapping")
        #expect(try store.secret(named: "wrapping") == second)
        try store.setSecret(nil, named: "wrapping")
        #expect(try store.secret(named: "wrapping") == nil)
        try store.setSecret(nil, named: "never-set")
        #expect(try store.secret(named: "empty") == [])
    }

    @Test("reset deletes every credential and secret but the device's identity")
    func reset() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        for _ in 0..<3 { try store.save(sampleCredential()) }
        try store.setSecret([1, 2, 3], named: "pin")
        try store.setSecret([4, 5], named: "device.aaguid")
        try store.reset()
        #expect(try store.credentialCount() == 0)
        #expect(try store.allCredentials().isEmpty)
        #expect(try store.secret(named: "pin") == nil)
        #expect(try store.secret(named: "device.aaguid") == [4, 5])
        let saved = try store.save(sampleCredential())
        #expect(try store.allCredentials() == [saved])
    }

    // MARK: Secrets at rest

    @Test("the private key and secrets are not stored in plaintext")
    func sealedAtRest() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let credential = sampleCredential()
        try store.save(credential)
        let secret = SecureRandom.bytes(count: 32)
        try store.setSecret(secret, named: "wrapping")

        let raw = try rawDatabase(directory)
        try raw.read { db in
            let row = try #require(
                try Row.fetchOne(db, sql: "SELECT * FROM credential WHERE id = ?", arguments: [Data(credential.id)])
            )
            var everything: [UInt8] = []
            for (_, value) in row {
                if case .blob(let data) = value.storage { everything += data }
            }
            #expect(!contains(everything, credential.privateKey))
            let sealed = try #require(try Data.fetchOne(db, sql: "SELECT sealedPrivateKey FROM credential"))
            // nonce (12) || ciphertext (32) || tag (16)
            #expect(sealed.count == 12 + 32 + 16)
            let sealedSecret = try #require(try Data.fetchOne(db, sql: "SELECT sealedValue FROM secret"))
            #expect(!contains([UInt8](sealedSecret), secret))
        }
        try raw.close()
        // Nor anywhere in the files.
        for file in ["store.db", "store.db-wal"] {
            let bytes = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: directory.file(file)))) ?? Data())
            #expect(!contains(bytes, credential.privateKey))
            #expect(!contains(bytes, secret))
        }
    }

    @Test("a wrong master key is reported as corrupt when the store opens")
    func wrongMasterKey() throws {
        let directory = try TemporaryDirectory()
        do {
            let store = try openStore(directory)
            try store.save(sampleCredential())
        }
        let error = #expect(throws: StoreError.self) { try openStore(directory, key: otherMasterKey) }
        #expect(error?.code == .corrupt)
        #expect(error?.reason.contains(directory.file("store.db")) == true)
        // The right key still opens it.
        #expect(try openStore(directory).credentialCount() == 1)
    }

    @Test("a master key that is not 32 bytes is an error, not a trap")
    func shortMasterKey() throws {
        let directory = try TemporaryDirectory()
        #expect(throws: StoreError(.corrupt, "")) {
            try SQLiteCredentialStore(path: directory.file("store.db"), masterKey: [1, 2, 3])
        }
    }

    @Test("a tampered private key, a key moved to another credential and a mistyped column are corrupt")
    func tamperedRows() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let first = try store.save(sampleCredential())
        let second = try store.save(sampleCredential())
        let raw = try rawDatabase(directory)

        // Flip one bit of the sealed key.
        try raw.write { db in
            try db.execute(
                sql: """
                    UPDATE credential SET sealedPrivateKey =
                        substr(sealedPrivateKey, 1, 20) || X'FF' || substr(sealedPrivateKey, 22) WHERE id = ?
                    """,
                arguments: [Data(first.id)]
            )
        }
        #expect(throws: StoreError(.corrupt, "")) { try store.credential(id: first.id) }
        #expect(throws: StoreError(.corrupt, "")) { try store.allCredentials() }
        #expect(try store.credential(id: second.id) == second)

        // Copy a valid sealed key to another credential: the AAD binds it to its ID.
        try raw.write { db in
            try db.execute(
                sql: """
                    UPDATE credential SET sealedPrivateKey =
                        (SELECT sealedPrivateKey FROM credential WHERE id = ?) WHERE id = ?
                    """,
                arguments: [Data(second.id), Data(first.id)]
            )
        }
        #expect(throws: StoreError(.corrupt, "")) { try store.credential(id: first.id) }

        // A sealed account record moved to another credential, a column of the wrong
        // type, and an out-of-range credProtect.
        let third = try store.save(sampleCredential())
        try raw.write { db in
            try db.execute(
                sql: "UPDATE credential SET sealedAccount = (SELECT sealedAccount FROM credential WHERE id = ?) WHERE id = ?",
                arguments: [Data(second.id), Data(third.id)]
            )
        }
        #expect(throws: StoreError(.corrupt, "")) { try store.credential(id: third.id) }
        try raw.write { db in
            try db.execute(sql: "UPDATE credential SET algorithm = X'00' WHERE id = ?", arguments: [Data(second.id)])
        }
        #expect(throws: StoreError(.corrupt, "")) { try store.credential(id: second.id) }
        try raw.write { db in
            try db.execute(
                sql: "UPDATE credential SET algorithm = -7, credProtect = 300 WHERE id = ?",
                arguments: [Data(second.id)]
            )
        }
        #expect(throws: StoreError(.corrupt, "")) { try store.credential(id: second.id) }
        try raw.close()
    }

    @Test("a secret moved to another name or tampered with is corrupt")
    func tamperedSecret() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        try store.setSecret([1, 2, 3, 4], named: "a")
        try store.setSecret([5, 6, 7, 8], named: "b")
        let raw = try rawDatabase(directory)
        try raw.write { db in
            try db.execute(
                sql:
                    "UPDATE secret SET sealedValue = (SELECT sealedValue FROM secret WHERE name = 'a') WHERE name = 'b'"
            )
            try db.execute(sql: "UPDATE secret SET sealedValue = X'0102' WHERE name = 'a'")
        }
        try raw.close()
        #expect(throws: StoreError(.corrupt, "")) { try store.secret(named: "b") }
        #expect(throws: StoreError(.corrupt, "")) { try store.secret(named: "a") }
    }

    // MARK: Files and the lock

    @Test("the database, its write-ahead log and the lock file have mode 0600")
    func fileModes() throws {
        let directory = try TemporaryDirectory()
        let previous = umask(0o022)
        defer { umask(previous) }
        let store = try openStore(directory)
        try store.save(sampleCredential())
        #expect(try permissions(directory.file("store.db")) == 0o600)
        #expect(try permissions(directory.file("store.db.lock")) == 0o600)
        #expect(try permissions(directory.file("store.db-wal")) == 0o600)
    }

    @Test("an existing database file with a looser mode is tightened to 0600")
    func tightensLooseMode() throws {
        let directory = try TemporaryDirectory()
        do { _ = try openStore(directory) }
        chmod(directory.file("store.db"), 0o644)
        chmod(directory.file("store.db.lock"), 0o666)
        _ = try openStore(directory)
        #expect(try permissions(directory.file("store.db")) == 0o600)
        #expect(try permissions(directory.file("store.db.lock")) == 0o600)
    }

    @Test("a second open of the same store is locked, with a reason naming the path")
    func secondOpenIsLocked() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let error = #expect(throws: StoreError.self) { try openStore(directory) }
        #expect(error?.code == .locked)
        #expect(error?.reason.contains(directory.file("store.db")) == true)
        _ = try store.credentialCount()
    }

    @Test("opening a store in a missing directory is an I/O error, not a crash")
    func missingDirectory() throws {
        let directory = try TemporaryDirectory()
        let error = #expect(throws: StoreError.self) {
            try SQLiteCredentialStore(path: directory.file("absent/store.db"), masterKey: masterKey)
        }
        #expect(error?.code == .io)
    }

    @Test("reopening after release keeps every credential, secret and the schema version")
    func reopenKeepsData() throws {
        let directory = try TemporaryDirectory()
        var saved: [StoredCredential] = []
        do {
            let store = try openStore(directory)
            for _ in 0..<4 { saved.append(try store.save(sampleCredential())) }
            try store.setSecret([9, 9, 9], named: "pin")
        }
        let store = try openStore(directory)
        #expect(try store.allCredentials() == saved.reversed())
        #expect(try store.secret(named: "pin") == [9, 9, 9])
        let raw = try rawDatabase(directory)
        let migrations = try raw.read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(migrations == ["v1", "v2", "v3", "v4"])
        let journal = try raw.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journal == "wal")
        try raw.close()
    }

    @Test("the store's connection uses WAL, synchronous = FULL and foreign keys")
    func connectionSettings() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let (journal, synchronous, foreignKeys) = try store.database.read { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode"),
                try Int.fetchOne(db, sql: "PRAGMA synchronous"),
                try Int.fetchOne(db, sql: "PRAGMA foreign_keys")
            )
        }
        #expect(journal == "wal")
        // 2 = FULL: every commit fsyncs the write-ahead log.
        #expect(synchronous == 2)
        #expect(foreignKeys == 1)
    }

    // MARK: Signature counters

    @Test("counter values start at 1 and strictly increase per scope")
    func countersIncrease() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        #expect(try store.nextSignatureCounter(scope: [1]) == 1)
        #expect(try store.nextSignatureCounter(scope: []) == 1)
        var previous: UInt32 = 1
        for _ in 0..<100 {
            let value = try store.nextSignatureCounter(scope: [1])
            #expect(value == previous + 1)
            previous = value
        }
        #expect(try store.nextSignatureCounter(scope: [2]) == 1)
        #expect(try store.nextSignatureCounter(scope: []) == 2)
    }

    @Test("after a reopen, counters start above every value returned before")
    func countersAcrossReopen() throws {
        let directory = try TemporaryDirectory()
        var highest: [[UInt8]: UInt32] = [:]
        for round in 0..<5 {
            let store = try openStore(directory)
            for scope in [[], [7], [8, 8]] as [[UInt8]] {
                let first = try store.nextSignatureCounter(scope: scope)
                #expect(first > highest[scope, default: 0])
                var last = first
                for _ in 0..<(round * 13) {
                    let value = try store.nextSignatureCounter(scope: scope)
                    #expect(value > last)
                    last = value
                }
                highest[scope] = last
            }
        }
    }

    @Test("the global counter scope is stored as an empty blob, not NULL")
    func globalScopeIsEmptyBlob() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        _ = try store.nextSignatureCounter(scope: [])
        let raw = try rawDatabase(directory)
        let type = try raw.read { db in try String.fetchOne(db, sql: "SELECT typeof(scope) FROM signatureCounter") }
        try raw.close()
        #expect(type == "blob")
    }

    @Test("deleting a credential removes its counter; reset keeps only the global counter")
    func counterRows() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let first = try store.save(sampleCredential())
        let second = try store.save(sampleCredential())
        _ = try store.nextSignatureCounter(scope: first.id)
        _ = try store.nextSignatureCounter(scope: second.id)
        var global: UInt32 = 0
        for _ in 0..<40 { global = try store.nextSignatureCounter(scope: []) }

        let raw = try rawDatabase(directory)
        func scopes() throws -> Set<[UInt8]> {
            try raw.read { db in
                Set(try Data.fetchAll(db, sql: "SELECT scope FROM signatureCounter").map { [UInt8]($0) })
            }
        }
        #expect(try scopes() == [first.id, second.id, []])
        try store.deleteCredential(id: first.id)
        #expect(try scopes() == [second.id, []])
        try store.reset()
        #expect(try scopes() == [[]])
        try raw.close()
        #expect(try store.nextSignatureCounter(scope: []) > global)
        // Replacing a credential removes the replaced one's counter too.
        let old = try store.save(sampleCredential(userId: [1]))
        _ = try store.nextSignatureCounter(scope: old.id)
        let replacement = try store.save(sampleCredential(userId: [1]))
        let raw2 = try rawDatabase(directory)
        let left = try raw2.read { db in
            Set(try Data.fetchAll(db, sql: "SELECT scope FROM signatureCounter").map { [UInt8]($0) })
        }
        try raw2.close()
        // The new credential's scope comes with its first reservation (saved in
        // the same commit); the replaced one's is gone.
        #expect(left == [replacement.id, []])
    }

    @Test("a new credential's first signature counts need no commit of their own, and survive a reopen")
    func newCredentialCounterReservedWithSave() throws {
        let directory = try TemporaryDirectory()
        let credential: StoredCredential
        var values: [UInt32] = []
        do {
            let store = try openStore(directory)
            credential = try store.save(sampleCredential(userId: [7]))
            let raw = try rawDatabase(directory)
            let reserved = try raw.read { db in
                try Int64.fetchOne(
                    db, sql: "SELECT reserved FROM signatureCounter WHERE scope = ?", arguments: [Data(credential.id)])
            }
            try raw.close()
            #expect(reserved == 1 + Int64(SignatureCounter.block))
            for _ in 0..<3 { values.append(try store.nextSignatureCounter(scope: credential.id)) }
        }
        #expect(values == [1, 2, 3])
        // A restart resumes above every value handed out.
        let reopened = try openStore(directory)
        #expect(try reopened.nextSignatureCounter(scope: credential.id) > 3)
    }

    @Test("raising a new credential's counter above its start keeps counting from 1; above it, jumps past")
    func raiseAfterSave() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let fresh = try store.save(sampleCredential(userId: [9]))
        try store.raiseSignatureCounter(scope: fresh.id, above: 0)
        #expect(try store.nextSignatureCounter(scope: fresh.id) == 1, "an imported credential with count 0 starts at 1")
        let seeded = try store.save(sampleCredential(userId: [10]))
        try store.raiseSignatureCounter(scope: seeded.id, above: 1000)
        #expect(try store.nextSignatureCounter(scope: seeded.id) == 1001)
    }

    @Test("saving under an ID that already has a counter keeps that counter")
    func savedAgainKeepsCounter() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let credential = try store.save(sampleCredential(userId: [8]))
        try store.raiseSignatureCounter(scope: credential.id, above: 1000)
        var again = credential
        again.userName = "renamed"
        try store.save(again)
        #expect(try store.nextSignatureCounter(scope: credential.id) > 1000)
    }

    @Test("the global counter keeps increasing across reset and reopen")
    func globalCounterSurvivesReset() throws {
        let directory = try TemporaryDirectory()
        var last: UInt32 = 0
        do {
            let store = try openStore(directory)
            for _ in 0..<5 { last = try store.nextSignatureCounter(scope: []) }
            try store.reset()
        }
        let store = try openStore(directory)
        #expect(try store.nextSignatureCounter(scope: []) > last)
    }

    @Test("a counter at UInt32.max refuses to go further instead of wrapping")
    func counterSaturates() throws {
        let directory = try TemporaryDirectory()
        do { _ = try openStore(directory) }
        let raw = try rawDatabase(directory)
        try raw.write { db in
            try db.execute(
                sql: "INSERT INTO signatureCounter (scope, reserved) VALUES (?, ?)",
                arguments: [Data([5]), Int64(UInt32.max) - 2]
            )
        }
        try raw.close()
        do {
            let store = try openStore(directory)
            #expect(try store.nextSignatureCounter(scope: [5]) == UInt32.max - 2)
            #expect(try store.nextSignatureCounter(scope: [5]) == UInt32.max - 1)
            #expect(try store.nextSignatureCounter(scope: [5]) == UInt32.max)
            let error = #expect(throws: StoreError.self) { try store.nextSignatureCounter(scope: [5]) }
            #expect(error?.reason.contains("UInt32.max") == true)
            #expect(throws: StoreError.self) { try store.nextSignatureCounter(scope: [5]) }
            #expect(try store.nextSignatureCounter(scope: [6]) == 1)
        }
        let store = try openStore(directory)
        #expect(throws: StoreError.self) { try store.nextSignatureCounter(scope: [5]) }
    }

    @Test("counter values taken from many threads at once are all distinct")
    func countersConcurrent() async throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let values = try await withThrowingTaskGroup(of: [UInt32].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var taken: [UInt32] = []
                    for _ in 0..<150 { taken.append(try store.nextSignatureCounter(scope: [3])) }
                    return taken
                }
            }
            var all: [UInt32] = []
            for try await taken in group {
                #expect(zip(taken, taken.dropFirst()).allSatisfy { $0 < $1 })
                all += taken
            }
            return all
        }
        #expect(Set(values).count == 600)
        #expect(values.max() == 600)
    }

    // MARK: Full disk and error mapping

    @Test("a full database makes save throw .full and keeps every earlier credential")
    func fullDisk() throws {
        let directory = try TemporaryDirectory()
        var saved: [StoredCredential] = []
        do {
            let store = try openStore(directory)
            for _ in 0..<3 { saved.append(try store.save(sampleCredential())) }
        }
        // Cap the file at its current size plus one page: SQLite then answers
        // SQLITE_FULL exactly as when the disk is full.
        let store = try SQLiteCredentialStore(
            path: directory.file("store.db"),
            masterKey: masterKey,
            prepareDatabase: { db in
                let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                _ = try Int.fetchOne(db, sql: "PRAGMA max_page_count = \(pages + 1)")
            }
        )
        let bigName = String(repeating: "n", count: 1500)
        var failure: StoreError?
        for _ in 0..<50 {
            do {
                saved.append(try store.save(sampleCredential(userName: bigName)))
            } catch {
                failure = error
                break
            }
        }
        let error = try #require(failure)
        #expect(error.code == .full)
        #expect(error.reason.contains("save a credential"))
        #expect(try store.allCredentials() == saved.reversed())
        for credential in saved {
            #expect(try store.credential(id: credential.id) == credential)
        }
        // Smaller writes that fit still work after the failure.
        try store.setSecret([1], named: "small")
        #expect(try store.secret(named: "small") == [1])
    }

    @Test(
        "SQLite result codes map to store error codes",
        arguments: [
            (ResultCode.SQLITE_FULL, StoreError.Code.full),
            (.SQLITE_BUSY, .locked),
            (.SQLITE_LOCKED, .locked),
            (.SQLITE_CORRUPT, .corrupt),
            (.SQLITE_NOTADB, .corrupt),
            (.SQLITE_IOERR, .io),
            (.SQLITE_CANTOPEN, .io),
            (.SQLITE_CONSTRAINT, .io),
        ]
    )
    func resultCodeMapping(resultCode: ResultCode, code: StoreError.Code) {
        let error = StoreError.mapping(
            DatabaseError(resultCode: resultCode, message: "message"),
            "do something",
            path: "/nonexistent/dir/store.db"
        )
        #expect(error.code == code)
        #expect(error.reason.contains("do something"))
        #expect(error.reason.contains("/nonexistent/dir/store.db"))
    }

    @Test("ENOSPC and EDQUOT from a system call map to .full, other errno values to .io")
    func errnoMapping() {
        #expect(PathCallError(call: "write", path: "/x", errno: ENOSPC).storeError("w").code == .full)
        #expect(PathCallError(call: "write", path: "/x", errno: EDQUOT).storeError("w").code == .full)
        let other = PathCallError(call: "open", path: "/x/y", errno: EACCES).storeError("open it")
        #expect(other.code == .io)
        #expect(other.reason.contains("open(/x/y)") && other.reason.contains("errno \(EACCES)"))
    }
}
