// Behaviour of the CTAPHID state machine, one test per rule of CTAP 2.1 §11.2.

import Testing

@testable import CTAPHID

private let broadcast = CTAPHIDConstants.broadcastChannel

@Suite("CTAPHID channels and INIT")
struct ChannelTests {
    @Test("INIT on the broadcast channel allocates channels sequentially from 1")
    func initAllocates() {
        let configuration = CTAPHIDStateMachine.Configuration(
            deviceVersion: .init(major: 3, minor: 4, build: 5),
            capabilities: 0x05
        )
        var harness = HostHarness(configuration: configuration)
        for expected: UInt32 in 1...3 {
            let nonce: [UInt8] = [0xCA, 0x4F, 0x34, 0x1A, 0x10, 0x96, 0xF2, UInt8(expected)]
            let outcome = harness.send(channel: broadcast, command: .initialize, payload: nonce)
            let payload = nonce + expected.bigEndianBytes + [2, 3, 4, 5, 0x05]
            #expect(outcome.event == .message(channel: broadcast, command: .initialize, payload: payload))
            #expect(outcome.reports.first?[4] == 0x86)
            #expect(outcome.delivered.isEmpty)
        }
    }

    @Test("INIT tells the layers above that a channel starts a new conversation: allocated or re-synced")
    func initStartsConversation() {
        var harness = HostHarness()
        let allocated = harness.send(channel: broadcast, command: .initialize, payload: pattern(8))
        #expect(allocated.initialized == [1], "a new channel: nothing of an earlier client may reach it")
        let other = harness.allocateChannel()
        #expect(harness.send(channel: 1, command: .cbor, payload: [0x08]).delivered.count == 1)
        let resync = harness.send(channel: 1, command: .initialize, payload: pattern(8))
        #expect(resync.cancelled == [1])
        #expect(resync.initialized == [1], "re-synchronized: its conversation is over")
        // Other commands, other channels and refused INITs start nothing.
        #expect(harness.send(channel: other, command: .ping, payload: [1]).initialized.isEmpty)
        #expect(harness.send(channel: other, command: .initialize, payload: pattern(7)).initialized.isEmpty)
        #expect(harness.send(channel: 99, command: .initialize, payload: pattern(8)).initialized.isEmpty)
    }

    @Test("INIT with a length other than 8 is ERR_INVALID_LEN", arguments: [0, 7, 9, 17, 100])
    func initWrongLength(length: Int) {
        var harness = HostHarness()
        let outcome = harness.send(channel: broadcast, command: .initialize, payload: pattern(length))
        #expect(outcome.events == [errorEvent(broadcast, .invalidLength)])
        // Nothing was allocated.
        #expect(harness.allocateChannel() == 1)
    }

    @Test("INIT on an allocated channel re-syncs it and answers with the same CID")
    func initResyncs() {
        var harness = HostHarness()
        _ = harness.allocateChannel()
        let channel = harness.allocateChannel()
        let nonce = pattern(8, seed: 9)
        let outcome = harness.send(channel: channel, command: .initialize, payload: nonce)
        let payload = nonce + channel.bigEndianBytes + [2, 0, 1, 0, 0x05]
        #expect(outcome.event == .message(channel: channel, command: .initialize, payload: payload))
        #expect(harness.allocateChannel() == 3)
    }

