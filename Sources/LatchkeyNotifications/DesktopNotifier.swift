// Desktop notifications for prompts: org.freedesktop.Notifications on the
// session bus. A prompt shows a notification with Allow and Deny actions; a
// click calls the action handler; a request that ends another way
// (latchkeyctl, timeout, CTAPHID_CANCEL) closes its notification. Notify,
// CloseNotification and GetCapabilities go out, and ActionInvoked and
// NotificationClosed come back, on one long-lived connection (SessionBus,
// through sd-bus): a server sends those signals to the connection that called
// Notify (dunst only to it), so the connection that shows a prompt is the one
// that hears its click. The connection belongs to a thread of its own
// (NotifierLoop.swift), started by the first prompt. Without a session bus this
// logs once and does nothing; without a notification server it logs once and
// shows the prompts still waiting when one starts: the control API and
// `latchkeyctl watch` answer prompts meanwhile. latchkeyd uses it for the
// prompts of its own user's keys, `latchkeyctl agent` for its user's
// (docs/prompts.md); the text comes from PromptText.swift.

import Foundation
public import Logging
import Synchronization

/// Shows and withdraws notifications; calls `onAction` with the request id
/// and "allow" or "deny" when a person clicks one.
public final class DesktopNotifier: Sendable {
    public typealias ActionHandler = @Sendable (_ requestId: String, _ action: String) -> Void

    private struct State {
        var started = false
        var reportedUnavailable = false
    }

    /// The session bus's D-Bus address, or nil when none is named.
    private let address: String?
    /// Why the notifier cannot work (no socket to wake its thread), or nil.
    private let setupFailure: String?
    private let inbox: NotifierInbox?
    private let logger: Logger
    private let state = Mutex(State())

    /// A notifier for the session bus `environment` names (nil: this process's).
    public init(environment: [String: String]? = nil, logger: Logger) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        self.logger = logger
        address = Self.sessionBusAddress(environment)
        do {
            inbox = try NotifierInbox()
            setupFailure = nil
        } catch {
            inbox = nil
            setupFailure = "\(error)"
        }
    }

    deinit {
        inbox?.stop()
    }

    public func setActionHandler(_ handler: @escaping ActionHandler) {
        inbox?.state.withLock { $0.onAction = handler }
    }

    /// Whether notifications can be shown at all: a session bus is named (else
    /// this logs once why not). Whether a server shows them is known only later.
    public var isAvailable: Bool { available() != nil }

    /// Why notifications cannot be shown here, or nil when they can; logs nothing.
    public var unavailableReason: String? {
        if address == nil { return "no session D-Bus" }
        return setupFailure
    }

    /// Shows `text` for the pending request `requestId`, with Allow and Deny
    /// actions when `actions`.
    public func show(requestId: String, text: PromptText, actions: Bool, timeoutMilliseconds: Int) {
        guard let inbox = available() else { return }
        _ = inbox.post(
            .show(requestId: requestId, text: text, actions: actions, timeoutMilliseconds: timeoutMilliseconds)
        )
    }

    /// The request ended (answered, timed out, cancelled): its notification goes.
    public func withdraw(requestId: String) {
        guard let inbox = available() else { return }
        _ = inbox.post(.withdraw(requestId: requestId))
    }

    /// Runs what is queued (a Close for each withdrawn prompt), then closes the
    /// connection and ends the thread. Waits at most a few seconds: a hung bus
    /// does not hold the process's exit.
    public func shutdown() {
        guard let inbox else { return }
        let started = state.withLock { $0.started }
        inbox.stop()
        if started { _ = inbox.ended.wait(timeout: .now() + 5) }
    }

    /// The inbox, its thread started, or nil (logged once) when notifications cannot work here.
    private func available() -> NotifierInbox? {
        if let reason = unavailableReason {
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
        guard let inbox, let address else { return nil }
        let start = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        if start {
            // The thread holds the inbox and its loop, not the notifier: a notifier
            // that goes away stops it (deinit).
            let logger = logger
            let thread = Thread { NotifierLoop(inbox: inbox, address: address, logger: logger).run() }
            thread.name = "latchkey notifications"
            thread.start()
        }
        return inbox
    }

    /// The address DBUS_SESSION_BUS_ADDRESS gives, else $XDG_RUNTIME_DIR/bus when
    /// that socket exists (as sd-bus and GLib find the session bus), else nil.
    static func sessionBusAddress(_ environment: [String: String]) -> String? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty,
            FileManager.default.fileExists(atPath: "\(runtime)/bus")
        else { return nil }
        return "unix:path=" + escapeAddressValue("\(runtime)/bus")
    }

    /// A value in a D-Bus address: bytes other than [-0-9A-Za-z_/.\*] as %XX (D-Bus
    /// Specification, "Server Addresses").
    static func escapeAddressValue(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            let scalar = Unicode.Scalar(byte)
            if ("0"..."9").contains(scalar) || ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
                || "-_/.\\*".unicodeScalars.contains(scalar)
            {
                out.unicodeScalars.append(scalar)
            } else {
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
