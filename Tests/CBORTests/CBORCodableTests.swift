// The protocol pair that names the wire types' convention, and the helpers
// any conforming type gets: reading from bytes, from an optional member, and
// from an array of elements.

import Testing

import CBOR

/// A small wire type: {1: x, 2: y}, both integers, y optional.
struct WirePoint: Equatable, CBORDecodable, CBOREncodable {
    var x: Int
    var y: Int?

    init(x: Int, y: Int? = nil) {
        self.x = x
        self.y = y
    }

    init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("point")
        x = try map.required(1, "x").intValue("x")
        y = try map[int: 2]?.intValue("y")
    }

    var cbor: CBORValue {
        var entries: [(Int, CBORValue)] = [(1, .int(x))]
        if let y { entries.append((2, .int(y))) }
        return .intMap(entries)
    }
}

@Suite("CBORDecodable and CBOREncodable")
struct CBORCodableTests {
    @Test("decoding what a type encodes gives the value back", arguments: [WirePoint(x: 1, y: -2), WirePoint(x: 0)])
    func roundTrip(point: WirePoint) throws {
        #expect(try WirePoint(decoding: point.cbor.encoded()) == point)
    }

    @Test("reading from bytes is strict: input that is not canonical is refused before the type reads it")
    func decodingIsStrict() {
        // {2: 2, 1: 1}: keys out of canonical order.
        #expect(throws: CBORError(.nonCanonical, "")) { try WirePoint(decoding: hex("a2 0202 0101")) }
        #expect(throws: CBORError(.malformed, "")) { try WirePoint(decoding: hex("a1 0101 00")) }
    }

    @Test("an array reads element by element; a bad element fails as the element would")
    func arrays() throws {
        let points = CBORValue.array([WirePoint(x: 1).cbor, WirePoint(x: 2, y: 3).cbor])
        #expect(try points.arrayValue(of: WirePoint.self, "points") == [WirePoint(x: 1), WirePoint(x: 2, y: 3)])
        let badElement = CBORValue.array([WirePoint(x: 1).cbor, .intMap([(1, "one")])])
        #expect(throws: CBORError(.unexpectedType, "")) { try badElement.arrayValue(of: WirePoint.self, "points") }
        let missing = CBORValue.array([.intMap([(2, 2)])])
        #expect(throws: CBORError(.missingField, "")) { try missing.arrayValue(of: WirePoint.self, "points") }
        let notAnArray = WirePoint(x: 1).cbor
        #expect(throws: CBORError(.unexpectedType, "")) { try notAnArray.arrayValue(of: WirePoint.self, "points") }
    }

    @Test("an optional member reads as the type, and as nil when absent")
    func optionalMembers() throws {
        let map = try CBORValue.intMap([(7, WirePoint(x: 5).cbor)]).mapValue()
        let present: WirePoint? = try map[int: 7]?.decoded()
        let absent: WirePoint? = try map[int: 8]?.decoded()
        #expect(present == WirePoint(x: 5))
        #expect(absent == nil)
        #expect(throws: CBORError(.unexpectedType, "")) { try CBORValue.int(1).decoded(as: WirePoint.self) }
    }
}
