// `latchkeyctl signal accepted-credentials | current-user-details |
// unknown-credential`: the WebAuthn Signal API, told to a key by hand or by a
// test rig instead of by a browser.

import ArgumentParser
import LatchkeyContract
import LatchkeyJSON

struct Signal: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tell a key what a relying party said about its passkeys (the WebAuthn Signal API).",
        discussion: """
            A relying party calls PublicKeyCredential.signalAllAcceptedCredentials, \
            signalCurrentUserDetails or signalUnknownCredential; a browser applies them \
            to the passkeys of its provider. These commands apply them to a key's \
            discoverable credentials: deleting the ones the RP no longer accepts or \
            does not know, renaming the user of the others. A signal that matches \
            nothing changes nothing and still succeeds. IDs are base64url.

            Examples:
              latchkeyctl signal accepted-credentials --rp-id example.com --user-id dXNlcg \\
                  --credential-id 3q2-7w --credential-id AAEC --key ci-1
              latchkeyctl signal current-user-details --rp-id example.com --user-id dXNlcg \\
                  --name alice@example.com --display-name "Alice L."
              latchkeyctl signal unknown-credential --rp-id example.com --credential-id 3q2-7w
            """,
        subcommands: [
            SignalAcceptedCredentials.self, SignalCurrentUserDetails.self, SignalUnknownCredential.self,
            SignalPasswordUsed.self,
        ]
    )
}

// The three subcommands stand at the top level, so that the `signal` group
// can list other signals' subcommands beside them (password-used).

struct SignalAcceptedCredentials: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accepted-credentials",
        abstract: "Delete the user's passkeys for an RP that are not in the list "
            + "(POST /v1/keys/NAME/signals/accepted-credentials).",
        discussion: """
            Every discoverable credential of --rp-id whose user handle is --user-id \
            and whose ID is not among the --credential-id options is deleted. With \
            no --credential-id at all, every passkey of that user at that RP goes. \
            Credentials of other users and RPs stay.

            Examples:
              latchkeyctl signal accepted-credentials --rp-id example.com --user-id dXNlcg --credential-id 3q2-7w
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var key: KeyOption

    @OptionGroup var account: SignalAccount

    // A base64url value may begin with "-": the next word is the value,
    // whatever it looks like (unconditional parsing), as for every ID option here.
    @Option(
        name: .customLong("credential-id"),
        parsing: .unconditionalSingleValue,
        help: ArgumentHelp("An accepted credential ID, base64url; repeat for each.", valueName: "id")
    )
    var credentialIds: [String] = []

    func run() throws {
        let body = AcceptedCredentialsBody(
            rpId: account.rpId,
            userId: account.base64urlUserId,
            allAcceptedCredentialIds: credentialIds.map(Base64URL.unpadded)
        )
        let path = ControlPath.signal(key: key.key, "accepted-credentials")
        try showSignalResult(try global.client().post(path, json: body), global: global)
    }
}

struct SignalCurrentUserDetails: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "current-user-details",
        abstract: "Rename the user of a user's passkeys for an RP "
            + "(POST /v1/keys/NAME/signals/current-user-details).",
        discussion: """
            Every discoverable credential of --rp-id whose user handle is --user-id \
            gets the name and display name (each at most 64 bytes of UTF-8; an empty \
            one is removed), as credentials update-user does for one.

            Examples:
              latchkeyctl signal current-user-details --rp-id example.com --user-id dXNlcg \\
                  --name alice@example.com --display-name Alice
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var key: KeyOption

    @OptionGroup var account: SignalAccount

    @Option(help: ArgumentHelp("The user name (user.name).", valueName: "name"))
    var name: String

    @Option(help: ArgumentHelp("The display name (user.displayName).", valueName: "name"))
    var displayName: String

    func run() throws {
        let body = CurrentUserDetailsBody(
            rpId: account.rpId,
            userId: account.base64urlUserId,
            name: name,
            displayName: displayName
        )
        let path = ControlPath.signal(key: key.key, "current-user-details")
        try showSignalResult(try global.client().post(path, json: body), global: global)
    }
}

struct SignalUnknownCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unknown-credential",
        abstract: "Delete a passkey the RP does not know (POST /v1/keys/NAME/signals/unknown-credential).",
        discussion: """
            The discoverable credential --credential-id is deleted if it belongs to \
            --rp-id; a credential of another RP stays.

            Examples:
              latchkeyctl signal unknown-credential --rp-id example.com --credential-id 3q2-7w --key ci-1
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var key: KeyOption

    @Option(help: ArgumentHelp("The relying party ID.", valueName: "rp-id"))
    var rpId: String

    @Option(parsing: .unconditional, help: ArgumentHelp("The credential ID, base64url.", valueName: "id"))
    var credentialId: String

    func run() throws {
        let body = UnknownCredentialBody(rpId: rpId, credentialId: Base64URL.unpadded(credentialId))
        let path = ControlPath.signal(key: key.key, "unknown-credential")
        try showSignalResult(try global.client().post(path, json: body), global: global)
    }
}

/// Prints what a signal changed.
func showSignalResult(_ response: ControlResponse, global: GlobalOptions) throws(CtlError) {
    try global.show(response, as: SignalResult.self) { result in
        guard !result.deleted.isEmpty || !result.updated.isEmpty else { return "Nothing changed." }
        var table = Table("CHANGE", "ID", "RP", "USER", "DISPLAY NAME")
        for (change, credentials) in [("deleted", result.deleted), ("updated", result.updated)] {
            for credential in credentials {
                table.append(
                    change,
                    credential.id,
                    credential.rpId,
                    Format.optional(credential.userName),
                    Format.optional(credential.userDisplayName)
                )
            }
        }
        return table.render()
    }
}

/// The account a signal is about: an RP and a user handle.
struct SignalAccount: ParsableArguments {
    @Option(help: ArgumentHelp("The relying party ID.", valueName: "rp-id"))
    var rpId: String

    @Option(parsing: .unconditional, help: ArgumentHelp("The user handle (user.id), base64url.", valueName: "user-id"))
    var userId: String

    var base64urlUserId: String { Base64URL.unpadded(userId) }
}

private struct AcceptedCredentialsBody: Encodable {
    var rpId: String
    var userId: String
    var allAcceptedCredentialIds: [String]
}

private struct CurrentUserDetailsBody: Encodable {
    var rpId: String
    var userId: String
    var name: String
    var displayName: String
}

private struct UnknownCredentialBody: Encodable {
    var rpId: String
    var credentialId: String
}

/// The answer to a signal.
struct SignalResult: Decodable {
    var deleted: [CredentialInfo]
    var updated: [CredentialInfo]
}

extension ControlPath {
    static func signal(key: KeyName, _ signal: String) -> String { "\(Self.key(key))/signals/\(signal)" }
    static func export(key: KeyName) -> String { "\(Self.key(key))/export" }
    static func importing(key: KeyName) -> String { "\(Self.key(key))/import" }
}
