// User presence for the daemon's keys: each key's policy (Policy.swift)
// decides from its presence mode, its password-used signals and its
// settings; in `prompt` mode a request waits, visible through the control
// API (and as a desktop notification), until it is approved, denied, times
// out, or the host cancels it (CTAPHID_CANCEL cancels the engine's task,
// which ends the wait). Every decision is recorded with its reason. A key's
// queued CI overrides of the presence stage (approve, deny, timeout,
// uv-false) answer before the policy does, and every request and answer is
// published on the event bus.

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
    /// The platform asked for built-in user verification: approving grants it
    /// when the key's policy lets a person do so.
    public var userVerification: Bool
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
        var continuation: CheckedContinuation<PresenceAnswer, Never>
    }

    private let state = Mutex<(next: Int, entries: [Entry])>((1, []))
    /// Desktop notifications for prompts, when the daemon has them.
    let notifier: DesktopNotifier?

    public init() { notifier = nil }

    /// A board whose prompts also show as desktop notifications, which answer them.
    init(notifier: DesktopNotifier) {
        self.notifier = notifier
        notifier.setActionHandler { [weak self] id, action in
            guard let self else { return }
            switch action {
            case "allow": self.answer(id, .approved, by: "the desktop notification")
            case "deny": self.answer(id, .denied, by: "the desktop notification")
            default: break
            }
        }
    }

    /// Every pending request, oldest first.
    public func pending() -> [PendingPresence] {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.entries.map { entry in
                PendingPresence(
                    id: entry.id,
                    key: entry.key,
                    operation: entry.request.operation.rawValue,
                    rpId: entry.request.rpId,
                    userName: entry.request.userName,
                    userVerification: entry.request.userVerification,
                    ageMs: milliseconds(entry.created.duration(to: now)),
                    expiresInMs: max(0, milliseconds(now.duration(to: entry.deadline)))
                )
            }
        }
    }

    /// Answers the request `id`; false when there is no such request.
    /// `by` names who answered, for the decision's reason.
    @discardableResult
    public func answer(_ id: String, _ outcome: PresenceOutcome, by: String = "the control API") -> Bool {
        guard let entry = remove(id) else { return false }
        entry.continuation.resume(returning: PresenceAnswer(outcome: outcome, by: by))
        return true
    }

    /// Answers every pending request of `key` (used when a key is deleted or
    /// its mode changes away from prompt).
    func answerAll(key: String, _ outcome: PresenceOutcome, by: String = "the daemon") {
        let entries = state.withLock { state in
            let matching = state.entries.filter { $0.key == key }
            state.entries.removeAll { $0.key == key }
            return matching
        }
        for entry in entries { entry.continuation.resume(returning: PresenceAnswer(outcome: outcome, by: by)) }
    }

    /// A fresh request id ("p-1", "p-2", …).
    func nextID() -> String {
        state.withLock { state -> String in
            defer { state.next += 1 }
            return "p-\(state.next)"
        }
    }

    /// Waits for an answer to `request` for at most `timeout`.
    func wait(
        id: String,
        key: String,
        request: PresenceRequest,
        timeout: Duration,
        logger: Logger
    ) async -> PresenceAnswer {
        if Task.isCancelled { return PresenceAnswer(outcome: .cancelled, by: "the host (CTAPHID_CANCEL)") }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled, self.answer(id, .timedOut, by: "nobody in \(timeout)") {
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
                            id: id,
                            key: key,
                            request: request,
                            created: now,
                            deadline: now + timeout,
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
                if Task.isCancelled { self.answer(id, .cancelled, by: "the host (CTAPHID_CANCEL)") }
            }
        } onCancel: {
            self.answer(id, .cancelled, by: "the host (CTAPHID_CANCEL)")
        }
    }

    private func remove(_ id: String) -> Entry? {
        state.withLock { state in
            guard let index = state.entries.firstIndex(where: { $0.id == id }) else { return nil }
            return state.entries.remove(at: index)
        }
    }
}

