// The CI control plane's routes (README "Automation"): WebDriver-style
// credential seeding and inspection, user verification's answer, and the
// queue of overrides for a key's next operations.

import Foundation
import Hummingbird
import LatchkeyNames

extension ControlServer {
    func addAutomationRoutes(to router: Router<BasicRequestContext>) {
        let manager = self.manager

        router.put("/v1/keys/:name/user-verified") { request, context in
            try await answer {
                let body: UserVerifiedDocument = try await decode(request)
                return try await manager.setUserVerified(try keyName(context), body.isUserVerified)
            }
        }
        router.get("/v1/keys/:name/user-verified") { _, context in
            try await answer {
                UserVerifiedDocument(
                    isUserVerified: try await manager.key(try keyName(context)).presence.isUserVerified
                )
            }
        }

        router.post("/v1/keys/:name/overrides") { request, context in
            try await answer(status: .created) {
                let body: OverrideRequest = try await decode(request)
                return try await manager.addOverride(try keyName(context), body)
            }
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
        router.post("/v1/keys/:name/credentials") { request, context in
            try await answer(status: .created) {
                let body: SeedCredentialRequest = try await decode(request)
                return try await manager.seedCredential(try keyName(context), body)
            }
        }
        router.delete("/v1/keys/:name/credentials") { _, context in
            try await answer(status: .noContent) {
                try await manager.clearCredentials(try keyName(context))
                return Empty()
            }
        }
    }
}
