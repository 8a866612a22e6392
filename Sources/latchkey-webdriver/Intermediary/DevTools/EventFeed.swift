// latchkeyd's event stream (GET /v1/events: server-sent events, one JSON object
// per `data:` line) read for the DevTools gateway: each credential event of a
// key the gateway made becomes the WebAuthn domain's event, delivered to the
// session that owns the key. The stream carries the events of the keys this
// account may use; a stream that ends (a daemon restart, a slow reader's `lost`)
// is opened again after a pause.

import AsyncHTTPClient
import Foundation
import LatchkeyJSON
import Logging
import NIOCore
import ServiceLifecycle

/// Server-sent events, as latchkeyd writes them: one event's `data:` line ends with a
/// blank line; comments (`:`) and other fields are skipped.
struct SSEParser {
    // Bytes, not Characters: "\r\n" is one Character, and a chunk may end between the two.
    private var pending: [UInt8] = []
    private var data: [String] = []

    /// The JSON objects of the events `chunk` completes.
    mutating func feed(_ chunk: String) -> [[String: JSONValue]] { feed(bytes: chunk.utf8) }

    /// The same for bytes as they came (a chunk may end inside a character).
    mutating func feed(bytes chunk: some Sequence<UInt8>) -> [[String: JSONValue]] {
        pending += chunk
        var events: [[String: JSONValue]] = []
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            var line = Array(pending[..<newline])
            pending.removeSubrange(...newline)
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            if line.isEmpty {
                if !data.isEmpty, let object = JSONValue.parse(Array(data.joined(separator: "\n").utf8))?.object {
                    events.append(object)
                }
                data = []
            } else if line.starts(with: Array("data:".utf8)) {
                var value = line.dropFirst(5)
                if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
                data.append(String(decoding: value, as: UTF8.self))
            }
        }
        return events
    }
}

struct EventFeed: Service {
    let socketPath: String
    let client: HTTPClient
    let domain: WebAuthnDomain
    let logger: Logger

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    do {
                        try await follow()
                        logger.notice("latchkeyd's event stream ended; opening it again")
                    } catch is CancellationError {
                        return
                    } catch {
                        logger.warning("latchkeyd's event stream failed; opening it again", metadata: ["error": "\(error)"])
                    }
                    try await Task.sleep(for: .seconds(1))
                }
            }
        } catch is CancellationError {
            return
        }
    }

    private func follow() async throws {
        guard let url = URL(httpURLWithSocketPath: socketPath, uri: "/v1/events") else { return }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Host", value: "localhost")
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await client.execute(request, deadline: .distantFuture)
        guard response.status == .ok else {
            logger.warning("latchkeyd refused its event stream", metadata: ["status": "\(response.status.code)"])
            return
        }
        var parser = SSEParser()
        for try await chunk in response.body {
            for event in parser.feed(bytes: chunk.readableBytesView) {
                await dispatch(event)
            }
        }
    }

    /// One latchkeyd event: the domain's event for the session that owns its key.
    func dispatch(_ event: [String: JSONValue]) async {
        guard let name = event["event"]?.string, let key = event["key"]?.string,
            let method = CDPCredentialEvent.method(for: name, fields: event),
            await domain.sessions.owns(key)
        else { return }
        let params = await domain.eventParams(method, key: key, fields: event)
        await domain.sessions.deliver(method, params, key: key, credentialId: event["credentialId"]?.string)
    }
}
