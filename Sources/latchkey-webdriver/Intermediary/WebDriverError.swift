// WebDriver's errors (WebDriver §6.6, "Errors"): an error code, the HTTP
// status its table gives, and the JSON body every WebDriver client reads,
// `{"value": {"error", "message", "stacktrace"}}`.

import LatchkeyJSON

/// A WebDriver error the intermediary answers itself.
public struct WebDriverError: Error, Sendable, Equatable {
    /// The error code, e.g. "invalid argument".
    public var code: String
    /// The HTTP status WebDriver's error table gives the code.
    public var status: Int
    public var message: String

    public init(_ code: String, status: Int, _ message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    /// A parameter is missing, of the wrong type, or not one of its valid values.
    /// WebAuthn §11 also answers this for an unknown authenticator or credential.
    public static func invalidArgument(_ message: String) -> WebDriverError {
        WebDriverError("invalid argument", status: 400, message)
    }

    /// §11's answer for an authenticatorId the session does not own.
    public static func noSuchAuthenticator(_ id: String) -> WebDriverError {
        invalidArgument("no such virtual authenticator: \(id) (not one this session added, or already removed)")
    }

    /// §11's answer for a credentialId the authenticator does not hold.
    public static func noSuchCredential(_ id: String, authenticator: String) -> WebDriverError {
        invalidArgument("no such credential: \(id) on virtual authenticator \(authenticator)")
    }

    /// A valid request latchkey cannot carry out (WebDriver: 500).
    public static func unsupportedOperation(_ message: String) -> WebDriverError {
        WebDriverError("unsupported operation", status: 500, message)
    }

    public static func invalidSessionId(_ id: String) -> WebDriverError {
        WebDriverError("invalid session id", status: 404, "no session \(id) was created through this intermediary")
    }

    public static func unknownCommand(_ method: String, _ path: String) -> WebDriverError {
        WebDriverError("unknown command", status: 404, "no WebAuthn command is \(method) \(path)")
    }

    public static func unknownMethod(_ method: String, _ path: String, allowed: [String]) -> WebDriverError {
        WebDriverError(
            "unknown method",
            status: 405,
            "\(path) does not take \(method); it takes \(allowed.joined(separator: ", "))"
        )
    }

    /// A caller latchkey-webdriver does not serve (CallerGate.swift). WebDriver's table has
    /// no such error; the code is "unknown error", the HTTP status says what happened.
    public static func forbidden(_ message: String) -> WebDriverError {
        WebDriverError("unknown error", status: 403, message)
    }

    public static func unknownError(_ message: String) -> WebDriverError {
        WebDriverError("unknown error", status: 500, message)
    }

    /// The JSON body.
    public var document: JSONValue {
        .object([
            "value": .object([
                "error": .string(code), "message": .string(message), "stacktrace": .string(""),
            ])
        ])
    }
}
