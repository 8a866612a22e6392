// GET /status as a WebDriver remote end answers it (WebDriver §8.3 "Status"),
// so that a Selenium Grid relay (docs/automation.md, "Fleets") can forward
// sessions to latchkey-webdriver as to a node: `ready` when the browser's
// driver says it is ready and latchkeyd answers, a `message` saying which is
// not, the driver's own status kept under `upstream`, and the WebAuthn
// extension capabilities (WebAuthn §11.2: `webauthn:virtualAuthenticators`,
// `webauthn:extension:*`) this node serves. Always HTTP 200, as the spec says;
// readiness is in the body.

import LatchkeyJSON
import NIOCore

enum NodeStatus {
    /// The capabilities a session through latchkey-webdriver has, whatever the driver says.
    static let capabilities: JSONValue = .object([
        "webauthn:virtualAuthenticators": .bool(true),
        "webauthn:extension:largeBlob": .bool(true),
        "webauthn:extension:credBlob": .bool(true),
        "webauthn:extension:minPinLength": .bool(true),
        "webauthn:extension:prf": .bool(true),
    ])

    /// Whether `path` is the status endpoint (after a prefix such as Grid's /wd/hub).
    static func isStatus(_ path: String) -> Bool {
        path == "/status" || path == "/status/" || (path.hasSuffix("/status") && !path.contains("/session"))
    }

    /// The status document from the driver's answer and whether latchkeyd answers.
    static func document(upstream: UpstreamAnswer, latchkeyd: Bool) -> JSONValue {
        let value = JSONValue.parse(upstream.body.readableBytesView)?.object?["value"]
        let driverReady = upstream.status == 200 && value?.object?["ready"]?.bool == true
        let message: String
        switch (driverReady, latchkeyd) {
        case (true, true): message = "latchkey-webdriver ready: the browser's driver and latchkeyd answer"
        case (false, true): message = "the browser's driver is not ready (HTTP \(upstream.status))"
        case (true, false): message = "latchkeyd's control socket does not answer"
        case (false, false): message = "neither the browser's driver nor latchkeyd is ready"
        }
        return .object([
            "value": .object([
                "ready": .bool(driverReady && latchkeyd),
                "message": .string(message),
                "capabilities": capabilities,
                "upstream": value ?? .null,
            ])
        ])
    }

    static func answer(upstream: UpstreamAnswer, control: ControlAPI) async -> UpstreamAnswer {
        let latchkeyd = (try? await control.send(.GET, "/v1/status"))?.status == 200
        return UpstreamAnswer(
            status: 200,
            headers: IntermediaryResponder.jsonHeaders,
            body: ByteBuffer(data: document(upstream: upstream, latchkeyd: latchkeyd).text)
        )
    }
}
