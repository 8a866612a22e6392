// The benchmarks' system calls and their two kinds of failure: a system call that failed (the
// call's name and errno), and everything else (a bad setting, a peer that did something the
// benchmarks did not expect), told in words.

import Glibc
import LatchkeySystem

/// A failure that is no system call's: a bad setting, or a peer (the daemon, its USB/IP
/// server, the key) that broke what the benchmarks expect of it.
public struct BenchFailure: Error, CustomStringConvertible {
    public var reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}

/// Runs a call that returns -1 and sets errno on failure, retrying it on EINTR.
@discardableResult
func systemCall<Result: FixedWidthInteger & SignedInteger>(
    _ name: String,
    _ call: () -> Result
) throws(SystemCallError) -> Result {
    try SystemCall.run(name, call)
}

/// Runs a call that returns 0 or an error number (the posix_spawn family).
func errorNumberCall(_ name: String, _ call: () -> Int32) throws(SystemCallError) {
    let code = call()
    if code != 0 { throw SystemCallError(call: name, errno: code) }
}

/// Sleeps for `milliseconds`, resuming after signals.
public func pause(milliseconds: Int) {
    var request = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
}

/// Writes `line` and a newline to standard error. A failure is dropped: there is nowhere
/// left to report it.
public func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        guard
            let written = try? bytes.withUnsafeBytes({ raw in
                try systemCall("write") { write(STDERR_FILENO, raw.baseAddress! + offset, raw.count - offset) }
            })
        else { return }
        offset += written
    }
}
