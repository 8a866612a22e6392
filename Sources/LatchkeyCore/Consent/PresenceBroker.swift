// User presence for the daemon's keys: each key's policy (Policy.swift)
// decides from its presence mode, its password-used signals and its
// settings; in `prompt` mode a request waits, visible through the control
// API (and as a desktop notification), until it is approved, denied, times
// out, or the host cancels it (CTAPHID_CANCEL cancels the engine's task,
// which ends the wait). Every decision is recorded with its reason. A key's
// queued CI overrides of the presence stage (approve, deny, timeout,
// uv-false) answer before the policy does, and every request and answer is
// published on the event bus. A prompt names the transport and, where the
// transport knows it, the requesting process (`Requester.current`), in the
// pending list, the presence.requested and presence.pending events and the
// notification (PromptText in LatchkeyNotifications).

import CTAP
import Foundation
import LatchkeyNotifications
import Logging
import Synchronization

/// A request waiting for a person, as the control API shows it: the
/// prompt's facts (id, key, operation, site, user, transport, requester;
/// `PromptFacts`) and its times, one flat JSON object.
@dynamicMemberLookup
public struct PendingPresence: Sendable, Equatable, Codable {
    /// What the prompt says; its id ("p-1", "p-2", …) is unique in this daemon's lifetime.
    public var prompt: PromptFacts
    /// Who shows it as a desktop notification.
    public var notification: PromptNotification
    /// How long it has waited, in milliseconds.
    public var ageMs: Int
    /// How long until it times out, in milliseconds.
    public var expiresInMs: Int

    public subscript<Value>(dynamicMember path: KeyPath<PromptFacts, Value>) -> Value { prompt[keyPath: path] }

    private enum CodingKeys: String, CodingKey {
        case notification, ageMs, expiresInMs
    }

    public init(prompt: PromptFacts, notification: PromptNotification, ageMs: Int, expiresInMs: Int) {
        self.prompt = prompt
        self.notification = notification
        self.ageMs = ageMs
        self.expiresInMs = expiresInMs
    }

    public init(from decoder: any Decoder) throws {
        prompt = try PromptFacts(from: decoder)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notification = try container.decode(PromptNotification.self, forKey: .notification)
        ageMs = try container.decode(Int.self, forKey: .ageMs)
        expiresInMs = try container.decode(Int.self, forKey: .expiresInMs)
    }

    public func encode(to encoder: any Encoder) throws {
        try prompt.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(notification, forKey: .notification)
        try container.encode(ageMs, forKey: .ageMs)
        try container.encode(expiresInMs, forKey: .expiresInMs)
    }
}

/// Who shows a prompt as a desktop notification (docs/prompts.md).
public enum PromptNotification: String, Sendable, Codable {
    /// latchkeyd itself, on its own session bus: the key belongs to the
    /// daemon's user (the user unit).
    case latchkeyd
    /// The owner's prompt agent (`latchkeyctl agent`), if one runs.
    case agent
    /// Nobody: the key's policy has `notifications = false`.
    case off
}

/// The daemon-wide list of pending requests, so that ids are unique across
/// keys and `latchkeyctl pending` shows every key's.
public final class PresenceBoard: Sendable {
    struct Entry {
        var id: String
        var key: String
        var facts: PromptFacts
        var notification: PromptNotification
        var created: ContinuousClock.Instant
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<PresenceAnswer, Never>
    }

    private let state = Mutex<(next: Int, entries: [Entry])>((1, []))
    /// Desktop notifications for prompts, when the daemon has them.
    package let notifier: DesktopNotifier?

    public init() { notifier = nil }

    /// A board whose prompts also show as desktop notifications, which answer them.
    package init(notifier: DesktopNotifier) {
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
                    prompt: entry.facts,
                    notification: entry.notification,
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

    /// Waits for an answer to the prompt `facts` for at most `timeout`;
    /// `announce` runs once the request is on the board, where an answer
    /// finds it (so that a notification or event it sends cannot be
    /// answered too early).
    func wait(
        facts: PromptFacts,
        notification: PromptNotification,
        timeout: Duration,
        logger: Logger,
        announce: @Sendable () -> Void
    ) async -> PresenceAnswer {
        let id = facts.id
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
                            key: facts.key,
                            facts: facts,
                            notification: notification,
                            created: now,
                            deadline: now + timeout,
                            continuation: continuation
                        )
                    )
                }
                logger.notice(
                    "presence requested; approve or deny with latchkeyctl",
                    metadata: [
                        "request": "\(id)", "operation": "\(facts.operation)", "rp": "\(facts.rpId ?? "-")",
                        "transport": "\(facts.transport ?? "-")",
                        "uid": "\(facts.requesterUid.map(String.init) ?? "-")",
                    ]
                )
                announce()
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

