// Typed reads from decoded values. A wrong type throws `.unexpectedType`, an
// absent required key `.missingField`; the CTAP target maps those to
// CTAP2_ERR_CBOR_UNEXPECTED_TYPE and CTAP2_ERR_MISSING_PARAMETER.

extension CBORValue {
    /// The value as a byte string.
    public func bytesValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> [UInt8] {
        guard case .bytes(let bytes) = self else { throw typeError(what(), "byte string") }
        return bytes
    }

    /// The value as a text string.
    public func textValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> String {
        guard case .text(let text) = self else { throw typeError(what(), "text string") }
        return text
    }

    /// The value as an array.
    public func arrayValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> [CBORValue] {
        guard case .array(let items) = self else { throw typeError(what(), "array") }
        return items
    }

    /// The value as an array of text strings; `element` names a member that is not one.
    public func textArrayValue(
        _ what: @autoclosure () -> String,
        element: @autoclosure () -> String
    ) throws(CBORError) -> [String] {
        var texts: [String] = []
        for item in try arrayValue(what()) {
            texts.append(try item.textValue(element()))
        }
        return texts
    }

    /// The value as a map.
    public func mapValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> CBORMap {
        guard case .map(let entries) = self else { throw typeError(what(), "map") }
        return CBORMap(entries: entries)
    }

    /// The value as a boolean.
    public func boolValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> Bool {
        guard case .boolean(let value) = self else { throw typeError(what(), "boolean") }
        return value
    }

    /// The value as a signed integer (major type 0 or 1) that fits `Int`.
    public func intValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> Int {
        switch self {
        case .unsigned(let value):
            guard value <= UInt64(Int.max) else { throw CBORError(.outOfRange, "\(what()) is too large") }
            return Int(value)
        case .negative(let value):
            guard value <= UInt64(Int.max) else { throw CBORError(.outOfRange, "\(what()) is too small") }
            return -1 - Int(value)
        default:
            throw typeError(what(), "integer")
        }
    }

    /// The value as an unsigned integer (major type 0).
    public func unsignedValue(_ what: @autoclosure () -> String = "value") throws(CBORError) -> UInt64 {
        guard case .unsigned(let value) = self else { throw typeError(what(), "unsigned integer") }
        return value
    }

    private func typeError(_ what: String, _ expected: String) -> CBORError {
        CBORError(.unexpectedType, "\(what) is \(typeName), expected \(expected)")
    }

    /// A short name of this value's type, for error reasons.
    public var typeName: String {
        switch self {
        case .unsigned, .negative: "integer"
        case .bytes: "byte string"
        case .text: "text string"
        case .array: "array"
        case .map: "map"
        case .boolean: "boolean"
        case .null: "null"
        case .undefined: "undefined"
        case .simple: "simple value"
        case .half, .float, .double: "float"
        }
    }
}

/// Read access to a decoded map by key.
public struct CBORMap: Sendable {
    /// The entries in wire order.
    public let entries: [CBORMapEntry]

    /// Wraps decoded entries.
    public init(entries: [CBORMapEntry]) {
        self.entries = entries
    }

    /// The value under `key`, if present.
    public subscript(key: CBORValue) -> CBORValue? {
        entries.first(where: { $0.key == key })?.value
    }

    /// The value under the integer key `key`, if present.
    public subscript(int key: Int) -> CBORValue? { self[.int(key)] }

    /// The value under the text key `key`, if present.
    public subscript(text key: String) -> CBORValue? { self[.text(key)] }

    /// The value under `key`, or `.missingField`.
    public func required(_ key: Int, _ name: String) throws(CBORError) -> CBORValue {
        guard let value = self[int: key] else { throw CBORError(.missingField, "\(name) (\(key)) is missing") }
        return value
    }

    /// The value under the text key `key`, or `.missingField`.
    public func required(_ key: String) throws(CBORError) -> CBORValue {
        guard let value = self[text: key] else { throw CBORError(.missingField, "\"\(key)\" is missing") }
        return value
    }
}
