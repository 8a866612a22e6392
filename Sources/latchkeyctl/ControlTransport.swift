// How latchkeyctl reaches latchkeyd: HTTP/1.1 on the control socket through
// AsyncHTTPClient (`http+unix://`), one request per connection
// (`Connection: close`) and one short-lived client per request. A request is
// bounded by a deadline over connecting, sending and the whole response; a
// stream (GET /v1/events) by nothing. It knows nothing of the control API;
// `ControlClient` and `EventStreamReader` turn its answers and failures into
// what latchkeyctl prints.

import AsyncHTTPClient
import Foundation
import Glibc
import LatchkeySystem
import NIOCore
import NIOHTTP1

/// A whole answer.
struct HTTPAnswer {
    var status: Int
    var reason: String
    var body: [UInt8]
}

/// Why a request got no HTTP response.
enum TransportError: Error {
    /// The path cannot be a Unix socket address (too long, or holds NUL).
    case invalidSocketPath(String)
    /// `connect` failed; errno says why (ENOENT, ECONNREFUSED, EACCES, ...).
    case connectFailed(SystemCallError)
    /// The deadline passed before connecting or before the whole response.
    case timedOut(connected: Bool)
    /// The peer closed the connection before answering.
    case closedWithoutAnswer
    /// The peer reset the connection (ECONNRESET, or EPIPE when sending).
    case reset(SystemCallError)
    /// Any other failed system call.
    case system(SystemCallError)
    /// The bytes that came back are not an HTTP response we accept.
    case malformed(String)
}

/// Sends HTTP requests to a server on a Unix stream socket.
struct ControlTransport {
    var socketPath: String

    /// The most a whole answer's body may take; the control API's are far smaller.
    static let maximumBodySize = 64 * 1024 * 1024

    /// Sends one request and waits for its whole answer, at most `timeout`.
    func send(
        _ method: String,
        _ path: String,
        headers: [(String, String)],
        body: [UInt8]?,
        timeout: Duration
    ) throws(TransportError) -> HTTPAnswer {
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(
                url: try url(path),
                method: HTTPMethod(rawValue: method),
                headers: Self.headers(headers),
                body: body.map { .bytes($0) }
            )
        } catch {
            throw TransportError(error)
        }
        let client = HTTPClient(configuration: Self.configuration(connectTimeout: timeout))
        defer { try? client.syncShutdown() }
        while true {
            do {
                let accumulator = ResponseAccumulator(request: request, maxBodySize: Self.maximumBodySize)
                let response = try client.execute(request: request, delegate: accumulator, deadline: deadline)
                    .futureResult.wait()
                return HTTPAnswer(
                    status: Int(response.status.code),
                    reason: response.status.reasonPhrase,
                    body: response.body.map { Array($0.readableBytesView) } ?? []
                )
            } catch {
                let failure = TransportError(error)
                // A full listen backlog: wait for room until the deadline, as a
                // blocking connect would.
                guard case .timedOut(connected: false) = failure, NIODeadline.now() + Self.backlogPause < deadline
                else { throw failure }
                usleep(UInt32(Self.backlogPause.nanoseconds / 1000))
            }
        }
    }

    /// Sends GET `path` and hands `read` the answer's status and its body as
    /// it arrives; the connection closes when `read` returns. Throws what
    /// `read` throws, and the transport's failures (`TransportError(_:)`
    /// tells them apart).
    func stream(
        _ path: String,
        headers: [(String, String)],
        _ read: (_ status: Int, _ body: BodyPieces) async throws -> Void
    ) async throws {
        var request = HTTPClientRequest(url: try url(path).absoluteString)
        request.headers = Self.headers(headers)
        try await HTTPClient.withHTTPClient(configuration: Self.configuration(connectTimeout: nil)) { client in
            while true {
                do {
                    let response = try await client.execute(request, deadline: .distantFuture)
                    try await read(Int(response.status.code), response.body.map { Array($0.readableBytesView) })
                    return
                } catch {
                    guard case .timedOut(connected: false) = TransportError(error) else { throw error }
                    try await Task.sleep(for: .milliseconds(Self.backlogPause.nanoseconds / 1_000_000))
                }
            }
        }
    }

    /// A streamed body, piece by piece.
    typealias BodyPieces = AsyncMapSequence<HTTPClientResponse.Body, [UInt8]>

    private static let backlogPause = TimeAmount.milliseconds(20)

    private static func configuration(connectTimeout: Duration?) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: connectTimeout.map(TimeAmount.init))
        )
        configuration.httpVersion = .http1Only
        // A missing socket or a refused connection fails at once, not after
        // the connect timeout.
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    private static func headers(_ fields: [(String, String)]) -> HTTPHeaders {
        HTTPHeaders([("Host", "localhost")] + fields + [("Connection", "close")])
    }

    /// `http+unix://` with the socket path, after the checks `connect` would make.
    private func url(_ path: String) throws(TransportError) -> URL {
        let bytes = Array(socketPath.utf8)
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        guard !bytes.isEmpty else { throw .invalidSocketPath("the socket path is empty") }
        guard !bytes.contains(0) else { throw .invalidSocketPath("the socket path contains a NUL byte") }
        guard bytes.count < capacity else {
            throw .invalidSocketPath(
                "the socket path is \(bytes.count) bytes; a Unix socket path has at most \(capacity - 1)"
            )
        }
        guard let url = URL(httpURLWithSocketPath: socketPath, uri: path) else {
            throw .invalidSocketPath("the socket path cannot be part of a URL")
        }
        return url
    }
}

extension TransportError {
    /// What a failure of AsyncHTTPClient (or of SwiftNIO beneath it) means here.
    init(_ error: any Error) {
        switch error {
        case let error as TransportError:
            self = error
        case let error as IOError:
            // "connect(descriptor:addr:size:): No such file or directory (errno: 2)"
            let call = String(String(describing: error).prefix { $0 != "(" && $0 != ":" })
            let failure = SystemCallError(call: call, errno: error.errnoCode)
            switch (call, error.errnoCode) {
            case ("connect", EAGAIN): self = .timedOut(connected: false)
            case ("connect", _): self = .connectFailed(failure)
            case (_, ECONNRESET), (_, EPIPE): self = .reset(failure)
            default: self = .system(failure)
            }
        case let error as HTTPClientError:
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout: self = .timedOut(connected: true)
            case .connectTimeout, .getConnectionFromPoolTimeout: self = .timedOut(connected: false)
            case .remoteConnectionClosed: self = .closedWithoutAnswer
            default: self = .malformed("\(error)")
            }
        case let error as HTTPParserError where error == .invalidEOFState:
            self = .malformed("connection closed inside the response")
        case is ResponseAccumulator.ResponseTooBigError:
            self = .malformed("response body too large")
        default:
            self = .malformed("\(error)")
        }
    }
}

extension TimeAmount {
    fileprivate init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
