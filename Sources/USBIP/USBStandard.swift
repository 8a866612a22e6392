// The USB values the virtual device speaks on its default control pipe: the setup packet
// (USB 2.0 §9.3), standard request codes, descriptor types and feature selectors
// (§9.4, Tables 9-4 to 9-6), and the HID class's (HID 1.11 §7.1, §7.2). USB fields are
// little-endian (USB 2.0 §8.1), unlike USB/IP's.

/// A control transfer's 8-byte setup packet (USB 2.0 §9.3, Table 9-2).
///
/// | Offset | Length | Field |
/// | --- | --- | --- |
/// | 0 | 1 | bmRequestType: bit 7 direction (1 device-to-host), bits 6..5 type (0 standard, 1 class, 2 vendor), bits 4..0 recipient (0 device, 1 interface, 2 endpoint, 3 other) |
/// | 1 | 1 | bRequest |
/// | 2 | 2 | wValue (little-endian) |
/// | 4 | 2 | wIndex (little-endian) |
/// | 6 | 2 | wLength (little-endian): the data stage's length |
public struct USBSetupPacket: Hashable, Sendable {
    /// The request's characteristics: direction, type and recipient.
    public var bmRequestType: UInt8
    /// The request code.
    public var bRequest: UInt8
    /// A request-specific value.
    public var wValue: UInt16
    /// A request-specific index, often an interface number or an endpoint address.
    public var wIndex: UInt16
    /// The number of bytes in the data stage (for device-to-host, the most the host takes).
    public var wLength: UInt16

    /// A setup packet with every field given; all zero by default (the `setup` of a
    /// non-control USBIP_CMD_SUBMIT).
    public init(
        bmRequestType: UInt8 = 0,
        bRequest: UInt8 = 0,
        wValue: UInt16 = 0,
        wIndex: UInt16 = 0,
        wLength: UInt16 = 0
    ) {
        self.bmRequestType = bmRequestType
        self.bRequest = bRequest
        self.wValue = wValue
        self.wIndex = wIndex
        self.wLength = wLength
    }

    /// Reads the 8 bytes of a setup packet; `bytes` must hold exactly 8 (a programmer error
    /// otherwise: every USB/IP header carries 8).
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 8, "a setup packet has 8 bytes")
        bmRequestType = bytes[0]
        bRequest = bytes[1]
        wValue = UInt16(bytes[2]) | UInt16(bytes[3]) << 8
        wIndex = UInt16(bytes[4]) | UInt16(bytes[5]) << 8
        wLength = UInt16(bytes[6]) | UInt16(bytes[7]) << 8
    }

    /// The 8 bytes in wire order.
    public var bytes: [UInt8] {
        var bytes: [UInt8] = [bmRequestType, bRequest]
        bytes.appendLittleEndian(wValue)
        bytes.appendLittleEndian(wIndex)
        bytes.appendLittleEndian(wLength)
        return bytes
    }

    /// Whether the data stage goes from device to host (bmRequestType bit 7).
    public var isDeviceToHost: Bool { bmRequestType & 0x80 != 0 }
}

/// bmRequestType values of the requests the virtual device answers (USB 2.0 §9.3.1, §9.4;
/// HID 1.11 §7.2).
public enum USBRequestType {
    /// Host-to-device, standard, device (0x00).
    public static let standardOutDevice: UInt8 = 0x00
    /// Host-to-device, standard, interface (0x01).
    public static let standardOutInterface: UInt8 = 0x01
    /// Host-to-device, standard, endpoint (0x02).
    public static let standardOutEndpoint: UInt8 = 0x02
    /// Device-to-host, standard, device (0x80).
    public static let standardInDevice: UInt8 = 0x80
    /// Device-to-host, standard, interface (0x81).
    public static let standardInInterface: UInt8 = 0x81
    /// Device-to-host, standard, endpoint (0x82).
    public static let standardInEndpoint: UInt8 = 0x82
    /// Host-to-device, class, interface (0x21): HID SET_REPORT, SET_IDLE, SET_PROTOCOL.
    public static let classOutInterface: UInt8 = 0x21
    /// Device-to-host, class, interface (0xA1): HID GET_REPORT, GET_IDLE, GET_PROTOCOL.
    public static let classInInterface: UInt8 = 0xA1
}

