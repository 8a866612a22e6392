// Helpers for the store tests: temporary directories, sample credentials,
// raw access to a store's database behind its back, and a child process
// (StoreCrashProbe) whose output is read line by line with a deadline.

import CTAP
import Foundation
import GRDB
import Glibc
import LatchkeyCrypto
@testable import LatchkeyStore

/// A fresh directory, removed with everything in it when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var base = NSTemporaryDirectory()
        while base.hasSuffix("/") { base.removeLast() }
        var template = Array((base + "/latchkey-store-XXXXXX").utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        path = String(cString: created)
    }

    /// A path inside the directory.
    func file(_ name: String) -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A fixed master key, and a different one.
let masterKey = [UInt8](repeating: 0x4b, count: 32)
let otherMasterKey = [UInt8](repeating: 0x4c, count: 32)

/// A credential with every field set and distinct random bytes.
func sampleCredential(
    rpId: String = "example.com",
    userId: [UInt8]? = nil,
    userName: String? = "alice",
    privateKey: [UInt8]? = nil
) -> StoredCredential {
    StoredCredential(
        id: SecureRandom.bytes(count: 32),
        rpId: rpId,
        rpIdHash: SHA256.hash(Array(rpId.utf8)),
        rpName: "Example \(rpId)",
        userId: userId ?? SecureRandom.bytes(count: 16),
        userName: userName,
        userDisplayName: userName.map { "Display \($0)" },
        algorithm: -8,
        privateKey: privateKey ?? SecureRandom.bytes(count: 32),
        credProtect: 2
    )
}

/// Opens a store with the fixed master key.
func openStore(_ directory: TemporaryDirectory, key: [UInt8] = masterKey) throws -> SQLiteCredentialStore {
    try SQLiteCredentialStore(path: directory.file("store.db"), masterKey: key)
}

/// A second SQLite connection to a store's file, bypassing the store.
func rawDatabase(_ directory: TemporaryDirectory) throws -> DatabaseQueue {
    try DatabaseQueue(path: directory.file("store.db"))
}

/// Whether `needle` occurs in `haystack`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle)
    {
        return true
    }
    return false
}

/// The permission bits of a file.
func permissions(_ path: String) throws -> mode_t {
    var status = stat()
    guard stat(path, &status) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return status.st_mode & 0o7777
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

func bytes(hex: Substring) -> [UInt8]? {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var result: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
            return nil
        }
        result.append(byte)
    }
    return result
}

struct ProbeError: Error, CustomStringConvertible {
    var description: String
}

/// The StoreCrashProbe executable, built next to the test bundle.
func probeExecutable() throws -> URL {
    var candidates: [URL] = []
    let testBinary = URL(
        fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
    )
    candidates.append(testBinary.deletingLastPathComponent().appendingPathComponent("StoreCrashProbe"))
    candidates.append(
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("StoreCrashProbe")
    )
    // Fallback: any build folder of the package (the test runs from its root).
    let root = FileManager.default.currentDirectoryPath
    if let entries = try? FileManager.default.contentsOfDirectory(atPath: root) {
        for entry in entries where entry.hasPrefix(".build") {
            candidates.append(URL(fileURLWithPath: "\(root)/\(entry)/debug/StoreCrashProbe"))
            candidates.append(URL(fileURLWithPath: "\(root)/\(entry)/release/StoreCrashProbe"))
        }
    }
    for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
        return candidate
    }
    throw ProbeError(description: "StoreCrashProbe not found; looked at \(candidates.map(\.path))")
}

/// A running StoreCrashProbe whose standard output is read line by line.
final class Probe {
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private var buffer: [UInt8] = []
    private var ended = false

