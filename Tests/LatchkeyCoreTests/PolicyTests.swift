// The consent policy as a pure function of its inputs and an injected time:
// presence modes, built-in UV, conditional registration's conditions in
// order, one use per signal, expiry, rp patterns and the per-rp rate limit.

import CTAP
import Foundation
import Logging
import Synchronization
import Testing

@testable import LatchkeyCore

@Suite("policy")
struct PolicyTests {
    static let noPasskey = PolicyFacts(hasPasskey: false, pinSet: false)

    static func create(_ rp: String = "example.com", _ user: String = "alice", uv: Bool = false) -> PolicyRequest {
        PolicyRequest(operation: .makeCredential, rpId: rp, userName: user, discoverable: true, userVerification: uv)
    }

    static func engine(_ change: (inout PolicySettings) -> Void = { _ in }) -> PolicyEngine {
        var settings = PolicySettings()
        change(&settings)
        return PolicyEngine(settings: settings)
    }

    @Test(
        "presence modes decide every request without a signal",
        arguments: [
            (PresenceMode.auto, PolicyDecision.Action.grant(.approved), PolicyPath.auto),
            (.prompt, .ask(grantsUserVerification: false), .prompt),
            (.deny, .refuse, .deny),
        ]
    )
    func modes(mode: PresenceMode, action: PolicyDecision.Action, path: PolicyPath) {
        var engine = Self.engine()
        for request in [Self.create(), PolicyRequest(operation: .getAssertion, rpId: "example.com")] {
            let decision = engine.decide(request, mode: mode, facts: Self.noPasskey, now: 0)
            #expect(decision.action == action)
            #expect(decision.path == path)
            #expect(decision.reason.hasPrefix("presence \(mode.rawValue)"))
        }
    }

