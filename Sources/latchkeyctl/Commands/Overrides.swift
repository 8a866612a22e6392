// `latchkeyctl overrides add | list | clear`: the outcome of a key's next
// operations, for CI (POST, GET, DELETE /v1/keys/NAME/overrides).

import ArgumentParser

struct Overrides: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue, list and clear overrides of a key's next operations (CI fault injection).",
        discussion: """
            An override decides the next COUNT operations it catches: approve, deny, \
            timeout and uv-false answer the presence decision; bogus-signature, \
            malformed-response and drop-connection act on the key's response.

            Examples:
              latchkeyctl overrides add deny --key ci-1
              latchkeyctl overrides add bogus-signature --count 2 --operation getAssertion --key ci-1
              latchkeyctl overrides list --key ci-1
              latchkeyctl overrides clear --key ci-1
            """,
        subcommands: [Add.self, List.self, Clear.self],
        defaultSubcommand: List.self
    )

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Queue an override (POST /v1/keys/NAME/overrides)."
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        @Argument(help: "approve, deny, timeout, uv-false, bogus-signature, malformed-response or drop-connection.")
        var action: String

        @Option(help: ArgumentHelp("How many operations it acts on.", valueName: "n"))
        var count = 1

        @Option(
            name: .customLong("operation"),
            help: ArgumentHelp(
                "An operation it acts on (repeatable; default makeCredential and getAssertion).",
                valueName: "name"
            )
        )
        var operations: [String] = []

        func run() throws {
            let request = OverrideBody(action: action, count: count, operations: operations.isEmpty ? nil : operations)
            let response = try global.client().post(ControlPath.key(key.key) + "/overrides", json: request)
            try global.show(response, as: OverrideInfo.self) { entry in
                "Queued \(entry.id): \(entry.action) for the next \(entry.remaining) of "
                    + "\(entry.operations.joined(separator: ", ")) on key \(key.key.quoted)."
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a key's queued overrides (GET /v1/keys/NAME/overrides)."
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        func run() throws {
            try global.showDocument(at: ControlPath.key(key.key) + "/overrides", as: [OverrideInfo].self) { entries in
                guard !entries.isEmpty else { return "No overrides queued on key \(key.key.quoted)." }
                var table = Table("ID", "ACTION", "REMAINING", "OPERATIONS")
                for entry in entries {
                    table.append(entry.id, entry.action, "\(entry.remaining)", entry.operations.joined(separator: ","))
                }
                return table.render()
            }
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove every queued override (DELETE /v1/keys/NAME/overrides)."
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        func run() throws {
            _ = try global.client().delete(ControlPath.key(key.key) + "/overrides")
            global.say("Cleared the overrides of key \(key.key.quoted).")
        }
    }
}

/// POST /v1/keys/NAME/overrides
struct OverrideBody: Encodable {
    var action: String
    var count: Int
    var operations: [String]?
}

/// A queued override.
struct OverrideInfo: Decodable {
    var id: String
    var action: String
    var remaining: Int
    var operations: [String]
}
