// The control API's failures as HTTP answers, in one place: the key core's errors
// (`CoreError`, whose codes know no HTTP) mapped to statuses and the error document's
// codes, as CTAP/StatusMapping.swift maps the engine's failures to CTAP statuses. Every
// non-2xx answer is the error document `{"error": {"code", "message"}}`
// (docs/control-api.openapi.yaml, "Errors"); an access refusal adds its rule.

import LatchkeyCore

/// Every error: {"error": {"code": "...", "message": "..."}}; an access
/// refusal (403 forbidden) adds the rule that refused (docs/access.md).
public struct ErrorDocument: Codable, Sendable {
    public struct Body: Codable, Sendable {
        public var code: String
        public var message: String
        public var rule: String?

        init(code: String, message: String, rule: String? = nil) {
            self.code = code
            self.message = message
            self.rule = rule
        }
    }

    public var error: Body
}

/// A control API failure: an HTTP status and a stable code.
public struct ControlError: Error, Sendable {
    public var status: Int
    public var code: String
    public var message: String
    /// For a refusal of access: the rule's name (LatchkeyCore/Keys/Access.swift).
    public var rule: String?

    public init(_ status: Int, _ code: String, _ message: String, rule: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.rule = rule
    }

    /// The error document of this failure.
    var document: ErrorDocument { ErrorDocument(error: .init(code: code, message: message, rule: rule)) }

    /// The one mapping from the key core's errors to statuses and codes.
    init(_ error: CoreError) {
        let (status, code): (Int, String) =
            switch error.code {
            case .notFound: (404, "not_found")
            case .conflict: (409, "conflict")
            case .invalid: (400, "bad_request")
            case .forbidden: (403, "forbidden")
            case .full: (507, "full")
            case .pinInvalid: (403, "pin_invalid")
            case .pinBlocked: (423, "pin_blocked")
            case .pinAuthBlocked: (423, "pin_auth_blocked")
            case .pinNotSet: (409, "pin_not_set")
            case .pinAlreadySet: (409, "pin_already_set")
            case .pinPolicyViolation: (400, "pin_policy_violation")
            case .settingRefused: (409, "setting_refused")
            case .duplicate: (409, "duplicate")
            case .passphraseRequired: (400, "passphrase_required")
            case .decryptionFailed: (400, "decryption_failed")
            case .internal: (500, "internal")
            }
        self.init(status, code, error.message, rule: error.refusal?.rule)
    }

    /// What a route answers for `error`: the core's and the control API's own errors
    /// as they are, nil for anything else (a bad body, an unmapped failure).
    static func answering(_ error: any Error) -> ControlError? {
        switch error {
        case let error as ControlError: error
        case let error as CoreError: ControlError(error)
        default: nil
        }
    }

    static func notFound(_ message: String) -> ControlError { ControlError(404, "not_found", message) }
    static func badRequest(_ message: String) -> ControlError { ControlError(400, "bad_request", message) }
    static func internalError(_ message: String) -> ControlError { ControlError(500, "internal", message) }
}
