// The strict CTAP2 CBOR decoder (CTAP 2.1 §8; RFC 8949 §3 for well-formedness).
// It accepts exactly the canonical encodings CBORValue.encoded() produces:
// shortest heads, definite lengths, no tags, map keys in canonical order and
// unique, valid UTF-8, nesting within a cap. Every length is checked against
// the bytes left before anything is sliced.

/// Decodes one CBOR data item that must fill the whole input.
public struct CBORDecoder {
    /// The nesting depth CTAP requests need: request map → extensions map →
    /// extension input map → COSE key (CTAP 2.1 §8 asks for at least four).
    public static let defaultMaximumDepth = 8

    /// How deeply arrays and maps may nest; deeper input is rejected.
    public var maximumDepth: Int

    /// Makes a decoder with a depth cap.
    public init(maximumDepth: Int = CBORDecoder.defaultMaximumDepth) {
        self.maximumDepth = maximumDepth
    }

    /// Decodes `bytes`, which must hold exactly one data item.
    public func decode(_ bytes: [UInt8]) throws(CBORError) -> CBORValue {
        var reader = Reader(bytes: bytes, maximumDepth: maximumDepth)
        let value = try reader.item(depth: 0)
        guard reader.offset == bytes.count else {
            throw CBORError(.malformed, "\(bytes.count - reader.offset) bytes after the data item")
        }
        return value
    }

    /// Decodes one data item at the start of `bytes` and returns it with the
    /// number of bytes it took (for formats that follow CBOR with other data).
    public func decodePrefix(_ bytes: [UInt8]) throws(CBORError) -> (value: CBORValue, byteCount: Int) {
        var reader = Reader(bytes: bytes, maximumDepth: maximumDepth)
        let value = try reader.item(depth: 0)
        return (value, reader.offset)
    }
}

extension CBORValue {
    /// Decodes `bytes` with the default strict decoder.
    public init(decoding bytes: [UInt8]) throws(CBORError) {
        self = try CBORDecoder().decode(bytes)
    }
}

private struct Reader {
    let bytes: [UInt8]
    let maximumDepth: Int
    var offset = 0

    init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    var remaining: Int { bytes.count - offset }

    mutating func byte() throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw CBORError(.malformed, "truncated at byte \(offset)") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bigEndian(_ count: Int) throws(CBORError) -> UInt64 {
        guard remaining >= count else { throw CBORError(.malformed, "truncated head at byte \(offset)") }
        var value: UInt64 = 0
        for index in offset..<offset + count { value = value << 8 | UInt64(bytes[index]) }
        offset += count
        return value
    }

    mutating func slice(_ count: UInt64) throws(CBORError) -> [UInt8] {
        guard count <= UInt64(remaining) else {
            throw CBORError(.malformed, "length \(count) exceeds the \(remaining) bytes left")
        }
        let end = offset + Int(count)
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// Reads the argument for additional info `info` of major type `major`,
    /// insisting on the shortest form.
    mutating func argument(major: UInt8, info: UInt8) throws(CBORError) -> UInt64 {
        switch info {
        case 0..<24:
            return UInt64(info)
        case 24:
            let value = try bigEndian(1)
            guard value >= 24 else { throw CBORError(.nonCanonical, "one-byte argument \(value) fits the head") }
            return value
        case 25:
            let value = try bigEndian(2)
            guard value > 0xFF else { throw CBORError(.nonCanonical, "two-byte argument \(value) fits one byte") }
            return value
        case 26:
            let value = try bigEndian(4)
            guard value > 0xFFFF else { throw CBORError(.nonCanonical, "four-byte argument \(value) fits two bytes") }
            return value
        case 27:
            let value = try bigEndian(8)
            guard value > 0xFFFF_FFFF else {
                throw CBORError(.nonCanonical, "eight-byte argument \(value) fits four bytes")
            }
            return value
        case 31 where (2...5).contains(major):
            throw CBORError(.forbidden, "indefinite-length item (major type \(major))")
        default:
            throw CBORError(.malformed, "reserved additional information \(info) for major type \(major)")
        }
    }

    mutating func item(depth: Int) throws(CBORError) -> CBORValue {
        let start = offset
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1F

        if major == 7 { return try simpleOrFloat(info: info) }
        let argument = try argument(major: major, info: info)

        switch major {
        case 0:
            return .unsigned(argument)
        case 1:
            return .negative(argument)
        case 2:
            return .bytes(try slice(argument))
        case 3:
            let utf8 = try slice(argument)
            guard let text = String(validating: utf8, as: UTF8.self) else {
                throw CBORError(.invalidUTF8, "text string at byte \(start)")
            }
            return .text(text)
        case 4:
            guard depth < maximumDepth else { throw CBORError(.tooDeep, "array deeper than \(maximumDepth)") }
            // Every item takes at least one byte: a count beyond what is left is a lie.
            guard argument <= UInt64(remaining) else {
                throw CBORError(.malformed, "array of \(argument) items in \(remaining) bytes")
            }
            var items: [CBORValue] = []
            items.reserveCapacity(Int(argument))
            for _ in 0..<argument { items.append(try item(depth: depth + 1)) }
            return .array(items)
        case 5:
            guard depth < maximumDepth else { throw CBORError(.tooDeep, "map deeper than \(maximumDepth)") }
            guard argument <= UInt64(remaining / 2) else {
                throw CBORError(.malformed, "map of \(argument) entries in \(remaining) bytes")
            }
            return .map(try mapEntries(count: Int(argument), depth: depth))
        default:
            // Major type 6: tags are not allowed in CTAP2 messages (CTAP 2.1 §8).
            throw CBORError(.forbidden, "tag \(argument) at byte \(start)")
        }
    }

    mutating func mapEntries(count: Int, depth: Int) throws(CBORError) -> [CBORMapEntry] {
        var entries: [CBORMapEntry] = []
        entries.reserveCapacity(count)
        var previousKey: ArraySlice<UInt8>? = nil
        for _ in 0..<count {
            let keyStart = offset
            let key = try item(depth: depth + 1)
            let keyBytes = bytes[keyStart..<offset]
            if let previousKey {
                if previousKey == keyBytes {
                    throw CBORError(.duplicateKey, "map key repeated at byte \(keyStart)")
                }
                guard CBORKeyOrder.precedes(Array(previousKey), Array(keyBytes)) else {
                    throw CBORError(.nonCanonical, "map key out of canonical order at byte \(keyStart)")
                }
            }
            previousKey = keyBytes
            let value = try item(depth: depth + 1)
            entries.append(CBORMapEntry(key: key, value: value))
        }
        return entries
    }

    mutating func simpleOrFloat(info: UInt8) throws(CBORError) -> CBORValue {
        switch info {
        case 20: return .boolean(false)
        case 21: return .boolean(true)
        case 22: return .null
        case 23: return .undefined
        case 0..<20: return .simple(info)
        case 24:
            let value = try byte()
            // RFC 8949 §3.3: a two-byte simple value below 32 is not well-formed.
            guard value >= 32 else { throw CBORError(.malformed, "two-byte simple value \(value) below 32") }
            return .simple(value)
        case 25:
            return .half(UInt16(try bigEndian(2)))
        case 26:
            return .float(Float(bitPattern: UInt32(try bigEndian(4))))
        case 27:
            return .double(Double(bitPattern: try bigEndian(8)))
        case 31:
            throw CBORError(.malformed, "break outside an indefinite-length item")
        default:
            throw CBORError(.malformed, "reserved simple value encoding \(info)")
        }
    }
}
