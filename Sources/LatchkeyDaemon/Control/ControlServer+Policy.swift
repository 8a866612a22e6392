// The control API's policy routes (README "Control API"): a key's policy
// settings, password-used signals (conditional registration) and the record
// of its decisions.

import Foundation
import Hummingbird
import LatchkeyNames

/// GET/PUT /v1/keys/{name}/policy
struct PolicyDocument: Codable, Sendable, Equatable {
    struct Signal: Codable, Sendable, Equatable {
        var rpId: String
        var userName: String
        var expiresInMs: Int
    }

    var presence: PresenceMode
    var userVerification: UserVerificationPolicy
    var notifications: Bool
    var conditionalRegistration: Bool
    var signalWindowSeconds: Int
    var onMismatch: MismatchAction
    var allowRpIds: [String]
    var denyRpIds: [String]
    var requirePin: Bool
    var rateLimitPerHour: Int
    var promptsPerMinute: Int
    var denyCooldownSeconds: Int
    /// The password-used windows open now.
    var openSignals: [Signal]

    init(_ broker: PresenceBroker) {
        let settings = broker.policySettings
        let now = broker.now
        presence = broker.current.mode
        userVerification = settings.userVerification
        notifications = settings.notifications
        conditionalRegistration = settings.conditionalRegistration
        signalWindowSeconds = settings.signalWindowSeconds
        onMismatch = settings.onMismatch
        allowRpIds = settings.allowRpIds
        denyRpIds = settings.denyRpIds
        requirePin = settings.requirePin
        rateLimitPerHour = settings.rateLimitPerHour
        promptsPerMinute = settings.promptsPerMinute
        denyCooldownSeconds = settings.denyCooldownSeconds
        openSignals = broker.openSignals().map {
            Signal(rpId: $0.rpId, userName: $0.userName, expiresInMs: Int($0.expiresAt > now ? $0.expiresAt - now : 0))
        }
    }
}

/// POST /v1/keys/{name}/signals/password-used
struct PasswordUsedRequest: Codable, Sendable {
    var rpId: String
    var userName: String
}

/// The answer to a password-used signal: the window it opened.
struct PasswordUsedDocument: Codable, Sendable {
    var key: String
    var rpId: String
    var userName: String
    var expiresInMs: Int
}

extension ControlServer {
    func addPolicyRoutes(to routes: ControlRoutes) {
        let manager = self.manager

        routes.key(.get, "policy", .use) { _, context in
            PolicyDocument(try await manager.policy(context.key, by: context.caller))
        }
        routes.keyBody(.put, "policy", .use) { (context, body: PolicyOverrides) in
            let broker = try await manager.policy(context.key, by: context.caller)
            do throws(ConfigurationError) {
                _ = try broker.update(policy: body)
            } catch {
                throw ControlError.badRequest(error.message)
            }
            return PolicyDocument(broker)
        }
        routes.keyBody(.post, "signals/password-used", .use) { (context, body: PasswordUsedRequest) in
            let broker = try await manager.policy(context.key, by: context.caller)
            guard RPPattern.isValid(body.rpId), !body.rpId.hasPrefix("*.") else {
                throw ControlError.badRequest("rpId must be an RP ID such as example.com")
            }
            guard !body.userName.isEmpty, body.userName.utf8.count <= 256 else {
                throw ControlError.badRequest("userName must be 1 to 256 bytes")
            }
            guard broker.policySettings.conditionalRegistration else {
                throw ControlError.conflict("conditional registration is off for key \(context.key)")
            }
            let signal = broker.passwordUsed(rpId: body.rpId, userName: body.userName)
            let now = broker.now
            return PasswordUsedDocument(
                key: context.key.rawValue,
                rpId: signal.rpId,
                userName: signal.userName,
                expiresInMs: Int(signal.expiresAt > now ? signal.expiresAt - now : 0)
            )
        }
        routes.key(.get, "policy/decisions", .use) { request, context in
            let broker = try await manager.policy(context.key, by: context.caller)
            var limit = PolicyDecisionLog.defaultCapacity
            if let text = request.uri.queryParameters.get("limit") {
                guard let value = Int(text), (1...PolicyDecisionLog.defaultCapacity).contains(value) else {
                    throw ControlError.badRequest("limit must be between 1 and \(PolicyDecisionLog.defaultCapacity)")
                }
                limit = value
            }
            return broker.decisions.latest(limit)
        }
    }
}
