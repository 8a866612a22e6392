// The uhid events latchkey exchanges with the kernel, as Swift values: one
// case per `enum uhid_event_type` value we use, one struct per payload of the
// union in `struct uhid_event` (include/uapi/linux/uhid.h). The byte layout
// lives in UHIDEvent+Codec.swift.

/// One `struct uhid_event`: what one `read()` of `/dev/uhid` returns or one
/// `write()` sends (Documentation/hid/uhid.rst, "The UHID API").
///
/// | case | direction | payload (`u.…`) |
/// | --- | --- | --- |
/// | `create2` | to kernel | `create2`: name, phys, uniq, rd_size, bus, vendor, product, version, country, rd_data |
/// | `destroy` | to kernel | none |
/// | `start` | from kernel | `start`: dev_flags |
/// | `stop`, `open`, `close` | from kernel | none |
/// | `output` | from kernel | `output`: data, size, rtype |
/// | `getReport` | from kernel | `get_report`: id, rnum, rtype |
/// | `getReportReply` | to kernel | `get_report_reply`: id, err, size, data |
/// | `setReport` | from kernel | `set_report`: id, rnum, rtype, size, data |
/// | `setReportReply` | to kernel | `set_report_reply`: id, err |
/// | `input2` | to kernel | `input2`: size, data |
///
/// Every case encodes and decodes, whatever its direction, so a test can
/// play the kernel.
public enum UHIDEvent: Hashable, Sendable {
    /// UHID_CREATE2: registers the HID device with the kernel.
    case create2(UHIDCreate2Request)
    /// UHID_DESTROY: unregisters the device.
    case destroy
    /// UHID_START: the kernel started the device (the answer to CREATE2);
    /// the flags say which report types carry a report-number prefix.
    case start(UHIDDeviceFlags)
    /// UHID_STOP: the kernel stopped the device (after DESTROY, or a driver rebind).
    case stop
    /// UHID_OPEN: some process opened the device (for example its hidraw node).
    case open
    /// UHID_CLOSE: the last user closed the device.
    case close
    /// UHID_OUTPUT: a report the host sends to the device on the interrupt channel.
    case output(UHIDOutputRequest)
    /// UHID_GET_REPORT: the kernel asks for a report on the control channel.
    case getReport(UHIDGetReportRequest)
    /// UHID_GET_REPORT_REPLY: the answer to a GET_REPORT, with its `id`.
    case getReportReply(UHIDGetReportReply)
    /// UHID_SET_REPORT: the kernel sends a report on the control channel.
    case setReport(UHIDSetReportRequest)
    /// UHID_SET_REPORT_REPLY: the answer to a SET_REPORT, with its `id`.
    case setReportReply(UHIDSetReportReply)
    /// UHID_INPUT2: a report the device sends to the host (`data`, at most
    /// `UHID_DATA_MAX` bytes).
    case input2([UInt8])

    /// The event's `type` field.
    public var type: UHIDEventType {
        switch self {
        case .create2: .create2
        case .destroy: .destroy
        case .start: .start
        case .stop: .stop
        case .open: .open
        case .close: .close
        case .output: .output
        case .getReport: .getReport
        case .getReportReply: .getReportReply
        case .setReport: .setReport
        case .setReportReply: .setReportReply
        case .input2: .input2
        }
    }
}

/// `struct uhid_create2_req`: the device to register.
///
/// | field | C | bytes |
/// | --- | --- | --- |
/// | `name` | `__u8 name[128]` | UTF-8, NUL-padded; at most 127 bytes (the kernel keeps 127) |
/// | `phys` | `__u8 phys[64]` | at most 63 bytes |
/// | `uniq` | `__u8 uniq[64]` | at most 63 bytes; becomes `HID_UNIQ` of the hid device |
/// | (count of `rdData`) | `__u16 rd_size` | 1 ... `HID_MAX_DESCRIPTOR_SIZE` (4096) |
/// | `bus` | `__u16 bus` | `BUS_USB` (0x03) for FIDO clients |
/// | `vendor`, `product`, `version`, `country` | `__u32` each | |
/// | `rdData` | `__u8 rd_data[4096]` | the HID report descriptor |
public struct UHIDCreate2Request: Hashable, Sendable {
    /// `BUS_USB` from `<linux/input.h>`. libfido2 lists only hidraw devices on this bus.
    public static let busUSB: UInt16 = 0x03

