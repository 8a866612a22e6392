// Issue 26 in the store: a copy of its files without the key names no site and
// no account (the relying party and user are sealed, rows found by keyed
// hashes); a reset replaces the data key, so a row saved before it no longer
// opens; deleted content is overwritten and leaves the log; and a v3 store
// migrates to all this without losing a credential, secret or counter.

import CTAP
import Foundation
import GRDB
import LatchkeyCrypto
import Testing

@testable import LatchkeyStore

@Suite("SQLite store: secrets at rest")
struct SecretsAtRestTests {
    /// A credential whose every naming field is a distinctive string.
    private func namedCredential(_ tag: String) -> StoredCredential {
        var credential = sampleCredential(
            rpId: "bank-\(tag).example", userId: Array("handle-\(tag)-0123456789".utf8), userName: "user-\(tag)@mail.example"
        )
        credential.rpName = "Bank \(tag) Online"
        credential.userDisplayName = "Display Person \(tag)"
        return credential
    }

    /// Every byte string a copy of the store must not show for `credential`.
    private func names(of credential: StoredCredential) -> [(String, [UInt8])] {
        [
            ("rpId", Array(credential.rpId.utf8)), ("rpName", Array(credential.rpName!.utf8)),
            ("userName", Array(credential.userName!.utf8)), ("displayName", Array(credential.userDisplayName!.utf8)),
            ("user handle", credential.userId), ("rpIdHash (SHA-256 of the rpId)", credential.rpIdHash),
        ]
    }

    private func expectNoNames(_ credentials: [StoredCredential], in directory: TemporaryDirectory, _ when: String) {
        for file in ["store.db", "store.db-wal"] {
            let bytes = fileBytes(directory.file(file))
            for credential in credentials {
                for (what, needle) in names(of: credential) {
                    #expect(!contains(bytes, needle), "\(file) shows the \(what) in clear \(when)")
                }
            }
        }
    }

    @Test("the store file and its log name no relying party, user or user handle, while open and after")
    func noNamesInTheFiles() throws {
        let directory = try TemporaryDirectory()
        var credentials = (0..<4).map { namedCredential("n\($0)") }
        do {
            let store = try openStore(directory)
            for credential in credentials { try store.save(credential) }
            // A renamed user: the new names are sealed too.
            credentials[0].userName = "renamed-\(credentials[0].userName!)"
            credentials[0].userDisplayName = "Renamed \(credentials[0].userDisplayName!)"
            #expect(try store.update(credentials[0]))
            expectNoNames(credentials, in: directory, "while the store is open")
            // Lookups by RP and by (RP, user) still work through the keyed hashes.
            let found = try store.credentials(rpIdHash: credentials[1].rpIdHash)
            #expect(found.map(\.id) == [credentials[1].id])
            #expect(found.first?.rpId == credentials[1].rpId)
            #expect(found.first?.userName == credentials[1].userName)
            #expect(try store.containsCredential(rpIdHash: credentials[2].rpIdHash, userId: credentials[2].userId))
            #expect(try !store.containsCredential(rpIdHash: credentials[2].rpIdHash, userId: credentials[3].userId))
            #expect(try store.credential(id: credentials[0].id)?.userDisplayName == credentials[0].userDisplayName)
        }
        expectNoNames(credentials, in: directory, "after it closed")
        let reopened = try openStore(directory)
        #expect(Set(try reopened.allCredentials().map(\.rpId)) == Set(credentials.map(\.rpId)))
    }

