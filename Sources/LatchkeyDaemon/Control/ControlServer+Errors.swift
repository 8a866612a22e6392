// Every non-2xx answer of the control API is the error document
// `{"error": {"code", "message"}}` (docs/control-api.openapi.yaml, "Errors"),
// those Hummingbird would answer with an empty body too: a path no route
// serves (404), a known path asked with another method (405, with `Allow`),
// a body over a route's limit (413, then the connection closes), and any
// error a handler did not map (500). The connection-level answers (414, 431,
// 408, 503) come from ControlHTTPGuard.swift, in the same document.

import Foundation
import Hummingbird
import Synchronization

/// The registered routes, filled in once every route is: the 405 check and
/// GET /v1/api/routes both read it.
final class RouteTable: Sendable {
    let routes = Mutex<[RouteDocument]>([])

    /// The methods registered for a route whose path matches `path` (a
    /// `{parameter}` matches one non-empty segment), sorted.
    func methods(matching path: Substring) -> [String] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let routes = self.routes.withLock { $0 }
        let methods = routes.filter { route in
            let pattern = route.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            return pattern.count == segments.count
                && zip(pattern, segments).allSatisfy { expected, actual in
                    expected.hasPrefix("{") ? !actual.isEmpty : expected == actual
                }
        }.map(\.method)
        return Array(Set(methods)).sorted()
    }
}

/// Turns what reaches the router as an error into the error document.
struct ErrorDocumentMiddleware: RouterMiddleware {
    typealias Context = ControlRequestContext

    let table: RouteTable

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            // A key route's `{name}` is checked before its handler runs (a
            // body is not even decoded): a bad name is always the 400 that
            // KeyRequestContext throws, which arrives here.
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            return answer(error.status, request: request)
        } catch {
            if let answered = ControlError.answering(error) { return answered.response() }
            context.logger.error("unmapped error in a control API handler", metadata: ["error": "\(error)"])
            return ControlHTTPError.internal.response()
        }
    }

    private func answer(_ status: HTTPResponse.Status, request: Request) -> Response {
        switch status {
        case .notFound:
            let path = request.uri.path
            let allowed = table.methods(matching: path[...])
            guard !allowed.isEmpty else {
                return ControlHTTPError(404, "not_found", "no route for \(request.method.rawValue) \(path)").response()
            }
            var response = ControlHTTPError(
                405, "method_not_allowed",
                "\(path) does not take \(request.method.rawValue); it takes \(allowed.joined(separator: ", "))"
            ).response()
            response.headers[.allow] = allowed.joined(separator: ", ")
            return response
        case .contentTooLarge:
            return ControlHTTPError.tooLarge(limit: ControlHTTPLimits.bodyLimit(for: request.uri.path)).response()
        default:
            return ControlHTTPError(status.code, status.code < 500 ? "bad_request" : "internal", status.reasonPhrase)
                .response()
        }
    }
}

/// An error the HTTP layer answers itself, before or around a route.
struct ControlHTTPError: Error, Sendable {
    var status: Int
    var code: String
    var message: String
    /// Whether the connection closes once the answer is written (the rest of
    /// the request cannot be trusted, or is not worth reading).
    var closesConnection: Bool

    init(_ status: Int, _ code: String, _ message: String, closesConnection: Bool = false) {
        self.status = status
        self.code = code
        self.message = message
        self.closesConnection = closesConnection
    }

    static let `internal` = ControlHTTPError(500, "internal", "the daemon failed; its log says more")

    static func tooLarge(limit: Int) -> ControlHTTPError {
        ControlHTTPError(413, "too_large", "the request body is over \(limit) bytes", closesConnection: true)
    }

    /// The JSON text of the error document.
    var document: Data {
        (try? JSONEncoder().encode(ErrorDocument(error: .init(code: code, message: message)))) ?? Data()
    }

    /// The answer as a route's response.
    func response() -> Response {
        var response = json(ErrorDocument(error: .init(code: code, message: message)), status: .init(code: status))
        if closesConnection { response.headers[.connection] = "close" }
        return response
    }
}
