// The CBOR data model (RFC 8949 §3) as latchkey uses it: every value CTAP can
// carry, plus floats and simple values so that any well-formed definite-length
// item without tags can be decoded and re-encoded unchanged.

/// One CBOR data item.
///
/// Maps keep their entries as an ordered list of pairs. The encoder sorts them
/// into CTAP2 canonical order; the decoder rejects any other order, so a decoded
/// map is always in canonical order and `==` compares it entry by entry.
public enum CBORValue: Hashable, Sendable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the negative integer `-1 - n` (so `.negative(0)` is -1).
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a text string (valid UTF-8).
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map, as ordered (key, value) pairs.
    case map([CBORMapEntry])
    /// Major type 7, values 20 and 21.
    case boolean(Bool)
    /// Major type 7, value 22.
    case null
    /// Major type 7, value 23.
    case undefined
    /// Major type 7, any other simple value (0–19, 32–255).
    case simple(UInt8)
    /// Major type 7, additional info 25: an IEEE 754 half-precision float, as its bits.
    case half(UInt16)
    /// Major type 7, additional info 26: single precision.
    case float(Float)
    /// Major type 7, additional info 27: double precision.
    case double(Double)

    /// An integer value, choosing the major type from its sign.
    public static func int(_ value: Int) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// A map with integer keys, given in any order (the encoder sorts).
    public static func intMap(_ entries: [(Int, CBORValue)]) -> CBORValue {
        .map(entries.map { CBORMapEntry(key: .int($0.0), value: $0.1) })
    }

    /// A map with text keys, given in any order (the encoder sorts).
    public static func textMap(_ entries: [(String, CBORValue)]) -> CBORValue {
        .map(entries.map { CBORMapEntry(key: .text($0.0), value: $0.1) })
    }
}

/// One entry of a CBOR map.
public struct CBORMapEntry: Hashable, Sendable {
    /// The key.
    public var key: CBORValue
    /// The value.
    public var value: CBORValue

    /// Makes an entry.
    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}

extension CBORValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// A text literal.
    public init(stringLiteral value: String) { self = .text(value) }
    /// A boolean literal.
    public init(booleanLiteral value: Bool) { self = .boolean(value) }
}

extension CBORValue {
    /// Equality as encodings see it: floats compare by their bits, so a NaN
    /// equals itself and 0.0 differs from -0.0, as their encodings do.
    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): a == b
        case (.bytes(let a), .bytes(let b)): a == b
        case (.text(let a), .text(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.map(let a), .map(let b)): a == b
        case (.boolean(let a), .boolean(let b)): a == b
        case (.null, .null), (.undefined, .undefined): true
        case (.simple(let a), .simple(let b)): a == b
        case (.half(let a), .half(let b)): a == b
        case (.float(let a), .float(let b)): a.bitPattern == b.bitPattern
        case (.double(let a), .double(let b)): a.bitPattern == b.bitPattern
        default: false
        }
    }

    /// Hashes consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let value): hasher.combine(0); hasher.combine(value)
        case .negative(let value): hasher.combine(1); hasher.combine(value)
        case .bytes(let value): hasher.combine(2); hasher.combine(value)
        case .text(let value): hasher.combine(3); hasher.combine(value)
        case .array(let value): hasher.combine(4); hasher.combine(value)
        case .map(let value): hasher.combine(5); hasher.combine(value)
        case .boolean(let value): hasher.combine(6); hasher.combine(value)
        case .null: hasher.combine(7)
        case .undefined: hasher.combine(8)
        case .simple(let value): hasher.combine(9); hasher.combine(value)
        case .half(let value): hasher.combine(10); hasher.combine(value)
        case .float(let value): hasher.combine(11); hasher.combine(value.bitPattern)
        case .double(let value): hasher.combine(12); hasher.combine(value.bitPattern)
        }
    }
}
