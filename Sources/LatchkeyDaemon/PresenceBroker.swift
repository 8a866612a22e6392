// User presence for the daemon's keys: the mode of each key decides, and in
// `prompt` mode a request waits, visible through the control API, until it is
// approved, denied, times out, or the host cancels it (CTAPHID_CANCEL cancels
// the engine's task, which ends the wait). A key's queued CI overrides of
// the presence stage (deny, timeout, uv-false) answer before the mode does;
// every request and answer is published on the event bus.

import CTAP
import Foundation
import Logging
import Synchronization

/// A request waiting for a person, as the control API shows it.
public struct PendingPresence: Sendable, Equatable, Codable {
    /// The request's id ("p-1", "p-2", …), unique in this daemon's lifetime.
    public var id: String
    /// The key's name.
    public var key: String
    /// The operation (`PresenceRequest.Operation` raw value).
    public var operation: String
    /// The relying party, when known.
    public var rpId: String?
    /// The user name, when known.
    public var userName: String?
    /// How long it has waited, in milliseconds.
    public var ageMs: Int
    /// How long until it times out, in milliseconds.
    public var expiresInMs: Int
}

/// The daemon-wide list of pending requests, so that ids are unique across
/// keys and `latchkeyctl pending` shows every key's.
public final class PresenceBoard: Sendable {
    struct Entry {
        var id: String
        var key: String
        var request: PresenceRequest
        var created: ContinuousClock.Instant
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<PresenceOutcome, Never>
    }

    private let state = Mutex<(next: Int, entries: [Entry])>((1, []))

    public init() {}

    /// Every pending request, oldest first.
    public func pending() -> [PendingPresence] {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.entries.map { entry in
                PendingPresence(
                    id: entry.id, key: entry.key, operation: entry.request.operation.rawValue,
                    rpId: entry.request.rpId, userName: entry.request.userName,
                    ageMs: milliseconds(entry.created.duration(to: now)),
                    expiresInMs: max(0, milliseconds(now.duration(to: entry.deadline)))
                )
            }
        }
    }

    /// Answers the request `id`; false when there is no such request.
    @discardableResult
    public func answer(_ id: String, _ outcome: PresenceOutcome) -> Bool {
        guard let entry = remove(id) else { return false }
        entry.continuation.resume(returning: outcome)
        return true
    }

    /// Answers every pending request of `key` (used when a key is deleted or
    /// its mode changes away from prompt).
    func answerAll(key: String, _ outcome: PresenceOutcome) {
        let entries = state.withLock { state in
            let matching = state.entries.filter { $0.key == key }
            state.entries.removeAll { $0.key == key }
            return matching
        }
        for entry in entries { entry.continuation.resume(returning: outcome) }
    }

    /// Waits for an answer to `request` for at most `timeout`.
    func wait(key: String, request: PresenceRequest, timeout: Duration, logger: Logger) async -> PresenceOutcome {
        let id = state.withLock { state -> String in
            defer { state.next += 1 }
            return "p-\(state.next)"
        }
        if Task.isCancelled { return .cancelled }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled, self.answer(id, .timedOut) {
                logger.info("presence request timed out", metadata: ["request": "\(id)"])
            }
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = ContinuousClock.now
                state.withLock { state in
                    state.entries.append(
                        Entry(
                            id: id, key: key, request: request, created: now, deadline: now + timeout,
                            continuation: continuation
                        )
                    )
                }
                logger.notice(
                    "presence requested; approve or deny with latchkeyctl",
                    metadata: [
                        "request": "\(id)", "operation": "\(request.operation.rawValue)",
                        "rp": "\(request.rpId ?? "-")",
                    ]
                )
                // A cancellation that raced ahead of the append must still end the wait.
                if Task.isCancelled { self.answer(id, .cancelled) }
            }
        } onCancel: {
            self.answer(id, .cancelled)
        }
    }

    private func remove(_ id: String) -> Entry? {
        state.withLock { state in
            guard let index = state.entries.firstIndex(where: { $0.id == id }) else { return nil }
            return state.entries.remove(at: index)
        }
    }
}

/// One key's presence decisions: its mode, its timeout, and the board for prompts.
public final class PresenceBroker: UserPresence {
    /// The key's mode and prompt timeout.
    public struct Settings: Sendable, Equatable {
        public var mode: PresenceMode
        public var timeoutSeconds: Int
    }

