// Desktop notifications for prompts: org.freedesktop.Notifications on the
// session bus, spoken through `gdbus` subprocesses rather than a D-Bus
// library (docs/CONTRIBUTING.md: dependencies are chosen; gdbus ships with GLib on
// every desktop that has a notification server). A prompt shows a
// notification with Allow and Deny actions; a `gdbus monitor` child reports
// ActionInvoked and NotificationClosed; a request that ends another way
// (latchkeyctl, timeout, CTAPHID_CANCEL) closes its notification. Without a
// session bus, gdbus or a server, this logs once and does nothing: the
// control API and `latchkeyctl watch` still answer prompts. latchkeyd uses it
// for the prompts of its own user's keys, `latchkeyctl agent` for its user's
// (docs/prompts.md); the text comes from PromptText.swift.

import Foundation
import Glibc
public import Logging
import Synchronization

/// Shows and withdraws notifications; calls `onAction` with the request id
/// and "allow" or "deny" when a person clicks one.
public final class DesktopNotifier: Sendable {
    public typealias ActionHandler = @Sendable (_ requestId: String, _ action: String) -> Void

    static let bus = "org.freedesktop.Notifications"
    static let objectPath = "/org/freedesktop/Notifications"
    /// Printed by the monitor's wrapper when `gdbus monitor` ends, so that it is restarted.
    static let monitorEnded = "latchkey: monitor ended"

    private struct State {
        var onAction: ActionHandler?
        /// notification id ↔ request id, for notifications still shown.
        var byNotification: [UInt32: String] = [:]
        var byRequest: [String: UInt32] = [:]
        /// Clicks seen before their Notify call returned (the monitor can be
        /// faster than gdbus call's exit): applied once it does.
        var earlyActions: [UInt32: String] = [:]
        var monitor: Process?
        /// gdbus monitor's own pid, which its wrapper prints first.
        var monitorPid: pid_t?
        var reportedUnavailable = false
        var reportedFailure = false
        /// Whether the server renders body markup (GetCapabilities'
        /// body-markup), asked once per monitor; without it bodies go as plain text.
        var bodyMarkup = true
    }

    private let gdbus: String?
    private let hasSessionBus: Bool
    private let logger: Logger
    private let state = Mutex(State())
    /// gdbus calls run here, in order (a Close never overtakes its Notify),
    /// off Swift's cooperative threads, which a slow bus must not block.
    private let queue = DispatchQueue(label: "latchkey.notifications")

