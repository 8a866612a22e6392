// The wire codec: every message round-trips both ways, and golden bytes written from the
// field tables of Linux Documentation/usb/usbip_protocol.rst decode to the fields they
// spell. The "EXAMPLE" captures of that document (GPL-2.0 documentation text, quoted as
// data) are decoded too.

import Testing

@testable import USBIP

/// Any one message, so that a table can hold every kind.
enum WireSample: Hashable, Sendable, CustomTestStringConvertible {
    case opReqDevlist(USBIPOpReqDevlist)
    case opRepDevlist(USBIPOpRepDevlist)
    case opReqImport(USBIPOpReqImport)
    case opRepImport(USBIPOpRepImport)
    case cmdSubmit(USBIPCmdSubmit)
    case retSubmit(USBIPRetSubmit, USBIPDirection)
    case cmdUnlink(USBIPCmdUnlink)
    case retUnlink(USBIPRetUnlink)

    var encoded: [UInt8] {
        switch self {
        case .opReqDevlist(let message): message.encodedBytes
        case .opRepDevlist(let message): message.encodedBytes
        case .opReqImport(let message): message.encodedBytes
        case .opRepImport(let message): message.encodedBytes
        case .cmdSubmit(let message): message.encodedBytes
        case .retSubmit(let message, _): message.encodedBytes
        case .cmdUnlink(let message): message.encodedBytes
        case .retUnlink(let message): message.encodedBytes
        }
    }

    /// Decodes `bytes` as a message of this sample's kind.
    func decode(_ bytes: [UInt8]) throws -> WireSample {
        switch self {
        case .opReqDevlist: .opReqDevlist(try USBIPOpReqDevlist(bytes: bytes))
        case .opRepDevlist: .opRepDevlist(try USBIPOpRepDevlist(bytes: bytes))
        case .opReqImport: .opReqImport(try USBIPOpReqImport(bytes: bytes))
        case .opRepImport: .opRepImport(try USBIPOpRepImport(bytes: bytes))
        case .cmdSubmit: .cmdSubmit(try USBIPCmdSubmit(bytes: bytes))
        case .retSubmit(_, let direction): .retSubmit(try USBIPRetSubmit(bytes: bytes, direction: direction), direction)
        case .cmdUnlink: .cmdUnlink(try USBIPCmdUnlink(bytes: bytes))
        case .retUnlink: .retUnlink(try USBIPRetUnlink(bytes: bytes))
        }
    }

    var testDescription: String {
        switch self {
        case .opReqDevlist: "OP_REQ_DEVLIST"
        case .opRepDevlist(let message): "OP_REP_DEVLIST of \(message.devices.count)"
        case .opReqImport(let message): "OP_REQ_IMPORT \(message.busid)"
        case .opRepImport(let message): "OP_REP_IMPORT status \(message.status.rawValue)"
        case .cmdSubmit(let message):
            "CMD_SUBMIT \(message.direction) ep \(message.ep) len \(message.transferBufferLength)"
        case .retSubmit(let message, let direction): "RET_SUBMIT \(direction) status \(message.status.rawValue)"
        case .cmdUnlink(let message): "CMD_UNLINK of \(message.unlinkSeqnum)"
        case .retUnlink(let message): "RET_UNLINK status \(message.status.rawValue)"
        }
    }
}

let sampleRecord = testExports[0].record

