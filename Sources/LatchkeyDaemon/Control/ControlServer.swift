// The control API: HTTP/1.1 + JSON on a Unix socket, versioned under /v1
// (README "Control API" lists every endpoint). The socket is mode 0660: its
// permissions decide who may connect; what a connection may do with each key
// is decided per request, by the caller the kernel names for it
// (ControlRequestContext.swift) and the key's owner (docs/access.md).

import CTAP
import Foundation
import Hummingbird
import LatchkeyContract
import LatchkeyCore
import Logging
import NIOCore

/// Builds the control API application.
struct ControlServer {
    static let version = LatchkeyVersion.string

    let manager: KeyManager
    let board: PresenceBoard
    let socketPath: String
    let stateDirectory: String
    let listening: Latch
    let started = ContinuousClock.now
    let logger: Logger

    /// The router with every route, and the table GET /v1/api/routes answers.
    func makeRouter() -> (router: Router<ControlRequestContext>, table: RouteTable) {
        let router = Router(context: ControlRequestContext.self)
        let table = RouteTable()
        // First: middleware only wraps the routes registered after it.
        router.add(middleware: ErrorDocumentMiddleware(table: table))
        let routes = ControlRoutes(router: router, manager: manager)
        addRoutes(to: routes)
        addPolicyRoutes(to: routes)
        addRouteListing(to: routes, table: table)
        return (router, table)
    }

    func application() -> some ApplicationProtocol {
        let router = makeRouter().router
        let socketPath = self.socketPath
        let logger = self.logger
        let listening = self.listening
        return Application(
            router: router,
            server: GuardedHTTP1Channel.builder(governor: ConnectionGovernor(logger: logger)),
            configuration: ApplicationConfiguration(address: .unixDomainSocket(path: socketPath), serverName: "latchkeyd"),
            onServerRunning: { _ in
                // The daemon runs with umask 077, so the socket starts 0600; open it to the group.
                if chmod(socketPath, 0o660) != 0 {
                    logger.error("cannot chmod the control socket", metadata: ["path": "\(socketPath)", "errno": "\(errno)"])
                }
                logger.info("control API listening", metadata: ["socket": "\(socketPath)"])
                await listening.open()
            },
            logger: logger
        )
    }

    private func addRoutes(to routes: ControlRoutes) {
        let manager = self.manager
        let started = self.started
        let stateDirectory = self.stateDirectory

        addEventRoutes(to: routes)
        addAutomationRoutes(to: routes)
        routes.on(.get, "/v1/status", .listing(.see)) { _, context in
            json(
                StatusDocument(
                    version: Self.version,
                    uptimeSeconds: Int((ContinuousClock.now - started).components.seconds),
                    stateDirectory: stateDirectory,
                    keys: await manager.documents(by: context.caller)
                )
            )
        }
        routes.on(.get, "/v1/keys", .listing(.see)) { _, context in json(await manager.documents(by: context.caller)) }
        routes.on(.post, "/v1/keys", .anyCaller) { request, context in
            try await answer(status: .created) {
                let body: CreateKeyRequest = try await decode(request)
                return try await manager.create(body, by: context.caller)
            }
        }
        routes.key(.get, "", .see) { try await manager.document($0.key) }
        routes.key(.delete, "", .manage, status: .noContent) {
            try await manager.delete($0.key)
            return Empty()
        }
        routes.key(.post, "replug", .manage) { try await manager.replug($0.key) }
        routes.key(.get, "credentials", .use) { try await manager.credentials($0.key) }
        routes.key(.delete, "credentials/:id", .use, status: .noContent) {
            try await manager.deleteCredential($0.key, id: $0.parameter("id"))
            return Empty()
        }
        routes.key(.put, "credentials/:id/user", .use) {
            try await manager.updateUser($0.key, id: $0.parameter("id"), $0.body())
        }
        routes.key(.get, "pin", .see) { try await manager.pinStatus($0.key) }
        routes.key(.put, "pin", .use) { try await manager.updatePIN($0.key, $0.body()) }
        routes.key(.get, "config", .see) { try await manager.configuration($0.key) }
        routes.key(.put, "config", .manage) { try await manager.updateConfiguration($0.key, $0.body()) }
        routes.key(.get, "large-blobs", .use) { try await manager.largeBlobs($0.key) }
        routes.key(.post, "reset", .manage) { try await manager.reset($0.key) }
        routes.key(.get, "presence", .see) { try await manager.presenceSettings($0.key) }
        routes.key(.put, "presence", .use) { try await manager.updatePresence($0.key, $0.body()) }
        addExchangeRoutes(to: routes)
        routes.on(.get, "/v1/presence/pending", .listing(.answer)) { _, context in
            json(manager.pending(by: context.caller))
        }
        for (verb, outcome) in [("approve", PresenceOutcomeName.approved), ("deny", .denied)] {
            routes.on(.post, "/v1/presence/pending/:id/\(verb)", .key(.answer)) { _, context in
                try await answer {
                    let id = try parameter(context, "id")
                    try await manager.answerPending(id, outcome.outcome, by: context.caller)
                    return PresenceAnswerDocument(id: id, outcome: outcome.rawValue)
                }
            }
        }
    }
}

/// The two answers a person can give, as the control API names them.
enum PresenceOutcomeName: String {
    case approved, denied

    var outcome: PresenceOutcome {
        switch self {
        case .approved: .approved
        case .denied: .denied
        }
    }
}

/// An empty response body (204).
struct Empty: Encodable {}

private let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()

/// A JSON response.
func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
    var headers = HTTPFields()
    headers[.contentType] = "application/json"
    if status == .noContent { return Response(status: status) }
    let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
    return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
}

/// Runs a handler and turns its error (the core's, the control API's, or a bad body)
/// into the error document.
func answer(status: HTTPResponse.Status = .ok, _ body: () async throws -> some Encodable) async throws -> Response {
    do {
        return json(try await body(), status: status)
    } catch let error as DecodingError {
        return json(
            ErrorDocument(error: .init(code: "bad_request", message: "invalid JSON body: \(describe(error))")),
            status: .badRequest
        )
    } catch {
        guard let answered = ControlError.answering(error) else { throw error }
        return answered.response()
    }
}

extension ControlError {
    /// The error document as a response, with this failure's status.
    func response() -> Response { json(document, status: HTTPResponse.Status(code: status)) }
}

func decode<T: Decodable>(_ request: Request) async throws -> T {
    var request = request
    let buffer = try await request.collectBody(upTo: ControlHTTPLimits.maxBodyBytes)
    do {
        return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
    } catch let error as DecodingError {
        throw error
    } catch {
        throw ControlError.badRequest("invalid JSON body")
    }
}

/// A path parameter, percent-decoded (RFC 3986 §2.1); a malformed escape is a bad request.
func parameter(_ context: some RequestContext, _ name: String) throws(ControlError) -> String {
    guard let value = context.parameters.get(name) else { throw .badRequest("missing \(name)") }
    guard let decoded = value.removingPercentEncoding else { throw .badRequest("\(name) holds a malformed % escape") }
    return decoded
}

/// `text` as a key name, or a 400 that states the rule.
func keyName(_ text: String) throws(ControlError) -> KeyName {
    do {
        return try KeyName(text)
    } catch {
        throw .badRequest("\(error)")
    }
}

private func describe(_ error: DecodingError) -> String {
    switch error {
    case .keyNotFound(let key, _): "missing \"\(key.stringValue)\""
    case .typeMismatch(_, let context), .valueNotFound(_, let context):
        "wrong type at \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\""
    case .dataCorrupted(let context): context.debugDescription
    @unknown default: "\(error)"
    }
}
