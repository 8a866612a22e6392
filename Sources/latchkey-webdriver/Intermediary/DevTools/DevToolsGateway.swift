// latchkey-webdriver --devtools: the DevTools gateway. It stands where a CDP
// client (Playwright's connect_over_cdp, Puppeteer's connect, a raw WebSocket)
// expects the browser's --remote-debugging-port:
//
// - HTTP (`/json/version`, `/json/list`, `/json/new`, `/json/protocol`, …) goes
//   to the browser and back unchanged, but for the WebSocket URLs in the
//   answers, which name the gateway instead of the browser;
// - each WebSocket (`/devtools/browser/…`, `/devtools/page/…`) is joined to the
//   browser's WebSocket of the same path (BrowserSocket.swift), and every message passes unchanged in
//   both directions, flat sessions (`sessionId`) included, except the WebAuthn
//   domain's commands: those are answered by the gateway from latchkeyd
//   (WebAuthnDomain.swift) and never reach the browser, so its in-browser virtual
//   authenticator stays off and it uses the real key through HID;
// - the domain's credential events come from latchkeyd's event stream
//   (EventFeed.swift) to the session that owns the key;
// - a session's keys go when it detaches (Target.detachedFromTarget), disables
//   the domain, or its WebSocket closes, and every key when the gateway stops.
//
// Only this account and root, through a loopback Host, are served (CallerGate);
// the WebSocket upgrade is checked the same way.

import AsyncHTTPClient
import Foundation
import Glibc
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import LatchkeyJSON
import Logging
import NIOCore
import ServiceLifecycle

/// How the DevTools gateway runs.
public struct DevToolsGatewayOptions: Sendable {
    public var port: Int
    /// The browser's debugging address, e.g. "http://127.0.0.1:9222".
    public var upstream: String
    public var socketPath: String
    public var isolation: IsolationMode

    public init(port: Int, upstream: String, socketPath: String, isolation: IsolationMode) {
        self.port = port
        self.upstream = upstream
        self.socketPath = socketPath
        self.isolation = isolation
    }
}

/// The rewriting of discovery answers.
public enum DevToolsDiscovery {
    /// `body` with every WebSocket address of a DevTools endpoint (`ws://HOST:PORT/devtools/…`,
    /// and the front end's `ws=HOST:PORT/devtools/…`) naming `authority` instead.
    public static func rewrite(_ body: String, to authority: String) -> String {
        var result = ""
        var rest = Substring(body)
        while let marker = [rest.range(of: "ws://"), rest.range(of: "ws=")].compactMap({ $0 })
            .min(by: { $0.lowerBound < $1.lowerBound })
        {
            result += rest[..<marker.upperBound]
            rest = rest[marker.upperBound...]
            // HOST:PORT up to the path, which must be a DevTools endpoint's.
            if let slash = rest.firstIndex(of: "/"), rest[slash...].hasPrefix("/devtools/"),
                !rest[..<slash].contains(where: { "\"&? ".contains($0) })
            {
                result += authority
                rest = rest[slash...]
            }
        }
        return result + rest
    }
}

public enum DevToolsGateway {
    /// The largest message either side may send (a screenshot, a page's DOM).
    static let maximumMessage = 256 * 1024 * 1024

    /// Serves until SIGINT or SIGTERM, then removes every key it added.
    public static func run(_ options: DevToolsGatewayOptions, logger: Logger) async throws {
        let clients = GatewayClients()
        let upstreamURL = URL(string: options.upstream)
        let sessions = DevToolsSessions()
        let domain = WebAuthnDomain(
            control: ControlAPI(socketPath: options.socketPath, client: clients.control),
            sessions: sessions,
            account: BrowserAccount(
                mode: options.isolation,
                upstreamHost: upstreamURL?.host ?? "",
                upstreamPort: upstreamURL?.port ?? 80,
                uid: getuid()
            ),
            logger: logger
        )
        let gate = CallerGate(uid: getuid())
        let upstream = Upstream(base: options.upstream, client: clients.upstream)
        let bridge = Bridge(
            host: upstreamURL?.host ?? "127.0.0.1",
            port: upstreamURL?.port ?? 80,
            sessions: sessions,
            domain: domain,
            logger: logger
        )
        var application = Application(
            responder: DiscoveryResponder(upstream: upstream, gate: gate, logger: logger),
            // CDP messages run to megabytes in one frame (a screenshot, a script): frames
            // as large as a message, both ways.
            server: .http1WebSocketUpgrade(
                configuration: .init(ws: .init(maxFrameSize: DevToolsGateway.maximumMessage, closeTimeout: .seconds(3)))
            ) { head, channel, _ in
                // A refused upgrade is answered 400 and closed (hummingbird-websocket's answer).
                guard gate.refusal(of: channel, authority: head.authority, logger: logger) == nil,
                    let path = head.path, path.hasPrefix("/devtools/")
                else { return .dontUpgrade }
                return .upgrade([:]) { inbound, outbound, _ in
                    await bridge.run(path: path, client: (inbound, outbound))
                }
            },
            configuration: ApplicationConfiguration(
                address: .hostname("127.0.0.1", port: options.port),
                serverName: "latchkey-webdriver"
            ),
            onServerRunning: { channel in
                logger.notice(
                    "latchkey-webdriver DevTools gateway listening",
                    metadata: [
                        "address": "127.0.0.1:\(channel.localAddress?.port ?? options.port)",
                        "upstream": "\(options.upstream)", "control-socket": "\(options.socketPath)",
                        "isolation": "\(options.isolation.rawValue)",
                    ]
                )
            },
            logger: logger
        )
        application.addServices(
            EventFeed(socketPath: options.socketPath, client: clients.control, domain: domain, logger: logger)
        )
        try await clients.run({ try await application.runService() }) {
            await domain.removeKeys(await sessions.removeAll(), reason: "latchkey-webdriver stopped")
        }
    }
}

