// Local CBOR failures. They carry context for the log; the CTAP target maps
// them to wire statuses at its one boundary (CTAP2_ERR_INVALID_CBOR,
// CTAP2_ERR_CBOR_UNEXPECTED_TYPE, CTAP2_ERR_MISSING_PARAMETER).

public import LatchkeyErrors

/// Why decoding or reading a CBOR value failed. Equal by code.
public typealias CBORError = CodedError<CBORErrorCode>

/// The kind of a `CBORError`.
public struct CBORErrorCode: ErrorCode {
    let name: String
    /// Not well-formed: truncated, a reserved additional-info value, a
    /// length beyond the bytes left, a stray break, bytes after the item.
    public static let malformed = Self(name: "malformed")
    /// Well-formed but not CTAP2 canonical: a longer head than needed, or
    /// map keys out of order.
    public static let nonCanonical = Self(name: "non-canonical")
    /// Forbidden by CTAP2: indefinite lengths or tags.
    public static let forbidden = Self(name: "forbidden")
    /// A map repeats a key.
    public static let duplicateKey = Self(name: "duplicate key")
    /// Nested deeper than the decoder's cap.
    public static let tooDeep = Self(name: "too deep")
    /// A text string is not valid UTF-8.
    public static let invalidUTF8 = Self(name: "invalid UTF-8")
    /// A value has another type than the reader expected.
    public static let unexpectedType = Self(name: "unexpected type")
    /// A required map key is absent.
    public static let missingField = Self(name: "missing field")
    /// An integer does not fit the type the reader asked for.
    public static let outOfRange = Self(name: "out of range")

    public var description: String { name }
    public var title: String { "CBOR \(name)" }
}