/// An answer to a prompt and who gave it.
struct PresenceAnswer: Sendable, Equatable {
    var outcome: PresenceOutcome
    /// "the control API", "the desktop notification", "nobody in 30 seconds", …
    var by: String
}

/// What the broker asks the key about, for conditional registration. Bound
/// after the key's engine exists (the engine needs the broker first).
public struct KeyFacts: Sendable {
    /// IDs of the key's discoverable credentials for (rpId, userName or userId).
    public var passkeys: @Sendable (_ rpId: String, _ userName: String, _ userId: [UInt8]?) async -> [[UInt8]]?
    /// Whether a PIN is set; nil when it cannot be read.
    public var pinSet: @Sendable () async -> Bool?

    public init(
        passkeys: @escaping @Sendable (String, String, [UInt8]?) async -> [[UInt8]]?,
        pinSet: @escaping @Sendable () async -> Bool?
    ) {
        self.passkeys = passkeys
        self.pinSet = pinSet
    }
}

/// One key's presence decisions: its mode, its timeout, its policy, the
/// board for prompts and the record of what it decided.
/// A makeCredential the policy approved conditionally, until the engine's
/// event for its credential arrives.
struct ConditionalApproval: Sendable {
    var rpId: String
    var userName: String
    var userId: [UInt8]?
    var decision: Int
}

public final class PresenceBroker: UserPresence {
    /// The key's mode and prompt timeout.
    public struct Settings: Sendable, Equatable {
        public var mode: PresenceMode
        public var timeoutSeconds: Int
    }

    let key: String
    let board: PresenceBoard
    let logger: Logger
    /// The last decisions, for `GET /v1/keys/{name}/policy/decisions`.
    public let decisions = PolicyDecisionLog()
    private let settings: Mutex<Settings>
    private let policy: Mutex<PolicyEngine>
    private let facts = Mutex<KeyFacts?>(nil)
    private let events: Mutex<any PolicyEventSink>
    private let clock: any MonotonicClock
    /// Whether the key's engine offers built-in UV (getInfo's uv), fixed
    /// when the key starts from its configured user-verification.
    let builtInUserVerification: Bool
    /// The conditional approval whose credential the engine is making.
    private let conditionalApproval = Mutex<ConditionalApproval?>(nil)
    /// The key's CI overrides.
    let overrides: OverrideQueue
    /// Where presence.requested, presence.answered and override.applied go.
    let eventBus: EventBus?
    private let userVerified = Mutex(true)

    init(
        key: String,
        mode: PresenceMode,
        timeoutSeconds: Int,
        board: PresenceBoard,
        logger: Logger,
        policy: PolicySettings = PolicySettings(),
        builtInUserVerification: Bool = false,
        events: (any PolicyEventSink)? = nil,
        clock: any MonotonicClock = SystemMonotonicClock(),
        overrides: OverrideQueue = OverrideQueue(),
        eventBus: EventBus? = nil
    ) {
        self.builtInUserVerification = builtInUserVerification
        self.overrides = overrides
        self.eventBus = eventBus
        self.key = key
        self.board = board
        self.logger = logger
        self.settings = Mutex(Settings(mode: mode, timeoutSeconds: timeoutSeconds))
        self.policy = Mutex(PolicyEngine(settings: policy))
        self.events = Mutex(events ?? LoggingPolicyEventSink(logger: logger))
        self.clock = clock
    }

    /// The current mode and timeout.
    public var current: Settings { settings.withLock { $0 } }

    /// The current policy settings.
    public var policySettings: PolicySettings { policy.withLock { $0.settings } }

    /// Connects the key's facts (its store and PIN state).
    func bind(facts: KeyFacts) { self.facts.withLock { $0 = facts } }

    /// Sends the policy's events to `sink` from now on (the daemon's event bus).
    public func connect(events sink: any PolicyEventSink) { events.withLock { $0 = sink } }

