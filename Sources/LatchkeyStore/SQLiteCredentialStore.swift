// The durable credential store of one virtual key: a SQLite database (WAL,
// synchronous = FULL) through GRDB, private keys and secrets sealed under the
// master key, an exclusive lock file so two daemons never share it, and
// signature counters that never repeat (see SignatureCounter.swift). The
// statements of the request path go through GRDB's statement cache: preparing
// them anew took a tenth of the daemon's CPU under load (issue 16).

public import CTAP
import Foundation
import GRDB
import LatchkeyCrypto
import Synchronization

/// A `CredentialStore` in a SQLite file.
///
/// Every mutating call commits (and SQLite fsyncs the write-ahead log) before
/// it returns. Private keys and secrets are sealed with AES-256-GCM under the
/// master key; user and relying party names stay in plaintext. The store
/// holds an exclusive lock on `<path>.lock` until it is released.
public final class SQLiteCredentialStore: CredentialStore {
    /// The database file.
    public let path: String

    /// The one connection; internal so tests can read its settings.
    let database: DatabaseQueue
    private let sealer: Sealer
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
        self.sealer = Sealer(key: masterKey)
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
            try prepareDatabase?(db)
        }
        do {
            database = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw StoreError.mapping(error, "open the database", path: path)
        }
        do {
            try Schema.migrator.migrate(database)
        } catch {
            throw StoreError.mapping(error, "migrate the schema", path: path)
        }
        try checkMasterKey()
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
        let sealedPrivateKey = try sealer.seal(
            credential.privateKey,
            .credential,
            context: credential.id,
            what: "the private key of a new credential"
        )
        let sealedCredRandom = try sealOptional(credential.credRandom, .credRandom, credential.id, "CredRandom")
        let sealedCredBlob = try sealOptional(credential.credBlob, .credBlob, credential.id, "credBlob")
        let sealedLargeBlobKey = try sealOptional(
            credential.largeBlobKey, .largeBlobKey, credential.id, "largeBlobKey"
        )
        let (stored, counter) = try write("save a credential") { db throws -> (StoredCredential, SignatureCounter?) in
            // CTAP 2.1 §6.1.2 step 18: a new credential for the same account
            // replaces the old one (an ID clash replaces too).
            let replaced = try Data.fetchAll(
                db.cachedStatement(sql: "SELECT id FROM credential WHERE (rpIdHash = ? AND userId = ?) OR id = ?"),
                arguments: [Data(credential.rpIdHash), Data(credential.userId), Data(credential.id)]
            ).map { [UInt8]($0) }
            try db.cachedStatement(
                sql: "DELETE FROM credential WHERE (rpIdHash = ? AND userId = ?) OR id = ?"
            ).execute(arguments: [Data(credential.rpIdHash), Data(credential.userId), Data(credential.id)])
            for id in replaced where id != credential.id {
                try forgetCounter(scope: id, db)
            }
            try db.cachedStatement(
                sql: """
                    INSERT INTO credential (id, rpId, rpIdHash, rpName, userId, userName, userDisplayName,
                                            algorithm, sealedPrivateKey, credProtect,
                                            sealedCredRandom, sealedCredBlob, sealedLargeBlobKey,
                                            thirdPartyPayment)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    Data(credential.id), credential.rpId, Data(credential.rpIdHash), credential.rpName,
                    Data(credential.userId), credential.userName, credential.userDisplayName,
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
            var counter = try SignatureCounter(persisted: nil, scope: "a new credential")
            guard let bound = try counter.reservationNeeded(scope: "a new credential") else { return (stored, nil) }
            try db.cachedStatement(
                sql: "INSERT INTO signatureCounter (scope, reserved) VALUES (?, ?) ON CONFLICT (scope) DO NOTHING"
            ).execute(arguments: [Data(credential.id), Int64(bound)])
            guard db.changesCount > 0 else { return (stored, nil) }
            counter.reserved(upTo: bound)
            return (stored, counter)
        }
        // Only once committed: an in-memory reservation never runs ahead of the disk.
        if let counter { counters.withLock { $0[credential.id] = counter } }
        return stored
    }

    /// Replaces `rpName`, `userName` and `userDisplayName` of the credential
    /// with this ID; other fields are kept. Commits before returning.
    @discardableResult
    public func update(_ credential: StoredCredential) throws(StoreError) -> Bool {
        try write("update a credential") { db in
            try db.cachedStatement(
                sql: "UPDATE credential SET rpName = ?, userName = ?, userDisplayName = ? WHERE id = ?"
            ).execute(
                arguments: [
                    credential.rpName, credential.userName, credential.userDisplayName, Data(credential.id),
                ]
            )
            return db.changesCount > 0
        }
    }

    /// The relying party's credentials, newest (highest `sequence`) first.
    public func credentials(rpIdHash: [UInt8]) throws(StoreError) -> [StoredCredential] {
        try fetchCredentials(
            "read the credentials of a relying party",
            where: "WHERE rpIdHash = ?",
            arguments: [Data(rpIdHash)]
        )
    }

    /// Through the `(rpIdHash, userId)` unique index, reading no row's sealed data.
    public func containsCredential(rpIdHash: [UInt8], userId: [UInt8]) throws(StoreError) -> Bool {
        try read("look up a relying party's user") { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM credential WHERE rpIdHash = ? AND userId = ?)"),
                arguments: [Data(rpIdHash), Data(userId)]
            ) ?? false
        }
    }

    /// The credential with this ID, its private key opened.
    public func credential(id: [UInt8]) throws(StoreError) -> StoredCredential? {
        try fetchCredentials("read a credential", where: "WHERE id = ?", arguments: [Data(id)]).first
    }

    /// Every credential, newest first.
    public func allCredentials() throws(StoreError) -> [StoredCredential] {
        try fetchCredentials("read every credential", where: "", arguments: [])
    }

    /// Deletes the credential and its signature counter in one transaction.
    @discardableResult
    public func deleteCredential(id: [UInt8]) throws(StoreError) -> Bool {
        try write("delete a credential") { db in
            try db.cachedStatement(sql: "DELETE FROM credential WHERE id = ?").execute(arguments: [Data(id)])
            let deleted = db.changesCount > 0
            try forgetCounter(scope: id, db)
            return deleted
        }
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
        let stored = try read("read a secret") { db in
            try Data.fetchOne(
                db.cachedStatement(sql: "SELECT sealedValue FROM secret WHERE name = ?"),
                arguments: [name]
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
        let sealed = try sealer.seal(value, .secret, context: Array(name.utf8), what: "secret \"\(name)\"")
        try write("store a secret") { db in
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

    /// Deletes every credential, secret and per-credential counter in one
    /// transaction. The global (empty) counter scope and the sequence keep
    /// counting, so no value is ever reused.
    public func reset() throws(StoreError) {
        try write("reset the store") { db in
            try db.cachedStatement(sql: "DELETE FROM credential").execute()
            // The device's identity (AAGUID, attestation key) survives a reset, as
            // a hardware key's does.
            try db.cachedStatement(sql: "DELETE FROM secret WHERE name NOT LIKE 'device.%'").execute()
            // The global scope keeps counting: its values must never repeat.
            try db.cachedStatement(sql: "DELETE FROM signatureCounter WHERE scope != x''").execute()
            counters.withLock { $0 = $0.filter { $0.key.isEmpty } }
        }
    }

    // MARK: - Internals

    private static let credentialColumns = """
        id, rpId, rpIdHash, rpName, userId, userName, userDisplayName,
        algorithm, sealedPrivateKey, credProtect, sequence,
        sealedCredRandom, sealedCredBlob, sealedLargeBlobKey, thirdPartyPayment
        """

    private func fetchCredentials(
        _ action: String,
        where condition: String,
        arguments: StatementArguments
    ) throws(StoreError) -> [StoredCredential] {
        let rows = try read(action) { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT \(Self.credentialColumns) FROM credential \(condition) ORDER BY sequence DESC"
                ),
                arguments: arguments
            )
        }
        var credentials: [StoredCredential] = []
        credentials.reserveCapacity(rows.count)
        for row in rows {
            credentials.append(try decodeCredential(row))
        }
        return credentials
    }

    /// Decodes one row without trusting it: a value of the wrong type, out
    /// of range or failing to decrypt is `.corrupt`, never a trap.
    private func decodeCredential(_ row: Row) throws(StoreError) -> StoredCredential {
        let columns = RowReader(row: row, path: path)
        let id = try columns.blob("id")
        let sealedPrivateKey = try columns.blob("sealedPrivateKey")
        let privateKey = try sealer.open(
            sealedPrivateKey,
            .credential,
            context: id,
            what: "the private key of a credential in \(path)"
        )
        let credProtect = try columns.integer("credProtect")
        guard let credProtect = UInt8(exactly: credProtect) else {
            throw StoreError(.corrupt, "a credential in \(path) has credProtect \(credProtect)")
        }
        guard let algorithm = Int(exactly: try columns.integer("algorithm")) else {
            throw StoreError(.corrupt, "a credential in \(path) has an out-of-range algorithm")
        }
        return StoredCredential(
            id: id,
            rpId: try columns.text("rpId"),
            rpIdHash: try columns.blob("rpIdHash"),
            rpName: try columns.optionalText("rpName"),
            userId: try columns.blob("userId"),
            userName: try columns.optionalText("userName"),
            userDisplayName: try columns.optionalText("userDisplayName"),
            algorithm: algorithm,
            privateKey: privateKey,
            credProtect: credProtect,
            credRandom: try openOptional(columns.optionalBlob("sealedCredRandom"), .credRandom, id, "CredRandom"),
            credBlob: try openOptional(columns.optionalBlob("sealedCredBlob"), .credBlob, id, "credBlob"),
            largeBlobKey: try openOptional(
                columns.optionalBlob("sealedLargeBlobKey"), .largeBlobKey, id, "largeBlobKey"
            ),
            thirdPartyPayment: try columns.integer("thirdPartyPayment") != 0,
            sequence: try columns.integer("sequence")
        )
    }

    /// Seals an optional per-credential value under the credential's ID.
    private func sealOptional(
        _ value: [UInt8]?,
        _ domain: Sealer.Domain,
        _ id: [UInt8],
        _ what: String
    ) throws(StoreError) -> [UInt8]? {
        guard let value else { return nil }
        return try sealer.seal(value, domain, context: id, what: "the \(what) of a new credential")
    }

    /// Opens an optional per-credential value sealed by `sealOptional`.
    private func openOptional(
        _ sealed: [UInt8]?,
        _ domain: Sealer.Domain,
        _ id: [UInt8],
        _ what: String
    ) throws(StoreError) -> [UInt8]? {
        guard let sealed else { return nil }
        return try sealer.open(sealed, domain, context: id, what: "the \(what) of a credential in \(path)")
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
    private func checkMasterKey() throws(StoreError) {
        let stored = try read("read the key check") { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'keyCheck'")
        }
        if let stored {
            do {
                _ = try sealer.open([UInt8](stored), .keyCheck, context: [], what: "the key check")
            } catch {
                throw StoreError(.corrupt, "the master key does not open store \(path) (wrong key or tampered file)")
            }
            return
        }
        let sealed = try sealer.seal(SecureRandom.bytes(count: 16), .keyCheck, context: [], what: "the key check")
        try write("store the key check") { db in
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('keyCheck', ?)", arguments: [Data(sealed)])
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
private struct RowReader {
    let row: Row
    let path: String

    private func value(_ column: String) -> DatabaseValue {
        (row[column] as DatabaseValue?) ?? .null
    }

    private func corrupt(_ column: String) -> StoreError {
        StoreError(.corrupt, "column \(column) of a credential in \(path) has the wrong type")
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
