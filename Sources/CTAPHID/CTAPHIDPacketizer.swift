// Splitting a CTAPHID message into 64-byte reports (CTAP 2.1 §11.2.4).

/// Splits a message into the 64-byte reports that carry it (CTAP 2.1 §11.2.4).
///
/// The device uses it to answer; host-side test code uses it to send requests.
public enum CTAPHIDPacketizer {
    /// The reports of one message: an initialization packet carrying the command and the
    /// payload length, then continuation packets numbered from 0 (§11.2.4). Unused bytes of
    /// the last report are zero.
    ///
    /// - Parameters:
    ///   - channel: the CID, written big-endian.
    ///   - command: the command code; bit 7 (the initialization-packet marker) is set here,
    ///     so both 0x10 and 0x90 send CTAPHID_CBOR.
    ///   - payload: at most ``CTAPHIDConstants/maxMessageSize`` (7609) bytes; more is a
    ///     programmer error and traps.
    public static func fragment(channel: UInt32, command: UInt8, payload: [UInt8]) -> [[UInt8]] {
        precondition(
            payload.count <= CTAPHIDConstants.maxMessageSize,
            "a CTAPHID message carries at most 7609 bytes"
        )
        let channelBytes = channel.bigEndianBytes
        var reports: [[UInt8]] = []
        reports.reserveCapacity(reportCount(payloadSize: payload.count))

        var first = channelBytes
        first.append(command | CTAPHIDConstants.initPacketBit)
        first.append(UInt8(truncatingIfNeeded: payload.count >> 8))
        first.append(UInt8(truncatingIfNeeded: payload.count))
        let firstEnd = min(payload.count, CTAPHIDConstants.initPayloadSize)
        first.append(contentsOf: payload[0..<firstEnd])
        reports.append(padded(first))

        var offset = firstEnd
        var sequence: UInt8 = 0
        while offset < payload.count {
            let end = min(payload.count, offset + CTAPHIDConstants.continuationPayloadSize)
            var report = channelBytes
            report.append(sequence)
            report.append(contentsOf: payload[offset..<end])
            reports.append(padded(report))
            offset = end
            sequence += 1
        }
        return reports
    }

    /// The reports of one message, with the command given by name.
    public static func fragment(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) -> [[UInt8]] {
        fragment(channel: channel, command: command.rawValue, payload: payload)
    }

    /// How many reports a payload of this size takes: one initialization packet and one
    /// continuation packet per 59 bytes past the first 57.
    public static func reportCount(payloadSize: Int) -> Int {
        let rest = max(0, payloadSize - CTAPHIDConstants.initPayloadSize)
        return 1 + (rest + CTAPHIDConstants.continuationPayloadSize - 1) / CTAPHIDConstants.continuationPayloadSize
    }

    private static func padded(_ report: [UInt8]) -> [UInt8] {
        report + repeatElement(0, count: CTAPHIDConstants.reportSize - report.count)
    }
}
