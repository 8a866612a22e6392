// The control API as latchkeyctl sees it: requests to paths under /v1 with
// JSON bodies, and the one place that turns transport failures and HTTP
// error statuses into `CtlError`s (and so into exit codes).

import Foundation
import Glibc
import LatchkeyContract

/// A successful (2xx) answer from the daemon.
struct ControlResponse {
    var status: Int
    /// The JSON body as sent; empty for 204.
    var body: [UInt8]
    /// "GET /v1/status", for messages.
    var request: String

    /// Decodes the body as `T`; a body that does not fit is a protocol error.
    func decode<T: Decodable>(_ type: T.Type = T.self) throws(CtlError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(body))
        } catch {
            throw CtlError(.internalError, "malformed response from latchkeyd to \(request): \(Self.describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return path.isEmpty ? "the top level" : path
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context)) has no \"\(key.stringValue)\""
        case .typeMismatch(let type, let context):
            return "\(path(context)) is not a \(type)"
        case .valueNotFound(let type, let context):
            return "\(path(context)) is null, expected \(type)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

/// The daemon's error body: `{"error": {"code": "...", "message": "..."}}`.
private struct ErrorBody: Decodable {
    struct Detail: Decodable {
        var code: String
        var message: String
        /// The access rule that refused (403 forbidden; docs/access.md).
        var rule: String?
    }
    var error: Detail
}

/// Sends control API requests to latchkeyd.
struct ControlClient {
    var socket: SocketLocation
    var timeout: Duration

    func get(_ path: String) throws(CtlError) -> ControlResponse {
        try send("GET", path, body: nil)
    }

    func delete(_ path: String) throws(CtlError) -> ControlResponse {
        try send("DELETE", path, body: nil)
    }

    func post(_ path: String) throws(CtlError) -> ControlResponse {
        try send("POST", path, body: nil)
    }

    func post(_ path: String, json body: some Encodable) throws(CtlError) -> ControlResponse {
        try send("POST", path, body: try encode(body))
    }

    func put(_ path: String, json body: some Encodable) throws(CtlError) -> ControlResponse {
        try send("PUT", path, body: try encode(body))
    }

