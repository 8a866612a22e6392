// What both gateways (the WebDriver intermediary and the DevTools gateway) run
// with: an HTTP client for the browser's side and one for latchkeyd's control
// socket (HTTP/1.1, no redirects), and the order of their end: the service
// stops, the keys it made are removed, then the clients shut down.

import AsyncHTTPClient

struct GatewayClients: Sendable {
    let upstream: HTTPClient
    let control: HTTPClient

    init() {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.httpVersion = .http1Only
        upstream = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        control = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Runs `service` until it ends (SIGINT, SIGTERM, or an error), then `cleanup`, then
    /// shuts the clients down; the service's error, if any, is thrown last.
    func run(_ service: () async throws -> Void, cleanup: () async -> Void) async throws {
        let outcome: (any Error)?
        do {
            try await service()
            outcome = nil
        } catch {
            outcome = error
        }
        await cleanup()
        try? await upstream.shutdown()
        try? await control.shutdown()
        if let outcome { throw outcome }
    }
}
