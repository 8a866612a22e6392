// The packetizer, the host-side reassembler and the report descriptor (CTAP 2.1 §11.2.4,
// §11.2.8.2).

import Testing

@testable import CTAPHID

@Suite("CTAPHID packetizer")
struct PacketizerTests {
    @Test(
        "a message takes one initialization packet and one continuation packet per 59 bytes",
        arguments: [(0, 1), (1, 1), (57, 1), (58, 2), (116, 2), (117, 3), (7550, 128), (7551, 129), (7609, 129)]
    )
    func reportCount(size: Int, reports: Int) {
        let fragments = CTAPHIDPacketizer.fragment(channel: 1, command: .cbor, payload: pattern(size))
        #expect(fragments.count == reports)
        #expect(CTAPHIDPacketizer.reportCount(payloadSize: size) == reports)
        #expect(fragments.allSatisfy { $0.count == 64 })
    }

    @Test("the initialization packet carries CID, CMD with bit 7 set and BCNT big-endian")
    func initializationHeader() {
        let fragments = CTAPHIDPacketizer.fragment(channel: 0x1234_5678, command: 0x10, payload: pattern(300))
        #expect(fragments[0][0..<7] == [0x12, 0x34, 0x56, 0x78, 0x90, 0x01, 0x2C])
        #expect(Array(fragments[0][7...]) == Array(pattern(300)[0..<57]))
        // A command given with bit 7 already set is the same command.
        #expect(CTAPHIDPacketizer.fragment(channel: 0x1234_5678, command: 0x90, payload: pattern(300)) == fragments)
    }

    @Test("continuation packets are numbered from 0 and the last one is zero-padded")
    func continuationPackets() {
        let payload = pattern(57 + 59 + 10, seed: 1)
        let fragments = CTAPHIDPacketizer.fragment(channel: 7, command: .ping, payload: payload)
        #expect(fragments.count == 3)
        #expect(fragments[1][0..<5] == [0, 0, 0, 7, 0])
        #expect(Array(fragments[1][5...]) == Array(payload[57..<116]))
        #expect(fragments[2][0..<5] == [0, 0, 0, 7, 1])
        #expect(Array(fragments[2][5..<15]) == Array(payload[116...]))
        #expect(fragments[2][15...].allSatisfy { $0 == 0 })
    }

    @Test("the largest message ends with sequence number 127")
    func largestMessage() {
        let fragments = CTAPHIDPacketizer.fragment(channel: 1, command: .cbor, payload: pattern(7609))
        #expect(fragments.last?[4] == 0x7F)
        #expect(fragments[0][5...6] == [0x1D, 0xB9])
    }
}

@Suite("CTAPHID response assembler")
struct ResponseAssemblerTests {
    @Test("reassembles what the packetizer fragments", arguments: [0, 1, 57, 58, 500, 7609])
    func roundTrip(size: Int) {
        var assembler = CTAPHIDResponseAssembler()
        let payload = pattern(size, seed: 5)
        var events: [Event] = []
        for report in CTAPHIDPacketizer.fragment(channel: 9, command: .cbor, payload: payload) {
            if let event = assembler.receive(report) { events.append(event) }
        }
        #expect(events == [.message(channel: 9, command: .cbor, payload: payload)])
    }

    @Test("reports a keepalive on its own")
    func keepalive() {
        var assembler = CTAPHIDResponseAssembler()
        let report = CTAPHIDPacketizer.fragment(channel: 3, command: .keepalive, payload: [2])[0]
        #expect(assembler.receive(report) == .keepalive(channel: 3, status: .upNeeded))
    }

    @Test("rejects a keepalive without exactly one status byte")
    func keepaliveLength() {
        var assembler = CTAPHIDResponseAssembler()
        let report = CTAPHIDPacketizer.fragment(channel: 3, command: .keepalive, payload: [2, 2])[0]
        #expect(assembler.receive(report) == .error)
    }

    @Test("rejects a continuation packet with no message in progress")
    func spuriousContinuation() {
        var assembler = CTAPHIDResponseAssembler()
        #expect(assembler.receive(rawReport(channel: 1, [0])) == .error)
    }

    /// The packets of a 200-byte CBOR message on channel 1.
    private let messageReports = CTAPHIDPacketizer.fragment(channel: 1, command: .cbor, payload: pattern(200))