    @Test("INIT on a channel drops its partial message")
    func initDropsPartialMessage() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: pattern(200))
        #expect(harness.write(report: reports[0]).events.isEmpty)
        let resync = harness.send(channel: channel, command: .initialize, payload: pattern(8))
        #expect(resync.events.count == 1)
        #expect(resync.cancelled.isEmpty)
        // The rest of the old message is now spurious and ignored.
        for report in reports.dropFirst() {
            let outcome = harness.write(report: report)
            #expect(outcome.events.isEmpty && outcome.delivered.isEmpty)
        }
        #expect(harness.machine.nextDeadline == nil)
    }

    @Test("INIT on the busy channel cancels its request and a late respond is dropped")
    func initCancelsBusyChannel() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        #expect(harness.send(channel: channel, command: .cbor, payload: [0x04]).delivered.count == 1)
        #expect(harness.machine.busyChannel == channel)
        let outcome = harness.send(channel: channel, command: .initialize, payload: pattern(8))
        #expect(outcome.cancelled == [channel])
        #expect(outcome.events.count == 1)
        #expect(harness.machine.busyChannel == nil)
        #expect(harness.respond(channel: channel, command: .cbor, payload: [0x2D]).reports.isEmpty)
        // The channel is idle and takes a new request.
        #expect(harness.send(channel: channel, command: .cbor, payload: [0x04]).delivered.count == 1)
    }

    @Test("INIT is answered while another channel's request is processed")
    func initWhileBusy() {
        var harness = HostHarness()
        let first = harness.allocateChannel()
        #expect(harness.send(channel: first, command: .cbor, payload: [0x01]).delivered.count == 1)
        #expect(harness.allocateChannel() == 2)
        #expect(harness.machine.busyChannel == first)
        let resync = harness.send(channel: 2, command: .initialize, payload: pattern(8))
        #expect(resync.cancelled.isEmpty && resync.events.count == 1)
        #expect(harness.machine.busyChannel == first)
    }

    @Test("INIT is answered while another channel is sending a message, which continues unharmed")
    func initWhileReceiving() {
        var harness = HostHarness()
        let first = harness.allocateChannel()
        let payload = pattern(300)
        let reports = CTAPHIDPacketizer.fragment(channel: first, command: .ping, payload: payload)
        _ = harness.write(report: reports[0])
        #expect(harness.allocateChannel() == 2)
        var actions: [Action] = []
        for report in reports.dropFirst() {
            actions += harness.machine.receive(report: report, now: harness.now)
        }
        #expect(harness.read(actions).event == .message(channel: first, command: .ping, payload: payload))
    }

    @Test(
        "a message on channel 0 or an unallocated channel is ERR_INVALID_CHANNEL",
        arguments: [UInt32(0), 2, 0x1234_5678, 0xFFFF_FFFE]
    )
    func invalidChannel(channel: UInt32) {
        var harness = HostHarness()
        _ = harness.allocateChannel()
        for command in [CTAPHIDCommand.cbor, .msg, .ping, .wink, .lock, .initialize] {
            let outcome = harness.send(channel: channel, command: command, payload: pattern(8))
            #expect(outcome.events == [errorEvent(channel, .invalidChannel)])
        }
    }

    @Test("only INIT may use the broadcast channel", arguments: [CTAPHIDCommand.cbor, .msg, .ping, .wink, .lock])
    func broadcastOnlyInit(command: CTAPHIDCommand) {
        var harness = HostHarness()
        _ = harness.allocateChannel()
        let outcome = harness.send(channel: broadcast, command: command, payload: [1])
        #expect(outcome.events == [errorEvent(broadcast, .invalidChannel)])
    }

    @Test("channel allocation wraps around without handing out 0 or the broadcast CID")
    func allocationWraps() {
        var harness = HostHarness()
        harness.machine.lastAllocatedChannel = 0xFFFF_FFFD
        #expect(harness.allocateChannel() == 0xFFFF_FFFE)
        #expect(harness.allocateChannel() == 1)
        // Every CID is allocated once the counter has wrapped.
        #expect(harness.send(channel: 0x8000_0000, command: .ping, payload: [7]).events.count == 1)
        #expect(harness.send(channel: 0, command: .ping).events == [errorEvent(0, .invalidChannel)])
    }
}

