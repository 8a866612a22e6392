// `latchkeyctl reset KEY`: authenticatorReset through the control API, with a
// confirmation in place of the touch a hardware key would want.

import ArgumentParser
import LatchkeyContract

struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Erase a key's credentials, PIN and settings (POST /v1/keys/NAME/reset).",
        discussion: """
            Does what a FIDO tool's authenticatorReset does: every credential \
            (including the non-discoverable ones: their IDs stop working), the PIN \
            and its retries, the minimum PIN length, alwaysUv and large blobs are \
            erased; the key's identity — its name, AAGUID and attestation \
            certificate — stays, and hosts keep seeing the same device.

            A FIDO tool may reset a key only within 10 seconds of plugging it in, \
            and only with a touch. That window does not apply here: the control \
            socket's permissions already decide who may manage the key. Instead, \
            latchkeyctl asks for confirmation on the terminal; --yes skips the \
            question, and without a terminal --yes is required.

            Examples:
              latchkeyctl reset default
              latchkeyctl reset ci-1 --yes
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
    var key: KeyName

    @Flag(name: .shortAndLong, help: "Reset without asking.")
    var yes = false

    func run() throws {
        let client = global.client()
        if !yes {
            guard Terminal.isInteractive else {
                throw CtlError(.usage, "not resetting key \(key.quoted) without confirmation: pass --yes")
            }
            let credentials = try client.get(ControlPath.key(key)).decode(KeyInfo.self).credentials
            let question =
                "Reset key \(key.quoted)? This erases its \(credentials) stored credential"
                + "\(credentials == 1 ? "" : "s"), every credential ID it issued, and its PIN."
            guard try Terminal.confirm(question) else {
                throw CtlError(.refused, "not reset: key \(key.quoted) is unchanged")
            }
        }
        let response = try client.post(ControlPath.reset(key: key))
        try global.show(response, as: KeyInfo.self) { key in
            "Reset key \(key.name.quoted): no credentials, no PIN; AAGUID \(key.aaguid) kept."
        }
    }
}
