// The control API's policy routes (README "Control API"): a key's policy
// settings, password-used signals (conditional registration) and the record
// of its decisions. The key manager checks and answers each.

import Hummingbird
import LatchkeyCore

extension ControlServer {
    func addPolicyRoutes(to routes: ControlRoutes) {
        let manager = self.manager

        routes.key(.get, "policy", .use) { try await manager.policy($0.key) }
        routes.key(.put, "policy", .use) { try await manager.updatePolicy($0.key, $0.body()) }
        routes.key(.post, "signals/password-used", .use) { try await manager.passwordUsed($0.key, $0.body()) }
        routes.key(.get, "policy/decisions", .use) {
            // A limit that is not a number is out of range.
            try await manager.decisions($0.key, limit: $0.query("limit").map { Int($0) ?? 0 })
        }
    }
}