@Suite("CTAPHID commands")
struct CommandTests {
    @Test("PING echoes its payload", arguments: [0, 1, 56, 57, 58, 59, 116, 117, 1000, 7609])
    func pingEchoes(size: Int) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let payload = pattern(size, seed: size)
        let outcome = harness.send(channel: channel, command: .ping, payload: payload)
        #expect(outcome.event == .message(channel: channel, command: .ping, payload: payload))
        #expect(outcome.reports.count == CTAPHIDPacketizer.reportCount(payloadSize: size))
        #expect(harness.machine.busyChannel == nil)
    }

    @Test("WINK answers with an empty WINK and asks the transport to wink")
    func wink() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let outcome = harness.send(channel: channel, command: .wink)
        #expect(outcome.event == .message(channel: channel, command: .wink, payload: []))
        #expect(outcome.winks == 1)
        let actions = harness.machine.receive(
            report: CTAPHIDPacketizer.fragment(channel: channel, command: .wink, payload: [])[0],
            now: 0
        )
        #expect(actions.count == 2)
        #expect(actions.last == .wink)
    }

    @Test("a command the capabilities do not offer is ERR_INVALID_CMD")
    func capabilitiesAreHonoured() {
        var harness = HostHarness(configuration: .init(capabilities: CTAPHIDConstants.capabilityNMSG))
        let channel = harness.allocateChannel()
        for command in [CTAPHIDCommand.wink, .cbor, .msg] {
            let outcome = harness.send(channel: channel, command: command, payload: [1])
            #expect(outcome.events == [errorEvent(channel, .invalidCommand)])
            #expect(outcome.winks == 0 && outcome.delivered.isEmpty)
        }
        #expect(harness.send(channel: channel, command: .ping, payload: [1]).events.count == 1)
    }

    @Test("MSG and CBOR requests are delivered to the engine and make the channel busy")
    func deliverAndRespond() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        for command in [CTAPHIDCommand.msg, .cbor] {
            let request = pattern(70, seed: Int(command.rawValue))
            let outcome = harness.send(channel: channel, command: command, payload: request)
            #expect(outcome.delivered == [.deliver(channel: channel, command: command, payload: request)])
            #expect(outcome.events.isEmpty)
            #expect(harness.machine.busyChannel == channel)
            let answer = pattern(90)
            let response = harness.respond(channel: channel, command: command, payload: answer)
            #expect(response.event == .message(channel: channel, command: command, payload: answer))
            #expect(harness.machine.busyChannel == nil)
        }
    }

    @Test(
        "an unknown command is ERR_INVALID_CMD",
        arguments: [UInt8(0x00), 0x02, 0x05, 0x12, 0x3B, 0x3F, 0x40, 0x50, 0x7F]
    )
    func unknownCommand(command: UInt8) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let outcome = harness.send(channel: channel, command: command, payload: [1, 2, 3])
        #expect(outcome.events == [errorEvent(channel, .invalidCommand)])
        #expect(outcome.reports[0][4] == 0xBF)
        #expect(outcome.reports[0][5...6] == [0, 1])
        #expect(harness.machine.busyChannel == nil)
    }

    @Test("a multi-packet message with an unknown command is rejected once and its continuations ignored")
    func unknownCommandMultiPacket() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let outcome = harness.send(channel: channel, command: 0x55, payload: pattern(500))
        #expect(outcome.events == [errorEvent(channel, .invalidCommand)])
    }
}

@Suite("CTAPHID LOCK")
struct LockTests {
    @Test("LOCK gives one channel exclusive access; other channels get ERR_CHANNEL_BUSY")
    func lockExcludesOthers() {
        var harness = HostHarness()
        let holder = harness.allocateChannel()
        let other = harness.allocateChannel()
        let lock = harness.send(channel: holder, command: .lock, payload: [5])
        #expect(lock.event == .message(channel: holder, command: .lock, payload: []))
        #expect(harness.send(channel: other, command: .ping, payload: [1]).events == [errorEvent(other, .channelBusy)])
        #expect(harness.send(channel: other, command: .cbor, payload: [4]).events == [errorEvent(other, .channelBusy)])
        let initialize = harness.send(channel: broadcast, command: .initialize, payload: pattern(8))
        #expect(initialize.events == [errorEvent(broadcast, .channelBusy)])
        #expect(harness.send(channel: holder, command: .ping, payload: [1]).events.count == 1)
        #expect(harness.send(channel: holder, command: .cbor, payload: [4]).delivered.count == 1)
    }

    @Test("LOCK with 0 seconds releases the lock")
    func lockZeroReleases() {
        var harness = HostHarness()
        let holder = harness.allocateChannel()
        let other = harness.allocateChannel()
        _ = harness.send(channel: holder, command: .lock, payload: [10])
        #expect(harness.machine.nextDeadline == 10_000)
        let release = harness.send(channel: holder, command: .lock, payload: [0])
        #expect(release.event == .message(channel: holder, command: .lock, payload: []))
        #expect(harness.machine.nextDeadline == nil)
        #expect(harness.send(channel: other, command: .ping, payload: [1]).event?.isError == false)
    }