    /// Changes the mode and/or timeout. Leaving `prompt` answers the waiting
    /// requests as the new mode would.
    public func update(mode: PresenceMode?, timeoutSeconds: Int?) {
        settings.withLock { settings in
            if let mode { settings.mode = mode }
            if let timeoutSeconds { settings.timeoutSeconds = timeoutSeconds }
        }
        switch mode {
        case .auto: board.answerAll(key: key, .approved, by: "presence mode auto (set while waiting)")
        case .deny: board.answerAll(key: key, .denied, by: "presence mode deny (set while waiting)")
        case .prompt, nil: break
        }
    }

    /// Changes the policy; the result must pass `PolicySettings.validate`
    /// for the key's current mode, and keep user-verification on the side of
    /// `deny` the engine was started on (getInfo's uv cannot change while a
    /// host may have read it), else nothing changes.
    public func update(policy overrides: PolicyOverrides) throws(ConfigurationError) -> PolicySettings {
        let mode = current.mode
        let builtIn = builtInUserVerification
        return try policy.withLock { (engine: inout PolicyEngine) throws(ConfigurationError) -> PolicySettings in
            let updated = overrides.applied(to: engine.settings)
            try updated.validate(mode: mode)
            if (updated.userVerification != .deny) != builtIn {
                throw ConfigurationError(
                    builtIn
                        ? "user-verification cannot become \"deny\" on a key started with built-in UV (its getInfo says uv)"
                        : "the key was started without built-in UV (user-verification \"deny\"); create it with a policy "
                            + "(POST /v1/keys {\"policy\": {\"userVerification\": ...}}) or set it in the configuration file"
                )
            }
            engine.settings = updated
            return updated
        }
    }

    /// Opens the conditional-registration window for (rpId, userName).
    public func passwordUsed(rpId: String, userName: String) -> PasswordSignal {
        let now = clock.milliseconds
        let signal = policy.withLock { $0.passwordUsed(rpId: rpId, userName: userName, now: now) }
        logger.info(
            "password-used signal: conditional registration window open",
            metadata: ["rp": "\(signal.rpId)", "user": "\(userName)", "seconds": "\((signal.expiresAt - now) / 1000)"]
        )
        return signal
    }

    /// The broker's clock (monotonic milliseconds), for signals' expiry times.
    var now: UInt64 { clock.milliseconds }

    /// The open password-used windows.
    public func openSignals() -> [PasswordSignal] {
        let now = clock.milliseconds
        return policy.withLock { $0.openSignals(now: now) }
    }

    /// Whether built-in user verification may succeed (WebDriver's
    /// isUserVerified): false turns every verification the policy would
    /// grant into presence alone, so the engine answers CTAP2_ERR_UV_INVALID.
    /// True leaves the policy to decide.
    public var isUserVerified: Bool {
        get { userVerified.withLock { $0 } }
        set { userVerified.withLock { $0 = newValue } }
    }

    /// Whether a request of this key is waiting for a person.
    var isWaiting: Bool { board.pending().contains { $0.key == key } }

