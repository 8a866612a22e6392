// The CI control plane's routes (README "Automation"): WebDriver-style
// credential seeding and inspection, user verification's answer, and the
// queue of overrides for a key's next operations.

import Foundation
import Hummingbird
import LatchkeyNames

extension ControlServer {
    func addAutomationRoutes(to routes: ControlRoutes) {
        let manager = self.manager

        routes.keyBody(.put, "user-verified", .use) { (context, body: UserVerifiedDocument) in
            try await manager.setUserVerified(context.key, body.isUserVerified, by: context.caller)
        }
        routes.key(.get, "user-verified", .see) { _, context in
            try await manager.userVerified(context.key, by: context.caller)
        }

        routes.keyBody(.post, "overrides", .use, status: .created) { (context, body: OverrideRequest) in
            try await manager.addOverride(context.key, body, by: context.caller)
        }
        routes.key(.get, "overrides", .use) { _, context in
            try await manager.overrides(context.key, by: context.caller)
        }
        routes.key(.delete, "overrides", .use, status: .noContent) { _, context in
            try await manager.clearOverrides(context.key, by: context.caller)
            return Empty()
        }

        // ?privateKey=true takes the export tier: an exportable key only, as
        // a GET carries no PIN (docs/access.md, "Export").
        routes.key(.get, "credentials/:id", .use, privateKey: .export) { request, context in
            try await manager.credential(
                context.key,
                id: try parameter(context, "id"),
                includePrivateKey: request.uri.queryParameters.get("privateKey") == "true",
                by: context.caller
            )
        }
        routes.keyBody(.post, "credentials", .use, status: .created) { (context, body: SeedCredentialRequest) in
            try await manager.seedCredential(context.key, body, by: context.caller)
        }
        routes.key(.delete, "credentials", .use, status: .noContent) { _, context in
            try await manager.clearCredentials(context.key, by: context.caller)
            return Empty()
        }
    }
}
