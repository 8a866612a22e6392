// `latchkeyctl keys user-verified NAME [on|off]`: what a key's built-in user
// verification answers (WebDriver's Set User Verified).

import ArgumentParser
import LatchkeyContract

extension Keys {
    struct UserVerified: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "user-verified",
            abstract: "Show or set whether built-in user verification succeeds (/v1/keys/NAME/user-verified).",
            discussion: """
                Only keys with built-in user verification (created with \
                --user-verification, or a policy user-verification other than deny) \
                use it; with off, a request for it fails with CTAP2_ERR_UV_INVALID.

                Examples:
                  latchkeyctl keys user-verified ci-1
                  latchkeyctl keys user-verified ci-1 off
                """
        )

        enum Answer: String, ExpressibleByArgument, CaseIterable {
            case on, off
        }

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The key's name.", transform: KeyName.argument)
        var name: KeyName

        @Argument(help: "on or off; left out, the current answer is shown.")
        var answer: Answer?

        func run() throws {
            let path = ControlPath.key(name) + "/user-verified"
            let client = global.client()
            let response =
                try answer.map { try client.put(path, json: UserVerifiedBody(isUserVerified: $0 == .on)) }
                ?? client.get(path)
            try global.show(response, as: UserVerifiedBody.self) { body in
                "Built-in user verification of key \(name.quoted) \(body.isUserVerified ? "succeeds" : "fails")."
            }
        }
    }
}

/// GET and PUT /v1/keys/NAME/user-verified
struct UserVerifiedBody: Codable {
    var isUserVerified: Bool
}
