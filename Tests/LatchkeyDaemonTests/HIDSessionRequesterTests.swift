// The HID session runs each engine request with `Requester.current` bound to
// what its transport said about who asks, so that whoever the engine asks for
// presence (the broker, its prompts) can name the requester.

import CBOR
import CTAP
import CTAPHID
import Logging
import Synchronization
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

/// Presence that approves and remembers the requester bound when it was asked.
private final class RecordingPresence: UserPresence {
    let seen = Mutex<[Requester?]>([])

    func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome {
        let requester = Requester.current
        seen.withLock { $0.append(requester) }
        return .approved
    }
}

@Suite("HID session requester")
struct HIDSessionRequesterTests {
    @Test("each engine request sees the transport's requester; a session without one binds none")
    func bound() async throws {
        let presence = RecordingPresence()
        let authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: [UInt8](repeating: 1, count: 16), attestation: .none),
            store: MemoryCredentialStore(), presence: presence, clock: ManualClock()
        )
        let requester = Requester(
            transport: .usbip, caller: Caller(uid: 1002, pid: 4242), executable: "/usr/bin/chromium",
            address: "127.0.0.1:45678"
        )
        let makeCredential = [UInt8]([0x01]) + CBORValue.intMap([
            (1, .bytes([UInt8](repeating: 1, count: 32))),
            (2, .textMap([("id", "example.com")])),
            (3, .textMap([("id", .bytes([1])), ("name", "user")])),
            (4, .array([.textMap([("alg", -7), ("type", "public-key")])])),
        ]).encoded()
        for bound in [requester, nil] {
            let outbox = HIDSessionOverrideTests.Wire()
            let session = HIDSession(
                authenticator: authenticator, presence: nil, logger: Logger(label: "test"),
                requester: bound.map { value in { @Sendable in value } }
            ) { report in outbox.reports.withLock { $0.append(report) } }
            let (channel, _) = try await HIDSessionOverrideTests.initialize(session, outbox: outbox)
            let answers = await HIDSessionOverrideTests.exchange(
                session, outbox: outbox, channel: channel, command: .cbor, payload: makeCredential
            )
            #expect(answers.first?.1.first == 0)
        }
        #expect(presence.seen.withLock { $0 } == [requester, nil])
    }
}
