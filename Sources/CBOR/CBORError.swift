// Local CBOR failures. They carry context for the log; the CTAP target maps
// them to wire statuses at its one boundary (CTAP2_ERR_INVALID_CBOR,
// CTAP2_ERR_CBOR_UNEXPECTED_TYPE, CTAP2_ERR_MISSING_PARAMETER).

public import LatchkeyErrors

/// Why decoding or reading a CBOR value failed. Equal by code.
public typealias CBORError = CodedError<CBORErrorCode>

/// The kind of a `CBORError`.
public enum CBORErrorCode: String, ErrorCode {
    /// Not well-formed: truncated, a reserved additional-info value, a
    /// length beyond the bytes left, a stray break, bytes after the item.
    case malformed
    /// Well-formed but not CTAP2 canonical: a longer head than needed, or
    /// map keys out of order.
    case nonCanonical = "non-canonical"
    /// Forbidden by CTAP2: indefinite lengths or tags.
    case forbidden
    /// A map repeats a key.
    case duplicateKey = "duplicate key"
    /// Nested deeper than the decoder's cap.
    case tooDeep = "too deep"
    /// A text string is not valid UTF-8.
    case invalidUTF8 = "invalid UTF-8"
    /// A value has another type than the reader expected.
    case unexpectedType = "unexpected type"
    /// A required map key is absent.
    case missingField = "missing field"
    /// An integer does not fit the type the reader asked for.
    case outOfRange = "out of range"

    public var title: String { "CBOR \(rawValue)" }
}
