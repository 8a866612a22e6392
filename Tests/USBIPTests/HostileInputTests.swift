// Hostile and malformed client input: every such stream ends in an error and a close, never
// a trap, and the decoders never buffer more than one message under the cap. Also the
// client decoder's checks of what a server sends.

import Testing

@testable import USBIP

/// The 48-byte header of a CMD_SUBMIT with the given fields, built by hand so that it can say
/// what the codec would refuse to encode.
func rawSubmit(
    seqnum: UInt32 = 1,
    devid: UInt32 = 0x0001_0002,
    direction: UInt32 = 1,
    ep: UInt32 = 1,
    length: UInt32 = 64,
    numberOfPackets: UInt32 = 0
) -> [UInt8] {
    var bytes: [UInt8] = []
    for word in [1, seqnum, devid, direction, ep, 0, length, 0, numberOfPackets, 0, 0, 0] as [UInt32] {
        bytes.appendBigEndian(word)
    }
    return bytes
}

let importRequest = USBIPOpReqImport(busid: "1-1").encodedBytes

/// Hostile streams, each with the error it must end in.
let hostileStreams: [(String, [UInt8], USBIPError.Code)] = [
    ("a reply sent to the server", hex("0111 0005 00000000 00000000"), .unexpectedMessage),
    ("an unknown reply code sent to the server", hex("0111 0002 00000000"), .unknownOperation),
    ("a reply code of another version", hex("0106 0003 00000000"), .unsupportedVersion),
    ("a URB command before an import", rawSubmit(), .unsupportedVersion),
    ("another protocol (HTTP)", Array("GET / HTTP/1.1\r\n\r\n".utf8), .unsupportedVersion),
    ("an unknown URB command", importRequest + hex("00000005") + [UInt8](repeating: 0, count: 44), .unknownCommand),
    (
        "a RET_SUBMIT sent to the server", importRequest + hex("00000003") + [UInt8](repeating: 0, count: 44),
        .unexpectedMessage
    ),
    ("a second import", importRequest + importRequest, .unexpectedMessage),
    ("a devlist request after the import", importRequest + hex("0111 8005 00000000"), .unexpectedMessage),
    (
        "a transfer_buffer_length above the cap", importRequest + rawSubmit(direction: 0, length: 65537),
        .transferTooLarge
    ),
    (
        "a huge IN transfer_buffer_length", importRequest + rawSubmit(direction: 1, length: 0x7FFF_FFFF),
        .transferTooLarge
    ),
    ("a negative transfer_buffer_length", importRequest + rawSubmit(direction: 0, length: 0xFFFF_FFF0), .invalidField),
    ("an isochronous number_of_packets", importRequest + rawSubmit(numberOfPackets: 3), .isochronous),
    (
        "a negative number_of_packets other than -1", importRequest + rawSubmit(numberOfPackets: 0xFFFF_FFFE),
        .isochronous
    ),
    ("a direction other than 0 and 1", importRequest + rawSubmit(direction: 2), .invalidField),
    ("an endpoint number above 15", importRequest + rawSubmit(ep: 16), .invalidField),
    ("a devid of another device", importRequest + rawSubmit(devid: 0x0001_0003), .deviceMismatch),
    ("a reused seqnum of a held URB", importRequest + rawSubmit(seqnum: 4) + rawSubmit(seqnum: 4), .duplicateSeqnum),
    (
        "an unlink with another devid",
        importRequest + USBIPCmdUnlink(seqnum: 2, devid: 5, unlinkSeqnum: 1).encodedBytes, .deviceMismatch
    ),
]

