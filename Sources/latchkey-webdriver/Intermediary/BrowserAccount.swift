// Isolation of parallel browser tests, for both gateways (WebDriver and
// DevTools): a browser reaches only its own session's key.
//
// A browser sends a WebAuthn request to every FIDO hidraw node it can open, and
// a key whose presence is automatic answers any of them. Since issue 24 a key's
// hidraw node is its owner's alone (mode 0600, through udev), so keys of
// different accounts are apart in the browser too. Isolation is therefore by
// account, and two rules make it hold (docs/automation.md, "Parallel tests"):
//
// 1. The browser is this account's: the listener behind the upstream port (the
//    browser's --remote-debugging-port, or its driver), as NETLINK_SOCK_DIAG names
//    it, runs as the account latchkey-webdriver runs as, which owns the keys it
//    makes. A browser of another account could not open the key; a root gateway
//    could name another owner but then could not use the key (root holds no key's
//    use tier), so each account runs its own gateway.
// 2. One browser per account at a time: no other automation key (`wd-…`,
//    `cdp-…`) of the account lives while this browser adds one, since this
//    browser would reach that key and that browser this one. Asked again after
//    the key is made, so that two browsers adding keys at once both refuse rather
//    than share.
//
// `--isolation off` drops both, for a machine that runs one test at a time.

import LatchkeyJSON
import LatchkeySystem

/// How a gateway keeps parallel sessions apart.
public enum IsolationMode: String, Sendable, CaseIterable {
    /// Each browser is its own account's (the default).
    case account
    /// No check: every browser of the account reaches every key of it.
    case off
}

struct BrowserAccount: Sendable {
    let mode: IsolationMode
    /// The upstream's host and port (the browser's debugging port, or its driver).
    let upstreamHost: String
    let upstreamPort: Int
    /// The account this gateway runs as, the owner of the keys it makes.
    let uid: UInt32
    /// The uids listening on a port (NETLINK_SOCK_DIAG); injectable for tests.
    var listeners: @Sendable (UInt16) throws -> [UInt32] = { port in
        try PeerIdentity.tcpListeners(port: port).map(\.uid)
    }

    /// The prefixes of the keys the gateways make.
    static let automationPrefixes = ["wd-", "cdp-"]

    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return bare == "localhost" || bare == "::1" || bare.hasPrefix("127.")
    }

    /// Why this browser may not have a key besides `ownKeys` (the keys of this browser
    /// already made), nil when it may.
    func refusal(ownKeys: Set<String>, control: ControlAPI) async -> String? {
        guard mode == .account else { return nil }
        let uids: [UInt32]?
        if Self.isLoopback(upstreamHost), let port = UInt16(exactly: upstreamPort) {
            uids = try? listeners(port)
        } else {
            uids = nil
        }
        let keys: [JSONValue]
        do {
            let answer = try await control.send(.GET, "/v1/keys")
            guard answer.status == 200, let list = answer.body?.array else {
                return "latchkeyd did not list the keys (\(answer.errorMessage)), so the account's other browsers cannot be ruled out"
            }
            keys = list
        } catch {
            return error.message
        }
        let accountKeys = keys.compactMap { key -> String? in
            guard let members = key.object, let name = members["name"]?.string,
                members["owner"]?.object?["uid"]?.integer == Int64(uid)
            else { return nil }
            return name
        }
        return Self.decide(
            upstream: "\(upstreamHost):\(upstreamPort)",
            loopback: Self.isLoopback(upstreamHost),
            listenerUIDs: uids,
            uid: uid,
            accountKeys: accountKeys,
            ownKeys: ownKeys
        )
    }

    /// Makes the key `name` for a browser whose keys are `ownKeys` when the rules allow:
    /// they are asked before, the key is made (`make`), they are asked again with it made
    /// (of two browsers adding keys at once, neither keeps one) and it is removed
    /// (`remove`) if they refuse then. A refusal is thrown as `refused(message)`.
    func admit<Failure: Error>(
        _ name: String,
        ownKeys: Set<String>,
        control: ControlAPI,
        refused: (String) -> Failure,
        make: () async throws(Failure) -> Void,
        remove: () async -> Void
    ) async throws(Failure) {
        if let refusal = await refusal(ownKeys: ownKeys, control: control) { throw refused(refusal) }
        try await make()
        if let refusal = await refusal(ownKeys: ownKeys.union([name]), control: control) {
            await remove()
            throw refused(refusal)
        }
    }

    /// The two rules as a function of what the kernel and latchkeyd said.
    static func decide(
        upstream: String,
        loopback: Bool,
        listenerUIDs: [UInt32]?,
        uid: UInt32,
        accountKeys: [String],
        ownKeys: Set<String>
    ) -> String? {
        let me = Accounts.describe(uid: uid)
        guard loopback else {
            return "the browser behind \(upstream) is not on this machine, so its account cannot be checked "
                + "(isolation by account); run latchkey-webdriver beside the browser, or pass --isolation off"
        }
        guard let listenerUIDs else { return "cannot ask the kernel who listens on \(upstream)" }
        let others = Set(listenerUIDs).subtracting([uid])
        guard !listenerUIDs.isEmpty else { return "nothing listens on \(upstream): start the browser first" }
        guard others.isEmpty else {
            let names = others.sorted().map { Accounts.describe(uid: $0) }.joined(separator: ", ")
            return "the browser behind \(upstream) runs as \(names), and latchkey-webdriver as \(me): a key is "
                + "the account's that makes it, and its hidraw node opens for that account alone, so that browser "
                + "could not use it. Run latchkey-webdriver as \(names), one per account (docs/automation.md)"
        }
        let foreign = accountKeys.filter { name in
            automationPrefixes.contains { name.hasPrefix($0) } && !ownKeys.contains(name)
        }.sorted()
        guard foreign.isEmpty else {
            return "another browser of \(me) has a virtual authenticator (\(foreign.joined(separator: ", "))): "
                + "each browser of an account reaches every key of it, so the two would share keys. Run each "
                + "parallel browser as an account of its own, end the other session (or latchkeyctl keys delete "
                + "a key it left), or pass --isolation off (docs/automation.md, \"Parallel tests\")"
        }
        return nil
    }
}