    public func requestPresence(_ presenceRequest: PresenceRequest) async -> PresenceOutcome {
        let started = ContinuousClock.now
        let time = RFC3339.now()
        let request = presenceRequest
        let settings = current
        eventBus?.publish(.presenceRequested, key: key, Self.eventFields(request))
        let operation = Self.overrideOperation(request.operation)
        // uv-false waits for a request that asks for user verification.
        let override = overrides.take(.presence, operation: operation) {
            $0 != .uvFalse || request.userVerification
        }
        let decision: PolicyDecision
        if let override {
            decision = Self.decision(for: override, request)
        } else {
            decision = await decide(request, mode: settings.mode)
        }

        var outcome: PolicyOutcome
        var reason = decision.reason
        switch decision.action {
        case .grant(let granted):
            outcome = granted
        case .refuse:
            outcome = .denied
        case .ask(let grantsUserVerification):
            let id = board.nextID()
            let notify = policySettings.notifications ? board.notifier : nil
            notify?.show(
                requestId: id,
                summary: Self.summary(request),
                body: Self.body(request, key: key, id: id),
                actions: true,
                timeoutMilliseconds: settings.timeoutSeconds * 1000
            )
            let answer = await board.wait(
                id: id,
                key: key,
                request: presenceRequest,
                timeout: .seconds(settings.timeoutSeconds),
                logger: logger
            )
            notify?.withdraw(requestId: id)
            outcome = PolicyOutcome(answer.outcome)
            if outcome == .approved && grantsUserVerification { outcome = .verified }
            reason += "; \(Self.verb(answer.outcome)) by \(answer.by) (\(id))"
        }
        if outcome == .verified && !isUserVerified {
            outcome = .approved
            reason += "; built-in UV fails (isUserVerified false)"
        }

        let record = decisions.append(
            PolicyDecisionRecord(
                id: 0,
                time: time,
                operation: request.operation.rawValue,
                rpId: request.rpId,
                userName: request.userName,
                userVerification: request.userVerification,
                path: decision.path,
                outcome: outcome,
                reason: reason,
                durationMs: milliseconds(started.duration(to: .now))
            )
        )
        logger.info(
            "presence \(outcome.rawValue)",
            metadata: [
                "operation": "\(request.operation.rawValue)", "rp": "\(request.rpId ?? "-")",
                "mode": "\(settings.mode.rawValue)", "path": "\(decision.path.rawValue)", "reason": "\(reason)",
                "decision": "\(record.id)",
            ]
        )
        var decisionFields = [
            "decision": "\(record.id)", "operation": record.operation, "path": record.path.rawValue,
            "outcome": record.outcome.rawValue, "reason": record.reason,
        ]
        decisionFields["rpId"] = record.rpId
        decisionFields["userName"] = record.userName
        events.withLock { $0 }.publish(PolicyEvent(type: "policy.decision", key: key, fields: decisionFields))
        publishAnswer(request, outcome: outcome, override: override, operation: operation)
        // The engine makes the credential once presence returns; its
        // credential.created event then carries this decision (see
        // conditionalCreation). Any other decision ends an approval that
        // never led to a credential.
        conditionalApproval.withLock { pending in
            pending = nil
            if decision.path == .conditional, outcome.presenceOutcome.isApproval, let rpId = request.rpId,
                let userName = request.userName
            {
                pending = ConditionalApproval(
                    rpId: rpId, userName: userName, userId: request.userId, decision: record.id
                )
            }
        }
        return outcome.presenceOutcome
    }

    /// The policy's decision; the key's facts are read only when a
    /// password-used window could make it a conditional registration.
    private func decide(_ request: PolicyRequest, mode: PresenceMode) async -> PolicyDecision {
        let candidate = policy.withLock { engine in
            engine.settings.conditionalRegistration && request.operation == .makeCredential
                && engine.hasOpenSignal(rpId: request.rpId, userName: request.userName, now: clock.milliseconds)
        }
        var facts: PolicyFacts?
        if candidate, let provider = self.facts.withLock({ $0 }), let rpId = request.rpId,
            let userName = request.userName
        {
            if let passkeys = await provider.passkeys(rpId, userName, request.userId),
                let pinSet = await provider.pinSet()
            {
                facts = PolicyFacts(hasPasskey: !passkeys.isEmpty, pinSet: pinSet)
            }
        }
        let now = clock.milliseconds
        return policy.withLock { $0.decide(request, mode: mode, facts: facts, now: now) }
    }

