// The one error type of LatchkeyCrypto: a local failure with its context.
// Callers match on `code`; `reason`, `file` and `line` are for the log.

/// A local cryptographic failure: a code to match on and the context to log.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: CryptoError(.invalidKey, ""))`. The reason never contains
/// key material.
public struct CryptoError: Error, Equatable, CustomStringConvertible {
    /// What kind of failure this is. An open set: new codes may be added.
    public struct Code: Hashable, Sendable {
        fileprivate let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// The bytes are not a valid key of the expected type (wrong length,
        /// scalar out of range, point not on the curve, wrong algorithm or curve).
        public static let invalidKey = Code("invalidKey")
        /// An input other than a key is malformed (a length, a nonce, a serial number).
        public static let invalidInput = Code("invalidInput")
        /// An authenticated ciphertext failed its integrity check.
        public static let authenticationFailure = Code("authenticationFailure")
        /// OpenSSL reported a failure that no other code describes.
        public static let openSSL = Code("openSSL")
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation, free of secrets.
    public var reason: String
    /// The file that raised the error (`#fileID`).
    public var file: String
    /// The line that raised the error.
    public var line: Int

    /// Creates an error; `file` and `line` default to the caller's location.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// `CryptoError.<code>: <reason> (<file>:<line>)`.
    public var description: String {
        "CryptoError.\(code.name): \(reason) (\(file):\(line))"
    }

    /// Equal by code only; the reason and location are context.
    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool {
        lhs.code == rhs.code
    }
}
