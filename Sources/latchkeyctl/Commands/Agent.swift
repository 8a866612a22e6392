// `latchkeyctl agent`: the prompt agent of one person's desktop session, in
// the spirit of a polkit agent. A system latchkeyd has no session bus, so it
// cannot show its owners' prompts itself; each owner runs this (the user
// unit systemd/latchkey-agent.service) as themselves. It follows the
// daemon's events (which show the caller only its own keys), shows each
// `presence.pending` prompt as a desktop notification with Allow and Deny
// (PromptText, DesktopNotifier: the code latchkeyd's own notifications
// use), answers through the control API when one is clicked (the daemon lets
// only the key's owner answer), closes the notification when the request is
// answered elsewhere or times out, and reconnects when the daemon restarts.

import ArgumentParser
import Foundation
import Glibc
import LatchkeyContract
import LatchkeyNotifications
import Logging
import Synchronization

struct Agent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show your keys' presence requests as desktop notifications with Allow and Deny.",
        discussion: """
            Runs in your desktop session (the user unit latchkey-agent.service: \
            systemctl --user enable --now latchkey-agent) and shows each prompt of \
            a key you own as a notification on your session bus \
            (org.freedesktop.Notifications): the site, the user, the transport and \
            the program that asks. Allow or Deny answers it as you; a request \
            answered elsewhere or timed out closes its notification. When latchkeyd \
            restarts, the agent connects again. Prompts latchkeyd shows itself (its \
            own user's keys under the user unit) and keys with notifications = \
            false are left alone. Logs go to standard error (the journal, under \
            systemd). SIGTERM or Ctrl-C closes its notifications and ends it.

            Needs a session bus (DBUS_SESSION_BUS_ADDRESS, or $XDG_RUNTIME_DIR/bus); \
            a notification server that starts later shows the prompts still waiting.

            Examples:
              latchkeyctl agent
              latchkeyctl agent --key default --log-level debug
              latchkeyctl --socket /run/latchkeyd/control.sock agent
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(
        name: .shortAndLong,
        help: ArgumentHelp("Only this key's prompts.", valueName: "name"),
        transform: KeyName.argument
    )
    var key: KeyName?

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: String = "info"

    @Option(help: ArgumentHelp("The longest wait between attempts to reach latchkeyd.", valueName: "seconds"))
    var maxRetryDelay: Double = 30

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be trace, debug, info, notice, warning, error or critical.")
        }
        guard maxRetryDelay.isFinite, maxRetryDelay >= 0.1, maxRetryDelay <= 3600 else {
            throw ValidationError("--max-retry-delay must be between 0.1 and 3600 seconds.")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "latchkeyctl.agent")
        let notifier = DesktopNotifier(logger: logger)
        if let reason = notifier.unavailableReason {
            throw CtlError(
                .unavailable,
                "latchkeyctl agent cannot show notifications here: \(reason) (it needs a session bus, "
                    + "DBUS_SESSION_BUS_ADDRESS or $XDG_RUNTIME_DIR/bus)"
            )
        }
        let session = PromptAgent(client: global.client(), key: key, notifier: notifier, logger: logger)
        AgentSignals.install { session.stop() }
        await session.run(maxRetryDelay: .milliseconds(Int64(maxRetryDelay * 1000)))
    }
}

/// The agent's state: the prompts it shows, and the loop that follows the daemon.
final class PromptAgent: Sendable {
    private let client: ControlClient
    private let key: KeyName?
    private let notifier: DesktopNotifier
    private let logger: Logger

    private struct State {
        /// The prompts shown now, by request id.
        var shown: [String: PromptFacts] = [:]
        /// Requests this agent answered, so that their presence.answered is
        /// not reported as an answer from elsewhere.
        var answeredHere: Set<String> = []
    }
    private let state = Mutex(State())

    init(client: ControlClient, key: KeyName?, notifier: DesktopNotifier, logger: Logger) {
        self.client = client
        self.key = key
        self.notifier = notifier
        self.logger = logger
        notifier.setActionHandler { [weak self] id, action in
            self?.answer(id, approve: action == "allow")
        }
    }

    /// Follows the daemon until the process ends: each time the stream ends
    /// or cannot be opened, waits (1 s, doubling up to `maxRetryDelay`,
    /// back to 1 s after a stream was open) and connects again.
    func run(maxRetryDelay: Duration) async {
        let path = "/v1/events" + (key.map { "?key=\(ControlPath.segment($0.rawValue))" } ?? "")
        let first = min(Duration.seconds(1), maxRetryDelay)
        var delay = first
        while true {
            var connected = false
            do throws(CtlError) {
                try await EventStreamReader(client: client).follow(path) {
                    connected = true
                    logger.info(
                        "following presence requests",
                        metadata: [
                            "socket": "\(client.socket.path)", "uid": "\(getuid())",
                            "key": "\(key?.rawValue ?? "every key of this user")",
                        ]
                    )
                    reconcile()
                } handle: { name, data in
                    handle(name, data)
                    return true
                }
                logger.notice("latchkeyd closed the event stream (it stopped or restarted); connecting again")
            } catch {
                logger.warning(
                    "cannot follow latchkeyd's events",
                    metadata: ["error": "\(error.message)", "retry-in": "\(delay)"]
                )
            }
            if connected { delay = first }
            try? await Task.sleep(for: delay)
            if !connected { delay = min(delay * 2, maxRetryDelay) }
        }
    }

    /// Closes every notification this agent shows (before it exits).
    func stop() {
        let shown = state.withLock { state in
            defer { state.shown = [:] }
            return Array(state.shown.keys)
        }
        for id in shown { notifier.withdraw(requestId: id) }
        notifier.shutdown()
        logger.info("stopped", metadata: ["closed": "\(shown.count)"])
    }

    // MARK: - Events

    private func handle(_ name: String, _ data: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any] else {
            logger.debug("an event that is not a JSON object", metadata: ["event": "\(Sanitize.inline(name))"])
            return
        }
        switch name {
        case "presence.pending":
            // The event names the prompt `request`; its entry in the pending list `id`.
            var entry = object
            entry["id"] = object["request"]
            guard let prompt = Self.decode(entry) else {
                logger.warning("a presence.pending event without the fields of a prompt")
                return
            }
            show(prompt)
        case "presence.answered":
            guard let id = object["request"] as? String else { return }
            withdraw(id, outcome: object["outcome"] as? String ?? "answered")
        case "lost":
            logger.warning("latchkeyd dropped this agent's event stream (it read too slowly); connecting again")
        default:
            break
        }
    }

    /// What the agent needs of a pending list entry or a presence.pending event.
    struct Prompt {
        var facts: PromptFacts
        /// "latchkeyd", "agent" or "off" (PresenceBroker.swift, PromptNotification).
        var notification: String
        var expiresInMs: Int
    }

    private static func decode(_ object: [String: Any]) -> Prompt? {
        guard let data = try? JSONSerialization.data(withJSONObject: object),
            let facts = try? JSONDecoder().decode(PromptFacts.self, from: data),
            let expiresInMs = object["expiresInMs"] as? Int
        else { return nil }
        return Prompt(
            facts: facts,
            notification: object["notification"] as? String ?? "agent",
            expiresInMs: expiresInMs
        )
    }

    /// Once connected: shows what waits already, closes what ended while
    /// the agent was away.
    private func reconcile() {
        let response: ControlResponse
        do {
            response = try client.get(ControlPath.pending)
        } catch {
            logger.warning("cannot list the pending requests", metadata: ["error": "\(error.message)"])
            return
        }
        guard let entries = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [[String: Any]] else {
            logger.warning("latchkeyd's pending list is not a JSON array")
            return
        }
        let prompts = entries.compactMap(Self.decode).filter { key == nil || $0.facts.key == key?.rawValue }
        let live = Set(prompts.map(\.facts.id))
        let gone = state.withLock { state in Array(state.shown.keys.filter { !live.contains($0) }) }
        for id in gone { withdraw(id, outcome: "gone while the agent was away") }
        for prompt in prompts { show(prompt) }
    }

    private func show(_ prompt: Prompt) {
        let facts = prompt.facts
        var metadata = Self.metadata(facts)
        guard prompt.notification == "agent" else {
            metadata["shown-by"] = "\(prompt.notification == "off" ? "nobody (notifications = false)" : "latchkeyd")"
            logger.info("prompt not shown here", metadata: metadata)
            return
        }
        let isNew = state.withLock { state in
            guard state.shown[facts.id] == nil else { return false }
            state.shown[facts.id] = facts
            return true
        }
        guard isNew else { return }
        notifier.show(
            requestId: facts.id,
            text: PromptText(prompt: facts),
            actions: true,
            timeoutMilliseconds: max(1, prompt.expiresInMs)
        )
        logger.info("prompt shown", metadata: metadata)
    }

    private func withdraw(_ id: String, outcome: String) {
        let (facts, here) = state.withLock { state in
            (state.shown.removeValue(forKey: id), state.answeredHere.remove(id) != nil)
        }
        guard facts != nil else { return }
        notifier.withdraw(requestId: id)
        if !here {
            logger.info("prompt closed: answered elsewhere", metadata: ["request": "\(id)", "outcome": "\(outcome)"])
        }
    }

    /// A click on Allow or Deny: the answer goes to latchkeyd as this user.
    private func answer(_ id: String, approve: Bool) {
        state.withLock { _ = $0.answeredHere.insert(id) }
        let verb = approve ? "approve" : "deny"
        do {
            let response = try client.post(ControlPath.decide(pending: id, approve: approve))
            let decision = try response.decode(PresenceDecision.self)
            logger.notice(
                "answered from the notification",
                metadata: ["request": "\(id)", "outcome": "\(decision.outcome)"]
            )
        } catch {
            state.withLock { _ = $0.answeredHere.remove(id) }
            logger.warning(
                "latchkeyd did not take the answer",
                metadata: ["request": "\(id)", "answer": "\(verb)", "error": "\(error.message)"]
            )
        }
    }

    private static func metadata(_ facts: PromptFacts) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "request": "\(facts.id)", "key": "\(facts.key)", "operation": "\(Sanitize.inline(facts.operation))",
            "rp": "\(Sanitize.inline(facts.rpId ?? "-"))", "transport": "\(facts.transport ?? "-")",
        ]
        if let uid = facts.requesterUid { metadata["uid"] = "\(uid)" }
        if let pid = facts.requesterPid { metadata["pid"] = "\(pid)" }
        if let executable = facts.requesterExecutable { metadata["exe"] = "\(Sanitize.inline(executable))" }
        return metadata
    }
}

/// SIGTERM, SIGINT and SIGHUP end the agent after `stop` closed its notifications.
private enum AgentSignals {
    nonisolated(unsafe) static var sources: [any DispatchSourceSignal] = []

    static func install(_ stop: @escaping @Sendable () -> Void) {
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler {
                stop()
                exit(0)
            }
            source.resume()
            sources.append(source)
        }
    }
}
