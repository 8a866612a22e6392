// The state directory's layout, and the only code that builds a file path
// from a key's name:
//
//     <state>/keys/<name>/              one directory per key (0700)
//     <state>/keys/<name>/key.json      the request that created an API key
//     <state>/keys/<name>/credentials.db
//
// Two checks stand between a request and the disk. A `KeyName` cannot spell
// a separator or a dot name (LatchkeyContract), so the path built here is one
// level below `keys/`; and before it creates, deletes or replaces anything,
// this code resolves the path it is about to touch (realpath: symbolic
// links, `.` and `..`) and refuses one that is not a direct child of the
// resolved `keys/` directory, inside the resolved state directory. Either
// check alone keeps a request inside; each is tested on its own
// (KeyNameTests, StateDirectoryTests). key.json is read and written without
// following a symbolic link (O_NOFOLLOW), as every file the daemon keeps here.

import Foundation
import Glibc
import LatchkeyContract

/// A path the daemon refused to touch because it resolves outside the
/// keys directory.
struct StatePathError: Error, Equatable, CustomStringConvertible {
    var path: String
    var reason: String

    var description: String { "refusing \(path): \(reason)" }
}

/// Paths below the daemon's state directory.
package struct StateDirectory: Sendable {
    /// The state directory as configured.
    let root: String

    /// Where every key's directory lives.
    var keys: String { root + "/keys" }

    /// The directory of the key named `name` (not resolved: see `resolvedKeyDirectory`).
    func directory(of name: KeyName) -> String { keys + "/" + name.rawValue }

    /// The key's creation request (API keys only).
    func marker(of name: KeyName) -> String { directory(of: name) + "/key.json" }

    /// Whether anything (a directory, a file, a link) is at the key's directory's path.
    func exists(_ name: KeyName) -> Bool {
        var status = stat()
        return lstat(directory(of: name), &status) == 0
    }

    /// Creates the key's directory if needed, then resolves it and checks that
    /// it is a direct child of the keys directory; returns the resolved path,
    /// which every file of the key is built from.
    func makeKeyDirectory(_ name: KeyName) throws -> String {
        try FileManager.default.createDirectory(
            atPath: keys, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
        )
        let path = directory(of: name)
        var status = stat()
        if lstat(path, &status) != 0 {
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
                throw StatePathError(path: path, reason: "cannot create it: \(String(cString: strerror(errno)))")
            }
        }
        return try contained(path)
    }

    /// Removes the key's directory and everything in it, after resolving it:
    /// a directory that resolves anywhere but directly below the keys
    /// directory (a symbolic link, say) is refused and nothing is removed.
    func removeKeyDirectory(_ name: KeyName) throws {
        let resolved = try contained(directory(of: name))
        try FileManager.default.removeItem(atPath: resolved)
    }

    /// The key's `key.json`, nil when there is none or it is not a regular file (a link
    /// is not followed).
    func readMarker(of name: KeyName) -> Data? {
        let path = marker(of: name)
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size <= 1 << 20 else {
            return nil
        }
        return try? FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readToEnd() ?? Data()
    }

    /// Replaces the key's `key.json` (written beside it, then renamed over
    /// it) once its directory resolves inside the keys directory.
    func writeMarker(_ data: Data, of name: KeyName) throws {
        let directory = try contained(directory(of: name))
        let target = directory + "/key.json"
        let temporary = directory + "/.key.json.tmp"
        // Whatever a crash left there (even a link) goes; the new file is made, never opened.
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StatePathError(path: temporary, reason: "cannot create it: \(String(cString: strerror(errno)))")
        }
        let file = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
        let synced = (try? file.write(contentsOf: data)) != nil && fsync(descriptor) == 0
        close(descriptor)
        guard synced else {
            unlink(temporary)
            throw StatePathError(path: temporary, reason: "cannot write it")
        }
        guard rename(temporary, target) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw StatePathError(path: target, reason: "cannot replace it: \(reason)")
        }
    }

    /// `path` resolved, if it is a direct child of the resolved keys
    /// directory and that directory is `keys` inside the resolved state
    /// directory; otherwise an error. The containment check of every
    /// create, delete and rename, usable on its own (tests give it paths no
    /// `KeyName` could produce).
    func contained(_ path: String) throws -> String {
        guard let root = Self.resolve(root) else {
            throw StatePathError(path: self.root, reason: "the state directory cannot be resolved")
        }
        guard let keys = Self.resolve(keys), keys == root + "/keys" else {
            throw StatePathError(path: self.keys, reason: "the keys directory does not resolve to \(root)/keys")
        }
        guard let resolved = Self.resolve(path) else {
            throw StatePathError(path: path, reason: "it cannot be resolved")
        }
        let prefix = keys + "/"
        guard resolved.hasPrefix(prefix), resolved.count > prefix.count,
            !resolved.dropFirst(prefix.count).contains("/")
        else {
            throw StatePathError(path: path, reason: "it resolves to \(resolved), not a key directory in \(keys)")
        }
        return resolved
    }

    /// realpath(3): the absolute path with every link, `.` and `..` resolved; nil when it does not exist.
    package static func resolve(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