    @Test("built-in UV: auto grants it with presence auto only, prompt asks, deny gives presence only")
    func userVerification() {
        var auto = Self.engine { $0.userVerification = .auto }
        #expect(auto.decide(Self.create(uv: true), mode: .auto, facts: nil, now: 0).action == .grant(.verified))
        #expect(auto.decide(Self.create(uv: false), mode: .auto, facts: nil, now: 0).action == .grant(.approved))
        let refused = auto.decide(Self.create(uv: true), mode: .prompt, facts: nil, now: 0)
        #expect(refused.action == .ask(grantsUserVerification: false))
        #expect(refused.reason.contains("needs presence auto"))

        var prompt = Self.engine { $0.userVerification = .prompt }
        #expect(
            prompt.decide(Self.create(uv: true), mode: .prompt, facts: nil, now: 0).action
                == .ask(grantsUserVerification: true)
        )
        #expect(
            prompt.decide(Self.create(uv: true), mode: .auto, facts: nil, now: 0).action
                == .ask(grantsUserVerification: true)
        )
        #expect(prompt.decide(Self.create(uv: true), mode: .deny, facts: nil, now: 0).action == .refuse)

        var deny = Self.engine()
        let presenceOnly = deny.decide(Self.create(uv: true), mode: .auto, facts: nil, now: 0)
        #expect(presenceOnly.action == .grant(.approved))
        #expect(presenceOnly.reason.contains("user-verification = deny"))
    }

    @Test("user-verification auto is refused with any presence mode but auto")
    func uvAutoValidation() throws {
        var settings = PolicySettings()
        settings.userVerification = .auto
        try settings.validate(mode: .auto)
        #expect(throws: ConfigurationError.self) { try settings.validate(mode: .prompt) }
        #expect(throws: ConfigurationError.self) { try settings.validate(mode: .deny) }
    }

    @Test("a fresh signal approves one makeCredential for its (rp, user) without a prompt, once")
    func conditionalOnce() {
        var engine = Self.engine()
        engine.passwordUsed(rpId: "Example.com", userName: "alice", now: 1_000)
        let first = engine.decide(Self.create(), mode: .prompt, facts: Self.noPasskey, now: 61_000)
        #expect(first.action == .grant(.approved))
        #expect(first.path == .conditional)
        #expect(first.reason.contains("60 s ago"))
        let second = engine.decide(Self.create(), mode: .prompt, facts: Self.noPasskey, now: 62_000)
        #expect(second.action == .ask(grantsUserVerification: false), "the signal is spent: fall back to the prompt")
        #expect(second.reason.contains("used already"))
    }

    @Test("a signal for another user or rp does not match")
    func otherUser() {
        var engine = Self.engine { $0.onMismatch = .deny }
        engine.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        for request in [Self.create("example.com", "bob"), Self.create("example.org", "alice")] {
            let decision = engine.decide(request, mode: .auto, facts: Self.noPasskey, now: 10)
            #expect(decision.action == .refuse)
            #expect(decision.path == .mismatch)
            #expect(decision.reason.contains("no password-used signal"))
        }
        #expect(engine.decide(Self.create(), mode: .auto, facts: Self.noPasskey, now: 10).path == .conditional)
    }

    @Test("a signal expires after its window; a later request is told so")
    func expiry() {
        var engine = Self.engine {
            $0.signalWindowSeconds = 60
            $0.onMismatch = .deny
        }
        engine.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        #expect(engine.openSignals(now: 59_999).count == 1)
        #expect(engine.openSignals(now: 60_000).isEmpty)
        let late = engine.decide(Self.create(), mode: .auto, facts: Self.noPasskey, now: 90_000)
        #expect(late.action == .refuse)
        #expect(late.reason.contains("expired 30 s ago"))
    }

    @Test("each failing condition has its reason, and on-mismatch decides what follows")
    func conditions() {
        let cases: [(String, (inout PolicySettings) -> Void, PolicyFacts, String)] = [
            ("existing passkey", { _ in }, PolicyFacts(hasPasskey: true, pinSet: false), "already has a passkey"),
            (
                "deny list", { $0.denyRpIds = ["*.example.com", "example.com"] }, Self.noPasskey,
                "denied by the policy (example.com)"
            ),
            (
                "allow list", { $0.allowRpIds = ["example.org", "*.example.com"] }, Self.noPasskey,
                "not in the policy's allowed RPs"
            ),
            ("require-pin", { $0.requirePin = true }, Self.noPasskey, "requires a PIN"),
        ]
        for (name, change, facts, reason) in cases {
            for onMismatch in MismatchAction.allCases {
                var engine = Self.engine {
                    change(&$0)
                    $0.onMismatch = onMismatch
                }
                engine.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
                let decision = engine.decide(Self.create(), mode: .prompt, facts: facts, now: 1)
                #expect(decision.reason.contains(reason), "\(name): \(decision.reason)")
                if onMismatch == .deny {
                    #expect(decision.action == .refuse, "\(name)")
                    #expect(decision.path == .mismatch, "\(name)")
                } else {
                    #expect(decision.action == .ask(grantsUserVerification: false), "\(name)")
                    #expect(decision.path == .prompt, "\(name)")
                }
                #expect(engine.openSignals(now: 2).count == 1, "\(name): a refused request leaves the signal open")
            }
        }
        var withPin = Self.engine { $0.requirePin = true }
        withPin.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        #expect(
            withPin.decide(Self.create(), mode: .prompt, facts: PolicyFacts(hasPasskey: false, pinSet: true), now: 1)
                .path == .conditional
        )
    }

    @Test("rp patterns: exact ids ignore case, *.example.com matches subdomains only")
    func patterns() {
        #expect(RPPattern.matches("example.com", "EXAMPLE.com"))
        #expect(!RPPattern.matches("example.com", "www.example.com"))
        #expect(RPPattern.matches("*.example.com", "www.example.com"))
        #expect(RPPattern.matches("*.example.com", "a.b.example.com"))
        #expect(!RPPattern.matches("*.example.com", "example.com"))
        #expect(!RPPattern.matches("*.example.com", "badexample.com"))
        #expect(RPPattern.isValid("*.example.com") && RPPattern.isValid("localhost"))
        #expect(
            !RPPattern.isValid("") && !RPPattern.isValid("*") && !RPPattern.isValid("a..b")
                && !RPPattern.isValid("ex ample.com")
        )
        #expect(!RPPattern.isValid("*.*.example.com"))
    }

    @Test("the rate limit counts conditional registrations per rp over a sliding hour")
    func rateLimit() {
        var engine = Self.engine {
            $0.rateLimitPerHour = 2
            $0.onMismatch = .deny
        }
        var now: UInt64 = 0
        func attempt(_ user: String, _ rp: String = "example.com") -> PolicyDecision {
            now += 1_000
            engine.passwordUsed(rpId: rp, userName: user, now: now)
            return engine.decide(Self.create(rp, user), mode: .auto, facts: Self.noPasskey, now: now)
        }
        #expect(attempt("u1").path == .conditional)
        #expect(attempt("u2").path == .conditional)
        let limited = attempt("u3")
        #expect(limited.action == .refuse)
        #expect(limited.reason.contains("rate limit: 2 conditional registrations at example.com"))
        #expect(attempt("u4", "example.org").path == .conditional, "the limit is per rp")
        now += 3_600_000
        #expect(attempt("u5").path == .conditional, "an hour later the window has slid")
    }

    @Test("an excludeList hit is never approved silently")
    func excluded() {
        var engine = Self.engine { $0.onMismatch = .deny }
        engine.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        let request = PolicyRequest(operation: .excludedCredential, rpId: "example.com", userName: "alice")
        let decision = engine.decide(request, mode: .auto, facts: Self.noPasskey, now: 1)
        #expect(decision.action == .refuse)
        #expect(decision.reason.contains("excludeList"))
    }

    @Test("conditional registration off: signals change nothing")
    func off() {
        var engine = Self.engine {
            $0.conditionalRegistration = false
            $0.onMismatch = .deny
        }
        engine.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        #expect(engine.decide(Self.create(), mode: .auto, facts: Self.noPasskey, now: 1).path == .auto)
    }

    @Test("other operations ignore conditional registration, even with on-mismatch deny")
    func otherOperations() {
        var engine = Self.engine { $0.onMismatch = .deny }
        for operation in [PresenceRequest.Operation.getAssertion, .touchProbe, .reset, .selection, .u2fRegister] {
            let decision = engine.decide(PolicyRequest(operation: operation), mode: .auto, facts: nil, now: 0)
            #expect(decision.action == .grant(.approved), "\(operation)")
        }
    }

    @Test("a conditional registration grants UV only when the policy would grant it silently")
    func conditionalUV() {
        var ci = Self.engine { $0.userVerification = .auto }
        ci.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        #expect(
            ci.decide(Self.create(uv: true), mode: .auto, facts: Self.noPasskey, now: 1).action == .grant(.verified)
        )
        var person = Self.engine { $0.userVerification = .prompt }
        person.passwordUsed(rpId: "example.com", userName: "alice", now: 0)
        let decision = person.decide(Self.create(uv: true), mode: .prompt, facts: Self.noPasskey, now: 1)
        #expect(decision.action == .grant(.approved))
        #expect(decision.reason.contains("UV not granted"))
    }

    @Test("the decision log keeps the last entries, newest first")
    func decisionLog() {
        let log = PolicyDecisionLog(capacity: 3)
        for index in 0..<5 {
            log.append(
                PolicyDecisionRecord(
                    id: 0,
                    time: "t",
                    operation: "makeCredential",
                    rpId: "r\(index)",
                    userName: nil,
                    userVerification: false,
                    path: .auto,
                    outcome: .approved,
                    reason: "presence auto",
                    durationMs: 0
                )
            )
        }
        #expect(log.latest(10).map(\.id) == [5, 4, 3])
        #expect(log.latest(2).map(\.rpId) == ["r4", "r3"])
    }

    @Test("the [policy] table and [keys.policy] override it per key")
    func configuration() throws {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try configuration.apply(
            toml: """
                [presence]
                mode = "auto"
                [policy]
                on-mismatch = "deny"
                allow-rp-ids = ["example.com", "*.example.org"]
                rate-limit-per-hour = 7
                signal-window-seconds = 60
                notifications = false
                [[keys]]
                name = "ci"
                [keys.policy]
                user-verification = "auto"
                require-pin = true
                [[keys]]
                name = "person"
                presence = "prompt"
                """,
            source: "t.toml"
        )
        try configuration.validate()
        #expect(configuration.policy.onMismatch == .deny)
        #expect(configuration.policy.allowRpIds == ["example.com", "*.example.org"])
        #expect(configuration.policy.rateLimitPerHour == 7)
        let ci = configuration.keys[0].policy.applied(to: configuration.policy)
        #expect(ci.userVerification == .auto && ci.requirePin && ci.signalWindowSeconds == 60 && !ci.notifications)
        #expect(configuration.keys[1].policy.applied(to: configuration.policy).userVerification == .deny)

        var bad = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try bad.apply(toml: "[policy]\nuser-verification = \"auto\"\n", source: "b.toml")
        #expect(throws: ConfigurationError.self) { try bad.validate() }
        var misspelt = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        #expect(throws: ConfigurationError.self) {
            try misspelt.apply(toml: "[policy]\nrequire_pin = true\n", source: "m.toml")
        }
        #expect(throws: ConfigurationError.self) {
            try misspelt.apply(toml: "[policy]\nallow-rp-ids = \"example.com\"\n", source: "m.toml")
        }
    }
}

