// One host attachment of a key: the CTAPHID state machine in front of the
// authenticator, driven by a transport (a uhid device or a USB/IP
// connection). The session performs the machine's actions, runs the engine
// for delivered messages, sends KEEPALIVE every 100 ms while the engine works
// (UPNEEDED while a person is asked), ticks continuation timeouts, and turns
// CTAPHID_CANCEL into cancelling the engine's task. The key's response-stage
// CI overrides act on the engine's answer through the hooks the key gives
// (`SessionHooks`, LatchkeyCore/Keys/Overrides.swift).
//
// Every request runs with `Requester.current` bound to who is asking, as the
// transport knows it (LatchkeyCore/Keys/Requester.swift): the presence broker names it.
//
// Every request reaches the engine with its origin, this connection's number
// and the channel: a getNextAssertion or an enumeration's GetNext continues
// only what the same channel of the same connection began. A channel that
// CTAPHID_INIT gives out anew, and a connection that goes away, end their
// conversations.
//
// Time is taken when a report arrives, not when the session gets to it: the
// transport's reader calls ``HIDSession/arrival()`` and hands the reading to
// ``HIDSession/receive(_:arrivedAt:)``. A daemon starved of CPU (a browser
// beside it in a slow VM) may hold a continuation packet in its queue past
// the continuation timeout; the packet came in time, so it must count, and the
// timer expires no deadline while reports wait to be received.
//
// The session runs on the executor its transport gives it. USB/IP gives its
// connection's event loop, and receives each report there synchronously
// (`assumeIsolated`): no hop to another thread per report, and the engine's
// answer comes back to the thread that writes it. A transport that gives none
// (uhid, tests) gets a serial queue of the session's own.

import CTAP
import CTAPHID
import Dispatch
import LatchkeyCore
import Logging
import Synchronization