    @Test("a lock expires at its deadline")
    func lockExpires() {
        var harness = HostHarness()
        let holder = harness.allocateChannel()
        let other = harness.allocateChannel()
        harness.now = 500
        _ = harness.send(channel: holder, command: .lock, payload: [2])
        #expect(harness.machine.nextDeadline == 2500)
        #expect(harness.tick(advancingBy: 1999).events.isEmpty)
        #expect(harness.send(channel: other, command: .ping).events == [errorEvent(other, .channelBusy)])
        #expect(harness.tick(advancingBy: 1).events.isEmpty)
        #expect(harness.machine.nextDeadline == nil)
        #expect(harness.send(channel: other, command: .ping).event?.isError == false)
    }

    @Test("a lock that has expired by the time a report arrives no longer holds")
    func lockExpiresOnReceive() {
        var harness = HostHarness()
        let holder = harness.allocateChannel()
        let other = harness.allocateChannel()
        _ = harness.send(channel: holder, command: .lock, payload: [1])
        harness.now = 1000
        #expect(harness.send(channel: other, command: .ping).event?.isError == false)
    }

    @Test("LOCK over 10 seconds is ERR_INVALID_PAR", arguments: [UInt8(11), 0x80, 0xFF])
    func lockTooLong(seconds: UInt8) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        #expect(
            harness.send(channel: channel, command: .lock, payload: [seconds]).events == [
                errorEvent(channel, .invalidParameter)
            ]
        )
        #expect(harness.machine.nextDeadline == nil)
    }

    @Test("LOCK with other than one byte is ERR_INVALID_LEN", arguments: [0, 2, 60])
    func lockWrongLength(length: Int) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        #expect(
            harness.send(channel: channel, command: .lock, payload: [UInt8](repeating: 1, count: length)).events == [
                errorEvent(channel, .invalidLength)
            ]
        )
    }

    @Test("LOCK from another channel while a request is processed is ERR_CHANNEL_BUSY")
    func lockWhileBusy() {
        var harness = HostHarness()
        let busy = harness.allocateChannel()
        let other = harness.allocateChannel()
        _ = harness.send(channel: busy, command: .cbor, payload: [4])
        #expect(harness.send(channel: other, command: .lock, payload: [5]).events == [errorEvent(other, .channelBusy)])
        #expect(harness.machine.nextDeadline == nil)
    }
}

