// The durable credential store of one virtual key: a SQLite database (WAL,
// synchronous = FULL, secure_delete) through GRDB; private keys, secrets and
// the names of relying parties and users sealed under the store's data key,
// which the master key wraps and every reset replaces (Sealing.swift); an
// exclusive lock file so two daemons never share it; and signature counters
// that never repeat (see SignatureCounter.swift). The statements of the
// request path go through GRDB's statement cache: preparing them anew took a
// tenth of the daemon's CPU under load (issue 16).

public import CTAP
import Foundation
import GRDB
import LatchkeyCrypto
import Synchronization

/// A `CredentialStore` in a SQLite file.
///
/// Every mutating call commits (and SQLite fsyncs the write-ahead log) before
/// it returns. Private keys, secrets and each credential's relying party and
/// user are sealed with AES-256-GCM under the store's data key, itself sealed
/// under the master key; rows are found by HMACs under the data key, never by
/// a name or an unkeyed hash. Deleted content is overwritten (secure_delete),
/// and the write-ahead log is checkpointed and truncated after a deletion or a
/// reset. The store holds an exclusive lock on `<path>.lock` until it is
/// released.
public final class SQLiteCredentialStore: CredentialStore {
    /// The database file.
    public let path: String

    /// The one connection; internal so tests can read its settings.
    let database: DatabaseQueue
    /// Seals only the data key and the key check.
    private let masterSealer: Sealer
    /// The current data key's sealer and lookup key. Read and replaced only
    /// inside `database` blocks, so a value is always sealed under the key of
    /// the transaction that stores it, even while a reset replaces the key.
    private let keys: Mutex<DataKeys>
    private let lock: LockFile
    /// Counter state per scope. Touched only inside `database` write blocks,
    /// which serialise it with the rows it mirrors.
    private let counters = Mutex<[[UInt8]: SignatureCounter]>([:])

    /// Opens the store at `path`, creating the database (mode 0600) when it
    /// does not exist; its directory must exist.
    ///
    /// - Parameter masterKey: 32 bytes; see `MasterKeyFile`.
    /// - Throws: `.locked` when another process or object holds the store,
    ///   `.corrupt` when `masterKey` is not the store's key or the file is not
    ///   a store, `.full` or `.io` when the file cannot be created or opened.
    public convenience init(path: String, masterKey: [UInt8]) throws(StoreError) {
        try self.init(path: path, masterKey: masterKey, prepareDatabase: nil)
    }

    /// - Parameter prepareDatabase: runs on the connection after the store's
    ///   own settings (tests use it to cap the file size).
    init(
        path: String,
        masterKey: [UInt8],
        prepareDatabase: (@Sendable (Database) throws -> Void)?
    ) throws(StoreError) {
        guard masterKey.count == Sealer.keySize else {
            throw StoreError(.corrupt, "the master key of store \(path) has \(masterKey.count) bytes, not 32")
        }
        self.path = path
        let masterSealer = Sealer(key: masterKey)
        self.masterSealer = masterSealer
        // The lock comes first: nothing touches the database of a store in use.
        self.lock = try LockFile(path: path + ".lock", storePath: path)
        do {
            // SQLite would create the file 0644; the -wal and -shm files take
            // the database file's mode.
            try Posix.createFileIfMissing(path, mode: 0o600)
        } catch {
            throw error.storeError("cannot create store \(path)")
        }

        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .immediateError
        configuration.label = "latchkey.store"
        configuration.prepareDatabase { db in
            // Not `configuration.journalMode = .wal`: GRDB then lowers
            // `synchronous` to NORMAL, which may lose the last commits on
            // power loss. FULL fsyncs the log at every commit.
            let journalMode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            guard journalMode == "wal" else {
                throw StoreError(
                    .io,
                    "cannot switch store \(path) to WAL (journal mode is \(journalMode ?? "unknown"))"
                )
            }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Deleted rows and freed pages are overwritten with zeros rather than
            // left in the file; temporary tables and indices stay in memory.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            try prepareDatabase?(db)
        }
        do {
            database = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw StoreError.mapping(error, "open the database", path: path)
        }
        let migrator = Schema.migrator(masterKey: masterSealer)
        let pending: Bool
        do {
            // GRDB refuses (traps) to migrate up to a migration the file is past.
            pending = try database.read { try !migrator.hasCompletedMigrations($0) }
            if pending { try migrator.migrate(database, upTo: Schema.lastKeylessMigration) }
        } catch {
            throw StoreError.mapping(error, "migrate the schema", path: path)
        }
        try Self.checkMasterKey(database, masterSealer, path: path)
        do {
            try migrator.migrate(database)
        } catch {
            throw StoreError.mapping(error, "migrate the schema to sealed names", path: path)
        }
        keys = Mutex(try Self.loadDataKey(database, masterSealer, path: path))
        if pending {
            // What the migration replaced (plaintext names, rows sealed under the
            // master key) must not stay in free pages or in the log.
            do {
                try database.vacuum()
            } catch {
                throw StoreError.mapping(error, "vacuum the migrated store", path: path)
            }
            checkpoint()
        }
    }

