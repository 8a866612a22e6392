// latchkeyctl: the command-line client of latchkeyd's control API (HTTP/1.1
// and JSON on a Unix socket). The root command, the options every command
// shares, and the one place where errors become exit codes.

import ArgumentParser
import Foundation
import Glibc
import LatchkeyContract

@main
struct LatchkeyCtl: AsyncParsableCommand {
    static let version = LatchkeyVersion.string

    static let configuration = CommandConfiguration(
        commandName: "latchkeyctl",
        abstract: "Control latchkeyd, the latchkey virtual FIDO2 security key daemon.",
        discussion: """
            latchkeyctl talks to latchkeyd's control API (HTTP/1.1 and JSON on a Unix \
            socket). It lists and creates virtual keys, inspects and deletes their \
            credentials, sets how a key asks for user presence, and answers pending \
            presence requests — by hand, or from a CI rig. It also manages what a \
            FIDO tool would: a key's PIN, its alwaysUv and minimum PIN length \
            settings, credential user names, and reset.

            The socket is --socket PATH, else $LATCHKEY_SOCKET, else \
            /run/latchkeyd/control.sock if it exists, else \
            $XDG_RUNTIME_DIR/latchkeyd/control.sock. Every command takes --json to \
            print the daemon's JSON answer (pretty-printed) instead of a table.

            Examples:
              latchkeyctl status
              latchkeyctl keys create ci-1 --presence prompt --no-usbip
              latchkeyctl credentials list --key ci-1
              latchkeyctl presence set auto --key ci-1
              latchkeyctl approve --wait 10        # answer the next touch request
              latchkeyctl --socket /tmp/l.sock pending --json
              latchkeyctl pin set                  # asks twice, without echo
              latchkeyctl reset ci-1 --yes

            Exit codes:
              0   success
              1   the daemon refused the request (HTTP 4xx other than 404, or 5xx),
                  or a confirmation was declined
              3   the PIN was wrong (a retry is spent), or PIN entry is blocked
              4   not found (HTTP 404), or no presence request pending
              64  usage error: bad arguments, or several requests pending and
                  neither an ID nor --oldest given
              69  the daemon is unavailable: no socket, connection refused,
                  permission denied, or no answer in time
              70  internal or protocol error: a malformed response
            """,
        version: version,
        subcommands: [
            Status.self, Keys.self, Credentials.self, Pin.self, Config.self, LargeBlob.self, Reset.self,
            Presence.self, Pending.self, Approve.self, Deny.self,
            Events.self, Overrides.self,
            Signal.self, Export.self, Import.self,
            Watch.self, Agent.self, Policy.self,
            Attach.self, UdevOwner.self,
        ]
    )

    // Declared here too so that the options may come before a subcommand's
    // name; ArgumentParser hands their values to the subcommand's group.
    @OptionGroup var global: GlobalOptions

    /// Runs the command; a `CtlError` is printed and becomes its exit code,
    /// anything else (parse and validation errors, help) is ArgumentParser's.
    /// Commands that stream (`events`) are async; the rest wait for each answer.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var streaming = command as? any AsyncParsableCommand {
                try await streaming.run()
            } else {
                try command.run()
            }
        } catch let error as CtlError {
            FileHandle.standardError.write(Data("Error: \(error.message)\n".utf8))
            Glibc.exit(error.code.rawValue)
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every command takes; they may come before or after the
/// subcommand's name.
struct GlobalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The control socket (default: $LATCHKEY_SOCKET, /run/latchkeyd/control.sock, or "
                + "$XDG_RUNTIME_DIR/latchkeyd/control.sock).",
            valueName: "path"
        )
    )
    var socket: String?

    @Flag(help: "Print the daemon's JSON answer, pretty-printed, instead of a table.")
    var json = false

    @Option(help: ArgumentHelp("Give up on a request the daemon has not answered in this time.", valueName: "seconds"))
    var requestTimeout: Double = 10

    func validate() throws {
        guard requestTimeout.isFinite, requestTimeout > 0, requestTimeout <= 86400 else {
            throw ValidationError("--request-timeout must be more than 0 and at most 86400 seconds.")
        }
    }

    func client() -> ControlClient {
        let location = SocketLocation.resolve(
            option: socket,
            environment: ProcessInfo.processInfo.environment,
            exists: { FileManager.default.fileExists(atPath: $0) }
        )
        return ControlClient(socket: location, timeout: .milliseconds(Int64(requestTimeout * 1000)))
    }

    /// Prints `response`: its JSON with `--json`, else `render` of its decoded body.
    func show<Body: Decodable>(
        _ response: ControlResponse,
        as type: Body.Type,
        _ render: (Body) -> String
    ) throws(CtlError) {
        if json {
            print(try JSONOutput.pretty(response.body, request: response.request))
        } else {
            print(render(try response.decode(Body.self)))
        }
    }

    /// GETs the document at `path` and prints it as `show` does.
    func showDocument<Body: Decodable>(
        at path: String,
        as type: Body.Type,
        _ render: (Body) -> String
    ) throws(CtlError) {
        try show(try client().get(path), as: type, render)
    }

    /// Prints `message` unless `--json` (a 204 answer has no JSON to print).
    func say(_ message: String) {
        if !json { print(message) }
    }
}

/// A key's presence mode.
enum PresenceMode: String, CaseIterable, ExpressibleByArgument {
    /// Approve every request at once (CI).
    case auto
    /// Wait for `latchkeyctl approve` or a desktop notification.
    case prompt
    /// Refuse every request.
    case deny
}

/// `--key NAME`, defaulting to the key named "default".
struct KeyOption: ParsableArguments {
    @Option(name: .shortAndLong, help: ArgumentHelp("The key's name.", valueName: "name"), transform: KeyName.argument)
    var key: KeyName = "default"
}

extension String {
    /// The string in double quotes, for messages.
    var quoted: String { "\"\(Sanitize.inline(self))\"" }
}
