// The route table: every route of the control API with who may call it, and
// GET /v1/api/routes, which answers it as the router holds it (README
// "Control API", docs/access.md). Routes are registered only through
// `ControlRoutes`, which takes each one's access with it, so the table cannot
// leave a route out. The e2e suite compares the listing with
// docs/control-api.openapi.yaml in both directions and walks it as the key's
// owner, another account and root; a unit test compares docs/access.md's table
// with it.
//
// A key route's access is checked before its handler runs, before its body
// is read: the route asks the key manager to grant the caller the tier it
// declares (a missing key is a 404, another owner's a 403), and hands the
// grant — the key, looked up once — to the manager's entry point, which asks
// again only for a tier other than the one granted (?privateKey=true's export).
// Both ask LatchkeyCore/Keys/Access.swift; neither decides here.

import Hummingbird
import LatchkeyContract
import LatchkeyCore

/// Who may call a route.
enum RouteAccess: Sendable, Equatable {
    /// Any caller the socket lets in: the daemon's own facts, or creating a
    /// key of one's own (root may name another owner).
    case anyCaller
    /// A listing: it shows only the keys (or their requests or events) the
    /// caller holds the tier on.
    case listing(KeyAccess)
    /// The tier on the route's key (its `{name}`, or the key of the pending
    /// request it answers); `privateKey`: the tier with ?privateKey=true.
    case key(KeyAccess, privateKey: KeyAccess? = nil)
}

/// One registered route: `GET /v1/keys/{name}`, parameters in OpenAPI's braces,
/// and who may call it: `access` is `any`, `listing` (shown filtered by
/// `filter`) or a tier; `privateKey` is the tier ?privateKey=true needs.
struct RouteDocument: Codable, Sendable, Equatable, Comparable {
    var method: String
    var path: String
    var access: String
    var filter: KeyAccess?
    var privateKey: KeyAccess?

    init(method: String, path: String, access: RouteAccess) {
        self.method = method
        self.path = path
        switch access {
        case .anyCaller:
            self.access = "any"
        case .listing(let tier):
            self.access = "listing"
            filter = tier
        case .key(let tier, let privateKey):
            self.access = tier.rawValue
            self.privateKey = privateKey
        }
    }

    static func < (lhs: RouteDocument, rhs: RouteDocument) -> Bool {
        (lhs.path, lhs.method) < (rhs.path, rhs.method)
    }
}

/// Registers the control API's routes, each with its access. Used once, while
/// the application is built.
final class ControlRoutes {
    let router: Router<ControlRequestContext>
    private let manager: KeyManager
    private let keys: RouterGroup<KeyRequestContext>
    private var access: [String: RouteAccess] = [:]
    private static let keyPath: RouterPath = "/v1/keys/:name"

    init(router: Router<ControlRequestContext>, manager: KeyManager) {
        self.router = router
        self.manager = manager
        keys = router.group(Self.keyPath, context: KeyRequestContext.self)
    }

    /// A route outside /v1/keys/{name}.
    func on(
        _ method: HTTPRequest.Method,
        _ path: RouterPath,
        _ access: RouteAccess,
        _ handle: @escaping @Sendable (Request, ControlRequestContext) async throws -> Response
    ) {
        record(method, path, access)
        router.on(path, method: method, use: handle)
    }

    /// A route under /v1/keys/{name} (`path` relative to it, "" for the key
    /// itself) that answers what `handle` returns, or its error document.
    func key(
        _ method: HTTPRequest.Method,
        _ path: RouterPath,
        _ tier: KeyAccess,
        privateKey: KeyAccess? = nil,
        status: HTTPResponse.Status = .ok,
        _ handle: @escaping @Sendable (KeyRouteRequest) async throws -> some Encodable & SendableMetatype
    ) {
        keyResponse(method, path, tier, privateKey: privateKey) { route in
            try await answer(status: status) { try await handle(route) }
        }
    }

    /// A key route that makes its response itself. The key is looked up and the
    /// caller granted `tier` on it once, before anything of the request is read: a
    /// missing key is a 404 and another owner's a 403, whatever the body says. The
    /// handler hands the grant to the key manager, which needs no second look.
    func keyResponse(
        _ method: HTTPRequest.Method,
        _ path: RouterPath,
        _ tier: KeyAccess,
        privateKey: KeyAccess? = nil,
        _ handle: @escaping @Sendable (KeyRouteRequest) async throws -> Response
    ) {
        record(method, Self.keyPath.appendingPath(path), .key(tier, privateKey: privateKey))
        let manager = self.manager
        keys.on(path, method: method) { request, context in
            let key: KeyGrant
            do throws(CoreError) {
                key = try await manager.grant(context.key, tier, by: context.caller)
            } catch {
                return ControlError(error).response()
            }
            return try await handle(KeyRouteRequest(key: key, request: request, context: context))
        }
    }

    /// The table, once every route is registered; every route the router holds is in it.
    func table() -> [RouteDocument] {
        router.routes.map { route in
            let method = route.method.rawValue
            let path = route.path.description
            guard let access = access["\(method) \(path)"] else {
                preconditionFailure("route \(method) \(path) was registered without its access")
            }
            return RouteDocument(method: method, path: path, access: access)
        }.sorted()
    }

    private func record(_ method: HTTPRequest.Method, _ path: RouterPath, _ access: RouteAccess) {
        self.access["\(method.rawValue) \(path.description)"] = access
    }
}

/// What a key route's handler gets: the key the caller was granted, and the request.
struct KeyRouteRequest: Sendable {
    let key: KeyGrant
    let request: Request
    let context: KeyRequestContext

    /// The path parameter `name`, percent-decoded.
    func parameter(_ name: String) throws(ControlError) -> String {
        try LatchkeyDaemon.parameter(context, name)
    }

    /// The query parameter `name`, if the request has it.
    func query(_ name: String) -> String? {
        request.uri.queryParameters.get(name).map { String($0) }
    }

    /// The request's body, as JSON.
    func body<Body: Decodable>() async throws -> Body {
        try await decode(request)
    }
}

extension ControlServer {
    /// Registers the listing; call it after every other route so that the
    /// table, filled once here, holds them all (itself included).
    func addRouteListing(to routes: ControlRoutes, table: RouteTable) {
        routes.on(.get, "/v1/api/routes", .anyCaller) { _, _ in json(table.routes.withLock { $0 }) }
        let documents = routes.table()
        table.routes.withLock { $0 = documents }
    }
}
