// The notifier's thread: it owns the session bus connection (SessionBus, which is
// not thread-safe) and the prompts shown on it (ShownPrompts), takes the notifier's
// commands in order from its inbox (a Close never overtakes its Notify), and waits
// in poll(2) on the bus's descriptor and a socket that a new command writes to. What
// arrives on the bus is read here: a click answers its request (the handler runs on
// a queue of its own, so that a slow answer holds no bus traffic), a server that
// starts shows the prompts still waiting, and a bus that goes away is connected to
// again, 1 s later and then doubling up to 30 s.

import Foundation
import Glibc
import LatchkeySystem
import Logging
import Synchronization

/// What the notifier's callers ask of its thread.
enum NotifierCommand: Sendable {
    case show(requestId: String, text: PromptText, actions: Bool, timeoutMilliseconds: Int)
    case withdraw(requestId: String)
}

/// Between the notifier's callers and its thread: the commands in order, the action
/// handler, and the socket pair that wakes the thread, which it owns.
final class NotifierInbox: Sendable {
    struct State {
        var commands: [NotifierCommand] = []
        var stopping = false
        var onAction: DesktopNotifier.ActionHandler?
    }

    let state = Mutex(State())
    /// What the thread polls; `post` writes a byte to the other end.
    let wakeDescriptor: Int32
    private let wakeWriter: Int32
    /// Signalled when the thread has ended.
    let ended = DispatchSemaphore(value: 0)

    init() throws(SystemCallError) {
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        try SystemCall.run("socketpair") { socketpair(AF_UNIX, type, 0, &pair) }
        (wakeDescriptor, wakeWriter) = (pair[0], pair[1])
    }

    deinit {
        SystemCall.close(wakeDescriptor)
        SystemCall.close(wakeWriter)
    }

    /// Queues `command` and wakes the thread; false once it is stopping.
    func post(_ command: NotifierCommand) -> Bool {
        let taken = state.withLock { state in
            guard !state.stopping else { return false }
            state.commands.append(command)
            return true
        }
        if taken { wake() }
        return taken
    }

    /// Asks the thread to end once the commands before this one ran.
    func stop() {
        state.withLock { $0.stopping = true }
        wake()
    }

    func wake() {
        var byte: UInt8 = 1
        // Only EAGAIN can fail here (the socket is full of wake-ups), and then the thread wakes anyway.
        _ = try? SystemCall.run("write") { write(wakeWriter, &byte, 1) }
    }

    /// The commands queued so far, and whether the thread is to end after them.
    func take() -> (commands: [NotifierCommand], stopping: Bool) {
        var bytes = [UInt8](repeating: 0, count: 64)
        while (try? SystemCall.run("read") { read(wakeDescriptor, &bytes, bytes.count) }) ?? 0 > 0 {}
        return state.withLock { state in
            defer { state.commands = [] }
            return (state.commands, state.stopping)
        }
    }
}

/// The notifier's thread. Everything here runs on it.
final class NotifierLoop {
    static let actionKeys = ["allow", "Allow", "deny", "Deny"]
    static let firstRetryMilliseconds: Int64 = 1000
    static let longestRetryMilliseconds: Int64 = 30_000

    private let inbox: NotifierInbox
    private let address: String
    private let logger: Logger
    /// The action handler's calls, in the order of the clicks.
    private let answers = DispatchQueue(label: "latchkey.notifications.answers")

    private var bus: SessionBus?
    private var prompts = ShownPrompts()
    /// Whether the server renders body markup (GetCapabilities' body-markup); without
    /// it bodies go as plain text, as the specification asks.
    private var bodyMarkup = true
    /// The server (unique name) `bodyMarkup` is about; nil: ask the next one.
    private var capabilitiesOf: String?
    /// When to connect again after the bus went away or could not be reached.
    private var retryAt: Int64?
    private var retryDelay = firstRetryMilliseconds
    private var lostConnection = false
    /// Failures already logged at info: each kind once, later ones at debug.
    private var reported: Set<SessionBusFailure> = []

    init(inbox: NotifierInbox, address: String, logger: Logger) {
        self.inbox = inbox
        self.address = address
        self.logger = logger
    }

    /// Runs until the inbox says stop, after the commands before that.
    func run() {
        while true {
            let (commands, stopping) = inbox.take()
            for command in commands { perform(command) }
            if stopping { break }
            if bus == nil, let retryAt, Self.now() >= retryAt {
                self.retryAt = nil
                showWaiting()
            }
            if let bus {
                do {
                    handle(try bus.process())
                } catch {
                    lost(error)
                }
            }
            wait()
        }
        bus = nil
        inbox.ended.signal()
    }

    // MARK: - Commands

    private func perform(_ command: NotifierCommand) {
        switch command {
        case .show(let requestId, let text, let actions, let timeout):
            let deadline = Self.now() + Int64(max(1, timeout))
            if actions {
                prompts.add(requestId: requestId, summary: text.summary, body: text.body, deadline: deadline)
                showWaiting()
            } else if connected() {
                // A notice (a conditional registration): shown once, nothing to answer.
                do {
                    _ = try notify(summary: text.summary, body: text.body, actions: false, deadline: deadline)
                } catch {
                    failed(error)
                }
            }
        case .withdraw(let requestId):
            guard let notification = prompts.remove(requestId: requestId), let bus else { return }
            do {
                try bus.closeNotification(notification.id)
            } catch {
                failed(error)
            }
        }
    }

