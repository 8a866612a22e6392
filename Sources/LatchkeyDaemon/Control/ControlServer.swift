// The control API: HTTP/1.1 + JSON on a Unix socket, versioned under /v1
// (README "Control API" lists every endpoint). The socket is mode 0660: who
// may drive the keys is decided by file permissions on it and its directory.

import CTAP
import Foundation
import Hummingbird
import LatchkeyNames
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

    func application() -> some ApplicationProtocol {
        let router = Router(context: BasicRequestContext.self)
        let table = RouteTable()
        // First: middleware only wraps the routes registered after it.
        router.add(middleware: ErrorDocumentMiddleware(table: table))
        addRoutes(to: router)
        addPolicyRoutes(to: router)
        addRouteListing(to: router, table: table)
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

    private func addRoutes(to router: Router<BasicRequestContext>) {
        let manager = self.manager
        let board = self.board
        let started = self.started
        let stateDirectory = self.stateDirectory

        addEventRoutes(to: router)
        addAutomationRoutes(to: router)
        router.get("/v1/status") { _, _ in
            json(
                StatusDocument(
                    version: Self.version, uptimeSeconds: Int((ContinuousClock.now - started).components.seconds),
                    stateDirectory: stateDirectory, keys: await manager.documents()
                )
            )
        }
        router.get("/v1/keys") { _, _ in json(await manager.documents()) }
        router.post("/v1/keys") { request, _ in
            try await answer(status: .created) {
                let body: CreateKeyRequest = try await decode(request)
                return try await manager.create(body)
            }
        }
        router.get("/v1/keys/:name") { _, context in
            try await answer { try await manager.document(named: try keyName(context)) }
        }
        router.delete("/v1/keys/:name") { _, context in
            try await answer(status: .noContent) {
                try await manager.delete(try keyName(context))
                return Empty()
            }
        }
        router.post("/v1/keys/:name/replug") { _, context in
            try await answer {
                let name = try keyName(context)
                try await manager.replug(name)
                return try await manager.document(named: name)
            }
        }
        router.get("/v1/keys/:name/credentials") { _, context in
            try await answer { try await manager.credentials(try keyName(context)) }
        }
        router.delete("/v1/keys/:name/credentials/:id") { _, context in
            try await answer(status: .noContent) {
                try await manager.deleteCredential(try keyName(context), id: try parameter(context, "id"))
                return Empty()
            }
        }
        router.put("/v1/keys/:name/credentials/:id/user") { request, context in
            try await answer {
                let body: UserUpdateRequest = try await decode(request)
                return try await manager.updateUser(
                    try keyName(context), id: try parameter(context, "id"), body
                )
            }
        }
        router.get("/v1/keys/:name/pin") { _, context in
            try await answer { try await manager.pinStatus(try keyName(context)) }
        }
        addKeyBodyRoute(router, .put, "/v1/keys/:name/pin") { (name, body: PINRequest) in
            try await manager.updatePIN(name, body)
        }
        router.get("/v1/keys/:name/config") { _, context in
            try await answer { try await manager.configuration(try keyName(context)) }
        }
        addKeyBodyRoute(router, .put, "/v1/keys/:name/config") { (name, body: ConfigDocument) in
            try await manager.updateConfiguration(name, body)
        }
        router.get("/v1/keys/:name/large-blobs") { _, context in
            try await answer { try await manager.largeBlobs(try keyName(context)) }
        }
        router.post("/v1/keys/:name/reset") { _, context in
            try await answer { try await manager.reset(try keyName(context)) }
        }
        router.get("/v1/keys/:name/presence") { _, context in
            try await answer {
                let settings = try await manager.presence(try keyName(context)).current
                return PresenceDocument(mode: settings.mode, timeoutSeconds: settings.timeoutSeconds)
            }
        }
        router.put("/v1/keys/:name/presence") { request, context in
            try await answer {
                let body: PresenceDocument = try await decode(request)
                if let timeout = body.timeoutSeconds, !(1...600).contains(timeout) {
                    throw ControlError.badRequest("timeoutSeconds must be between 1 and 600")
                }
                let broker = try await manager.presence(try keyName(context))
                broker.update(mode: body.mode, timeoutSeconds: body.timeoutSeconds)
                let settings = broker.current
                return PresenceDocument(mode: settings.mode, timeoutSeconds: settings.timeoutSeconds)
            }
        }
        addExchangeRoutes(to: router)
        router.get("/v1/presence/pending") { _, _ in json(board.pending()) }
        for (verb, outcome) in [("approve", PresenceOutcomeName.approved), ("deny", .denied)] {
            router.post("/v1/presence/pending/:id/\(verb)") { _, context in
                try await answer {
                    let id = try parameter(context, "id")
                    guard board.answer(id, outcome.outcome) else {
                        throw ControlError.notFound("no pending presence request \(id)")
                    }
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

/// Runs a handler and turns a ControlError (or a bad body) into the error document.
func answer(status: HTTPResponse.Status = .ok, _ body: () async throws -> some Encodable) async throws -> Response {
    do {
        return json(try await body(), status: status)
    } catch let error as ControlError {
        return json(
            ErrorDocument(error: .init(code: error.code, message: error.message)),
            status: HTTPResponse.Status(code: error.status)
        )
    } catch let error as DecodingError {
        return json(
            ErrorDocument(error: .init(code: "bad_request", message: "invalid JSON body: \(describe(error))")),
            status: .badRequest
        )
    }
}

/// A `method` route on `path`, which names a key: it decodes the request's body as `Body`
/// and answers (with `status`) what `handle` returns for the key's name and the body.
func addKeyBodyRoute<Body: Decodable, Answer: Encodable>(
    _ router: Router<BasicRequestContext>,
    _ method: HTTPRequest.Method,
    _ path: RouterPath,
    status: HTTPResponse.Status = .ok,
    _ handle: @escaping @Sendable (KeyName, Body) async throws -> Answer
) {
    router.on(path, method: method) { request, context in
        try await answer(status: status) {
            let body: Body = try await decode(request)
            return try await handle(try keyName(context), body)
        }
    }
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
func parameter(_ context: BasicRequestContext, _ name: String) throws(ControlError) -> String {
    guard let value = context.parameters.get(name) else { throw .badRequest("missing \(name)") }
    guard let decoded = value.removingPercentEncoding else { throw .badRequest("\(name) holds a malformed % escape") }
    return decoded
}

/// The `{name}` of a key route, validated: a name outside KeyName's grammar
/// is a 400 that states the rule, before any handler runs.
func keyName(_ context: BasicRequestContext) throws(ControlError) -> KeyName {
    try keyName(parameter(context, "name"))
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
