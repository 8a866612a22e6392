// RFC 8949 Appendix A ("Examples of Encoded CBOR Data Items") run through the
// strict CTAP2 decoder. Vectors are from RFC 8949 (IETF Trust, Simplified BSD
// License, https://trustee.ietf.org/license-info). CTAP2 forbids tags and
// indefinite lengths (CTAP 2.1 §8), so those vectors must be rejected; every
// other vector must decode to the listed value and re-encode to the same bytes.

import Testing

@testable import CBOR

/// Parses a hex string such as "a26161..." into bytes.
func hex(_ string: String) -> [UInt8] {
    let digits = Array(string.utf8).filter { $0 != UInt8(ascii: " ") }
    precondition(digits.count % 2 == 0, "odd hex string")
    func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: preconditionFailure("bad hex digit")
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) }
}

struct AcceptedVector: CustomTestStringConvertible, Sendable {
    let hex: String
    let value: CBORValue
    var testDescription: String { hex }
}

let acceptedVectors: [AcceptedVector] = [
    .init(hex: "00", value: .unsigned(0)),
    .init(hex: "01", value: .unsigned(1)),
    .init(hex: "0a", value: .unsigned(10)),
    .init(hex: "17", value: .unsigned(23)),
    .init(hex: "1818", value: .unsigned(24)),
    .init(hex: "1819", value: .unsigned(25)),
    .init(hex: "1864", value: .unsigned(100)),
    .init(hex: "1903e8", value: .unsigned(1000)),
    .init(hex: "1a000f4240", value: .unsigned(1_000_000)),
    .init(hex: "1b000000e8d4a51000", value: .unsigned(1_000_000_000_000)),
    .init(hex: "1bffffffffffffffff", value: .unsigned(18_446_744_073_709_551_615)),
    .init(hex: "3bffffffffffffffff", value: .negative(18_446_744_073_709_551_615)),
    .init(hex: "20", value: .int(-1)),
    .init(hex: "29", value: .int(-10)),
    .init(hex: "3863", value: .int(-100)),
    .init(hex: "3903e7", value: .int(-1000)),
    .init(hex: "f90000", value: .half(0x0000)),
    .init(hex: "f98000", value: .half(0x8000)),
    .init(hex: "f93c00", value: .half(0x3C00)),
    .init(hex: "fb3ff199999999999a", value: .double(1.1)),
    .init(hex: "f93e00", value: .half(0x3E00)),
    .init(hex: "f97bff", value: .half(0x7BFF)),
    .init(hex: "fa47c35000", value: .float(100000.0)),
    .init(hex: "fa7f7fffff", value: .float(3.4028234663852886e+38)),
    .init(hex: "fb7e37e43c8800759c", value: .double(1.0e+300)),
    .init(hex: "f90001", value: .half(0x0001)),
    .init(hex: "f90400", value: .half(0x0400)),
    .init(hex: "f9c400", value: .half(0xC400)),
    .init(hex: "fbc010666666666666", value: .double(-4.1)),
    .init(hex: "f97c00", value: .half(0x7C00)),
    .init(hex: "f97e00", value: .half(0x7E00)),
    .init(hex: "f9fc00", value: .half(0xFC00)),
    .init(hex: "fa7f800000", value: .float(.infinity)),
    .init(hex: "faff800000", value: .float(-.infinity)),
    .init(hex: "fb7ff0000000000000", value: .double(.infinity)),
    .init(hex: "fbfff0000000000000", value: .double(-.infinity)),
    .init(hex: "f4", value: .boolean(false)),
    .init(hex: "f5", value: .boolean(true)),
    .init(hex: "f6", value: .null),
    .init(hex: "f7", value: .undefined),
    .init(hex: "f0", value: .simple(16)),
    .init(hex: "f8ff", value: .simple(255)),
    .init(hex: "40", value: .bytes([])),
    .init(hex: "4401020304", value: .bytes([1, 2, 3, 4])),
    .init(hex: "60", value: .text("")),
    .init(hex: "6161", value: .text("a")),
    .init(hex: "6449455446", value: .text("IETF")),
    .init(hex: "62225c", value: .text("\"\\")),
    .init(hex: "62c3bc", value: .text("\u{00FC}")),
    .init(hex: "63e6b0b4", value: .text("\u{6C34}")),
    .init(hex: "64f0908591", value: .text("\u{10151}")),
    .init(hex: "80", value: .array([])),
    .init(hex: "83010203", value: .array([1, 2, 3])),
    .init(hex: "8301820203820405", value: .array([1, .array([2, 3]), .array([4, 5])])),
    .init(
        hex: "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
        value: .array((1...25).map { .unsigned(UInt64($0)) })
    ),
    .init(hex: "a0", value: .map([])),
    .init(hex: "a201020304", value: .intMap([(1, 2), (3, 4)])),
    .init(hex: "a26161016162820203", value: .textMap([("a", 1), ("b", .array([2, 3]))])),
    .init(hex: "826161a161626163", value: .array(["a", .textMap([("b", "c")])])),
    .init(
        hex: "a56161614161626142616361436164614461656145",
        value: .textMap([("a", "A"), ("b", "B"), ("c", "C"), ("d", "D"), ("e", "E")])
    ),
]

