// The uhid event codec on its own: round trips, strict decoding of short,
// oversized and unknown events, and encoder checks on fields that do not fit.

import LatchkeyTestSupport
@testable import LatchkeyUHID
import Testing

/// Little-endian bytes of an integer (the host order on the machines we run on).
private func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.littleEndian) { Array($0) }
}

/// An event of `type` whose payload starts with `payload`, `count` bytes long in all.
private func rawEvent(type: UInt32, payload: [UInt8] = [], count: Int = 4380) -> [UInt8] {
    var bytes = le(type) + payload
    bytes += [UInt8](repeating: 0, count: max(0, count - bytes.count))
    return Array(bytes.prefix(count))
}

@Suite("uhid event codec")
struct EventCodecTests {
    static let samples: [UHIDEvent] =
        abiCases.map(\.event) + [
            .output(UHIDOutputRequest(data: [], rtype: .output)),
            .output(UHIDOutputRequest(data: [0] + pattern(64), rtype: .output)),
            .output(UHIDOutputRequest(data: pattern(8), rtype: UHIDReportType(rawValue: 0xEE))),
            .input2([]),
            .input2(pattern(4096)),
            .getReportReply(UHIDGetReportReply(id: 1, err: 0, data: [])),
            .setReport(UHIDSetReportRequest(id: 0, rnum: 0, rtype: .output, data: [])),
            .start([]),
            .create2(
                UHIDCreate2Request(
                    name: String(repeating: "n", count: 127),
                    phys: String(repeating: "p", count: 63),
                    uniq: String(repeating: "u", count: 63),
                    bus: 0x06,
                    vendor: 0,
                    product: 0,
                    version: 0,
                    country: 0,
                    rdData: pattern(4096)
                )
            ),
            .create2(
                UHIDCreate2Request(
                    name: "clé ✓",
                    phys: "",
                    uniq: "",
                    bus: 0x03,
                    vendor: 1,
                    product: 2,
                    version: 3,
                    country: 4,
                    rdData: [0xC0]
                )
            ),
        ]

    @Test("decode(encode(event)) == event and every encoding is 4380 bytes", arguments: samples)
    func roundTrip(_ event: UHIDEvent) throws {
        let bytes = try event.encoded()
        #expect(bytes.count == 4380)
        #expect(try UHIDEvent(bytes: bytes) == event)
        #expect(try UHIDEvent(bytes: bytes).encoded() == bytes)
    }

    @Test("encode(into:) appends one event")
    func encodeIntoAppends() throws {
        var buffer: [UInt8] = [0xAA]
        try UHIDEvent.open.encode(into: &buffer)
        #expect(buffer.count == 4381)
        #expect(buffer.prefix(5) == [0xAA, 4, 0, 0, 0])
    }

    @Test("the type field is the first four bytes, native (little-endian) order")
    func typeField() throws {
        #expect(try UHIDEvent.input2([1]).encoded().prefix(7) == [12, 0, 0, 0, 1, 0, 1])
        #expect(try UHIDEvent(bytes: rawEvent(type: 4)) == .open)
        #expect(UHIDEvent.setReportReply(UHIDSetReportReply(id: 0, err: 0)).type == .setReportReply)
    }

