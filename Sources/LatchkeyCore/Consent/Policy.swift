// The consent policy of a key, as a pure state machine: given a presence
// request, the key's presence mode, a few facts about the key and the time,
// it decides whether to grant at once, refuse at once or ask a person, and
// says why. It owns the password-used signals (conditional registration,
// README "Consent policy"), the per-rp rate limit of conditional
// registrations, and the limits on prompts (docs/prompts.md): at most so many
// prompts a minute, and none for a while after a person denied one. No I/O and
// no clock of its own, so every rule is unit-tested with an injected time; the
// `PresenceBroker` gathers the facts and performs the decision.

import CTAP

/// Whether built-in user verification may be granted for a key without
/// asking the engine for a PIN (Chromium demands UV for a discoverable
/// create: granted by policy in CI, never silently for a person).
public enum UserVerificationPolicy: String, Sendable, Codable, CaseIterable {
    /// Never: a request asking for built-in UV gets presence only.
    case deny
    /// A person's approval of the prompt also grants UV.
    case prompt
    /// Granted with presence, silently; only allowed with presence `auto`.
    case auto
}

/// What a request that fails a condition of conditional registration gets.
public enum MismatchAction: String, Sendable, Codable, CaseIterable {
    /// CTAP2_ERR_OPERATION_DENIED at once; nothing is shown.
    case deny
    /// The key's presence mode decides, as without the policy.
    case fallback
}

/// One key's policy settings (`[policy]`, overridden per key).
public struct PolicySettings: Sendable, Equatable, Codable {
    /// Built-in UV: deny, prompt or auto.
    public var userVerification: UserVerificationPolicy = .deny
    /// Whether password-used signals open conditional-registration windows.
    public var conditionalRegistration: Bool = true
    /// How long a password-used signal stays usable.
    public var signalWindowSeconds: Int = 300
    /// What a makeCredential that is not a conditional registration gets.
    public var onMismatch: MismatchAction = .fallback
    /// RP IDs (exact, or `*.example.com` for any subdomain) that may be
    /// registered conditionally; empty: every RP.
    public var allowRpIds: [String] = []
    /// RP IDs never registered conditionally; they win over `allowRpIds`.
    public var denyRpIds: [String] = []
    /// Conditional registration only on a key with a PIN.
    public var requirePin: Bool = false
    /// At most this many conditional registrations per RP in any hour.
    public var rateLimitPerHour: Int = 3
    /// Desktop notifications (org.freedesktop.Notifications) for prompts
    /// and conditional registrations.
    public var notifications: Bool = true
    /// At most this many prompts in any minute; more are refused without one.
    /// A person rarely answers more than a few; a requester that asks again
    /// and again to wear them down meets it.
    public var promptsPerMinute: Int = 10
    /// For this long after a person denied a prompt, requests that would ask
    /// are refused without one: a Deny is not followed at once by the same
    /// question (0: no cooldown).
    public var denyCooldownSeconds: Int = 10

    public init() {}

    /// Checks values the types alone cannot; `mode` is the key's presence mode.
    public func validate(mode: PresenceMode) throws(ConfigurationError) {
        guard (1...86400).contains(signalWindowSeconds) else {
            throw ConfigurationError("signal-window-seconds must be between 1 and 86400, not \(signalWindowSeconds)")
        }
        guard (0...10_000).contains(rateLimitPerHour) else {
            throw ConfigurationError("rate-limit-per-hour must be between 0 and 10000, not \(rateLimitPerHour)")
        }
        guard (1...1000).contains(promptsPerMinute) else {
            throw ConfigurationError("prompts-per-minute must be between 1 and 1000, not \(promptsPerMinute)")
        }
        guard (0...3600).contains(denyCooldownSeconds) else {
            throw ConfigurationError("deny-cooldown-seconds must be between 0 and 3600, not \(denyCooldownSeconds)")
        }
        // A person is never verified silently: silent UV only where nobody is asked anyway.
        if userVerification == .auto && mode != .auto {
            throw ConfigurationError(
                "user-verification = \"auto\" needs presence mode \"auto\" (the key's is \"\(mode.rawValue)\")"
            )
        }
        for pattern in allowRpIds + denyRpIds where !RPPattern.isValid(pattern) {
            throw ConfigurationError(
                "\"\(pattern)\" is not an RP ID pattern: give an RP ID (example.com) or *.example.com"
            )
        }
    }
}

