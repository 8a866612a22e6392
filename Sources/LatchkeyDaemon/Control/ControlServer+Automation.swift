// The CI control plane's routes (README "Automation"): WebDriver-style
// credential seeding and inspection, user verification's answer, and the
// queue of overrides for a key's next operations.

import Foundation
import Hummingbird
import LatchkeyNames

extension ControlServer {
    func addAutomationRoutes(to router: Router<BasicRequestContext>) {
        let manager = self.manager

        addKeyBodyRoute(router, .put, "/v1/keys/:name/user-verified") { (name, body: UserVerifiedDocument) in
            try await manager.setUserVerified(name, body.isUserVerified)
        }
        router.get("/v1/keys/:name/user-verified") { _, context in
            try await answer {
                UserVerifiedDocument(
                    isUserVerified: try await manager.key(try keyName(context)).presence.isUserVerified
                )
            }
        }

        addKeyBodyRoute(router, .post, "/v1/keys/:name/overrides", status: .created) { (name, body: OverrideRequest) in
            try await manager.addOverride(name, body)
        }
        router.get("/v1/keys/:name/overrides") { _, context in
            try await answer { try await manager.key(try keyName(context)).overrides.entries }
        }
        router.delete("/v1/keys/:name/overrides") { _, context in
            try await answer(status: .noContent) {
                try await manager.key(try keyName(context)).overrides.clear()
                return Empty()
            }
        }

        router.get("/v1/keys/:name/credentials/:id") { request, context in
            try await answer {
                try await manager.credential(
                    try keyName(context),
                    id: try parameter(context, "id"),
                    includePrivateKey: request.uri.queryParameters.get("privateKey") == "true"
                )
            }
        }
        addKeyBodyRoute(router, .post, "/v1/keys/:name/credentials", status: .created) {
            (name, body: SeedCredentialRequest) in
            try await manager.seedCredential(name, body)
        }
        router.delete("/v1/keys/:name/credentials") { _, context in
            try await answer(status: .noContent) {
                try await manager.clearCredentials(try keyName(context))
                return Empty()
            }
        }
    }
}
