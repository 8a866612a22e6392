// latchkeyctl's system calls: the few socket operations an HTTP request over
// a Unix socket needs, through LatchkeySystem's wrapper (EINTR retried,
// failures as SystemCallError).

import Glibc
import LatchkeySystem

/// Thin wrappers over the system calls latchkeyctl makes.
enum Posix {
    /// Runs `body` until it returns something other than -1 with `errno`
    /// EINTR; a -1 with any other `errno` becomes a `SystemCallError`.
    @discardableResult
    static func call<Result: FixedWidthInteger & SignedInteger>(
        _ name: String,
        _ body: () -> Result
    ) throws(SystemCallError) -> Result {
        try SystemCall.run(name, body)
    }

    /// Closes a descriptor (never retried; see SystemCall.close).
    static func close(_ descriptor: Int32) {
        SystemCall.close(descriptor)
    }

    static func socketUnixStream() throws(SystemCallError) -> Int32 {
        try call("socket") { Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
    }

    /// Sets `SO_SNDTIMEO`, which on Linux also bounds how long a blocking
    /// `connect` to a Unix socket waits for room in a full listen backlog.
    static func setSendTimeout(_ descriptor: Int32, milliseconds: Int) throws(SystemCallError) {
        var value = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        try call("setsockopt(SO_SNDTIMEO)") {
            Glibc.setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Connects to the Unix socket at `address`.
    ///
    /// A `connect` interrupted by a signal is retried; should the first one
    /// have completed after all, the retry reports EISCONN, which is success.
    static func connect(_ descriptor: Int32, to address: sockaddr_un) throws(SystemCallError) {
        var address = address
        let length = socklen_t(MemoryLayout<sockaddr_un>.size)
        do throws(SystemCallError) {
            try call("connect") {
                withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, length) }
                }
            }
        } catch {
            if error.errno != EISCONN { throw error }
        }
    }

    /// Sends all of `bytes`, without raising SIGPIPE when the peer is gone.
    static func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) throws(SystemCallError) {
        var sent = 0
        while sent < bytes.count {
            sent += try call("send") {
                bytes.withUnsafeBytes { buffer in
                    Glibc.send(descriptor, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                }
            }
        }
    }

    /// Waits up to `milliseconds` for `descriptor` to become readable;
    /// returns false on timeout.
    static func pollReadable(_ descriptor: Int32, milliseconds: Int32) throws(SystemCallError) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        // A retry after EINTR waits the full time again; callers bound the
        // total with their own deadline.
        return try call("poll") { Glibc.poll(&entry, 1, milliseconds) } > 0
    }

    /// Reads at most `buffer.count` bytes; 0 means end of stream.
    static func read(_ descriptor: Int32, into buffer: inout [UInt8]) throws(SystemCallError) -> Int {
        try call("read") {
            buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, $0.count) }
        }
    }
}