/// Per-key overrides of `PolicySettings` (`[keys.policy]`, and the body of
/// `PUT /v1/keys/{name}/policy`): a nil field keeps the inherited value.
public struct PolicyOverrides: Sendable, Equatable, Codable {
    public var userVerification: UserVerificationPolicy?
    public var conditionalRegistration: Bool?
    public var signalWindowSeconds: Int?
    public var onMismatch: MismatchAction?
    public var allowRpIds: [String]?
    public var denyRpIds: [String]?
    public var requirePin: Bool?
    public var rateLimitPerHour: Int?
    public var notifications: Bool?
    public var promptsPerMinute: Int?
    public var denyCooldownSeconds: Int?

    public init() {}

    /// `settings` with every field given here replaced.
    public func applied(to settings: PolicySettings) -> PolicySettings {
        var result = settings
        if let userVerification { result.userVerification = userVerification }
        if let conditionalRegistration { result.conditionalRegistration = conditionalRegistration }
        if let signalWindowSeconds { result.signalWindowSeconds = signalWindowSeconds }
        if let onMismatch { result.onMismatch = onMismatch }
        if let allowRpIds { result.allowRpIds = allowRpIds }
        if let denyRpIds { result.denyRpIds = denyRpIds }
        if let requirePin { result.requirePin = requirePin }
        if let rateLimitPerHour { result.rateLimitPerHour = rateLimitPerHour }
        if let notifications { result.notifications = notifications }
        if let promptsPerMinute { result.promptsPerMinute = promptsPerMinute }
        if let denyCooldownSeconds { result.denyCooldownSeconds = denyCooldownSeconds }
        return result
    }
}

/// RP ID patterns of the allow and deny lists.
enum RPPattern {
    /// An RP ID, or `*.` followed by one: lowercase letters, digits, `-`
    /// and `.`, no empty label.
    static func isValid(_ pattern: String) -> Bool {
        let domain = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern
        guard !domain.isEmpty, domain.count <= 253 else { return false }
        return domain.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty
                && label.unicodeScalars.allSatisfy {
                    $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-")
                }
        }
    }

    /// Whether `rpId` matches `pattern`: equal (ignoring case), or, for
    /// `*.example.com`, a subdomain of example.com (not example.com itself,
    /// which a list names on its own when it should match).
    static func matches(_ pattern: String, _ rpId: String) -> Bool {
        let pattern = pattern.lowercased()
        let rpId = rpId.lowercased()
        if pattern.hasPrefix("*.") { return rpId.hasSuffix(String(pattern.dropFirst(1))) }
        return pattern == rpId
    }
}

/// The presence request as the policy sees it: exactly what the engine says
/// about the operation.
public typealias PolicyRequest = PresenceRequest

/// How a decided request ended, as the decision record names it.
public enum PolicyOutcome: String, Sendable, Equatable, Codable {
    case approved, verified, denied, timedOut, cancelled

    init(_ outcome: PresenceOutcome) {
        switch outcome {
        case .approved: self = .approved
        case .verified: self = .verified
        case .denied: self = .denied
        case .timedOut: self = .timedOut
        case .cancelled: self = .cancelled
        }
    }

    /// What the engine is told.
    var presenceOutcome: PresenceOutcome {
        switch self {
        case .approved: .approved
        case .verified: .verified
        case .denied: .denied
        case .timedOut: .timedOut
        case .cancelled: .cancelled
        }
    }
}