/// One client WebSocket joined to the browser's.
struct Bridge: Sendable {
    /// The browser's debugging address.
    let host: String
    let port: Int
    let sessions: DevToolsSessions
    let domain: WebAuthnDomain
    let logger: Logger

    func run(path: String, client: (inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter)) async {
        let (outlet, continuation) = AsyncStream<WebSocketMessage>.makeStream()
        let connection = await sessions.open(continuation)
        logger.debug("DevTools connection opened", metadata: ["connection": "\(connection)", "path": "\(path)"])
        do {
            try await BrowserSocket.connect(host: host, port: port, path: path, maximumMessage: DevToolsGateway.maximumMessage) {
                browser in
                // The gateway stopping closes the browser's side, which ends the connection.
                try await withGracefulShutdownHandler {
                    try await pump(connection: connection, client: client, browser: browser, outlet: (outlet, continuation))
                } onGracefulShutdown: {
                    Task { await browser.close() }
                }
            }
        } catch {
            logger.warning(
                "DevTools connection to the browser failed",
                metadata: ["connection": "\(connection)", "path": "\(path)", "error": "\(error)"]
            )
        }
        try? await client.outbound.close(.normalClosure, reason: nil)
        let keys = await sessions.close(connection)
        await domain.removeKeys(keys, reason: "DevTools connection closed")
        logger.debug("DevTools connection closed", metadata: ["connection": "\(connection)"])
    }

    private func pump(
        connection: UInt64,
        client: (inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter),
        browser: BrowserSocket,
        outlet: (stream: AsyncStream<WebSocketMessage>, continuation: AsyncStream<WebSocketMessage>.Continuation)
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Everything the client receives goes through one writer, in order; when either
            // side ends, what is queued is written and the client's side is closed.
            group.addTask {
                for await message in outlet.stream {
                    switch message {
                    case .text(let text): try await client.outbound.writeTextMessage(text)
                    case .binary(let buffer): try await client.outbound.writeBinaryMessage(buffer)
                    }
                }
                try? await client.outbound.close(.normalClosure, reason: nil)
            }
            // Client to browser: the WebAuthn domain is answered here.
            group.addTask {
                defer { outlet.continuation.finish() }
                for try await message in client.inbound.messages(maxSize: DevToolsGateway.maximumMessage) {
                    switch message {
                    case .binary:
                        try await browser.write(message)
                    case .text(let text):
                        switch CDPMessage.route(text) {
                        case .forward:
                            try await browser.write(message)
                        case .webAuthn(let command):
                            outlet.continuation.yield(.text(await domain.answer(command, connection: connection)))
                        case .refuse(let id, let sessionId, let error):
                            outlet.continuation.yield(.text(CDPMessage.error(id: id, sessionId: sessionId, error)))
                        }
                    }
                }
                await browser.close()
            }
            // Browser to client, unchanged; a detached flat session loses its keys.
            group.addTask {
                defer { outlet.continuation.finish() }
                try await browser.messages(maximumSize: DevToolsGateway.maximumMessage) { message in
                    if case .text(let text) = message, let sessionId = CDPMessage.detachedSession(text) {
                        let keys = await sessions.detached(CDPScope(connection: connection, sessionId: sessionId))
                        await domain.removeKeys(keys, reason: "session \(sessionId) detached")
                    }
                    outlet.continuation.yield(message)
                }
            }
            // The first side to end ends the connection.
            _ = try await group.next()
            group.cancelAll()
        }
    }
}

/// HTTP: discovery and anything else the debugging port serves, forwarded, with the
/// WebSocket addresses in `/json…` answers naming the gateway.
struct DiscoveryResponder: HTTPResponder {
    typealias Context = IntermediaryContext

    let upstream: Upstream
    let gate: CallerGate
    let logger: Logger

    func respond(to request: Request, context: Context) async throws -> Response {
        let channel = context.channel
        if let refusal = gate.refusal(of: channel, authority: request.head.authority, logger: logger) {
            // Nothing more is read from it: the answer goes out, then the connection closes.
            channel.close(mode: .input, promise: nil)
            return Response(
                status: .forbidden,
                headers: [.contentType: "text/plain; charset=utf-8", .connection: "close"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: refusal.message + "\n"))
            )
        }
        var request = request
        let target = request.head.path ?? "/"
        let body = try await request.collectBody(upTo: Upstream.maximumBodySize)
        var answer: UpstreamAnswer
        do {
            answer = try await upstream.forward(
                method: request.method.rawValue,
                target: target,
                headers: request.headers,
                body: body
            )
        } catch {
            logger.warning("the browser's debugging port failed", metadata: ["error": "\(error.message)"])
            return Response(
                status: .badGateway,
                headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: error.message + "\n"))
            )
        }
        if target.hasPrefix("/json"), let authority = request.head.authority {
            answer.body = ByteBuffer(string: DevToolsDiscovery.rewrite(String(buffer: answer.body), to: authority))
        }
        return answer.hummingbird
    }
}
