// The WebDriver intermediary: an HTTP server on 127.0.0.1 that a WebDriver
// client (Selenium's webdriver.Remote) talks to as if it were the browser's
// driver. WebAuthn §11 commands are answered with latchkeyd keys
// (VirtualAuthenticators.swift); every other request goes to the upstream
// driver unchanged (Upstream.swift). A session's keys are removed when the
// session is deleted, when it has been silent for the idle timeout, and when
// the intermediary stops (SIGINT, SIGTERM). Only this account and root may
// use it, and only through a loopback Host (CallerGate.swift).

import LatchkeyJSON
import AsyncHTTPClient
import Glibc
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// How the intermediary runs (latchkey-webdriver's options).
public struct IntermediaryOptions: Sendable {
    /// The loopback port to listen on; 0 lets the system pick one (logged).
    public var port: Int
    /// The browser driver's base URL, e.g. "http://127.0.0.1:9515".
    public var upstream: String
    /// latchkeyd's control socket.
    public var socketPath: String
    /// How long a session with keys may go without a request.
    public var idleTimeout: Duration
    /// How parallel sessions are kept apart (BrowserAccount.swift).
    public var isolation: IsolationMode

    public init(
        port: Int,
        upstream: String,
        socketPath: String,
        idleTimeout: Duration,
        isolation: IsolationMode = .account
    ) {
        self.port = port
        self.upstream = upstream
        self.socketPath = socketPath
        self.idleTimeout = idleTimeout
        self.isolation = isolation
    }
}

public enum Intermediary {
    /// Serves until SIGINT or SIGTERM, then removes every key it added.
    public static func run(_ options: IntermediaryOptions, logger: Logger) async throws {
        let clients = GatewayClients()
        let sessions = SessionRegistry()
        let upstreamURL = URL(string: options.upstream)
        let authenticators = VirtualAuthenticators(
            control: ControlAPI(socketPath: options.socketPath, client: clients.control),
            sessions: sessions,
            account: BrowserAccount(
                mode: options.isolation,
                upstreamHost: upstreamURL?.host ?? "",
                upstreamPort: upstreamURL?.port ?? (options.upstream.hasPrefix("https://") ? 443 : 80),
                uid: getuid()
            ),
            logger: logger
        )
        let responder = IntermediaryResponder(
            upstream: Upstream(base: options.upstream, client: clients.upstream),
            authenticators: authenticators,
            sessions: sessions,
            gate: CallerGate(uid: getuid()),
            logger: logger
        )
        var application = Application(
            responder: responder,
            configuration: ApplicationConfiguration(
                address: .hostname("127.0.0.1", port: options.port),
                serverName: "latchkey-webdriver"
            ),
            onServerRunning: { channel in
                logger.notice(
                    "latchkey-webdriver listening",
                    metadata: [
                        "address": "127.0.0.1:\(channel.localAddress?.port ?? options.port)",
                        "upstream": "\(options.upstream)", "control-socket": "\(options.socketPath)",
                    ]
                )
            },
            logger: logger
        )
        application.addServices(
            IdleSweeper(timeout: options.idleTimeout, sessions: sessions, authenticators: authenticators)
        )
        try await clients.run({ try await application.runService() }) {
            await authenticators.removeKeys(await sessions.removeAll(), reason: "latchkey-webdriver stopped")
        }
    }
}

/// Answers one request: a §11 command itself, anything else through the upstream.
struct IntermediaryResponder: HTTPResponder {
    typealias Context = IntermediaryContext

    let upstream: Upstream
    let authenticators: VirtualAuthenticators
    let sessions: SessionRegistry
    let gate: CallerGate
    let logger: Logger