    private func encode(_ body: some Encodable) throws(CtlError) -> [UInt8] {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return Array(try encoder.encode(body))
        } catch {
            throw CtlError(.internalError, "cannot encode the request body: \(error)")
        }
    }

    /// Sends one request; returns a 2xx answer and throws for anything else.
    func send(_ method: String, _ path: String, body: [UInt8]?) throws(CtlError) -> ControlResponse {
        var headers = [("User-Agent", "latchkeyctl/\(LatchkeyCtl.version)"), ("Accept", "application/json")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let name = "\(method) \(path)"

        let response: HTTPAnswer
        do throws(TransportError) {
            response = try ControlTransport(socketPath: socket.path)
                .send(method, path, headers: headers, body: body, timeout: timeout)
        } catch {
            throw map(error, request: name)
        }

        switch response.status {
        case 200...299:
            return ControlResponse(status: response.status, body: response.body, request: name)
        case 400...599:
            let detail = try? JSONDecoder().decode(ErrorBody.self, from: Data(response.body)).error
            let what =
                detail.map { "\($0.message) (HTTP \(response.status) \($0.code))" }
                ?? "HTTP \(response.status) \(response.reason)\(Self.snippet(response.body))"
            if response.status == 404 {
                throw CtlError(.notFound, "not found: \(what)")
            }
            if let code = detail?.code, Self.pinRefusals.contains(code) {
                throw CtlError(.pinRefused, "latchkeyd refused the PIN: \(what)")
            }
            if detail?.rule == "export-pin-refused" {
                throw CtlError(.pinRefused, "latchkeyd refused the export: \(what)")
            }
            let verb = response.status >= 500 ? "latchkeyd failed to handle" : "latchkeyd refused"
            throw CtlError(.refused, "\(verb) \(name): \(what)")
        default:
            throw CtlError(
                .internalError,
                "unexpected answer from latchkeyd to \(name): HTTP \(response.status) \(response.reason)"
            )
        }
    }

    /// The error codes of a wrong or blocked PIN (exit status 3).
    static let pinRefusals: Set<String> = ["pin_invalid", "pin_blocked", "pin_auth_blocked"]

    /// The one mapping from transport failures to exit codes and messages.
    private func map(_ error: TransportError, request: String) -> CtlError {
        let path = socket.path
        switch error {
        case .invalidSocketPath(let reason):
            return CtlError(.usage, "invalid socket path \(path) (\(socket.origin)): \(reason)")
        case .connectFailed(let error):
            switch error.errno {
            case ENOENT, ENOTDIR:
                return CtlError(
                    .unavailable,
                    "latchkeyd is not running: no socket at \(path) (\(socket.origin)); "
                        + "start it, or point --socket or $LATCHKEY_SOCKET at its socket"
                )
            case ECONNREFUSED:
                return CtlError(
                    .unavailable,
                    "connection refused at \(path) (\(socket.origin)): nothing is listening there "
                        + "(a stale socket of a stopped latchkeyd, or not a socket)"
                )
            case EACCES, EPERM:
                return CtlError(
                    .unavailable,
                    "permission denied connecting to \(path) (\(socket.origin)): the control socket is "
                        + "mode 0660; run as a member of its group, or as its owner"
                )
            default:
                return CtlError(.unavailable, "cannot connect to latchkeyd at \(path) (\(socket.origin)): \(error)")
            }
        case .timedOut(let connected):
            let seconds = Self.seconds(timeout)
            return connected
                ? CtlError(.unavailable, "latchkeyd at \(path) did not answer \(request) within \(seconds)")
                : CtlError(.unavailable, "latchkeyd at \(path) is not accepting connections (waited \(seconds))")
        case .closedWithoutAnswer, .reset:
            return CtlError(.unavailable, "latchkeyd at \(path) closed the connection without answering \(request)")
        case .system(let error):
            return CtlError(.unavailable, "talking to latchkeyd at \(path): \(error)")
        case .malformed(let error):
            return CtlError(.internalError, "malformed HTTP response from latchkeyd to \(request): \(error)")
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    private static func snippet(_ body: [UInt8]) -> String {
        guard !body.isEmpty else { return "" }
        let text = Sanitize.inline(String(decoding: body.prefix(200), as: UTF8.self))
        return ": \(text)\(body.count > 200 ? "…" : "")"
    }
}

/// Paths of the control API, with every segment percent-encoded.
enum ControlPath {
    static let status = "/v1/status"
    static let keys = "/v1/keys"
    static let pending = "/v1/presence/pending"

    static func key(_ name: KeyName) -> String { "/v1/keys/\(segment(name.rawValue))" }
    static func credentials(key: KeyName) -> String { "\(Self.key(key))/credentials" }
    static func credential(key: KeyName, id: String) -> String { "\(credentials(key: key))/\(segment(id))" }
    static func presence(key: KeyName) -> String { "\(Self.key(key))/presence" }
    static func credentialUser(key: KeyName, id: String) -> String { "\(credential(key: key, id: id))/user" }
    static func pin(key: KeyName) -> String { "\(Self.key(key))/pin" }
    static func config(key: KeyName) -> String { "\(Self.key(key))/config" }
    static func reset(key: KeyName) -> String { "\(Self.key(key))/reset" }
    static func largeBlobs(key: KeyName) -> String { "\(Self.key(key))/large-blobs" }
    static func decide(pending id: String, approve: Bool) -> String {
        "\(pending)/\(segment(id))/\(approve ? "approve" : "deny")"
    }

    /// `value` with everything but RFC 3986 unreserved characters
    /// percent-encoded, so that a name can never add a path segment.
    static func segment(_ value: String) -> String {
        var encoded = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2, with: "0")
            }
        }
        // "." and ".." are unreserved but still mean something in a path.
        if encoded == "." { return "%2E" }
        if encoded == ".." { return "%2E%2E" }
        return encoded
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = " ") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
