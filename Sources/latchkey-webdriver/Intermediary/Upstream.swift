// The browser's own driver (chromedriver, geckodriver, a Selenium Grid): every
// request that is not a WebAuthn §11 command goes there as it came, method,
// path, query, headers and body, and its answer comes back as it was, status,
// headers and body. Only hop-by-hop headers (RFC 9110 §7.6.1) and the framing
// ones the HTTP layers recompute (Host, Content-Length) are not copied.

import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1

/// An upstream answer.
struct UpstreamAnswer: Sendable {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: ByteBuffer
}

struct Upstream: Sendable {
    /// e.g. "http://127.0.0.1:9515", no trailing slash.
    let base: String
    let client: HTTPClient

    /// A WebDriver answer can hold a screenshot or a page's source.
    static let maximumBodySize = 256 * 1024 * 1024

    static let unforwarded: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
        "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
    ]

    init(base: String, client: HTTPClient) {
        self.base = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.client = client
    }

    /// Sends the request to `base` + `target` (the request's path and query).
    func forward(method: String, target: String, headers: HTTPFields, body: ByteBuffer) async throws(WebDriverError)
        -> UpstreamAnswer
    {
        var request = HTTPClientRequest(url: base + target)
        request.method = HTTPMethod(rawValue: method)
        for field in headers where !Self.unforwarded.contains(field.name.canonicalName) {
            request.headers.add(name: field.name.rawName, value: field.value)
        }
        if body.readableBytes > 0 || ["POST", "PUT", "PATCH"].contains(method) {
            request.body = .bytes(body)
        }
        do {
            // A command can run for long (a page load, an async script): the
            // driver's own timeouts bound it, not the intermediary.
            let response = try await client.execute(request, deadline: .distantFuture)
            let bytes = try await response.body.collect(upTo: Self.maximumBodySize)
            return UpstreamAnswer(
                status: Int(response.status.code),
                headers: response.headers
                    .filter { !Self.unforwarded.contains($0.name.lowercased()) }
                    .map { ($0.name, $0.value) },
                body: bytes
            )
        } catch {
            throw .unknownError("the upstream WebDriver \(base) did not answer \(method) \(target): \(error)")
        }
    }
}
