// Both gateways' isolation rules (BrowserAccount.swift) and GET /status as a
// WebDriver node (NodeStatus.swift).

import LatchkeyJSON
import NIOCore
import Testing

@testable import LatchkeyWebDriver

@Suite("Isolation: one browser per account")
struct BrowserAccountTests {
    static func decide(loopback: Bool = true, listeners: [UInt32]? = [1000], keys: [String] = [], own: Set<String> = [])
        -> String?
    {
        BrowserAccount.decide(
            upstream: "127.0.0.1:9222",
            loopback: loopback,
            listenerUIDs: listeners,
            uid: 1000,
            accountKeys: keys,
            ownKeys: own
        )
    }

    @Test("the account's own browser, with no other browser's key, may have a key")
    func allowed() {
        #expect(Self.decide() == nil)
        #expect(Self.decide(keys: ["cdp-a", "wd-b", "personal"], own: ["cdp-a", "wd-b"]) == nil)
    }

    @Test("a browser of another account, or none, or one the kernel cannot be asked about, is refused")
    func otherAccount() {
        #expect(Self.decide(listeners: [1001])?.contains("runs as uid 1001") == true)
        #expect(Self.decide(listeners: [1000, 0]) != nil)
        #expect(Self.decide(listeners: [])?.contains("nothing listens") == true)
        #expect(Self.decide(listeners: nil) != nil)
        #expect(Self.decide(loopback: false)?.contains("--isolation off") == true)
    }

    @Test("another browser's key of the account (wd- or cdp-) refuses this one; the account's other keys do not")
    func oneBrowserPerAccount() {
        #expect(Self.decide(keys: ["cdp-other"])?.contains("cdp-other") == true)
        #expect(Self.decide(keys: ["wd-other", "cdp-mine"], own: ["cdp-mine"])?.contains("wd-other") == true)
        #expect(Self.decide(keys: ["default", "ci-1"]) == nil)
    }

    @Test("loopback upstream hosts", arguments: [("127.0.0.1", true), ("localhost", true), ("[::1]", true), ("::1", true), ("grid.example", false), ("10.0.0.1", false)])
    func loopback(host: String, expected: Bool) {
        #expect(BrowserAccount.isLoopback(host) == expected)
    }
}

@Suite("Fleets: /status as a WebDriver node")
struct NodeStatusTests {
    @Test("ready when the driver is ready and latchkeyd answers; the WebAuthn capabilities; the driver's status kept")
    func status() {
        let driver = UpstreamAnswer(status: 200, headers: [], body: .init(string: #"{"value":{"ready":true,"message":"ok"}}"#))
        let ready = NodeStatus.document(upstream: driver, latchkeyd: true).object?["value"]?.object
        #expect(ready?["ready"] == .bool(true))
        #expect(ready?["capabilities"]?.object?["webauthn:virtualAuthenticators"] == .bool(true))
        #expect(ready?["upstream"] == .object(["ready": .bool(true), "message": "ok"]))
        let noDaemon = NodeStatus.document(upstream: driver, latchkeyd: false).object?["value"]?.object
        #expect(noDaemon?["ready"] == .bool(false) && noDaemon?["message"]?.string?.contains("latchkeyd") == true)
        let down = UpstreamAnswer(status: 500, headers: [], body: .init(string: "no"))
        #expect(NodeStatus.document(upstream: down, latchkeyd: true).object?["value"]?.object?["ready"] == .bool(false))
    }

    @Test("the status path, under a prefix too, but no session's", arguments: [("/status", true), ("/wd/hub/status", true), ("/session/1/status", false), ("/statuses", false)])
    func path(path: String, expected: Bool) {
        #expect(NodeStatus.isStatus(path) == expected)
    }
}
