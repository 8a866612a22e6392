// A HID session with CI hooks, driven as a host would with 64-byte reports:
// CTAPHID_INIT's capabilities for a U2F-only key, and the response-stage
// overrides acting on the engine's answer.

import CBOR
import CTAP
import CTAPHID
import Logging
import Synchronization
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

@Suite("HID session overrides")
struct HIDSessionOverrideTests {
    /// What the session sent, and how often it yanked its transport.
    final class Wire: Sendable {
        let reports = Mutex<[[UInt8]]>([])
        let drops = Atomic<Int>(0)
    }

    /// Sends a message and returns the messages that came back once one has
    /// (or nothing after `wait`; generous, as the whole suite runs at once).
    static func exchange(
        _ session: HIDSession,
        outbox: Wire,
        channel: UInt32,
        command: CTAPHIDCommand,
        payload: [UInt8],
        wait: Duration = .seconds(10)
    ) async -> [(CTAPHIDCommand, [UInt8])] {
        let before = outbox.reports.withLock { $0.count }
        for report in CTAPHIDPacketizer.fragment(channel: channel, command: command, payload: payload) {
            await session.receive(report)
        }
        let deadline = ContinuousClock.now + wait
        var messages: [(CTAPHIDCommand, [UInt8])] = []
        while ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
            var assembler = CTAPHIDResponseAssembler()
            messages = []
            for report in outbox.reports.withLock({ Array($0.dropFirst(before)) }) {
                if case .message(_, let command, let payload)? = assembler.receive(report) {
                    messages.append((command, payload))
                }
            }
            if !messages.isEmpty { break }
        }
        return messages
    }

    static func session(
        capabilities: UInt8 = CTAPHIDConstants.capabilityWink | CTAPHIDConstants.capabilityCBOR,
        overrides: OverrideQueue,
        outbox: Wire
    ) throws -> HIDSession {
        let authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: [UInt8](repeating: 1, count: 16)),
            store: MemoryCredentialStore(),
            presence: FixedPresence(.approved),
            clock: ManualClock()
        )
        let hooks = SessionHooks(
            overrides: overrides,
            applied: { _, _ in },
            drop: { outbox.drops.add(1, ordering: .relaxed) }
        )
        return HIDSession(
            authenticator: authenticator,
            presence: nil,
            logger: Logger(label: "test"),
            capabilities: capabilities,
            hooks: hooks,
            send: { report in outbox.reports.withLock { $0.append(report) } }
        )
    }

    /// A session with an override queue of its own, and the channel CTAPHID_INIT gave it.
    static func initialized() async throws -> (HIDSession, Wire, OverrideQueue, UInt32) {
        let outbox = Wire()
        let overrides = OverrideQueue()
        let session = try Self.session(overrides: overrides, outbox: outbox)
        let (channel, _) = try await Self.initialize(session, outbox: outbox)
        return (session, outbox, overrides, channel)
    }

    /// CTAPHID_INIT on the broadcast channel: the new channel and the capabilities.
    static func initialize(_ session: HIDSession, outbox: Wire) async throws -> (UInt32, UInt8) {
        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let answers = await exchange(
            session,
            outbox: outbox,
            channel: CTAPHIDConstants.broadcastChannel,
            command: .initialize,
            payload: nonce
        )
        let (command, payload) = try #require(answers.first)
        #expect(command == .initialize)
        #expect(Array(payload.prefix(8)) == nonce)
        let channel = payload[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return (channel, payload[16])
    }
}

extension HIDSessionOverrideTests {
    @Test("a U2F-only session leaves CBOR out of CTAPHID_INIT's capabilities")
    func u2fOnlyCapabilities() async throws {
        let outbox = Wire()
        let full = try Self.session(overrides: OverrideQueue(), outbox: outbox)
        let (_, fullCapabilities) = try await Self.initialize(full, outbox: outbox)
        #expect(fullCapabilities & CTAPHIDConstants.capabilityCBOR != 0)
        let u2fOutbox = Wire()
        let u2f = try Self.session(
            capabilities: CTAPHIDConstants.capabilityWink,
            overrides: OverrideQueue(),
            outbox: u2fOutbox
        )
        let (channel, capabilities) = try await Self.initialize(u2f, outbox: u2fOutbox)
        #expect(capabilities & CTAPHIDConstants.capabilityCBOR == 0)
        let refused = await Self.exchange(u2f, outbox: u2fOutbox, channel: channel, command: .cbor, payload: [0x04])
        #expect(refused.first?.0 == .error, "the machine refuses CBOR the capabilities do not offer")
    }

    @Test("malformed-response answers status 0 with CBOR that does not decode, once")
    func malformed() async throws {
        let (session, outbox, overrides, channel) = try await Self.initialized()
        overrides.add(.malformedResponse, operations: [.getInfo])
        let bad = try #require(
            await Self.exchange(session, outbox: outbox, channel: channel, command: .cbor, payload: [0x04]).first
        )
        #expect(bad.1.first == 0)
        #expect(throws: CBORError.self) { try CBORDecoder().decode(Array(bad.1.dropFirst())) }
        let good = try #require(
            await Self.exchange(session, outbox: outbox, channel: channel, command: .cbor, payload: [0x04]).first
        )
        #expect(good.1.first == 0)
        _ = try CBORDecoder().decode(Array(good.1.dropFirst()))
        #expect(overrides.entries.isEmpty)
    }

    @Test("drop-connection sends nothing and yanks the transport")
    func drop() async throws {
        let (session, outbox, overrides, channel) = try await Self.initialized()
        overrides.add(.dropConnection, operations: [.getInfo])
        let before = outbox.reports.withLock { $0.count }
        for report in CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: [0x04]) {
            await session.receive(report)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while outbox.drops.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(outbox.drops.load(ordering: .relaxed) == 1)
        // KEEPALIVEs may have gone out while the engine worked; no message did.
        var assembler = CTAPHIDResponseAssembler()
        for report in outbox.reports.withLock({ Array($0.dropFirst(before)) }) {
            if case .message? = assembler.receive(report) { Issue.record("a message was sent after the drop") }
        }
    }
}
