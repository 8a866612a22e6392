// The store's schema, versioned through GRDB's DatabaseMigrator. A migration,
// once released, never changes: a new schema is a new migration.
//
// v1 to v3 need no key. v4 (a data key per store; every value sealed under
// it; the relying party and user sealed, found by keyed hashes) re-seals what
// the store holds, so it needs the master key: the store runs the migrations
// up to v3, checks the master key, then runs v4 (SQLiteCredentialStore.init).

import CTAP
import Foundation
import GRDB
import LatchkeyCrypto

enum Schema {
    /// The last migration that needs no key.
    static let lastKeylessMigration = "v3"

    /// Every migration, in order; `masterKey` seals v4's data key.
    static func migrator(masterKey: Sealer) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // `sequence` is the creation order: AUTOINCREMENT never reuses a
            // value, even after deletes or a reset.
            try db.execute(
                sql: """
                    CREATE TABLE credential (
                        sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                        id BLOB NOT NULL UNIQUE,
                        rpId TEXT NOT NULL,
                        rpIdHash BLOB NOT NULL,
                        rpName TEXT,
                        userId BLOB NOT NULL,
                        userName TEXT,
                        userDisplayName TEXT,
                        algorithm INTEGER NOT NULL,
                        sealedPrivateKey BLOB NOT NULL,
                        credProtect INTEGER NOT NULL,
                        UNIQUE (rpIdHash, userId)
                    );
                    CREATE TABLE secret (
                        name TEXT PRIMARY KEY NOT NULL,
                        sealedValue BLOB NOT NULL
                    ) WITHOUT ROWID;
                    -- `reserved` bounds every counter value ever handed out
                    -- for the scope (exclusive): the next process starts there.
                    CREATE TABLE signatureCounter (
                        scope BLOB PRIMARY KEY NOT NULL,
                        reserved INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    -- Store-wide values; `keyCheck` holds a value sealed under
                    -- the master key so a wrong key fails at open.
                    CREATE TABLE meta (
                        key TEXT PRIMARY KEY NOT NULL,
                        value BLOB NOT NULL
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v2") { db in
            // Extension data (CTAP 2.1 §12), each value sealed like the
            // private key; NULL when the credential was made without it.
            try db.execute(
                sql: """
                    ALTER TABLE credential ADD COLUMN sealedCredRandom BLOB;
                    ALTER TABLE credential ADD COLUMN sealedCredBlob BLOB;
                    ALTER TABLE credential ADD COLUMN sealedLargeBlobKey BLOB;
                    """
            )
        }
        migrator.registerMigration("v3") { db in
            // The thirdPartyPayment extension's flag (CTAP 2.2 §12.9): 1 for a
            // credential made as a payment credential. Not secret, so plain.
            try db.execute(
                sql: "ALTER TABLE credential ADD COLUMN thirdPartyPayment INTEGER NOT NULL DEFAULT 0"
            )
        }
        migrator.registerMigration("v4") { db in
            try migrateToDataKey(db, masterKey: masterKey)
        }
        return migrator
    }

    /// v4: makes the store's data key, re-seals every credential and secret
    /// under it, replaces the plaintext rpId, rpIdHash, rpName, userId,
    /// userName and userDisplayName columns with one sealed account record and
    /// two keyed hashes, and keeps every `sequence` (and the table's
    /// AUTOINCREMENT high-water mark, so no sequence is ever reused).
    private static func migrateToDataKey(_ db: Database, masterKey: Sealer) throws {
        let dataKey = SecureRandom.bytes(count: Sealer.keySize)
        let sealedDataKey = try masterKey.seal(dataKey, .dataKey, context: [], what: "the data key")
        try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('dataKey', ?)", arguments: [Data(sealedDataKey)])
        let keys = DataKeys(dataKey: dataKey)
        try db.execute(
            sql: """
                CREATE TABLE credential_v4 (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    id BLOB NOT NULL UNIQUE,
                    -- HMAC of the rpIdHash under the data key: found by, never read.
                    rpKey BLOB NOT NULL,
                    -- HMAC of (rpIdHash, userId): the account a new credential replaces.
                    userKey BLOB NOT NULL,
                    -- rpId, rpIdHash, rpName, userId, userName, userDisplayName (AccountRecord).
                    sealedAccount BLOB NOT NULL,
                    algorithm INTEGER NOT NULL,
                    sealedPrivateKey BLOB NOT NULL,
                    credProtect INTEGER NOT NULL,
                    sealedCredRandom BLOB,
                    sealedCredBlob BLOB,
                    sealedLargeBlobKey BLOB,
                    thirdPartyPayment INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (rpKey, userKey)
                );
                """
        )
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT sequence, id, rpId, rpIdHash, rpName, userId, userName, userDisplayName, algorithm,
                       sealedPrivateKey, credProtect, sealedCredRandom, sealedCredBlob, sealedLargeBlobKey,
                       thirdPartyPayment
                FROM credential
                """
        )
        for row in rows {
            let columns = RowReader(row: row, path: "the store being migrated to v4")
            let id = try columns.blob("id")
            func reseal(_ column: String, _ domain: Sealer.Domain) throws(StoreError) -> Data? {
                guard let sealed = try columns.optionalBlob(column) else { return nil }
                let value = try masterKey.open(sealed, domain, context: id, what: "a credential's \(column)")
                return Data(try keys.sealer.seal(value, domain, context: id, what: "a credential's \(column)"))
            }
            let rpIdHash = try columns.blob("rpIdHash")
            let userId = try columns.blob("userId")
            let account = AccountRecord(
                rpId: try columns.text("rpId"), rpIdHash: rpIdHash, rpName: try columns.optionalText("rpName"),
                userId: userId, userName: try columns.optionalText("userName"),
                userDisplayName: try columns.optionalText("userDisplayName")
            )
            let sealedAccount = try keys.sealer.seal(account.encoded, .account, context: id, what: "an account")
            try db.execute(
                sql: """
                    INSERT INTO credential_v4 (sequence, id, rpKey, userKey, sealedAccount, algorithm,
                                               sealedPrivateKey, credProtect, sealedCredRandom, sealedCredBlob,
                                               sealedLargeBlobKey, thirdPartyPayment)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    try columns.integer("sequence"), Data(id), Data(keys.relyingPartyKey(rpIdHash: rpIdHash)),
                    Data(keys.userKey(rpIdHash: rpIdHash, userId: userId)), Data(sealedAccount),
                    try columns.integer("algorithm"), try reseal("sealedPrivateKey", .credential),
                    try columns.integer("credProtect"), try reseal("sealedCredRandom", .credRandom),
                    try reseal("sealedCredBlob", .credBlob), try reseal("sealedLargeBlobKey", .largeBlobKey),
                    try columns.integer("thirdPartyPayment"),
                ]
            )
        }
        let highWater = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'credential'")
        try db.execute(sql: "DROP TABLE credential")
        try db.execute(sql: "ALTER TABLE credential_v4 RENAME TO credential")
        if let highWater {
            try db.execute(
                sql: "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'credential'", arguments: [highWater]
            )
            if db.changesCount == 0 {
                try db.execute(
                    sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('credential', ?)", arguments: [highWater]
                )
            }
        }
        for secret in try Row.fetchAll(db, sql: "SELECT name, sealedValue FROM secret") {
            let columns = RowReader(row: secret, path: "the store being migrated to v4")
            let name = try columns.text("name")
            let context = Array(name.utf8)
            let value = try masterKey.open(
                try columns.blob("sealedValue"), .secret, context: context, what: "secret \"\(name)\""
            )
            let sealed = try keys.sealer.seal(value, .secret, context: context, what: "secret \"\(name)\"")
            try db.execute(
                sql: "UPDATE secret SET sealedValue = ? WHERE name = ?", arguments: [Data(sealed), name]
            )
        }
    }
}
