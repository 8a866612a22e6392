// Control API routes for the WebAuthn signals and for passkey export and
// import in the Credential Exchange Format (README "Signals" and "Export and
// import").
//
// Export and import go through the daemon with the passphrase in the
// request body, like a PIN: the daemon encrypts before any private key
// leaves it, so a key crosses the socket in plaintext only when the caller
// asked for plaintext, and the daemon itself never writes an export to disk.
// scrypt runs on NIO's thread pool (`ThreadPoolWork`, the key manager's
// `BlockingWork`), not on the concurrency pool or an actor.

import Foundation
import Hummingbird
import LatchkeyCore
import NIOCore
import NIOPosix

extension ControlServer {
    func addExchangeRoutes(to routes: ControlRoutes) {
        let manager = self.manager

        routes.key(.post, "signals/accepted-credentials", .use) {
            try await manager.signalAcceptedCredentials($0.key, $0.body())
        }
        routes.key(.post, "signals/current-user-details", .use) {
            try await manager.signalCurrentUserDetails($0.key, $0.body())
        }
        routes.key(.post, "signals/unknown-credential", .use) {
            try await manager.signalUnknownCredential($0.key, $0.body())
        }

        routes.keyResponse(.post, "export", .export) { route in
            do {
                let export = try await manager.exportCXF(route.key, route.body())
                return Self.document(export.document, passkeys: export.count)
            } catch {
                // The error document for every failure.
                return try await answer { () async throws -> Empty in throw error }
            }
        }

        routes.key(.post, "import", .use) { route in
            // The document is read (and an envelope opened) once the caller may use the key.
            try await manager.importCXF(route.key) {
                var request = route.request
                let buffer = try await request.collectBody(upTo: ControlHTTPLimits.maxImportBodyBytes)
                return try JSONDecoder().decode(ImportRequest.self, from: Data(buffer.readableBytesView))
            }
        }
    }

    /// A JSON document as the response body, with the passkey count in a header.
    private static func document(_ data: Data, passkeys: Int) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if let field = HTTPFields.Element.Name("Latchkey-Passkeys") { headers[field] = "\(passkeys)" }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// The key manager's blocking work (scrypt) on NIO's thread pool, off the event
/// loops and off the actors.
struct ThreadPoolWork: BlockingWork {
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }
}
