// `latchkeyctl pin status | set | change`: a key's PIN for a person with no
// other FIDO tool. PINs come from the terminal without echo, or from standard
// input with --pin-stdin; never from the command line.

import ArgumentParser
import LatchkeyContract

struct Pin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Show, set and change a key's PIN.",
        discussion: """
            The same rules apply as to a PIN set over CTAP: at least the minimum \
            length in characters (Unicode code points, 4 unless raised with \
            `latchkeyctl config`), at most 63 bytes of UTF-8. A wrong current PIN \
            costs one of 8 retries, as with any FIDO client; three wrong in a row \
            block PIN entry until the key is plugged in again (`keys replug`, or a \
            daemon restart), and no retries left block the PIN until `latchkeyctl \
            reset`. A refused PIN exits 3.

            PINs are read from the terminal without echo, or with --pin-stdin from \
            standard input, one a line; never from the command line, where `ps` and \
            the shell's history would show them.

            Examples:
              latchkeyctl pin
              latchkeyctl pin set
              latchkeyctl pin change ci-1
              printf '%s\\n' "$OLD" "$NEW" | latchkeyctl pin change ci-1 --pin-stdin
            """,
        subcommands: [Status.self, SetPIN.self, Change.self],
        defaultSubcommand: Status.self
    )

    static func render(_ pin: PINInfo, key: String) -> String {
        let retries = pin.maxRetries.map { "\(pin.retries) of \($0)" } ?? String(pin.retries)
        return Table.fields([
            ("key", key),
            ("PIN", pin.set ? "set" : "not set"),
            ("retries", pin.blocked ? "\(retries): blocked until `latchkeyctl reset`" : retries),
            (
                "power cycle",
                pin.powerCycleRequired
                    ? "required: three wrong PINs in a row; replug the key" : "not required"
            ),
            ("minimum length", "\(pin.minPINLength)"),
            ("force change", pin.forcePINChange ? "yes: change the PIN before using it" : "no"),
            ("alwaysUv", pin.alwaysUv ? "on" : "off"),
        ])
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show whether a PIN is set and its retries (GET /v1/keys/NAME/pin).",
            discussion: """
                Also shows whether three wrong PINs in a row require a power cycle, \
                the minimum PIN length, whether a PIN change is forced, and alwaysUv.

                Examples:
                  latchkeyctl pin status
                  latchkeyctl pin status ci-1 --json
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
        var key: KeyName = "default"

        func run() throws {
            try global.showDocument(at: ControlPath.pin(key: key), as: PINInfo.self) {
                Pin.render($0, key: key.rawValue)
            }
        }
    }

    struct SetPIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set the PIN of a key that has none (PUT /v1/keys/NAME/pin).",
            discussion: """
                Asks for the new PIN twice on the terminal, without echo. With \
                --pin-stdin, reads it from the first line of standard input instead. \
                A key with a PIN already refuses (exit 1): use `pin change`.

                Examples:
                  latchkeyctl pin set
                  latchkeyctl pin set ci-1
                  printf '%s\\n' "$PIN" | latchkeyctl pin set ci-1 --pin-stdin
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var input: PINInput

        func run() throws {
            let (client, key) = (global.client(), input.key)
            let newPin = try input.newPIN(client: client, change: false)
            let response = try client.put(ControlPath.pin(key: key), json: PINUpdate(newPin: newPin))
            try global.show(response, as: PINInfo.self) { _ in "Set the PIN of key \(key.quoted)." }
        }
    }

    struct Change: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a key's PIN (PUT /v1/keys/NAME/pin).",
            discussion: """
                Asks for the current PIN, then the new one twice, on the terminal \
                without echo. With --pin-stdin, reads the current PIN from the first \
                line of standard input and the new one from the second. A wrong \
                current PIN costs a retry and exits 3; changing the PIN ends a forced \
                change.

                Examples:
                  latchkeyctl pin change
                  printf '%s\\n' "$OLD" "$NEW" | latchkeyctl pin change ci-1 --pin-stdin
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var input: PINInput

        func run() throws {
            let (client, key) = (global.client(), input.key)
            let currentPin = try input.currentPIN(client: client)
            let newPin = try input.newPIN(client: client, change: true)
            let update = PINUpdate(currentPin: currentPin, newPin: newPin)
            let response = try client.put(ControlPath.pin(key: key), json: update)
            try global.show(response, as: PINInfo.self) { _ in "Changed the PIN of key \(key.quoted)." }
        }
    }
}

/// Which key's PIN, and where PINs come from: the terminal, or standard
/// input with --pin-stdin.
struct PINInput: ParsableArguments {
    @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
    var key: KeyName = "default"

    @Flag(help: "Read the PIN(s) from standard input, one a line, instead of the terminal.")
    var pinStdin = false

    /// The current PIN: the next line of standard input, or asked once
    /// when the key's PIN can be changed at all.
    func currentPIN(client: ControlClient) throws(CtlError) -> String {
        if pinStdin { return try nonEmpty(line("the current PIN")) }
        try Terminal.requireInteractive()
        let status = try client.get(ControlPath.pin(key: key)).decode(PINInfo.self)
        // Said before the person types: the daemon would refuse the same way.
        guard status.set else {
            throw CtlError(.refused, "key \(key.quoted) has no PIN; set one with `latchkeyctl pin set`")
        }
        if status.blocked {
            throw CtlError(.pinRefused, "the PIN of key \(key.quoted) is blocked; only `latchkeyctl reset` clears it")
        }
        if status.powerCycleRequired {
            throw CtlError(
                .pinRefused,
                "three wrong PINs in a row: replug key \(key.quoted) (`latchkeyctl keys replug`) first"
            )
        }
        return try nonEmpty(Terminal.readSecret(prompt: "Current PIN of key \(key.quoted): "))
    }

    /// The new PIN: the next line of standard input, or asked twice, with
    /// the minimum length in the prompt.
    func newPIN(client: ControlClient, change: Bool) throws(CtlError) -> String {
        if pinStdin { return try nonEmpty(line("the new PIN")) }
        try Terminal.requireInteractive()
        let status = try client.get(ControlPath.pin(key: key)).decode(PINInfo.self)
        if !change && status.set {
            throw CtlError(
                .refused,
                "key \(key.quoted) has a PIN already; change it with `latchkeyctl pin change`"
            )
        }
        let prompt = "New PIN of key \(key.quoted) (at least \(status.minPINLength) characters): "
        let pin = try nonEmpty(Terminal.readSecret(prompt: prompt))
        guard try Terminal.readSecret(prompt: "Repeat the new PIN: ") == pin else {
            throw CtlError(.usage, "the two new PINs differ; nothing was changed")
        }
        return pin
    }

    private func line(_ what: String) throws(CtlError) -> String {
        guard let line = Terminal.readLine(descriptor: 0) else {
            throw CtlError(.usage, "--pin-stdin: standard input ended before \(what)")
        }
        return line
    }

    /// An empty PIN is never right; refusing it here spares a retry.
    private func nonEmpty(_ pin: String) throws(CtlError) -> String {
        guard !pin.isEmpty else { throw CtlError(.usage, "no PIN entered; nothing was changed") }
        return pin
    }
}