/// Records what the broker publishes.
final class RecordingSink: PolicyEventSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [PolicyEvent] = []
    var events: [PolicyEvent] { lock.withLock { stored } }
    func publish(_ event: PolicyEvent) { lock.withLock { stored.append(event) } }
}

@Suite("policy broker")
struct PolicyBrokerTests {
    let logger = Logger(label: "test")

    /// A broker for key "k" that prompts, on a key with built-in user verification.
    func uvPrompting(_ policy: PolicySettings, board: PresenceBoard = PresenceBoard()) -> PresenceBroker {
        PresenceBroker(
            key: "k", mode: .prompt, timeoutSeconds: 30, board: board, logger: logger, policy: policy,
            builtInUserVerification: true
        )
    }

    @Test("a conditional registration skips the board, is recorded, and tags its credential's event")
    func conditional() async throws {
        let board = PresenceBoard()
        let sink = RecordingSink()
        let clock = ManualClock(start: 10_000)
        var settings = PolicySettings()
        settings.onMismatch = .deny
        let broker = PresenceBroker(
            key: "k",
            mode: .prompt,
            timeoutSeconds: 30,
            board: board,
            logger: logger,
            policy: settings,
            events: sink,
            clock: clock
        )
        let created = Mutex(false)
        broker.bind(
            facts: KeyFacts(
                passkeys: { _, _, _ in created.withLock { $0 } ? [[1, 2, 3]] : [] },
                pinSet: { false }
            )
        )
        _ = broker.passwordUsed(rpId: "example.com", userName: "alice")
        clock.advance(by: 2_000)
        let request = PresenceRequest(
            operation: .makeCredential,
            rpId: "example.com",
            userName: "alice",
            discoverable: true
        )
        #expect(await broker.requestPresence(request) == .approved)
        #expect(board.pending().isEmpty)
        // The engine's credential.created for that request carries the decision,
        // once; another user's creation does not.
        let creation = AuthenticatorEvent(
            kind: .credentialCreated, credentialId: [1, 2, 3], rpId: "example.com", userName: "alice",
            discoverable: true
        )
        var other = creation
        other.userName = "bob"
        #expect(broker.conditionalCreation(other) == nil)
        let tagged = try #require(broker.conditionalCreation(creation))
        #expect(tagged["reason"] == .string("conditional") && tagged["decision"] == .string("1"))
        #expect(broker.conditionalCreation(creation) == nil, "one event per decision")
        created.withLock { $0 = true }
        #expect(await broker.requestPresence(request) == .denied, "the signal is spent")
        let records = broker.decisions.latest(10)
        #expect(records.map(\.path) == [.mismatch, .conditional])
        #expect(records[1].reason.contains("2 s ago"))
        #expect(
            sink.events.filter { $0.type == "policy.decision" }.map { $0.fields["path"] } == [
                "conditional", "mismatch",
            ]
        )
        // A refused request tags nothing.
        #expect(broker.conditionalCreation(creation) == nil)
    }

    @Test("a prompt's record says who answered")
    func promptRecord() async throws {
        let board = PresenceBoard()
        let broker = PresenceBroker(key: "k", mode: .prompt, timeoutSeconds: 30, board: board, logger: logger)
        let waiting = Task {
            await broker.requestPresence(PresenceRequest(operation: .getAssertion, rpId: "a.example"))
        }
        while board.pending().isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        let id = board.pending()[0].id
        board.answer(id, .denied, by: "the desktop notification")
        #expect(await waiting.value == .denied)
        let record = try #require(broker.decisions.latest(1).first)
        #expect(record.outcome == .denied && record.path == .prompt)
        #expect(record.reason == "presence prompt; denied by the desktop notification (\(id))")
    }

    @Test("a user-verification change that breaks the rules is refused and changes nothing")
    func updateValidation() throws {
        var prompt = PolicySettings()
        prompt.userVerification = .prompt
        let broker = uvPrompting(prompt)
        var change = PolicyOverrides()
        change.userVerification = .auto
        change.requirePin = true
        #expect(throws: ConfigurationError.self, "auto needs presence auto") { try broker.update(policy: change) }
        #expect(broker.policySettings == prompt)
        broker.update(mode: .auto, timeoutSeconds: nil)
        #expect(try broker.update(policy: change).userVerification == .auto)
        var deny = PolicyOverrides()
        deny.userVerification = .deny
        #expect(throws: ConfigurationError.self, "getInfo said uv") { try broker.update(policy: deny) }

        let without = PresenceBroker(key: "w", mode: .auto, timeoutSeconds: 30, board: PresenceBoard(), logger: logger)
        #expect(throws: ConfigurationError.self, "getInfo did not say uv") { try without.update(policy: change) }
    }

    @Test("an approval of a prompt that may grant UV verifies")
    func promptVerifies() async throws {
        var settings = PolicySettings()
        settings.userVerification = .prompt
        let board = PresenceBoard()
        let broker = uvPrompting(settings, board: board)
        let request = PresenceRequest(operation: .getAssertion, rpId: "example.com", userVerification: true)
        let waiting = Task { await broker.requestPresence(request) }
        while board.pending().isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        board.answer(board.pending()[0].id, .approved)
        #expect(await waiting.value == .verified)
        #expect(broker.decisions.latest(1).first?.outcome == .verified)
    }
}

