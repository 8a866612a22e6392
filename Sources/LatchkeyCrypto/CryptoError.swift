// The one error type of LatchkeyCrypto: a local failure with its context.
// Callers match on `code`; `reason`, `file` and `line` are for the log.

public import LatchkeyErrors

/// A local cryptographic failure: a code to match on and the context to log.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: CryptoError(.invalidKey, ""))`. The reason never contains
/// key material. Its description is `CryptoError.<code>: <reason> (<file>:<line>)`.
public typealias CryptoError = CodedError<CryptoErrorCode>

/// The kind of a `CryptoError`.
public enum CryptoErrorCode: String, ErrorCode {
    /// The bytes are not a valid key of the expected type (wrong length,
    /// scalar out of range, point not on the curve, wrong algorithm or curve).
    case invalidKey
    /// An input other than a key is malformed (a length, a nonce, a serial number).
    case invalidInput
    /// An authenticated ciphertext failed its integrity check.
    case authenticationFailure
    /// OpenSSL reported a failure that no other code describes.
    case openSSL

    public var title: String { "CryptoError.\(rawValue)" }
}