/// Which rule decided.
public enum PolicyPath: String, Sendable, Equatable, Codable {
    /// Presence mode auto.
    case auto
    /// Presence mode prompt: a person answered (or nobody did).
    case prompt
    /// Presence mode deny.
    case deny
    /// A conditional registration: a fresh password-used signal, every condition held.
    case conditional
    /// A makeCredential that failed a condition, refused by `on-mismatch = "deny"`.
    case mismatch
    /// A CI override queued through the control API answered (Overrides.swift).
    case override
    /// A prompt refused without being shown: prompts-per-minute were shown already.
    case rateLimit
    /// A prompt refused without being shown: a person denied one less than
    /// deny-cooldown-seconds ago.
    case cooldown

    /// Whether this path refused a request that would have asked a person.
    var refusesWithoutPrompt: Bool { self == .rateLimit || self == .cooldown }
}

/// The policy's verdict on one request.
public struct PolicyDecision: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Answer at once.
        case grant(PolicyOutcome)
        /// Refuse at once (CTAP2_ERR_OPERATION_DENIED).
        case refuse
        /// Ask a person; their approval grants UV too when `grantsUserVerification`.
        case ask(grantsUserVerification: Bool)
    }

    public var action: Action
    public var path: PolicyPath
    /// Why, in words for `latchkeyctl policy explain` and the log.
    public var reason: String
}

/// What the policy needs to know about the key for a makeCredential.
public struct PolicyFacts: Sendable, Equatable {
    /// The key stores a discoverable credential for the request's (rp, user).
    public var hasPasskey: Bool
    /// A PIN is set.
    public var pinSet: Bool
}

/// An open (or spent, or expired) password-used window.
public struct PasswordSignal: Sendable, Equatable {
    public var rpId: String
    public var userName: String
    /// Monotonic milliseconds.
    public var openedAt: UInt64
    public var expiresAt: UInt64
    public var used: Bool
}

/// A key's policy: settings, password-used signals and the rate limit's
/// history. Times are monotonic milliseconds given by the caller.
public struct PolicyEngine: Sendable {
    public var settings: PolicySettings
    private(set) var signals: [SignalKey: PasswordSignal] = [:]
    /// When each RP was last registered conditionally, oldest first.
    private(set) var conditionalTimes: [String: [UInt64]] = [:]
    /// When the prompts of the last minute were shown, oldest first.
    private(set) var promptTimes: [UInt64] = []
    /// When a person last denied a prompt.
    private(set) var deniedAt: UInt64?

    /// Signals are kept this long after they expire, so that a late request
    /// is told "expired" rather than "no signal".
    static let expiredSignalMemoryMilliseconds: UInt64 = 3_600_000
    /// At most this many signals are remembered (a flood forgets the oldest).
    static let maxSignals = 256
    static let hourMilliseconds: UInt64 = 3_600_000
    static let minuteMilliseconds: UInt64 = 60_000

    struct SignalKey: Hashable, Sendable {
        var rpId: String
        var userName: String

        init(rpId: String, userName: String) {
            // RP IDs are domains: case does not tell two apart. User names are the RP's, kept as given.
            self.rpId = rpId.lowercased()
            self.userName = userName
        }
    }

    public init(settings: PolicySettings) { self.settings = settings }

    /// Opens (or reopens, unused) the window for (rpId, userName).
    @discardableResult
    public mutating func passwordUsed(rpId: String, userName: String, now: UInt64) -> PasswordSignal {
        prune(now: now)
        let signal = PasswordSignal(
            rpId: rpId.lowercased(),
            userName: userName,
            openedAt: now,
            expiresAt: now + UInt64(settings.signalWindowSeconds) * 1000,
            used: false
        )
        signals[SignalKey(rpId: rpId, userName: userName)] = signal
        if signals.count > Self.maxSignals, let oldest = signals.min(by: { $0.value.openedAt < $1.value.openedAt }) {
            signals[oldest.key] = nil
        }
        return signal
    }

    /// The signals still open at `now`.
    public func openSignals(now: UInt64) -> [PasswordSignal] {
        signals.values.filter { !$0.used && $0.expiresAt > now }.sorted { $0.openedAt < $1.openedAt }
    }

