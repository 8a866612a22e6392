// The browser's side of a DevTools WebSocket: a WebSocket client on NIO's own
// upgrader, which sends no Origin header. Chromium refuses every WebSocket
// upgrade to its debugging port that carries an Origin (HTTP 403, unless the
// browser was started with --remote-allow-origins), and swift-websocket's
// client always sends one; CDP clients (Playwright's, Puppeteer's) send none
// either. Frames the browser sends are read into whole messages (continuation
// frames joined); pings are answered; a close is answered and ends the reading.
// Every frame written is masked, as a client's must be (RFC 6455 §5.3).

import HummingbirdWebSocket
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

struct BrowserSocket: Sendable {
    enum Failure: Error, CustomStringConvertible {
        case notUpgraded
        case tooLarge(Int)

        var description: String {
            switch self {
            case .notUpgraded: "the browser refused the WebSocket upgrade"
            case .tooLarge(let size): "the browser sent a message over \(size) bytes"
            }
        }
    }

    private enum Upgrade: Sendable {
        case websocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case notUpgraded
    }

    let outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>
    let inbound: NIOAsyncChannelInboundStream<WebSocketFrame>

    /// Connects to ws://`host`:`port``path` and runs `body` with the connection; it is
    /// closed when `body` returns.
    static func connect(
        host: String,
        port: Int,
        path: String,
        maximumMessage: Int,
        _ body: @Sendable (BrowserSocket) async throws -> Void
    ) async throws {
        let upgrade = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
                        maxFrameSize: maximumMessage,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                .websocket(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                            }
                        }
                    )
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "\(host):\(port)")
                    headers.add(name: "Content-Length", value: "0")
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers),
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in
                            channel.eventLoop.makeCompletedFuture { .notUpgraded }
                        }
                    )
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    pipeline.leftOverBytesStrategy = .forwardBytes
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: pipeline
                    )
                }
            }
        guard case .websocket(let channel) = try await upgrade.get() else { throw Failure.notUpgraded }
        try await channel.executeThenClose { inbound, outbound in
            try await body(BrowserSocket(outbound: outbound, inbound: inbound))
        }
    }

    /// Calls `each` with every message the browser sends, until it closes.
    func messages(maximumSize: Int, _ each: (WebSocketMessage) async throws -> Void) async throws {
        var message: (opcode: WebSocketOpcode, data: ByteBuffer)?
        for try await frame in inbound {
            switch frame.opcode {
            case .text, .binary:
                message = (frame.opcode, frame.unmaskedData)
            case .continuation:
                guard var pending = message else { continue }
                var more = frame.unmaskedData
                pending.data.writeBuffer(&more)
                message = pending
            case .ping:
                try await send(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
                continue
            case .connectionClose:
                try? await send(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData))
                return
            default:
                continue
            }
            guard let complete = message else { continue }
            guard complete.data.readableBytes <= maximumSize else { throw Failure.tooLarge(maximumSize) }
            guard frame.fin else { continue }
            message = nil
            if complete.opcode == .text {
                try await each(.text(String(buffer: complete.data)))
            } else {
                try await each(.binary(complete.data))
            }
        }
    }

    func write(_ message: WebSocketMessage) async throws {
        switch message {
        case .text(let text): try await send(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text)))
        case .binary(let buffer): try await send(WebSocketFrame(fin: true, opcode: .binary, data: buffer))
        }
    }

    /// A normal closure (1000); the browser answers and closes the connection.
    func close() async {
        var code = ByteBuffer()
        code.write(webSocketErrorCode: .normalClosure)
        try? await send(WebSocketFrame(fin: true, opcode: .connectionClose, data: code))
    }

    private func send(_ frame: WebSocketFrame) async throws {
        var frame = frame
        frame.maskKey = .random()
        try await outbound.write(frame)
    }
}
