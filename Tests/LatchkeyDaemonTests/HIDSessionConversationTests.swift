// The HID session hands the engine each request's origin: its connection
// and channel. Two channels of one connection, and the same channel number
// on a new connection (a USB/IP import, a uhid device opened again), never
// continue each other's getAssertion sequence; CTAPHID_INIT on a channel
// ends its own.

import CBOR
import CTAP
import CTAPHID
import Logging
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

@Suite("HID session conversations")
struct HIDSessionConversationTests {
    typealias Wire = HIDSessionOverrideTests.Wire

    /// A key with three discoverable credentials for example.com.
    static func key() async throws -> Authenticator {
        let authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: [UInt8](repeating: 1, count: 16), attestation: .none),
            store: MemoryCredentialStore(),
            presence: FixedPresence(.approved),
            clock: ManualClock()
        )
        for index in 0..<3 {
            let request: CBORValue = .intMap([
                (1, .bytes([UInt8](repeating: 1, count: 32))),
                (2, .textMap([("id", "example.com")])),
                (3, .textMap([("id", .bytes([UInt8(index)])), ("name", .text("user\(index)"))])),
                (4, .array([.textMap([("alg", -7), ("type", "public-key")])])),
                (7, .textMap([("rk", true)])),
            ])
            #expect(await authenticator.handleCBOR([0x01] + request.encoded()).first == 0)
        }
        return authenticator
    }

    /// A HID session over `authenticator` and what it sent: one transport connection.
    struct Link {
        let session: HIDSession
        let outbox = Wire()

        init(_ authenticator: Authenticator) {
            let outbox = self.outbox
            session = HIDSession(authenticator: authenticator, presence: nil, logger: Logger(label: "test")) { report in
                outbox.reports.withLock { $0.append(report) }
            }
        }

        /// CTAPHID_INIT on the broadcast channel: a new channel.
        func open() async throws -> UInt32 {
            try await HIDSessionOverrideTests.initialize(session, outbox: outbox).0
        }

        /// A CTAP2 request on `channel`; the status byte of the answer.
        func status(_ channel: UInt32, _ request: [UInt8]) async throws -> UInt8 {
            let answers = await HIDSessionOverrideTests.exchange(
                session, outbox: outbox, channel: channel, command: .cbor, payload: request
            )
            let (command, payload) = try #require(answers.first)
            #expect(command == .cbor)
            return try #require(payload.first)
        }
    }

    /// A connection with two channels, each in a getAssertion sequence of its own.
    static func twoSequences() async throws -> (Link, first: UInt32, second: UInt32) {
        let link = Link(try await key())
        let (first, second) = (try await link.open(), try await link.open())
        #expect(try await link.status(first, getAssertion) == ok)
        #expect(try await link.status(second, getAssertion) == ok)
        return (link, first, second)
    }

    static let getAssertion = [UInt8](
        [0x02] + CBORValue.intMap([(1, "example.com"), (2, .bytes([UInt8](repeating: 2, count: 32)))]).encoded()
    )
    static let next: [UInt8] = [0x08]
    static let ok: UInt8 = 0x00
    static let notAllowed: UInt8 = 0x30

    @Test("two channels of one connection: getNextAssertion continues only its own channel's sequence")
    func twoChannels() async throws {
        let link = Link(try await Self.key())
        let (first, second) = (try await link.open(), try await link.open())
        #expect(try await link.status(first, Self.getAssertion) == Self.ok)
        #expect(try await link.status(second, Self.next) == Self.notAllowed)
        #expect(try await link.status(first, Self.next) == Self.ok)
        #expect(try await link.status(second, Self.getAssertion) == Self.ok)
        #expect(try await link.status(first, Self.next) == Self.ok, "its third")
        #expect(try await link.status(first, Self.next) == Self.notAllowed)
        #expect(try await link.status(second, Self.next) == Self.ok)
    }

    @Test("a new connection, or the transport opened again, starts at channel 1 without the old sequence")
    func newConnection() async throws {
        let key = try await Self.key()
        let old = Link(key)
        let channel = try await old.open()
        #expect(try await old.status(channel, Self.getAssertion) == Self.ok)
        await old.session.close()

        let new = Link(key)
        let again = try await new.open()
        #expect(again == channel, "channel numbers start over on a new connection")
        #expect(try await new.status(again, Self.next) == Self.notAllowed)

        // uhid: CLOSE, then OPEN again, is a new connection too.
        #expect(try await new.status(again, Self.getAssertion) == Self.ok)
        await new.session.close()
        await new.session.reopen()
        let reopened = try await new.open()
        #expect(reopened == channel)
        #expect(try await new.status(reopened, Self.next) == Self.notAllowed)
    }

    @Test("CTAPHID_INIT on a channel ends its sequence, not another channel's")
    func resync() async throws {
        let (link, first, second) = try await Self.twoSequences()
        let answers = await HIDSessionOverrideTests.exchange(
            link.session, outbox: link.outbox, channel: first, command: .initialize, payload: [9, 9, 9, 9, 9, 9, 9, 9]
        )
        #expect(answers.first?.0 == .initialize)
        #expect(try await link.status(first, Self.next) == Self.notAllowed)
        #expect(try await link.status(second, Self.next) == Self.ok)
    }

    @Test("many new channels neither end another channel's sequence nor escape a re-synced one's end")
    func manyChannels() async throws {
        let (link, first, second) = try await Self.twoSequences()
        _ = await HIDSessionOverrideTests.exchange(
            link.session, outbox: link.outbox, channel: second, command: .initialize, payload: [7, 7, 7, 7, 7, 7, 7, 7]
        )
        // More channels than the session tracks: some are ended at once, in no order.
        for _ in 0..<(HIDSession.maxInitializedChannels + 8) { _ = try await link.open() }
        #expect(try await link.status(first, Self.next) == Self.ok, "nobody re-synced the first channel")
        #expect(try await link.status(second, Self.next) == Self.notAllowed)
    }
}
