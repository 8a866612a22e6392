// What the DevTools gateway knows of its clients: each WebSocket connection
// (with the outlet that writes to it), each CDP session on it that enabled the
// WebAuthn domain, and each authenticator (a latchkeyd key) with the session
// that added it. An authenticator is reachable from that session alone, its
// events go to that session alone, and it goes when that session detaches, the
// domain is disabled there, or the connection closes.

import HummingbirdWebSocket
import LatchkeyJSON

/// A CDP session: a connection, and the flat session on it (nil: the connection's own).
public struct CDPScope: Hashable, Sendable, CustomStringConvertible {
    public var connection: UInt64
    public var sessionId: String?

    public var description: String { "connection \(connection)" + (sessionId.map { ", session \($0)" } ?? "") }
}

actor DevToolsSessions {
    struct Authenticator {
        var scope: CDPScope
        var options: DevToolsAuthenticatorOptions
        /// Credentials the gateway itself is deleting (removeCredential, clearCredentials):
        /// Chromium announces no credentialDeleted for those, so their events are not delivered.
        var deletingHere: Set<String> = []
    }

    private var outlets: [UInt64: AsyncStream<WebSocketMessage>.Continuation] = [:]
    private var enabled: Set<CDPScope> = []
    private var authenticators: [String: Authenticator] = [:]
    private var nextConnection: UInt64 = 1

    /// A new connection whose messages from the gateway go to `outlet`.
    func open(_ outlet: AsyncStream<WebSocketMessage>.Continuation) -> UInt64 {
        defer { nextConnection += 1 }
        outlets[nextConnection] = outlet
        return nextConnection
    }

    /// The connection closed: forgets it, answers its keys.
    func close(_ connection: UInt64) -> [String] {
        outlets.removeValue(forKey: connection)?.finish()
        enabled = enabled.filter { $0.connection != connection }
        return take { $0.scope.connection == connection }
    }

    /// A flat session ended (Target.detachedFromTarget): answers its keys.
    func detached(_ scope: CDPScope) -> [String] {
        enabled.remove(scope)
        return take { $0.scope == scope }
    }

    func enable(_ scope: CDPScope) { enabled.insert(scope) }

    func isEnabled(_ scope: CDPScope) -> Bool { enabled.contains(scope) }

    /// WebAuthn.disable: the domain is off there and its authenticators go; answers their keys.
    func disable(_ scope: CDPScope) -> [String] { detached(scope) }

    func add(_ key: String, options: DevToolsAuthenticatorOptions, scope: CDPScope) {
        authenticators[key] = Authenticator(scope: scope, options: options)
    }

    /// The options of `key` when `scope` added it.
    func options(of key: String, in scope: CDPScope) -> DevToolsAuthenticatorOptions? {
        guard let authenticator = authenticators[key], authenticator.scope == scope else { return nil }
        return authenticator.options
    }

    func remove(_ key: String) { authenticators.removeValue(forKey: key) }

    /// Whether a session of this gateway owns `key`.
    func owns(_ key: String) -> Bool { authenticators[key] != nil }

    /// Every key this gateway made, for the one-browser-per-account rule.
    func keys() -> Set<String> { Set(authenticators.keys) }

    /// Every key, all forgotten (the gateway stops).
    func removeAll() -> [String] { take { _ in true } }

    func deletingHere(_ key: String, _ credentialIds: [String]) {
        authenticators[key]?.deletingHere.formUnion(credentialIds)
    }

    /// Writes `event` (the domain's method and params without authenticatorId) to the
    /// session that owns `key`; false when no session does. A credentialDeleted the
    /// gateway caused itself is dropped.
    @discardableResult
    func deliver(_ method: String, _ params: [String: JSONValue], key: String, credentialId: String?) -> Bool {
        guard var authenticator = authenticators[key] else { return false }
        if method == "WebAuthn.credentialDeleted", let credentialId,
            authenticator.deletingHere.remove(credentialId) != nil
        {
            authenticators[key] = authenticator
            return true
        }
        guard let outlet = outlets[authenticator.scope.connection] else { return false }
        var params = params
        params["authenticatorId"] = .string(key)
        outlet.yield(.text(CDPMessage.event(method, params, sessionId: authenticator.scope.sessionId)))
        return true
    }

    private func take(_ matching: (Authenticator) -> Bool) -> [String] {
        let keys = authenticators.filter { matching($0.value) }.map(\.key).sorted()
        for key in keys { authenticators.removeValue(forKey: key) }
        return keys
    }
}