    /// The engine's credential.created event for the makeCredential a
    /// conditional decision just approved: its fields gain the reason and
    /// the decision, the desktop is told, and the approval is spent (one
    /// event per decision). Any other creation gets nil.
    func conditionalCreation(_ event: AuthenticatorEvent) -> [String: EventValue]? {
        guard event.kind == .credentialCreated else { return nil }
        let pending = conditionalApproval.withLock { pending -> ConditionalApproval? in
            guard let approval = pending, approval.rpId == event.rpId,
                approval.userName == event.userName || (approval.userId != nil && approval.userId == event.userId)
            else { return nil }
            pending = nil
            return approval
        }
        guard let pending else { return nil }
        if policySettings.notifications {
            board.notifier?.show(
                requestId: "c-\(key)-\(pending.decision)",
                summary: "Passkey created",
                body: "latchkey key \(key) created a passkey for \(pending.userName) at \(pending.rpId) after its password was used.",
                actions: false,
                timeoutMilliseconds: 10_000
            )
        }
        return ["reason": .string("conditional"), "decision": .string("\(pending.decision)")]
    }

    /// An override's decision: it answers in place of the policy.
    static func decision(for override: OverrideAction, _ request: PolicyRequest) -> PolicyDecision {
        let action: PolicyDecision.Action
        switch override {
        // Approve grants built-in UV when asked: isUserVerified still decides.
        case .approve: action = .grant(request.userVerification ? .verified : .approved)
        case .deny: action = .refuse
        case .timeout: action = .grant(.timedOut)
        case .uvFalse: action = .grant(.approved)
        case .bogusSignature, .malformedResponse, .dropConnection:
            preconditionFailure("a response-stage override never reaches the presence decision")
        }
        return PolicyDecision(action: action, path: .override, reason: "override \(override.rawValue)")
    }

    /// presence.answered (and override.applied) on the event bus.
    private func publishAnswer(
        _ request: PolicyRequest,
        outcome: PolicyOutcome,
        override: OverrideAction?,
        operation: OverrideOperation
    ) {
        guard let eventBus else { return }
        var fields = Self.eventFields(request)
        fields["outcome"] = .string(outcome.rawValue)
        if let override {
            fields["override"] = .string(override.rawValue)
            eventBus.publish(
                .overrideApplied, key: key,
                ["override": .string(override.rawValue), "operation": .string(operation.rawValue)]
            )
        }
        eventBus.publish(.presenceAnswered, key: key, fields)
    }

    /// What presence.requested and presence.answered say about the request.
    static func eventFields(_ request: PolicyRequest) -> [String: EventValue] {
        var fields: [String: EventValue] = ["operation": .string(request.operation.rawValue)]
        if let rpId = request.rpId { fields["rpId"] = .string(rpId) }
        if let userName = request.userName { fields["userName"] = .string(userName) }
        if request.userVerification { fields["userVerification"] = .bool(true) }
        return fields
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

    static func verb(_ outcome: PresenceOutcome) -> String {
        switch outcome {
        case .approved: "approved"
        case .verified: "approved and verified"
        case .denied: "denied"
        case .timedOut: "not answered in time"
        case .cancelled: "withdrawn"
        }
    }

    static func summary(_ request: PolicyRequest) -> String {
        let site = request.rpId ?? "a site"
        switch request.operation {
        case .makeCredential: return "Create a passkey for \(site)?"
        case .getAssertion: return "Sign in to \(site)?"
        case .excludedCredential: return "Confirm the security key for \(site)?"
        case .reset: return "Reset the security key? Every passkey is erased"
        case .userVerificationToken:
            return "Verify yourself to the security key\(request.rpId.map { " for \($0)" } ?? "")?"
        default: return "Use the security key?"
        }
    }

    static func body(_ request: PolicyRequest, key: String, id: String) -> String {
        var text = "Key \(key), operation \(request.operation.rawValue)"
        if let userName = request.userName { text += ", user \(userName)" }
        if request.userVerification { text += ", with user verification" }
        return text + " (\(id)). Or answer with latchkeyctl approve|deny \(id)."
    }
}

func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
}
