// A virtual key's name, the one value every layer that names a key shares:
// the configuration file's `[[keys]] name`, the control API's `{name}` and
// `?key=`, latchkeyctl's arguments, and the key's directory in the state
// directory (`keys/<name>/`). A name is a value, never a path: the grammar
// leaves no way to spell `.`, `..`, a separator, a NUL or a percent escape,
// so a directory derived from a valid name is always one level below
// `keys/`. The daemon still resolves every path it deletes or renames and
// refuses one outside its state directory (StateDirectory.swift): this type
// is the first check, that is the second.
//
// No Foundation: the daemon and latchkeyctl share this target, and it does
// no I/O.

/// A valid key name.
///
/// Grammar: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}` — 1 to 64 ASCII characters,
/// each a letter, a digit, `.`, `_` or `-`, the first a letter or a digit
/// (so `.`, `..` and hidden names cannot occur).
public struct KeyName: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The longest name, in characters (bytes: the grammar is ASCII).
    public static let maximumLength = 64

    /// The grammar, as error messages name it.
    public static let grammar = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"

    /// The rule in words, for people.
    public static let rule =
        "a key name is 1 to 64 characters: ASCII letters, digits, '.', '_' or '-', "
        + "starting with a letter or digit (\(grammar))"

    /// The name's text; always matches `grammar`.
    public let rawValue: String

    /// Validates `text` against the grammar; the one way to make a name.
    public init(_ text: String) throws(KeyNameError) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { throw KeyNameError(.empty) }
        guard bytes.count <= Self.maximumLength else { throw KeyNameError(.tooLong) }
        guard Self.isLetterOrDigit(bytes[0]) else { throw KeyNameError(.badFirstCharacter) }
        guard bytes.allSatisfy({ Self.isLetterOrDigit($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") })
        else { throw KeyNameError(.badCharacter) }
        rawValue = text
    }

    /// Whether `text` is a valid name.
    public static func isValid(_ text: String) -> Bool { (try? KeyName(text)) != nil }

    public var description: String { rawValue }

    public static func < (lhs: KeyName, rhs: KeyName) -> Bool { lhs.rawValue < rhs.rawValue }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: false
        }
    }
}

extension KeyName: ExpressibleByStringLiteral {
    /// A name written in the source: an invalid literal is a programmer
    /// error and traps.
    public init(stringLiteral value: String) {
        do {
            try self.init(value)
        } catch {
            preconditionFailure("invalid key name literal \"\(value)\": \(error)")
        }
    }
}

extension KeyName: Codable {
    /// Decodes a string and validates it; an invalid name is a decoding
    /// error whose message states the rule.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            try self.init(text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Why a text is not a key name. Equal by reason, so tests can match it.
public struct KeyNameError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case empty
        case tooLong
        case badFirstCharacter
        case badCharacter
    }

    public var reason: Reason

    public init(_ reason: Reason) { self.reason = reason }

    /// What is wrong, and the rule. The rejected text is not repeated: it
    /// may be megabytes long or hold control characters.
    public var description: String {
        let problem =
            switch reason {
            case .empty: "the key name is empty"
            case .tooLong: "the key name is longer than \(KeyName.maximumLength) characters"
            case .badFirstCharacter: "the key name does not start with a letter or digit"
            case .badCharacter: "the key name holds a character other than a letter, digit, '.', '_' or '-'"
            }
        return "\(problem); \(KeyName.rule)"
    }
}
