// `latchkeyctl config KEY`: a key's authenticatorConfig settings (alwaysUv,
// the minimum PIN length, a forced PIN change), shown or set.

import ArgumentParser
import LatchkeyContract

struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set a key's alwaysUv and minimum PIN length (GET/PUT /v1/keys/NAME/config).",
        discussion: """
            Without options, shows the settings. --always-uv on makes every \
            operation need user verification (a PIN, as latchkey has no built-in \
            UV), and turns U2F off. --min-pin-length follows CTAP's \
            setMinPINLength: the minimum never decreases (only `latchkeyctl reset` \
            restores the default, 4) and is at most 63; a PIN shorter than the new \
            minimum must be changed before its next use, as must any PIN with \
            --force-pin-change. Each --rp-id names a relying party that may read \
            the minimum PIN length through the minPinLength extension; together \
            they replace the previous list. These are the settings a FIDO tool \
            changes with authenticatorConfig; the control socket's permissions \
            stand in for the PIN token such a tool needs.

            Examples:
              latchkeyctl config default
              latchkeyctl config default --always-uv on
              latchkeyctl config ci-1 --min-pin-length 8 --force-pin-change
              latchkeyctl config ci-1 --rp-id example.com --rp-id login.example.org
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
    var key: KeyName

    @Option(help: ArgumentHelp("Require user verification for every operation.", valueName: "on|off"))
    var alwaysUv: Switch?

    @Option(help: ArgumentHelp("The new minimum PIN length in characters (4 to 63; never lower).", valueName: "n"))
    var minPinLength: Int?

    @Flag(help: "Make the PIN's owner change it before its next use.")
    var forcePinChange = false

    @Option(
        name: .customLong("rp-id"),
        help: ArgumentHelp("An RP ID that may read the minimum PIN length (repeat for more).", valueName: "id")
    )
    var rpIds: [String] = []

    func validate() throws {
        if let minPinLength, !(4...63).contains(minPinLength) {
            throw ValidationError("--min-pin-length must be between 4 and 63.")
        }
    }

    func run() throws {
        let client = global.client()
        let response: ControlResponse
        if alwaysUv == nil && minPinLength == nil && !forcePinChange && rpIds.isEmpty {
            response = try client.get(ControlPath.config(key: key))
        } else {
            let update = ConfigInfo(
                alwaysUv: alwaysUv.map { $0 == .on },
                minPINLength: minPinLength,
                forcePINChange: forcePinChange ? true : nil,
                minPinLengthRPIDs: rpIds.isEmpty ? nil : rpIds
            )
            response = try client.put(ControlPath.config(key: key), json: update)
        }
        try global.show(response, as: ConfigInfo.self) { config in
            Table.fields([
                ("key", key.rawValue),
                ("alwaysUv", config.alwaysUv.map { $0 ? "on" : "off" } ?? "-"),
                ("minimum PIN length", config.minPINLength.map(String.init) ?? "-"),
                ("force PIN change", config.forcePINChange.map { $0 ? "yes" : "no" } ?? "-"),
                ("RP IDs told the minimum", Format.optional(config.minPinLengthRPIDs?.joined(separator: ", "))),
            ])
        }
    }
}

/// on or off.
enum Switch: String, CaseIterable, ExpressibleByArgument {
    case on, off
}
