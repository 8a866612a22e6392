// The device side of CTAPHID: channels, reassembly, busy handling, CANCEL, KEEPALIVE, LOCK
// and timeouts (CTAP 2.1 §11.2). Sans-I/O: reports and time go in, actions come out.

/// The device side of the CTAPHID protocol (CTAP 2.1 §11.2), as a state machine that does
/// no I/O and reads no clock.
///
/// The transport hands it every output report the host writes (``receive(report:now:)``),
/// passes on the engine's answers (``respond(channel:command:payload:)``), asks for a
/// keepalive every 100 ms while the engine works (``keepalive(channel:status:)``) and lets
/// time pass (``tick(now:)``, due at ``nextDeadline``). Each call returns the actions the
/// transport performs in order.
///
/// The device runs one transaction at a time (§11.2.5.1): the channel whose initialization
/// packet arrives while the device is idle holds it until its response has been sent. In that
/// time any other channel's request is answered with ERR_CHANNEL_BUSY, except CTAPHID_INIT,
/// which is answered at once because it needs no engine and disturbs no transaction — a
/// browser probing the key while another program waits for a touch still finds it.
///
/// Which error wins when several apply is behaviour; ``receive(report:now:)`` lists the order.
public struct CTAPHIDStateMachine: Sendable {
    /// What the device says about itself in the CTAPHID_INIT response, and its timing
    /// (CTAP 2.1 §11.2.9.1.3, §11.2.5.2).
    public struct Configuration: Sendable {
        /// A vendor-defined device version number, three bytes of the CTAPHID_INIT
        /// response (§11.2.9.1.3).
        public struct DeviceVersion: Hashable, Sendable {
            /// The major device version number.
            public var major: UInt8
            /// The minor device version number.
            public var minor: UInt8
            /// The build device version number.
            public var build: UInt8

            /// 0.1.0, the version latchkey reports.
            public static let latchkey = DeviceVersion(major: 0, minor: 1, build: 0)
        }

        /// The CTAPHID protocol version identifier; 2 for this protocol (§11.2.9.1.3).
        public var protocolVersion: UInt8
        /// The device version reported by CTAPHID_INIT (§11.2.9.1.3).
        public var deviceVersion: DeviceVersion
        /// The capabilities flags of CTAPHID_INIT (§11.2.9.1.3): ``CTAPHIDConstants/capabilityWink``,
        /// ``CTAPHIDConstants/capabilityCBOR``, ``CTAPHIDConstants/capabilityNMSG``.
        /// The state machine honours them: a command the flags do not offer is answered with
        /// ERR_INVALID_CMD.
        public var capabilities: UInt8
        /// The milliseconds a host may take between two packets of one message before the
        /// device abandons the message with ERR_MSG_TIMEOUT (§11.2.5.2 leaves the value open).
        public var continuationTimeout: UInt64

        /// A configuration; by default protocol version 2, device version 0.1.0, WINK and
        /// CBOR (so also MSG) offered, and a one-second continuation timeout.
        public init(
            protocolVersion: UInt8 = 2,
            deviceVersion: DeviceVersion = .latchkey,
            capabilities: UInt8 = CTAPHIDConstants.capabilityWink | CTAPHIDConstants.capabilityCBOR,
            continuationTimeout: UInt64 = 1000
        ) {
            self.protocolVersion = protocolVersion
            self.deviceVersion = deviceVersion
            self.capabilities = capabilities
            self.continuationTimeout = continuationTimeout
        }
    }