    /// Shows the prompts that wait for a server, connecting first if need be.
    private func showWaiting() {
        let waiting = prompts.waiting(now: Self.now())
        guard !waiting.isEmpty, connected() else { return }
        for (requestId, prompt) in waiting {
            do {
                let notification = try notify(
                    summary: prompt.summary,
                    body: prompt.body,
                    actions: true,
                    deadline: prompt.deadline
                )
                prompts.shown(requestId: requestId, as: notification)
                logger.debug(
                    "notification shown",
                    metadata: [
                        "request": "\(requestId)", "notification": "\(notification.id)",
                        "server": "\(notification.server)",
                    ]
                )
            } catch {
                failed(error)
                // Without a server or a bus the others fail alike; they wait for the next one.
                if error.code != .call { return }
            }
        }
    }

    private func notify(
        summary: String,
        body: String,
        actions: Bool,
        deadline: Int64
    ) throws(SessionBusError) -> ShownPrompts.Notification {
        guard let bus else { throw SessionBusError(.connection, "not connected") }
        if capabilitiesOf == nil {
            do {
                let answer = try bus.capabilities()
                bodyMarkup = answer.names.contains("body-markup")
                capabilitiesOf = answer.server
                logger.debug(
                    "notification server capabilities",
                    metadata: ["server": "\(answer.server)", "body-markup": "\(bodyMarkup)"]
                )
            } catch {
                guard error.code == .call else { throw error }
                // A server that does not answer keeps markup: most render it, and escaped text is safe either way.
                logger.debug("GetCapabilities failed", metadata: ["error": "\(error)"])
            }
        }
        let shown = try bus.notify(
            summary: summary,
            body: bodyMarkup ? body : PromptSanitizer.unescape(body),
            actions: actions ? Self.actionKeys : [],
            urgency: actions ? 2 : 1,
            expireTimeout: Int32(clamping: max(1, deadline - Self.now()))
        )
        return ShownPrompts.Notification(id: shown.id, server: shown.server)
    }

    // MARK: - The bus

    /// Whether there is a connection, making one if there is none.
    private func connected() -> Bool {
        if bus != nil { return true }
        do {
            bus = try SessionBus(address: address)
        } catch {
            failed(error)
            scheduleRetry()
            return false
        }
        retryAt = nil
        retryDelay = Self.firstRetryMilliseconds
        capabilitiesOf = nil
        if lostConnection {
            lostConnection = false
            logger.notice("connected to the session bus again", metadata: ["address": "\(address)"])
        }
        return true
    }

    private func handle(_ signals: [BusSignal]) {
        var serverStarted = false
        for signal in signals {
            if case .serverChanged(let old, let new) = signal {
                logger.debug("notification server changed", metadata: ["old": "\(old)", "new": "\(new)"])
                if capabilitiesOf == old || !new.isEmpty { capabilitiesOf = nil }
                serverStarted = serverStarted || !new.isEmpty
            }
            guard let answer = prompts.receive(signal) else { continue }
            logger.info(
                "notification answered",
                metadata: ["request": "\(answer.requestId)", "action": "\(answer.action)"]
            )
            if let handler = inbox.state.withLock({ $0.onAction }) {
                answers.async { handler(answer.requestId, answer.action) }
            }
        }
        if serverStarted { showWaiting() }
    }

    /// Logs a failure (each kind once at info, then at debug); a lost connection is dropped.
    private func failed(_ error: SessionBusError) {
        if error.code == .connection, bus != nil, bus?.isOpen != true {
            lost(error)
            return
        }
        guard reported.insert(error.code).inserted else {
            logger.debug("\(error.code.title)", metadata: ["error": "\(error.reason)"])
            return
        }
        switch error.code {
        case .connection:
            logger.info(
                "cannot reach the session bus; trying again (logged once)",
                metadata: ["address": "\(address)", "error": "\(error.reason)"]
            )
        case .noServer:
            logger.info(
                "no notification server on the session bus; prompts are shown when one starts (logged once)",
                metadata: ["error": "\(error.reason)"]
            )
        case .call:
            logger.info("the notification server failed a call (logged once)", metadata: ["error": "\(error.reason)"])
        }
    }

    /// The connection ended: what it showed is gone; connect again later.
    private func lost(_ error: SessionBusError) {
        bus = nil
        prompts.disconnected()
        capabilitiesOf = nil
        if !lostConnection {
            lostConnection = true
            logger.notice(
                "the session bus connection ended; connecting again",
                metadata: ["address": "\(address)", "error": "\(error.reason)"]
            )
        }
        scheduleRetry()
    }

    private func scheduleRetry() {
        guard retryAt == nil else { return }
        retryAt = Self.now() + retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetryMilliseconds)
    }

    /// Sleeps until a command comes, the bus has something, sd-bus's deadline or
    /// the next connection attempt.
    private func wait() {
        var descriptors = [pollfd(fd: inbox.wakeDescriptor, events: Int16(POLLIN), revents: 0)]
        var deadline = retryAt
        if let bus {
            do {
                let request = try bus.pollRequest()
                descriptors.append(pollfd(fd: request.descriptor, events: request.events, revents: 0))
                if let busDeadline = request.deadline {
                    let milliseconds = Int64(clamping: (busDeadline + 999) / 1000)
                    deadline = min(deadline ?? milliseconds, milliseconds)
                }
            } catch {
                lost(error)
                deadline = retryAt
            }
        }
        let timeout = deadline.map { Int32(clamping: max(0, $0 - Self.now())) } ?? -1
        _ = try? SystemCall.run("poll") { poll(&descriptors, nfds_t(descriptors.count), timeout) }
    }

    /// CLOCK_MONOTONIC in milliseconds, the clock of sd-bus's deadlines.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}