    func respond(to request: Request, context: Context) async throws -> Response {
        let channel = context.channel
        if let refusal = gate.refusal(of: channel, authority: request.head.authority, logger: logger) {
            // Nothing more is read from it: the answer goes out, then the connection closes.
            channel.close(mode: .input, promise: nil)
            var response = Self.answer(.failure(refusal))
            response.headers[.connection] = "close"
            return response
        }
        var request = request
        let target = request.head.path ?? "/"
        let path = String(target.prefix { $0 != "?" })
        let method = request.method.rawValue
        let body = try await request.collectBody(upTo: Upstream.maximumBodySize)
        let route = WebDriverRoute(method: method, path: path)
        switch route {
        case .webAuthn(let session, let command):
            await sessions.begin(session)
            let response = await webAuthn(command, session: session, method: method, path: path, body: body)
            await sessions.end(session)
            return response
        case .newSession:
            let response = await forward(method, target, request.headers, body)
            if (200..<300).contains(response.status), let session = Self.sessionId(of: response.body) {
                await sessions.created(session)
            }
            return response.hummingbird
        case .deleteSession(let session):
            let response = await forward(method, target, request.headers, body)
            await authenticators.removeKeys(await sessions.end(session: session), reason: "session deleted")
            return response.hummingbird
        case .forward(nil) where method == "GET" && NodeStatus.isStatus(path):
            return await NodeStatus.answer(
                upstream: await forward(method, target, request.headers, body),
                control: authenticators.control
            ).hummingbird
        case .forward(let session):
            if let session { await sessions.begin(session) }
            let response = await forward(method, target, request.headers, body)
            if let session { await sessions.end(session) }
            return response.hummingbird
        }
    }

    private func webAuthn(_ command: WebAuthnCommand, session: String, method: String, path: String, body: ByteBuffer)
        async -> Response
    {
        switch command {
        case .unknown:
            return Self.answer(.failure(.unknownCommand(method, path)))
        case .unknownMethod(let allowed):
            return Self.answer(.failure(.unknownMethod(method, path, allowed: allowed)))
        default:
            let parameters = body.readableBytes == 0 ? nil : JSONValue.parse(body.readableBytesView)
            if body.readableBytes > 0, parameters == nil {
                return Self.answer(.failure(.invalidArgument("the request body is not JSON")))
            }
            do {
                return Self.answer(
                    .success(try await authenticators.handle(command, session: session, body: parameters))
                )
            } catch {
                logger.info(
                    "WebAuthn command refused",
                    metadata: ["method": "\(method)", "path": "\(path)", "error": "\(error.code): \(error.message)"]
                )
                return Self.answer(.failure(error))
            }
        }
    }

    private func forward(_ method: String, _ target: String, _ headers: HTTPFields, _ body: ByteBuffer) async
        -> UpstreamAnswer
    {
        do {
            return try await upstream.forward(method: method, target: target, headers: headers, body: body)
        } catch {
            logger.warning("upstream failed", metadata: ["error": "\(error.message)"])
            return UpstreamAnswer(
                status: error.status,
                headers: Self.jsonHeaders,
                body: ByteBuffer(data: error.document.text)
            )
        }
    }

    /// A New Session answer's session ID (W3C: value.sessionId; legacy: sessionId).
    static func sessionId(of body: ByteBuffer) -> String? {
        let document = JSONValue.parse(body.readableBytesView)?.object
        return document?["value"]?.object?["sessionId"]?.string ?? document?["sessionId"]?.string
    }

    static let jsonHeaders = [
        (name: "Content-Type", value: "application/json; charset=utf-8"), (name: "Cache-Control", value: "no-cache"),
    ]

    /// WebDriver's answer for a command's result.
    static func answer(_ result: Result<JSONValue, WebDriverError>) -> Response {
        let (status, document): (Int, JSONValue) =
            switch result {
            case .success(let value): (200, .object(["value": value]))
            case .failure(let error): (error.status, error.document)
            }
        return UpstreamAnswer(status: status, headers: jsonHeaders, body: ByteBuffer(data: document.text)).hummingbird
    }
}

extension UpstreamAnswer {
    /// The answer as Hummingbird sends it.
    var hummingbird: Response {
        var fields = HTTPFields()
        for (name, value) in headers {
            guard let name = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        return Response(status: .init(code: status), headers: fields, body: ResponseBody(byteBuffer: body))
    }
}

/// Removes the keys of sessions silent for the idle timeout.
struct IdleSweeper: Service {
    let timeout: Duration
    let sessions: SessionRegistry
    let authenticators: VirtualAuthenticators

    func run() async throws {
        let interval = min(max(timeout / 4, .milliseconds(100)), .seconds(5))
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    try await Task.sleep(for: interval)
                    for (session, keys) in await sessions.expire(after: timeout) {
                        authenticators.logger.notice(
                            "session silent for the idle timeout: removing its keys",
                            metadata: ["session": "\(session)", "keys": "\(keys)"]
                        )
                        await authenticators.removeKeys(keys, reason: "idle timeout")
                    }
                }
            }
        } catch is CancellationError {
            return
        }
    }
}