/// A makeCredential the policy approved conditionally, until the engine's
/// event for its credential arrives.
struct ConditionalApproval: Sendable {
    var rpId: String
    var userName: String
    var userId: [UInt8]?
    var decision: Int
}

/// One key's presence decisions: its mode, its timeout, its policy, the
/// board for prompts and the record of what it decided.
public final class PresenceBroker: UserPresence {
    /// The key's mode and prompt timeout.
    public struct Settings: Sendable, Equatable {
        public var mode: PresenceMode
        public var timeoutSeconds: Int
    }

    let key: String
    /// The key's owner (nil: the daemon's own user): the daemon's own
    /// notifications answer as the daemon's user, so they show only the
    /// prompts that user may answer (Keys/Access.swift, tier `answer`).
    let owner: UInt32?
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
    /// The path of the last decision, so that a run of refusals without a
    /// prompt is logged at notice once.
    private let lastPath = Mutex<PolicyPath?>(nil)

    init(
        key: String,
        owner: UInt32? = nil,
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
        self.owner = owner
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
    package var isWaiting: Bool { board.pending().contains { $0.key == key } }

    public func requestPresence(_ presenceRequest: PresenceRequest) async -> PresenceOutcome {
        let started = ContinuousClock.now
        let time = RFC3339.now()
        let request = presenceRequest
        let requester = Requester.current
        let settings = current
        eventBus?.publish(
            .presenceRequested, key: key,
            Self.promptFields(PromptFacts(request, id: "", key: key, requester: requester))
        )
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
        var promptId: String?
        switch decision.action {
        case .grant(let granted):
            outcome = granted
        case .refuse:
            outcome = .denied
        case .ask(let grantsUserVerification):
            let facts = PromptFacts(request, id: board.nextID(), key: key, requester: requester)
            let (notification, notifier) = notification()
            let timeoutMilliseconds = settings.timeoutSeconds * 1000
            let answer = await board.wait(
                facts: facts,
                notification: notification,
                timeout: .seconds(settings.timeoutSeconds),
                logger: logger
            ) { [eventBus, key] in
                notifier?.show(
                    requestId: facts.id, text: PromptText(prompt: facts), actions: true,
                    timeoutMilliseconds: timeoutMilliseconds
                )
                eventBus?.publish(
                    .presencePending, key: key,
                    Self.pendingFields(facts, notification: notification, expiresInMs: timeoutMilliseconds)
                )
            }
            notifier?.withdraw(requestId: facts.id)
            let now = clock.milliseconds
            policy.withLock { $0.promptAnswered(PolicyOutcome(answer.outcome), now: now) }
            outcome = PolicyOutcome(answer.outcome)
            if outcome == .approved && grantsUserVerification { outcome = .verified }
            reason += "; \(Self.verb(answer.outcome)) by \(answer.by) (\(facts.id))"
            promptId = facts.id
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
        // A refusal without a prompt is worth the journal's notice (someone
        // keeps asking), once per run of them rather than once per request.
        let level: Logger.Level =
            decision.path.refusesWithoutPrompt && lastPath.withLock({ $0 }) != decision.path ? .notice : .info
        lastPath.withLock { $0 = decision.path }
        logger.log(
            level: level,
            "presence \(outcome.rawValue)",
            metadata: [
                "operation": "\(request.operation.rawValue)", "rp": "\(request.rpId ?? "-")",
                "mode": "\(settings.mode.rawValue)", "path": "\(decision.path.rawValue)", "reason": "\(reason)",
                "decision": "\(record.id)", "transport": "\(requester?.transport.rawValue ?? "-")",
                "uid": "\(requester?.caller.map { String($0.uid) } ?? "-")",
            ]
        )
        var decisionFields = [
            "decision": "\(record.id)", "operation": record.operation, "path": record.path.rawValue,
            "outcome": record.outcome.rawValue, "reason": record.reason,
        ]
        decisionFields["rpId"] = record.rpId
        decisionFields["userName"] = record.userName
        events.withLock { $0 }.publish(PolicyEvent(type: "policy.decision", key: key, fields: decisionFields))
        publishAnswer(request, outcome: outcome, override: override, operation: operation, promptId: promptId)
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
        let (shown, notifier) = notification()
        if shown == .latchkeyd {
            notifier?.show(
                requestId: "c-\(key)-\(pending.decision)",
                text: PromptText(conditionalRegistration: key, rpId: pending.rpId, userName: pending.userName),
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

    /// Who shows this key's prompts as desktop notifications, and the
    /// daemon's notifier when it is latchkeyd: only for a key whose prompts
    /// the daemon's own user may answer (its session bus is that user's),
    /// and only while a session bus is there.
    private func notification() -> (PromptNotification, DesktopNotifier?) {
        guard policySettings.notifications else { return (.off, nil) }
        guard let notifier = board.notifier,
            AccessRules.allows(.answer, caller: .daemon, owner: owner ?? Caller.daemon.uid), notifier.isAvailable
        else { return (.agent, nil) }
        return (.latchkeyd, notifier)
    }

    /// presence.answered (and override.applied) on the event bus; `promptId`
    /// names the prompt that was answered, when there was one.
    private func publishAnswer(
        _ request: PolicyRequest,
        outcome: PolicyOutcome,
        override: OverrideAction?,
        operation: OverrideOperation,
        promptId: String?
    ) {
        guard let eventBus else { return }
        var fields = Self.promptFields(PromptFacts(request, id: promptId ?? "", key: key, requester: nil))
        fields["outcome"] = .string(outcome.rawValue)
        if let promptId { fields["request"] = .string(promptId) }
        if let override {
            fields["override"] = .string(override.rawValue)
            eventBus.publish(
                .overrideApplied, key: key,
                ["override": .string(override.rawValue), "operation": .string(operation.rawValue)]
            )
        }
        eventBus.publish(.presenceAnswered, key: key, fields)
    }

    /// What presence.requested, presence.pending and presence.answered say
    /// about a request: its operation, site and user, and (presence.requested
    /// and presence.pending) the transport and requester a transport bound.
    static func promptFields(_ facts: PromptFacts) -> [String: EventValue] {
        var fields: [String: EventValue] = [
            "operation": .string(facts.operation), "userVerification": .bool(facts.userVerification),
        ]
        fields["rpId"] = facts.rpId.map { .string($0) }
        fields["rpIdHash"] = facts.rpIdHash.map { .string($0) }
        fields["userName"] = facts.userName.map { .string($0) }
        fields["userDisplayName"] = facts.userDisplayName.map { .string($0) }
        fields["transport"] = facts.transport.map { .string($0) }
        fields["requesterUid"] = facts.requesterUid.map { .int(Int($0)) }
        fields["requesterUser"] = facts.requesterUser.map { .string($0) }
        fields["requesterPid"] = facts.requesterPid.map { .int(Int($0)) }
        fields["requesterExecutable"] = facts.requesterExecutable.map { .string($0) }
        fields["requesterAddress"] = facts.requesterAddress.map { .string($0) }
        return fields
    }

    /// presence.pending: the prompt's facts (the fields of its entry in
    /// GET /v1/presence/pending), who shows it and when it expires.
    static func pendingFields(
        _ facts: PromptFacts,
        notification: PromptNotification,
        expiresInMs: Int
    ) -> [String: EventValue] {
        promptFields(facts).merging(
            [
                "request": .string(facts.id), "notification": .string(notification.rawValue),
                "expiresInMs": .int(expiresInMs),
            ],
            uniquingKeysWith: { $1 }
        )
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
}

extension PromptFacts {
    /// The prompt for `request` of `key`, asked by `requester` (nil: no
    /// transport named one).
    init(_ request: PresenceRequest, id: String, key: String, requester: Requester?) {
        self.init(
            id: id,
            key: key,
            operation: request.operation.rawValue,
            rpId: request.rpId,
            rpIdHash: request.rpIdHash.map { $0.map { String(format: "%02x", $0) }.joined() },
            userName: request.userName,
            userDisplayName: request.userDisplayName,
            userVerification: request.userVerification,
            transport: requester?.transport.rawValue,
            requesterUid: requester?.caller?.uid,
            requesterUser: requester?.caller.flatMap { AccountNames.name(of: $0.uid) },
            requesterPid: requester?.caller?.pid,
            requesterExecutable: requester?.executable,
            requesterAddress: requester?.address
        )
    }
}

func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
}
