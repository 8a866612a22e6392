// The store's system calls, through LatchkeySystem's wrapper (EINTR retried)
// with the path each worked on added to the error, and the few file
// operations the store needs (the exclusive lock file, creating a file 0600,
// fsync of a directory, asking whether a filesystem is full).

import CTAP
import Glibc
import LatchkeySystem

/// A failed system call: its name, the path it worked on and `errno`.
struct PathCallError: Error, CustomStringConvertible {
    var call: String
    var path: String
    var errno: Int32

    var description: String {
        "\(call)(\(path)) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }

    /// The store error for this failure: ENOSPC and EDQUOT are a full disk,
    /// anything else is I/O.
    func storeError(_ action: String, file: String = #fileID, line: Int = #line) -> StoreError {
        let code: StoreError.Code = (errno == ENOSPC || errno == EDQUOT) ? .full : .io
        return StoreError(code, "\(action): \(self)", file: file, line: line)
    }
}

/// Thin wrappers over the system calls the store makes.
enum Posix {
    /// Runs `body` until it returns something other than -1 with `errno`
    /// EINTR; a -1 with any other `errno` becomes a `PathCallError`.
    @discardableResult
    static func call<Result: FixedWidthInteger & SignedInteger>(
        _ name: String,
        path: String,
        _ body: () -> Result
    ) throws(PathCallError) -> Result {
        do {
            return try SystemCall.run(name, body)
        } catch {
            throw PathCallError(call: name, path: path, errno: error.errno)
        }
    }

    /// Closes a descriptor (never retried; see SystemCall.close).
    static func close(_ descriptor: Int32) {
        SystemCall.close(descriptor)
    }

    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(PathCallError) -> Int32 {
        try call("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    static func fstat(_ descriptor: Int32, path: String) throws(PathCallError) -> stat {
        var status = stat()
        try call("fstat", path: path) { Glibc.fstat(descriptor, &status) }
        return status
    }

    static func fchmod(_ descriptor: Int32, _ mode: mode_t, path: String) throws(PathCallError) {
        try call("fchmod", path: path) { Glibc.fchmod(descriptor, mode) }
    }

    static func fsync(_ descriptor: Int32, path: String) throws(PathCallError) {
        try call("fsync", path: path) { Glibc.fsync(descriptor) }
    }

    /// Reads `count` bytes, or fewer at end of file.
    static func read(_ descriptor: Int32, count: Int, path: String) throws(PathCallError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = try call("read", path: path) {
                bytes.withUnsafeMutableBytes { buffer in
                    Glibc.read(descriptor, buffer.baseAddress! + filled, count - filled)
                }
            }
            if got == 0 { break }
            filled += got
        }
        return Array(bytes[..<filled])
    }

    /// Writes every byte, looping over short writes.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], path: String) throws(PathCallError) {
        var written = 0
        while written < bytes.count {
            written += try call("write", path: path) {
                bytes.withUnsafeBytes { buffer in
                    Glibc.write(descriptor, buffer.baseAddress! + written, bytes.count - written)
                }
            }
        }
    }

    /// Takes an exclusive `flock` without waiting (EWOULDBLOCK when held).
    static func lockExclusively(_ descriptor: Int32, path: String) throws(PathCallError) {
        // `flock` names both the function and a struct; the type picks the function.
        let flockFunction: @convention(c) (CInt, CInt) -> CInt = flock
        try call("flock", path: path) { flockFunction(descriptor, LOCK_EX | LOCK_NB) }
    }

    /// The directory holding `path` ("." for a bare name).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    /// Makes the directory entry of a newly created file durable.
    static func fsyncDirectory(of path: String) throws(PathCallError) {
        let directory = directory(of: path)
        let descriptor = try open(directory, O_RDONLY | O_DIRECTORY)
        defer { close(descriptor) }
        try fsync(descriptor, path: directory)
    }

    /// Creates `path` as an empty regular file with `mode` when it does not
    /// exist (making its directory entry durable); tightens the mode of an
    /// existing file that grants group or other access.
    static func createFileIfMissing(_ path: String, mode: mode_t) throws(PathCallError) {
        do {
            let descriptor = try open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: mode)
            defer { close(descriptor) }
            // The umask may only have removed bits; set exactly what we asked.
            try fchmod(descriptor, mode, path: path)
            try fsync(descriptor, path: path)
            try fsyncDirectory(of: path)
        } catch let error where error.errno == EEXIST {
            let descriptor = try open(path, O_RDONLY | O_NOFOLLOW)
            defer { close(descriptor) }
            let status = try fstat(descriptor, path: path)
            guard status.st_mode & S_IFMT == S_IFREG else {
                throw PathCallError(call: "fstat", path: path, errno: EINVAL)
            }
            if status.st_mode & 0o077 != 0 { try fchmod(descriptor, mode, path: path) }
        }
    }

    /// Whether the filesystem holding `path` has (almost) no space left for
    /// an unprivileged writer. Used to tell a full disk from other I/O errors
    /// when SQLite reports only SQLITE_IOERR.
    static func filesystemIsFull(at path: String) -> Bool {
        let directory = directory(of: path)
        guard let descriptor = try? open(directory, O_RDONLY | O_DIRECTORY) else { return false }
        defer { close(descriptor) }
        var status = statvfs()
        guard fstatvfs(descriptor, &status) == 0 else { return false }
        let available = UInt64(status.f_bavail) * UInt64(status.f_frsize)
        return available < 64 * 1024
    }
}

/// An exclusive `flock` on `<store>.lock`, held from `init` until the object
/// is released, so two daemons never open one store.
final class LockFile: Sendable {
    /// The lock file's path.
    let path: String
    private let descriptor: Int32

    /// Creates the lock file (mode 0600) if needed and takes the lock without
    /// waiting; throws `.locked` when another holder has it.
    init(path: String, storePath: String) throws(StoreError) {
        self.path = path
        let descriptor: Int32
        do {
            descriptor = try Posix.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
        } catch {
            throw error.storeError("cannot open the lock file of store \(storePath)")
        }
        do {
            let status = try Posix.fstat(descriptor, path: path)
            if status.st_mode & 0o077 != 0 { try Posix.fchmod(descriptor, 0o600, path: path) }
            try Posix.lockExclusively(descriptor, path: path)
        } catch {
            Posix.close(descriptor)
            if error.errno == EWOULDBLOCK {
                throw StoreError(
                    .locked,
                    "store \(storePath) is in use by another process or store object (\(path) is locked)"
                )
            }
            throw error.storeError("cannot lock store \(storePath)")
        }
        self.descriptor = descriptor
    }

    deinit {
        // Closing the last descriptor of the open file description releases the lock.
        Posix.close(descriptor)
    }
}
