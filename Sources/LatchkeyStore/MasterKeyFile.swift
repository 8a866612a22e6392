// The master key file: 32 random bytes, mode 0600, created on first start
// when systemd passes no credential. Creation is atomic: the key is written
// and fsynced under a temporary name, then linked to its final name (link(2)
// never replaces an existing file), so the path never holds a partial key.
// Neither reading nor creating follows a symbolic link.

public import CTAP
import Glibc
import LatchkeyCrypto

/// Loads or creates the 32-byte master key that seals a store's secrets.
public enum MasterKeyFile {
    /// The key size in bytes (AES-256).
    public static let keySize = 32

    /// Reads the key at `path`, or creates it from `SecureRandom` when no file
    /// exists there. The directory must exist.
    ///
    /// - Throws: `.corrupt` when the file is not a regular file of exactly 32
    ///   bytes, or grants any access to group or others; `.full` or `.io`
    ///   when it cannot be read or created.
    public static func loadOrCreate(at path: String) throws(StoreError) -> [UInt8] {
        // Two tries: another process may create the file between our failed
        // open and our link; then we read its key.
        for _ in 0..<2 {
            if let key = try load(at: path) { return key }
            if let key = try create(at: path) { return key }
        }
        throw StoreError(.io, "master key file \(path) keeps appearing and disappearing")
    }

    /// The key at `path`, or nil when there is no file.
    static func load(at path: String) throws(StoreError) -> [UInt8]? {
        let descriptor: Int32
        do {
            // A link is never followed: the key is this file or nothing.
            descriptor = try Posix.open(path, O_RDONLY | O_NOFOLLOW)
        } catch let error where error.errno == ENOENT {
            return nil
        } catch let error where error.errno == ELOOP {
            throw StoreError(.corrupt, "master key file \(path) is a symbolic link; it must be a regular file")
        } catch {
            throw error.storeError("cannot open master key file")
        }
        defer { Posix.close(descriptor) }
        let status: stat
        do {
            status = try Posix.fstat(descriptor, path: path)
        } catch {
            throw error.storeError("cannot inspect master key file")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw StoreError(.corrupt, "master key file \(path) is not a regular file")
        }
        let mode = status.st_mode & 0o7777
        guard mode & 0o077 == 0 else {
            throw StoreError(
                .corrupt,
                "master key file \(path) has mode \(String(mode, radix: 8)); it must be 0600 or stricter"
            )
        }
        guard status.st_size == keySize else {
            throw StoreError(.corrupt, "master key file \(path) has \(status.st_size) bytes, not \(keySize)")
        }
        let key: [UInt8]
        do {
            // One byte more than expected, to notice a file that grew meanwhile.
            key = try Posix.read(descriptor, count: keySize + 1, path: path)
        } catch {
            throw error.storeError("cannot read master key file")
        }
        guard key.count == keySize else {
            throw StoreError(.corrupt, "master key file \(path) changed size while being read")
        }
        return key
    }

    /// Creates the key file; nil when a file appeared at `path` meanwhile.
    static func create(at path: String) throws(StoreError) -> [UInt8]? {
        let key = SecureRandom.bytes(count: keySize)
        let suffix = SecureRandom.bytes(count: 8).map { String($0, radix: 16) }.joined()
        let temporary = "\(path).tmp-\(getpid())-\(suffix)"
        do {
            let descriptor = try Posix.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            defer {
                Posix.close(descriptor)
                // Gone already after a successful link; removes the debris otherwise.
                _ = unlink(temporary)
            }
            try Posix.fchmod(descriptor, 0o600, path: temporary)
            try Posix.writeAll(descriptor, key, path: temporary)
            try Posix.fsync(descriptor, path: temporary)
            do {
                try Posix.call("link", path: path) { link(temporary, path) }
            } catch let error where error.errno == EEXIST {
                return nil
            }
            try Posix.call("unlink", path: temporary) { unlink(temporary) }
            // The new name must be durable before anything is sealed under the key.
            try Posix.fsyncDirectory(of: path)
            return key
        } catch {
            throw error.storeError("cannot create master key file \(path)")
        }
    }
}
