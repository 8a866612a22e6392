// The whole HID path in-process: a host fragments requests into 64-byte
// reports, the CTAPHID state machine reassembles them and hands complete
// messages to the engine, and the host reassembles the answer. This is what
// the daemon does, minus the file descriptor.

import CBOR
import CTAPHID
import Synchronization
import Testing

@testable import CTAP

/// Presence that waits until the test or a CANCEL answers it.
final class PendingPresence: UserPresence {
    private let waiting = Mutex<[CheckedContinuation<PresenceOutcome, Never>]>([])
    private let asked = Mutex(0)

    var count: Int { asked.withLock { $0 } }

    func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0.append(continuation) }
            asked.withLock { $0 += 1 }
        }
    }

    /// Answers every outstanding request; returns how many there were.
    @discardableResult
    func answer(_ outcome: PresenceOutcome) -> Int {
        let pending = waiting.withLock { list in
            defer { list.removeAll() }
            return list
        }
        for continuation in pending { continuation.resume(returning: outcome) }
        return pending.count
    }
}

/// A device: the state machine in front of an authenticator, driven like the daemon drives it.
actor LoopbackDevice {
    var machine = CTAPHIDStateMachine(configuration: .init())
    let authenticator: Authenticator
    let presence: PendingPresence?
    /// The transport connection's number in the engine's request origins.
    let connection: UInt64
    var now: UInt64 = 0
    var toHost: [[UInt8]] = []
    var engineTask: Task<Void, Never>?

    init(authenticator: Authenticator, presence: PendingPresence? = nil, connection: UInt64 = 1) {
        self.authenticator = authenticator
        self.presence = presence
        self.connection = connection
    }

    /// One output report from the host.
    func receive(_ report: [UInt8]) {
        perform(machine.receive(report: report, now: now))
    }

    private func perform(_ actions: [CTAPHIDStateMachine.Action]) {
        for action in actions {
            switch action {
            case .send(let report):
                #expect(report.count == 64)
                toHost.append(report)
            case .deliver(let channel, let command, let payload):
                // After whatever the engine still does for this device (a
                // conversation ending), as the daemon runs both in one task.
                engineTask = Task { [previous = engineTask] in
                    await previous?.value
                    await self.run(channel: channel, command: command, payload: payload)
                }
            case .cancel:
                presence?.answer(.cancelled)
            case .wink:
                break
            case .channelInitialized(let channel):
                let origin = RequestOrigin(connection: connection, channel: channel)
                engineTask = Task { [previous = engineTask] in
                    await previous?.value
                    await self.authenticator.endConversation(origin)
                }
            }
        }
    }

    /// The transport went away: its conversations end.
    func disconnect() async {
        await authenticator.endConversations(connection: connection)
    }

    private func run(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) async {
        let origin = RequestOrigin(connection: connection, channel: channel)
        let response: [UInt8]
        switch command {
        case .cbor: response = await authenticator.handleCBOR(payload, from: origin)
        default: response = await authenticator.handleAPDU(payload, from: origin)
        }
        perform(machine.respond(channel: channel, command: command, payload: response))
    }

    /// Waits for the engine to finish the request it holds.
    func settle() async { await engineTask?.value }

    func drain() -> [[UInt8]] {
        defer { toHost.removeAll() }
        return toHost
    }
}

/// The host side: fragments, sends, reassembles.
struct Host {
    let device: LoopbackDevice

    func send(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) async {
        for report in CTAPHIDPacketizer.fragment(channel: channel, command: command, payload: payload) {
            await device.receive(report)
        }
    }

    func responses() async -> [CTAPHIDResponseAssembler.Event] {
        await device.settle()
        var assembler = CTAPHIDResponseAssembler()
        return await device.drain().compactMap { assembler.receive($0) }
    }

    func transact(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) async throws -> [UInt8] {
        await send(channel: channel, command: command, payload: payload)
        let events = await responses().filter { if case .keepalive = $0 { false } else { true } }
        try #require(events.count == 1)
        guard case .message(let responseChannel, let responseCommand, let response) = events[0] else {
            Issue.record("not a message: \(events[0])")
            return []
        }
        #expect(responseChannel == channel)
        #expect(responseCommand == command)
        return response
    }

    func allocateChannel() async throws -> UInt32 {
        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let response = try await transact(channel: 0xFFFF_FFFF, command: .initialize, payload: nonce)
        try #require(response.count == 17)
        #expect(Array(response.prefix(8)) == nonce)
        return response[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }
}

@Suite("HID end to end, in process")
struct HIDEndToEndTests {
    @Test("getInfo, makeCredential and getAssertion through 64-byte reports; assertions verify")
    func ctap2OverHID() async throws {
        let key = TestKey()
        let host = Host(device: LoopbackDevice(authenticator: key.authenticator))
        let channel = try await host.allocateChannel()

        let info = try await host.transact(channel: channel, command: .cbor, payload: [CTAPCommand.getInfo.rawValue])
        #expect(info.first == 0)
        #expect(try CBORDecoder().decode(Array(info.dropFirst())).mapValue()[int: 3] == .bytes(testAAGUID))

        // A request that needs many continuation packets: 40 excluded IDs.
        var create = MakeCredentialBuilder()
        create.excludeList = (0..<40).map { Array(repeating: UInt8($0), count: 63) }
        create.algorithms = [-8]
        let createRequest = [CTAPCommand.makeCredential.rawValue] + create.cbor.encoded()
        #expect(createRequest.count > 2000)
        let createResponse = try await host.transact(channel: channel, command: .cbor, payload: createRequest)
        #expect(createResponse.first == 0)
        let made = try MadeCredential(
            response: try CBORDecoder().decode(Array(createResponse.dropFirst())), clientDataHash: create.clientDataHash
        )

        var get = GetAssertionBuilder()
        get.allowList = [made.credentialId]
        let getResponse = try await host.transact(
            channel: channel, command: .cbor, payload: [CTAPCommand.getAssertion.rawValue] + get.cbor.encoded()
        )
        #expect(getResponse.first == 0)
        let assertion = try Assertion(try CBORDecoder().decode(Array(getResponse.dropFirst())).mapValue())
        #expect(opensslVerify(spki: made.publicKeySPKI, signature: assertion.signature, message: assertion.authData + get.clientDataHash))
    }

