// The OP_* messages that open a USB/IP connection — listing the exported devices and
// importing one — and the device and interface records they carry (usbip_protocol.rst,
// "Message Format"; `struct usbip_usb_device` / `usbip_usb_interface` of usbip-utils).

/// A USB/IP message that encodes itself in wire order.
public protocol USBIPWireMessage: Hashable, Sendable {
    /// Appends the message's wire bytes to `bytes`.
    func encode(into bytes: inout [UInt8])
}

extension USBIPWireMessage {
    /// The message's wire bytes.
    public var encodedBytes: [UInt8] {
        var bytes: [UInt8] = []
        encode(into: &bytes)
        return bytes
    }
}

/// Reads the version of an OP_* header and checks it.
func readOperationVersion(_ reader: inout ByteReader) throws(USBIPError) {
    let version = try reader.readUInt16()
    guard version == USBIPVersion.current else {
        throw USBIPError(.unsupportedVersion, "version 0x\(String(version, radix: 16))")
    }
}

/// Reads the common OP_* header and checks its version and code.
func readOperationHeader(
    _ reader: inout ByteReader,
    expecting code: USBIPOperationCode
) throws(USBIPError) -> UInt32 {
    try readOperationVersion(&reader)
    let rawCode = try reader.readUInt16()
    guard rawCode == code.rawValue else {
        throw USBIPError(.unexpectedMessage, "code 0x\(String(rawCode, radix: 16)) where \(code) was expected")
    }
    return try reader.readUInt32()
}

func appendOperationHeader(_ code: USBIPOperationCode, status: UInt32, to bytes: inout [UInt8]) {
    bytes.appendBigEndian(USBIPVersion.current)
    bytes.appendBigEndian(code.rawValue)
    bytes.appendBigEndian(status)
}

/// The description of an exported device in OP_REP_DEVLIST and OP_REP_IMPORT
/// (`struct usbip_usb_device`, usbip_protocol.rst):
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0x000 | 256 | path: the device's sysfs path on the exporting host, zero-terminated, zero-filled |
/// | 0x100 | 32 | busid: the bus id, e.g. "3-2", zero-terminated, zero-filled |
/// | 0x120 | 4 | busnum |
/// | 0x124 | 4 | devnum |
/// | 0x128 | 4 | speed (`enum usb_device_speed`) |
/// | 0x12C | 2 | idVendor |
/// | 0x12E | 2 | idProduct |
/// | 0x130 | 2 | bcdDevice |
/// | 0x132 | 1 | bDeviceClass |
/// | 0x133 | 1 | bDeviceSubClass |
/// | 0x134 | 1 | bDeviceProtocol |
/// | 0x135 | 1 | bConfigurationValue |
/// | 0x136 | 1 | bNumConfigurations |
/// | 0x137 | 1 | bNumInterfaces |
///
/// (Offsets relative to the record; the spec gives them from the message start, 0x0C or 0x08
/// earlier.) All multi-byte fields are big-endian.
public struct USBIPUSBDevice: USBIPWireMessage, ByteReadable {
    /// The device's path on the exporting host, below 256 UTF-8 bytes.
    public var path: String
    /// The bus id the client names in OP_REQ_IMPORT, below 32 UTF-8 bytes.
    public var busid: String
    /// The bus number; with `devnum` it makes the `devid` of URB commands.
    public var busnum: UInt32
    /// The device number on its bus.
    public var devnum: UInt32
    /// The device's speed.
    public var speed: USBSpeed
    /// The vendor id (USB 2.0 §9.6.1 idVendor).
    public var idVendor: UInt16
    /// The product id (USB 2.0 §9.6.1 idProduct).
    public var idProduct: UInt16
    /// The device release number in BCD (USB 2.0 §9.6.1 bcdDevice).
    public var bcdDevice: UInt16
    /// The device class code (USB 2.0 §9.6.1).
    public var bDeviceClass: UInt8
    /// The device subclass code (USB 2.0 §9.6.1).
    public var bDeviceSubClass: UInt8
    /// The device protocol code (USB 2.0 §9.6.1).
    public var bDeviceProtocol: UInt8
    /// The active configuration's value (USB 2.0 §9.6.3).
    public var bConfigurationValue: UInt8
    /// The number of configurations (USB 2.0 §9.6.1).
    public var bNumConfigurations: UInt8
    /// The number of interfaces of the active configuration (USB 2.0 §9.6.3); an
    /// OP_REP_DEVLIST follows the record with this many interface records.
    public var bNumInterfaces: UInt8
}

