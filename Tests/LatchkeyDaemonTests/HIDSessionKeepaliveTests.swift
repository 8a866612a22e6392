// KEEPALIVE as a host sees it on the wire while the key takes its time: a
// CTAP2-capable key says "still working" every 100 ms, a U2F-only key says
// nothing until it answers (Chromium gives up on a U2F-only key that sends one).

import CTAP
import CTAPHID
import Logging
import Synchronization
import Testing

@testable import LatchkeyDaemon

@Suite("HID session keepalives")
struct HIDSessionKeepaliveTests {
    /// Presence that answers after `delay`, as a person touching late.
    struct SlowPresence: UserPresence {
        var delay: Duration
        func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome {
            try? await Task.sleep(for: delay)
            return .approved
        }
    }

    /// A session whose presence takes 450 ms: four or more keepalive periods.
    static func slowSession(capabilities: UInt8, outbox: HIDSessionOverrideTests.Wire) throws -> HIDSession {
        let aaguid = [UInt8](repeating: 1, count: 16)
        let identity = try AttestationIdentity.generate(
            aaguid: aaguid, entropy: DeterministicEntropy(seed: Array("identity".utf8)), now: 1_790_000_000
        )
        let authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: aaguid, attestationIdentity: identity, u2fEnabled: true),
            store: MemoryCredentialStore(),
            presence: SlowPresence(delay: .milliseconds(450)),
            clock: ManualClock()
        )
        return HIDSession(
            authenticator: authenticator, presence: nil, logger: Logger(label: "test"),
            capabilities: capabilities,
            send: { report in outbox.reports.withLock { $0.append(report) } }
        )
    }

    /// U2F REGISTER as an extended-length APDU: challenge and application parameter.
    static let register: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40]
        + [UInt8](repeating: 0x11, count: 32) + [UInt8](repeating: 0x22, count: 32) + [0x00, 0x00]

    /// Registers through CTAPHID_MSG; the KEEPALIVEs and the answer the host read.
    static func registerSlowly(capabilities: UInt8) async throws -> (keepalives: Int, answer: [UInt8]?) {
        let outbox = HIDSessionOverrideTests.Wire()
        let session = try slowSession(capabilities: capabilities, outbox: outbox)
        let (channel, _) = try await HIDSessionOverrideTests.initialize(session, outbox: outbox)
        let before = outbox.reports.withLock { $0.count }
        let answers = await HIDSessionOverrideTests.exchange(
            session, outbox: outbox, channel: channel, command: .msg, payload: register
        )
        var keepalives = 0
        var assembler = CTAPHIDResponseAssembler()
        for report in outbox.reports.withLock({ Array($0.dropFirst(before)) }) {
            if case .keepalive? = assembler.receive(report) { keepalives += 1 }
        }
        let answer = answers.first { $0.0 == .msg }?.1
        return (keepalives, answer)
    }

    @Test("a U2F-only key sends no KEEPALIVE while a slow U2F REGISTER waits, then answers")
    func u2fOnlySilent() async throws {
        let (keepalives, answer) = try await Self.registerSlowly(capabilities: CTAPHIDConstants.capabilityWink)
        #expect(keepalives == 0)
        #expect(Array(try #require(answer).suffix(2)) == [0x90, 0x00])
    }

    @Test("a CTAP2 key sends KEEPALIVE while the same slow U2F REGISTER waits")
    func ctap2KeepsAlive() async throws {
        let (keepalives, answer) = try await Self.registerSlowly(
            capabilities: CTAPHIDConstants.capabilityWink | CTAPHIDConstants.capabilityCBOR
        )
        #expect(keepalives >= 2)
        #expect(Array(try #require(answer).suffix(2)) == [0x90, 0x00])
    }
}