@Suite("hostile input")
struct HostileInputTests {
    @Test("hostile streams close the connection with their error", arguments: hostileStreams)
    func hostileStreamCloses(name: String, bytes: [UInt8], code: USBIPError.Code) {
        for feeding in Feeding.allCases {
            var server = USBIPServerConnection(exports: testExports)
            let actions = server.receive(bytes, feeding)
            #expect(actions.last == .close, "\(name), \(feeding)")
            #expect(actions.filter { $0 == .close }.count == 1, "\(name), \(feeding)")
            #expect(server.isClosed)
            #expect(
                server.failure == USBIPError(code, ""),
                "\(name), \(feeding): \(String(describing: server.failure))"
            )
            // Nothing more, whatever follows.
            #expect(server.receive(importRequest + rawSubmit()) == [])
            #expect(server.inputReport(report(0)) == [])
        }
    }

    @Test("an over-cap transfer is refused from its header, before any data is buffered")
    func overCapRefusedFromHeader() {
        var decoder = USBIPServerDecoder()
        decoder.phase = .urbs
        decoder.append(rawSubmit(direction: 0, length: 1 << 20))
        #expect(throws: USBIPError(.transferTooLarge, "")) { try decoder.next() }
        decoder.append([UInt8](repeating: 0, count: 4096))
        #expect(decoder.bufferedByteCount == 0)
        #expect(throws: USBIPError(.transferTooLarge, "")) { try decoder.next() }
    }

    @Test("an unknown command is refused from its first four bytes")
    func unknownCommandRefusedEarly() throws {
        var decoder = USBIPServerDecoder()
        decoder.phase = .urbs
        decoder.append([0, 0, 0])
        #expect(try decoder.next() == nil)
        decoder.append([9])
        #expect(throws: USBIPError(.unknownCommand, "")) { try decoder.next() }
    }

    @Test("a second OP_REQ_IMPORT is refused as soon as its first four bytes arrive")
    func secondImportRefusedEarly() {
        var server = USBIPServerConnection(exports: testExports)
        _ = server.receive(importRequest)
        #expect(server.receive(Array(importRequest.prefix(4))) == [.close])
        #expect(server.failure == USBIPError(.unexpectedMessage, ""))
    }

    @Test("a large OUT transfer arriving in pieces is buffered only up to its own length")
    func bufferingIsBounded() throws {
        var decoder = USBIPServerDecoder()
        decoder.phase = .urbs
        let data = [UInt8](repeating: 7, count: 65536)
        let message = rawSubmit(direction: 0, length: 65536) + data
        var decoded = 0
        for start in stride(from: 0, to: message.count, by: 1000) {
            decoder.append(message[start..<min(start + 1000, message.count)])
            #expect(decoder.bufferedByteCount <= 48 + 65536)
            while let next = try decoder.next() {
                guard case .cmdSubmit(let submit) = next else { continue }
                #expect(submit.transferBuffer == data)
                decoded += 1
            }
        }
        #expect(decoded == 1)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("more held IN URBs than the limit close the connection")
    func tooManyPendingURBs() throws {
        var harness = Harness(configuration: .init(maximumPendingInputURBs: 3))
        try harness.attach()
        for _ in 0..<3 {
            #expect(try harness.send(harness.client.interruptIn().bytes) == Outcome())
        }
        let outcome = try harness.send(harness.client.interruptIn().bytes)
        #expect(outcome.closed)
        #expect(harness.server.failure == USBIPError(.tooManyPendingURBs, ""))
    }

    @Test("every message split at every point decodes the same")
    func splitsAnywhere() throws {
        let stream =
            importRequest
            + USBIPCmdSubmit(
                seqnum: 1,
                devid: 0x0001_0002,
                direction: .out,
                ep: 1,
                transferBufferLength: 64,
                transferBuffer: report(1)
            ).encodedBytes
            + USBIPCmdUnlink(seqnum: 2, devid: 0x0001_0002, unlinkSeqnum: 1).encodedBytes
        func decodeAll(_ chunks: [[UInt8]]) throws -> [USBIPServerDecoder.Message] {
            var decoder = USBIPServerDecoder()
            var messages: [USBIPServerDecoder.Message] = []
            for chunk in chunks {
                decoder.append(chunk)
                while let message = try decoder.next() {
                    if case .opReqImport = message { decoder.phase = .urbs }
                    messages.append(message)
                }
            }
            return messages
        }
        let expected = try decodeAll([stream])
        #expect(expected.count == 3)
        for split in 0...stream.count {
            #expect(try decodeAll([Array(stream[..<split]), Array(stream[split...])]) == expected)
        }
    }

    @Test("the client decoder refuses a RET_SUBMIT for no outstanding command")
    func clientRefusesUnknownSeqnum() throws {
        var decoder = try importedClientDecoder()
        decoder.append(USBIPRetSubmit(seqnum: 9, status: .success, actualLength: 0).encodedBytes)
        #expect(throws: USBIPError(.unknownSeqnum, "")) { try decoder.next() }
    }

    @Test("the client decoder refuses an IN reply longer than the URB's buffer")
    func clientRefusesOverlongReply() throws {
        var decoder = try importedClientDecoder()
        decoder.expectReply(to: inURB(seqnum: 1, length: 8))
        decoder.append(
            USBIPRetSubmit(seqnum: 1, status: .success, actualLength: 64, transferBuffer: report(0)).encodedBytes
        )
        #expect(throws: USBIPError(.lengthExceedsBuffer, "")) { try decoder.next() }
    }

    @Test("the client decoder refuses a RET_SUBMIT for an URB unlinked with -ECONNRESET")
    func clientRefusesReplyAfterUnlink() throws {
        var decoder = try importedClientDecoder()
        decoder.expectReply(to: inURB(seqnum: 1, length: 64))
        decoder.expectReply(to: USBIPCmdUnlink(seqnum: 2, devid: 0x0001_0002, unlinkSeqnum: 1))
        decoder.append(USBIPRetUnlink(seqnum: 2, status: .connectionReset).encodedBytes)
        #expect(try decoder.next() == .retUnlink(USBIPRetUnlink(seqnum: 2, status: .connectionReset)))
        decoder.append(
            USBIPRetSubmit(seqnum: 1, status: .success, actualLength: 64, transferBuffer: report(0)).encodedBytes
        )
        #expect(throws: USBIPError(.unknownSeqnum, "")) { try decoder.next() }
    }

    @Test("the client decoder refuses anything after OP_REP_DEVLIST")
    func clientRefusesBytesAfterDevlist() throws {
        var decoder = USBIPClientDecoder()
        decoder.append(USBIPOpRepDevlist(devices: []).encodedBytes + [0])
        #expect(try decoder.next() == .opRepDevlist(USBIPOpRepDevlist(devices: [])))
        #expect(decoder.phase == .finished)
        #expect(throws: USBIPError(.unexpectedMessage, "")) { try decoder.next() }
    }

    @Test("the client decoder reads an OP_REP_DEVLIST arriving one byte at a time")
    func clientDevlistByteAtATime() throws {
        let reply = USBIPOpRepDevlist(
            devices: testExports.map { .init(device: $0.record, interfaces: $0.device.usbipInterfaces) }
        )
        var decoder = USBIPClientDecoder()
        var messages: [USBIPClientDecoder.Message] = []
        for byte in reply.encodedBytes {
            decoder.append([byte])
            while let message = try decoder.next() { messages.append(message) }
        }
        #expect(messages == [.opRepDevlist(reply)])
    }
}

/// A client decoder past the OP_REP_IMPORT of the first test export: in the URB phase.
private func importedClientDecoder() throws -> USBIPClientDecoder {
    var decoder = USBIPClientDecoder()
    decoder.append(USBIPOpRepImport(device: testExports[0].record).encodedBytes)
    _ = try decoder.next()
    return decoder
}

/// An interrupt-IN URB of `length` bytes to the first test export.
private func inURB(seqnum: UInt32, length: Int32) -> USBIPCmdSubmit {
    USBIPCmdSubmit(seqnum: seqnum, devid: 0x0001_0002, direction: .in, ep: 1, transferBufferLength: length)
}