    /// One thing the transport must do, in the order returned.
    public enum Action: Equatable, Sendable {
        /// Send this input report (always exactly 64 bytes) to the host.
        case send([UInt8])
        /// A complete CTAPHID_MSG or CTAPHID_CBOR request for the engine (§11.2.9.1.1,
        /// §11.2.9.1.2). The device is now busy with `channel` until the engine answers through
        /// ``CTAPHIDStateMachine/respond(channel:command:payload:)`` or the host re-synchronizes
        /// the channel with CTAPHID_INIT.
        case deliver(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8])
        /// The host withdrew the request being processed on `channel`.
        ///
        /// After CTAPHID_CANCEL (§11.2.9.1.5) the device is still busy: the engine stops and
        /// answers the request with CTAP2_ERR_KEEPALIVE_CANCEL through `respond`. After
        /// CTAPHID_INIT on that channel (§11.2.5.3) the device is already idle and drops any
        /// later `respond` for the channel, so the engine must abandon the request at once:
        /// once the host sends a new request on the channel, an answer would be taken as its.
        case cancel(channel: UInt32)
        /// The host asked the device to identify itself (CTAPHID_WINK, §11.2.9.2.1); the reply
        /// is already in a preceding ``send(_:)``.
        case wink
        /// CTAPHID_INIT gave `channel` to a client anew: allocated it on the broadcast CID, or
        /// re-synchronized it (§11.2.9.1.3). Whatever the layers above keep for the channel's
        /// conversation (a getAssertion sequence, an enumeration, a large-blob write) belongs
        /// to an earlier one and must end before the channel's next request is handled. It
        /// follows the INIT response (and, on a busy channel, the ``cancel(channel:)``).
        case channelInitialized(channel: UInt32)
    }

    /// The one transaction the device can hold (§11.2.5.1).
    private enum Transaction: Sendable {
        /// Waiting for an initialization packet from any channel.
        case idle
        /// Reassembling a request that needs more continuation packets.
        case receiving(Assembly)
        /// The engine holds a complete request from `channel`.
        case processing(channel: UInt32, command: CTAPHIDCommand)
    }

    /// A request being reassembled (§11.2.4).
    private struct Assembly: Sendable {
        var message: CTAPHIDPartialMessage
        var deadline: UInt64
    }

    /// A channel's exclusive access, taken with CTAPHID_LOCK (§11.2.9.2.2).
    private struct Lock: Sendable {
        var channel: UInt32
        var deadline: UInt64
    }

    private let configuration: Configuration
    private var transaction: Transaction = .idle
    private var lock: Lock?
    /// The highest CID handed out; CIDs are allocated 1, 2, 3, … so every CID up to this one
    /// is allocated (§11.2.3 leaves the scheme to the vendor; sequential is deterministic).
    var lastAllocatedChannel: UInt32 = 0
    /// Set once allocation has run through every CID and started again at 1.
    var allocationWrapped = false

    /// A device with no channels allocated, idle and unlocked.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The channel whose request the engine is processing, if any.
    public var busyChannel: UInt32? {
        if case .processing(let channel, _) = transaction { return channel }
        return nil
    }

    /// The earliest `now` at which ``tick(now:)`` has something to do, if any: the
    /// continuation timeout of a message being received, or the end of a channel lock.
    public var nextDeadline: UInt64? {
        var deadline = lock?.deadline
        if case .receiving(let assembly) = transaction {
            deadline = min(deadline ?? .max, assembly.deadline)
        }
        return deadline
    }

    /// One output report from the host; `now` is monotonic milliseconds from an injected clock.
    ///
    /// Deadlines that have passed by `now` take effect first (as ``tick(now:)``). Reports are
    /// normalized to 64 bytes: longer ones are cut, shorter ones of at least 5 bytes are padded
    /// with zeros, and shorter ones still are ignored.
    ///
    /// A continuation packet is ignored unless it continues the message being received on its
    /// channel (§11.2.5.4); with the wrong sequence number it ends that message with
    /// ERR_INVALID_SEQ. An initialization packet is checked in this order, the first match
    /// deciding:
    /// 1. CTAPHID_CANCEL is never answered (§11.2.9.1.5): it withdraws a CBOR request being
    ///    processed on its channel and is ignored otherwise.
    /// 2. Another channel holds a lock: ERR_CHANNEL_BUSY (§11.2.9.2.2).
    /// 3. CID 0, an unallocated CID, or the broadcast CID with a command other than
    ///    CTAPHID_INIT: ERR_INVALID_CHANNEL (§11.2.3).
    /// 4. CTAPHID_INIT: a length other than 8 is ERR_INVALID_LEN; otherwise a new channel on
    ///    the broadcast CID, or a re-synchronization of its own channel, aborting that
    ///    channel's transaction (§11.2.9.1.3, §11.2.5.3).
    /// 5. A new message on the channel that is sending one: ERR_INVALID_SEQ, dropping the
    ///    partial message (§11.2.5.4). On the channel whose request is being processed, or on
    ///    any other channel during a transaction: ERR_CHANNEL_BUSY (§11.2.5.1).
    /// 6. A command the device does not offer: ERR_INVALID_CMD (§11.2.9).
    /// 7. A length over 7609: ERR_INVALID_LEN (§11.2.4).
    public mutating func receive(report: [UInt8], now: UInt64) -> [Action] {
        var actions = expireDeadlines(now: now)
        guard let packet = CTAPHIDPacket(report: report) else { return actions }
        switch packet {
        case .initialization(let channel, let command, let length, let data):
            actions += receiveInitialization(
                channel: channel,
                commandByte: command,
                length: length,
                data: data,
                now: now
            )
        case .continuation(let channel, let sequence, let data):
            actions += receiveContinuation(channel: channel, sequence: sequence, data: data, now: now)
        }
        return actions
    }

    /// The engine's answer to the message last delivered on `channel`: fragments it and ends
    /// the transaction (§11.2.5.1).
    ///
    /// `command` is the request's command, CTAPHID_MSG or CTAPHID_CBOR, or CTAPHID_ERROR with
    /// a one-byte error code; anything else is a programmer error and traps.
    /// An answer for a channel that is not busy — its request was withdrawn by CTAPHID_INIT,
    /// or nothing was delivered — is dropped. A payload over 7609 bytes cannot be framed; the
    /// host gets ERR_OTHER instead (§11.2.9.1.6).
    public mutating func respond(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) -> [Action] {
        precondition(
            command == .msg || command == .cbor || (command == .error && payload.count == 1),
            "the engine answers with MSG, CBOR or a one-byte ERROR"
        )
        guard busyChannel == channel else { return [] }
        transaction = .idle
        guard payload.count <= CTAPHIDConstants.maxMessageSize else {
            return [errorReply(channel: channel, error: .other)]
        }
        return CTAPHIDPacketizer.fragment(channel: channel, command: command, payload: payload).map(Action.send)
    }

    /// A CTAPHID_KEEPALIVE for the request being processed on `channel` (§11.2.9.1.7); the
    /// transport calls this every 100 ms while the engine works. Nothing for any other channel.
    public mutating func keepalive(channel: UInt32, status: KeepaliveStatus) -> [Action] {
        guard busyChannel == channel else { return [] }
        return CTAPHIDPacketizer.fragment(channel: channel, command: .keepalive, payload: [status.rawValue])
            .map(Action.send)
    }

    /// Time passing: a message whose next packet is overdue ends with ERR_MSG_TIMEOUT
    /// (§11.2.5.2) and an expired lock is released (§11.2.9.2.2).
    public mutating func tick(now: UInt64) -> [Action] {
        expireDeadlines(now: now)
    }

    // MARK: - Packets

    private mutating func receiveContinuation(
        channel: UInt32,
        sequence: UInt8,
        data: ArraySlice<UInt8>,
        now: UInt64
    ) -> [Action] {
        // §11.2.5.4: spurious continuation packets, with no initialization packet before them
        // on their channel, are ignored. Answering would let one host disturb another's
        // transaction by guessing its channel.
        guard case .receiving(var assembly) = transaction, assembly.message.channel == channel else { return [] }
        guard sequence == assembly.message.nextSequence else {
            transaction = .idle
            return [errorReply(channel: channel, error: .invalidSequence)]
        }
        assembly.deadline = Self.adding(configuration.continuationTimeout, to: now)
        if assembly.message.append(data) {
            transaction = .idle
            let message = assembly.message
            return complete(channel: channel, command: message.command, payload: message.payload, now: now)
        }
        transaction = .receiving(assembly)
        return []
    }

    private mutating func receiveInitialization(
        channel: UInt32,
        commandByte: UInt8,
        length: Int,
        data: ArraySlice<UInt8>,
        now: UInt64
    ) -> [Action] {
        // The order of these checks is deliberate; see `receive(report:now:)`.
        if commandByte == CTAPHIDCommand.cancel.rawValue {
            return receiveCancel(channel: channel)
        }
        if let lock, lock.channel != channel {
            return [errorReply(channel: channel, error: .channelBusy)]
        }
        let isBroadcast = channel == CTAPHIDConstants.broadcastChannel
        let isInit = commandByte == CTAPHIDCommand.initialize.rawValue
        guard isBroadcast ? isInit : isAllocated(channel) else {
            return [errorReply(channel: channel, error: .invalidChannel)]
        }
        if isInit {
            return receiveInit(channel: channel, length: length, nonce: data.prefix(8))
        }
        switch transaction {
        case .idle:
            break
        case .receiving(let assembly) where assembly.message.channel == channel:
            transaction = .idle
            return [errorReply(channel: channel, error: .invalidSequence)]
        case .receiving, .processing:
            return [errorReply(channel: channel, error: .channelBusy)]
        }
        guard let command = CTAPHIDCommand(rawValue: commandByte), offers(command) else {
            return [errorReply(channel: channel, error: .invalidCommand)]
        }
        guard length <= CTAPHIDConstants.maxMessageSize else {
            return [errorReply(channel: channel, error: .invalidLength)]
        }
        if length <= CTAPHIDConstants.initPayloadSize {
            return complete(channel: channel, command: command, payload: Array(data.prefix(length)), now: now)
        }
        transaction = .receiving(
            Assembly(
                message: CTAPHIDPartialMessage(channel: channel, command: command, length: length, first: data),
                deadline: Self.adding(configuration.continuationTimeout, to: now)
            )
        )
        return []
    }

    /// CTAPHID_CANCEL (§11.2.9.1.5): "A CTAPHID_CANCEL received while no CTAPHID_CBOR request
    /// is being processed, or on a non-active CID SHALL be ignored." It is never answered.
    private func receiveCancel(channel: UInt32) -> [Action] {
        guard case .processing(channel, .cbor) = transaction else { return [] }
        return [.cancel(channel: channel)]
    }

    /// CTAPHID_INIT (§11.2.9.1.3): on the broadcast CID, allocate a channel and answer on the
    /// broadcast CID; on an allocated CID, abort that channel's transaction (§11.2.5.3) and
    /// answer on it with the same CID. The response is the 8-byte nonce, the CID, the protocol
    /// version, the three device version bytes and the capabilities: 17 bytes. Either way the
    /// channel starts a new conversation (`channelInitialized`).
    private mutating func receiveInit(channel: UInt32, length: Int, nonce: ArraySlice<UInt8>) -> [Action] {
        guard length == 8 else {
            return [errorReply(channel: channel, error: .invalidLength)]
        }
        var actions: [Action] = []
        let assigned: UInt32
        if channel == CTAPHIDConstants.broadcastChannel {
            assigned = allocateChannel()
        } else {
            assigned = channel
            switch transaction {
            case .receiving(let assembly) where assembly.message.channel == channel:
                transaction = .idle
            case .processing(channel, _):
                transaction = .idle
                actions.append(.cancel(channel: channel))
            case .idle, .receiving, .processing:
                break
            }
        }
        let version = configuration.deviceVersion
        var payload = Array(nonce)
        payload += assigned.bigEndianBytes
        payload += [configuration.protocolVersion, version.major, version.minor, version.build]
        payload.append(configuration.capabilities)
        actions += CTAPHIDPacketizer.fragment(channel: channel, command: .initialize, payload: payload).map(Action.send)
        actions.append(.channelInitialized(channel: assigned))
        return actions
    }

    // MARK: - Complete messages

    /// Acts on a complete request: the commands CTAPHID answers itself, or a delivery to the
    /// engine.
    private mutating func complete(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8], now: UInt64) -> [Action]
    {
        switch command {
        case .ping:
            // §11.2.9.1.4: the response echoes the request's data.
            return CTAPHIDPacketizer.fragment(channel: channel, command: .ping, payload: payload).map(Action.send)
        case .wink:
            // §11.2.9.2.1: the request's data, if any, is not used; the response is empty.
            return CTAPHIDPacketizer.fragment(channel: channel, command: .wink, payload: []).map(Action.send) + [.wink]
        case .lock:
            return receiveLock(channel: channel, payload: payload, now: now)
        case .msg, .cbor:
            transaction = .processing(channel: channel, command: command)
            return [.deliver(channel: channel, command: command, payload: payload)]
        case .initialize, .cancel, .keepalive, .error:
            // INIT and CANCEL are handled from their initialization packet; KEEPALIVE and ERROR
            // are never offered, so none of these reaches here.
            return [errorReply(channel: channel, error: .invalidCommand)]
        }
    }

    /// CTAPHID_LOCK (§11.2.9.2.2): one byte, the lock time in seconds, 0 to 10; 0 releases.
    /// Any other channel gets ERR_CHANNEL_BUSY while the lock holds.
    private mutating func receiveLock(channel: UInt32, payload: [UInt8], now: UInt64) -> [Action] {
        guard payload.count == 1 else {
            return [errorReply(channel: channel, error: .invalidLength)]
        }
        let seconds = payload[0]
        guard seconds <= 10 else {
            return [errorReply(channel: channel, error: .invalidParameter)]
        }
        if seconds == 0 {
            lock = nil
        } else {
            lock = Lock(channel: channel, deadline: Self.adding(UInt64(seconds) * 1000, to: now))
        }
        return CTAPHIDPacketizer.fragment(channel: channel, command: .lock, payload: []).map(Action.send)
    }

    // MARK: - Helpers

    private mutating func expireDeadlines(now: UInt64) -> [Action] {
        if let lock, now >= lock.deadline {
            self.lock = nil
        }
        if case .receiving(let assembly) = transaction, now >= assembly.deadline {
            transaction = .idle
            return [errorReply(channel: assembly.message.channel, error: .messageTimeout)]
        }
        return []
    }

    /// Whether the device offers a command to a host (§11.2.9): the mandatory commands, WINK
    /// and LOCK, less what the configured capabilities exclude. KEEPALIVE and ERROR only ever
    /// travel from the device.
    private func offers(_ command: CTAPHIDCommand) -> Bool {
        let capabilities = configuration.capabilities
        switch command {
        case .ping, .lock, .initialize, .cancel:
            return true
        case .msg:
            return capabilities & CTAPHIDConstants.capabilityNMSG == 0
        case .cbor:
            return capabilities & CTAPHIDConstants.capabilityCBOR != 0
        case .wink:
            return capabilities & CTAPHIDConstants.capabilityWink != 0
        case .keepalive, .error:
            return false
        }
    }

    /// Hands out the next CID: 1, 2, 3, …; never 0 or the broadcast CID. After 0xFFFFFFFE
    /// it starts again at 1.
    private mutating func allocateChannel() -> UInt32 {
        if lastAllocatedChannel == CTAPHIDConstants.broadcastChannel - 1 {
            lastAllocatedChannel = 0
            allocationWrapped = true
        }
        lastAllocatedChannel += 1
        return lastAllocatedChannel
    }

    private func isAllocated(_ channel: UInt32) -> Bool {
        channel != CTAPHIDConstants.reservedChannel && channel != CTAPHIDConstants.broadcastChannel
            && (allocationWrapped || channel <= lastAllocatedChannel)
    }

    /// A CTAPHID_ERROR reply: one byte of payload, the error code (§11.2.9.1.6).
    private func errorReply(channel: UInt32, error: CTAPHIDError) -> Action {
        .send(CTAPHIDPacketizer.fragment(channel: channel, command: .error, payload: [error.rawValue])[0])
    }

    /// `now + interval`, stopping at the largest time rather than overflowing.
    private static func adding(_ interval: UInt64, to now: UInt64) -> UInt64 {
        let (sum, overflow) = now.addingReportingOverflow(interval)
        return overflow ? .max : sum
    }
}
