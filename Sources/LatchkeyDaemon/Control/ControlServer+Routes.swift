// GET /v1/api/routes: the routes the control API has registered, as the
// router holds them (README "Control API"). The e2e suite compares this
// listing with docs/control-api.openapi.yaml in both directions, so an
// endpoint cannot be added or dropped without the spec following.

import Hummingbird

/// One registered route: `GET /v1/keys/{name}`, parameters in OpenAPI's braces.
struct RouteDocument: Codable, Sendable, Equatable, Comparable {
    var method: String
    var path: String

    static func < (lhs: RouteDocument, rhs: RouteDocument) -> Bool {
        (lhs.path, lhs.method) < (rhs.path, rhs.method)
    }
}

extension ControlServer {
    /// Registers the listing; call it after every other route so that the
    /// table, filled once here, holds them all (itself included).
    func addRouteListing(to router: Router<BasicRequestContext>, table: RouteTable) {
        router.get("/v1/api/routes") { _, _ in json(table.routes.withLock { $0 }) }
        let routes = router.routes.map { RouteDocument(method: $0.method.rawValue, path: $0.path.description) }
        table.routes.withLock { $0 = routes.sorted() }
    }
}
