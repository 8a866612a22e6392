// The wire values of CTAPHID: command codes, error codes, keepalive statuses and
// framing constants (CTAP 2.1 §11.2.4, §11.2.9).

/// A CTAPHID command code, the low seven bits of an initialization packet's CMD byte
/// (CTAP 2.1 §11.2.9.1 and §11.2.9.2).
///
/// This is the closed set latchkey parses; a byte outside it, including the vendor range
/// 0x40–0x7F, fails `init?(rawValue:)` and is answered with ``CTAPHIDError/invalidCommand``.
/// On the wire the command byte carries the initialization-packet bit, so `ping` is 0x81.
public enum CTAPHIDCommand: UInt8, Sendable {
    /// CTAPHID_PING (0x01): echo the payload (§11.2.9.1.4).
    case ping = 0x01
    /// CTAPHID_MSG (0x03): a CTAP1/U2F APDU (§11.2.9.1.1).
    case msg = 0x03
    /// CTAPHID_LOCK (0x04): exclusive access for up to 10 seconds (§11.2.9.2.2).
    case lock = 0x04
    /// CTAPHID_INIT (0x06): allocate or re-synchronize a channel (§11.2.9.1.3).
    case initialize = 0x06
    /// CTAPHID_WINK (0x08): identify the device to the user (§11.2.9.2.1).
    case wink = 0x08
    /// CTAPHID_CBOR (0x10): a CTAP2 command byte and its CBOR parameters (§11.2.9.1.2).
    case cbor = 0x10
    /// CTAPHID_CANCEL (0x11): withdraw the request being processed; never answered (§11.2.9.1.5).
    case cancel = 0x11
    /// CTAPHID_KEEPALIVE (0x3B): the device's "still working" notice (§11.2.9.1.7).
    case keepalive = 0x3B
    /// CTAPHID_ERROR (0x3F): the device's transport-level error reply (§11.2.9.1.6).
    case error = 0x3F
}

/// A CTAPHID_ERROR code, the single payload byte of an error reply (CTAP 2.1 §11.2.9.1.6).
///
/// An open set: a host may see codes this type has no name for.
public struct CTAPHIDError: RawRepresentable, Hashable, Sendable {
    /// The code as sent on the wire.
    public var rawValue: UInt8

    /// Wraps a code as sent on the wire.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// ERR_INVALID_CMD (0x01): the command in the request is invalid.
    public static let invalidCommand = CTAPHIDError(rawValue: 0x01)
    /// ERR_INVALID_PAR (0x02): a parameter in the request is invalid.
    public static let invalidParameter = CTAPHIDError(rawValue: 0x02)
    /// ERR_INVALID_LEN (0x03): the length field (BCNT) is invalid for the request.
    public static let invalidLength = CTAPHIDError(rawValue: 0x03)
    /// ERR_INVALID_SEQ (0x04): the sequence does not match the expected value.
    public static let invalidSequence = CTAPHIDError(rawValue: 0x04)
    /// ERR_MSG_TIMEOUT (0x05): the message has timed out.
    public static let messageTimeout = CTAPHIDError(rawValue: 0x05)
    /// ERR_CHANNEL_BUSY (0x06): the device is busy for the requesting channel.
    public static let channelBusy = CTAPHIDError(rawValue: 0x06)
    /// ERR_LOCK_REQUIRED (0x0A): the command requires a channel lock.
    public static let lockRequired = CTAPHIDError(rawValue: 0x0A)
    /// ERR_INVALID_CHANNEL (0x0B): the command is not allowed on this CID.
    public static let invalidChannel = CTAPHIDError(rawValue: 0x0B)
    /// ERR_OTHER (0x7F): unspecified error.
    public static let other = CTAPHIDError(rawValue: 0x7F)
}

/// The status byte of a CTAPHID_KEEPALIVE (CTAP 2.1 §11.2.9.1.7).
public struct KeepaliveStatus: RawRepresentable, Hashable, Sendable {
    /// The status as sent on the wire.
    public var rawValue: UInt8

    /// Wraps a status as sent on the wire.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// STATUS_PROCESSING (1): the authenticator is still processing the request.
    public static let processing = KeepaliveStatus(rawValue: 1)
    /// STATUS_UPNEEDED (2): the authenticator is waiting for user presence.
    public static let upNeeded = KeepaliveStatus(rawValue: 2)
}

/// Sizes and reserved values of CTAPHID framing (CTAP 2.1 §11.2.4 and §11.2.6).
public enum CTAPHIDConstants {
    /// The size of every HID input and output report of a full-speed FIDO device (§11.2.6).
    public static let reportSize = 64
    /// The payload bytes an initialization packet carries: CID(4) | CMD(1) | BCNTH | BCNTL | DATA(57).
    public static let initPayloadSize = 57
    /// The payload bytes a continuation packet carries: CID(4) | SEQ(1) | DATA(59).
    public static let continuationPayloadSize = 59
    /// The largest message payload: one initialization packet and 128 continuation packets,
    /// 57 + 128 × 59 = 7609 bytes (§11.2.4).
    public static let maxMessageSize = 7609
    /// CTAPHID_BROADCAST_CID (0xFFFFFFFF), used only to allocate a channel with CTAPHID_INIT (§11.2.4).
    public static let broadcastChannel: UInt32 = 0xFFFF_FFFF
    /// The reserved channel 0, which is never allocated (§11.2.4).
    public static let reservedChannel: UInt32 = 0
    /// CAPABILITY_WINK (0x01): the device implements CTAPHID_WINK (§11.2.9.1.3).
    public static let capabilityWink: UInt8 = 0x01
    /// CAPABILITY_CBOR (0x04): the device implements CTAPHID_CBOR (§11.2.9.1.3).
    public static let capabilityCBOR: UInt8 = 0x04
    /// CAPABILITY_NMSG (0x08): the device does NOT implement CTAPHID_MSG (§11.2.9.1.3).
    public static let capabilityNMSG: UInt8 = 0x08

    /// The bit of the fifth report byte that marks an initialization packet (§11.2.4).
    static let initPacketBit: UInt8 = 0x80
    /// The highest sequence number of a continuation packet (§11.2.4).
    static let maxSequence: UInt8 = 0x7F
}