    deinit {
        // Close the connection before the lock file is released (stored
        // properties are destroyed after this body).
        try? database.close()
    }

    // MARK: - Credentials

    /// Seals the private key, replaces any credential with the same
    /// (`rpIdHash`, `userId`) or the same ID, assigns the next `sequence`
    /// and commits, all in one transaction.
    @discardableResult
    public func save(_ credential: StoredCredential) throws(StoreError) -> StoredCredential {
        let (stored, counter, replacedAny) = try write("save a credential") {
            db throws -> (StoredCredential, SignatureCounter?, Bool) in
            let keys = self.keys.withLock { $0 }
            let sealer = keys.sealer
            let id = credential.id
            let sealedPrivateKey = try sealer.seal(
                credential.privateKey, .credential, context: id, what: "the private key of a new credential"
            )
            let sealedAccount = try sealer.seal(
                AccountRecord(credential).encoded, .account, context: id, what: "the account of a new credential"
            )
            let sealedCredRandom = try sealOptional(sealer, credential.credRandom, .credRandom, id, "CredRandom")
            let sealedCredBlob = try sealOptional(sealer, credential.credBlob, .credBlob, id, "credBlob")
            let sealedLargeBlobKey = try sealOptional(sealer, credential.largeBlobKey, .largeBlobKey, id, "largeBlobKey")
            let rpKey = Data(keys.relyingPartyKey(rpIdHash: credential.rpIdHash))
            let userKey = Data(keys.userKey(rpIdHash: credential.rpIdHash, userId: credential.userId))
            // CTAP 2.1 §6.1.2 step 18: a new credential for the same account
            // replaces the old one (an ID clash replaces too).
            let replaced = try Data.fetchAll(
                db.cachedStatement(sql: "SELECT id FROM credential WHERE (rpKey = ? AND userKey = ?) OR id = ?"),
                arguments: [rpKey, userKey, Data(id)]
            ).map { [UInt8]($0) }
            try db.cachedStatement(
                sql: "DELETE FROM credential WHERE (rpKey = ? AND userKey = ?) OR id = ?"
            ).execute(arguments: [rpKey, userKey, Data(id)])
            for replacedId in replaced where replacedId != id {
                try forgetCounter(scope: replacedId, db)
            }
            try db.cachedStatement(
                sql: """
                    INSERT INTO credential (id, rpKey, userKey, sealedAccount,
                                            algorithm, sealedPrivateKey, credProtect,
                                            sealedCredRandom, sealedCredBlob, sealedLargeBlobKey,
                                            thirdPartyPayment)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    Data(id), rpKey, userKey, Data(sealedAccount),
                    credential.algorithm, Data(sealedPrivateKey), Int(credential.credProtect),
                    sealedCredRandom.map { Data($0) }, sealedCredBlob.map { Data($0) },
                    sealedLargeBlobKey.map { Data($0) }, credential.thirdPartyPayment ? 1 : 0,
                ]
            )
            var stored = credential
            stored.sequence = db.lastInsertedRowID
            // The new credential's counter scope gets its first block reserved in
            // the same commit, so that the signature count of its registration
            // (and of its first assertions) needs no commit of its own. A scope
            // that already has a reservation (an ID saved again) keeps it.
            let replacedAny = !replaced.isEmpty
            var counter = try SignatureCounter(persisted: nil, scope: "a new credential")
            guard let bound = try counter.reservationNeeded(scope: "a new credential") else {
                return (stored, nil, replacedAny)
            }
            try db.cachedStatement(
                sql: "INSERT INTO signatureCounter (scope, reserved) VALUES (?, ?) ON CONFLICT (scope) DO NOTHING"
            ).execute(arguments: [Data(credential.id), Int64(bound)])
            guard db.changesCount > 0 else { return (stored, nil, replacedAny) }
            counter.reserved(upTo: bound)
            return (stored, counter, replacedAny)
        }
        // Only once committed: an in-memory reservation never runs ahead of the disk.
        if let counter { counters.withLock { $0[credential.id] = counter } }
        // A replaced credential is a deleted one: its frames leave the log.
        if replacedAny { checkpoint() }
        return stored
    }

    /// Replaces `rpName`, `userName` and `userDisplayName` of the credential
    /// with this ID; other fields are kept. Commits before returning.
    @discardableResult
    public func update(_ credential: StoredCredential) throws(StoreError) -> Bool {
        try write("update a credential") { db in
            let sealer = self.keys.withLock { $0 }.sealer
            let id = credential.id
            guard
                let stored = try Data.fetchOne(
                    db.cachedStatement(sql: "SELECT sealedAccount FROM credential WHERE id = ?"),
                    arguments: [Data(id)]
                )
            else { return false }
            let what = "the account of a credential in \(path)"
            var account = try AccountRecord(
                decoding: try sealer.open([UInt8](stored), .account, context: id, what: what), what: what
            )
            account.rpName = credential.rpName
            account.userName = credential.userName
            account.userDisplayName = credential.userDisplayName
            let sealed = try sealer.seal(account.encoded, .account, context: id, what: what)
            try db.cachedStatement(sql: "UPDATE credential SET sealedAccount = ? WHERE id = ?").execute(
                arguments: [Data(sealed), Data(id)]
            )
            return db.changesCount > 0
        }
    }

    /// The relying party's credentials, newest (highest `sequence`) first.
    public func credentials(rpIdHash: [UInt8]) throws(StoreError) -> [StoredCredential] {
        try fetchCredentials("read the credentials of a relying party", where: "WHERE rpKey = ?") { keys in
            [Data(keys.relyingPartyKey(rpIdHash: rpIdHash))]
        }
    }

    /// Through the `(rpKey, userKey)` unique index, reading no row's sealed data.
    public func containsCredential(rpIdHash: [UInt8], userId: [UInt8]) throws(StoreError) -> Bool {
        try read("look up a relying party's user") { db in
            let keys = self.keys.withLock { $0 }
            return try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM credential WHERE rpKey = ? AND userKey = ?)"),
                arguments: [
                    Data(keys.relyingPartyKey(rpIdHash: rpIdHash)),
                    Data(keys.userKey(rpIdHash: rpIdHash, userId: userId)),
                ]
            ) ?? false
        }
    }

    /// The credential with this ID, its private key opened.
    public func credential(id: [UInt8]) throws(StoreError) -> StoredCredential? {
        try fetchCredentials("read a credential", where: "WHERE id = ?") { _ in [Data(id)] }.first
    }

    /// Every credential, newest first.
    public func allCredentials() throws(StoreError) -> [StoredCredential] {
        try fetchCredentials("read every credential", where: "") { _ in [] }
    }

    /// Deletes the credential and its signature counter in one transaction,
    /// then checkpoints the log so that its frames go too.
    @discardableResult
    public func deleteCredential(id: [UInt8]) throws(StoreError) -> Bool {
        let deleted = try write("delete a credential") { db in
            try db.cachedStatement(sql: "DELETE FROM credential WHERE id = ?").execute(arguments: [Data(id)])
            let deleted = db.changesCount > 0
            try forgetCounter(scope: id, db)
            return deleted
        }
        if deleted { checkpoint() }
        return deleted
    }

    /// The number of stored credentials.
    public func credentialCount() throws(StoreError) -> Int {
        try read("count the credentials") { db in
            try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM credential")) ?? 0
        }
    }

    // MARK: - Signature counters

    /// The next value for `scope`. The first use of a scope in this process
    /// resumes at its persisted reservation; a value at or beyond the
    /// reservation is handed out only after a new one (`SignatureCounter.block`
    /// values ahead) has committed. Throws rather than repeat a value after
    /// UInt32.max.
    public func nextSignatureCounter(scope: [UInt8]) throws(StoreError) -> UInt32 {
        let description = scope.isEmpty ? "the global scope" : "a credential scope"
        return try writeWithoutTransaction("take a signature counter value") { db in
            var counter: SignatureCounter
            if let known = counters.withLock({ $0[scope] }) {
                counter = known
            } else {
                let persisted = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT reserved FROM signatureCounter WHERE scope = ?"),
                    arguments: [Data(scope)]
                )
                counter = try SignatureCounter(persisted: persisted, scope: description)
            }
            if let bound = try counter.reservationNeeded(scope: description) {
                try db.inTransaction {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO signatureCounter (scope, reserved) VALUES (?, ?)
                            ON CONFLICT (scope) DO UPDATE SET reserved = excluded.reserved
                            """
                    ).execute(
                        arguments: [Data(scope), Int64(bound)]
                    )
                    return .commit
                }
                counter.reserved(upTo: bound)
            }
            let value = counter.take()
            counters.withLock { $0[scope] = counter }
            return value
        }
    }

    /// Makes the scope's next value greater than `value`. When it already is
    /// (in this process), nothing changes. Otherwise persists a reservation
    /// bound above `value` (kept if already higher) and drops this process's
    /// state of the scope, so that the next value resumes at the persisted
    /// bound: above `value` and above every value handed out before.
    public func raiseSignatureCounter(scope: [UInt8], above value: UInt32) throws(StoreError) {
        let bound = Int64(value) + 1
        // Already there (a credential just saved, whose first block was reserved
        // with it): its count goes on from where it is, not from the block's end.
        if let known = counters.withLock({ $0[scope] }), known.next >= UInt64(bound) { return }
        try write("raise a signature counter") { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO signatureCounter (scope, reserved) VALUES (?, ?)
                    ON CONFLICT (scope) DO UPDATE SET reserved = max(reserved, excluded.reserved)
                    """
            ).execute(
                arguments: [Data(scope), bound]
            )
        }
        counters.withLock { $0[scope] = nil }
    }

    // MARK: - Secrets

    /// The secret named `name`, opened; nil when there is none.
    public func secret(named name: String) throws(StoreError) -> [UInt8]? {
        let (stored, sealer) = try read("read a secret") { db in
            (
                try Data.fetchOne(
                    db.cachedStatement(sql: "SELECT sealedValue FROM secret WHERE name = ?"),
                    arguments: [name]
                ),
                self.keys.withLock { $0 }.sealer
            )
        }
        guard let stored else { return nil }
        return try sealer.open([UInt8](stored), .secret, context: Array(name.utf8), what: "secret \"\(name)\"")
    }

    /// Seals and stores (or with nil, deletes) a secret; commits before returning.
    public func setSecret(_ value: [UInt8]?, named name: String) throws(StoreError) {
        guard let value else {
            try write("remove a secret") { db in
                try db.cachedStatement(sql: "DELETE FROM secret WHERE name = ?").execute(arguments: [name])
            }
            return
        }
        try write("store a secret") { db in
            let sealer = self.keys.withLock { $0 }.sealer
            let sealed = try sealer.seal(value, .secret, context: Array(name.utf8), what: "secret \"\(name)\"")
            try db.cachedStatement(
                sql: """
                    INSERT INTO secret (name, sealedValue) VALUES (?, ?)
                    ON CONFLICT (name) DO UPDATE SET sealedValue = excluded.sealedValue
                    """
            ).execute(
                arguments: [name, Data(sealed)]
            )
        }
    }

    // MARK: - Reset

    /// Deletes every credential, secret and per-credential counter and
    /// replaces the data key, in one transaction, then checkpoints and
    /// truncates the log. The device's secrets are re-sealed under the new
    /// key; anything sealed under the old one — a row in a backup, an old log
    /// frame — no longer opens in this store. The global (empty) counter
    /// scope and the sequence keep counting, so no value is ever reused.
    public func reset() throws(StoreError) {
        var previous: DataKeys?
        do {
            try write("reset the store") { db in
                let oldKeys = self.keys.withLock { $0 }
                previous = oldKeys
                try resetRows(db, from: oldKeys.sealer)
            }
        } catch {
            // Rolled back: the store still holds rows under the previous key.
            if let previous { self.keys.withLock { $0 = previous } }
            throw error
        }
        checkpoint()
    }

    /// The reset's transaction; switches `keys` to the new data key.
    private func resetRows(_ db: Database, from old: Sealer) throws {
        try db.cachedStatement(sql: "DELETE FROM credential").execute()
        // The device's identity (AAGUID, attestation key) survives a reset, as
        // a hardware key's does.
        try db.cachedStatement(sql: "DELETE FROM secret WHERE name NOT LIKE 'device.%'").execute()
        let dataKey = SecureRandom.bytes(count: Sealer.keySize)
        let keys = DataKeys(dataKey: dataKey)
        for row in try Row.fetchAll(db, sql: "SELECT name, sealedValue FROM secret") {
            let columns = RowReader(row: row, path: path)
            let name = try columns.text("name")
            let what = "secret \"\(name)\""
            let value = try old.open(try columns.blob("sealedValue"), .secret, context: Array(name.utf8), what: what)
            let sealed = try keys.sealer.seal(value, .secret, context: Array(name.utf8), what: what)
            try db.execute(sql: "UPDATE secret SET sealedValue = ? WHERE name = ?", arguments: [Data(sealed), name])
        }
        let sealedDataKey = try masterSealer.seal(dataKey, .dataKey, context: [], what: "the data key")
        try db.execute(sql: "UPDATE meta SET value = ? WHERE key = 'dataKey'", arguments: [Data(sealedDataKey)])
        // The global scope keeps counting: its values must never repeat.
        try db.cachedStatement(sql: "DELETE FROM signatureCounter WHERE scope != x''").execute()
        // Switched inside the transaction, so no other call seals under the old
        // key once the new one is committed; reset() switches back on a rollback.
        self.keys.withLock { $0 = keys }
        counters.withLock { $0 = $0.filter { $0.key.isEmpty } }
    }

    // MARK: - Internals

    private static let credentialColumns = """
        id, sealedAccount, algorithm, sealedPrivateKey, credProtect, sequence,
        sealedCredRandom, sealedCredBlob, sealedLargeBlobKey, thirdPartyPayment
        """

    /// The rows `condition` selects, newest first, decoded with the data key
    /// of the read that fetched them; `arguments` may use that key.
    private func fetchCredentials(
        _ action: String,
        where condition: String,
        arguments: (DataKeys) -> StatementArguments
    ) throws(StoreError) -> [StoredCredential] {
        let (rows, keys) = try read(action) { db -> ([Row], DataKeys) in
            let keys = self.keys.withLock { $0 }
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT \(Self.credentialColumns) FROM credential \(condition) ORDER BY sequence DESC"
                ),
                arguments: arguments(keys)
            )
            return (rows, keys)
        }
        var credentials: [StoredCredential] = []
        credentials.reserveCapacity(rows.count)
        for row in rows {
            credentials.append(try decodeCredential(row, keys.sealer))
        }
        return credentials
    }

    /// Decodes one row without trusting it: a value of the wrong type, out
    /// of range or failing to decrypt is `.corrupt`, never a trap.
    private func decodeCredential(_ row: Row, _ sealer: Sealer) throws(StoreError) -> StoredCredential {
        let columns = RowReader(row: row, path: path)
        let id = try columns.blob("id")
        let privateKey = try sealer.open(
            try columns.blob("sealedPrivateKey"),
            .credential,
            context: id,
            what: "the private key of a credential in \(path)"
        )
        let what = "the account of a credential in \(path)"
        let account = try AccountRecord(
            decoding: try sealer.open(try columns.blob("sealedAccount"), .account, context: id, what: what),
            what: what
        )
        let credProtect = try columns.integer("credProtect")
        guard let credProtect = UInt8(exactly: credProtect) else {
            throw StoreError(.corrupt, "a credential in \(path) has credProtect \(credProtect)")
        }
        guard let algorithm = Int(exactly: try columns.integer("algorithm")) else {
            throw StoreError(.corrupt, "a credential in \(path) has an out-of-range algorithm")
        }
        func openOptional(_ column: String, _ domain: Sealer.Domain, _ name: String) throws(StoreError) -> [UInt8]? {
            guard let sealed = try columns.optionalBlob(column) else { return nil }
            return try sealer.open(sealed, domain, context: id, what: "the \(name) of a credential in \(path)")
        }
        return StoredCredential(
            id: id,
            rpId: account.rpId,
            rpIdHash: account.rpIdHash,
            rpName: account.rpName,
            userId: account.userId,
            userName: account.userName,
            userDisplayName: account.userDisplayName,
            algorithm: algorithm,
            privateKey: privateKey,
            credProtect: credProtect,
            credRandom: try openOptional("sealedCredRandom", .credRandom, "CredRandom"),
            credBlob: try openOptional("sealedCredBlob", .credBlob, "credBlob"),
            largeBlobKey: try openOptional("sealedLargeBlobKey", .largeBlobKey, "largeBlobKey"),
            thirdPartyPayment: try columns.integer("thirdPartyPayment") != 0,
            sequence: try columns.integer("sequence")
        )
    }

    /// Seals an optional per-credential value under the credential's ID.
    private func sealOptional(
        _ sealer: Sealer,
        _ value: [UInt8]?,
        _ domain: Sealer.Domain,
        _ id: [UInt8],
        _ what: String
    ) throws(StoreError) -> [UInt8]? {
        guard let value else { return nil }
        return try sealer.seal(value, domain, context: id, what: "the \(what) of a new credential")
    }

    /// Removes a scope's persisted counter and its in-memory state (which
    /// would otherwise hand out values no longer covered by a reservation).
    private func forgetCounter(scope: [UInt8], _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM signatureCounter WHERE scope = ?").execute(arguments: [Data(scope)])
        _ = counters.withLock { $0.removeValue(forKey: scope) }
    }

    /// Seals a check value under a new store's master key, or verifies it on
    /// an existing store, so a wrong key fails here rather than at first use
    /// (and never mixes keys in one file).
    private static func checkMasterKey(
        _ database: DatabaseQueue,
        _ masterSealer: Sealer,
        path: String
    ) throws(StoreError) {
        let stored: Data?
        do {
            stored = try database.read { try Data.fetchOne($0, sql: "SELECT value FROM meta WHERE key = 'keyCheck'") }
        } catch {
            throw StoreError.mapping(error, "read the key check", path: path)
        }
        if let stored {
            do {
                _ = try masterSealer.open([UInt8](stored), .keyCheck, context: [], what: "the key check")
            } catch {
                throw StoreError(.corrupt, "the master key does not open store \(path) (wrong key or tampered file)")
            }
            return
        }
        let sealed = try masterSealer.seal(
            SecureRandom.bytes(count: 16), .keyCheck, context: [], what: "the key check"
        )
        do {
            try database.write { db in
                try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('keyCheck', ?)", arguments: [Data(sealed)])
            }
        } catch {
            throw StoreError.mapping(error, "store the key check", path: path)
        }
    }

    /// The store's data key (made by migration v4), opened with the master key.
    private static func loadDataKey(
        _ database: DatabaseQueue,
        _ masterSealer: Sealer,
        path: String
    ) throws(StoreError) -> DataKeys {
        let stored: Data?
        do {
            stored = try database.read { try Data.fetchOne($0, sql: "SELECT value FROM meta WHERE key = 'dataKey'") }
        } catch {
            throw StoreError.mapping(error, "read the data key", path: path)
        }
        guard let stored else { throw StoreError(.corrupt, "store \(path) has no data key") }
        var dataKey = try masterSealer.open([UInt8](stored), .dataKey, context: [], what: "the data key of \(path)")
        defer { dataKey.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        guard dataKey.count == Sealer.keySize else {
            throw StoreError(.corrupt, "the data key of \(path) has \(dataKey.count) bytes")
        }
        return DataKeys(dataKey: dataKey)
    }

    /// Moves the log's frames into the database file and truncates the log,
    /// so that what a deletion or reset removed (secure_delete zeroed it in
    /// the page's newest version) no longer lies in old frames. Best effort:
    /// the change it follows has committed whatever it returns.
    private func checkpoint() {
        _ = try? database.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    private func read<T>(_ action: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try database.read(body)
        } catch {
            throw StoreError.mapping(error, action, path: path)
        }
    }

    /// Runs `body` in a transaction that has committed when this returns.
    private func write<T>(_ action: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try database.write(body)
        } catch {
            throw StoreError.mapping(error, action, path: path)
        }
    }

    private func writeWithoutTransaction<T>(
        _ action: String,
        _ body: (Database) throws -> T
    ) throws(StoreError) -> T {
        do {
            return try database.writeWithoutTransaction(body)
        } catch {
            throw StoreError.mapping(error, action, path: path)
        }
    }
}

/// Reads typed columns of one row, turning a missing or mistyped value into
/// `.corrupt` (GRDB's subscripts trap on a failed conversion).
struct RowReader {
    let row: Row
    let path: String

    private func value(_ column: String) -> DatabaseValue {
        (row[column] as DatabaseValue?) ?? .null
    }

    private func corrupt(_ column: String) -> StoreError {
        StoreError(.corrupt, "column \(column) of a row in \(path) has the wrong type")
    }

    func blob(_ column: String) throws(StoreError) -> [UInt8] {
        guard case .blob(let data) = value(column).storage else { throw corrupt(column) }
        return [UInt8](data)
    }

    func text(_ column: String) throws(StoreError) -> String {
        guard case .string(let text) = value(column).storage else { throw corrupt(column) }
        return text
    }

    func optionalText(_ column: String) throws(StoreError) -> String? {
        switch value(column).storage {
        case .null: return nil
        case .string(let text): return text
        default: throw corrupt(column)
        }
    }

    func optionalBlob(_ column: String) throws(StoreError) -> [UInt8]? {
        switch value(column).storage {
        case .null: return nil
        case .blob(let data): return [UInt8](data)
        default: throw corrupt(column)
        }
    }

    func integer(_ column: String) throws(StoreError) -> Int64 {
        guard case .int64(let integer) = value(column).storage else { throw corrupt(column) }
        return integer
    }
}
