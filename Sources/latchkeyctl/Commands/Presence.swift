// `latchkeyctl presence show | set`.

import ArgumentParser

struct Presence: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set how a key asks for user presence.",
        discussion: """
            Modes: auto approves every request at once (CI), prompt waits for \
            `latchkeyctl approve` or a desktop notification until the timeout, deny \
            refuses every request.

            Examples:
              latchkeyctl presence
              latchkeyctl presence set prompt --key ci-1 --timeout 5
            """,
        subcommands: [Show.self, Update.self],
        defaultSubcommand: Show.self
    )

    static func render(_ settings: PresenceSettings, key: String) -> String {
        Table.fields([
            ("key", key),
            ("mode", settings.mode),
            ("timeout", settings.timeoutSeconds.map(Format.seconds) ?? "-"),
        ])
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a key's presence mode and timeout (GET /v1/keys/NAME/presence).",
            discussion: """
                Examples:
                  latchkeyctl presence show
                  latchkeyctl presence show --key ci-1 --json
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        func run() throws {
            try global.showDocument(at: ControlPath.presence(key: key.key), as: PresenceSettings.self) {
                Presence.render($0, key: key.key.rawValue)
            }
        }
    }

    struct Update: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a key's presence mode and/or timeout (PUT /v1/keys/NAME/presence).",
            discussion: """
                Give MODE, --timeout, or both.

                Examples:
                  latchkeyctl presence set auto
                  latchkeyctl presence set prompt --key ci-1 --timeout 5
                  latchkeyctl presence set --timeout 60
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        @Argument(help: ArgumentHelp("The presence mode.", valueName: "mode"))
        var mode: PresenceMode?

        @Option(help: ArgumentHelp("How long a prompt waits for an answer.", valueName: "seconds"))
        var timeout: Int?

        func validate() throws {
            guard mode != nil || timeout != nil else {
                throw ValidationError("Give a mode (auto, prompt or deny), --timeout, or both.")
            }
            if let timeout, timeout < 1 {
                throw ValidationError("--timeout must be at least 1 second.")
            }
        }

        func run() throws {
            let update = PresenceUpdate(mode: mode?.rawValue, timeoutSeconds: timeout)
            let response = try global.client().put(ControlPath.presence(key: key.key), json: update)
            try global.show(response, as: PresenceSettings.self) { Presence.render($0, key: key.key.rawValue) }
        }
    }
}
