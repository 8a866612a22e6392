// `latchkeyctl policy show | set | explain` and `latchkeyctl signal
// password-used`: a key's consent policy, what it decided and why, and the
// signal that opens a conditional-registration window.

import ArgumentParser
import Foundation
import LatchkeyContract

/// `GET /v1/keys/{name}/policy`.
struct PolicyInfo: Decodable {
    struct Signal: Decodable {
        var rpId: String
        var userName: String
        var expiresInMs: Double
    }
    var presence: String
    var userVerification: String
    var notifications: Bool
    var conditionalRegistration: Bool
    var signalWindowSeconds: Int
    var onMismatch: String
    var allowRpIds: [String]
    var denyRpIds: [String]
    var requirePin: Bool
    var rateLimitPerHour: Int
    var openSignals: [Signal]
}

/// `PUT /v1/keys/{name}/policy`: only the fields given.
struct PolicyUpdate: Encodable {
    var userVerification: String?
    var notifications: Bool?
    var conditionalRegistration: Bool?
    var signalWindowSeconds: Int?
    var onMismatch: String?
    var allowRpIds: [String]?
    var denyRpIds: [String]?
    var requirePin: Bool?
    var rateLimitPerHour: Int?
}

/// `GET /v1/keys/{name}/policy/decisions`.
struct PolicyDecisionInfo: Decodable {
    var id: Int
    var time: String
    var operation: String
    var rpId: String?
    var userName: String?
    var userVerification: Bool
    var path: String
    var outcome: String
    var reason: String
    var durationMs: Double
}

/// `POST /v1/keys/{name}/signals/password-used`.
struct PasswordUsed: Codable {
    var rpId: String
    var userName: String
}

/// The window a password-used signal opened.
struct PasswordUsedInfo: Decodable {
    var key: String
    var rpId: String
    var userName: String
    var expiresInMs: Double
}

extension ControlPath {
    static func policy(key: KeyName) -> String { "\(Self.key(key))/policy" }
    static func decisions(key: KeyName, limit: Int) -> String { "\(policy(key: key))/decisions?limit=\(limit)" }
}

extension Switch {
    var value: Bool { self == .on }
}

