// A minimal HTTP/1.1 client over a Unix stream socket: one request per
// connection (`Connection: close`), a deadline over connect, send and the
// whole response, and the response parsed by `HTTPResponseParser`. It knows
// nothing of the control API; `ControlClient` turns its answers and failures
// into what latchkeyctl prints.

import Glibc
import LatchkeySystem

/// One HTTP request.
struct HTTPRequest {
    var method: String
    /// The request target: an absolute path, already percent-encoded.
    var path: String
    var headers: [(name: String, value: String)] = []
    var body: [UInt8]?

    /// The request as bytes on the wire.
    func serialized() -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\n"
        head += "Host: localhost\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Connection: close\r\n"
        if let body {
            head += "Content-Length: \(body.count)\r\n"
        } else if method == "POST" || method == "PUT" {
            head += "Content-Length: 0\r\n"
        }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }
}

/// Why a request got no HTTP response.
enum TransportError: Error {
    /// The path cannot be a Unix socket address (too long, or holds NUL).
    case invalidSocketPath(String)
    /// `connect` failed; errno says why (ENOENT, ECONNREFUSED, EACCES, ...).
    case connectFailed(SystemCallError)
    /// The deadline passed before connecting or before the whole response.
    case timedOut(connected: Bool)
    /// The peer closed or reset the connection before answering.
    case closedWithoutAnswer
    /// Any other failed system call.
    case system(SystemCallError)
    /// The bytes that came back are not an HTTP response we accept.
    case malformed(HTTPParseError)
}

/// Sends HTTP requests to a server on a Unix stream socket.
struct UnixSocketHTTPClient {
    var socketPath: String
    /// Bounds connecting, sending and receiving the whole response.
    var timeout: Duration

    func send(_ request: HTTPRequest) throws(TransportError) -> HTTPResponse {
        let deadline = ContinuousClock.now + timeout
        let address = try Self.address(socketPath)

        let descriptor: Int32
        do throws(SystemCallError) { descriptor = try Posix.socketUnixStream() } catch { throw .system(error) }
        defer { Posix.close(descriptor) }

        do throws(SystemCallError) {
            try Posix.setSendTimeout(descriptor, milliseconds: max(1, Self.milliseconds(until: deadline)))
            try Posix.connect(descriptor, to: address)
        } catch {
            // A full backlog that stays full until SO_SNDTIMEO runs out.
            if error.errno == EAGAIN || error.errno == EINPROGRESS { throw .timedOut(connected: false) }
            throw .connectFailed(error)
        }

        do throws(SystemCallError) {
            try Posix.sendAll(descriptor, request.serialized())
        } catch {
            if error.errno == EAGAIN { throw .timedOut(connected: true) }
            // The server may have answered and closed before reading the
            // request (say, a 4xx for a body it refused): read what it sent.
            if error.errno != EPIPE && error.errno != ECONNRESET { throw .system(error) }
        }

        var parser = HTTPResponseParser(requestMethod: request.method)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while parser.response == nil {
            let remaining = Self.milliseconds(until: deadline)
            guard remaining > 0 else { throw .timedOut(connected: true) }
            let count: Int
            do throws(SystemCallError) {
                guard try Posix.pollReadable(descriptor, milliseconds: Int32(clamping: remaining)) else { continue }
                count = try Posix.read(descriptor, into: &chunk)
            } catch {
                if error.errno == ECONNRESET && parser.isEmpty { throw .closedWithoutAnswer }
                throw .system(error)
            }
            if count == 0 {
                if parser.isEmpty { throw .closedWithoutAnswer }
                do throws(HTTPParseError) { return try parser.finish() } catch { throw .malformed(error) }
            }
            do throws(HTTPParseError) { try parser.feed(chunk[0..<count]) } catch { throw .malformed(error) }
        }
        return parser.response!
    }

    /// The `sockaddr_un` for `path`.
    static func address(_ path: String) throws(TransportError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty else { throw .invalidSocketPath("the socket path is empty") }
        guard !bytes.contains(0) else { throw .invalidSocketPath("the socket path contains a NUL byte") }
        guard bytes.count < capacity else {
            throw .invalidSocketPath(
                "the socket path is \(bytes.count) bytes; a Unix socket path has at most \(capacity - 1)"
            )
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int {
        let (seconds, attoseconds) = (deadline - ContinuousClock.now).components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