/// One step of a prompt-limit scenario: a request that would ask at a time
/// and the path it must take, or a person's answer to the last prompt.
enum PromptStep: Sendable, CustomStringConvertible {
    case request(at: UInt64, PolicyPath)
    case answer(at: UInt64, PolicyOutcome)

    var description: String {
        switch self {
        case .request(let at, let path): "request at \(at) ms -> \(path.rawValue)"
        case .answer(let at, let outcome): "\(outcome.rawValue) at \(at) ms"
        }
    }
}

@Suite("prompt limits")
struct PromptLimitTests {
    @Test(
        "prompts-per-minute and deny-cooldown-seconds, step by step",
        arguments: [
            (
                "the cap's prompts are shown in any minute, the next is refused until the first leaves the window",
                3, 0,
                [
                    PromptStep.request(at: 0, .prompt), .request(at: 1000, .prompt), .request(at: 2000, .prompt),
                    .request(at: 3000, .rateLimit), .request(at: 59_999, .rateLimit), .request(at: 60_000, .prompt),
                    .request(at: 60_500, .rateLimit), .request(at: 61_000, .prompt),
                ]
            ),
            (
                "refused requests do not count: a flood still gets a prompt each time one leaves the window",
                1, 0,
                [PromptStep.request(at: 0, .prompt)]
                    + (1..<50).map { PromptStep.request(at: UInt64($0) * 1000, .rateLimit) }
                    + [.request(at: 60_000, .prompt), .request(at: 60_001, .rateLimit)]
            ),
            (
                "a Deny refuses what would ask until the cooldown has passed",
                10, 10,
                [
                    PromptStep.request(at: 0, .prompt), .answer(at: 500, .denied), .request(at: 600, .cooldown),
                    .request(at: 10_499, .cooldown), .request(at: 10_500, .prompt),
                ]
            ),
            (
                "approvals, time-outs and cancellations start no cooldown",
                10, 10,
                [
                    PromptStep.request(at: 0, .prompt), .answer(at: 1, .approved), .request(at: 2, .prompt),
                    .answer(at: 3, .timedOut), .request(at: 4, .prompt), .answer(at: 5, .cancelled),
                    .request(at: 6, .prompt),
                ]
            ),
            (
                "deny-cooldown-seconds = 0 turns the cooldown off",
                10, 0, [PromptStep.request(at: 0, .prompt), .answer(at: 1, .denied), .request(at: 2, .prompt)]
            ),
            (
                "the cooldown is checked before the cap, and refusals in it do not count",
                1, 10,
                [
                    PromptStep.request(at: 0, .prompt), .answer(at: 1, .denied), .request(at: 2, .cooldown),
                    .request(at: 20_000, .rateLimit), .request(at: 60_000, .prompt),
                ]
            ),
        ] as [(String, Int, Int, [PromptStep])]
    )
    func limits(scenario: String, perMinute: Int, cooldown: Int, steps: [PromptStep]) {
        var engine = PolicyTests.engine {
            $0.promptsPerMinute = perMinute
            $0.denyCooldownSeconds = cooldown
        }
        for step in steps {
            switch step {
            case .request(let at, let path):
                let decision = engine.decide(PolicyTests.create(), mode: .prompt, facts: PolicyTests.noPasskey, now: at)
                #expect(decision.path == path, "\(scenario): \(step)")
                #expect(decision.action == (path == .prompt ? .ask(grantsUserVerification: false) : .refuse))
            case .answer(let at, let outcome):
                engine.promptAnswered(outcome, now: at)
            }
        }
    }

