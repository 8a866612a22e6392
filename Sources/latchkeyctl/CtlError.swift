// latchkeyctl's one error type, and its exit codes. Every failure becomes a
// `CtlError` before it leaves `ControlClient` or a command, and the root
// command prints it and exits with its code (see `LatchkeyCtl.main()`).

/// A failure that ends the command, with the exit status it maps to; equal
/// by code, so tests can match it.
struct CtlError: Error, Equatable, CustomStringConvertible {
    /// The exit statuses, as documented in the root command's help.
    enum Code: Int32 {
        /// The daemon refused the request (4xx other than 404, or 5xx).
        case refused = 1
        /// The PIN was wrong, or PIN entry is blocked (until a replug or for
        /// good), so that a script can tell a PIN it must not retry blindly.
        case pinRefused = 3
        /// The daemon has no such thing (404), or nothing is pending.
        case notFound = 4
        /// Bad arguments (EX_USAGE, as ArgumentParser's validation).
        case usage = 64
        /// The daemon cannot be reached (EX_UNAVAILABLE).
        case unavailable = 69
        /// A malformed response, or a bug here (EX_SOFTWARE).
        case internalError = 70
    }

    var code: Code
    var message: String
    var file: String
    var line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    var description: String { message }

    static func == (lhs: CtlError, rhs: CtlError) -> Bool { lhs.code == rhs.code }
}
