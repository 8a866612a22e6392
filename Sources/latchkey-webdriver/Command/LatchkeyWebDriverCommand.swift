// latchkey-webdriver: a WebDriver intermediary that answers WebAuthn §11's
// virtual authenticator commands with latchkeyd keys and forwards every other
// command to the browser's driver. The work is in the LatchkeyWebDriver
// library; this file only reads the options.

import ArgumentParser
import Foundation
import LatchkeyContract
import LatchkeyWebDriver
import Logging

@main
struct LatchkeyWebDriverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latchkey-webdriver",
        abstract: "Serve WebDriver's virtual authenticator commands (WebAuthn §11) with latchkeyd keys.",
        discussion: """
            Point a WebDriver client at http://127.0.0.1:PORT instead of the browser's driver. \
            Add Virtual Authenticator creates a latchkeyd key (wd-<random>, presence auto) that the \
            browser sees as a USB security key through /dev/uhid or USB/IP; Add/Get/Remove \
            Credential(s) and Set User Verified go to that key through latchkeyd's control API. \
            Every other command goes to --upstream unchanged. The driver never sees a WebAuthn \
            command, so its in-browser virtual authenticator stays off and the browser's real \
            HID and UI code runs.

            A session's keys are removed when the session is deleted, when it sends no request \
            for --idle-timeout seconds (a test that died), and when latchkey-webdriver stops.

            Examples:
              chromedriver --port=9515 &
              latchkey-webdriver                                  # 127.0.0.1:4445 -> 127.0.0.1:9515
              latchkey-webdriver --port 4444 --upstream http://127.0.0.1:9515 --idle-timeout 120
              latchkey-webdriver --socket /run/latchkeyd/control.sock

            Python:
              driver = webdriver.Remote("http://127.0.0.1:4445", options=webdriver.ChromeOptions())
              driver.add_virtual_authenticator(VirtualAuthenticatorOptions(has_resident_key=True))

            --devtools makes it a DevTools gateway in front of Chromium's --remote-debugging-port: \
            CDP clients connect to it as to the browser (HTTP /json discovery, WebSockets, flat \
            sessions pass unchanged); the WebAuthn domain (addVirtualAuthenticator, addCredential, \
            getCredentials, ...) is answered with latchkeyd keys (cdp-<random>), its credential \
            events come from latchkeyd, and a session's keys go when it detaches or disconnects.
              chromium --remote-debugging-port=9222 &
              latchkey-webdriver --devtools                       # 127.0.0.1:9223 -> 127.0.0.1:9222
              browser = playwright.chromium.connect_over_cdp("http://127.0.0.1:9223")

            Isolation (--isolation account, the default): the browser behind --upstream must run \
            as this account, and no other browser of the account may hold a key at the same time: \
            run each parallel browser, and its latchkey-webdriver, as an account of its own.

            It listens on 127.0.0.1 only and serves only connections from its own account and \
            root (the kernel names the account behind each connection) whose Host is \
            127.0.0.1, localhost or [::1] with its port; anything else gets a WebDriver error \
            (HTTP 403) and the connection closes. The keys it creates belong to the account it \
            runs as: run one latchkey-webdriver per account.
            """,
        version: LatchkeyVersion.string
    )

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Be a DevTools gateway instead: stand for Chromium's --remote-debugging-port (--upstream).",
            discussion: "CDP clients (Playwright's connect_over_cdp, Puppeteer, raw WebSockets) connect here; "
                + "the WebAuthn domain is answered with latchkeyd keys, everything else passes to the browser."
        )
    )
    var devtools = false

    @Option(name: .long, help: "The loopback port to listen on (0: any free port, logged; default 4445, with --devtools 9223).")
    var port: Int?

    @Option(
        name: .long,
        help: "The browser driver's base URL (chromedriver, geckodriver, a Selenium Grid); with --devtools, the browser's debugging address (default http://127.0.0.1:9222)."
    )
    var upstream: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "account: each browser is its account's, one at a time per account (default); off: no check.",
            discussion: "docs/automation.md, \"Parallel tests\": keys are their owner's, and a browser reaches every key of its account."
        )
    )
    var isolation = "account"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "latchkeyd's control socket.",
            discussion:
                "Default as latchkeyctl's: $LATCHKEY_SOCKET, else /run/latchkeyd/control.sock if it exists, else $XDG_RUNTIME_DIR/latchkeyd/control.sock."
        )
    )
    var socket: String?

    @Option(name: .customLong("idle-timeout"), help: "Seconds a session may send nothing before its keys are removed.")
    var idleTimeout: Double = 300

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    var listenPort: Int { port ?? (devtools ? 9223 : 4445) }
    var upstreamURL: String { upstream ?? (devtools ? "http://127.0.0.1:9222" : "http://127.0.0.1:9515") }

    func validate() throws {
        guard (0...65535).contains(listenPort) else { throw ValidationError("--port must be 0 to 65535") }
        guard IsolationMode(rawValue: isolation) != nil else { throw ValidationError("--isolation must be account or off") }
        let upstream = upstreamURL
        guard upstream.hasPrefix("http://") || upstream.hasPrefix("https://"), URL(string: upstream)?.host != nil else {
            throw ValidationError("--upstream must be an http:// or https:// URL, e.g. http://127.0.0.1:9515")
        }
        guard idleTimeout > 0, idleTimeout.isFinite else { throw ValidationError("--idle-timeout must be above 0") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be trace, debug, info, notice, warning, error or critical")
        }
    }

    func run() async throws {
        let socketPath = SocketLocation.resolve(
            option: socket,
            environment: ProcessInfo.processInfo.environment,
            exists: { FileManager.default.fileExists(atPath: $0) }
        ).path
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "latchkey-webdriver")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let isolation = IsolationMode(rawValue: isolation) ?? .account
        if devtools {
            let options = DevToolsGatewayOptions(
                port: listenPort, upstream: upstreamURL, socketPath: socketPath, isolation: isolation)
            try await DevToolsGateway.run(options, logger: logger)
            return
        }
        let options = IntermediaryOptions(
            port: listenPort,
            upstream: upstreamURL,
            socketPath: socketPath,
            idleTimeout: .milliseconds(Int64(idleTimeout * 1000)),
            isolation: isolation
        )
        try await Intermediary.run(options, logger: logger)
    }
}
