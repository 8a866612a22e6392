// The one shape of a local failure in the protocol and crypto targets: a code to match
// on, and a reason and the place it was made, for the log. Each family (CBORError,
// USBIPError, StoreError, PinUvAuthError, CryptoError) declares only its codes (an enum)
// and the title its log lines start with.

/// The kind of a `CodedError`: one type per family of errors, usually an enum whose raw
/// values are the codes' names in the log.
public protocol ErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// How a log line names an error of this code, before the reason: `CBOR malformed`.
    var title: String { get }
}

extension ErrorCode where Self: RawRepresentable, RawValue == String {
    /// The code's name, for the log.
    public var description: String { rawValue }
}

/// A local failure: a code to match on and the context to log.
///
/// Two errors are equal (and hash alike) when their codes are, so tests can write
/// `#expect(throws: CBORError(.malformed, ""))`. The reason never contains key material.
public struct CodedError<Kind: ErrorCode>: Error, Hashable, CustomStringConvertible {
    /// The family's code type, as `CBORError.Code`.
    public typealias Code = Kind

    /// The kind of failure.
    public var code: Code
    /// What was wrong, for the log.
    public var reason: String
    /// The file that made the error (`#fileID`).
    public var file: String
    /// The line that made the error.
    public var line: Int

    /// Makes an error at the caller's location.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// Equal by code only; the reason and the location are context.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    /// Hashes the code alone, as equality compares it alone.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `<title>: <reason> (<file>:<line>)`, for the log.
    public var description: String { "\(code.title): \(reason) (\(file):\(line))" }
}