@Suite("CTAPHID CANCEL and KEEPALIVE")
struct CancelTests {
    @Test("CANCEL on the busy channel withdraws its CBOR request without a reply")
    func cancelBusyChannel() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        _ = harness.send(channel: channel, command: .cbor, payload: [0x01, 0xA0])
        let outcome = harness.send(channel: channel, command: .cancel)
        #expect(outcome.cancelled == [channel])
        #expect(outcome.reports.isEmpty)
        // Still busy until the engine answers with CTAP2_ERR_KEEPALIVE_CANCEL.
        #expect(harness.machine.busyChannel == channel)
        let answer = harness.respond(channel: channel, command: .cbor, payload: [0x2D])
        #expect(answer.event == .message(channel: channel, command: .cbor, payload: [0x2D]))
        #expect(harness.machine.busyChannel == nil)
    }

    @Test("CANCEL is ignored when it withdraws nothing")
    func cancelIgnored() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let other = harness.allocateChannel()
        for target in [channel, other, 0, 99, broadcast] {
            let idle = harness.send(channel: target, command: .cancel)
            #expect(idle.reports.isEmpty && idle.cancelled.isEmpty)
        }
        _ = harness.send(channel: channel, command: .cbor, payload: [4])
        for target in [other, 0, 99, broadcast] {
            let outcome = harness.send(channel: target, command: .cancel)
            #expect(outcome.reports.isEmpty && outcome.cancelled.isEmpty)
        }
        _ = harness.respond(channel: channel, command: .cbor, payload: [0])
        // §11.2.9.1.5 cancels CBOR requests only; a U2F request runs to its answer.
        _ = harness.send(channel: channel, command: .msg, payload: [0, 3, 0, 0])
        let msg = harness.send(channel: channel, command: .cancel)
        #expect(msg.reports.isEmpty && msg.cancelled.isEmpty)
        #expect(harness.machine.busyChannel == channel)
    }

    @Test("CANCEL during a message's reassembly is ignored and the message completes")
    func cancelWhileReceiving() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let payload = pattern(150)
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: payload)
        _ = harness.write(report: reports[0])
        let cancel = harness.send(channel: channel, command: .cancel)
        #expect(cancel.reports.isEmpty && cancel.cancelled.isEmpty)
        var actions: [Action] = []
        for report in reports.dropFirst() {
            actions += harness.machine.receive(report: report, now: 0)
        }
        #expect(harness.read(actions).delivered == [.deliver(channel: channel, command: .cbor, payload: payload)])
    }

    @Test("KEEPALIVE is sent only for the busy channel", arguments: [KeepaliveStatus.processing, .upNeeded])
    func keepaliveOnlyForBusyChannel(status: KeepaliveStatus) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let other = harness.allocateChannel()
        #expect(harness.keepalive(channel: channel, status: status).reports.isEmpty)
        _ = harness.send(channel: channel, command: .cbor, payload: [4])
        let outcome = harness.keepalive(channel: channel, status: status)
        #expect(outcome.events == [.keepalive(channel: channel, status: status)])
        #expect(outcome.reports[0][4...7] == [0xBB, 0, 1, status.rawValue])
        #expect(harness.keepalive(channel: other, status: status).reports.isEmpty)
        _ = harness.respond(channel: channel, command: .cbor, payload: [0])
        #expect(harness.keepalive(channel: channel, status: status).reports.isEmpty)
    }

    @Test("respond for a channel that is not busy is dropped")
    func respondNotBusy() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let other = harness.allocateChannel()
        #expect(harness.respond(channel: channel, command: .cbor, payload: [0]).reports.isEmpty)
        _ = harness.send(channel: channel, command: .cbor, payload: [4])
        #expect(harness.respond(channel: other, command: .cbor, payload: [0]).reports.isEmpty)
        #expect(harness.machine.busyChannel == channel)
    }

    @Test("the engine may answer with a CTAPHID_ERROR")
    func respondWithError() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        _ = harness.send(channel: channel, command: .msg, payload: [0, 3, 0, 0])
        let outcome = harness.respond(channel: channel, command: .error, payload: [CTAPHIDError.other.rawValue])
        #expect(outcome.events == [errorEvent(channel, .other)])
        #expect(harness.machine.busyChannel == nil)
    }

    @Test("answering with a command other than MSG, CBOR or a one-byte ERROR is a programmer error")
    func respondWithWrongCommandTraps() async {
        await #expect(processExitsWith: .failure) {
            var machine = CTAPHIDStateMachine(configuration: .init())
            _ = machine.respond(channel: 1, command: .keepalive, payload: [1])
        }
    }

    @Test("a response too long to frame becomes ERR_OTHER")
    func respondTooLong() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        _ = harness.send(channel: channel, command: .cbor, payload: [4])
        let outcome = harness.respond(channel: channel, command: .cbor, payload: pattern(7610))
        #expect(outcome.events == [errorEvent(channel, .other)])
        #expect(harness.machine.busyChannel == nil)
    }
}

@Suite("CTAPHID busy channels")
struct BusyTests {
    @Test("a second channel gets ERR_CHANNEL_BUSY while a message is received; the first continues")
    func busyWhileReceiving() {
        var harness = HostHarness()
        let first = harness.allocateChannel()
        let second = harness.allocateChannel()
        let payload = pattern(400)
        let reports = CTAPHIDPacketizer.fragment(channel: first, command: .cbor, payload: payload)
        var delivered: [Action] = []
        for (index, report) in reports.enumerated() {
            delivered += harness.write(report: report).delivered
            if index == 2 {
                for command in [CTAPHIDCommand.cbor, .ping, .msg, .wink, .lock] {
                    let outcome = harness.send(channel: second, command: command, payload: [1])
                    #expect(outcome.events == [errorEvent(second, .channelBusy)])
                }
                // The second channel's continuation packets are spurious and ignored.
                #expect(harness.write(report: rawReport(channel: second, [3])).reports.isEmpty)
            }
        }
        #expect(delivered == [.deliver(channel: first, command: .cbor, payload: payload)])
    }

    @Test("a second channel gets ERR_CHANNEL_BUSY while a request is processed")
    func busyWhileProcessing() {
        var harness = HostHarness()
        let first = harness.allocateChannel()
        let second = harness.allocateChannel()
        _ = harness.send(channel: first, command: .cbor, payload: [4])
        let outcome = harness.send(channel: second, command: .cbor, payload: pattern(100))
        #expect(outcome.events == [errorEvent(second, .channelBusy)])
        #expect(harness.machine.busyChannel == first)
        #expect(harness.respond(channel: first, command: .cbor, payload: [0]).events.count == 1)
        #expect(harness.send(channel: second, command: .cbor, payload: [4]).delivered.count == 1)
    }

