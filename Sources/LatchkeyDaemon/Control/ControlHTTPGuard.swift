// The control API's HTTP limits, enforced on each connection's channel
// pipeline around Hummingbird's HTTP/1.1 channel (NIOHTTP1's decoder does
// the parsing and its limits do the measuring; these handlers only answer):
//
//     request target (URL) over 8 KiB ........ 414, then close
//     a header line over 16 KiB, a head over
//     32 KiB, or more than 100 header lines ... 431, then close
//     a body over the route's limit ........... 413, then close
//       (64 KiB; 16 MiB for an import; a Content-Length over the limit is
//        refused before any of the body is read)
//     a request that does not parse ........... 400, then close
//     a body still arriving 30 s after its head 408, then close
//     no request for 10 s (idle, or a head
//     trickling in) ........................... the connection is closed
//     more than 64 connections ................ the longest-idle one is
//       closed to make room; when every one is busy with a request, the
//       newcomer gets 503, then close
//
// Every answer is the API's error document (ControlServer+Errors.swift).
// Large bodies are not kept by the heap: the daemon fixes glibc's mmap
// threshold at start (`HeapPolicy`), so that a buffer of a large body is
// mapped and unmapped on its own, and trims the heap after such a request,
// so that its resident memory goes back down.

import CMalloc
import Foundation
import Hummingbird
import HummingbirdCore
import LatchkeyCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

/// How the daemon's C heap treats large buffers.
enum HeapPolicy {
    /// Buffers from this size up are mmapped and given back when freed.
    /// Setting it turns off glibc's dynamic threshold, which otherwise rises
    /// to the largest buffer freed so far (32 MiB at most) and keeps later
    /// large bodies in the heap, where they stay resident.
    static let mmapThreshold: Int32 = 256 * 1024

    /// Applies the policy; call once, at start.
    static func apply() {
        _ = mallopt(M_MMAP_THRESHOLD, mmapThreshold)
    }
}

/// The limits, in one place (README "Control API", the OpenAPI description).
enum ControlHTTPLimits {
    /// The longest request target (path and query), in bytes.
    static let maxURILength = 8 * 1024
    /// The longest header line (name and value) the decoder accepts.
    static let maxHeaderFieldSize = 16 * 1024
    /// The largest request head (request line and headers).
    static let maxHeadSize = 32 * 1024
    /// The most header lines.
    static let maxHeaderCount = 100
    /// The largest body of most routes.
    static let maxBodyBytes = 64 * 1024
    /// The largest body of all: an import (a few thousand passkeys, base64url inside JSON).
    static let maxImportBodyBytes = 16 << 20
    /// How long a connection may sit without a request (or with a head
    /// that does not complete).
    static let idleTimeout: TimeAmount = .seconds(10)
    /// How long a request's body may take to arrive.
    static let bodyDeadline: TimeAmount = .seconds(30)
    /// The most connections at once.
    static let maxConnections = 64
    /// A body at least this large trims the C heap once its request is answered.
    static let trimAfterBodyBytes = 1 << 20

    /// The body limit of the route serving `path`.
    static func bodyLimit(for path: String) -> Int {
        path.hasPrefix("/v1/keys/") && path.hasSuffix("/import") ? maxImportBodyBytes : maxBodyBytes
    }
}

/// Hummingbird's HTTP/1.1 channel, with the guards added to each connection
/// and its peer identified (ControlRequestContext.swift).
struct GuardedHTTP1Channel: ServerChildChannel {
    /// A connection and the process that opened it.
    struct Value: ServerChildChannelValue {
        let inner: HTTP1Channel.Value
        let caller: Caller
        var channel: any Channel { inner.channel }
    }

    let inner: HTTP1Channel

    /// The server builder that makes one for each connection.
    static func builder(governor: ConnectionGovernor) -> HTTPServerBuilder {
        var configuration = HTTP1Channel.Configuration(
            additionalChannelHandlers: [],
            idleTimeout: ControlHTTPLimits.idleTimeout,
            httpDecoderConfiguration: .init(
                maxHeaderFieldSize: ControlHTTPLimits.maxHeaderFieldSize,
                maxHeaderListSize: ControlHTTPLimits.maxHeadSize,
                maxHeaderFieldCount: ControlHTTPLimits.maxHeaderCount
            )
        )
        // One guard a connection; the meter added in setup shares its state.
        configuration.additionalChannelHandlers = {
            [ConnectionGuard(connection: ConnectionState(), governor: governor)]
        }
        let channelConfiguration = configuration
        return HTTPServerBuilder { responder in
            GuardedHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: channelConfiguration))
        }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // A peer the kernel does not name fails the setup: the connection
        // closes before a request is read.
        ControlConnection.peer(of: channel).flatMap { caller in
            inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
                // The meter goes first, before the HTTP decoder; it reaches the
                // guard's state through the guard in the same pipeline.
                let guardHandler = try channel.pipeline.syncOperations.handler(type: ConnectionGuard.self)
                try channel.pipeline.syncOperations.addHandler(
                    RequestLineMeter(connection: guardHandler.connection),
                    position: .first
                )
                return Value(inner: value, caller: caller)
            }
        }
    }

    /// Serves the connection's requests, each with its caller (one task runs them all).
    func handle(value: Value, logger: Logger) async {
        await ControlConnection.$caller.withValue(value.caller) {
            await inner.handle(value: value.inner, logger: logger)
        }
    }
}

