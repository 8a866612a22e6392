// Behaviour of MasterKeyFile: creation (0600, 32 bytes, atomic), loading,
// and refusing files that are not a private 32-byte key.

import CTAP
import Foundation
import Glibc
import LatchkeyStore
import Testing

/// Expects loading the key file at `path` to fail with `code` and a reason that
/// says each of `phrases`.
func expectLoadingFails(
    at path: String,
    _ code: StoreErrorCode,
    saying phrases: String...,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let error = #expect(throws: StoreError.self, sourceLocation: sourceLocation) {
        try MasterKeyFile.loadOrCreate(at: path)
    }
    #expect(error?.code == code, sourceLocation: sourceLocation)
    for phrase in phrases {
        #expect(error?.reason.contains(phrase) == true, "\(phrase)", sourceLocation: sourceLocation)
    }
}

/// Writes `bytes` as a key file at `path` with `mode`, as another program might have.
func writeKeyFile(_ bytes: [UInt8], mode: mode_t, at path: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)), sourceLocation: sourceLocation)
    chmod(path, mode)
}

@Suite("Master key file")
struct MasterKeyFileTests {
    @Test("creates a 32-byte key with mode 0600 and loads the same key again")
    func createThenLoad() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        let created = try MasterKeyFile.loadOrCreate(at: path)
        #expect(created.count == 32)
        #expect(created != [UInt8](repeating: 0, count: 32))
        #expect(try permissions(path) == 0o600)
        #expect(try MasterKeyFile.loadOrCreate(at: path) == created)
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["master-key"])
    }

    @Test("two key files are different keys")
    func distinctKeys() throws {
        let directory = try TemporaryDirectory()
        #expect(
            try MasterKeyFile.loadOrCreate(at: directory.file("a"))
                != MasterKeyFile.loadOrCreate(at: directory.file("b"))
        )
    }

    @Test("loads an existing 0400 key file")
    func loadsReadOnlyKey() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        let key = [UInt8](0..<32)
        writeKeyFile(key, mode: 0o400, at: path)
        #expect(try MasterKeyFile.loadOrCreate(at: path) == key)
    }

    @Test("refuses a key file readable by group or others", arguments: [0o640, 0o604, 0o644, 0o660] as [mode_t])
    func refusesLooseMode(mode: mode_t) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        writeKeyFile([UInt8](repeating: 1, count: 32), mode: mode, at: path)
        expectLoadingFails(at: path, .corrupt, saying: "0600", path)
    }

    @Test("refuses a key file that is not exactly 32 bytes", arguments: [0, 16, 31, 33, 64])
    func refusesWrongSize(size: Int) throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        writeKeyFile([UInt8](repeating: 1, count: size), mode: 0o600, at: path)
        expectLoadingFails(at: path, .corrupt, saying: "\(size) bytes")
    }

    @Test("refuses a directory in place of the key file")
    func refusesDirectory() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        mkdir(path, 0o700)
        expectLoadingFails(at: path, .corrupt, saying: "regular file")
    }

    @Test("refuses a symbolic link in place of the key file, even to a good key, and creates none through it")
    func refusesLink() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        let target = directory.file("elsewhere")
        writeKeyFile([UInt8](repeating: 1, count: 32), mode: 0o600, at: target)
        symlink(target, path)
        expectLoadingFails(at: path, .corrupt, saying: "symbolic link")
        // A dangling link is not followed to create a key either.
        unlink(target)
        #expect(throws: StoreError.self) { try MasterKeyFile.loadOrCreate(at: path) }
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test("reports a missing directory with the call, the path and errno")
    func missingDirectory() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("absent/master-key")
        expectLoadingFails(at: path, .io, saying: "open(", "errno \(ENOENT)")
    }

    @Test("processes racing to create the key all get the same key")
    func concurrentCreation() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("master-key")
        let keys = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 {
                group.addTask { try MasterKeyFile.loadOrCreate(at: path) }
            }
            var keys: [[UInt8]] = []
            for try await key in group { keys.append(key) }
            return keys
        }
        #expect(Set(keys).count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["master-key"])
    }
}
