// The uhid transport's system calls, all through LatchkeySystem's wrapper
// (EINTR retried), each failure turned into a UHIDError carrying the call's
// name and errno.

import Glibc
import LatchkeySystem

/// Thin wrappers over the system calls the transport makes.
enum Posix {
    /// Runs `body` until it returns something other than -1 with `errno`
    /// EINTR (EINTR is not retried when `retryingEINTR` is false); a -1 with
    /// any other `errno` throws `.systemCall` naming `name` and the errno.
    @discardableResult
    static func call<Result: FixedWidthInteger & SignedInteger>(
        _ name: String,
        retryingEINTR: Bool = true,
        file: String = #fileID,
        line: Int = #line,
        _ body: () -> Result
    ) throws(UHIDError) -> Result {
        do {
            return try SystemCall.run(name, retryingInterrupts: retryingEINTR, body)
        } catch {
            throw systemCallError(name, errno: error.errno, file: file, line: line)
        }
    }

    /// The error for a failed call: `<name> failed: <strerror> (errno N)`.
    static func systemCallError(_ name: String, errno: Int32, file: String = #fileID, line: Int = #line) -> UHIDError {
        UHIDError(
            .systemCall,
            "\(name) failed: \(String(cString: strerror(errno))) (errno \(errno))",
            systemCall: name,
            errno: errno,
            file: file,
            line: line
        )
    }

    /// Opens `path` with `flags | O_CLOEXEC`.
    static func open(_ path: String, _ flags: Int32) throws(UHIDError) -> Int32 {
        try call("open") { Glibc.open(path, flags | O_CLOEXEC) }
    }

    /// Closes a descriptor. Linux frees the descriptor even when close
    /// fails, so EINTR must not be retried, and the error is of no use.
    static func close(_ descriptor: Int32) {
        SystemCall.close(descriptor)
    }

    /// Writes `bytes` in one `write()`, as uhid requires; a short write is
    /// an error (EIO), since half an event is no event.
    static func writeEvent(_ descriptor: Int32, _ bytes: [UInt8]) throws(UHIDError) {
        let written = try call("write") {
            bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        }
        if written != bytes.count {
            throw UHIDError(
                .systemCall,
                "write wrote \(written) of \(bytes.count) bytes of a uhid event",
                systemCall: "write",
                errno: EIO
            )
        }
    }

    /// One `read()` of at most `count` bytes (uhid and SOCK_SEQPACKET
    /// return one event or message per read); an empty result is end of file.
    static func read(_ descriptor: Int32, count: Int) throws(UHIDError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = try call("read") {
            buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        }
        buffer.removeSubrange(got...)
        return buffer
    }

    /// Writes one byte to a non-blocking descriptor, ignoring EAGAIN (a
    /// full wake-up channel already wakes its reader).
    static func writeWakeUp(_ descriptor: Int32) {
        var byte: UInt8 = 1
        _ = try? call("write") { Glibc.write(descriptor, &byte, 1) }
    }

    /// Waits until one of `descriptors` is readable or hung up; returns the
    /// `revents` of each, in order. Waits forever when `timeout` is -1.
    static func poll(_ descriptors: [Int32], timeout milliseconds: Int32) throws(UHIDError) -> [Int16] {
        var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        try call("poll") {
            entries.withUnsafeMutableBufferPointer { Glibc.poll($0.baseAddress, nfds_t($0.count), milliseconds) }
        }
        return entries.map(\.revents)
    }

    /// A connected pair of non-blocking, close-on-exec stream sockets: the
    /// wake-up channel of a reader thread.
    static func wakeUpPair() throws(UHIDError) -> (read: Int32, write: Int32) {
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        try call("socketpair") { Glibc.socketpair(AF_UNIX, type, 0, &pair) }
        return (pair[0], pair[1])
    }

    /// Whether a file exists at `path` (ENOENT and ENOTDIR say no). stat, not
    /// access(F_OK): under the unit's DevicePolicy=closed the device cgroup
    /// refuses access() on every node it does not allow (EPERM), hidraw
    /// nodes too, while stat looks only at the directory.
    static func exists(_ path: String) throws(UHIDError) -> Bool {
        var info = stat()
        do {
            try call("stat") { stat(path, &info) }
            return true
        } catch  where error.errno == ENOENT || error.errno == ENOTDIR {
            return false
        }
    }
}

/// A joinable POSIX thread running one closure.
struct PosixThread: Sendable {
    /// The thread's handle.
    let handle: pthread_t

    /// Starts a thread that runs `body`.
    static func spawn(_ body: @escaping @Sendable () -> Void) throws(UHIDError) -> PosixThread {
        let box = Unmanaged.passRetained(ThreadBody(body))
        var handle = pthread_t()
        let result = pthread_create(
            &handle,
            nil,
            { argument in
                let body = Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue()
                body.run()
                return nil
            },
            box.toOpaque()
        )
        // pthread functions return the error number instead of setting errno.
        guard result == 0 else {
            box.release()
            throw Posix.systemCallError("pthread_create", errno: result)
        }
        return PosixThread(handle: handle)
    }

    /// Whether the calling thread is this thread.
    var isCurrent: Bool {
        pthread_equal(pthread_self(), handle) != 0
    }

    /// Waits for the thread to end and frees it.
    func join() {
        _ = pthread_join(handle, nil)
    }

    /// Lets the thread free itself when it ends.
    func detach() {
        _ = pthread_detach(handle)
    }
}

/// The closure a `PosixThread` runs, boxed to cross `pthread_create`.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void

    init(_ run: @escaping @Sendable () -> Void) {
        self.run = run
    }
}