extension USBIPUSBDevice {
    /// Decodes exactly one 312-byte record.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "a device record")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        path = try reader.readFixedString(size: USBIPLimits.pathSize, field: "path")
        busid = try reader.readFixedString(size: USBIPLimits.busidSize, field: "busid")
        busnum = try reader.readUInt32()
        devnum = try reader.readUInt32()
        speed = USBSpeed(rawValue: try reader.readUInt32())
        idVendor = try reader.readUInt16()
        idProduct = try reader.readUInt16()
        bcdDevice = try reader.readUInt16()
        bDeviceClass = try reader.readUInt8()
        bDeviceSubClass = try reader.readUInt8()
        bDeviceProtocol = try reader.readUInt8()
        bConfigurationValue = try reader.readUInt8()
        bNumConfigurations = try reader.readUInt8()
        bNumInterfaces = try reader.readUInt8()
    }

    /// Appends the 312-byte record. `path` and `busid` must fit their fields with the
    /// terminating zero (a programmer error otherwise).
    public func encode(into bytes: inout [UInt8]) {
        bytes.appendFixedString(path, size: USBIPLimits.pathSize)
        bytes.appendFixedString(busid, size: USBIPLimits.busidSize)
        bytes.appendBigEndian(busnum)
        bytes.appendBigEndian(devnum)
        bytes.appendBigEndian(speed.rawValue)
        bytes.appendBigEndian(idVendor)
        bytes.appendBigEndian(idProduct)
        bytes.appendBigEndian(bcdDevice)
        bytes.append(contentsOf: [
            bDeviceClass, bDeviceSubClass, bDeviceProtocol,
            bConfigurationValue, bNumConfigurations, bNumInterfaces,
        ])
    }
}

/// One interface of an exported device in OP_REP_DEVLIST (`struct usbip_usb_interface`,
/// usbip_protocol.rst):
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 1 | bInterfaceClass |
/// | 1 | 1 | bInterfaceSubClass |
/// | 2 | 1 | bInterfaceProtocol |
/// | 3 | 1 | padding byte for alignment, shall be set to zero |
public struct USBIPUSBInterface: USBIPWireMessage, ByteReadable {
    /// The interface class (USB 2.0 §9.6.5); 3 for HID.
    public var bInterfaceClass: UInt8
    /// The interface subclass (USB 2.0 §9.6.5).
    public var bInterfaceSubClass: UInt8
    /// The interface protocol (USB 2.0 §9.6.5).
    public var bInterfaceProtocol: UInt8
}

extension USBIPUSBInterface {
    /// Decodes exactly one 4-byte record; the padding byte is ignored.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "an interface record")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        bInterfaceClass = try reader.readUInt8()
        bInterfaceSubClass = try reader.readUInt8()
        bInterfaceProtocol = try reader.readUInt8()
        try reader.skip(1)
    }

    /// Appends the 4-byte record with a zero padding byte.
    public func encode(into bytes: inout [UInt8]) {
        bytes.append(contentsOf: [bInterfaceClass, bInterfaceSubClass, bInterfaceProtocol, 0])
    }
}

/// OP_REQ_DEVLIST: retrieve the list of exported USB devices (usbip_protocol.rst).
///
/// | Offset | Length | Value | Field |
/// | --- | --- | --- | --- |
/// | 0 | 2 | 0x0111 | USBIP version |
/// | 2 | 2 | 0x8005 | command code |
/// | 4 | 4 | 0x00000000 | status: unused, shall be set to 0 |
///
/// The message has no fields of its own: the version is the only one latchkey speaks, and
/// the unused status is written as 0 and ignored when read.
public struct USBIPOpReqDevlist: USBIPWireMessage, ByteReadable {
    /// The 8-byte message's length.
    public static let size = 8

    /// The request.
    public init() {}

