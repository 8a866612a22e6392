// CI overrides: the outcome of a key's next N operations, queued through the
// control API (POST /v1/keys/{name}/overrides). Two stages consume them:
// the presence decision (approve, deny, timeout, uv-false: PresenceBroker) and the
// engine's response (bogus-signature, malformed-response, drop-connection), which a
// transport's HID session hands to the key's `SessionHooks` before it sends it.
// `ResponseTampering` holds the response rewrites; they are pure functions of the
// response bytes.

import CBOR
import Foundation
import Logging
import Synchronization

/// What an override does to the operation it catches.
public enum OverrideAction: String, Codable, Sendable, CaseIterable {
    /// The presence decision approves at once, whatever the mode (a key in
    /// prompt or deny mode lets the next operations through).
    case approve
    /// The presence decision refuses: CTAP2_ERR_OPERATION_DENIED.
    case deny
    /// The presence decision times out at once: CTAP2_ERR_USER_ACTION_TIMEOUT.
    case timeout
    /// Presence is given but user verification fails (the key's built-in
    /// UV answers "not verified").
    case uvFalse = "uv-false"
    /// The response's signature gets one byte flipped (re-encoded canonically).
    case bogusSignature = "bogus-signature"
    /// The response is status 0 followed by truncated CBOR.
    case malformedResponse = "malformed-response"
    /// No response: the key is yanked (USB/IP connection closed, uhid device
    /// destroyed and made again).
    case dropConnection = "drop-connection"

    /// Where the action takes effect.
    var stage: OverrideStage {
        switch self {
        case .approve, .deny, .timeout, .uvFalse: .presence
        case .bogusSignature, .malformedResponse, .dropConnection: .response
        }
    }
}

/// Where an override acts.
enum OverrideStage: Sendable {
    case presence, response
}

/// The operations an override can be limited to. U2F REGISTER counts as
/// makeCredential and U2F AUTHENTICATE as getAssertion.
public enum OverrideOperation: String, Codable, Sendable, CaseIterable {
    case makeCredential, getAssertion, getNextAssertion, getInfo, clientPIN, reset, selection
    case credentialManagement, largeBlobs, config

    /// What an override with no `operations` applies to.
    static let defaults: [OverrideOperation] = [.makeCredential, .getAssertion]

    /// The operation of a CTAPHID_CBOR request (its command byte, CTAP 2.1 §6).
    init?(cborCommand byte: UInt8) {
        switch byte {
        case 0x01: self = .makeCredential
        case 0x02: self = .getAssertion
        case 0x04: self = .getInfo
        case 0x06: self = .clientPIN
        case 0x07: self = .reset
        case 0x08: self = .getNextAssertion
        case 0x0A, 0x41: self = .credentialManagement
        case 0x0B: self = .selection
        case 0x0C: self = .largeBlobs
        case 0x0D: self = .config
        default: return nil
        }
    }

    /// The operation of a CTAPHID_MSG request: the APDU's INS (U2F 1.2 raw
    /// messages: 0x01 REGISTER, 0x02 AUTHENTICATE).
    init?(apdu: [UInt8]) {
        guard apdu.count >= 2 else { return nil }
        switch apdu[1] {
        case 0x01: self = .makeCredential
        case 0x02: self = .getAssertion
        default: return nil
        }
    }
}

/// One queued override, as the control API shows it.
public struct OverrideDocument: Codable, Sendable, Equatable {
    /// "o-1", "o-2", … unique in the key's lifetime.
    public var id: String
    public var action: OverrideAction
    /// How many more operations it acts on.
    public var remaining: Int
    /// The operations it acts on.
    public var operations: [OverrideOperation]
}

/// POST /v1/keys/{name}/overrides
public struct OverrideRequest: Codable, Sendable {
    public var action: OverrideAction
    /// How many operations it acts on (1 to 1000; default 1).
    public var count: Int?
    /// Which operations; default makeCredential and getAssertion.
    public var operations: [OverrideOperation]?
}

/// A key's queue of overrides, oldest first. An operation is caught by the
/// oldest override of the right stage that lists it; each catch uses one
/// of the override's count, and a used-up override leaves the queue.
public final class OverrideQueue: Sendable {
    private let state = Mutex<(next: Int, entries: [OverrideDocument])>((1, []))

    public init() {}

    /// Queues an override.
    @discardableResult
    public func add(_ action: OverrideAction, count: Int = 1, operations: [OverrideOperation]? = nil)
        -> OverrideDocument
    {
        precondition(count > 0, "an override acts on at least one operation")
        return state.withLock { state in
            defer { state.next += 1 }
            let entry = OverrideDocument(
                id: "o-\(state.next)",
                action: action,
                remaining: count,
                operations: operations ?? OverrideOperation.defaults
            )
            state.entries.append(entry)
            return entry
        }
    }

    /// The queued overrides, oldest first.
    public var entries: [OverrideDocument] { state.withLock { $0.entries } }

    /// Empties the queue.
    public func clear() { state.withLock { $0.entries.removeAll() } }

    /// Takes one use of the oldest override of `stage` that lists
    /// `operation` and for which `applies` holds (a response with no
    /// signature cannot carry a bogus one).
    func take(
        _ stage: OverrideStage,
        operation: OverrideOperation,
        applies: (OverrideAction) -> Bool = { _ in true }
    ) -> OverrideAction? {
        state.withLock { state in
            guard
                let index = state.entries.firstIndex(where: {
                    $0.action.stage == stage && $0.operations.contains(operation) && applies($0.action)
                })
            else { return nil }
            let action = state.entries[index].action
            state.entries[index].remaining -= 1
            if state.entries[index].remaining == 0 { state.entries.remove(at: index) }
            return action
        }
    }