struct Policy: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set a key's consent policy, and explain its decisions.",
        discussion: """
            The policy decides every request that needs user presence: the presence \
            mode (auto, prompt, deny), built-in user verification, and conditional \
            registration (a password-used signal lets one makeCredential for that rp \
            and user through without a prompt).

            Examples:
              latchkeyctl policy
              latchkeyctl policy set --key ci-1 --on-mismatch deny --allow-rp example.com --allow-rp '*.example.org'
              latchkeyctl policy explain --key ci-1 -n 5
            """,
        subcommands: [Show.self, Update.self, Explain.self],
        defaultSubcommand: Show.self
    )

    static func render(_ policy: PolicyInfo, key: String) -> String {
        var text = Table.fields([
            ("key", key),
            ("presence", policy.presence),
            ("user verification", policy.userVerification),
            ("notifications", policy.notifications ? "on" : "off"),
            ("conditional registration", policy.conditionalRegistration ? "on" : "off"),
            ("signal window", Format.seconds(Double(policy.signalWindowSeconds))),
            ("on mismatch", policy.onMismatch),
            ("allowed rps", policy.allowRpIds.isEmpty ? "all" : policy.allowRpIds.joined(separator: ", ")),
            ("denied rps", policy.denyRpIds.isEmpty ? "none" : policy.denyRpIds.joined(separator: ", ")),
            ("require PIN", policy.requirePin ? "yes" : "no"),
            ("rate limit", "\(policy.rateLimitPerHour) per rp per hour"),
        ])
        if !policy.openSignals.isEmpty {
            var table = Table("OPEN SIGNAL RP", "USER", "EXPIRES IN")
            for signal in policy.openSignals {
                table.append(signal.rpId, signal.userName, Format.span(milliseconds: signal.expiresInMs))
            }
            text += "\n\n" + table.render()
        }
        return text
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a key's policy and its open password-used windows (GET /v1/keys/NAME/policy).",
            discussion: """
                Examples:
                  latchkeyctl policy show --key ci-1
                  latchkeyctl policy show --json
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        func run() throws {
            try global.showDocument(at: ControlPath.policy(key: key.key), as: PolicyInfo.self) {
                Policy.render($0, key: key.key.rawValue)
            }
        }
    }

    struct Update: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Change a key's policy until the daemon restarts (PUT /v1/keys/NAME/policy).",
            discussion: """
                Only the options given change. --allow-rp and --deny-rp replace their \
                list; give --allow-rp '' to empty it (every rp allowed). \
                --user-verification auto needs presence mode auto.

                Examples:
                  latchkeyctl policy set --on-mismatch deny --rate-limit 1
                  latchkeyctl policy set --key ci-1 --user-verification auto
                  latchkeyctl policy set --deny-rp '*.bank.example' --require-pin on
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        @Option(help: ArgumentHelp("Built-in UV: deny, prompt or auto.", valueName: "mode"))
        var userVerification: String?
        @Option(help: ArgumentHelp("Desktop notifications for prompts.", valueName: "on|off"))
        var notifications: Switch?
        @Option(help: ArgumentHelp("Whether password-used signals work.", valueName: "on|off"))
        var conditional: Switch?
        @Option(help: ArgumentHelp("How long a password-used signal stays usable.", valueName: "seconds"))
        var signalWindow: Int?
        @Option(help: ArgumentHelp("fallback (the presence mode decides) or deny.", valueName: "action"))
        var onMismatch: String?
        @Option(
            help: ArgumentHelp("An rp (or *.domain) that may be registered conditionally; repeat.", valueName: "rp")
        )
        var allowRp: [String] = []
        @Option(help: ArgumentHelp("An rp (or *.domain) never registered conditionally; repeat.", valueName: "rp"))
        var denyRp: [String] = []
        @Option(help: ArgumentHelp("Conditional registration only with a PIN set.", valueName: "on|off"))
        var requirePin: Switch?
        @Option(help: ArgumentHelp("Conditional registrations per rp per hour.", valueName: "n"))
        var rateLimit: Int?

        var update: PolicyUpdate {
            PolicyUpdate(
                userVerification: userVerification,
                notifications: notifications?.value,
                conditionalRegistration: conditional?.value,
                signalWindowSeconds: signalWindow,
                onMismatch: onMismatch,
                allowRpIds: allowRp.isEmpty ? nil : allowRp.filter { !$0.isEmpty },
                denyRpIds: denyRp.isEmpty ? nil : denyRp.filter { !$0.isEmpty },
                requirePin: requirePin?.value,
                rateLimitPerHour: rateLimit
            )
        }

        func validate() throws {
            if let userVerification, !["deny", "prompt", "auto"].contains(userVerification) {
                throw ValidationError("--user-verification must be deny, prompt or auto.")
            }
            if let onMismatch, !["deny", "fallback"].contains(onMismatch) {
                throw ValidationError("--on-mismatch must be deny or fallback.")
            }
            let given: [Any?] = [
                userVerification, notifications, conditional, signalWindow, onMismatch, requirePin, rateLimit,
            ]
            if given.allSatisfy({ $0 == nil }) && allowRp.isEmpty && denyRp.isEmpty {
                throw ValidationError("Give at least one setting to change (see --help).")
            }
        }

        func run() throws {
            let response = try global.client().put(ControlPath.policy(key: key.key), json: update)
            try global.show(response, as: PolicyInfo.self) { Policy.render($0, key: key.key.rawValue) }
        }
    }

    struct Explain: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a key's last decisions and why (GET /v1/keys/NAME/policy/decisions).",
            discussion: """
                Newest first. The daemon keeps the last 100 per key.

                Examples:
                  latchkeyctl policy explain
                  latchkeyctl policy explain --key ci-1 -n 3 --json
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        @Option(name: .customShort("n"), help: ArgumentHelp("How many decisions (1 to 100).", valueName: "n"))
        var count = 10

        func validate() throws {
            guard (1...100).contains(count) else { throw ValidationError("-n must be between 1 and 100.") }
        }

        func run() throws {
            try global.showDocument(
                at: ControlPath.decisions(key: key.key, limit: count),
                as: [PolicyDecisionInfo].self
            ) { decisions in
                guard !decisions.isEmpty else { return "No decisions recorded for key \(key.key.quoted) yet." }
                return decisions.map { decision in
                    var what = decision.operation
                    if let user = decision.userName { what += " for \(user)" }
                    if let rp = decision.rpId { what += " at \(rp)" }
                    if decision.userVerification { what += " (UV asked)" }
                    let head = "#\(decision.id) \(decision.time)  \(what): \(decision.outcome) [\(decision.path)]"
                    return Sanitize.inline(head) + "\n    " + Sanitize.inline(decision.reason)
                }.joined(separator: "\n")
            }
        }
    }
}

/// `latchkeyctl signal password-used`, in the `signal` group beside the
/// WebAuthn signals (Signal.swift).
struct SignalPasswordUsed: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password-used",
        abstract: "A password was just used for USER at RP: open a conditional-registration window.",
        discussion: """
            While the window is open (5 minutes unless the policy says otherwise), \
            one makeCredential for that rp and user is approved without a prompt, \
            if the key has no passkey for them yet and the policy allows the rp \
            (POST /v1/keys/NAME/signals/password-used).

            Examples:
              latchkeyctl signal password-used --rp example.com --user alice@example.com
              latchkeyctl signal password-used --rp example.com --user alice --key ci-1 --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var key: KeyOption

    @Option(
        name: [.customLong("rp"), .customLong("rp-id")],
        help: ArgumentHelp("The relying party ID.", valueName: "rp")
    )
    var rp: String
    @Option(help: ArgumentHelp("The user name the password was used for.", valueName: "user"))
    var user: String

    func run() throws {
        let response = try global.client().post(
            ControlPath.signal(key: key.key, "password-used"),
            json: PasswordUsed(rpId: rp, userName: user)
        )
        try global.show(response, as: PasswordUsedInfo.self) { info in
            Sanitize.inline(
                "Conditional registration open for \(info.userName) at \(info.rpId) on key \(info.key.quoted) "
                    + "for \(Format.span(milliseconds: info.expiresInMs))."
            )
        }
    }
}