    /// Decodes exactly one request.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "OP_REQ_DEVLIST")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        _ = try readOperationHeader(&reader, expecting: .reqDevlist)
    }

    /// Appends the 8 bytes.
    public func encode(into bytes: inout [UInt8]) {
        appendOperationHeader(.reqDevlist, status: 0, to: &bytes)
    }
}

/// OP_REP_DEVLIST: the list of exported USB devices (usbip_protocol.rst).
///
/// | Offset | Length | Value | Field |
/// | --- | --- | --- | --- |
/// | 0 | 2 | 0x0111 | USBIP version |
/// | 2 | 2 | 0x0005 | reply code |
/// | 4 | 4 | 0x00000000 | status: 0 for OK |
/// | 8 | 4 | n | number of exported devices |
/// | 0x0C | 312 | | device 0: a ``USBIPUSBDevice`` record |
/// | 0x144 | 4 × m₀ | | device 0's bNumInterfaces ``USBIPUSBInterface`` records |
/// | 0xC + i × 0x138 + 4 × (m₀ + … + mᵢ₋₁) | | | device i, likewise |
public struct USBIPOpRepDevlist: USBIPWireMessage {
    /// One exported device: its record and one record per interface.
    public struct ExportedDevice: Hashable, Sendable {
        /// The device record; its `bNumInterfaces` is `interfaces.count`.
        public var device: USBIPUSBDevice
        /// The interfaces of the active configuration.
        public var interfaces: [USBIPUSBInterface]

        /// A device and its interfaces; `device.bNumInterfaces` must equal
        /// `interfaces.count` (a programmer error otherwise).
        public init(device: USBIPUSBDevice, interfaces: [USBIPUSBInterface]) {
            precondition(Int(device.bNumInterfaces) == interfaces.count, "bNumInterfaces disagrees with interfaces")
            self.device = device
            self.interfaces = interfaces
        }
    }

    /// The reply's status; ``USBIPOperationStatus/ok`` for a list.
    public var status: USBIPOperationStatus
    /// The exported devices, in the order listed.
    public var devices: [ExportedDevice]

    /// A reply listing `devices`.
    public init(status: USBIPOperationStatus = .ok, devices: [ExportedDevice]) {
        self.status = status
        self.devices = devices
    }

    /// The largest number of devices a decoder accepts by default; a longer list is hostile.
    public static let defaultMaximumDevices = 1024

    /// Decodes exactly one reply, refusing lists longer than `maximumDevices`.
    public init(bytes: [UInt8], maximumDevices: Int = defaultMaximumDevices) throws(USBIPError) {
        var reader = ByteReader(bytes)
        try self.init(reader: &reader, maximumDevices: maximumDevices)
        try reader.expectEnd("OP_REP_DEVLIST")
    }

    init(reader: inout ByteReader, maximumDevices: Int) throws(USBIPError) {
        status = USBIPOperationStatus(rawValue: try readOperationHeader(&reader, expecting: .repDevlist))
        let count = try reader.readUInt32()
        guard count <= maximumDevices else {
            throw USBIPError(.tooManyDevices, "\(count) devices listed, at most \(maximumDevices) accepted")
        }
        devices = []
        for _ in 0..<count {
            let device = try USBIPUSBDevice(reader: &reader)
            var interfaces: [USBIPUSBInterface] = []
            for _ in 0..<device.bNumInterfaces {
                interfaces.append(try USBIPUSBInterface(reader: &reader))
            }
            devices.append(ExportedDevice(device: device, interfaces: interfaces))
        }
    }

    /// The length of the reply that starts `bytes` at `offset`, or nil when the bytes there do
    /// not yet reach the end of it (the length depends on every device's bNumInterfaces).
    /// Throws for a bad header or an overlong list as soon as the header is there.
    static func length(in bytes: [UInt8], at offset: Int, maximumDevices: Int) throws(USBIPError) -> Int? {
        var reader = ByteReader(bytes, offset: offset)
        guard reader.remaining >= 12 else { return nil }
        _ = try readOperationHeader(&reader, expecting: .repDevlist)
        let count = try reader.readUInt32()
        guard count <= maximumDevices else {
            throw USBIPError(.tooManyDevices, "\(count) devices listed, at most \(maximumDevices) accepted")
        }
        var length = 12
        for _ in 0..<count {
            let interfaceCountOffset = offset + length + USBIPLimits.deviceRecordSize - 1
            guard interfaceCountOffset < bytes.count else { return nil }
            length += USBIPLimits.deviceRecordSize + USBIPLimits.interfaceRecordSize * Int(bytes[interfaceCountOffset])
        }
        return bytes.count - offset >= length ? length : nil
    }