    /// An assembler that has taken the first of `messageReports`.
    private func assemblerMidMessage() -> CTAPHIDResponseAssembler {
        var assembler = CTAPHIDResponseAssembler()
        #expect(assembler.receive(messageReports[0]) == nil)
        return assembler
    }

    @Test("rejects a continuation packet out of sequence or from another channel")
    func badContinuation() {
        var assembler = assemblerMidMessage()
        #expect(assembler.receive(messageReports[2]) == .error)
        #expect(!assembler.isAssembling)

        var other = assemblerMidMessage()
        #expect(other.receive(rawReport(channel: 2, [0])) == .error)
    }

    @Test("rejects an initialization packet in the middle of a message")
    func initializationMidMessage() {
        var assembler = assemblerMidMessage()
        #expect(assembler.receive(messageReports[0]) == .error)
    }

    @Test("rejects unknown commands, lengths over 7609 and reports under 5 bytes")
    func malformed() {
        var assembler = CTAPHIDResponseAssembler()
        #expect(assembler.receive(rawReport(channel: 1, [0xC0, 0, 0])) == .error)
        #expect(assembler.receive(rawReport(channel: 1, [0x90, 0x1D, 0xBA])) == .error)
        #expect(assembler.receive([0, 0, 0, 1]) == .error)
    }

    @Test("reads an error reply as a message with command ERROR")
    func errorReply() {
        var assembler = CTAPHIDResponseAssembler()
        let report = rawReport(channel: 1, [0xBF, 0, 1, 0x06])
        #expect(assembler.receive(report) == .message(channel: 1, command: .error, payload: [0x06]))
    }
}

@Suite("FIDO report descriptor")
struct ReportDescriptorTests {
    @Test("declares usage page 0xF1D0, usage CTAPHID and 64-byte input and output reports")
    func descriptor() {
        // Walk the short items (§6.2.2.2 of the HID specification): a prefix byte whose low two
        // bits give the data size (0, 1, 2 or 4 bytes), then the data, little-endian.
        var items: [(prefix: UInt8, value: Int)] = []
        var index = FIDOReportDescriptor.bytes.startIndex
        let bytes = FIDOReportDescriptor.bytes
        while index < bytes.endIndex {
            let prefix = bytes[index]
            let size = [0, 1, 2, 4][Int(prefix & 0x03)]
            let data = bytes[(index + 1)..<(index + 1 + size)]
            items.append((prefix & 0xFC, data.reversed().reduce(0) { $0 << 8 | Int($1) }))
            index += 1 + size
        }
        let expected: [(UInt8, Int)] = [
            (0x04, 0xF1D0),  // Usage Page
            (0x08, 0x01),  // Usage (CTAPHID)
            (0xA0, 0x01),  // Collection (Application)
            (0x08, 0x20), (0x14, 0), (0x24, 255), (0x74, 8), (0x94, 64), (0x80, 0x02),  // 64-byte input
            (0x08, 0x21), (0x14, 0), (0x24, 255), (0x74, 8), (0x94, 64), (0x90, 0x02),  // 64-byte output
            (0xC0, 0),  // End Collection
        ]
        #expect(items.map(\.prefix) == expected.map(\.0))
        #expect(items.map(\.value) == expected.map(\.1))
        // No Report ID item (tag 0x84): reports are unnumbered.
        #expect(!items.contains { $0.prefix == 0x84 })
    }

    @Test("the wire values of commands, errors and keepalive statuses match the spec")
    func wireValues() {
        let commands: [(CTAPHIDCommand, UInt8)] = [
            (.ping, 0x01), (.msg, 0x03), (.lock, 0x04), (.initialize, 0x06), (.wink, 0x08),
            (.cbor, 0x10), (.cancel, 0x11), (.keepalive, 0x3B), (.error, 0x3F),
        ]
        for (command, value) in commands {
            #expect(command.rawValue == value)
        }
        let errors: [(CTAPHIDError, UInt8)] = [
            (.invalidCommand, 0x01), (.invalidParameter, 0x02), (.invalidLength, 0x03),
            (.invalidSequence, 0x04), (.messageTimeout, 0x05), (.channelBusy, 0x06),
            (.lockRequired, 0x0A), (.invalidChannel, 0x0B), (.other, 0x7F),
        ]
        for (error, value) in errors {
            #expect(error.rawValue == value)
        }
        #expect(KeepaliveStatus.processing.rawValue == 1 && KeepaliveStatus.upNeeded.rawValue == 2)
        #expect(CTAPHIDConstants.maxMessageSize == 57 + 128 * 59)
    }
}