/// What the two handlers of one connection know about it (event-loop confined).
final class ConnectionState {
    /// Whether the next bytes begin a request (no head decoded since the last one ended).
    var awaitingHead = true
    /// Whether the request line of the request being read has ended.
    var requestLineComplete = false
    /// How many bytes of that request line have been seen.
    var requestLineLength = 0

    /// Ready for the next request.
    func reset() {
        awaitingHead = true
        requestLineComplete = false
        requestLineLength = 0
    }
}

/// Measures the request line in the bytes before the decoder, so that a
/// decoder overflow can be told apart: a request line over the decoder's
/// field limit is 414, anything else 431. It answers nothing itself.
final class RequestLineMeter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let connection: ConnectionState

    init(connection: ConnectionState) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if connection.awaitingHead, !connection.requestLineComplete {
            let bytes = unwrapInboundIn(data).readableBytesView
            if let end = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                connection.requestLineLength += end - bytes.startIndex
                connection.requestLineComplete = true
            } else {
                connection.requestLineLength += bytes.count
            }
        }
        context.fireChannelRead(data)
    }
}

/// Enforces the limits on decoded requests, answers decoder errors, and
/// tells the governor when the connection is busy.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let connection: ConnectionState
    private let governor: ConnectionGovernor
    private var id: ObjectIdentifier?
    /// Set once the connection is to end: nothing more is passed on.
    private var closing = false
    /// Set when the connection must close after the current response.
    private var closeAfterResponse = false
    /// Whether a response has begun and not ended.
    private var responding = false
    /// Whether the current request has been answered.
    private var answered = false
    /// Set when a body went over its limit: the rest of it is dropped.
    private var discardingBody = false
    private var bodyBytes = 0
    private var bodyLimit = ControlHTTPLimits.maxImportBodyBytes
    private var bodyDeadline: Scheduled<Void>?

    init(connection: ConnectionState, governor: ConnectionGovernor) {
        self.connection = connection
        self.governor = governor
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        bodyDeadline?.cancel()
        if let id { governor.closed(id) }
        id = nil
        context.fireChannelInactive()
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard id == nil else { return }
        let id = ObjectIdentifier(context.channel)
        self.id = id
        if !governor.admit(id, channel: context.channel) {
            refuse(
                context,
                ControlHTTPError(503, "unavailable", "too many connections are busy; try again", closesConnection: true)
            )
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let head):
            DaemonActivity.note()
            connection.awaitingHead = false
            bodyBytes = 0
            answered = false
            discardingBody = false
            let target = head.path ?? ""
            if target.utf8.count > ControlHTTPLimits.maxURILength {
                return refuse(context, Self.uriTooLong)
            }
            bodyLimit = ControlHTTPLimits.bodyLimit(for: String(target.prefix { $0 != "?" }))
            if let length = head.headerFields[.contentLength].flatMap({ Int($0) }), length > bodyLimit {
                return refuse(context, .tooLarge(limit: bodyLimit))
            }
            if let id { governor.busy(id) }
            let loop = context.eventLoop.assumeIsolated()
            bodyDeadline = loop.scheduleTask(in: ControlHTTPLimits.bodyDeadline) { [self] in
                bodyDeadline = nil
                guard !closing else { return }
                let error = ControlHTTPError(
                    408, "request_timeout", "the request body did not arrive within 30 s", closesConnection: true
                )
                responding ? close(context) : refuse(context, error)
            }
        case .body(let buffer):
            guard !discardingBody else { return }
            bodyBytes += buffer.readableBytes
            if bodyBytes > bodyLimit {
                // This part still reaches the route, whose collectBody then
                // answers 413 (ErrorDocumentMiddleware); the rest is not read,
                // and the connection closes after the answer (or now, when the
                // route answered without reading the body).
                discardingBody = true
                closeAfterResponse = true
                bodyDeadline?.cancel()
                if answered { return close(context) }
            }
        case .end:
            bodyDeadline?.cancel()
            bodyDeadline = nil
            connection.reset()
            if discardingBody { return }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let response):
            responding = true
            if response.headerFields[.connection]?.lowercased() == "close" { closeAfterResponse = true }
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            responding = false
            answered = true
            if let id { governor.idle(id) }
            if bodyBytes >= ControlHTTPLimits.trimAfterBodyBytes {
                bodyBytes = 0
                Self.trimHeapSoon(on: context.eventLoop)
            }
            guard closeAfterResponse else { return context.write(data, promise: promise) }
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            written.futureResult.cascade(to: promise)
            context.writeAndFlush(data, promise: written)
        }
    }

    /// Decoder errors: the head is too large or does not parse.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        guard !closing else { return }
        if responding { return close(context) }
        switch parserError {
        case .headerOverflow
        where connection.awaitingHead && connection.requestLineLength >= ControlHTTPLimits.maxHeaderFieldSize:
            refuse(context, Self.uriTooLong)
        case .headerOverflow:
            refuse(
                context,
                ControlHTTPError(
                    431, "headers_too_large",
                    "the request's headers are over \(ControlHTTPLimits.maxHeaderFieldSize) bytes a line, "
                        + "\(ControlHTTPLimits.maxHeadSize) bytes in all, or \(ControlHTTPLimits.maxHeaderCount) lines",
                    closesConnection: true
                )
            )
        default:
            refuse(
                context,
                ControlHTTPError(400, "bad_request", "the request is not valid HTTP/1.1 (\(parserError))", closesConnection: true)
            )
        }
    }

    /// Gives the heap's free pages back to the kernel once the handler that
    /// read a large body has let go of it (it still holds the body while
    /// its answer is written).
    private static func trimHeapSoon(on loop: any EventLoop) {
        loop.scheduleTask(in: .milliseconds(100)) { malloc_trim(0) }
    }

    private static let uriTooLong = ControlHTTPError(
        414, "uri_too_long", "the request target is over \(ControlHTTPLimits.maxURILength) bytes", closesConnection: true
    )

    /// Answers with the error document, then closes; nothing more is read.
    private func refuse(_ context: ChannelHandlerContext, _ error: ControlHTTPError) {
        closing = true
        bodyDeadline?.cancel()
        let body = error.document
        var head = HTTPResponse(status: .init(code: error.status))
        head.headerFields[.contentType] = "application/json"
        head.headerFields[.contentLength] = "\(body.count)"
        head.headerFields[.connection] = "close"
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(ByteBuffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func close(_ context: ChannelHandlerContext) {
        closing = true
        context.close(promise: nil)
    }
}

/// Counts the control API's connections and decides who gets a slot: a
/// newcomer over the cap takes the slot of the connection idle the longest
/// (no request in progress); when every connection is busy, it is refused.
final class ConnectionGovernor: Sendable {
    private struct Entry {
        var channel: any Channel
        var busy: Bool
        var since: ContinuousClock.Instant
    }

    private let limit: Int
    private let logger: Logger
    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    init(limit: Int = ControlHTTPLimits.maxConnections, logger: Logger) {
        self.limit = limit
        self.logger = logger
    }

    /// Registers a new connection; false when it must be refused.
    func admit(_ id: ObjectIdentifier, channel: any Channel) -> Bool {
        let (admitted, evicted): (Bool, (any Channel)?) = entries.withLock { entries in
            var evicted: (any Channel)?
            if entries.count >= limit {
                guard let oldest = entries.filter({ !$0.value.busy }).min(by: { $0.value.since < $1.value.since }) else {
                    return (false, nil)
                }
                entries[oldest.key] = nil
                evicted = oldest.value.channel
            }
            entries[id] = Entry(channel: channel, busy: false, since: .now)
            return (true, evicted)
        }
        if let evicted {
            logger.debug("control API: closing the longest-idle connection to admit a new one")
            evicted.close(promise: nil)
        }
        if !admitted { logger.notice("control API: refusing a connection, every slot is busy", metadata: ["limit": "\(limit)"]) }
        return admitted
    }

    func busy(_ id: ObjectIdentifier) { update(id, busy: true) }

    func idle(_ id: ObjectIdentifier) { update(id, busy: false) }

    func closed(_ id: ObjectIdentifier) { _ = entries.withLock { $0.removeValue(forKey: id) } }

    /// How many connections hold a slot.
    var count: Int { entries.withLock { $0.count } }

    private func update(_ id: ObjectIdentifier, busy: Bool) {
        entries.withLock { entries in
            entries[id]?.busy = busy
            entries[id]?.since = .now
        }
    }
}