    @Test("U2F over CTAPHID_MSG and a maximal PING")
    func u2fAndPing() async throws {
        let key = TestKey()
        let host = Host(device: LoopbackDevice(authenticator: key.authenticator))
        let channel = try await host.allocateChannel()
        let version = try await host.transact(channel: channel, command: .msg, payload: apdu(ins: 0x03))
        #expect(version == Array("U2F_V2".utf8) + [0x90, 0x00])
        let ping = (0..<7609).map { UInt8(truncatingIfNeeded: $0 * 7) }
        #expect(try await host.transact(channel: channel, command: .ping, payload: ping) == ping)
    }

    @Test("CTAPHID_CANCEL while waiting for a touch answers CTAP2_ERR_KEEPALIVE_CANCEL and creates nothing")
    func cancelWhileWaiting() async throws {
        let presence = PendingPresence()
        let store = MemoryCredentialStore()
        let authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: testAAGUID, attestation: .none),
            store: store, presence: presence, clock: ManualClock(), entropy: DeterministicEntropy(seed: [1])
        )
        let device = LoopbackDevice(authenticator: authenticator, presence: presence)
        let host = Host(device: device)
        let channel = try await host.allocateChannel()
        let other = try await host.allocateChannel()
        let create = MakeCredentialBuilder(rk: true)
        await host.send(channel: channel, command: .cbor, payload: [0x01] + create.cbor.encoded())
        while presence.count == 0 { await Task.yield() }
        #expect(await device.machine.busyChannel == channel)

        // Another channel is told the device is busy.
        await device.receive(CTAPHIDPacketizer.fragment(channel: other, command: .cbor, payload: [0x04])[0])

        await device.receive(CTAPHIDPacketizer.fragment(channel: channel, command: .cancel, payload: [])[0])
        let events = await host.responses()
        let messages = events.compactMap { event -> (UInt32, CTAPHIDCommand, [UInt8])? in
            if case .message(let c, let command, let payload) = event { return (c, command, payload) }
            return nil
        }
        #expect(messages.contains { $0.0 == other && $0.1 == .error && $0.2 == [0x06] }, "ERR_CHANNEL_BUSY")
        #expect(messages.contains { $0.0 == channel && $0.1 == .cbor && $0.2 == [CTAPStatus.keepaliveCancel.rawValue] })
        #expect(try store.credentialCount() == 0)
        #expect(await device.machine.busyChannel == nil)
    }

    @Test("two channels through 64-byte reports: each getNextAssertion continues its own sequence; INIT ends one")
    func twoChannels() async throws {
        let key = TestKey()
        try await key.makeAccounts(2)
        let device = LoopbackDevice(authenticator: key.authenticator)
        let host = Host(device: device)
        let first = try await host.allocateChannel()
        let second = try await host.allocateChannel()
        let getAssertion = [CTAPCommand.getAssertion.rawValue] + GetAssertionBuilder().cbor.encoded()
        let next = [CTAPCommand.getNextAssertion.rawValue]
        func status(_ channel: UInt32, _ request: [UInt8]) async throws -> CTAPStatus {
            CTAPStatus(rawValue: try #require(try await host.transact(channel: channel, command: .cbor, payload: request).first))
        }
        #expect(try await status(first, getAssertion) == .ok)
        #expect(try await status(second, next) == .notAllowed, "nothing of the first channel's")
        #expect(try await status(second, getAssertion) == .ok)
        #expect(try await status(first, next) == .ok)
        #expect(try await status(first, next) == .notAllowed)
        // CTAPHID_INIT on the second channel re-syncs it: its sequence is over.
        let nonce: [UInt8] = [8, 7, 6, 5, 4, 3, 2, 1]
        #expect(try await host.transact(channel: second, command: .initialize, payload: nonce).prefix(8) == nonce[...])
        #expect(try await status(second, next) == .notAllowed)
        // A new connection numbers its channels from 1 again, without the old sequences.
        #expect(try await status(first, getAssertion) == .ok)
        await device.disconnect()
        let reconnected = Host(device: LoopbackDevice(authenticator: key.authenticator, connection: 2))
        #expect(try await reconnected.allocateChannel() == first)
        #expect(try await reconnected.transact(channel: first, command: .cbor, payload: next) == [CTAPStatus.notAllowed.rawValue])
    }
}
