// GET /v1/events: the event bus as server-sent events (text/event-stream),
// every key's or one key's (?key=NAME), of the keys the caller holds `use` on
// (the key manager filters each subscription by its caller). Each event is
// `event: NAME`, `id: SEQ` and one `data:` line of JSON (EventBus.swift,
// README "Events"). A comment line every 15 s keeps idle proxies open and
// finds clients that left.

import Foundation
import Hummingbird
import LatchkeyContract
import LatchkeyCore
import NIOCore
import ServiceLifecycle

extension ControlServer {
    /// How often an idle stream sends a comment.
    static let eventHeartbeat: Duration = .seconds(15)

    func addEventRoutes(to routes: ControlRoutes) {
        let manager = self.manager
        routes.on(.get, "/v1/events", .listing(.use)) { request, context in
            var key: KeyName?
            if let text = request.uri.queryParameters.get("key") {
                // A key that does not exist yet may be created later; only the name is checked.
                do {
                    key = try KeyName(text)
                } catch {
                    return json(ErrorDocument(error: .init(code: "bad_request", message: "key: \(error)")), status: .badRequest)
                }
            }
            let subscription: EventSubscription
            do throws(CoreError) {
                subscription = try await manager.subscribe(key: key, by: context.caller)
            } catch {
                return ControlError(error).response()
            }
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            headers[.cacheControl] = "no-cache"
            return Response(
                status: .ok,
                headers: headers,
                body: ResponseBody { writer in
                    defer { subscription.cancel() }
                    try await writer.write(ByteBuffer(string: ": latchkeyd events\n\n"))
                    try await Self.stream(subscription, to: &writer)
                    try await writer.finish(nil)
                }
            )
        }
    }

    /// Writes events as they come, and a heartbeat comment when none came for
    /// `eventHeartbeat`; returns when the subscription ends, throws when the
    /// client went away.
    private static func stream(_ subscription: EventSubscription, to writer: inout any ResponseBodyWriter)
        async throws
    {
        let (merged, continuation) = AsyncStream<String>.makeStream()
        let forward = Task {
            for await event in subscription { continuation.yield(event.serverSentEvent) }
            continuation.finish()
        }
        let heartbeat = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: eventHeartbeat)
                continuation.yield(": heartbeat\n\n")
            }
        }
        defer {
            forward.cancel()
            heartbeat.cancel()
        }
        for await text in merged {
            try await writer.write(ByteBuffer(string: text))
        }
    }
}

/// Ends the open event streams when the daemon shuts down, so that the HTTP
/// server's graceful shutdown does not wait for them.
struct EventStreamCloser: Service {
    let events: EventBus

    func run() async throws {
        try? await gracefulShutdown()
        events.close()
    }
}
