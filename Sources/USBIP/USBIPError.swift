// Local USB/IP failures: malformed or hostile bytes, and messages the protocol does not
// allow at that point. Each one ends the connection and carries context for the log. Only
// the status of an OP_REP_* reaches the peer (an OP_REQ_* whose code was read gets its reply
// with an error status first); USB/IP has no error message for anything else.

public import LatchkeyErrors

/// Why decoding a USB/IP message, or a connection, failed. Equal (and hashed) by code.
public typealias USBIPError = CodedError<USBIPErrorCode>

/// The kind of a `USBIPError`.
public enum USBIPErrorCode: String, ErrorCode {
    /// Fewer bytes than the message needs (from a whole-message `init(bytes:)`; a stream
    /// decoder waits for more instead, and a connection whose client stops sending in the
    /// middle of a message ends with this).
    case truncated
    /// Bytes left over after a whole message.
    case trailingBytes = "trailing bytes"
    /// An OP_* header with another version than 0x0111.
    case unsupportedVersion = "unsupported version"
    /// An OP_* code that is not one of the four operations.
    case unknownOperation = "unknown operation"
    /// A `usbip_header_basic.command` that is not one of the four URB commands.
    case unknownCommand = "unknown command"
    /// A field out of its range: a direction other than 0 or 1, an endpoint above 15, a
    /// negative length, a string without its terminating zero or not UTF-8.
    case invalidField = "invalid field"
    /// A `transfer_buffer_length` or `actual_length` above the cap.
    case transferTooLarge = "transfer too large"
    /// An isochronous URB: `number_of_packets` other than 0 or -1 (0xffffffff). latchkey
    /// exports no isochronous endpoint.
    case isochronous = "isochronous transfer"
    /// A well-formed message the protocol does not allow here: an OP request after an
    /// import, a request on the client side, anything after OP_REP_DEVLIST.
    case unexpectedMessage = "unexpected message"
    /// A URB command whose `devid` is not the imported device's `(busnum << 16) | devnum`.
    case deviceMismatch = "device mismatch"
    /// A USBIP_CMD_SUBMIT whose seqnum is that of a URB still pending.
    case duplicateSeqnum = "duplicate seqnum"
    /// More interrupt-IN URBs pending than the connection holds.
    case tooManyPendingURBs = "too many pending URBs"
    /// A USBIP_RET_SUBMIT or USBIP_RET_UNLINK that answers no outstanding command.
    case unknownSeqnum = "unknown seqnum"
    /// A USBIP_RET_SUBMIT whose `actual_length` exceeds the `transfer_buffer_length` of
    /// the URB it answers.
    case lengthExceedsBuffer = "length exceeds buffer"
    /// An OP_REP_DEVLIST listing more devices than the decoder accepts.
    case tooManyDevices = "too many devices"

    public var title: String { "USB/IP \(rawValue)" }
}
