// The URB messages of an imported USB/IP connection: USBIP_CMD_SUBMIT / USBIP_RET_SUBMIT
// and USBIP_CMD_UNLINK / USBIP_RET_UNLINK (usbip_protocol.rst; `struct usbip_header` of
// drivers/usb/usbip/usbip_common.h). Each starts with the 48-byte `usbip_header`: the
// 20-byte `usbip_header_basic` and 28 bytes particular to the command, padded.

/// The 20-byte `usbip_header_basic` every URB message starts with (usbip_protocol.rst):
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 4 | command |
/// | 4 | 4 | seqnum: identifies a request and its response; incremented per connection |
/// | 8 | 4 | devid: `(busnum << 16) \| devnum` from the client; 0 from the server |
/// | 0xC | 4 | direction: 0 USBIP_DIR_OUT, 1 USBIP_DIR_IN; 0 from the server |
/// | 0x10 | 4 | ep: endpoint number; 0 from the server, and 0 in an UNLINK |
struct URBHeaderBasic {
    var command: UInt32
    var seqnum: UInt32
    var devid: UInt32
    var direction: UInt32
    var ep: UInt32

    init(command: USBIPCommandCode, seqnum: UInt32, devid: UInt32, direction: UInt32, ep: UInt32) {
        self.command = command.rawValue
        self.seqnum = seqnum
        self.devid = devid
        self.direction = direction
        self.ep = ep
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        command = try reader.readUInt32()
        seqnum = try reader.readUInt32()
        devid = try reader.readUInt32()
        direction = try reader.readUInt32()
        ep = try reader.readUInt32()
    }

    /// Reads a header and checks that its command is `expected`.
    init(reader: inout ByteReader, expecting expected: USBIPCommandCode) throws(USBIPError) {
        try self.init(reader: &reader)
        guard command == expected.rawValue else {
            throw USBIPError(.unknownCommand, "command 0x\(String(command, radix: 16)) where \(expected) was expected")
        }
    }

    /// The direction, which a client must give as 0 or 1.
    func checkedDirection() throws(USBIPError) -> USBIPDirection {
        guard let value = USBIPDirection(rawValue: direction) else {
            throw USBIPError(.invalidField, "direction \(direction)")
        }
        return value
    }

    /// The endpoint number, which must fit the four bits of an endpoint address.
    func checkedEndpoint() throws(USBIPError) -> UInt8 {
        guard ep <= USBIPLimits.maximumEndpointNumber else {
            throw USBIPError(.invalidField, "endpoint number \(ep)")
        }
        return UInt8(ep)
    }

    func encode(into bytes: inout [UInt8]) {
        bytes.appendBigEndian(command)
        bytes.appendBigEndian(seqnum)
        bytes.appendBigEndian(devid)
        bytes.appendBigEndian(direction)
        bytes.appendBigEndian(ep)
    }
}

/// Checks a length field against the cap.
func checkedLength(_ value: Int32, _ field: StaticString, maximum: Int) throws(USBIPError) -> Int {
    guard value >= 0 else { throw USBIPError(.invalidField, "\(field) \(value) is negative") }
    guard Int(value) <= maximum else {
        throw USBIPError(.transferTooLarge, "\(field) \(value) is above the cap of \(maximum)")
    }
    return Int(value)
}

/// Checks that `number_of_packets` marks a non-isochronous URB: 0 (Linux's vhci-hcd sends
/// the URB's count, 0) or -1 (0xffffffff, what usbip_protocol.rst asks for).
func checkedNumberOfPackets(_ value: Int32) throws(USBIPError) -> Int32 {
    guard value == 0 || value == -1 else {
        throw USBIPError(.isochronous, "number_of_packets \(value): isochronous transfers are not supported")
    }
    return value
}

