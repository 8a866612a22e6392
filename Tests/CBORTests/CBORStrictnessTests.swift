// What the strict decoder refuses, and the canonical order the encoder writes.

import LatchkeyTestSupport
import Testing

@testable import CBOR

struct RejectedInput: CustomTestStringConvertible, Sendable {
    let hex: String
    let code: CBORError.Code
    let why: String
    var testDescription: String { "\(why): \(hex)" }
}

let rejectedInputs: [RejectedInput] = [
    .init(hex: "", code: .malformed, why: "empty input"),
    .init(hex: "18", code: .malformed, why: "truncated one-byte argument"),
    .init(hex: "19 01", code: .malformed, why: "truncated two-byte argument"),
    .init(hex: "1817", code: .nonCanonical, why: "23 in a one-byte argument"),
    .init(hex: "190017", code: .nonCanonical, why: "23 in a two-byte argument"),
    .init(hex: "1900ff", code: .nonCanonical, why: "255 in a two-byte argument"),
    .init(hex: "1a0000ffff", code: .nonCanonical, why: "65535 in a four-byte argument"),
    .init(hex: "1b00000000ffffffff", code: .nonCanonical, why: "2^32-1 in an eight-byte argument"),
    .init(hex: "3817", code: .nonCanonical, why: "-24 in a one-byte argument"),
    .init(hex: "5801ff", code: .nonCanonical, why: "byte string length 1 in a one-byte argument"),
    .init(hex: "1c", code: .malformed, why: "reserved additional information 28"),
    .init(hex: "1f", code: .malformed, why: "indefinite unsigned integer"),
    .init(hex: "ff", code: .malformed, why: "stray break"),
    .init(hex: "fc", code: .malformed, why: "reserved simple encoding 28"),
    .init(hex: "f818", code: .malformed, why: "two-byte simple value below 32"),
    .init(hex: "4401020304 00", code: .malformed, why: "bytes after the item"),
    .init(hex: "45010203", code: .malformed, why: "byte string longer than the input"),
    .init(hex: "5bffffffffffffffff00", code: .malformed, why: "huge byte string length"),
    .init(hex: "9bffffffffffffffff", code: .malformed, why: "huge array count"),
    .init(hex: "bbffffffffffffffff", code: .malformed, why: "huge map count"),
    .init(hex: "8301", code: .malformed, why: "array shorter than its count"),
    .init(hex: "a10102a0", code: .malformed, why: "map count one, two entries"),
    .init(hex: "a20102", code: .malformed, why: "map missing an entry"),
    .init(hex: "62c328", code: .invalidUTF8, why: "invalid UTF-8 continuation"),
    .init(hex: "63eda080", code: .invalidUTF8, why: "UTF-8 encoded surrogate"),
    .init(hex: "62c0af", code: .invalidUTF8, why: "overlong UTF-8"),
    .init(hex: "a203040102", code: .nonCanonical, why: "integer keys out of order"),
    .init(hex: "a2616201616102", code: .nonCanonical, why: "text keys out of order"),
    .init(hex: "a2626161016162 02", code: .nonCanonical, why: "longer key before shorter key"),
    .init(hex: "a2200101 02", code: .nonCanonical, why: "negative key before unsigned key"),
    .init(hex: "a201020103", code: .duplicateKey, why: "duplicate integer key"),
    .init(hex: "a2616101616102", code: .duplicateKey, why: "duplicate text key"),
    .init(hex: "c0 00", code: .forbidden, why: "tag"),
]

@Suite("strict CTAP2 decoding")
struct CBORStrictnessTests {
    @Test("rejects input that is malformed or not CTAP2 canonical", arguments: rejectedInputs)
    func rejects(input: RejectedInput) {
        #expect(throws: CBORError(input.code, "")) { try CBORDecoder().decode(hex(input.hex)) }
    }

    @Test("rejects nesting beyond the depth cap and accepts it at the cap")
    func depthCap() throws {
        let decoder = CBORDecoder(maximumDepth: 4)
        #expect(throws: CBORError(.tooDeep, "")) { try decoder.decode(hex("8181818180")) }
        #expect(try decoder.decode(hex("81818180")) == .array([.array([.array([.array([])])])]))
        // A deep input must not exhaust the stack: 100000 nested arrays.
        let deep = [UInt8](repeating: 0x81, count: 100_000) + [0x80]
        #expect(throws: CBORError(.tooDeep, "")) { try CBORDecoder().decode(deep) }
    }