    @Test("a new request on the channel whose request is processed is ERR_CHANNEL_BUSY")
    func busySameChannel() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        _ = harness.send(channel: channel, command: .cbor, payload: [4])
        #expect(
            harness.send(channel: channel, command: .cbor, payload: [4]).events == [errorEvent(channel, .channelBusy)]
        )
        #expect(
            harness.send(channel: channel, command: .ping, payload: [4]).events == [errorEvent(channel, .channelBusy)]
        )
        #expect(harness.machine.busyChannel == channel)
    }
}

@Suite("CTAPHID reassembly")
struct ReassemblyTests {
    @Test(
        "messages at and around the packet boundaries are reassembled",
        arguments: [0, 1, 56, 57, 58, 116, 117, 7550, 7551, 7608, 7609]
    )
    func boundaries(size: Int) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let payload = pattern(size, seed: 3)
        let outcome = harness.send(channel: channel, command: .cbor, payload: payload)
        #expect(outcome.delivered == [.deliver(channel: channel, command: .cbor, payload: payload)])
        #expect(outcome.events.isEmpty)
    }

    @Test("a length over 7609 is ERR_INVALID_LEN", arguments: [7610, 0x7FFF, 0xFFFF])
    func tooLong(length: Int) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let header: [UInt8] = [0x90, UInt8(length >> 8), UInt8(length & 0xFF)]
        let outcome = harness.write(report: rawReport(channel: channel, header + pattern(57)))
        #expect(outcome.events == [errorEvent(channel, .invalidLength)])
        // The continuation packets that would follow are spurious.
        for sequence: UInt8 in 0...2 {
            #expect(harness.write(report: rawReport(channel: channel, [sequence] + pattern(59))).reports.isEmpty)
        }
        #expect(harness.machine.busyChannel == nil && harness.machine.nextDeadline == nil)
    }

    @Test("round trip: requests fragmented by the packetizer reach the engine whole and answers reach the host whole")
    func roundTrip() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        var size = 0
        while size <= CTAPHIDConstants.maxMessageSize {
            let request = pattern(size, seed: size)
            let outcome = harness.send(channel: channel, command: .cbor, payload: request)
            #expect(outcome.delivered == [.deliver(channel: channel, command: .cbor, payload: request)])
            let answer = pattern(CTAPHIDConstants.maxMessageSize - size, seed: size + 1)
            let response = harness.respond(channel: channel, command: .cbor, payload: answer)
            #expect(response.event == .message(channel: channel, command: .cbor, payload: answer))
            size += size < 200 ? 1 : 97
        }
    }

    @Test("a continuation packet without an initialization packet is ignored")
    func spuriousContinuation() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        for sequence: UInt8 in [0, 1, 0x7F] {
            let outcome = harness.write(report: rawReport(channel: channel, [sequence] + pattern(59)))
            #expect(outcome.reports.isEmpty && outcome.delivered.isEmpty)
        }
        #expect(harness.write(report: rawReport(channel: 77, [0])).reports.isEmpty)
    }

    @Test(
        "a continuation packet out of sequence is ERR_INVALID_SEQ and drops the partial message",
        arguments: [UInt8(1), 2, 0x7F]
    )
    func outOfSequence(sequence: UInt8) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: pattern(200))
        _ = harness.write(report: reports[0])
        let outcome = harness.write(report: rawReport(channel: channel, [sequence] + pattern(59)))
        #expect(outcome.events == [errorEvent(channel, .invalidSequence)])
        // The partial message is gone: its next packets are spurious.
        for report in reports.dropFirst() {
            #expect(harness.write(report: report).reports.isEmpty)
        }
        #expect(harness.machine.nextDeadline == nil)
    }

    @Test("a repeated continuation packet is ERR_INVALID_SEQ")
    func repeatedSequence() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: pattern(200))
        _ = harness.write(report: reports[0])
        _ = harness.write(report: reports[1])
        #expect(harness.write(report: reports[1]).events == [errorEvent(channel, .invalidSequence)])
    }

    @Test("a new initialization packet on the channel mid-message is ERR_INVALID_SEQ and drops both")
    func initPacketMidMessage() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: pattern(200))
        _ = harness.write(report: reports[0])
        let outcome = harness.send(channel: channel, command: .ping, payload: [1])
        #expect(outcome.events == [errorEvent(channel, .invalidSequence)])
        #expect(harness.write(report: reports[1]).reports.isEmpty)
        #expect(harness.send(channel: channel, command: .ping, payload: [1]).event?.isError == false)
    }

    @Test("a message whose next packet is overdue ends with ERR_MSG_TIMEOUT on tick")
    func continuationTimeout() {
        var harness = HostHarness(configuration: .init(continuationTimeout: 500))
        let channel = harness.allocateChannel()
        let other = harness.allocateChannel()
        harness.now = 1000
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: pattern(200))
        _ = harness.write(report: reports[0])
        #expect(harness.machine.nextDeadline == 1500)
        #expect(harness.tick(advancingBy: 499).events.isEmpty)
        #expect(harness.tick(advancingBy: 1).events == [errorEvent(channel, .messageTimeout)])
        #expect(harness.machine.nextDeadline == nil)
        // The device is idle again: the late packets are spurious and other channels get in.
        #expect(harness.write(report: reports[1]).reports.isEmpty)
        #expect(harness.send(channel: other, command: .ping, payload: [1]).event?.isError == false)
    }

    @Test("each continuation packet restarts the timeout")
    func timeoutRestarts() {
        var harness = HostHarness(configuration: .init(continuationTimeout: 500))
        let channel = harness.allocateChannel()
        let payload = pattern(300)
        var delivered: [Action] = []
        for report in CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: payload) {
            #expect(harness.tick(advancingBy: 400).events.isEmpty)
            delivered += harness.write(report: report).delivered
        }
        #expect(delivered == [.deliver(channel: channel, command: .cbor, payload: payload)])
    }

    @Test("a packet arriving after the timeout meets the timeout first")
    func timeoutOnReceive() {
        var harness = HostHarness(configuration: .init(continuationTimeout: 500))
        let channel = harness.allocateChannel()
        let reports = CTAPHIDPacketizer.fragment(channel: channel, command: .cbor, payload: pattern(200))
        _ = harness.write(report: reports[0])
        harness.now = 600
        #expect(harness.write(report: reports[1]).events == [errorEvent(channel, .messageTimeout)])
    }
}

