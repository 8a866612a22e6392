// The one wrapper every latchkey target uses for a raw system call: retry on
// EINTR, and turn -1 into an error that names the call and its errno. Each
// target maps `SystemCallError` into its own error type at its boundary
// (docs/CONTRIBUTING.md: one mapping per layer). Model: swift-nio `NIOPosix/System.swift`.

import Glibc

/// A system call that failed: its name and errno.
public struct SystemCallError: Error, Equatable, CustomStringConvertible {
    /// The call's name ("open", "write", …).
    public var call: String
    /// `errno` after the call.
    public var errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// strerror(errno).
    public var message: String { String(cString: strerror(errno)) }

    public var description: String { "\(call) failed: \(message) (errno \(errno))" }
}

/// Raw system calls.
public enum SystemCall {
    /// Runs `body` until it returns something other than -1 with errno EINTR
    /// (EINTR is not retried when `retryingInterrupts` is false); a -1 with
    /// any other errno throws.
    @discardableResult
    public static func run<Result: FixedWidthInteger & SignedInteger>(
        _ name: String,
        retryingInterrupts: Bool = true,
        _ body: () -> Result
    ) throws(SystemCallError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = Glibc.errno
            if error == EINTR && retryingInterrupts { continue }
            throw SystemCallError(call: name, errno: error)
        }
    }

    /// Closes a descriptor. Linux frees the descriptor even when close fails,
    /// so EINTR must not be retried, and the error is of no use.
    public static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }
}