/// Standard request codes (USB 2.0 §9.4, Table 9-4).
public enum USBStandardRequest {
    /// GET_STATUS (0).
    public static let getStatus: UInt8 = 0
    /// CLEAR_FEATURE (1).
    public static let clearFeature: UInt8 = 1
    /// SET_FEATURE (3).
    public static let setFeature: UInt8 = 3
    /// SET_ADDRESS (5).
    public static let setAddress: UInt8 = 5
    /// GET_DESCRIPTOR (6).
    public static let getDescriptor: UInt8 = 6
    /// SET_DESCRIPTOR (7).
    public static let setDescriptor: UInt8 = 7
    /// GET_CONFIGURATION (8).
    public static let getConfiguration: UInt8 = 8
    /// SET_CONFIGURATION (9).
    public static let setConfiguration: UInt8 = 9
    /// GET_INTERFACE (10).
    public static let getInterface: UInt8 = 10
    /// SET_INTERFACE (11).
    public static let setInterface: UInt8 = 11
    /// SYNCH_FRAME (12).
    public static let synchFrame: UInt8 = 12
}

/// HID class request codes (HID 1.11 §7.2).
public enum HIDClassRequest {
    /// GET_REPORT (0x01).
    public static let getReport: UInt8 = 0x01
    /// GET_IDLE (0x02).
    public static let getIdle: UInt8 = 0x02
    /// GET_PROTOCOL (0x03).
    public static let getProtocol: UInt8 = 0x03
    /// SET_REPORT (0x09).
    public static let setReport: UInt8 = 0x09
    /// SET_IDLE (0x0A).
    public static let setIdle: UInt8 = 0x0A
    /// SET_PROTOCOL (0x0B).
    public static let setProtocol: UInt8 = 0x0B
}

/// HID report types, the high byte of wValue in GET_REPORT and SET_REPORT (HID 1.11 §7.2.1).
public enum HIDReportType {
    /// Input (1).
    public static let input: UInt8 = 1
    /// Output (2).
    public static let output: UInt8 = 2
    /// Feature (3).
    public static let feature: UInt8 = 3
}

/// Descriptor types, the high byte of wValue in GET_DESCRIPTOR (USB 2.0 §9.4, Table 9-5;
/// HID 1.11 §7.1).
public enum USBDescriptorType {
    /// DEVICE (1).
    public static let device: UInt8 = 1
    /// CONFIGURATION (2).
    public static let configuration: UInt8 = 2
    /// STRING (3).
    public static let string: UInt8 = 3
    /// INTERFACE (4).
    public static let interface: UInt8 = 4
    /// ENDPOINT (5).
    public static let endpoint: UInt8 = 5
    /// DEVICE_QUALIFIER (6): a full-speed-only device answers it with a request error
    /// (USB 2.0 §9.6.2).
    public static let deviceQualifier: UInt8 = 6
    /// OTHER_SPEED_CONFIGURATION (7).
    public static let otherSpeedConfiguration: UInt8 = 7
    /// HID (0x21), the HID class descriptor (HID 1.11 §6.2.1).
    public static let hid: UInt8 = 0x21
    /// Report (0x22), the HID report descriptor (HID 1.11 §6.2.2).
    public static let report: UInt8 = 0x22
}

/// Standard feature selectors (USB 2.0 §9.4, Table 9-6).
public enum USBFeatureSelector {
    /// ENDPOINT_HALT (0), recipient endpoint.
    public static let endpointHalt: UInt16 = 0
    /// DEVICE_REMOTE_WAKEUP (1), recipient device.
    public static let deviceRemoteWakeup: UInt16 = 1
    /// TEST_MODE (2), recipient device.
    public static let testMode: UInt16 = 2
}
