// A continuation packet counts from when it came in, not from when a busy
// daemon got to it: the session's timer expires no deadline while a report
// waits in the transport's queue, and the machine sees the report's arrival
// time.

import CTAP
import CTAPHID
import Logging
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

@Suite("HID session report arrival")
struct HIDSessionArrivalTests {
    typealias Wire = HIDSessionOverrideTests.Wire

    /// A PING of two packets whose continuation came in at once but is handed
    /// over later than the continuation timeout (with the timer ticking
    /// meanwhile): the echo comes back, not ERR_MSG_TIMEOUT.
    @Test func aQueuedContinuationIsNotTimedOut() async throws {
        let outbox = Wire()
        let session = try HIDSessionOverrideTests.session(overrides: OverrideQueue(), outbox: outbox)
        let (channel, _) = try await HIDSessionOverrideTests.initialize(session, outbox: outbox)
        let payload = (0..<100).map { UInt8($0) }
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .ping, payload: payload)
        #expect(reports.count == 2)
        let before = outbox.reports.withLock { $0.count }
        await session.receive(reports[0])
        let arrivedAt = session.arrival()  // taken in by the transport's reader, still queued
        try await Task.sleep(for: .milliseconds(Int64(HIDSession.continuationTimeout) + 500))
        await session.receive(reports[1], arrivedAt: arrivedAt)
        var answers: [(CTAPHIDCommand, [UInt8])] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while answers.isEmpty, ContinuousClock.now < deadline {
            let sent = outbox.reports.withLock { Array($0.dropFirst(before)) }
            answers = Self.messages(sent)
            if answers.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        }
        let (command, echo) = try #require(answers.first)
        #expect(command == .ping)
        #expect(echo == payload)
    }

    /// Without a report waiting, the deadline still expires on the timer:
    /// ERR_MSG_TIMEOUT once the continuation is later than the timeout.
    @Test func aMissingContinuationStillTimesOut() async throws {
        let outbox = Wire()
        let session = try HIDSessionOverrideTests.session(overrides: OverrideQueue(), outbox: outbox)
        let (channel, _) = try await HIDSessionOverrideTests.initialize(session, outbox: outbox)
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .ping, payload: [UInt8](repeating: 7, count: 100))
        let before = outbox.reports.withLock { $0.count }
        await session.receive(reports[0])
        var answers: [(CTAPHIDCommand, [UInt8])] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while answers.isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            let sent = outbox.reports.withLock { Array($0.dropFirst(before)) }
            answers = Self.messages(sent)
        }
        let (command, error) = try #require(answers.first)
        #expect(command == .error)
        #expect(error == [CTAPHIDError.messageTimeout.rawValue])
    }

    static func messages(_ reports: [[UInt8]]) -> [(CTAPHIDCommand, [UInt8])] {
        var assembler = CTAPHIDResponseAssembler()
        return reports.compactMap { report in
            if case .message(_, let command, let payload)? = assembler.receive(report) { return (command, payload) }
            return nil
        }
    }
}