    /// Appends the reply.
    public func encode(into bytes: inout [UInt8]) {
        appendOperationHeader(.repDevlist, status: status.rawValue, to: &bytes)
        bytes.appendBigEndian(UInt32(devices.count))
        for entry in devices {
            entry.device.encode(into: &bytes)
            for interface in entry.interfaces {
                interface.encode(into: &bytes)
            }
        }
    }
}

/// OP_REQ_IMPORT: request to import (attach) a remote USB device (usbip_protocol.rst).
///
/// | Offset | Length | Value | Field |
/// | --- | --- | --- | --- |
/// | 0 | 2 | 0x0111 | USBIP version |
/// | 2 | 2 | 0x8003 | command code |
/// | 4 | 4 | 0x00000000 | status: unused, shall be set to 0 |
/// | 8 | 32 | | busid: the exported device's bus id, zero-terminated, zero-filled |
public struct USBIPOpReqImport: USBIPWireMessage, ByteReadable {
    /// The 40-byte message's length.
    public static let size = 40

    /// The bus id of the device to import, as OP_REP_DEVLIST listed it.
    public var busid: String

    /// A request to import `busid` (below 32 UTF-8 bytes).
    public init(busid: String) {
        self.busid = busid
    }

    /// Decodes exactly one request.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "OP_REQ_IMPORT")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        _ = try readOperationHeader(&reader, expecting: .reqImport)
        busid = try reader.readFixedString(size: USBIPLimits.busidSize, field: "busid")
    }

    /// Appends the 40 bytes.
    public func encode(into bytes: inout [UInt8]) {
        appendOperationHeader(.reqImport, status: 0, to: &bytes)
        bytes.appendFixedString(busid, size: USBIPLimits.busidSize)
    }
}

/// OP_REP_IMPORT: the reply to an import (usbip_protocol.rst).
///
/// | Offset | Length | Value | Field |
/// | --- | --- | --- | --- |
/// | 0 | 2 | 0x0111 | USBIP version |
/// | 2 | 2 | 0x0003 | reply code |
/// | 4 | 4 | | status: 0 for OK, otherwise an error and the reply ends here |
/// | 8 | 312 | | only when status is 0: the imported device, a ``USBIPUSBDevice`` record |
///
/// The client checks that the record's busid is the one it asked for (usbip_attach.c).
public struct USBIPOpRepImport: USBIPWireMessage, ByteReadable {
    /// The reply's status.
    public var status: USBIPOperationStatus
    /// The imported device; present exactly when `status` is ``USBIPOperationStatus/ok``.
    public var device: USBIPUSBDevice?

    /// A successful reply describing `device`.
    public init(device: USBIPUSBDevice) {
        self.status = .ok
        self.device = device
    }

    /// A failed reply: `status` must not be ``USBIPOperationStatus/ok`` (a programmer error
    /// otherwise).
    public init(failure status: USBIPOperationStatus) {
        precondition(status != .ok, "a failed import reply needs a failure status")
        self.status = status
        self.device = nil
    }

    /// Decodes exactly one reply.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "OP_REP_IMPORT")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        status = USBIPOperationStatus(rawValue: try readOperationHeader(&reader, expecting: .repImport))
        device = status == .ok ? try USBIPUSBDevice(reader: &reader) : nil
    }

    /// Appends the reply: 8 bytes, and the device record when the status is OK.
    public func encode(into bytes: inout [UInt8]) {
        appendOperationHeader(.repImport, status: status.rawValue, to: &bytes)
        device?.encode(into: &bytes)
    }
}

