// latchkeyd's control API as the intermediary uses it: JSON over HTTP/1.1 on
// the control socket (README "Control API"), through AsyncHTTPClient's
// `http+unix://`. It maps nothing; VirtualAuthenticators does.

import LatchkeyJSON
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One answer of the control API.
struct ControlAnswer: Sendable {
    var status: Int
    var body: JSONValue?

    /// The error document's message (`{"error": {"message"}}`), if there is one.
    var errorMessage: String {
        body?.object?["error"]?.object?["message"]?.string ?? "HTTP \(status)"
    }
}

/// A client of latchkeyd's control socket.
struct ControlAPI: Sendable {
    let socketPath: String
    let client: HTTPClient
    /// The longest a control request may take.
    let timeout: TimeAmount = .seconds(30)

    init(socketPath: String, client: HTTPClient) {
        self.socketPath = socketPath
        self.client = client
    }

    /// Sends `method path` with an optional JSON body. A socket that does not
    /// answer is `unknown error`, naming the socket.
    func send(_ method: HTTPMethod, _ path: String, _ body: JSONValue? = nil) async throws(WebDriverError)
        -> ControlAnswer
    {
        guard let url = URL(httpURLWithSocketPath: socketPath, uri: path) else {
            throw .unknownError("latchkeyd's control socket path \(socketPath) cannot be used")
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        request.headers.add(name: "Host", value: "localhost")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: body.text))
        }
        do {
            let response = try await client.execute(request, timeout: timeout)
            let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
            return ControlAnswer(
                status: Int(response.status.code),
                body: bytes.readableBytes == 0 ? nil : JSONValue.parse(bytes.readableBytesView)
            )
        } catch {
            throw .unknownError("latchkeyd's control API on \(socketPath) did not answer \(method) \(path): \(error)")
        }
    }
}