/// USBIP_CMD_SUBMIT: submit an URB (usbip_protocol.rst).
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 20 | usbip_header_basic, command 0x00000001 |
/// | 0x14 | 4 | transfer_flags: the URB's transfer flags |
/// | 0x18 | 4 | transfer_buffer_length: the URB's buffer length (signed) |
/// | 0x1C | 4 | start_frame: ISO only; 0 otherwise |
/// | 0x20 | 4 | number_of_packets: ISO only; 0xffffffff otherwise (Linux sends 0) |
/// | 0x24 | 4 | interval: the maximum time for the request on the server-side host controller |
/// | 0x28 | 8 | setup: the control setup packet, zeros if not used |
/// | 0x30 | n | transfer_buffer: n = transfer_buffer_length when direction is OUT, else 0 |
///
/// Whether data follows is decided by the direction field alone. Decoding refuses a
/// direction other than 0 or 1, an endpoint above 15, a negative or over-cap
/// transfer_buffer_length and isochronous URBs (number_of_packets other than 0 and -1),
/// whose packet descriptors latchkey does not frame.
public struct USBIPCmdSubmit: USBIPWireMessage {
    /// The request's sequence number, which the reply echoes.
    public var seqnum: UInt32
    /// The target device: `(busnum << 16) | devnum` of the imported device.
    public var devid: UInt32
    /// The transfer's direction.
    public var direction: USBIPDirection
    /// The endpoint number, 0–15 (0 is the default control pipe).
    public var ep: UInt8
    /// The URB's `transfer_flags` (include/linux/usb.h `URB_*`); latchkey reads none of them.
    public var transferFlags: UInt32
    /// The URB's buffer length: the bytes that follow for OUT, the most the device may return
    /// for IN.
    public var transferBufferLength: Int32
    /// `start_frame`; 0 for non-isochronous URBs.
    public var startFrame: Int32
    /// `number_of_packets`; 0 or -1 for non-isochronous URBs.
    public var numberOfPackets: Int32
    /// `interval`, the URB's polling interval.
    public var interval: Int32
    /// The setup packet of a control transfer; zeros otherwise.
    public var setup: USBSetupPacket
    /// The OUT data: `transferBufferLength` bytes for OUT, empty for IN.
    public var transferBuffer: [UInt8]

    /// A submission with every field given. For OUT, `transferBuffer.count` must equal
    /// `transferBufferLength`; for IN, `transferBuffer` must be empty (checked on encoding).
    public init(
        seqnum: UInt32,
        devid: UInt32,
        direction: USBIPDirection,
        ep: UInt8,
        transferFlags: UInt32 = 0,
        transferBufferLength: Int32,
        startFrame: Int32 = 0,
        numberOfPackets: Int32 = -1,
        interval: Int32 = 0,
        setup: USBSetupPacket = USBSetupPacket(),
        transferBuffer: [UInt8] = []
    ) {
        self.seqnum = seqnum
        self.devid = devid
        self.direction = direction
        self.ep = ep
        self.transferFlags = transferFlags
        self.transferBufferLength = transferBufferLength
        self.startFrame = startFrame
        self.numberOfPackets = numberOfPackets
        self.interval = interval
        self.setup = setup
        self.transferBuffer = transferBuffer
    }

    /// Decodes exactly one submission (header and, for OUT, its data).
    public init(
        bytes: [UInt8],
        maximumTransferBufferLength: Int = USBIPLimits.defaultMaximumTransferBufferLength
    ) throws(USBIPError) {
        var reader = ByteReader(bytes)
        try self.init(reader: &reader, maximumTransferBufferLength: maximumTransferBufferLength)
        try reader.expectEnd("USBIP_CMD_SUBMIT")
    }

    init(reader: inout ByteReader, maximumTransferBufferLength: Int) throws(USBIPError) {
        self = try Self.header(reader: &reader, maximumTransferBufferLength: maximumTransferBufferLength)
        transferBuffer = try reader.readBytes(dataLength)
    }

    /// Reads and checks the 48-byte header, leaving `transferBuffer` empty; a stream decoder
    /// learns from it how many bytes of data to wait for before they arrive.
    static func header(reader: inout ByteReader, maximumTransferBufferLength: Int) throws(USBIPError) -> Self {
        let basic = try URBHeaderBasic(reader: &reader, expecting: .cmdSubmit)
        let direction = try basic.checkedDirection()
        let ep = try basic.checkedEndpoint()
        let transferFlags = try reader.readUInt32()
        let length = try reader.readInt32()
        _ = try checkedLength(length, "transfer_buffer_length", maximum: maximumTransferBufferLength)
        let startFrame = try reader.readInt32()
        let numberOfPackets = try checkedNumberOfPackets(try reader.readInt32())
        let interval = try reader.readInt32()
        let setup = USBSetupPacket(bytes: try reader.readBytes(8))
        return USBIPCmdSubmit(
            seqnum: basic.seqnum,
            devid: basic.devid,
            direction: direction,
            ep: ep,
            transferFlags: transferFlags,
            transferBufferLength: length,
            startFrame: startFrame,
            numberOfPackets: numberOfPackets,
            interval: interval,
            setup: setup
        )
    }

    /// The bytes of data that follow the header: `transfer_buffer_length` for OUT, 0 for IN.
    var dataLength: Int { direction == .out ? Int(max(transferBufferLength, 0)) : 0 }

