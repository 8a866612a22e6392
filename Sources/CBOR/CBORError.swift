// Local CBOR failures. They carry context for the log; the CTAP target maps
// them to wire statuses at its one boundary (CTAP2_ERR_INVALID_CBOR,
// CTAP2_ERR_CBOR_UNEXPECTED_TYPE, CTAP2_ERR_MISSING_PARAMETER).

/// Why decoding or reading a CBOR value failed. Equal by code.
public struct CBORError: Error, Equatable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Not well-formed: truncated, a reserved additional-info value, a
        /// length beyond the bytes left, a stray break, bytes after the item.
        public static let malformed = Code(name: "malformed")
        /// Well-formed but not CTAP2 canonical: a longer head than needed, or
        /// map keys out of order.
        public static let nonCanonical = Code(name: "non-canonical")
        /// Forbidden by CTAP2: indefinite lengths or tags.
        public static let forbidden = Code(name: "forbidden")
        /// A map repeats a key.
        public static let duplicateKey = Code(name: "duplicate key")
        /// Nested deeper than the decoder's cap.
        public static let tooDeep = Code(name: "too deep")
        /// A text string is not valid UTF-8.
        public static let invalidUTF8 = Code(name: "invalid UTF-8")
        /// A value has another type than the reader expected.
        public static let unexpectedType = Code(name: "unexpected type")
        /// A required map key is absent.
        public static let missingField = Code(name: "missing field")
        /// An integer does not fit the type the reader asked for.
        public static let outOfRange = Code(name: "out of range")

        public var description: String { name }
    }

    /// The kind of failure.
    public var code: Code
    /// What was wrong, for the log.
    public var reason: String
    /// Where the error was made.
    public var file: String
    /// Where the error was made.
    public var line: Int

    /// Makes an error at the caller's location.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public static func == (lhs: CBORError, rhs: CBORError) -> Bool { lhs.code == rhs.code }

    public var description: String { "CBOR \(code): \(reason) (\(file):\(line))" }
}