    /// Whether a makeCredential for (rpId, userName) would find an open window:
    /// the broker gathers the facts (a store query) only then.
    func hasOpenSignal(rpId: String?, userName: String?, now: UInt64) -> Bool {
        guard let rpId, let userName, let signal = signals[SignalKey(rpId: rpId, userName: userName)] else {
            return false
        }
        return !signal.used && signal.expiresAt > now
    }

    /// Decides `request` for a key in presence `mode`. A conditional
    /// registration spends its signal and counts towards the rate limit; a
    /// prompt counts towards prompts-per-minute.
    public mutating func decide(
        _ request: PolicyRequest,
        mode: PresenceMode,
        facts: PolicyFacts?,
        now: UInt64
    ) -> PolicyDecision {
        limitPrompts(decideAll(request, mode: mode, facts: facts, now: now), now: now)
    }

    /// A person's answer to a prompt this policy let through: a Deny starts
    /// the cooldown.
    public mutating func promptAnswered(_ outcome: PolicyOutcome, now: UInt64) {
        if outcome == .denied { deniedAt = now }
    }

    /// `decision`, unless it would ask a person while the cooldown after a
    /// Deny runs or prompts-per-minute were shown in the last minute: then a
    /// refusal that shows nothing. The cooldown is checked first: it is the
    /// person's own answer.
    private mutating func limitPrompts(_ decision: PolicyDecision, now: UInt64) -> PolicyDecision {
        guard case .ask = decision.action else { return decision }
        let cooldown = UInt64(settings.denyCooldownSeconds) * 1000
        if let deniedAt, now - deniedAt < cooldown {
            return PolicyDecision(
                action: .refuse,
                path: .cooldown,
                reason: "\(decision.reason); refused without a prompt: a prompt was denied "
                    + "\(Self.seconds(now - deniedAt)) ago (deny-cooldown-seconds = \(settings.denyCooldownSeconds))"
            )
        }
        if promptTimes.count >= settings.promptsPerMinute {
            return PolicyDecision(
                action: .refuse,
                path: .rateLimit,
                reason: "\(decision.reason); refused without a prompt: \(promptTimes.count) "
                    + "prompt\(promptTimes.count == 1 ? "" : "s") in the last minute "
                    + "(prompts-per-minute = \(settings.promptsPerMinute))"
            )
        }
        promptTimes.append(now)
        return decision
    }

    private mutating func decideAll(
        _ request: PolicyRequest,
        mode: PresenceMode,
        facts: PolicyFacts?,
        now: UInt64
    ) -> PolicyDecision {
        prune(now: now)
        let isRegistration = request.operation == .makeCredential || request.operation == .excludedCredential
        guard settings.conditionalRegistration, isRegistration else { return presence(request, mode: mode, note: nil) }
        if let mismatch = conditionalMismatch(request, facts: facts, now: now) {
            switch settings.onMismatch {
            case .deny:
                return PolicyDecision(
                    action: .refuse,
                    path: .mismatch,
                    reason: "not a conditional registration: \(mismatch); on-mismatch = deny"
                )
            case .fallback:
                return presence(request, mode: mode, note: "not a conditional registration: \(mismatch)")
            }
        }
        // Every condition holds (conditionalMismatch checked rpId and userName exist).
        let key = SignalKey(rpId: request.rpId!, userName: request.userName!)
        let signal = signals[key]!
        signals[key]?.used = true
        conditionalTimes[key.rpId, default: []].append(now)
        let grantsUV = request.userVerification && settings.userVerification == .auto && mode == .auto
        return PolicyDecision(
            action: .grant(grantsUV ? .verified : .approved),
            path: .conditional,
            reason: "conditional registration: password used for \(signal.userName) at \(signal.rpId) "
                + "\(Self.seconds(now - signal.openedAt)) ago"
                + (request.userVerification && !grantsUV ? "; built-in UV not granted (presence only)" : "")
        )
    }

