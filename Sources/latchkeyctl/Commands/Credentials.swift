// `latchkeyctl credentials list | delete`.

import ArgumentParser
import LatchkeyContract
import LatchkeyJSON

struct Credentials: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, rename and delete a key's stored (discoverable) credentials.",
        discussion: """
            Examples:
              latchkeyctl credentials
              latchkeyctl credentials list --key ci-1
              latchkeyctl credentials update-user ci-1 3q2-7w... --name alice@example.com
              latchkeyctl credentials delete 3q2-7w... --key ci-1
            """,
        subcommands: [List.self, Show.self, Add.self, UpdateUser.self, Delete.self],
        defaultSubcommand: List.self
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a key's credentials (GET /v1/keys/NAME/credentials).",
            discussion: """
                Examples:
                  latchkeyctl credentials list
                  latchkeyctl credentials list --key ci-1 --json
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        func run() throws {
            try global.showDocument(
                at: ControlPath.credentials(key: key.key),
                as: [CredentialInfo].self
            ) { credentials in
                guard !credentials.isEmpty else { return "No credentials on key \(key.key.quoted)." }
                var table = Table("ID", "RP", "USER", "DISPLAY NAME", "ALG", "PROTECT")
                for credential in credentials {
                    table.append(
                        credential.id,
                        credential.rpId,
                        Format.optional(credential.userName),
                        Format.optional(credential.userDisplayName),
                        Format.algorithm(credential.algorithm),
                        Format.credProtect(credential.credProtect)
                    )
                }
                return table.render()
            }
        }
    }

    struct UpdateUser: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "update-user",
            abstract: "Change a credential's user name or display name (PUT /v1/keys/NAME/credentials/ID/user).",
            discussion: """
                What a FIDO tool's updateUserInformation does: the account (user \
                handle) stays, the names a browser shows when picking a passkey \
                change. An option left out keeps its value; an empty one removes it. \
                Each is at most 64 bytes of UTF-8. Exits 4 when the key has no such \
                credential.

                Examples:
                  latchkeyctl credentials update-user default 3q2-7wAAAQ --name alice@example.com
                  latchkeyctl credentials update-user ci-1 3q2-7wAAAQ --display-name "Alice L." --json
                  latchkeyctl credentials update-user ci-1 3q2-7wAAAQ --display-name ""
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
        var key: KeyName

        @Argument(help: ArgumentHelp("The credential ID (base64url).", valueName: "credential-id"))
        var id: String

        @Option(help: ArgumentHelp("The new user name (user.name).", valueName: "name"))
        var name: String?

        @Option(help: ArgumentHelp("The new display name (user.displayName).", valueName: "name"))
        var displayName: String?

        func validate() throws {
            guard !Base64URL.unpadded(id).isEmpty else { throw ValidationError("The credential ID must not be empty.") }
            guard name != nil || displayName != nil else {
                throw ValidationError("Give --name, --display-name, or both.")
            }
        }

        func run() throws {
            let id = Base64URL.unpadded(id)
            let update = UserUpdate(name: name, displayName: displayName)
            let response = try global.client().put(ControlPath.credentialUser(key: key, id: id), json: update)
            try global.show(response, as: CredentialInfo.self) { credential in
                Table.fields([
                    ("id", credential.id),
                    ("rp", credential.rpId),
                    ("user", Format.optional(credential.userName)),
                    ("display name", Format.optional(credential.userDisplayName)),
                ])
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a credential (DELETE /v1/keys/NAME/credentials/ID).",
            discussion: """
                ID is the credential ID as `credentials list` shows it (base64url \
                without padding; standard base64 is accepted too). Exits 4 when the \
                key has no such credential.

                Examples:
                  latchkeyctl credentials delete 3q2-7wAAAQ
                  latchkeyctl credentials delete 3q2-7wAAAQ --key ci-1
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var key: KeyOption

        @Argument(help: "The credential ID (base64url).")
        var id: String

        func validate() throws {
            guard !Base64URL.unpadded(id).isEmpty else { throw ValidationError("The credential ID must not be empty.") }
        }

        func run() throws {
            let id = Base64URL.unpadded(id)
            _ = try global.client().delete(ControlPath.credential(key: key.key, id: id))
            global.say("Deleted credential \(id) from key \(key.key.quoted).")
        }
    }
}
