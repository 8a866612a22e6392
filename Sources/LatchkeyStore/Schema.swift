// The store's schema, versioned through GRDB's DatabaseMigrator. A migration,
// once released, never changes: a new schema is a new migration.

import GRDB

enum Schema {
    /// Every migration, in order.
    static var migrator: DatabaseMigrator {
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
        return migrator
    }
}
