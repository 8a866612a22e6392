// The uhid event types of the kernel ABI (include/uapi/linux/uhid.h).

/// `enum uhid_event_type`: the first `__u32` of every `struct uhid_event`.
public enum UHIDEventType: UInt32, Sendable {
    /// UHID_DESTROY
    case destroy = 1
    /// UHID_START
    case start = 2
    /// UHID_STOP
    case stop = 3
    /// UHID_OPEN
    case open = 4
    /// UHID_CLOSE
    case close = 5
    /// UHID_OUTPUT
    case output = 6
    /// UHID_GET_REPORT
    case getReport = 9
    /// UHID_GET_REPORT_REPLY
    case getReportReply = 10
    /// UHID_CREATE2
    case create2 = 11
    /// UHID_INPUT2
    case input2 = 12
    /// UHID_SET_REPORT
    case setReport = 13
    /// UHID_SET_REPORT_REPLY
    case setReportReply = 14
}