    /// A notifier for the session bus `environment` names (nil: this process's).
    public init(environment: [String: String]? = nil, logger: Logger) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        self.logger = logger
        gdbus = Self.find("gdbus", path: environment["PATH"] ?? "/usr/bin:/bin")
        // gdbus finds the bus through DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus.
        hasSessionBus =
            environment["DBUS_SESSION_BUS_ADDRESS"].map { !$0.isEmpty }
            ?? environment["XDG_RUNTIME_DIR"].map { FileManager.default.fileExists(atPath: "\($0)/bus") } ?? false
    }

    public func setActionHandler(_ handler: @escaping ActionHandler) {
        state.withLock { $0.onAction = handler }
    }

    /// Whether notifications can be shown at all: gdbus is on PATH and a
    /// session bus is named (else this logs once why not).
    public var isAvailable: Bool { available() != nil }

    /// Why notifications cannot be shown here, or nil when they can; logs nothing.
    public var unavailableReason: String? {
        if gdbus == nil { return "no gdbus on PATH" }
        if !hasSessionBus { return "no session D-Bus" }
        return nil
    }

    /// Shows `text` for the pending request `requestId`, with Allow and Deny
    /// actions when `actions`.
    public func show(requestId: String, text: PromptText, actions: Bool, timeoutMilliseconds: Int) {
        guard let gdbus = available() else { return }
        queue.async { [self] in
            ensureMonitor(gdbus)
            let actionList = actions ? "@as ['allow', 'Allow', 'deny', 'Deny']" : "@as []"
            let markup = state.withLock { $0.bodyMarkup }
            let body = markup ? text.body : PromptSanitizer.unescape(text.body)
            let result = run(
                gdbus,
                Self.call + [
                    "--method", "\(Self.bus).Notify",
                    Self.literal("latchkey"), "uint32 0", Self.literal("security-high"),
                    Self.literal(text.summary), Self.literal(body), actionList,
                    "@a{sv} {'urgency': <byte \(actions ? 2 : 1)>, 'category': <'device'>}",
                    "int32 \(timeoutMilliseconds)",
                ]
            )
            guard let result, let id = Self.parseNotificationId(result) else {
                reportFailure("Notify failed: \(result.map { _ in "unexpected answer" } ?? "gdbus call failed")")
                return
            }
            guard actions else { return }
            let (early, handler) = state.withLock { state -> (String?, ActionHandler?) in
                if let action = state.earlyActions.removeValue(forKey: id) { return (action, state.onAction) }
                state.byNotification[id] = requestId
                state.byRequest[requestId] = id
                return (nil, nil)
            }
            if let early, let handler {
                logger.info("notification answered", metadata: ["request": "\(requestId)", "action": "\(early)"])
                handler(requestId, early)
            }
            logger.debug("notification shown", metadata: ["request": "\(requestId)", "notification": "\(id)"])
        }
    }

    /// The request ended (answered, timed out, cancelled): its notification goes.
    public func withdraw(requestId: String) {
        guard let gdbus = available() else { return }
        queue.async { [self] in
            let id = state.withLock { state -> UInt32? in
                // This runs on the queue after its show did: without an id here the
                // request has no notification (Notify failed, or the server closed it).
                guard let id = state.byRequest.removeValue(forKey: requestId) else { return nil }
                state.byNotification[id] = nil
                return id
            }
            if let id { close(gdbus, id) }
        }
    }

    /// Ends the monitor (daemon shutdown). SIGKILL, because the children
    /// inherit the daemon's blocked signal mask (its signal handling blocks
    /// SIGTERM; Process does not reset the mask), so SIGTERM would wait forever.
    public func shutdown() {
        // Let the queued calls (a Close for each withdrawn prompt) finish first.
        queue.sync {}
        let (monitor, gdbusPid) = state.withLock { state in
            defer {
                state.monitor = nil
                state.monitorPid = nil
            }
            return (state.monitor, state.monitorPid)
        }
        if let gdbusPid { kill(gdbusPid, SIGKILL) }
        guard let monitor, monitor.isRunning else { return }
        kill(monitor.processIdentifier, SIGKILL)
        monitor.waitUntilExit()
    }

    // MARK: - gdbus

    private static let call = [
        "call", "--session", "--timeout", "5", "--dest", bus, "--object-path", objectPath,
    ]

    /// gdbus's path, or nil (logged once) when notifications cannot work here.
    private func available() -> String? {
        guard let reason = unavailableReason else { return gdbus }
        let first = state.withLock { state in
            defer { state.reportedUnavailable = true }
            return !state.reportedUnavailable
        }
        if first {
            logger.info(
                "desktop notifications are off: \(reason)",
                metadata: [
                    "hint": "answer prompts with latchkeyctl agent (in a desktop session), watch or approve|deny"
                ]
            )
        }
        return nil
    }

    private func reportFailure(_ message: String) {
        let first = state.withLock { state in
            defer { state.reportedFailure = true }
            return !state.reportedFailure
        }
        if first {
            logger.info("\(message): no notification server on the session bus? (logged once)")
        } else {
            logger.debug("\(message)")
        }
    }

    private func close(_ gdbus: String, _ id: UInt32) {
        _ = run(gdbus, Self.call + ["--method", "\(Self.bus).CloseNotification", "uint32 \(id)"])
    }

    /// Asks the server whether it renders body markup; a server that does
    /// not would show the entities PromptText writes, so it gets plain text.
    /// A server that does not answer keeps markup (the specification's
    /// servers mostly render it; escaped text is safe either way).
    private func askCapabilities(_ gdbus: String) {
        guard let answer = run(gdbus, Self.call + ["--method", "\(Self.bus).GetCapabilities"]) else { return }
        let markup = Self.parseCapabilities(answer).contains("body-markup")
        state.withLock { $0.bodyMarkup = markup }
        logger.debug("notification server capabilities", metadata: ["body-markup": "\(markup)"])
    }

    /// Starts `gdbus monitor` unless it runs, and waits (a little) until it
    /// listens, so that a click right after Notify is not missed.
    private func ensureMonitor(_ gdbus: String) {
        guard state.withLock({ $0.monitor?.isRunning != true }) else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", Self.monitorScript, gdbus, Self.monitorEnded]
        let output = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            reportFailure("cannot start gdbus monitor: \(error)")
            return
        }
        state.withLock { $0.monitor = process }
        askCapabilities(gdbus)
        let listening = DispatchSemaphore(value: 0)
        let reader = output.fileHandleForReading
        let thread = Thread { [self] in
            var buffer: [UInt8] = []
            // The wrapper's pid line, then gdbus's: what it watches, then the name's owner, which
            // comes after a round trip to the bus that follows its AddMatch: from then on nothing is missed.
            var linesBeforeListening = 3
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                buffer.append(contentsOf: data)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    linesBeforeListening -= 1
                    if linesBeforeListening == 0 { listening.signal() }
                    handleMonitorLine(line)
                }
            }
            if linesBeforeListening > 0 { listening.signal() }
        }
        thread.name = "latchkey gdbus monitor"
        thread.start()
        _ = listening.wait(timeout: .now() + 2)
    }

    /// The wrapper: gdbus ($0) monitors in the background; the shell prints
    /// its pid (so that shutdown can SIGKILL it) and checks every second that
    /// both it and its parent (latchkeyd, latchkeyctl agent) still live: once
    /// the parent is gone (even killed with SIGKILL) it ends gdbus, which
    /// would outlive even its bus. When gdbus ends, $1 is printed so that the
    /// parent starts another. No `wait`
    /// builtin and no SIGTERM: both need signals the inherited mask blocks.
    static let monitorScript = """
        "$0" monitor --session --dest \(bus) --object-path \(objectPath) </dev/null &
        monitor=$!
        echo "pid $monitor"
        while kill -0 "$monitor" 2>/dev/null && kill -0 "$PPID" 2>/dev/null; do sleep 1; done
        kill -9 "$monitor" 2>/dev/null
        echo "$1"
        """

    private func handleMonitorLine(_ line: String) {
        if line.hasPrefix("pid "), let pid = pid_t(line.dropFirst(4)) {
            state.withLock { $0.monitorPid = pid }
            return
        }
        if line == Self.monitorEnded {
            state.withLock {
                $0.monitor = nil
                $0.monitorPid = nil
            }
            logger.debug("gdbus monitor ended")
            return
        }
        guard let signal = Self.parseSignal(line) else { return }
        let (requestId, handler) = state.withLock { state -> (String?, ActionHandler?) in
            guard let requestId = state.byNotification[signal.id] else {
                if case .action(let action) = signal.kind, state.earlyActions.count < 64 {
                    state.earlyActions[signal.id] = action
                }
                return (nil, nil)
            }
            switch signal.kind {
            case .action: return (requestId, state.onAction)
            case .closed:
                // Dismissed without a choice: the request keeps waiting for another answer.
                state.byNotification[signal.id] = nil
                state.byRequest[requestId] = nil
                return (nil, nil)
            }
        }
        if case .action(let action) = signal.kind, let requestId, let handler {
            logger.info("notification answered", metadata: ["request": "\(requestId)", "action": "\(action)"])
            handler(requestId, action)
        }
    }

    struct Signal: Equatable {
        enum Kind: Equatable {
            case action(String)
            case closed
        }
        var id: UInt32
        var kind: Kind
    }

    /// Parses a `gdbus monitor` line:
    /// `/org/freedesktop/Notifications: org.freedesktop.Notifications.ActionInvoked (uint32 7, 'allow')`
    /// or `… .NotificationClosed (uint32 7, uint32 2)`.
    static func parseSignal(_ line: String) -> Signal? {
        for (member, isAction) in [("ActionInvoked", true), ("NotificationClosed", false)] {
            guard let range = line.range(of: "\(bus).\(member) (uint32 ") else { continue }
            let rest = line[range.upperBound...]
            guard let comma = rest.firstIndex(of: ","), let id = UInt32(rest[..<comma]) else { return nil }
            guard isAction else { return Signal(id: id, kind: .closed) }
            let tail = rest[rest.index(after: comma)...].trimmingCharacters(in: .whitespaces)
            guard tail.hasSuffix(")") else { return nil }
            var quoted = String(tail.dropLast())
            guard quoted.count >= 2, let quote = quoted.first, quote == "'" || quote == "\"", quoted.last == quote
            else { return nil }
            quoted = String(quoted.dropFirst().dropLast())
            return Signal(id: id, kind: .action(quoted))
        }
        return nil
    }

    /// The names in GetCapabilities' answer, `(['actions', 'body'],)`.
    static func parseCapabilities(_ output: String) -> [String] {
        output.split(separator: "'", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// The id in Notify's answer, `(uint32 7,)`.
    static func parseNotificationId(_ output: String) -> UInt32? {
        let text = output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("(uint32 "), text.hasSuffix(",)") else { return nil }
        return UInt32(text.dropFirst("(uint32 ".count).dropLast(2))
    }

    /// A GVariant string literal: quoted, backslashes and quotes escaped, a
    /// line break as `\n`, other control characters made spaces (PromptText
    /// took them out of whatever a requester chose already).
    static func literal(_ text: String) -> String {
        var out = "'"
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "'": out += "\\'"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += " "
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "'"
    }

    /// Runs gdbus to completion; its standard output, or nil when it failed.
    private func run(_ gdbus: String, _ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: gdbus)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return nil
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private static func find(_ name: String, path: String) -> String? {
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
