// Gives back the resident pages the daemon mapped to start or to serve a burst
// and no longer touches.
//
// Most of an idle latchkeyd's RSS is not its data: it is clean pages of its
// own executable and of the libraries it loads (code, constant data, relocation
// tables), brought in by start-up code that never runs again, and multiplied by
// the kernel's fault-around (each fault maps up to 16 neighbouring pages that
// are already cached). Those pages are a copy of the file, shared with every
// other process that maps it, and the kernel may drop them at any time; the
// process just no longer needs them mapped. `release()` unmaps them
// (MADV_DONTNEED on read-only file mappings holding no private page) and gives
// glibc's free heap pages back (malloc_trim); whatever runs next faults the
// pages it uses back in from the page cache.
//
// Writable mappings, and read-only ones that hold a private copy (RELRO data
// the loader relocated), are never touched: dropping those would lose data.
//
// `MemoryReleaseService` does it once the daemon is ready and then whenever it
// goes quiet after work (`DaemonActivity`), so an idle daemon shows the pages
// it idles with, not those of its start or its last burst. The first request
// after a release faults its code back in (minor faults, from the page cache).

import CMalloc
import Glibc
import LatchkeyCore
import Logging
import ServiceLifecycle
import Synchronization

/// Gives memory back (`ResidentMemory.release()`) once the daemon listens,
/// and again each time it has done work and then stayed quiet for a whole
/// `interval`.
struct MemoryReleaseService: Service {
    let listening: Latch
    let logger: Logger
    var interval: Duration = .seconds(3)

    func run() async throws {
        // Polls the latch rather than waiting on it, so that a daemon stopping
        // before it ever listened still ends this service.
        await cancelWhenGracefulShutdown {
            var releasedAt: Int? = nil
            var seen = DaemonActivity.count
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                let now = DaemonActivity.count
                if now == seen, now != releasedAt, await listening.isOpen {
                    // Logged at debug only: a log line faults in pages of its own.
                    if let (before, after) = ResidentMemory.release() {
                        logger.debug("gave back unused pages", metadata: ["rssKB": "\(before) -> \(after)"])
                    }
                    releasedAt = now
                }
                seen = now
            }
        }
    }
}

enum ResidentMemory {
    /// One mapping of /proc/self/smaps.
    struct Mapping: Equatable {
        var start: UInt
        var end: UInt
        var permissions: String
        var path: String
        /// Private pages (written, or anonymous) in the mapping, in kB.
        var anonymousKilobytes: Int
        var residentKilobytes: Int

        /// Whether unmapping its resident pages loses nothing: a read-only
        /// mapping of a file with no page of its own.
        var releasable: Bool {
            permissions.count == 4 && permissions.hasPrefix("r") && !permissions.contains("w")
                && path.hasPrefix("/") && anonymousKilobytes == 0 && residentKilobytes > 0
        }
    }

    /// Reads smaps text: a header line per mapping ("start-end perms offset
    /// dev inode [path]"), then "Key: value kB" lines.
    static func mappings(smaps text: Substring) -> [Mapping] {
        var result: [Mapping] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.hasSuffix(":") {
                guard !result.isEmpty, fields.count >= 2, let value = Int(fields[1]) else { continue }
                switch first {
                case "Anonymous:": result[result.count - 1].anonymousKilobytes = value
                case "Rss:": result[result.count - 1].residentKilobytes = value
                default: break
                }
                continue
            }
            let bounds = first.split(separator: "-")
            guard fields.count >= 5, bounds.count == 2,
                let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16)
            else { continue }
            let path = fields.count >= 6 ? fields[5...].joined(separator: " ") : ""
            result.append(
                Mapping(
                    start: start, end: end, permissions: String(fields[1]), path: path,
                    anonymousKilobytes: 0, residentKilobytes: 0
                ))
        }
        return result
    }

    /// The process's resident set, in kB (VmRSS), or nil if /proc is not there.
    static func residentKilobytes() -> Int? {
        guard let status = readProc("/proc/self/status") else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
        }
        return nil
    }

    /// Unmaps the resident pages of every releasable mapping and trims the
    /// heap. Returns VmRSS before and after, in kB (nil without /proc).
    @discardableResult
    static func release() -> (before: Int, after: Int)? {
        let before = residentKilobytes()
        if let smaps = readProc("/proc/self/smaps") {
            for mapping in mappings(smaps: smaps[...]) where mapping.releasable {
                _ = madvise(UnsafeMutableRawPointer(bitPattern: mapping.start), Int(mapping.end - mapping.start), MADV_DONTNEED)
            }
        }
        _ = malloc_trim(0)
        guard let before, let after = residentKilobytes() else { return nil }
        return (before, after)
    }

    /// A /proc file's text (its size is unknown until read).
    static func readProc(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
