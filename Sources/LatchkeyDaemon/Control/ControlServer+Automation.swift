// The CI control plane's routes (README "Automation"): WebDriver-style
// credential seeding and inspection, user verification's answer, and the
// queue of overrides for a key's next operations.

import Hummingbird
import LatchkeyCore

extension ControlServer {
    func addAutomationRoutes(to routes: ControlRoutes) {
        let manager = self.manager

        routes.key(.put, "user-verified", .use) {
            let body: UserVerifiedDocument = try await $0.body()
            return try await manager.setUserVerified($0.key, body.isUserVerified)
        }
        routes.key(.get, "user-verified", .see) { try await manager.userVerified($0.key) }

        routes.key(.post, "overrides", .use, status: .created) { try await manager.addOverride($0.key, $0.body()) }
        routes.key(.get, "overrides", .use) { try await manager.overrides($0.key) }
        routes.key(.delete, "overrides", .use, status: .noContent) {
            try await manager.clearOverrides($0.key)
            return Empty()
        }

        // ?privateKey=true takes the export tier: an exportable key only, as
        // a GET carries no PIN (docs/access.md, "Export").
        routes.key(.get, "credentials/:id", .use, privateKey: .export) {
            try await manager.credential($0.key, id: $0.parameter("id"), includePrivateKey: $0.query("privateKey") == "true")
        }
        routes.key(.post, "credentials", .use, status: .created) { try await manager.seedCredential($0.key, $0.body()) }
        routes.key(.delete, "credentials", .use, status: .noContent) {
            try await manager.clearCredentials($0.key)
            return Empty()
        }
    }
}