    @Test("events shorter than 4380 bytes decode when every field read is present")
    func shortButComplete() throws {
        #expect(try UHIDEvent(bytes: rawEvent(type: 1, count: 4)) == .destroy)
        #expect(
            try UHIDEvent(bytes: rawEvent(type: 2, payload: le(UInt64(4)), count: 12)) == .start(.numberedInputReports)
        )
        #expect(
            try UHIDEvent(bytes: rawEvent(type: 9, payload: le(UInt32(7)) + [1, 0], count: 10))
                == .getReport(UHIDGetReportRequest(id: 7, rnum: 1, rtype: .feature))
        )
        #expect(
            try UHIDEvent(bytes: rawEvent(type: 12, payload: le(UInt16(2)) + [9, 8], count: 8)) == .input2([9, 8])
        )
    }

    @Test(
        "short events throw truncatedEvent",
        arguments: [
            [],
            [2],
            [6, 0, 0],
            rawEvent(type: 2, count: 11),  // START without all of dev_flags
            rawEvent(type: 6, count: 4102),  // OUTPUT without rtype
            rawEvent(type: 6, count: 100),
            rawEvent(type: 9, count: 9),  // GET_REPORT without rtype
            rawEvent(type: 10, payload: le(UInt32(1)) + le(UInt16(0)) + le(UInt16(10)), count: 17),
            rawEvent(type: 11, count: 279),  // CREATE2 without rd_size's followers
            rawEvent(type: 11, payload: [UInt8](repeating: 0, count: 256) + le(UInt16(34)), count: 300),
            rawEvent(type: 12, payload: le(UInt16(64)), count: 69),  // INPUT2 data cut short
            rawEvent(type: 13, payload: le(UInt32(1)) + [0, 0] + le(UInt16(5)), count: 16),
            rawEvent(type: 14, count: 9),
        ] as [[UInt8]]
    )
    func truncated(_ bytes: [UInt8]) {
        #expect(throws: UHIDError(.truncatedEvent, "")) { try UHIDEvent(bytes: bytes) }
    }

    @Test(
        "unknown and legacy event types throw unknownEventType",
        arguments: [0, 7, 8, 15, 16, 0xFFFF_FFFF] as [UInt32]
    )
    func unknownType(_ type: UInt32) {
        let error = #expect(throws: UHIDError(.unknownEventType, "")) { try UHIDEvent(bytes: rawEvent(type: type)) }
        #expect(error?.reason.contains("\(type)") == true)
    }

    @Test(
        "out-of-range sizes and oversized events throw invalidEvent",
        arguments: [
            rawEvent(type: 1, count: 4381),
            rawEvent(type: 6, payload: [UInt8](repeating: 0, count: 4096) + le(UInt16(4097)) + [1]),
            rawEvent(type: 10, payload: le(UInt32(1)) + le(UInt16(0)) + le(UInt16(4097))),
            rawEvent(type: 12, payload: le(UInt16(0xFFFF))),
            rawEvent(type: 13, payload: le(UInt32(1)) + [0, 0] + le(UInt16(4097))),
            rawEvent(type: 11, payload: [UInt8](repeating: 0, count: 256) + le(UInt16(0))),  // empty descriptor
            rawEvent(type: 11, payload: [UInt8](repeating: 0, count: 256) + le(UInt16(4097))),
        ] as [[UInt8]]
    )
    func invalid(_ bytes: [UInt8]) {
        #expect(throws: UHIDError(.invalidEvent, "")) { try UHIDEvent(bytes: bytes) }
    }

    @Test("a name with no NUL in its array decodes all 128 bytes; text stops at the first NUL")
    func strings() throws {
        var payload = [UInt8](repeating: 0x41, count: 128)  // name: 128 × "A", no NUL
        payload += Array("ph".utf8) + [0, 0x42] + [UInt8](repeating: 0, count: 60)  // phys: "ph", junk after NUL
        payload += [UInt8](repeating: 0, count: 64) + le(UInt16(1))
        guard case .create2(let request) = try UHIDEvent(bytes: rawEvent(type: 11, payload: payload)) else {
            Issue.record("not CREATE2")
            return
        }
        #expect(request.name == String(repeating: "A", count: 128))
        #expect(request.phys == "ph")
        #expect(request.uniq == "")
    }

    static let unencodable: [UHIDEvent] = [
        .input2(pattern(4097)),
        .output(UHIDOutputRequest(data: pattern(4097), rtype: .output)),
        .getReportReply(UHIDGetReportReply(id: 0, err: 0, data: pattern(4097))),
        .setReport(UHIDSetReportRequest(id: 0, rnum: 0, rtype: .feature, data: pattern(5000))),
        create2(name: String(repeating: "n", count: 128)),
        create2(name: "a\u{0}b"),
        create2(phys: String(repeating: "p", count: 64)),
        create2(uniq: String(repeating: "é", count: 32)),  // 64 bytes of UTF-8
        create2(uniq: "\u{0}"),
        create2(descriptor: []),
        create2(descriptor: pattern(4097)),
    ]

    private static func create2(
        name: String = "n",
        phys: String = "p",
        uniq: String = "u",
        descriptor: [UInt8] = fidoReportDescriptor
    ) -> UHIDEvent {
        .create2(
            UHIDCreate2Request(
                name: name,
                phys: phys,
                uniq: uniq,
                bus: UHIDCreate2Request.busUSB,
                vendor: 0,
                product: 0,
                version: 0,
                country: 0,
                rdData: descriptor
            )
        )
    }

    @Test("fields that do not fit the struct throw invalidEvent when encoding", arguments: unencodable)
    func unencodableFields(_ event: UHIDEvent) {
        #expect(throws: UHIDError(.invalidEvent, "")) { try event.encoded() }
    }

    @Test("arbitrary bytes never trap: they decode to an event that round-trips, or throw UHIDError")
    func arbitraryBytes() throws {
        var generator = SplitMix64(seed: 0x1A7C_4E1D)
        let types: [UInt32] = [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 0, 7, 99]
        var decoded = 0
        for _ in 0..<3000 {
            var bytes = generator.bytes(below: 4400)
            let count = bytes.count
            if count >= 4 {
                // Mostly known types, with plausible sizes, so decoding gets past the type.
                bytes.replaceSubrange(0..<4, with: le(types[Int(generator.next() % UInt64(types.count))]))
                if count >= 12, generator.next() % 2 == 0 {
                    let size = UInt16(generator.next() % 300)
                    for offset in [4, 10, 4 + 4096] where offset + 2 <= count {
                        bytes.replaceSubrange(offset..<(offset + 2), with: le(size))
                    }
                }
            }
            do {
                let event = try UHIDEvent(bytes: bytes)
                decoded += 1
                #expect(try UHIDEvent(bytes: event.encoded()) == event)
            } catch {
                #expect(error.reason.isEmpty == false)
            }
        }
        #expect(decoded > 100)
    }
}
