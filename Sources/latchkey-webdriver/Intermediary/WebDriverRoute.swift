// What a WebDriver request is, from its method and path: the commands the
// intermediary answers (WebAuthn §11, under /session/{id}/webauthn/), the two
// it watches on their way to the upstream driver (New Session, Delete
// Session), and everything else, which only passes through. A URL prefix
// before /session (Selenium Grid's /wd/hub) is allowed.

import Foundation

/// A WebAuthn §11 extension command.
public enum WebAuthnCommand: Sendable, Equatable {
    case addAuthenticator
    case removeAuthenticator(String)
    case addCredential(String)
    case getCredentials(String)
    case removeCredential(String, credential: String)
    case removeAllCredentials(String)
    case setUserVerified(String)
    case setCredentialProperties(String, credential: String)
    /// A path §11 defines, asked with a method it does not take.
    case unknownMethod(allowed: [String])
    /// A path under /webauthn/ that §11 does not define.
    case unknown
}

/// A request as the intermediary sees it.
public enum WebDriverRoute: Sendable, Equatable {
    case newSession
    case deleteSession(String)
    case webAuthn(session: String, WebAuthnCommand)
    /// Forwarded as it is; `session` when the path names one.
    case forward(session: String?)

    public init(method: String, path: String) {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
            .map { String($0).removingPercentEncoding ?? String($0) }
        guard let start = segments.firstIndex(of: "session") else {
            self = .forward(session: nil)
            return
        }
        let rest = Array(segments[(start + 1)...])
        if rest.isEmpty || rest == [""] {
            self = method == "POST" ? .newSession : .forward(session: nil)
        } else if rest.count == 1 || (rest.count == 2 && rest[1].isEmpty) {
            self = method == "DELETE" ? .deleteSession(rest[0]) : .forward(session: rest[0])
        } else if rest[1] == "webauthn" {
            self = .webAuthn(session: rest[0], Self.command(method, Array(rest.dropFirst(2))))
        } else {
            self = .forward(session: rest[0])
        }
    }

    /// The §11 command for `method` and the path after /webauthn/.
    static func command(_ method: String, _ path: [String]) -> WebAuthnCommand {
        func only(_ expected: String, _ command: WebAuthnCommand) -> WebAuthnCommand {
            method == expected ? command : .unknownMethod(allowed: [expected])
        }
        guard path.first == "authenticator" else { return .unknown }
        switch Array(path.dropFirst()) {
        case []:
            return only("POST", .addAuthenticator)
        case let rest where rest.count == 1 && !rest[0].isEmpty:
            return only("DELETE", .removeAuthenticator(rest[0]))
        case let rest where rest.count == 2 && rest[1] == "credential":
            return only("POST", .addCredential(rest[0]))
        case let rest where rest.count == 2 && rest[1] == "credentials":
            switch method {
            case "GET": return .getCredentials(rest[0])
            case "DELETE": return .removeAllCredentials(rest[0])
            default: return .unknownMethod(allowed: ["DELETE", "GET"])
            }
        case let rest where rest.count == 2 && rest[1] == "uv":
            return only("POST", .setUserVerified(rest[0]))
        case let rest where rest.count == 3 && rest[1] == "credentials" && !rest[2].isEmpty:
            return only("DELETE", .removeCredential(rest[0], credential: rest[2]))
        case let rest where rest.count == 4 && rest[1] == "credentials" && rest[3] == "props":
            return only("POST", .setCredentialProperties(rest[0], credential: rest[2]))
        default:
            return .unknown
        }
    }
}