    let key: String
    let board: PresenceBoard
    let logger: Logger
    /// The key's CI overrides.
    let overrides: OverrideQueue
    let events: EventBus?
    private let settings: Mutex<Settings>
    private let userVerified = Mutex(false)

    init(
        key: String,
        mode: PresenceMode,
        timeoutSeconds: Int,
        board: PresenceBoard,
        logger: Logger,
        overrides: OverrideQueue = OverrideQueue(),
        events: EventBus? = nil
    ) {
        self.key = key
        self.board = board
        self.logger = logger
        self.overrides = overrides
        self.events = events
        self.settings = Mutex(Settings(mode: mode, timeoutSeconds: timeoutSeconds))
    }

    /// The current mode and timeout.
    public var current: Settings { settings.withLock { $0 } }

    /// Changes the mode and/or timeout. Leaving `prompt` answers the waiting
    /// requests as the new mode would.
    public func update(mode: PresenceMode?, timeoutSeconds: Int?) {
        settings.withLock { settings in
            if let mode { settings.mode = mode }
            if let timeoutSeconds { settings.timeoutSeconds = timeoutSeconds }
        }
        switch mode {
        case .auto: board.answerAll(key: key, .approved)
        case .deny: board.answerAll(key: key, .denied)
        case .prompt, nil: break
        }
    }

    /// What the key's built-in user verification answers (WebDriver's
    /// isUserVerified); only asked when the key has built-in UV.
    public var isUserVerified: Bool {
        get { userVerified.withLock { $0 } }
        set { userVerified.withLock { $0 = newValue } }
    }

    /// Whether a request of this key is waiting for a person.
    var isWaiting: Bool { board.pending().contains { $0.key == key } }

    public func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome {
        let settings = current
        var fields: [String: EventValue] = ["operation": .string(request.operation.rawValue)]
        if let rpId = request.rpId { fields["rpId"] = .string(rpId) }
        if let userName = request.userName { fields["userName"] = .string(userName) }
        if request.userVerification { fields["userVerification"] = .bool(true) }
        events?.publish(.presenceRequested, key: key, fields)
        var outcome: PresenceOutcome
        let operation = Self.overrideOperation(request.operation)
        // uv-false waits for a request that asks for user verification.
        let override = overrides.take(.presence, operation: operation) {
            $0 != .uvFalse || request.userVerification
        }
        switch (override, settings.mode) {
        case (.approve?, _): outcome = .approved
        case (.deny?, _): outcome = .denied
        case (.timeout?, _): outcome = .timedOut
        case (.uvFalse?, _): outcome = .approved
        case (_, .auto): outcome = .approved
        case (_, .deny): outcome = .denied
        case (_, .prompt):
            outcome = await board.wait(
                key: key, request: request, timeout: .seconds(settings.timeoutSeconds), logger: logger
            )
        }
        // Built-in user verification, when asked for, answers as the key is
        // set to, unless an override made it fail.
        if request.userVerification, outcome == .approved, override != .uvFalse, isUserVerified {
            outcome = .verified
        }
        fields["outcome"] = .string(Self.name(outcome))
        if let override {
            fields["override"] = .string(override.rawValue)
            events?.publish(
                .overrideApplied, key: key,
                ["override": .string(override.rawValue), "operation": .string(operation.rawValue)]
            )
        }
        events?.publish(.presenceAnswered, key: key, fields)
        logger.info(
            "presence \(outcome)",
            metadata: [
                "operation": "\(request.operation.rawValue)", "rp": "\(request.rpId ?? "-")",
                "mode": "\(settings.mode.rawValue)", "override": "\(override?.rawValue ?? "-")",
            ]
        )
        return outcome
    }

    /// The override operation a presence request belongs to.
    static func overrideOperation(_ operation: PresenceRequest.Operation) -> OverrideOperation {
        switch operation {
        case .makeCredential, .excludedCredential, .u2fRegister: .makeCredential
        case .getAssertion, .u2fAuthenticate: .getAssertion
        case .reset: .reset
        case .selection, .touchProbe: .selection
        case .userVerificationToken: .clientPIN
        }
    }

    /// An outcome as events name it.
    static func name(_ outcome: PresenceOutcome) -> String {
        switch outcome {
        case .approved: "approved"
        case .verified: "verified"
        case .denied: "denied"
        case .timedOut: "timedOut"
        case .cancelled: "cancelled"
        }
    }
}

func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
}
