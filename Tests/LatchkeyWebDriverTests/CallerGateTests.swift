// The gate in front of latchkey-webdriver: Host must name loopback with the
// listener's port (DNS rebinding), and the connection must come from this
// account (the other-account refusal is proven with real accounts in
// Tests/e2e/test_doors.py).

import Glibc
import NIOCore
import NIOPosix
import Testing

@testable import LatchkeyWebDriver

@Suite struct CallerGateTests {
    @Test(
        "Host names loopback with the listener's port, or is refused",
        arguments: [
            ("127.0.0.1:4445", true), ("localhost:4445", true), ("LocalHost:4445", true), ("[::1]:4445", true),
            ("127.0.0.1:4446", false), ("localhost", false), ("evil.example:4445", false),
            ("127.0.0.1.evil.example:4445", false), ("localhost.:4445", false), ("[::1]", false),
            ("[::1]x:4445", false), ("10.0.0.1:4445", false), ("", false), ("127.0.0.1:", false),
        ]
    )
    func hosts(_ authority: String, _ allowed: Bool) {
        #expect(CallerGate.hostAllowed(authority, port: 4445) == allowed)
    }

    @Test("without a port, Host is loopback only on port 80") func defaultPort() {
        #expect(CallerGate.hostAllowed("localhost", port: 80))
        #expect(CallerGate.hostAllowed(nil, port: 80) == false)
    }

    @Test("a loopback connection of this account passes; the same connection is refused to a gate of another uid")
    func ownAccount() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        let client = try await ClientBootstrap(group: group).connect(to: server.localAddress!).get()
        defer {
            client.close(promise: nil)
            server.close(promise: nil)
        }
        // The client's view reversed is the server's view of the connection.
        let (local, remote) = (client.remoteAddress, client.localAddress)
        let authority = "127.0.0.1:\(local!.port!)"
        #expect(CallerGate(uid: getuid()).refusal(authority: authority, local: local, remote: remote) == nil)
        // Root may use every account's intermediary; anyone else only their own.
        let other = CallerGate(uid: getuid() &+ 1).refusal(authority: authority, local: local, remote: remote)
        #expect((other == nil) == (getuid() == 0))
        #expect(other.map { $0.status == 403 && $0.message.contains("serves that account and root only") } ?? true)
    }
}
