// The CTAP2 canonical CBOR encoder (CTAP 2.1 §8 "Message Encoding"): shortest
// heads, definite lengths, map keys sorted, no tags (the model has none).

extension CBORValue {
    /// The CTAP2 canonical encoding of this value.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    /// Appends the CTAP2 canonical encoding of this value to `out`.
    public func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let value):
            CBORHead.write(major: 0, argument: value, into: &out)
        case .negative(let value):
            CBORHead.write(major: 1, argument: value, into: &out)
        case .bytes(let bytes):
            CBORHead.write(major: 2, argument: UInt64(bytes.count), into: &out)
            out.append(contentsOf: bytes)
        case .text(let text):
            let utf8 = Array(text.utf8)
            CBORHead.write(major: 3, argument: UInt64(utf8.count), into: &out)
            out.append(contentsOf: utf8)
        case .array(let items):
            CBORHead.write(major: 4, argument: UInt64(items.count), into: &out)
            for item in items { item.encode(into: &out) }
        case .map(let entries):
            CBORHead.write(major: 5, argument: UInt64(entries.count), into: &out)
            let encoded = entries.map { (key: $0.key.encoded(), value: $0.value) }
            for entry in encoded.sorted(by: { CBORKeyOrder.precedes($0.key, $1.key) }) {
                out.append(contentsOf: entry.key)
                entry.value.encode(into: &out)
            }
        case .boolean(let value):
            out.append(value ? 0xF5 : 0xF4)
        case .null:
            out.append(0xF6)
        case .undefined:
            out.append(0xF7)
        case .simple(let value):
            if value < 24 {
                out.append(0xE0 | value)
            } else {
                out.append(0xF8)
                out.append(value)
            }
        case .half(let bits):
            out.append(0xF9)
            out.append(UInt8(truncatingIfNeeded: bits >> 8))
            out.append(UInt8(truncatingIfNeeded: bits))
        case .float(let value):
            out.append(0xFA)
            appendBigEndian(UInt64(value.bitPattern), byteCount: 4, into: &out)
        case .double(let value):
            out.append(0xFB)
            appendBigEndian(value.bitPattern, byteCount: 8, into: &out)
        }
    }
}

/// The head of a data item: major type and argument (RFC 8949 §3).
enum CBORHead {
    /// Writes the shortest head that carries `argument`.
    static func write(major: UInt8, argument: UInt64, into out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24:
            out.append(type | UInt8(argument))
        case 24...0xFF:
            out.append(type | 24)
            out.append(UInt8(argument))
        case 0x100...0xFFFF:
            out.append(type | 25)
            appendBigEndian(argument, byteCount: 2, into: &out)
        case 0x1_0000...0xFFFF_FFFF:
            out.append(type | 26)
            appendBigEndian(argument, byteCount: 4, into: &out)
        default:
            out.append(type | 27)
            appendBigEndian(argument, byteCount: 8, into: &out)
        }
    }
}

/// CTAP2 canonical map key order (CTAP 2.1 §8, "CTAP2 canonical CBOR encoding
/// form"): by major type, then shorter encoding first, then bytewise.
enum CBORKeyOrder {
    /// Whether the encoded key `a` sorts strictly before the encoded key `b`.
    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let majorA = a[0] >> 5
        let majorB = b[0] >> 5
        if majorA != majorB { return majorA < majorB }
        if a.count != b.count { return a.count < b.count }
        return a.lexicographicallyPrecedes(b)
    }
}

@inline(__always)
func appendBigEndian(_ value: UInt64, byteCount: Int, into out: inout [UInt8]) {
    for shift in stride(from: (byteCount - 1) * 8, through: 0, by: -8) {
        out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
    }
}