    /// Appends the header and, for OUT, the data.
    public func encode(into bytes: inout [UInt8]) {
        precondition(ep <= 15, "endpoint number \(ep) above 15")
        precondition(
            transferBuffer.count == dataLength,
            "transferBuffer must hold transferBufferLength bytes for OUT, none for IN"
        )
        URBHeaderBasic(command: .cmdSubmit, seqnum: seqnum, devid: devid, direction: direction.rawValue, ep: UInt32(ep))
            .encode(into: &bytes)
        bytes.appendBigEndian(transferFlags)
        bytes.appendBigEndian(transferBufferLength)
        bytes.appendBigEndian(startFrame)
        bytes.appendBigEndian(numberOfPackets)
        bytes.appendBigEndian(interval)
        bytes.append(contentsOf: setup.bytes)
        bytes.append(contentsOf: transferBuffer)
    }
}

/// USBIP_RET_SUBMIT: the reply for a submitted URB (usbip_protocol.rst).
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 20 | usbip_header_basic, command 0x00000003; devid, direction and ep 0 |
/// | 0x14 | 4 | status: 0 for success, else a negated errno |
/// | 0x18 | 4 | actual_length: the URB's actual length |
/// | 0x1C | 4 | start_frame: ISO only; 0 otherwise |
/// | 0x20 | 4 | number_of_packets: ISO only; 0xffffffff otherwise (latchkey echoes the request's) |
/// | 0x24 | 4 | error_count |
/// | 0x28 | 8 | padding, shall be set to 0 |
/// | 0x30 | n | transfer_buffer: n = actual_length when the URB's direction is IN, else 0 |
///
/// The header's direction is 0 from a server, so whether data follows depends on the
/// direction of the USBIP_CMD_SUBMIT this answers: a client knows it from its seqnum, as
/// vhci-hcd does from its URB. Decoding ignores the padding.
public struct USBIPRetSubmit: USBIPWireMessage {
    /// The seqnum of the USBIP_CMD_SUBMIT answered.
    public var seqnum: UInt32
    /// `devid`; 0 from a server.
    public var devid: UInt32
    /// `direction` as sent; 0 from a server.
    public var direction: UInt32
    /// `ep`; 0 from a server.
    public var ep: UInt32
    /// The URB's completion status.
    public var status: URBStatus
    /// The bytes transferred: the data that follows for IN, the bytes accepted for OUT.
    public var actualLength: Int32
    /// `start_frame`; 0 for non-isochronous URBs.
    public var startFrame: Int32
    /// `number_of_packets`; 0 or -1 for non-isochronous URBs.
    public var numberOfPackets: Int32
    /// `error_count`; ISO only, 0 otherwise.
    public var errorCount: Int32
    /// The IN data, `actualLength` bytes; empty for OUT.
    public var transferBuffer: [UInt8]

    /// A reply with every field given; the header fields a server zeroes default to 0. A
    /// non-empty `transferBuffer` must hold `actualLength` bytes (checked on encoding).
    public init(
        seqnum: UInt32,
        devid: UInt32 = 0,
        direction: UInt32 = 0,
        ep: UInt32 = 0,
        status: URBStatus,
        actualLength: Int32,
        startFrame: Int32 = 0,
        numberOfPackets: Int32 = -1,
        errorCount: Int32 = 0,
        transferBuffer: [UInt8] = []
    ) {
        self.seqnum = seqnum
        self.devid = devid
        self.direction = direction
        self.ep = ep
        self.status = status
        self.actualLength = actualLength
        self.startFrame = startFrame
        self.numberOfPackets = numberOfPackets
        self.errorCount = errorCount
        self.transferBuffer = transferBuffer
    }

    /// Decodes exactly one reply to a URB submitted in `direction`: for IN, `actual_length`
    /// bytes of data follow the header.
    public init(
        bytes: [UInt8],
        direction: USBIPDirection,
        maximumTransferBufferLength: Int = USBIPLimits.defaultMaximumTransferBufferLength
    ) throws(USBIPError) {
        var reader = ByteReader(bytes)
        self = try Self.header(reader: &reader, maximumTransferBufferLength: maximumTransferBufferLength)
        if direction == .in {
            transferBuffer = try reader.readBytes(Int(actualLength))
        }
        try reader.expectEnd("USBIP_RET_SUBMIT")
    }

    /// Reads and checks the 48-byte header, leaving `transferBuffer` empty.
    static func header(reader: inout ByteReader, maximumTransferBufferLength: Int) throws(USBIPError) -> Self {
        let basic = try URBHeaderBasic(reader: &reader, expecting: .retSubmit)
        let status = URBStatus(rawValue: try reader.readInt32())
        let actualLength = try reader.readInt32()
        _ = try checkedLength(actualLength, "actual_length", maximum: maximumTransferBufferLength)
        let startFrame = try reader.readInt32()
        let numberOfPackets = try checkedNumberOfPackets(try reader.readInt32())
        let errorCount = try reader.readInt32()
        try reader.skip(8)
        return USBIPRetSubmit(
            seqnum: basic.seqnum,
            devid: basic.devid,
            direction: basic.direction,
            ep: basic.ep,
            status: status,
            actualLength: actualLength,
            startFrame: startFrame,
            numberOfPackets: numberOfPackets,
            errorCount: errorCount
        )
    }

