// `latchkeyctl keys list | create | show | delete`.

import ArgumentParser
import LatchkeyContract

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, create, show and delete virtual keys.",
        discussion: """
            Each key is an independent authenticator with its own AAGUID, credentials \
            and presence policy, seen by the kernel as a uhid device and/or exported \
            over USB/IP.

            Examples:
              latchkeyctl keys
              latchkeyctl keys create ci-1 --presence auto
              latchkeyctl keys show ci-1
              latchkeyctl keys replug ci-1
              latchkeyctl keys delete ci-1
            """,
        subcommands: [List.self, Create.self, Show.self, Replug.self, UserVerified.self, Delete.self],
        defaultSubcommand: List.self
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the daemon's keys (GET /v1/keys).",
            discussion: """
                Examples:
                  latchkeyctl keys list
                  latchkeyctl keys list --json
                """
        )

        @OptionGroup var global: GlobalOptions

        func run() throws {
            try global.showDocument(at: ControlPath.keys, as: [KeyInfo].self) { keys in
                keys.isEmpty ? "No keys." : KeyTable.render(keys)
            }
        }
    }

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key (POST /v1/keys).",
            discussion: """
                The key appears as a uhid device and is exported over USB/IP unless \
                --no-uhid or --no-usbip says otherwise; its presence mode is the \
                daemon's default unless --presence gives one.

                The feature switches are WebDriver's virtual authenticator options: \
                --protocol u2f-only makes a CTAP1/U2F-only key; --user-verification \
                gives it built-in user verification (the consent policy's \
                user-verification: auto on a key in presence auto, else prompt), and \
                --no-user-verified makes it fail (for CI; see `latchkeyctl keys user-verified`).

                The key belongs to the account that creates it: only it uses the key, \
                answers its prompts and exports it; root sees and manages it too. Root \
                creates a key for another account with --owner. --exportable lets the \
                key's private keys leave without its PIN (`latchkeyctl export`, \
                WebDriver's Get Credentials): for CI keys, never for a person's; it is \
                chosen here and never changes (docs/access.md).

                Examples:
                  latchkeyctl keys create ci-1
                  latchkeyctl keys create ci-1 --exportable
                  sudo latchkeyctl keys create alice-key --owner alice
                  latchkeyctl keys create ci-2 --presence prompt --no-usbip
                  latchkeyctl keys create ci-3 --presence auto --user-verification
                  latchkeyctl keys create legacy --protocol u2f-only
                  latchkeyctl keys create plain --no-resident-keys --no-large-blob --no-prf
                  latchkeyctl keys create rsa --algorithms ES256,RS256 --max-discoverable-credentials 25
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The new key's name.", transform: KeyName.argument)
        var name: KeyName

        @Option(help: ArgumentHelp("How the key asks for user presence.", valueName: "mode"))
        var presence: PresenceMode?

        @Option(help: ArgumentHelp("The account the key is for, a name or uid (root only).", valueName: "account"))
        var owner: String?

        @Flag(help: "Let the key's private keys leave without its PIN (CI keys; fixed at creation).")
        var exportable = false

        @Flag(inversion: .prefixedNo, help: "Present the key to this machine's kernel through /dev/uhid.")
        var uhid = true

        @Flag(inversion: .prefixedNo, help: "Export the key over USB/IP.")
        var usbip = true

        @Option(
            name: .customLong("protocol"),
            help: ArgumentHelp("ctap2.1 (default) or u2f-only.", valueName: "protocol")
        )
        var protocolName: String?

        @Flag(
            inversion: .prefixedNo,
            help: "Built-in user verification (getInfo uv): the policy's user-verification auto, or prompt off auto."
        )
        var userVerification: Bool?

        @Flag(inversion: .prefixedNo, help: "Whether built-in user verification may succeed (default: yes).")
        var userVerified: Bool?

        /// The feature switches, `--NAME` / `--no-NAME` for each row of the
        /// `KeyFeature` table (--large-blob, --no-prf, ...); the last of a
        /// feature's counts.
        @Flag var features: [FeatureSwitch] = []

        @Option(name: .customLong("ep-rp-id"), help: "An RP ID for vendor-facilitated enterprise attestation.")
        var epRpIds: [String] = []

        @Option(
            name: [.customLong("algorithm"), .customLong("algorithms")],
            help: ArgumentHelp(
                "Credential algorithms to offer, in preference order (IANA names: ES256,RS256 or repeated).",
                valueName: "names"
            )
        )
        var algorithmLists: [String] = []

        @Option(
            help: ArgumentHelp("Discoverable credentials the key holds before it is full (default: 1000).", valueName: "n")
        )
        var maxDiscoverableCredentials: Int?

        /// The `--algorithm(s)` values, comma-separated lists flattened.
        var algorithms: [String] {
            algorithmLists.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        }

        func validate() throws {
            if let protocolName, !["ctap2.1", "u2f-only"].contains(protocolName) {
                throw ValidationError("--protocol is ctap2.1 or u2f-only.")
            }
            if !algorithmLists.isEmpty, algorithms.contains(where: \.isEmpty) {
                throw ValidationError("--algorithms takes algorithm names separated by commas, none empty.")
            }
            if let maxDiscoverableCredentials, maxDiscoverableCredentials < 1 {
                throw ValidationError("--max-discoverable-credentials is a positive number.")
            }
        }

        func run() throws {
            var settings = CreateKeySettings(
                name: name.rawValue, presence: presence?.rawValue, uhid: uhid, usbip: usbip
            )
            settings.owner = owner
            settings.exportable = exportable ? true : nil
            settings.protocol = protocolName
            settings.hasUserVerification = userVerification
            settings.isUserVerified = userVerified
            if !epRpIds.isEmpty { settings.enterpriseAttestationRpIds = epRpIds }
            if !algorithmLists.isEmpty { settings.algorithms = algorithms }
            settings.maxDiscoverableCredentials = maxDiscoverableCredentials
            var body = CreateKeyRequest(settings)
            for feature in features { body.features[feature.feature] = feature.on }
            let response = try global.client().post(ControlPath.keys, json: body)
            try global.show(response, as: KeyInfo.self) { key in
                "Created key \(key.name.quoted).\n\n" + KeyTable.fields(key)
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one key (GET /v1/keys/NAME).",
            discussion: """
                Examples:
                  latchkeyctl keys show default
                  latchkeyctl keys show ci-1 --json | jq -r .uhid.hidraw
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The key's name.", transform: KeyName.argument)
        var name: KeyName

        func run() throws {
            try global.showDocument(at: ControlPath.key(name), as: KeyInfo.self, KeyTable.fields)
        }
    }

    struct Replug: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unplug a key and plug it in again (POST /v1/keys/NAME/replug).",
            discussion: """
                As pulling a hardware key out and back in: PIN entry blocked by \
                three wrong PINs in a row works again, PIN tokens end, and a FIDO \
                tool's reset is allowed for the next 10 seconds.

                Examples:
                  latchkeyctl keys replug default
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The key's name.", transform: KeyName.argument)
        var name: KeyName

        func run() throws {
            let response = try global.client().post(ControlPath.key(name) + "/replug")
            try global.show(response, as: KeyInfo.self) { _ in "Replugged key \(name.quoted)." }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a key and its credentials (DELETE /v1/keys/NAME).",
            discussion: """
                Examples:
                  latchkeyctl keys delete ci-1
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The key's name.", transform: KeyName.argument)
        var name: KeyName

        func run() throws {
            _ = try global.client().delete(ControlPath.key(name))
            global.say("Deleted key \(name.quoted).")
        }
    }
}

/// A feature switch on the command line: `--NAME` turns a row of the `KeyFeature`
/// table on, `--no-NAME` off (NAME is its configuration key: --large-blob,
/// --no-prf). The table makes the flags, so a new feature needs no code here.
struct FeatureSwitch: EnumerableFlag, CustomStringConvertible {
    let feature: KeyFeature
    let on: Bool

    static var allCases: [FeatureSwitch] {
        KeyFeature.all.flatMap { [FeatureSwitch(feature: $0, on: true), FeatureSwitch(feature: $0, on: false)] }
    }

    static func name(for value: FeatureSwitch) -> NameSpecification { .customLong(value.description) }

    static func help(for value: FeatureSwitch) -> ArgumentHelp? {
        let feature = value.feature
        return value.on
            ? ArgumentHelp("Offer \(feature.summary) (default: \(feature.defaultValue ? "yes" : "no")).")
            : ArgumentHelp("Do not offer \(feature.summary).")
    }

    /// The flag without its dashes: "large-blob", "no-large-blob".
    var description: String { (on ? "" : "no-") + feature.configurationKey }
}