    /// The first condition of conditional registration that fails, in the
    /// order a person would look for it; nil when all hold.
    private func conditionalMismatch(_ request: PolicyRequest, facts: PolicyFacts?, now: UInt64) -> String? {
        // The excludeList's touch proves a credential exists; a silent answer would let a page probe for it.
        if request.operation == .excludedCredential {
            return "the request's excludeList names a credential on this key"
        }
        guard let rpId = request.rpId, let userName = request.userName else {
            return "the request names no user"
        }
        guard let signal = signals[SignalKey(rpId: rpId, userName: userName)] else {
            return "no password-used signal for \(userName) at \(rpId)"
        }
        if signal.used { return "the password-used signal for \(userName) at \(rpId) was used already" }
        if signal.expiresAt <= now {
            return
                "the password-used signal for \(userName) at \(rpId) expired \(Self.seconds(now - signal.expiresAt)) ago"
        }
        if let pattern = settings.denyRpIds.first(where: { RPPattern.matches($0, rpId) }) {
            return "\(rpId) is denied by the policy (\(pattern))"
        }
        if !settings.allowRpIds.isEmpty, !settings.allowRpIds.contains(where: { RPPattern.matches($0, rpId) }) {
            return "\(rpId) is not in the policy's allowed RPs"
        }
        guard let facts else { return "the key's credentials could not be read" }
        if facts.hasPasskey { return "the key already has a passkey for \(userName) at \(rpId)" }
        if settings.requirePin && !facts.pinSet { return "the policy requires a PIN and none is set" }
        let recent = conditionalTimes[rpId.lowercased(), default: []].filter { now - $0 < Self.hourMilliseconds }
        if recent.count >= settings.rateLimitPerHour {
            return "rate limit: \(recent.count) conditional registration\(recent.count == 1 ? "" : "s") at \(rpId) "
                + "in the last hour (rate-limit-per-hour = \(settings.rateLimitPerHour))"
        }
        return nil
    }

    /// The presence mode's answer, with built-in UV as the policy allows.
    private func presence(_ request: PolicyRequest, mode: PresenceMode, note: String?) -> PolicyDecision {
        var parts: [String] = note.map { [$0] } ?? []
        var grantsUV = false
        if request.userVerification {
            switch settings.userVerification {
            case .auto where mode == .auto:
                grantsUV = true
                parts.append("built-in UV granted (user-verification = auto)")
            case .auto:
                // Validation keeps this apart; a later mode change through the API can still meet it.
                parts.append("built-in UV refused: user-verification = auto needs presence auto")
            case .prompt:
                grantsUV = true
                parts.append("built-in UV needs a person's approval (user-verification = prompt)")
            case .deny:
                parts.append("built-in UV refused (user-verification = deny)")
            }
        }
        let decision: PolicyDecision
        switch mode {
        case .auto where request.userVerification && settings.userVerification == .prompt:
            decision = PolicyDecision(action: .ask(grantsUserVerification: true), path: .prompt, reason: "")
            parts.insert("presence auto", at: 0)
        case .auto:
            decision = PolicyDecision(action: .grant(grantsUV ? .verified : .approved), path: .auto, reason: "")
            parts.insert("presence auto", at: 0)
        case .deny:
            decision = PolicyDecision(action: .refuse, path: .deny, reason: "")
            parts.insert("presence deny", at: 0)
        case .prompt:
            decision = PolicyDecision(action: .ask(grantsUserVerification: grantsUV), path: .prompt, reason: "")
            parts.insert("presence prompt", at: 0)
        }
        var result = decision
        result.reason = parts.joined(separator: "; ")
        return result
    }

    private mutating func prune(now: UInt64) {
        promptTimes.removeAll { now - $0 >= Self.minuteMilliseconds }
        signals = signals.filter { $0.value.expiresAt + Self.expiredSignalMemoryMilliseconds > now }
        for (rp, times) in conditionalTimes {
            let kept = times.filter { now - $0 < Self.hourMilliseconds }
            conditionalTimes[rp] = kept.isEmpty ? nil : kept
        }
    }

    static func seconds(_ milliseconds: UInt64) -> String {
        milliseconds < 1000 ? "\(milliseconds) ms" : "\(milliseconds / 1000) s"
    }
}