    @Test("a refusal says why and names the setting")
    func reasons() {
        var engine = PolicyTests.engine { $0.promptsPerMinute = 1 }
        let signIn = PolicyRequest(operation: .getAssertion, rpId: "example.com")
        _ = engine.decide(signIn, mode: .prompt, facts: nil, now: 0)
        let limited = engine.decide(signIn, mode: .prompt, facts: nil, now: 1000)
        #expect(
            limited.reason
                == "presence prompt; refused without a prompt: 1 prompt in the last minute (prompts-per-minute = 1)"
        )
        engine.promptAnswered(.denied, now: 2000)
        let cooling = engine.decide(signIn, mode: .prompt, facts: nil, now: 5000)
        #expect(
            cooling.reason
                == "presence prompt; refused without a prompt: a prompt was denied 3 s ago (deny-cooldown-seconds = 10)"
        )
    }

    @Test("what asks nobody is never limited: auto, deny, conditional registration")
    func onlyPrompts() {
        var engine = PolicyTests.engine { $0.promptsPerMinute = 1 }
        engine.promptAnswered(.denied, now: 0)
        for now in UInt64(1)...20 {
            #expect(engine.decide(PolicyTests.create(), mode: .auto, facts: nil, now: now).path == .auto)
            #expect(engine.decide(PolicyTests.create(), mode: .deny, facts: nil, now: now).path == .deny)
        }
        engine.passwordUsed(rpId: "example.com", userName: "alice", now: 30)
        let registration = engine.decide(PolicyTests.create(), mode: .prompt, facts: PolicyTests.noPasskey, now: 31)
        #expect(registration.path == .conditional)
    }

    @Test(
        "the settings' ranges are checked",
        arguments: [
            (0, 10, false), (1, 0, true), (1000, 3600, true), (1001, 10, false), (10, -1, false), (10, 3601, false),
        ]
    )
    func validation(perMinute: Int, cooldown: Int, valid: Bool) {
        var settings = PolicySettings()
        settings.promptsPerMinute = perMinute
        settings.denyCooldownSeconds = cooldown
        #expect((try? settings.validate(mode: .prompt)) != nil || !valid)
        #expect((try? settings.validate(mode: .prompt)) == nil || valid)
    }

    @Test("[policy] and [keys.policy] set them; the documented defaults are the code's")
    func configuration() throws {
        var configuration = DaemonConfiguration.defaults(environment: [:])
        try configuration.apply(
            toml: """
                [policy]
                prompts-per-minute = 4
                deny-cooldown-seconds = 30
                [[keys]]
                name = "k"
                [keys.policy]
                deny-cooldown-seconds = 0
                """,
            source: "test"
        )
        #expect(configuration.policy.promptsPerMinute == 4 && configuration.policy.denyCooldownSeconds == 30)
        let key = try #require(configuration.keys.first)
        #expect(key.policy.applied(to: configuration.policy).denyCooldownSeconds == 0)
        let defaults = PolicySettings()
        let documented = DaemonConfiguration.documentedDefaults
        #expect(documented.contains("# prompts-per-minute = \(defaults.promptsPerMinute) "))
        #expect(documented.contains("# deny-cooldown-seconds = \(defaults.denyCooldownSeconds) "))
    }
}
