// What goes wrong in the key core, as its callers see it: a code to act on, a message
// for the person, and for a refusal of access the refusal itself (Keys/Access.swift).
// The core knows no transport or protocol of its callers: the control API maps each
// code to an HTTP status and an error document in one place
// (LatchkeyDaemon/Control/ErrorMapping.swift), as CTAP/StatusMapping.swift maps the
// engine's failures to CTAP statuses. This file is the one mapping from the engine's
// administrative errors (`AdministrationError`) to these codes.

import CTAP

/// A failure of a key operation.
public struct CoreError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure; callers branch on it, people read the message.
    public enum Code: String, Sendable, CaseIterable {
        /// No such key, credential or pending request.
        case notFound
        /// The request contradicts what is there (a key of that name exists, a key from
        /// the configuration file cannot be deleted, conditional registration is off).
        case conflict
        /// The request itself is wrong (a bad value, a field that may not be set).
        case invalid
        /// The caller does not hold the tier it needs; `refusal` says why.
        case forbidden
        /// The key's store is full.
        case full
        /// A PIN given was wrong.
        case pinInvalid
        /// No PIN retries left: only a reset unblocks the key.
        case pinBlocked
        /// Three wrong PINs in a row: no attempt until the key is plugged in again.
        case pinAuthBlocked
        /// The key has no PIN, and the operation needs one.
        case pinNotSet
        /// The key has a PIN already; changing it needs the current one.
        case pinAlreadySet
        /// A new PIN breaks the key's PIN policy (length, forced change).
        case pinPolicyViolation
        /// The engine refused a setting (authenticatorConfig's rules).
        case settingRefused
        /// A credential of that ID is there already.
        case duplicate
        /// An encrypted export document came without its passphrase.
        case passphraseRequired
        /// The passphrase does not open the encrypted export document.
        case decryptionFailed
        /// The daemon failed; its log says more.
        case `internal`
    }

    public var code: Code
    public var message: String
    /// For `forbidden`: the refusal, with the rule that refused (docs/access.md).
    public var refusal: AccessRefusal?

    public init(_ code: Code, _ message: String, refusal: AccessRefusal? = nil) {
        self.code = code
        self.message = message
        self.refusal = refusal
    }

    /// A refusal of access: `forbidden`, with its reason and rule.
    public init(_ refusal: AccessRefusal) {
        self.init(.forbidden, refusal.reason, refusal: refusal)
    }

    public var description: String { "\(code.rawValue): \(message)" }

    static func notFound(_ message: String) -> CoreError { CoreError(.notFound, message) }
    static func invalid(_ message: String) -> CoreError { CoreError(.invalid, message) }
    static func conflict(_ message: String) -> CoreError { CoreError(.conflict, message) }
    static func internalError(_ message: String) -> CoreError { CoreError(.internal, message) }
}

extension CoreError {
    /// The one mapping from the engine's administrative errors to the core's codes;
    /// `key` names the key in the message.
    init(_ error: AdministrationError, key: String) {
        let code: Code =
            switch error.code {
            case .pinInvalid: .pinInvalid
            case .pinBlocked: .pinBlocked
            case .pinAuthBlocked: .pinAuthBlocked
            case .pinNotSet: .pinNotSet
            case .pinAlreadySet: .pinAlreadySet
            case .pinPolicyViolation: .pinPolicyViolation
            case .settingRefused: .settingRefused
            case .noCredential: .notFound
            case .invalidParameter: .invalid
            case .duplicate: .duplicate
            case .full: .full
            default: .internal
            }
        self.init(code, "key \(key): \(error.reason)")
    }
}
