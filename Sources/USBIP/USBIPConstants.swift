// USB/IP wire constants (Linux Documentation/usb/usbip_protocol.rst, and the names of
// tools/usb/usbip and drivers/usb/usbip/usbip_common.h). All fields on the wire are
// big-endian.

/// The USB/IP protocol version carried by every OP_* message.
public enum USBIPVersion {
    /// Version 1.1.1 (0x0111), the only one Linux speaks (usbip_protocol.rst, "Protocol
    /// Version").
    public static let current: UInt16 = 0x0111
}

/// The code of an OP_* message, the second field of every OP_* header (usbip_protocol.rst,
/// "Message Format"; `OP_REQUEST` is 0x8000, `OP_REPLY` 0x0000 in usbip_network.h).
///
/// A closed set: these four are the operations Linux implements. Another code with the
/// request bit (``requestBit``) set is a request latchkey does not implement, answered with
/// the common header alone and an error status (``USBIPOpRepStatus``); any other code is a
/// protocol error and the connection is closed.
public enum USBIPOperationCode: UInt16, Sendable {
    /// `OP_REQUEST` (0x8000, usbip_network.h): set in the code of every request, clear in
    /// the code of its reply, which is otherwise the same.
    public static let requestBit: UInt16 = 0x8000

    /// OP_REQ_DEVLIST (0x8005): retrieve the list of exported USB devices.
    case reqDevlist = 0x8005
    /// OP_REP_DEVLIST (0x0005): the list of exported USB devices.
    case repDevlist = 0x0005
    /// OP_REQ_IMPORT (0x8003): import (attach) a remote USB device.
    case reqImport = 0x8003
    /// OP_REP_IMPORT (0x0003): the reply to an import.
    case repImport = 0x0003
}

/// The `command` field of `usbip_header_basic`, the first word of every URB message
/// (usbip_protocol.rst, "usbip_header_basic").
///
/// A closed set; any other value is a protocol error.
public enum USBIPCommandCode: UInt32, Sendable {
    /// USBIP_CMD_SUBMIT (0x00000001): submit an URB.
    case cmdSubmit = 0x0000_0001
    /// USBIP_CMD_UNLINK (0x00000002): unlink an URB.
    case cmdUnlink = 0x0000_0002
    /// USBIP_RET_SUBMIT (0x00000003): the reply to USBIP_CMD_SUBMIT.
    case retSubmit = 0x0000_0003
    /// USBIP_RET_UNLINK (0x00000004): the reply to USBIP_CMD_UNLINK.
    case retUnlink = 0x0000_0004
}

/// The `direction` field of `usbip_header_basic` (usbip_protocol.rst): whether the URB
/// moves data from the host to the device (OUT) or from the device to the host (IN).
///
/// It alone decides which message carries the transfer buffer: USBIP_CMD_SUBMIT for OUT,
/// USBIP_RET_SUBMIT for IN.
public enum USBIPDirection: UInt32, Sendable {
    /// USBIP_DIR_OUT (0): host to device.
    case out = 0
    /// USBIP_DIR_IN (1): device to host.
    case `in` = 1
}

/// The `status` of an OP_REP_* reply (the `ST_*` values of usbip-utils `usbip_common.h`).
///
/// An open set: a server may send values this type has no name for.
public struct USBIPOperationStatus: RawRepresentable, Hashable, Sendable {
    /// The status as sent on the wire.
    public var rawValue: UInt32

    /// Wraps a status as sent on the wire.
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// ST_OK (0x00): request completed successfully.
    public static let ok = USBIPOperationStatus(rawValue: 0x00)
    /// ST_NA (0x01): request failed; usbip_protocol.rst calls it "1 for error". latchkey
    /// answers it to an import of a bus id it does not export.
    public static let notAvailable = USBIPOperationStatus(rawValue: 0x01)
    /// ST_DEV_BUSY (0x02): the device is busy (exported to another client).
    public static let deviceBusy = USBIPOperationStatus(rawValue: 0x02)
    /// ST_DEV_ERR (0x03): the device is in an error state.
    public static let deviceError = USBIPOperationStatus(rawValue: 0x03)
    /// ST_NODEV (0x04): no such device.
    public static let noDevice = USBIPOperationStatus(rawValue: 0x04)
    /// ST_ERROR (0x05): unexpected response.
    public static let error = USBIPOperationStatus(rawValue: 0x05)
}