/// The common header alone as a reply (`struct op_common`, usbip_network.h): latchkey's
/// answer to an OP_REQ_* it does not implement, with the request's code less
/// ``USBIPOperationCode/requestBit`` and an error status.
///
/// | Offset | Length | Value | Field |
/// | --- | --- | --- | --- |
/// | 0 | 2 | 0x0111 | USBIP version |
/// | 2 | 2 | | reply code: the request's code without 0x8000 |
/// | 4 | 4 | | status: not 0 |
///
/// usbip's own clients read this header before anything else and stop at a status other
/// than 0 (`usbip_net_recv_op_common`), so the header alone is a whole answer to any request.
public struct USBIPOpRepStatus: USBIPWireMessage, ByteReadable {
    /// The reply code: a request's code with the request bit clear.
    public var code: UInt16
    /// The reply's status; never ``USBIPOperationStatus/ok``.
    public var status: USBIPOperationStatus

    /// The reply to a request of code `requestCode`: its code less the request bit, with
    /// `status`, which must not be ``USBIPOperationStatus/ok`` (a programmer error otherwise:
    /// an OK reply would promise a body).
    public init(answering requestCode: UInt16, status: USBIPOperationStatus) {
        precondition(status != .ok, "a bare reply header carries a failure status")
        self.code = requestCode & ~USBIPOperationCode.requestBit
        self.status = status
    }

    /// Decodes exactly one 8-byte header whose code is a reply's and whose status is not 0.
    public init(bytes: [UInt8]) throws(USBIPError) {
        try self.init(wholeMessage: bytes, "a reply header")
    }

    init(reader: inout ByteReader) throws(USBIPError) {
        try readOperationVersion(&reader)
        code = try reader.readUInt16()
        guard code & USBIPOperationCode.requestBit == 0 else {
            throw USBIPError(.unexpectedMessage, "code 0x\(String(code, radix: 16)) is a request's")
        }
        status = USBIPOperationStatus(rawValue: try reader.readUInt32())
        guard status != .ok else {
            throw USBIPError(.unknownOperation, "an OK reply of unknown code 0x\(String(code, radix: 16))")
        }
    }

    /// Appends the 8 bytes.
    public func encode(into bytes: inout [UInt8]) {
        bytes.appendBigEndian(USBIPVersion.current)
        bytes.appendBigEndian(code)
        bytes.appendBigEndian(status.rawValue)
    }
}

/// An OP_REQ_* the server read far enough to know its code and cannot serve: another
/// protocol version, a code latchkey does not implement, a bus id without its terminating
/// zero or not UTF-8, or a request the client stopped sending halfway through.
///
/// usbip_protocol.rst gives every request a reply whose status says whether it worked, so
/// such a request gets that reply with status ST_NA (1, "1 for error" in usbip_protocol.rst,
/// the only error status it defines) rather than a closed connection: a client waiting for
/// the reply reads an error at once instead of waiting for its timeout. The connection
/// closes after the reply.
public struct USBIPRejectedRequest: Hashable, Sendable {
    /// The request's code as sent, ``USBIPOperationCode/requestBit`` set.
    public var code: UInt16
    /// Why it is refused, for the log.
    public var reason: USBIPError

    /// A refusal of the request of code `code`, which must have the request bit set (a
    /// programmer error otherwise).
    public init(code: UInt16, reason: USBIPError) {
        precondition(code & USBIPOperationCode.requestBit != 0, "only a request is refused with a reply")
        self.code = code
        self.reason = reason
    }

    /// The status every refusal carries.
    public static let status = USBIPOperationStatus.notAvailable

    /// The reply: OP_REP_IMPORT with status 1 and no device record for OP_REQ_IMPORT;
    /// OP_REP_DEVLIST with status 1 and no devices for OP_REQ_DEVLIST; the common header
    /// with the request's reply code and status 1 (``USBIPOpRepStatus``) for any other code.
    public var reply: [UInt8] {
        switch USBIPOperationCode(rawValue: code) {
        case .reqImport:
            USBIPOpRepImport(failure: Self.status).encodedBytes
        case .reqDevlist:
            USBIPOpRepDevlist(status: Self.status, devices: []).encodedBytes
        default:
            USBIPOpRepStatus(answering: code, status: Self.status).encodedBytes
        }
    }
}