    /// Appends the header and the IN data, if any.
    public func encode(into bytes: inout [UInt8]) {
        precondition(
            transferBuffer.isEmpty || transferBuffer.count == Int(actualLength),
            "IN data must be actualLength bytes"
        )
        URBHeaderBasic(command: .retSubmit, seqnum: seqnum, devid: devid, direction: direction, ep: ep)
            .encode(into: &bytes)
        bytes.appendBigEndian(status.rawValue)
        bytes.appendBigEndian(actualLength)
        bytes.appendBigEndian(startFrame)
        bytes.appendBigEndian(numberOfPackets)
        bytes.appendBigEndian(errorCount)
        bytes.appendZeros(8)
        bytes.append(contentsOf: transferBuffer)
    }
}

/// USBIP_CMD_UNLINK: unlink an URB (usbip_protocol.rst).
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 20 | usbip_header_basic, command 0x00000002; ep shall be 0 |
/// | 0x14 | 4 | unlink_seqnum: the seqnum of the USBIP_CMD_SUBMIT to unlink |
/// | 0x18 | 24 | padding, shall be set to 0 |
///
/// Decoding ignores the padding, and the direction and ep, which no server needs.
public struct USBIPCmdUnlink: USBIPWireMessage, ByteReadable {
    /// This request's own sequence number, which the reply echoes.
    public var seqnum: UInt32
    /// The target device: `(busnum << 16) | devnum`.
    public var devid: UInt32
    /// `direction` as sent (vhci-hcd sends 0).
    public var direction: UInt32 = 0
    /// `ep` as sent; shall be 0.
    public var ep: UInt32 = 0
    /// The seqnum of the submission to unlink.
    public var unlinkSeqnum: UInt32
}

extension USBIPCmdUnlink {
    /// Decodes exactly one 48-byte request.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "USBIP_CMD_UNLINK")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        let basic = try URBHeaderBasic(reader: &reader, expecting: .cmdUnlink)
        seqnum = basic.seqnum
        devid = basic.devid
        direction = basic.direction
        ep = basic.ep
        unlinkSeqnum = try reader.readUInt32()
        try reader.skip(24)
    }

    /// Appends the 48 bytes.
    public func encode(into bytes: inout [UInt8]) {
        URBHeaderBasic(command: .cmdUnlink, seqnum: seqnum, devid: devid, direction: direction, ep: ep)
            .encode(into: &bytes)
        bytes.appendBigEndian(unlinkSeqnum)
        bytes.appendZeros(24)
    }
}

/// USBIP_RET_UNLINK: the reply for an URB unlink (usbip_protocol.rst).
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 20 | usbip_header_basic, command 0x00000004; devid, direction and ep 0 |
/// | 0x14 | 4 | status: -ECONNRESET when the URB was unlinked (it then gets no RET_SUBMIT) |
/// | 0x18 | 24 | padding, shall be set to 0 |
///
/// For an URB that had already completed the spec and Linux's stub answer 0; latchkey
/// answers -ENOENT, as the URB API does for an URB it cannot find (vhci-hcd reads the status
/// only when it still holds the URB, so both mean the same to it).
public struct USBIPRetUnlink: USBIPWireMessage, ByteReadable {
    /// The seqnum of the USBIP_CMD_UNLINK answered.
    public var seqnum: UInt32
    /// `devid`; 0 from a server.
    public var devid: UInt32 = 0
    /// `direction`; 0 from a server.
    public var direction: UInt32 = 0
    /// `ep`; 0 from a server.
    public var ep: UInt32 = 0
    /// The unlink's outcome.
    public var status: URBStatus
}

extension USBIPRetUnlink {
    /// Decodes exactly one 48-byte reply.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "USBIP_RET_UNLINK")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        let basic = try URBHeaderBasic(reader: &reader, expecting: .retUnlink)
        seqnum = basic.seqnum
        devid = basic.devid
        direction = basic.direction
        ep = basic.ep
        status = URBStatus(rawValue: try reader.readInt32())
        try reader.skip(24)
    }

    /// Appends the 48 bytes.
    public func encode(into bytes: inout [UInt8]) {
        URBHeaderBasic(command: .retUnlink, seqnum: seqnum, devid: devid, direction: direction, ep: ep)
            .encode(into: &bytes)
        bytes.appendBigEndian(status.rawValue)
        bytes.appendZeros(24)
    }
}
