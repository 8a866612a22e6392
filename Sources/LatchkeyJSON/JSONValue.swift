// Any JSON value, as a tree of plain values: the open parts of a CXF document
// in the daemon, and WebDriver's parameters in latchkey-webdriver, which must
// tell an absent property from null and a boolean from a number (WebAuthn
// §11). Codable is the standard library's, so this target still needs no
// Foundation; turning text into a value is the caller's JSONDecoder.

/// Any JSON value.
public enum JSONValue: Codable, Sendable, Equatable, ExpressibleByStringLiteral {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(stringLiteral value: String) { self = .string(value) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            // Whole numbers (versions, timestamps, counters) without a fraction.
            if let whole = JSONValue.number(value).integer {
                try container.encode(whole)
            } else {
                try container.encode(value)
            }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The members of an object; nil for any other value.
    public var object: [String: JSONValue]? {
        if case .object(let members) = self { members } else { nil }
    }

    /// The items of an array; nil for any other value.
    public var array: [JSONValue]? {
        if case .array(let items) = self { items } else { nil }
    }

    public var string: String? {
        if case .string(let value) = self { value } else { nil }
    }

    public var bool: Bool? {
        if case .bool(let value) = self { value } else { nil }
    }

    /// A number without a fraction (`41`, `41.0`), within the range a Double
    /// holds exactly; nil for any other value.
    public var integer: Int64? {
        if case .number(let value) = self, value == value.rounded(), abs(value) < 1e15 { Int64(value) } else { nil }
    }

    /// A JSON name for the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
