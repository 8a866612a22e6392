// One 64-byte CTAPHID report, read as an initialization or a continuation packet
// (CTAP 2.1 §11.2.4).

/// A report parsed as a CTAPHID packet (CTAP 2.1 §11.2.4).
///
/// Initialization packet: `CID(4) | CMD(1, bit 7 set) | BCNTH | BCNTL | DATA(57)`.
/// Continuation packet: `CID(4) | SEQ(1, bit 7 clear) | DATA(59)`.
/// The CID is big-endian, as every multi-byte CTAPHID field.
enum CTAPHIDPacket {
    /// The first packet of a message: its command byte (bit 7 cleared), the message's total
    /// payload length (BCNT) and the 57 data bytes this packet carries.
    case initialization(channel: UInt32, command: UInt8, length: Int, data: ArraySlice<UInt8>)
    /// A later packet of a message: its sequence number (0...127) and 59 data bytes.
    case continuation(channel: UInt32, sequence: UInt8, data: ArraySlice<UInt8>)

    /// Parses a report, normalizing its length first.
    ///
    /// A report longer than 64 bytes is cut to 64. A shorter one is padded with zeros when it
    /// holds at least the CID and the CMD/SEQ byte (5 bytes): the spec asks that unused bytes
    /// be zero (§11.2.4), so a transport that trimmed trailing zeros loses nothing. A report
    /// under 5 bytes names no packet type and is ignored (`nil`). A report-ID prefix, if a
    /// transport sees one, must be removed by the transport: FIDO reports are unnumbered.
    init?(report: [UInt8]) {
        guard report.count >= 5 else { return nil }
        var bytes = report
        if bytes.count > CTAPHIDConstants.reportSize {
            bytes.removeLast(bytes.count - CTAPHIDConstants.reportSize)
        } else if bytes.count < CTAPHIDConstants.reportSize {
            bytes.append(contentsOf: repeatElement(0, count: CTAPHIDConstants.reportSize - bytes.count))
        }
        let channel = UInt32(bigEndianBytes: bytes[0..<4])
        let typeByte = bytes[4]
        if typeByte & CTAPHIDConstants.initPacketBit != 0 {
            let length = Int(bytes[5]) << 8 | Int(bytes[6])
            self = .initialization(
                channel: channel,
                command: typeByte & ~CTAPHIDConstants.initPacketBit,
                length: length,
                data: bytes[7...]
            )
        } else {
            self = .continuation(channel: channel, sequence: typeByte, data: bytes[5...])
        }
    }
}

/// A message whose initialization packet has arrived and whose continuation packets are
/// still coming (§11.2.4): a request the device reassembles, or a response a host does.
struct CTAPHIDPartialMessage: Sendable {
    let channel: UInt32
    let command: CTAPHIDCommand
    /// The BCNT of the initialization packet: the length of the whole payload.
    let length: Int
    private(set) var payload: [UInt8] = []
    /// The sequence number the next continuation packet must carry.
    private(set) var nextSequence: UInt8 = 0

    /// A message of `length` bytes, more than an initialization packet holds, that starts with
    /// `data`.
    init(channel: UInt32, command: CTAPHIDCommand, length: Int, first data: ArraySlice<UInt8>) {
        self.channel = channel
        self.command = command
        self.length = length
        payload.reserveCapacity(length)
        payload += data
    }

    /// Adds the data of the continuation packet numbered `nextSequence`, without the padding
    /// after the payload's end; returns whether the payload is complete.
    mutating func append(_ data: ArraySlice<UInt8>) -> Bool {
        payload += data.prefix(length - payload.count)
        nextSequence += 1
        return payload.count == length
    }
}

extension UInt32 {
    /// Reads four bytes as a big-endian integer.
    init(bigEndianBytes bytes: ArraySlice<UInt8>) {
        precondition(bytes.count == 4)
        self = bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The four bytes of this integer, most significant first.
    var bigEndianBytes: [UInt8] {
        [
            UInt8(truncatingIfNeeded: self >> 24), UInt8(truncatingIfNeeded: self >> 16),
            UInt8(truncatingIfNeeded: self >> 8), UInt8(truncatingIfNeeded: self),
        ]
    }
}
