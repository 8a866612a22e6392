// The host's side of CTAPHID framing: reassembling what a device sends (CTAP 2.1 §11.2.4).
// Test code and fuzzers use it to read the state machine's output as a host would.

/// Reassembles a device's input reports into messages, as a host does (CTAP 2.1 §11.2.4).
///
/// It is strict, because its job is to catch a device that frames badly: a device sends one
/// response at a time, so any report that does not continue the message in progress, or
/// cannot be read, is reported as ``Event/error`` and drops the partial message.
public struct CTAPHIDResponseAssembler: Sendable {
    /// What one report completed.
    public enum Event: Equatable, Sendable {
        /// A CTAPHID_KEEPALIVE: the device is still working on the request of `channel`
        /// (§11.2.9.1.7).
        case keepalive(channel: UInt32, status: KeepaliveStatus)
        /// A complete response message; CTAPHID_ERROR replies arrive here with
        /// `command == .error` and the error code as payload (§11.2.9.1.6).
        case message(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8])
        /// A report that breaks CTAPHID framing: shorter than 5 bytes, an unknown command,
        /// a length over 7609, a continuation packet with no message in progress or out of
        /// sequence, or an initialization packet in the middle of a message.
        case error
    }

    private var partial: CTAPHIDPartialMessage?

    /// A reassembler with no message in progress.
    public init() {}

    /// Whether a message has begun and not yet been completed.
    public var isAssembling: Bool { partial != nil }

    /// Takes one input report; returns what it completed, or `nil` when the message in
    /// progress needs more reports.
    public mutating func receive(_ report: [UInt8]) -> Event? {
        guard let packet = CTAPHIDPacket(report: report) else {
            partial = nil
            return .error
        }
        switch packet {
        case .initialization(let channel, let commandByte, let length, let data):
            guard partial == nil, let command = CTAPHIDCommand(rawValue: commandByte),
                length <= CTAPHIDConstants.maxMessageSize
            else {
                partial = nil
                return .error
            }
            if command == .keepalive {
                guard length == 1 else { return .error }
                return .keepalive(channel: channel, status: KeepaliveStatus(rawValue: data[data.startIndex]))
            }
            if length <= CTAPHIDConstants.initPayloadSize {
                return .message(channel: channel, command: command, payload: Array(data.prefix(length)))
            }
            partial = CTAPHIDPartialMessage(channel: channel, command: command, length: length, first: data)
            return nil

        case .continuation(let channel, let sequence, let data):
            guard var message = partial, message.channel == channel, message.nextSequence == sequence else {
                partial = nil
                return .error
            }
            if message.append(data) {
                partial = nil
                return .message(channel: message.channel, command: message.command, payload: message.payload)
            }
            partial = message
            return nil
        }
    }
}
