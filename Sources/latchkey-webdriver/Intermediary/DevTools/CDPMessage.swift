// One DevTools (CDP) message as the gateway sees it: a command a client sends,
// which either passes to the browser unchanged or, for the WebAuthn domain, is
// answered by the gateway; and the answers, errors and events the gateway writes
// itself, in CDP's JSON shapes (`{id, result}`, `{id, error: {code, message,
// data?}}`, `{method, params}`, each with the flat session's `sessionId` when the
// command had one).
//
// Only what must be looked at is parsed: a command that cannot name the WebAuthn
// domain (its text holds neither "WebAuthn" nor a JSON escape that could spell it)
// passes without being decoded, so that large messages (screenshots, scripts)
// cost no parse.

import LatchkeyJSON

/// A CDP error the gateway answers with (CDP uses JSON-RPC 2.0's codes).
public struct CDPError: Error, Sendable, Equatable {
    public var code: Int
    public var message: String
    /// Chromium puts the detail of a parameter error here.
    public var data: String?

    public init(code: Int, message: String, data: String? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    /// JSON-RPC's "method not found", with Chromium's wording.
    public static func methodNotFound(_ method: String) -> CDPError {
        CDPError(code: -32601, message: "'\(method)' wasn't found")
    }

    /// JSON-RPC's "invalid params"; `detail` says which and why, as Chromium's `data` does.
    public static func invalidParams(_ detail: String) -> CDPError {
        CDPError(code: -32602, message: "Invalid parameters", data: detail)
    }

    /// A valid command that cannot be carried out (Chromium's handlers answer -32000).
    public static func server(_ message: String) -> CDPError {
        CDPError(code: -32000, message: message)
    }

    /// Chromium's words for an authenticatorId the session did not add.
    public static func noSuchAuthenticator(_ id: String) -> CDPError {
        .server("Could not find a virtual authenticator matching the ID \(id)")
    }

    /// Chromium's words for a credential the authenticator does not hold.
    public static let noSuchCredential = CDPError.server("Could not find a credential matching the ID")

    /// Chromium's words for a command before WebAuthn.enable.
    public static let notEnabled = CDPError.server(
        "The Virtual Authenticator Environment has not been enabled for this session"
    )

    var document: JSONValue {
        var members: [String: JSONValue] = ["code": .number(Double(code)), "message": .string(message)]
        if let data { members["data"] = .string(data) }
        return .object(members)
    }
}

/// A WebAuthn command the gateway answers itself.
public struct CDPCommand: Sendable, Equatable {
    /// The command's id, echoed in its answer as it came.
    public var id: JSONValue
    /// The method without its domain, e.g. "addVirtualAuthenticator".
    public var method: String
    /// The flat session the command was sent on; nil on the connection's own session.
    public var sessionId: String?
    public var params: [String: JSONValue]
}

/// Where a client's message goes.
public enum CDPRoute: Sendable, Equatable {
    /// To the browser, unchanged.
    case forward
    /// Answered by the gateway from latchkeyd.
    case webAuthn(CDPCommand)
    /// Answered by the gateway with an error (a WebAuthn command whose params are not an object).
    case refuse(id: JSONValue, sessionId: String?, CDPError)
}

public enum CDPMessage {
    /// The domain the gateway answers; nothing of it reaches the browser.
    public static let domain = "WebAuthn"

    /// Where the client's text message `text` goes.
    public static func route(_ text: String) -> CDPRoute {
        // A cheap look first: only a message that could name the domain is parsed.
        guard text.contains(domain) || text.contains("\\u") else { return .forward }
        guard let value = JSONValue.parse(Array(text.utf8)), let members = value.object,
            let method = members["method"]?.string
        else {
            // Not a command (the browser answers what it cannot read).
            return .forward
        }
        let prefix = domain + "."
        guard method.hasPrefix(prefix) else { return .forward }
        let id = members["id"] ?? .null
        let sessionId = members["sessionId"]?.string
        let params: [String: JSONValue]
        switch members["params"] {
        case nil, .null?: params = [:]
        case .object(let object)?: params = object
        case let other?:
            return .refuse(id: id, sessionId: sessionId, .invalidParams("params must be an object, not \(other.typeName)"))
        }
        return .webAuthn(CDPCommand(id: id, method: String(method.dropFirst(prefix.count)), sessionId: sessionId, params: params))
    }

    /// The flat session a browser message ended (`Target.detachedFromTarget`), if it is one.
    /// Only messages that name the event are parsed.
    public static func detachedSession(_ text: String) -> String? {
        guard text.contains("Target.detachedFromTarget") else { return nil }
        guard let members = JSONValue.parse(Array(text.utf8))?.object,
            members["method"]?.string == "Target.detachedFromTarget"
        else { return nil }
        return members["params"]?.object?["sessionId"]?.string
    }

    /// A command's successful answer.
    public static func result(_ command: CDPCommand, _ result: [String: JSONValue]) -> String {
        text(["id": command.id, "result": .object(result)], sessionId: command.sessionId)
    }

    /// A command's error answer.
    public static func error(id: JSONValue, sessionId: String?, _ error: CDPError) -> String {
        text(["id": id, "error": error.document], sessionId: sessionId)
    }

    /// An event for the session `sessionId` (nil: the connection's own).
    public static func event(_ method: String, _ params: [String: JSONValue], sessionId: String?) -> String {
        text(["method": .string(method), "params": .object(params)], sessionId: sessionId)
    }

    private static func text(_ members: [String: JSONValue], sessionId: String?) -> String {
        var members = members
        if let sessionId { members["sessionId"] = .string(sessionId) }
        return String(decoding: JSONValue.object(members).text, as: UTF8.self)
    }
}
