// Who may talk to latchkey-webdriver. It makes keys and reads back their
// credentials, private keys included, as the account it runs as (the control
// socket sees that uid, so the keys are that account's): any other local
// account that could reach its loopback port would be acting as that account
// (issue 24, a confused deputy). So, before any request is answered:
//
// - the connection's other end must be a socket of this account or of root,
//   as NETLINK_SOCK_DIAG says (LatchkeySystem/PeerIdentity.swift); anything
//   else, including a peer the kernel cannot name, is refused;
// - `Host` must name loopback (127.0.0.1, localhost, [::1]) with the port it
//   listens on, so that a web page whose name an attacker points at 127.0.0.1
//   (DNS rebinding) cannot drive it from a browser of this account.
//
// A refusal is a WebDriver error document (HTTP 403, "unknown error"), a log
// line, and the connection closes. There is no token: a token in a 0600 file
// keeps out exactly the accounts the uid check keeps out (any process of this
// account can read the file), and the listener is loopback only. docs/security.md.

import Glibc
import HTTPTypes
import Hummingbird
import LatchkeySystem
import Logging
import NIOCore

/// A request's context: the connection's addresses, for the gate, and its channel, to
/// close it after a refusal.
public struct IntermediaryContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// The two checks every request passes.
struct CallerGate: Sendable {
    /// The account latchkey-webdriver runs as.
    let uid: UInt32

    /// Why the request may not be answered, nil when it may.
    func refusal(authority: String?, local: SocketAddress?, remote: SocketAddress?) -> WebDriverError? {
        guard let port = local?.port else { return .forbidden("the connection's own address is unknown") }
        guard Self.hostAllowed(authority, port: port) else {
            return .forbidden(
                "Host \"\(authority ?? "")\" is not this intermediary's loopback address: "
                    + "use http://127.0.0.1:\(port) or http://localhost:\(port)"
            )
        }
        let peer: UInt32?
        do {
            peer = try Self.peerUID(local: local, remote: remote)
        } catch {
            return .forbidden("cannot tell who is connecting: \(error)")
        }
        guard let peer else {
            return .forbidden("the kernel names no local process at the other end of this connection")
        }
        guard peer == uid || peer == 0 else {
            return .forbidden(
                "latchkey-webdriver runs as \(Accounts.describe(uid: uid)) and serves that account and root only; "
                    + "this connection is from \(Accounts.describe(uid: peer)). Run your own latchkey-webdriver"
            )
        }
        return nil
    }

    /// The refusal of a request on `channel` with `authority`, logged; nil when it may be answered.
    func refusal(of channel: any Channel, authority: String?, logger: Logger) -> WebDriverError? {
        guard let refusal = refusal(authority: authority, local: channel.localAddress, remote: channel.remoteAddress)
        else { return nil }
        logger.notice(
            "connection refused",
            metadata: ["peer": "\(channel.remoteAddress.map { "\($0)" } ?? "?")", "reason": "\(refusal.message)"]
        )
        return refusal
    }

    /// Whether `authority` (the Host header) names loopback with `port`. Only a name or
    /// address of this machine's loopback: anything else reached it through a name that
    /// someone else resolves.
    static func hostAllowed(_ authority: String?, port: Int) -> Bool {
        guard let authority = authority?.lowercased(), !authority.isEmpty else { return false }
        let host: Substring
        let given: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return false }
            given = rest.isEmpty ? nil : rest.dropFirst()
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            given = authority[authority.index(after: colon)...]
        } else {
            host = authority[...]
            given = nil
        }
        guard ["127.0.0.1", "localhost", "::1"].contains(host) else { return false }
        guard let given else { return port == 80 }
        return Int(given) == port
    }

    /// The uid of the socket at the other end of the connection, nil when no local socket
    /// is there.
    static func peerUID(local: SocketAddress?, remote: SocketAddress?) throws -> UInt32? {
        guard let local = endpoint(local), let remote = endpoint(remote) else { return nil }
        return try PeerIdentity.tcpPeer(local: local, remote: remote)?.uid
    }

    private static func endpoint(_ address: SocketAddress?) -> SocketEndpoint? {
        guard let address, let text = address.ipAddress, let port = address.port else { return nil }
        return SocketEndpoint(ipAddress: text, port: port)
    }
}