    @Test("a second credential for the same account replaces the first through the keyed hashes")
    func replacesByKeyedHash() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let first = try store.save(namedCredential("same"))
        var second = namedCredential("same")
        second.userId = first.userId
        try store.save(second)
        #expect(try store.allCredentials().map(\.id) == [second.id])
        #expect(try store.credential(id: first.id) == nil)
    }

    @Test("secure_delete is on, and temporary data stays in memory")
    func secureDelete() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let (secureDelete, tempStore) = try store.database.read { db in
            (try Int.fetchOne(db, sql: "PRAGMA secure_delete"), try Int.fetchOne(db, sql: "PRAGMA temp_store"))
        }
        #expect(secureDelete == 1)
        #expect(tempStore == 2)  // MEMORY
    }

    @Test("a deleted credential's sealed bytes are gone from the file and the log is truncated")
    func deleteLeavesNothing() throws {
        let directory = try TemporaryDirectory()
        let store = try openStore(directory)
        let kept = try store.save(namedCredential("kept"))
        let deleted = try store.save(namedCredential("gone"))
        let sealed = try rawDatabase(directory).read { db in
            try Data.fetchAll(
                db, sql: "SELECT sealedPrivateKey FROM credential WHERE id = ? UNION ALL "
                    + "SELECT sealedAccount FROM credential WHERE id = ?",
                arguments: [Data(deleted.id), Data(deleted.id)]
            ).map { [UInt8]($0) }
        }
        #expect(sealed.count == 2)
        #expect(try store.deleteCredential(id: deleted.id))
        #expect(fileBytes(directory.file("store.db-wal")).isEmpty, "the log is checkpointed and truncated")
        let file = fileBytes(directory.file("store.db"))
        for value in sealed { #expect(!contains(file, value), "a deleted row's sealed value is still in the file") }
        #expect(try store.credential(id: kept.id) == kept)
    }

    @Test("after a reset, a credential row saved from before no longer decrypts")
    func resetRotatesTheDataKey() throws {
        let directory = try TemporaryDirectory()
        let old = try rotate(directory)
        // The same after reopening: the new key is the store's.
        let reopened = try openStore(directory)
        #expect(throws: StoreError.self) { try reopened.credential(id: old.id) }
        #expect(try reopened.secret(named: "device.aaguid") == [1, 2, 3])
    }

    /// Saves a credential, resets, puts the old row back behind the store's
    /// back, and checks that it no longer opens; returns the old credential.
    private func rotate(_ directory: TemporaryDirectory) throws -> StoredCredential {
        let store = try openStore(directory)
        let old = try store.save(namedCredential("before"))
        try store.setSecret([1, 2, 3], named: "device.aaguid")
        // What a backup or an old log frame keeps: the row as it was, and the data key's wrapping.
        let (row, oldWrappedKey) = try rawDatabase(directory).read { db in
            (
                try #require(try Row.fetchOne(db, sql: "SELECT * FROM credential WHERE id = ?", arguments: [Data(old.id)])),
                try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'dataKey'")
            )
        }
        try store.reset()
        #expect(fileBytes(directory.file("store.db-wal")).isEmpty, "a reset truncates the log")
        let newWrappedKey = try rawDatabase(directory).read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'dataKey'")
        }
        #expect(newWrappedKey != oldWrappedKey)
        #expect(try store.secret(named: "device.aaguid") == [1, 2, 3], "the device's identity survives, re-sealed")
        // The old row, put back behind the store's back.
        try rawDatabase(directory).write { db in
            let columns = Array(row.columnNames)
            try db.execute(
                sql: "INSERT INTO credential (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))",
                arguments: StatementArguments(columns.map { row[$0] as DatabaseValue })
            )
        }
        let error = #expect(throws: StoreError.self) { try store.credential(id: old.id) }
        #expect(error?.code == .corrupt)
        #expect(try store.credentials(rpIdHash: old.rpIdHash).isEmpty, "its keyed hash is not the new key's")
        return old
    }

    @Test("a credential saved after a reset opens under the new key, in this process and the next")
    func savesAfterReset() throws {
        let directory = try TemporaryDirectory()
        let saved: StoredCredential
        do {
            let store = try openStore(directory)
            try store.save(namedCredential("a"))
            try store.reset()
            saved = try store.save(namedCredential("b"))
            #expect(try store.credentials(rpIdHash: saved.rpIdHash) == [saved])
        }
        #expect(try openStore(directory).allCredentials() == [saved])
    }

    @Test("a v3 store migrates to v4: every credential, secret, counter and sequence kept, no name left in clear")
    func migratesFromV3() throws {
        let directory = try TemporaryDirectory()
        var saved: [StoredCredential] = []
        let highWater: Int64
        do {
            let legacy = try LegacyStore(directory, version: "v3")
            for index in 0..<4 {
                var credential = namedCredential("m\(index)")
                if index == 1 {
                    credential.credRandom = SecureRandom.bytes(count: 64)
                    credential.credBlob = [9, 9]
                    credential.largeBlobKey = SecureRandom.bytes(count: 32)
                    credential.thirdPartyPayment = true
                    credential.credProtect = 3
                }
                if index == 2 {
                    credential.rpName = nil
                    credential.userDisplayName = nil
                }
                saved.append(try legacy.insert(credential))
            }
            // The newest is deleted: the sequence's high-water mark stays above every row.
            let last = saved.removeLast()
            highWater = last.sequence
            try rawDatabase(directory).write { db in
                try db.execute(sql: "DELETE FROM credential WHERE id = ?", arguments: [Data(last.id)])
            }
            try legacy.setSecret(Array("pin hash".utf8), named: "pin-hash")
            try legacy.setSecret([5], named: "device.aaguid")
            try legacy.reserve(scope: saved[0].id, upTo: 65)
            try legacy.reserve(scope: [], upTo: 1000)
        }
        let store = try openStore(directory)
        #expect(try store.allCredentials() == saved.reversed())
        #expect(try store.credentials(rpIdHash: saved[1].rpIdHash) == [saved[1]])
        #expect(try store.secret(named: "pin-hash") == Array("pin hash".utf8))
        #expect(try store.secret(named: "device.aaguid") == [5])
        #expect(try store.nextSignatureCounter(scope: saved[0].id) >= 65)
        #expect(try store.nextSignatureCounter(scope: []) >= 1000)
        let next = try store.save(namedCredential("after"))
        #expect(next.sequence > highWater, "a sequence is never reused across the migration")
        var names = saved
        names.removeAll { $0.rpName == nil || $0.userDisplayName == nil }
        expectNoNames(names, in: directory, "after the migration")
        for credential in saved {
            #expect(!contains(fileBytes(directory.file("store.db")), Array(credential.rpId.utf8)))
        }
        let migrations = try rawDatabase(directory).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(migrations == ["v1", "v2", "v3", "v4"])
    }

    @Test("a v3 store opened with the wrong master key is refused before anything is migrated")
    func migrationNeedsTheRightKey() throws {
        let directory = try TemporaryDirectory()
        let credential: StoredCredential
        do {
            let legacy = try LegacyStore(directory, version: "v3")
            credential = try legacy.insert(namedCredential("wrong"))
        }
        let error = #expect(throws: StoreError.self) { try openStore(directory, key: otherMasterKey) }
        #expect(error?.code == .corrupt)
        let migrations = try rawDatabase(directory).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        #expect(migrations == ["v1", "v2", "v3"])
        #expect(try openStore(directory).allCredentials() == [credential])
    }

    @Test("account records round-trip, and anything else is corrupt, never a trap")
    func accountRecords() throws {
        let record = AccountRecord(
            rpId: "example.com", rpIdHash: SHA256.hash(Array("example.com".utf8)), rpName: nil,
            userId: [0, 1, 2], userName: "ü", userDisplayName: ""
        )
        let encoded = record.encoded
        #expect(encoded.count % 32 == 0)
        #expect(try AccountRecord(decoding: encoded, what: "test") == record)
        let broken: [[UInt8]] = [
            [], [2] + Array(encoded.dropFirst()), Array(encoded.prefix(10)), encoded + [1], [1, 1, 0xff, 0xff, 0xff, 0xff],
        ]
        for bytes in broken {
            #expect(throws: StoreError(.corrupt, "")) { try AccountRecord(decoding: bytes, what: "test") }
        }
    }
}