let wireSamples: [WireSample] = [
    .opReqDevlist(USBIPOpReqDevlist()),
    .opRepDevlist(USBIPOpRepDevlist(devices: [])),
    .opRepDevlist(
        USBIPOpRepDevlist(
            devices: testExports.map { .init(device: $0.record, interfaces: $0.device.usbipInterfaces) }
        )
    ),
    .opRepDevlist(
        USBIPOpRepDevlist(devices: [
            .init(
                device: USBIPUSBDevice(
                    path: "/sys/devices/pci0000:00/0000:00:1d.1/usb3/3-2",
                    busid: "3-2",
                    busnum: 3,
                    devnum: 4,
                    speed: .high,
                    idVendor: 0x1050,
                    idProduct: 0x0407,
                    bcdDevice: 0x0526,
                    bDeviceClass: 0,
                    bDeviceSubClass: 0,
                    bDeviceProtocol: 0,
                    bConfigurationValue: 1,
                    bNumConfigurations: 1,
                    bNumInterfaces: 3
                ),
                interfaces: [
                    USBIPUSBInterface(bInterfaceClass: 3, bInterfaceSubClass: 1, bInterfaceProtocol: 1),
                    USBIPUSBInterface(bInterfaceClass: 3, bInterfaceSubClass: 0, bInterfaceProtocol: 0),
                    USBIPUSBInterface(bInterfaceClass: 0x0B, bInterfaceSubClass: 0, bInterfaceProtocol: 0),
                ]
            ),
            .init(
                device: sampleRecord,
                interfaces: [USBIPUSBInterface(bInterfaceClass: 3, bInterfaceSubClass: 0, bInterfaceProtocol: 0)]
            ),
        ])
    ),
    .opReqImport(USBIPOpReqImport(busid: "1-1")),
    .opReqImport(USBIPOpReqImport(busid: String(repeating: "9", count: 31))),
    .opRepImport(USBIPOpRepImport(device: sampleRecord)),
    .opRepImport(USBIPOpRepImport(failure: .notAvailable)),
    .opRepImport(USBIPOpRepImport(failure: .deviceBusy)),
    .cmdSubmit(
        USBIPCmdSubmit(
            seqnum: 1,
            devid: 0x0001_0002,
            direction: .in,
            ep: 0,
            transferBufferLength: 18,
            setup: Setup.getDescriptor(USBDescriptorType.device, length: 18)
        )
    ),
    .cmdSubmit(
        USBIPCmdSubmit(
            seqnum: 0xFFFF_FFFF,
            devid: 0x0001_0002,
            direction: .out,
            ep: 1,
            transferFlags: 0x200,
            transferBufferLength: 64,
            numberOfPackets: 0,
            interval: 5,
            transferBuffer: report(7)
        )
    ),
    .cmdSubmit(USBIPCmdSubmit(seqnum: 3, devid: 7, direction: .out, ep: 15, transferBufferLength: 0)),
    .retSubmit(USBIPRetSubmit(seqnum: 1, status: .success, actualLength: 64, transferBuffer: report(1)), .in),
    .retSubmit(USBIPRetSubmit(seqnum: 2, status: .success, actualLength: 64, numberOfPackets: 0), .out),
    .retSubmit(USBIPRetSubmit(seqnum: 3, status: .stall, actualLength: 0), .in),
    .retSubmit(
        USBIPRetSubmit(seqnum: 4, devid: 1, direction: 1, ep: 1, status: .overflow, actualLength: 0, errorCount: 2),
        .in
    ),
    .cmdUnlink(USBIPCmdUnlink(seqnum: 9, devid: 0x0001_0002, unlinkSeqnum: 8)),
    .retUnlink(USBIPRetUnlink(seqnum: 9, status: .connectionReset)),
    .retUnlink(USBIPRetUnlink(seqnum: 10, status: .noEntry)),
]

/// `string` zero-terminated and zero-filled to `size` bytes.
func field(_ string: String, size: Int) -> [UInt8] {
    Array(string.utf8) + [UInt8](repeating: 0, count: size - string.utf8.count)
}

/// The 312-byte record of export "1-1", field by field from the OP_REP_DEVLIST table.
let goldenRecord: [UInt8] =
    field("/sys/devices/platform/latchkey/1-1", size: 256)  // path
    + field("1-1", size: 32)  // busid
    + hex("00000001")  // busnum
    + hex("00000002")  // devnum
    + hex("00000002")  // speed: USB_SPEED_FULL
    + hex("1209")  // idVendor
    + hex("4c4b")  // idProduct
    + hex("0123")  // bcdDevice
    + hex("00 00 00")  // bDeviceClass, bDeviceSubClass, bDeviceProtocol
    + hex("01")  // bConfigurationValue
    + hex("01")  // bNumConfigurations
    + hex("01")  // bNumInterfaces

@Suite("USB/IP wire codec")
struct CodecTests {
    @Test("every message decodes to itself after encoding", arguments: wireSamples)
    func decodeOfEncodeIsIdentity(sample: WireSample) throws {
        #expect(try sample.decode(sample.encoded) == sample)
    }