/// The `status` of a USBIP_RET_SUBMIT or USBIP_RET_UNLINK: 0 or a negated Linux errno, as
/// the URB's `status` (Documentation/driver-api/usb/error-codes.rst).
///
/// An open set: a server may send values this type has no name for.
public struct URBStatus: RawRepresentable, Hashable, Sendable {
    /// The status as sent on the wire.
    public var rawValue: Int32

    /// Wraps a status as sent on the wire.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// 0: the transfer completed.
    public static let success = URBStatus(rawValue: 0)
    /// -ENOENT (-2): in a USBIP_RET_UNLINK, the URB to unlink was not pending (latchkey's
    /// answer for an unknown or already completed seqnum).
    public static let noEntry = URBStatus(rawValue: -2)
    /// -EPIPE (-32): the endpoint stalled; for a control transfer, the device does not
    /// support the request (USB 2.0 §8.4.5, §9.2.7).
    public static let stall = URBStatus(rawValue: -32)
    /// -EOVERFLOW (-75): the device sent more data than the URB's buffer holds (babble).
    public static let overflow = URBStatus(rawValue: -75)
    /// -ECONNRESET (-104): the URB was unlinked (usbip_protocol.rst, USBIP_RET_UNLINK).
    public static let connectionReset = URBStatus(rawValue: -104)
    /// -ESHUTDOWN (-108): the endpoint was disabled (here: the configuration was unset).
    public static let shutdown = URBStatus(rawValue: -108)
}

/// The `speed` of an exported device: Linux `enum usb_device_speed`
/// (include/uapi/linux/usb/ch9.h), which vhci-hcd uses to pick a root-hub port.
///
/// An open set.
public struct USBSpeed: RawRepresentable, Hashable, Sendable {
    /// The speed as sent on the wire.
    public var rawValue: UInt32

    /// Wraps a speed as sent on the wire.
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// USB_SPEED_UNKNOWN (0).
    public static let unknown = USBSpeed(rawValue: 0)
    /// USB_SPEED_LOW (1): 1.5 Mbit/s.
    public static let low = USBSpeed(rawValue: 1)
    /// USB_SPEED_FULL (2): 12 Mbit/s, latchkey's virtual key.
    public static let full = USBSpeed(rawValue: 2)
    /// USB_SPEED_HIGH (3): 480 Mbit/s.
    public static let high = USBSpeed(rawValue: 3)
}

/// Sizes and limits of the USB/IP wire format.
public enum USBIPLimits {
    /// The length of the `usbip_header` that starts every URB message (usbip_protocol.rst:
    /// the four URB headers "have the same length", 0x30 bytes).
    public static let urbHeaderSize = 48
    /// The length of the common OP_* header: version, code, status.
    public static let operationHeaderSize = 8
    /// The size of the `path` field of a device record (`SYSFS_PATH_MAX`).
    public static let pathSize = 256
    /// The size of the `busid` field (`SYSFS_BUS_ID_SIZE`).
    public static let busidSize = 32
    /// The size of a device record, `struct usbip_usb_device` (0x138 bytes).
    public static let deviceRecordSize = 312
    /// The size of an interface record, `struct usbip_usb_interface`.
    public static let interfaceRecordSize = 4
    /// The default cap on `transfer_buffer_length` and `actual_length`: larger transfers are a
    /// protocol error. 64 KiB is far above anything a HID device moves and bounds what one
    /// message can make a peer buffer.
    public static let defaultMaximumTransferBufferLength = 64 * 1024
    /// The highest endpoint number (USB 2.0 §9.6.6: four bits).
    public static let maximumEndpointNumber: UInt32 = 15
}