    @Test("sorts map keys by major type, then length, then bytes")
    func encoderSortsKeys() {
        let map: CBORValue = .map([
            CBORMapEntry(key: "aa", value: 1),
            CBORMapEntry(key: .int(-1), value: 2),
            CBORMapEntry(key: 24, value: 3),
            CBORMapEntry(key: "b", value: 4),
            CBORMapEntry(key: 3, value: 5),
            CBORMapEntry(key: .bytes([0]), value: 6),
        ])
        // 03, 1818, 20, 4100, 6162, 626161
        #expect(map.encoded() == hex("a6 0305 181803 2002 410006 616204 62616101"))
    }

    @Test("orders a COSE key as CTAP expects: 1, 3, -1, -2, -3")
    func coseKeyOrder() throws {
        let key: CBORValue = .intMap([(-3, .bytes([3])), (1, 2), (-1, 1), (3, -7), (-2, .bytes([2]))])
        let bytes = key.encoded()
        #expect(bytes == hex("a5 0102 0326 2001 214102 224103"))
        #expect(try CBORDecoder().decode(bytes).encoded() == bytes)
    }

    @Test("encodes integers at every head-size boundary in the shortest form")
    func shortestHeads() throws {
        let cases: [(UInt64, String)] = [
            (23, "17"), (24, "1818"), (255, "18ff"), (256, "190100"), (65535, "19ffff"),
            (65536, "1a00010000"), (0xFFFF_FFFF, "1affffffff"), (0x1_0000_0000, "1b0000000100000000"),
        ]
        for (value, expected) in cases {
            #expect(CBORValue.unsigned(value).encoded() == hex(expected))
            #expect(try CBORDecoder().decode(hex(expected)) == .unsigned(value))
            #expect(CBORValue.negative(value).encoded()[0] >> 5 == 1)
        }
    }

    @Test("reads typed fields and reports wrong types and missing keys")
    func typedReads() throws {
        let map = try CBORDecoder().decode(hex("a3 0142 0102 02 6178 03 f5")).mapValue()
        #expect(try map.required(1, "one").bytesValue() == [1, 2])
        #expect(try map.required(2, "two").textValue() == "x")
        #expect(try map.required(3, "three").boolValue())
        #expect(throws: CBORError(.unexpectedType, "")) { try map.required(1, "one").textValue() }
        #expect(throws: CBORError(.missingField, "")) { try map.required(4, "four") }
        #expect(try CBORValue.int(-7).intValue() == -7)
        #expect(throws: CBORError(.outOfRange, "")) { try CBORValue.unsigned(.max).intValue() }
    }

    @Test("round-trips generated values through encode and decode", arguments: 0..<200)
    func generatedRoundTrip(seed: Int) throws {
        var generator = SplitMix64(seed: UInt64(seed))
        let value = canonical(randomValue(&generator, depth: 0))
        let bytes = value.encoded()
        let decoded = try CBORDecoder(maximumDepth: 8).decode(bytes)
        #expect(decoded == value)
        #expect(decoded.encoded() == bytes)
    }
}

func randomValue(_ g: inout SplitMix64, depth: Int) -> CBORValue {
    let pick = Int.random(in: 0..<(depth < 4 ? 9 : 6), using: &g)
    let widths: [UInt64] = [23, 255, 65535, 0xFFFF_FFFF, .max]
    switch pick {
    case 0: return .unsigned(UInt64.random(in: 0...widths.randomElement(using: &g)!, using: &g))
    case 1: return .negative(UInt64.random(in: 0...widths.randomElement(using: &g)!, using: &g))
    case 2: return .bytes((0..<Int.random(in: 0..<300, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
    case 3: return .text(String(repeating: "é", count: Int.random(in: 0..<40, using: &g)))
    case 4: return [.boolean(true), .boolean(false), .null, .undefined].randomElement(using: &g)!
    case 5: return .simple(UInt8.random(in: 32...255, using: &g))
    case 6, 7:
        return .array((0..<Int.random(in: 0..<5, using: &g)).map { _ in randomValue(&g, depth: depth + 1) })
    default:
        var entries: [CBORMapEntry] = []
        for _ in 0..<Int.random(in: 0..<5, using: &g) {
            let key = randomValue(&g, depth: 7)
            if entries.contains(where: { $0.key == key }) { continue }
            entries.append(CBORMapEntry(key: key, value: randomValue(&g, depth: depth + 1)))
        }
        return .map(entries)
    }
}

/// Puts every map of `value` into canonical key order, as decoding yields it.
func canonical(_ value: CBORValue) -> CBORValue {
    switch value {
    case .array(let items):
        return .array(items.map(canonical))
    case .map(let entries):
        return .map(
            entries.map { CBORMapEntry(key: canonical($0.key), value: canonical($0.value)) }
                .sorted { CBORKeyOrder.precedes($0.key.encoded(), $1.key.encoded()) }
        )
    default:
        return value
    }
}
