// The one error type of LatchkeyCrypto: a local failure with its context.
// Callers match on `code`; `reason`, `file` and `line` are for the log.

public import LatchkeyErrors

/// A local cryptographic failure: a code to match on and the context to log.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: CryptoError(.invalidKey, ""))`. The reason never contains
/// key material. Its description is `CryptoError.<code>: <reason> (<file>:<line>)`.
public typealias CryptoError = CodedError<CryptoErrorCode>

/// The kind of a `CryptoError`. An open set: new codes may be added.
public struct CryptoErrorCode: ErrorCode {
    private let name: String

    private init(_ name: String) {
        self.name = name
    }

    /// The bytes are not a valid key of the expected type (wrong length,
    /// scalar out of range, point not on the curve, wrong algorithm or curve).
    public static let invalidKey = Self("invalidKey")
    /// An input other than a key is malformed (a length, a nonce, a serial number).
    public static let invalidInput = Self("invalidInput")
    /// An authenticated ciphertext failed its integrity check.
    public static let authenticationFailure = Self("authenticationFailure")
    /// OpenSSL reported a failure that no other code describes.
    public static let openSSL = Self("openSSL")

    public var description: String { name }
    public var title: String { "CryptoError.\(name)" }
}