/// A serial queue as an actor's executor.
final class SerialQueueExecutor: SerialExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// One transport attachment of a key.
public actor HIDSession {
    /// How often KEEPALIVE goes out while the engine works (100 ms, as hardware keys do).
    static let keepaliveInterval: Duration = .milliseconds(100)
    /// The milliseconds a host may take between two packets of one message
    /// (the state machine's default is one second; §11.2.5.2 leaves it
    /// open). Chromium in a VM under emulation wrote a request's packets
    /// over a second apart and lost it to ERR_MSG_TIMEOUT; three seconds
    /// keep such hosts working, and a host that stops mid-message holds the
    /// key for no longer than that.
    static let continuationTimeout: UInt64 = 3000
    /// How many channels may wait for their next request to end their
    /// conversation; past that, one is ended at once instead (a host that
    /// opens channels by the thousand cannot grow the set).
    static let maxInitializedChannels = 64
    /// Numbers transport connections for the engine, daemon-wide, so that
    /// no two connections to a key share one.
    private static let connections = Atomic<UInt64>(0)

    private var machine: CTAPHIDStateMachine
    private let authenticator: Authenticator
    private let presence: PresenceBroker?
    private let send: @Sendable ([UInt8]) -> Void
    private let logger: Logger
    /// The request the engine is working on; `id` tells a stale answer (of a
    /// request the host abandoned with INIT) from the current one.
    private var engine: (id: UInt64, channel: UInt32, task: Task<Void, Never>)?
    private var nextRequestID: UInt64 = 0
    private var timer: Task<Void, Never>?
    private var closed = false
    private let configuration: CTAPHIDStateMachine.Configuration
    private let hooks: SessionHooks?
    /// Where the engine's tasks run: the key's own queue, so that one key's disk
    /// write never holds another key's request (LatchkeyCore/Keys/KeyEngineExecutor.swift).
    private let engineExecutor: (any TaskExecutor)?
    /// This connection's number in the engine's request origins; a new one
    /// when the transport opens again.
    private var connection = HIDSession.newConnection()
    /// Channels CTAPHID_INIT gave out anew since their last request: their
    /// conversation ends in the engine task of that request, before it runs
    /// (a separate task could run after it).
    private var initializedChannels: Set<UInt32> = []
    /// Reports the transport has taken in (``arrival()``) and not yet handed
    /// over (``receive(_:arrivedAt:)``).
    private let queued = Atomic<Int>(0)
    /// Where the session runs (see the top of this file).
    private nonisolated let executor: any SerialExecutor
    /// Who asks, bound around every engine request; nil when the transport says nothing.
    private let requester: (@Sendable () async -> Requester)?

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// A session that sends its input reports through `send`. `capabilities`
    /// are CTAPHID_INIT's flags (a U2F-only key leaves out CBOR); `hooks`
    /// bring the key's CI overrides; the engine's tasks run on `engineExecutor`
    /// (nil: Swift's global executor), the session itself on `executor` (nil:
    /// a serial queue of its own); `requester` tells who asks (it may take a while the
    /// first time: the engine request waits for it, the session does not).
    public init(
        authenticator: Authenticator,
        presence: PresenceBroker?,
        logger: Logger,
        capabilities: UInt8 = CTAPHIDConstants.capabilityWink | CTAPHIDConstants.capabilityCBOR,
        hooks: SessionHooks? = nil,
        engineExecutor: (any TaskExecutor)? = nil,
        executor: (any SerialExecutor)? = nil,
        requester: (@Sendable () async -> Requester)? = nil,
        send: @escaping @Sendable ([UInt8]) -> Void
    ) {
        self.executor = executor ?? SerialQueueExecutor(label: "latchkey.hid-session")
        self.requester = requester
        self.engineExecutor = engineExecutor
        self.configuration = CTAPHIDStateMachine.Configuration(
            capabilities: capabilities, continuationTimeout: Self.continuationTimeout)
        self.machine = CTAPHIDStateMachine(configuration: configuration)
        self.authenticator = authenticator
        self.presence = presence
        self.send = send
        self.logger = logger
        self.hooks = hooks
    }

    /// An output report from the host, taken in now.
    public func receive(_ report: [UInt8]) {
        receive(report, arrivedAt: arrival())
    }

    /// Called by the transport's reader when an output report comes in,
    /// before it is queued for ``receive(_:arrivedAt:)``: counts it as
    /// waiting, then reads the clock (in that order, so that a timer that
    /// saw no report waiting read the clock before this report's reading).
    public nonisolated func arrival() -> UInt64 {
        queued.add(1, ordering: .sequentiallyConsistent)
        return SystemMonotonicClock.now()
    }

    /// Yields an element that carries one ``arrival()`` into a transport's
    /// queue; an element the queue drops or refuses is no longer waiting.
    public nonisolated func queue<Element: Sendable>(_ queue: AsyncStream<Element>.Continuation, _ element: Element) {
        switch queue.yield(element) {
        case .enqueued: break
        case .dropped, .terminated: fallthrough
        @unknown default: queued.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    /// An output report from the host that came in at `arrivedAt` (from
    /// ``arrival()``, which every report passes through exactly once).
    public func receive(_ report: [UInt8], arrivedAt: UInt64) {
        queued.subtract(1, ordering: .sequentiallyConsistent)
        guard !closed else { return }
        perform(machine.receive(report: report, now: arrivedAt))
        scheduleTimer()
    }

    /// The host went away (uhid CLOSE/STOP, USB/IP disconnect): abandon the
    /// request in progress, forget partial messages, and end the
    /// connection's conversations in the engine.
    public func close() {
        closed = true
        engine?.task.cancel()
        engine = nil
        timer?.cancel()
        timer = nil
        initializedChannels.removeAll()
        let (authenticator, connection) = (self.authenticator, self.connection)
        Task { await authenticator.endConversations(connection: connection) }
    }

    /// The transport is usable again (uhid OPEN after CLOSE): a new
    /// connection, whose channels start again at 1.
    public func reopen() {
        guard closed else { return }
        closed = false
        machine = CTAPHIDStateMachine(configuration: configuration)
        connection = Self.newConnection()
    }

    private static func newConnection() -> UInt64 {
        connections.wrappingAdd(1, ordering: .relaxed).newValue
    }

    private func perform(_ actions: [CTAPHIDStateMachine.Action]) {
        for action in actions {
            switch action {
            case .send(let report):
                if report.count > 5, report[4] == 0x80 | CTAPHIDCommand.error.rawValue {
                    // rare, and what a host's "error reading" comes from: worth a line
                    logger.debug("CTAPHID ERROR sent", metadata: [
                        "channel": "\(report[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })",
                        "error": "\(report[7])",
                    ])
                }
                send(report)
            case .deliver(let channel, let command, let payload):
                start(channel: channel, command: command, payload: payload)
            case .cancel(let channel):
                if let engine, engine.channel == channel {
                    logger.debug("host cancelled the request", metadata: ["channel": "\(channel)"])
                    engine.task.cancel()
                }
            case .wink:
                logger.info("wink")
            case .channelInitialized(let channel):
                initializedChannels.insert(channel)
                if initializedChannels.count > Self.maxInitializedChannels {
                    let origin = RequestOrigin(connection: connection, channel: initializedChannels.removeFirst())
                    let authenticator = self.authenticator
                    Task { await authenticator.endConversation(origin) }
                }
            }
        }
    }

    private func start(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) {
        let authenticator = self.authenticator
        nextRequestID += 1
        let id = nextRequestID
        let origin = RequestOrigin(connection: connection, channel: channel)
        let initialized = initializedChannels.remove(channel) != nil
        let requester = self.requester
        let task = Task(executorPreference: engineExecutor) {
            // In the request's own task, so that it runs first.
            if initialized { await authenticator.endConversation(origin) }
            let response = await Requester.$current.withValue(await requester?()) {
                command == .cbor
                    ? await authenticator.handleCBOR(payload, from: origin)
                    : await authenticator.handleAPDU(payload, from: origin)
            }
            await self.finish(id: id, channel: channel, command: command, request: payload, response: response)
        }
        engine = (id, channel, task)
    }

    private func finish(id: UInt64, channel: UInt32, command: CTAPHIDCommand, request: [UInt8], response: [UInt8]) {
        // An answer to a request the host abandoned (INIT re-sync, close) is dropped:
        // sent now, it would be taken as the answer to the channel's next request.
        guard engine?.id == id else { return }
        engine = nil
        guard !closed else { return }
        var response = response
        if let hooks {
            switch hooks.respond(to: request, cbor: command == .cbor, with: response, logger: logger) {
            case .send(let answer): response = answer
            case .drop:
                close()
                hooks.drop()
                return
            }
        }
        logger.debug(
            "answered",
            metadata: ["channel": "\(channel)", "command": "\(command)", "status": "\(response.first ?? 0)"]
        )
        perform(machine.respond(channel: channel, command: command, payload: response))
        scheduleTimer()
    }

    /// Keeps one timer task alive while there is a deadline or an engine
    /// task: it sends KEEPALIVE and ticks the machine every 100 ms.
    private func scheduleTimer() {
        guard timer == nil, !closed, engine != nil || machine.nextDeadline != nil else { return }
        timer = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.keepaliveInterval)
                guard self.timerFired() else { return }
            }
        }
    }

    /// One timer step; false ends the timer.
    private func timerFired() -> Bool {
        guard !closed else { return false }
        // A report waiting in the queue came in before this reading: it is
        // received first, and a deadline it would meet must not expire now.
        let now = SystemMonotonicClock.now()
        if queued.load(ordering: .sequentiallyConsistent) == 0 {
            perform(machine.tick(now: now))
        }
        if let engine, machine.busyChannel == engine.channel {
            let status: KeepaliveStatus = presence?.isWaiting == true ? .upNeeded : .processing
            perform(machine.keepalive(channel: engine.channel, status: status))
        }
        if engine == nil && machine.nextDeadline == nil {
            timer = nil
            return false
        }
        return true
    }
}

extension HIDSession {
    /// The session of `key` on one attachment of a transport: the one way the
    /// transports (UHIDAttachment, USBIPServer) make theirs. CTAPHID_INIT's
    /// capabilities follow the key's protocol (a U2F-only key offers no CBOR), the
    /// key's CI overrides act on its answers (`drop` yanks the key from this
    /// transport), and the engine's work runs on the key's own executor.
    static func serving(
        _ key: VirtualKey,
        logger: Logger,
        executor: (any SerialExecutor)? = nil,
        requester: @escaping @Sendable () async -> Requester,
        drop: @escaping @Sendable () -> Void,
        send: @escaping @Sendable ([UInt8]) -> Void
    ) -> HIDSession {
        HIDSession(
            authenticator: key.authenticator, presence: key.presence, logger: logger,
            capabilities: key.configuration.protocolMode == .u2fOnly
                ? CTAPHIDConstants.capabilityWink : CTAPHIDConstants.capabilityWink | CTAPHIDConstants.capabilityCBOR,
            hooks: key.sessionHooks(drop: drop), engineExecutor: key.engineExecutor, executor: executor,
            requester: requester, send: send
        )
    }
}