    init(storePath: String, keyPath: String, seconds: Int = 30) throws {
        process.executableURL = try probeExecutable()
        process.arguments = [storePath, keyPath, String(seconds)]
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// The next line, or nil at end of output. Throws when `deadline` passes first.
    func nextLine(before deadline: ContinuousClock.Instant) throws -> String? {
        let descriptor = output.fileHandleForReading.fileDescriptor
        while true {
            if let newline = buffer.firstIndex(of: 0x0a) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if ended { return nil }
            let remaining = deadline - .now
            guard remaining > .zero else { throw ProbeError(description: "no line from the probe in time") }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + 1)
            let ready = poll(&poller, 1, milliseconds)
            if ready < 0 && errno != EINTR { throw ProbeError(description: "poll failed: errno \(errno)") }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, 4096) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ProbeError(description: "read failed: errno \(errno)")
            }
            if count == 0 { ended = true } else { buffer += chunk[..<count] }
        }
    }

    /// Kills the probe with SIGKILL and waits for it.
    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// What the probe wrote to standard error (after it ended).
    func errorOutput() -> String {
        let descriptor = errors.fileHandleForReading.fileDescriptor
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 100) > 0 else { return "" }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, 4096) }
        return count > 0 ? String(decoding: chunk[..<count], as: UTF8.self) : ""
    }

    deinit {
        kill9()
    }
}

/// A store file as an earlier schema wrote it — migrated up to `version`
/// ("v1" … "v3"), its key check, credentials and secrets sealed under the
/// master key as that code sealed them, names in the clear — so that a
/// migration can be tested on what a released build left on disk.
struct LegacyStore {
    let directory: TemporaryDirectory
    let version: String
    let key: [UInt8]

    init(_ directory: TemporaryDirectory, version: String, key: [UInt8] = masterKey) throws {
        self.directory = directory
        self.version = version
        self.key = key
        let database = try rawDatabase(directory)
        try Schema.migrator(masterKey: Sealer(key: key)).migrate(database, upTo: version)
        let check = try Sealer(key: key).seal(SecureRandom.bytes(count: 16), .keyCheck, context: [], what: "check")
        try database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
        try database.write { db in
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('keyCheck', ?)", arguments: [Data(check)])
        }
    }

    /// Inserts `credential` as that schema stored it; returns it with its sequence.
    @discardableResult
    func insert(_ credential: StoredCredential) throws -> StoredCredential {
        let sealer = Sealer(key: key)
        let id = credential.id
        func sealed(_ value: [UInt8]?, _ domain: Sealer.Domain) throws -> Data? {
            try value.map { Data(try sealer.seal($0, domain, context: id, what: "test")) }
        }
        var columns = "id, rpId, rpIdHash, rpName, userId, userName, userDisplayName, algorithm, sealedPrivateKey, credProtect"
        var values: [(any DatabaseValueConvertible)?] = [
            Data(id), credential.rpId, Data(credential.rpIdHash), credential.rpName, Data(credential.userId),
            credential.userName, credential.userDisplayName, credential.algorithm,
            try sealed(credential.privateKey, .credential), Int(credential.credProtect),
        ]
        if version >= "v2" {
            columns += ", sealedCredRandom, sealedCredBlob, sealedLargeBlobKey"
            values += [
                try sealed(credential.credRandom, .credRandom), try sealed(credential.credBlob, .credBlob),
                try sealed(credential.largeBlobKey, .largeBlobKey),
            ]
        }
        if version >= "v3" {
            columns += ", thirdPartyPayment"
            values.append(credential.thirdPartyPayment ? 1 : 0)
        }
        let placeholders = Array(repeating: "?", count: values.count).joined(separator: ", ")
        var stored = credential
        try rawDatabase(directory).write { db in
            try db.execute(
                sql: "INSERT INTO credential (\(columns)) VALUES (\(placeholders))",
                arguments: StatementArguments(values)
            )
            stored.sequence = db.lastInsertedRowID
        }
        return stored
    }

    /// Stores a secret sealed as that schema sealed it.
    func setSecret(_ value: [UInt8], named name: String) throws {
        let sealed = try Sealer(key: key).seal(value, .secret, context: Array(name.utf8), what: "test")
        try rawDatabase(directory).write { db in
            try db.execute(sql: "INSERT INTO secret (name, sealedValue) VALUES (?, ?)", arguments: [name, Data(sealed)])
        }
    }

    /// Persists a counter reservation.
    func reserve(scope: [UInt8], upTo bound: Int64) throws {
        try rawDatabase(directory).write { db in
            try db.execute(
                sql: "INSERT INTO signatureCounter (scope, reserved) VALUES (?, ?)", arguments: [Data(scope), bound]
            )
        }
    }
}

/// The bytes of a file, empty when there is none.
func fileBytes(_ path: String) -> [UInt8] {
    [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())
}