/// Appendix A items CTAP2 forbids: tags (major type 6) and indefinite lengths.
let forbiddenVectors: [String] = [
    "c074323031332d30332d32315432303a30343a30305a",  // 0("2013-03-21T20:04:00Z")
    "c11a514b67b0",  // 1(1363896240)
    "c1fb41d452d9ec200000",  // 1(1363896240.5)
    "d74401020304",  // 23(h'01020304')
    "d818456449455446",  // 24(h'6449455446')
    "d82076687474703a2f2f7777772e6578616d706c652e636f6d",  // 32("http://www.example.com")
    "c249010000000000000000",  // bignum 18446744073709551616
    "c349010000000000000000",  // bignum -18446744073709551617
    "5f42010243030405ff",  // (_ h'0102', h'030405')
    "7f657374726561646d696e67ff",  // (_ "strea", "ming")
    "9fff",  // [_ ]
    "9f018202039f0405ffff",  // [_ 1, [2, 3], [_ 4, 5]]
    "9f01820203820405ff",  // [_ 1, [2, 3], [4, 5]]
    "83018202039f0405ff",  // [1, [2, 3], [_ 4, 5]]
    "83019f0203ff820405",  // [1, [_ 2, 3], [4, 5]]
    "9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff",  // [_ 1..25]
    "bf61610161629f0203ffff",  // {_ "a": 1, "b": [_ 2, 3]}
    "826161bf61626163ff",  // ["a", {_ "b": "c"}]
    "bf6346756ef563416d7421ff",  // {_ "Fun": true, "Amt": -2}
]

@Suite("RFC 8949 Appendix A")
struct CBORVectorTests {
    @Test("decodes each vector to its value and re-encodes the same bytes", arguments: acceptedVectors)
    func acceptsAndRoundTrips(vector: AcceptedVector) throws {
        let bytes = hex(vector.hex)
        let decoded = try CBORDecoder().decode(bytes)
        if case .double(let d) = vector.value, d.isNaN {
            Issue.record("vector tables must not hold NaN")
        }
        #expect(decoded == vector.value)
        #expect(decoded.encoded() == bytes)
        #expect(vector.value.encoded() == bytes)
    }

    @Test("rejects the tags and indefinite lengths CTAP2 forbids", arguments: forbiddenVectors)
    func rejectsForbidden(hexString: String) {
        #expect(throws: CBORError(.forbidden, "")) { try CBORDecoder().decode(hex(hexString)) }
    }

    @Test("a NaN equals itself and round-trips, as its encoding does")
    func nanEquality() throws {
        let bytes = hex("83fbffff0100bf000083f97e00fa7fc00000")
        let value = try CBORDecoder().decode(bytes)
        #expect(value == value)
        #expect(try CBORDecoder().decode(value.encoded()) == value)
        #expect(Set([value, value]).count == 1)
        #expect(CBORValue.double(0.0) != CBORValue.double(-0.0))
    }

    @Test("decodes NaN payloads bit for bit")
    func nan() throws {
        #expect(try CBORDecoder().decode(hex("f97e00")) == .half(0x7E00))
        guard case .float(let f) = try CBORDecoder().decode(hex("fa7fc00000")) else {
            Issue.record("not a float")
            return
        }
        #expect(f.isNaN && f.bitPattern == 0x7FC0_0000)
        guard case .double(let d) = try CBORDecoder().decode(hex("fb7ff8000000000000")) else {
            Issue.record("not a double")
            return
        }
        #expect(d.isNaN && d.bitPattern == 0x7FF8_0000_0000_0000)
    }
}
