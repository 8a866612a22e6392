// The host side for the tests: a USB/IP client that builds commands with increasing seqnums
// and reads the server's replies with USBIPClientDecoder, as vhci-hcd would; a harness that
// feeds it to a server connection whole, byte by byte, or split at random; and fixtures.

import LatchkeyTestSupport
import Testing

@testable import USBIP

/// The FIDO report descriptor of CTAP 2.1 §11.2.8.2, written out here because the USBIP
/// target does not depend on CTAPHID (whose `FIDOReportDescriptor.bytes` the daemon passes).
let fidoReportDescriptor: [UInt8] = [
    0x06, 0xD0, 0xF1,  // Usage Page (FIDO Alliance)
    0x09, 0x01,  // Usage (CTAPHID)
    0xA1, 0x01,  // Collection (Application)
    0x09, 0x20, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x81, 0x02,  // 64-byte input
    0x09, 0x21, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x91, 0x02,  // 64-byte output
    0xC0,  // End Collection
]

let testDevice = FIDOUSBDevice(
    idVendor: 0x1209,
    idProduct: 0x4C4B,
    bcdDevice: 0x0123,
    manufacturer: "latchkey",
    product: "latchkey virtual FIDO2 key",
    serialNumber: "LK-0001",
    reportDescriptor: fidoReportDescriptor
)

let testExports = [
    USBIPExport(busid: "1-1", busnum: 1, devnum: 2, device: testDevice),
    USBIPExport(busid: "1-2", busnum: 1, devnum: 3, device: testDevice),
]

/// `count` bytes from a hex string with optional spaces.
func hex(_ string: String) -> [UInt8] {
    let digits = Array(string.filter { !$0.isWhitespace })
    precondition(digits.count % 2 == 0, "an odd number of hex digits")
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

/// A 64-byte report whose bytes count up from `first`.
func report(_ first: UInt8) -> [UInt8] {
    (0..<64).map { first &+ UInt8($0) }
}

/// What a client saw in answer to some bytes or a report.
struct Outcome: Equatable {
    var messages: [USBIPClientDecoder.Message] = []
    var reports: [[UInt8]] = []
    var reportBusIDs: [String] = []
    var closed = false

    /// The RET_SUBMIT replies, in order.
    var retSubmits: [USBIPRetSubmit] {
        messages.compactMap { if case .retSubmit(let reply) = $0 { reply } else { nil } }
    }

    /// The RET_UNLINK replies, in order.
    var retUnlinks: [USBIPRetUnlink] {
        messages.compactMap { if case .retUnlink(let reply) = $0 { reply } else { nil } }
    }

    mutating func merge(_ other: Outcome) {
        messages += other.messages
        reports += other.reports
        reportBusIDs += other.reportBusIDs
        closed = closed || other.closed
    }
}

/// A USB/IP client, the role Linux's `usbip` tool and vhci-hcd play.
struct USBIPClientConnection {
    var decoder = USBIPClientDecoder()
    var nextSeqnum: UInt32 = 1
    /// `(busnum << 16) | devnum` of the imported device, learnt from OP_REP_IMPORT.
    var devid: UInt32 = 0

    func devlistRequest() -> [UInt8] { USBIPOpReqDevlist().encodedBytes }

    func importRequest(busid: String) -> [UInt8] { USBIPOpReqImport(busid: busid).encodedBytes }

    mutating func takeSeqnum() -> UInt32 {
        defer { nextSeqnum += 1 }
        return nextSeqnum
    }

    /// A USBIP_CMD_SUBMIT, noted so that its reply can be read.
    mutating func submit(
        direction: USBIPDirection,
        ep: UInt8,
        length: Int,
        setup: USBSetupPacket = USBSetupPacket(),
        data: [UInt8] = []
    ) -> (seqnum: UInt32, bytes: [UInt8]) {
        let command = USBIPCmdSubmit(
            seqnum: takeSeqnum(),
            devid: devid,
            direction: direction,
            ep: ep,
            transferBufferLength: Int32(length),
            numberOfPackets: 0,
            setup: setup,
            transferBuffer: data
        )
        decoder.expectReply(to: command)
        return (command.seqnum, command.encodedBytes)
    }

    /// A control transfer on endpoint 0 in the direction its setup packet gives.
    mutating func control(_ setup: USBSetupPacket, data: [UInt8] = []) -> (seqnum: UInt32, bytes: [UInt8]) {
        let direction: USBIPDirection = setup.isDeviceToHost ? .in : .out
        return submit(
            direction: direction,
            ep: 0,
            length: Int(setup.wLength),
            setup: setup,
            data: direction == .out ? data : []
        )
    }

    /// An interrupt-IN URB on endpoint 0x81.
    mutating func interruptIn(length: Int = 64) -> (seqnum: UInt32, bytes: [UInt8]) {
        submit(direction: .in, ep: 1, length: length)
    }

    /// An interrupt-OUT URB on endpoint 0x01.
    mutating func interruptOut(_ data: [UInt8]) -> (seqnum: UInt32, bytes: [UInt8]) {
        submit(direction: .out, ep: 1, length: data.count, data: data)
    }

    /// A USBIP_CMD_UNLINK of `target`.
    mutating func unlink(_ target: UInt32) -> (seqnum: UInt32, bytes: [UInt8]) {
        let command = USBIPCmdUnlink(seqnum: takeSeqnum(), devid: devid, unlinkSeqnum: target)
        decoder.expectReply(to: command)
        return (command.seqnum, command.encodedBytes)
    }

    /// Reads the server's actions as the client and the key would see them.
    mutating func read(_ actions: [USBIPServerConnection.Action]) throws -> Outcome {
        var outcome = Outcome()
        for action in actions {
            switch action {
            case .send(let bytes):
                decoder.append(bytes)
                while let message = try decoder.next() {
                    if case .opRepImport(let reply) = message, let device = reply.device {
                        devid = device.busnum << 16 | device.devnum
                    }
                    outcome.messages.append(message)
                }
            case .deliverOutputReport(let busid, let report):
                outcome.reports.append(report)
                outcome.reportBusIDs.append(busid)
            case .close:
                outcome.closed = true
            }
        }
        return outcome
    }
}

/// How a harness hands the client's bytes to the server.
enum Feeding: CaseIterable, CustomStringConvertible {
    case whole, byteAtATime, randomSplits

    var description: String {
        switch self {
        case .whole: "whole messages"
        case .byteAtATime: "one byte at a time"
        case .randomSplits: "random splits"
        }
    }
}

extension USBIPServerConnection {
    /// Hands `bytes` to the connection as `feeding` says (random splits of 1 to `maximumSplit`
    /// bytes, seeded by the length) and returns every action, in order.
    mutating func receive(_ bytes: [UInt8], _ feeding: Feeding, maximumSplit: UInt64 = 50) -> [Action] {
        switch feeding {
        case .whole:
            return receive(bytes)
        case .byteAtATime:
            return bytes.flatMap { receive([$0]) }
        case .randomSplits:
            var random = SplitMix64(seed: UInt64(bytes.count))
            var actions: [Action] = []
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + 1 + Int(random.next() % maximumSplit))
                actions += receive(Array(bytes[start..<end]))
                start = end
            }
            return actions
        }
    }
}