    /// Whether some override waits for the response stage (a cheap check
    /// before a response is examined).
    var hasResponseOverrides: Bool {
        state.withLock { $0.entries.contains { $0.action.stage == .response } }
    }
}

/// What a key's HID sessions need from it for CI overrides: the response stage,
/// told as events, and a way to yank the key from the session's transport.
public struct SessionHooks: Sendable {
    /// The key's override queue.
    var overrides: OverrideQueue
    /// Told when an override acted (for the event stream).
    var applied: @Sendable (OverrideAction, OverrideOperation) -> Void
    /// Yanks the key from this transport (drop-connection).
    public var drop: @Sendable () -> Void

    /// What the session does with the engine's `response` to `request` (a
    /// CTAPHID_CBOR request when `cbor`, else an APDU): sends it as the key's
    /// response-stage override leaves it, if one catches this operation, or drops
    /// the connection; `logger` (the session's) notes an override that acted.
    public func respond(to request: [UInt8], cbor: Bool, with response: [UInt8], logger: Logger) -> ResponseOverride {
        guard overrides.hasResponseOverrides else { return .send(response) }
        let operation = cbor ? request.first.flatMap(OverrideOperation.init(cborCommand:)) : OverrideOperation(apdu: request)
        guard let operation else { return .send(response) }
        func bogus() -> [UInt8]? {
            cbor
                ? ResponseTampering.bogusSignature(cbor: response, operation: operation)
                : ResponseTampering.bogusSignature(apdu: response)
        }
        func malformed() -> [UInt8]? {
            cbor ? ResponseTampering.malformed(cbor: response) : ResponseTampering.malformed(apdu: response)
        }
        // An override acts only where it can: a bogus signature needs a
        // signature, a malformed response a successful one. Otherwise it
        // waits for the next operation.
        let action = overrides.take(.response, operation: operation) { action in
            switch action {
            case .bogusSignature: bogus() != nil
            case .malformedResponse: malformed() != nil
            default: true
            }
        }
        guard let action else { return .send(response) }
        logger.notice(
            "override applied",
            metadata: ["override": "\(action.rawValue)", "operation": "\(operation.rawValue)"]
        )
        applied(action, operation)
        switch action {
        case .bogusSignature: return .send(bogus() ?? response)
        case .malformedResponse: return .send(malformed() ?? response)
        case .dropConnection: return .drop
        case .approve, .deny, .timeout, .uvFalse: return .send(response)
        }
    }
}

/// What a HID session does with the engine's answer.
public enum ResponseOverride: Sendable, Equatable {
    /// Sends these bytes (the answer, or an override's rewrite of it).
    case send([UInt8])
    /// Sends nothing and drops the connection (drop-connection).
    case drop
}

/// The response rewrites of the response-stage overrides.
enum ResponseTampering {
    /// `response` (status byte and CBOR) with the last byte of its signature
    /// flipped: attStmt.sig of makeCredential (0x03), signature (0x03) of
    /// getAssertion and getNextAssertion; nil when it carries none (an
    /// error, or `none` attestation). The last byte is the end of an ECDSA
    /// signature's s or of an Ed25519 S, never DER structure.
    static func bogusSignature(cbor response: [UInt8], operation: OverrideOperation) -> [UInt8]? {
        guard response.first == 0x00, response.count > 1,
            case .map(var entries)? = try? CBORDecoder().decode(Array(response.dropFirst()))
        else { return nil }
        guard let index = entries.firstIndex(where: { $0.key == .unsigned(3) }) else { return nil }
        switch (operation, entries[index].value) {
        case (.makeCredential, .map(var statement)):
            guard let sig = statement.firstIndex(where: { $0.key == .text("sig") }),
                case .bytes(let bytes) = statement[sig].value, !bytes.isEmpty
            else { return nil }
            statement[sig].value = .bytes(flipLast(bytes))
            entries[index].value = .map(statement)
        case (.getAssertion, .bytes(let bytes)), (.getNextAssertion, .bytes(let bytes)):
            guard !bytes.isEmpty else { return nil }
            entries[index].value = .bytes(flipLast(bytes))
        default:
            return nil
        }
        return [0x00] + CBORValue.map(entries).encoded()
    }

    /// A U2F REGISTER or AUTHENTICATE response whose signature (the bytes
    /// before the status word) has its last byte flipped; nil unless the
    /// status word is 9000 and there is a signature.
    static func bogusSignature(apdu response: [UInt8]) -> [UInt8]? {
        guard response.count > 8, response.suffix(2) == [0x90, 0x00] else { return nil }
        var tampered = response
        tampered[response.count - 3] ^= 0x01
        return tampered
    }

    /// Status 0 followed by the first half of the CBOR (at least a map head
    /// that promises an entry it never gives); nil for an error response.
    static func malformed(cbor response: [UInt8]) -> [UInt8]? {
        guard response.first == 0x00 else { return nil }
        let body = response.dropFirst()
        guard body.count >= 2 else { return [0x00, 0xA1] }
        return [0x00] + body.prefix(body.count / 2)
    }

    /// A successful U2F response cut in half, still ending in 9000.
    static func malformed(apdu response: [UInt8]) -> [UInt8]? {
        guard response.count > 2, response.suffix(2) == [0x90, 0x00] else { return nil }
        let data = response.dropLast(2)
        return Array(data.prefix(data.count / 2)) + [0x90, 0x00]
    }

    private static func flipLast(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        bytes[bytes.count - 1] ^= 0x01
        return bytes
    }
}