    /// `name`: the device name (`HID_NAME`).
    public var name: String
    /// `phys`: the physical path (`HID_PHYS`).
    public var phys: String
    /// `uniq`: the unique id, usually a serial number (`HID_UNIQ`).
    public var uniq: String
    /// `bus`: the bus type (`BUS_*` of `<linux/input.h>`).
    public var bus: UInt16
    /// `vendor`: the vendor id.
    public var vendor: UInt32
    /// `product`: the product id.
    public var product: UInt32
    /// `version`: the device version.
    public var version: UInt32
    /// `country`: the HID country code.
    public var country: UInt32
    /// `rd_data` (its count is `rd_size`): the HID report descriptor.
    public var rdData: [UInt8]
}

/// `enum uhid_dev_flag`: the `dev_flags` of UHID_START. A set flag means the
/// kernel prefixes reports of that type with their report number.
public struct UHIDDeviceFlags: OptionSet, Hashable, Sendable {
    /// The flag bits.
    public var rawValue: UInt64

    /// Wraps raw `dev_flags` (unknown bits are kept).
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// UHID_DEV_NUMBERED_FEATURE_REPORTS (1 << 0)
    public static let numberedFeatureReports = UHIDDeviceFlags(rawValue: 1 << 0)
    /// UHID_DEV_NUMBERED_OUTPUT_REPORTS (1 << 1)
    public static let numberedOutputReports = UHIDDeviceFlags(rawValue: 1 << 1)
    /// UHID_DEV_NUMBERED_INPUT_REPORTS (1 << 2)
    public static let numberedInputReports = UHIDDeviceFlags(rawValue: 1 << 2)
}

/// `enum uhid_report_type`, the `rtype` of OUTPUT, GET_REPORT and SET_REPORT.
/// An open set: a value the kernel sends that we do not know is kept as is.
public struct UHIDReportType: RawRepresentable, Hashable, Sendable {
    /// The `__u8 rtype` value.
    public var rawValue: UInt8

    /// Wraps an `rtype` value.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// UHID_FEATURE_REPORT (0)
    public static let feature = UHIDReportType(rawValue: 0)
    /// UHID_OUTPUT_REPORT (1)
    public static let output = UHIDReportType(rawValue: 1)
    /// UHID_INPUT_REPORT (2)
    public static let input = UHIDReportType(rawValue: 2)
}

/// `struct uhid_output_req`: `__u8 data[4096]`, `__u16 size`, `__u8 rtype`.
public struct UHIDOutputRequest: Hashable, Sendable {
    /// `data[..<size]`: the report, exactly as the kernel passed it on.
    public var data: [UInt8]
    /// `rtype`: `.output` for reports written to hidraw.
    public var rtype: UHIDReportType
}

/// `struct uhid_get_report_req`: `__u32 id`, `__u8 rnum`, `__u8 rtype`.
public struct UHIDGetReportRequest: Hashable, Sendable {
    /// `id`: the request's number, to copy into the reply.
    public var id: UInt32
    /// `rnum`: the report number asked for.
    public var rnum: UInt8
    /// `rtype`: the report type asked for.
    public var rtype: UHIDReportType
}

/// `struct uhid_get_report_reply_req`: `__u32 id`, `__u16 err`, `__u16 size`,
/// `__u8 data[4096]`.
public struct UHIDGetReportReply: Hashable, Sendable {
    /// `id`: copied from the GET_REPORT being answered.
    public var id: UInt32
    /// `err`: 0 on success, else an errno value (the kernel turns any
    /// non-zero value into -EIO).
    public var err: UInt16
    /// `data[..<size]`: the report, when `err` is 0.
    public var data: [UInt8]
}

/// `struct uhid_set_report_req`: `__u32 id`, `__u8 rnum`, `__u8 rtype`,
/// `__u16 size`, `__u8 data[4096]`.
public struct UHIDSetReportRequest: Hashable, Sendable {
    /// `id`: the request's number, to copy into the reply.
    public var id: UInt32
    /// `rnum`: the report number.
    public var rnum: UInt8
    /// `rtype`: the report type.
    public var rtype: UHIDReportType
    /// `data[..<size]`: the report.
    public var data: [UInt8]
}

/// `struct uhid_set_report_reply_req`: `__u32 id`, `__u16 err`.
public struct UHIDSetReportReply: Hashable, Sendable {
    /// `id`: copied from the SET_REPORT being answered.
    public var id: UInt32
    /// `err`: 0 on success, else an errno value (the kernel turns any
    /// non-zero value into -EIO).
    public var err: UInt16
}