/// A server connection and a client talking to each other.
struct Harness {
    var server: USBIPServerConnection
    var client = USBIPClientConnection()
    let feeding: Feeding
    var random = SplitMix64(seed: 0x05B1_F00D)

    init(
        exports: [USBIPExport] = testExports,
        configuration: USBIPServerConnection.Configuration = .init(),
        feeding: Feeding = .whole
    ) {
        server = USBIPServerConnection(exports: exports, configuration: configuration)
        self.feeding = feeding
    }

    /// Sends `bytes` to the server as `feeding` says, and reads every answer.
    mutating func send(_ bytes: [UInt8]) throws -> Outcome {
        var outcome = Outcome()
        switch feeding {
        case .whole:
            outcome = try client.read(server.receive(bytes))
        case .byteAtATime:
            for byte in bytes {
                outcome.merge(try client.read(server.receive([byte])))
            }
        case .randomSplits:
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + 1 + Int(random.next() % 70))
                outcome.merge(try client.read(server.receive(Array(bytes[start..<end]))))
                start = end
            }
        }
        return outcome
    }

    /// Hands the server an input report from the key and reads the answer.
    mutating func inputReport(_ report: [UInt8]) throws -> Outcome {
        try client.read(server.inputReport(report))
    }

    /// Imports `busid` and checks that the import succeeded.
    mutating func attach(_ busid: String = "1-1") throws {
        let outcome = try send(client.importRequest(busid: busid))
        guard case .opRepImport(let reply) = outcome.messages.first, reply.status == .ok else {
            Issue.record("import of \(busid) failed: \(outcome)")
            return
        }
    }

    /// Attaches "1-1" and sends one interrupt-IN URB, which waits there for a report; returns
    /// its seqnum.
    mutating func attachHoldingInterruptIn() throws -> UInt32 {
        try attach()
        let (held, heldBytes) = client.interruptIn()
        _ = try send(heldBytes)
        return held
    }

    /// Runs one control transfer and returns its reply.
    mutating func control(_ setup: USBSetupPacket, data: [UInt8] = []) throws -> (USBIPRetSubmit?, Outcome) {
        let (seqnum, bytes) = client.control(setup, data: data)
        let outcome = try send(bytes)
        let reply = outcome.retSubmits.first { $0.seqnum == seqnum }
        return (reply, outcome)
    }
}

/// Setup packets of the requests the tests send.
enum Setup {
    static func getDescriptor(_ type: UInt8, index: UInt8 = 0, language: UInt16 = 0, length: UInt16) -> USBSetupPacket {
        USBSetupPacket(
            bmRequestType: 0x80,
            bRequest: USBStandardRequest.getDescriptor,
            wValue: UInt16(type) << 8 | UInt16(index),
            wIndex: language,
            wLength: length
        )
    }

    static func getReportDescriptor(length: UInt16) -> USBSetupPacket {
        USBSetupPacket(
            bmRequestType: 0x81,
            bRequest: USBStandardRequest.getDescriptor,
            wValue: UInt16(USBDescriptorType.report) << 8,
            wIndex: 0,
            wLength: length
        )
    }

    static func setConfiguration(_ value: UInt16) -> USBSetupPacket {
        USBSetupPacket(bmRequestType: 0x00, bRequest: USBStandardRequest.setConfiguration, wValue: value)
    }

    static func setIdle(duration: UInt8 = 0) -> USBSetupPacket {
        USBSetupPacket(bmRequestType: 0x21, bRequest: HIDClassRequest.setIdle, wValue: UInt16(duration) << 8)
    }
}
