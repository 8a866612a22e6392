// A host for the state machine tests: fragments requests into reports, feeds them to a
// CTAPHIDStateMachine with an injected clock, and reads its reports back as a host would.

import Testing

@testable import CTAPHID

typealias Action = CTAPHIDStateMachine.Action
typealias Event = CTAPHIDResponseAssembler.Event

/// What one call to the state machine produced, split into what the host reads and what the
/// transport acts on.
struct Outcome {
    /// The messages and keepalives the host reassembled from every `.send`.
    var events: [Event] = []
    /// Requests handed to the engine.
    var delivered: [Action] = []
    /// Channels whose request was withdrawn.
    var cancelled: [UInt32] = []
    /// How many `.wink` actions came out.
    var winks = 0
    /// Channels CTAPHID_INIT gave out anew (allocated or re-synchronized).
    var initialized: [UInt32] = []
    /// The raw reports sent, in order.
    var reports: [[UInt8]] = []

    /// The only event, when there is exactly one.
    var event: Event? { events.count == 1 ? events[0] : nil }
}

struct HostHarness {
    var machine: CTAPHIDStateMachine
    var host = CTAPHIDResponseAssembler()
    var now: UInt64 = 0

    init(configuration: CTAPHIDStateMachine.Configuration = .init()) {
        machine = CTAPHIDStateMachine(configuration: configuration)
    }

    /// Reads a batch of actions as the transport and the host would, checking framing rules
    /// that hold for every output: 64-byte reports, well-formed messages, one-byte errors.
    mutating func read(_ actions: [Action]) -> Outcome {
        var outcome = Outcome()
        for action in actions {
            switch action {
            case .send(let report):
                #expect(report.count == CTAPHIDConstants.reportSize)
                outcome.reports.append(report)
                guard let event = host.receive(report) else { continue }
                #expect(event != .error, "the device framed a report badly")
                if case .message(_, .error, let payload) = event {
                    #expect(payload.count == 1, "an error reply carries one byte")
                    #expect(report[4] == 0xBF)
                }
                outcome.events.append(event)
            case .deliver:
                outcome.delivered.append(action)
            case .cancel(let channel):
                outcome.cancelled.append(channel)
            case .wink:
                outcome.winks += 1
            case .channelInitialized(let channel):
                outcome.initialized.append(channel)
            }
        }
        #expect(!host.isAssembling, "every call ends its messages")
        return outcome
    }

    /// Writes one raw report.
    mutating func write(report: [UInt8]) -> Outcome {
        read(machine.receive(report: report, now: now))
    }

    /// Writes every report of a message, returning what all of them produced together.
    mutating func send(channel: UInt32, command: UInt8, payload: [UInt8] = []) -> Outcome {
        var actions: [Action] = []
        for report in CTAPHIDPacketizer.fragment(channel: channel, command: command, payload: payload) {
            actions += machine.receive(report: report, now: now)
        }
        return read(actions)
    }

    mutating func send(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8] = []) -> Outcome {
        send(channel: channel, command: command.rawValue, payload: payload)
    }

    mutating func respond(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) -> Outcome {
        read(machine.respond(channel: channel, command: command, payload: payload))
    }

    mutating func keepalive(channel: UInt32, status: KeepaliveStatus) -> Outcome {
        read(machine.keepalive(channel: channel, status: status))
    }

    mutating func tick(advancingBy milliseconds: UInt64) -> Outcome {
        now += milliseconds
        return read(machine.tick(now: now))
    }

    /// Allocates a channel with CTAPHID_INIT on the broadcast CID and returns it.
    mutating func allocateChannel() -> UInt32 {
        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let outcome = send(channel: CTAPHIDConstants.broadcastChannel, command: .initialize, payload: nonce)
        guard case .message(_, .initialize, let payload)? = outcome.event, payload.count == 17 else {
            Issue.record("no INIT response: \(outcome.events)")
            return 0
        }
        return UInt32(bigEndianBytes: payload[8..<12])
    }
}

/// An error reply as the host reads it.
func errorEvent(_ channel: UInt32, _ error: CTAPHIDError) -> Event {
    .message(channel: channel, command: .error, payload: [error.rawValue])
}

/// A payload whose bytes differ from packet to packet, so misplaced bytes are noticed.
func pattern(_ count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8 &+ seed) }
}

/// A raw report: the CID, then `rest`, zero-padded to 64 bytes.
func rawReport(channel: UInt32, _ rest: [UInt8]) -> [UInt8] {
    let report = channel.bigEndianBytes + rest
    return report + [UInt8](repeating: 0, count: max(0, 64 - report.count))
}