    @Test("every message's canonical bytes encode to themselves after decoding", arguments: wireSamples)
    func encodeOfDecodeIsIdentity(sample: WireSample) throws {
        let bytes = sample.encoded
        #expect(try sample.decode(bytes).encoded == bytes)
    }

    @Test("URB messages have the 48-byte usbip_header")
    func urbHeaderLength() {
        #expect(USBIPCmdUnlink(seqnum: 1, devid: 2, unlinkSeqnum: 3).encodedBytes.count == 48)
        #expect(USBIPRetUnlink(seqnum: 1, status: .noEntry).encodedBytes.count == 48)
        #expect(
            USBIPCmdSubmit(seqnum: 1, devid: 2, direction: .in, ep: 1, transferBufferLength: 64).encodedBytes.count
                == 48
        )
        #expect(USBIPRetSubmit(seqnum: 1, status: .success, actualLength: 64).encodedBytes.count == 48)
    }

    @Test("OP_REQ_DEVLIST is version, code 0x8005 and a zero status")
    func goldenDevlistRequest() throws {
        let golden = hex("0111 8005 00000000")
        #expect(USBIPOpReqDevlist().encodedBytes == golden)
        #expect(try USBIPOpReqDevlist(bytes: golden) == USBIPOpReqDevlist())
    }

    @Test("OP_REP_DEVLIST golden bytes match the spec's offsets")
    func goldenDevlistReply() throws {
        let golden =
            hex("0111 0005 00000000")  // version, reply code, status OK
            + hex("00000001")  // number of exported devices
            + goldenRecord  // from 0x0C
            + hex("03 00 00 00")  // bInterfaceClass HID, subclass, protocol, padding
        #expect(golden.count == 0x0C + 0x138 + 4)
        // Spot-check the spec's offsets in the golden bytes themselves.
        #expect(Array(golden[0x10C..<0x10F]) == Array("1-1".utf8))
        #expect(Array(golden[0x12C..<0x130]) == [0, 0, 0, 1])  // busnum
        #expect(Array(golden[0x138..<0x13A]) == [0x12, 0x09])  // idVendor
        #expect(golden[0x143] == 1)  // bNumInterfaces
        #expect(golden[0x144] == 3)  // bInterfaceClass

        let reply = try USBIPOpRepDevlist(bytes: golden)
        #expect(reply.status == .ok)
        #expect(reply.devices.count == 1)
        #expect(reply.devices[0].device == testExports[0].record)
        #expect(
            reply.devices[0].interfaces == [
                USBIPUSBInterface(bInterfaceClass: 3, bInterfaceSubClass: 0, bInterfaceProtocol: 0)
            ]
        )
        #expect(reply.encodedBytes == golden)

        var server = USBIPServerConnection(exports: [testExports[0]])
        #expect(server.receive(hex("0111 8005 00000000")) == [.send(golden), .close])
    }

    @Test("OP_REQ_IMPORT golden bytes carry the zero-filled busid")
    func goldenImportRequest() throws {
        let golden = hex("0111 8003 00000000") + field("1-1", size: 32)
        #expect(USBIPOpReqImport(busid: "1-1").encodedBytes == golden)
        #expect(try USBIPOpReqImport(bytes: golden).busid == "1-1")
    }

    @Test("OP_REP_IMPORT golden bytes match the spec's offsets")
    func goldenImportReply() throws {
        let golden = hex("0111 0003 00000000") + goldenRecord
        #expect(golden.count == 0x140)
        #expect(Array(golden[0x108..<0x10B]) == Array("1-1".utf8))  // busid
        #expect(Array(golden[0x128..<0x12C]) == [0, 0, 0, 1])  // busnum
        #expect(Array(golden[0x134..<0x136]) == [0x12, 0x09])  // idVendor
        #expect(golden[0x13F] == 1)  // bNumInterfaces

        let reply = try USBIPOpRepImport(bytes: golden)
        #expect(reply.status == .ok)
        #expect(reply.device == testExports[0].record)
        #expect(reply.encodedBytes == golden)

        let failure = hex("0111 0003 00000001")
        #expect(try USBIPOpRepImport(bytes: failure) == USBIPOpRepImport(failure: .notAvailable))
        #expect(USBIPOpRepImport(failure: .notAvailable).encodedBytes == failure)
    }

    @Test("CMD_SUBMIT golden bytes of a GET_DESCRIPTOR put the setup packet at 0x28")
    func goldenControlSubmit() throws {
        let golden = hex(
            """
            00000001 00000007 00010002 00000001 00000000
            00000000 00000012 00000000 ffffffff 00000000
            80 06 00 01 00 00 12 00
            """
        )
        let command = try USBIPCmdSubmit(bytes: golden)
        #expect(command.seqnum == 7)
        #expect(command.devid == 0x0001_0002)
        #expect(command.direction == .in)
        #expect(command.ep == 0)
        #expect(command.transferBufferLength == 18)
        #expect(command.numberOfPackets == -1)
        #expect(command.setup == Setup.getDescriptor(USBDescriptorType.device, length: 18))
        #expect(command.transferBuffer.isEmpty)
        #expect(command.encodedBytes == golden)
    }

    @Test("the spec's captured interrupt CMD_SUBMITs decode, OUT with its 64 bytes")
    func specExampleSubmits() throws {
        // usbip_protocol.rst, EXAMPLE: CmdIntrIN and CmdIntrOUT.
        let cmdIntrIn = hex(
            "00000001 00000d05 0001000f 00000001 00000001 00000200 00000040 ffffffff 00000000 00000004 00000000 00000000"
        )
        let cmdIntrOut =
            hex(
                "00000001 00000d06 0001000f 00000000 00000001 00000000 00000040 ffffffff 00000000 00000004 00000000 00000000"
            )
            + hex("ffffffff860008a784ce5ae2123763") + [UInt8](repeating: 0, count: 49)

        let inCommand = try USBIPCmdSubmit(bytes: cmdIntrIn)
        #expect(inCommand.seqnum == 0xD05)
        #expect(inCommand.devid == 0x0001_000F)
        #expect(inCommand.direction == .in)
        #expect(inCommand.ep == 1)
        #expect(inCommand.transferFlags == 0x200)
        #expect(inCommand.transferBufferLength == 64)
        #expect(inCommand.startFrame == -1)
        #expect(inCommand.numberOfPackets == 0)
        #expect(inCommand.interval == 4)
        #expect(inCommand.encodedBytes == cmdIntrIn)

        let outCommand = try USBIPCmdSubmit(bytes: cmdIntrOut)
        #expect(outCommand.direction == .out)
        #expect(outCommand.transferBuffer.count == 64)
        #expect(Array(outCommand.transferBuffer.prefix(7)) == [0xFF, 0xFF, 0xFF, 0xFF, 0x86, 0x00, 0x08])
        #expect(outCommand.encodedBytes == cmdIntrOut)
    }

    @Test("RET_SUBMIT golden bytes carry IN data after the header, and none for OUT")
    func goldenReturnSubmit() throws {
        // usbip_protocol.rst, EXAMPLE: RetIntrIn (a CTAPHID_INIT response) and RetIntrOut.
        let data = hex("ffffffff860011a784ce5ae2123763612891b10201000004") + [UInt8](repeating: 0, count: 40)
        let retIntrIn =
            hex(
                "00000003 00000d05 00000000 00000000 00000000 00000000 00000040 ffffffff 00000000 00000000 00000000 00000000"
            )
            + data
        let retIntrOut = hex(
            "00000003 00000d06 00000000 00000000 00000000 00000000 00000040 ffffffff 00000000 00000000 00000000 00000000"
        )

        let inReply = try USBIPRetSubmit(bytes: retIntrIn, direction: .in)
        #expect(inReply.seqnum == 0xD05)
        #expect(inReply.status == .success)
        #expect(inReply.actualLength == 64)
        #expect(inReply.transferBuffer == data)
        #expect(inReply.encodedBytes == retIntrIn)

        let outReply = try USBIPRetSubmit(bytes: retIntrOut, direction: .out)
        #expect(outReply.actualLength == 64)
        #expect(outReply.transferBuffer.isEmpty)
        #expect(outReply.encodedBytes == retIntrOut)

        // The same bytes read as an IN reply lack their data.
        #expect(throws: USBIPError(.truncated, "")) { try USBIPRetSubmit(bytes: retIntrOut, direction: .in) }

        let stall = USBIPRetSubmit(seqnum: 5, status: .stall, actualLength: 0, numberOfPackets: 0)
        #expect(
            stall.encodedBytes
                == hex(
                    "00000003 00000005 00000000 00000000 00000000 ffffffe0 00000000 00000000 00000000 00000000 0000000000000000"
                )
        )
    }

    @Test("CMD_UNLINK and RET_UNLINK golden bytes")
    func goldenUnlink() throws {
        let command = hex("00000002 00000009 00010002 00000000 00000000 00000008") + [UInt8](repeating: 0, count: 24)
        #expect(try USBIPCmdUnlink(bytes: command) == USBIPCmdUnlink(seqnum: 9, devid: 0x0001_0002, unlinkSeqnum: 8))
        let reply = hex("00000004 00000009 00000000 00000000 00000000 ffffff98") + [UInt8](repeating: 0, count: 24)
        #expect(USBIPRetUnlink(seqnum: 9, status: .connectionReset).encodedBytes == reply)
        #expect(try USBIPRetUnlink(bytes: reply).status.rawValue == -104)
    }

    @Test("setup packets are little-endian")
    func setupPacketByteOrder() {
        let setup = USBSetupPacket(bmRequestType: 0x81, bRequest: 6, wValue: 0x2200, wIndex: 0x0001, wLength: 0x0122)
        #expect(setup.bytes == [0x81, 0x06, 0x00, 0x22, 0x01, 0x00, 0x22, 0x01])
        #expect(USBSetupPacket(bytes: setup.bytes) == setup)
    }

    @Test(
        "whole-message decoding refuses malformed bytes",
        arguments: [
            (WireSample.opReqDevlist(.init()), hex("0111 8005 0000"), USBIPError.Code.truncated),
            (.opReqDevlist(.init()), hex("0111 8005 00000000 00"), .trailingBytes),
            (.opReqDevlist(.init()), hex("0106 8005 00000000"), .unsupportedVersion),
            (.opReqDevlist(.init()), hex("0111 8003 00000000"), .unexpectedMessage),
            (
                .opReqImport(.init(busid: "")), hex("0111 8003 00000000") + [UInt8](repeating: 0x31, count: 32),
                .invalidField
            ),
            (
                .opReqImport(.init(busid: "")), hex("0111 8003 00000000 FFFE") + [UInt8](repeating: 0, count: 30),
                .invalidField
            ),
            (
                .opRepImport(.init(failure: .error)), hex("0111 0003 00000000") + [UInt8](repeating: 0, count: 100),
                .truncated
            ),
            (
                .cmdSubmit(.init(seqnum: 0, devid: 0, direction: .in, ep: 0, transferBufferLength: 0)),
                rawSubmit(length: 0x10_0000), .transferTooLarge
            ),
            (
                .cmdSubmit(.init(seqnum: 0, devid: 0, direction: .in, ep: 0, transferBufferLength: 0)),
                rawSubmit(direction: 0, length: 4), .truncated
            ),
            (.cmdUnlink(.init(seqnum: 0, devid: 0, unlinkSeqnum: 0)), rawSubmit(), .unknownCommand),
            (
                .retSubmit(.init(seqnum: 0, status: .success, actualLength: 0), .in),
                hex("00000003") + [UInt8](repeating: 0, count: 16) + hex("00000000 FFFFFFFF")
                    + [UInt8](repeating: 0, count: 20), .invalidField
            ),
        ]
    )
    func wholeMessageErrors(kind: WireSample, bytes: [UInt8], code: USBIPError.Code) {
        #expect(throws: USBIPError(code, "")) { try kind.decode(bytes) }
    }

    @Test("an OP_REP_DEVLIST claiming more devices than the cap is refused before reading them")
    func devlistCap() {
        let bytes = hex("0111 0005 00000000 ffffffff")
        #expect(throws: USBIPError(.tooManyDevices, "")) { try USBIPOpRepDevlist(bytes: bytes) }
    }

    @Test("errors are equal by code and describe where they were made")
    func errorEquality() {
        let error = USBIPError(.isochronous, "one reason")
        #expect(error == USBIPError(.isochronous, "another"))
        #expect(error != USBIPError(.invalidField, "one reason"))
        #expect(error.description.contains("CodecTests.swift"))
    }
}
