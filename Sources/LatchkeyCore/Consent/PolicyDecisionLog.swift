// What the policy decided, and why: every presence request of a key leaves
// one record in a ring buffer (the last 100), which the control API serves
// (`GET /v1/keys/{name}/policy/decisions`, `latchkeyctl policy explain`).
// Conditional registrations are also published as events through a
// `PolicyEventSink`, which the daemon connects to its event stream.

import Foundation
import Logging
import Synchronization

/// One decision, as the control API shows it.
public struct PolicyDecisionRecord: Sendable, Equatable, Codable {
    /// Increasing per key, from 1.
    public var id: Int
    /// When the request arrived (RFC 3339, UTC).
    public var time: String
    /// The operation (`PresenceRequest.Operation` raw value).
    public var operation: String
    public var rpId: String?
    public var userName: String?
    /// The platform asked for built-in user verification.
    public var userVerification: Bool
    /// Which rule decided: auto, prompt, deny, conditional or mismatch.
    public var path: PolicyPath
    /// approved, verified, denied, timedOut or cancelled.
    public var outcome: PolicyOutcome
    /// Why, in words.
    public var reason: String
    /// How long the decision took (a prompt's wait), in milliseconds.
    public var durationMs: Int
}

/// The last `capacity` decisions of one key.
public final class PolicyDecisionLog: Sendable {
    public static let defaultCapacity = 100

    private let capacity: Int
    private let state = Mutex<(next: Int, records: [PolicyDecisionRecord])>((1, []))

    public init(capacity: Int = defaultCapacity) {
        precondition(capacity > 0, "a decision log keeps at least one record")
        self.capacity = capacity
    }

    /// Keeps `record`, numbered; returns it with its id.
    @discardableResult
    func append(_ record: PolicyDecisionRecord) -> PolicyDecisionRecord {
        state.withLock { state in
            var record = record
            record.id = state.next
            state.next += 1
            state.records.append(record)
            if state.records.count > capacity { state.records.removeFirst(state.records.count - capacity) }
            return record
        }
    }

    /// The newest `limit` records, newest first.
    public func latest(_ limit: Int) -> [PolicyDecisionRecord] {
        state.withLock { Array($0.records.suffix(max(0, limit)).reversed()) }
    }
}

/// Something the policy did that watchers of the daemon want to know.
public struct PolicyEvent: Sendable, Equatable {
    /// The event type, as the daemon's event stream names it ("credential.created").
    public var type: String
    /// The key's name.
    public var key: String
    /// The event's fields (rpId, userName, reason, credentialId, …).
    public var fields: [String: String]

    public init(type: String, key: String, fields: [String: String]) {
        self.type = type
        self.key = key
        self.fields = fields
    }
}

/// Where the policy publishes its events. A protocol of its own so that the
/// policy does not depend on the daemon's event bus; the daemon adapts one
/// to the other.
public protocol PolicyEventSink: Sendable {
    func publish(_ event: PolicyEvent)
}

/// The sink until the daemon connects one: the event goes to the log.
public struct LoggingPolicyEventSink: PolicyEventSink {
    let logger: Logger

    public init(logger: Logger) { self.logger = logger }

    public func publish(_ event: PolicyEvent) {
        var metadata: Logger.Metadata = ["event": "\(event.type)", "key": "\(event.key)"]
        for (name, value) in event.fields { metadata[name] = "\(value)" }
        // Each decision is logged at info by the broker already; the rest (credential.created) is news.
        logger.log(level: event.type == "policy.decision" ? .debug : .notice, "policy event", metadata: metadata)
    }
}

/// Time stamps for the records and the event stream: UTC with milliseconds
/// ("2026-11-26T17:20:00.123Z").
enum RFC3339 {
    /// Foundation's value-type format style: it formats without ICU. An
    /// `ISO8601DateFormatter` made per call builds an ICU date formatter each
    /// time, which was a sixth of the daemon's CPU per request (perf, issue 16).
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func string(from date: Date) -> String { date.formatted(style) }

    static func now() -> String { string(from: Date()) }
}