@Suite("CTAPHID report sizes")
struct ReportSizeTests {
    @Test("a short report of at least 5 bytes is read as zero-padded")
    func shortReportPadded() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let ping = channel.bigEndianBytes + [0x81, 0x00, 0x03, 9, 8, 7]
        #expect(harness.write(report: ping).event == .message(channel: channel, command: .ping, payload: [9, 8, 7]))
        let wink = channel.bigEndianBytes + [0x88]
        #expect(harness.write(report: wink).event == .message(channel: channel, command: .wink, payload: []))
        // A trimmed continuation packet: the missing bytes are zeros.
        let first = CTAPHIDPacketizer.fragment(
            channel: channel,
            command: .ping,
            payload: [UInt8](repeating: 1, count: 60)
        )[0]
        _ = harness.write(report: first)
        let outcome = harness.write(report: channel.bigEndianBytes + [0x00, 1, 1])
        #expect(
            outcome.event == .message(channel: channel, command: .ping, payload: [UInt8](repeating: 1, count: 59) + [0])
        )
    }

    @Test("a report under 5 bytes is ignored", arguments: [0, 1, 4])
    func tinyReportIgnored(size: Int) {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let report = Array((channel.bigEndianBytes + [0x81]).prefix(size))
        #expect(harness.write(report: report).reports.isEmpty)
    }

    @Test("a report over 64 bytes is cut to 64")
    func longReportCut() {
        var harness = HostHarness()
        let channel = harness.allocateChannel()
        let payload = pattern(57)
        let report = CTAPHIDPacketizer.fragment(channel: channel, command: .ping, payload: payload)[0] + [0xEE, 0xEE]
        #expect(harness.write(report: report).event == .message(channel: channel, command: .ping, payload: payload))
    }
}

extension Event {
    /// Whether this is a CTAPHID_ERROR reply.
    var isError: Bool {
        if case .message(_, .error, _) = self { return true }
        return false
    }
}
