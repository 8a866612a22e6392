// The daemon's event bus: what happened to keys, credentials and presence
// requests, for the control API's server-sent events stream (GET /v1/events)
// and whoever else subscribes. Publishing never waits: each subscriber has a
// bounded buffer, and one that falls behind is dropped with a final `lost`
// event rather than slowing the key down.
//
// Publishing, for code elsewhere in the daemon:
//
//     bus.publish(.policyDecision, key: "ci-1", ["rpId": "example.com", "reason": "no password signal"])
//
// Names are dotted (`credential.created`); fields are flat JSON values. The
// time and the key's name are added by the bus.

import Foundation
import Synchronization

/// An event's name: an open set, each a `static let` here (README "Events"
/// lists them with their fields).
public struct EventName: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A credential was made (makeCredential, or seeded through the control API).
    public static let credentialCreated = EventName(rawValue: "credential.created")
    /// A credential signed an assertion.
    public static let credentialAsserted = EventName(rawValue: "credential.asserted")
    /// A stored credential was deleted (credentialManagement, the control API, a reset).
    public static let credentialDeleted = EventName(rawValue: "credential.deleted")
    /// A stored credential's user information changed.
    public static let credentialUpdated = EventName(rawValue: "credential.updated")
    /// An operation asked for user presence (or verification).
    public static let presenceRequested = EventName(rawValue: "presence.requested")
    /// A presence request waits for a person: `request` is its id for
    /// approve/deny, with the prompt's facts (Consent/PresenceBroker.swift).
    public static let presencePending = EventName(rawValue: "presence.pending")
    /// A presence request was answered: `outcome` says how; `request` names
    /// the prompt when one was shown.
    public static let presenceAnswered = EventName(rawValue: "presence.answered")
    /// The policy decided an operation (conditional registration); `reason` says why.
    public static let policyDecision = EventName(rawValue: "policy.decision")
    /// A queued override acted on an operation.
    public static let overrideApplied = EventName(rawValue: "override.applied")
    /// A key was created through the control API.
    public static let keyCreated = EventName(rawValue: "key.created")
    /// A key was deleted.
    public static let keyDeleted = EventName(rawValue: "key.deleted")
    /// A key was unplugged and plugged in again.
    public static let keyReplugged = EventName(rawValue: "key.replugged")
    /// A caller was refused access to a key (Keys/Access.swift): `access`, `rule`, `uid`, `door`.
    public static let accessRefused = EventName(rawValue: "access.refused")
    /// Private keys left the daemon (an export, or a credential read with its private key).
    public static let keyExported = EventName(rawValue: "key.exported")
    /// The last event a subscriber gets when it fell behind and was dropped.
    public static let lost = EventName(rawValue: "lost")
}

/// A field value: events carry flat JSON.
public enum EventValue: Sendable, Equatable, Encodable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral
{
    case string(String)
    case int(Int)
    case bool(Bool)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        }
    }
}

/// One event. Encodes as one flat JSON object:
/// `{"event": "credential.created", "key": "ci-1", "time": "2026-…Z", "seq": 7, "rpId": …}`.
public struct DaemonEvent: Sendable, Equatable, Encodable {
    /// What happened.
    public var name: EventName
    /// The key it happened to; nil for daemon-wide events.
    public var key: String?
    /// When, as RFC 3339 UTC with milliseconds.
    public var time: String
    /// The bus's sequence number: increasing, so a subscriber sees gaps.
    public var sequence: UInt64
    /// The event's own fields (credentialId, rpId, userName, outcome, reason, …).
    public var fields: [String: EventValue]

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        // Fields first, so that a field can never replace the envelope's names.
        for (name, value) in fields { try container.encode(value, forKey: Key(name)) }
        try container.encode(name.rawValue, forKey: Key("event"))
        try container.encodeIfPresent(key, forKey: Key("key"))
        try container.encode(time, forKey: Key("time"))
        try container.encode(sequence, forKey: Key("seq"))
    }

    /// The event as one server-sent event: `event:`, `id:` and one `data:` line.
    public var serverSentEvent: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return "event: \(name.rawValue)\nid: \(sequence)\ndata: \(data)\n\n"
    }
}

/// Fans events out to subscribers. Thread-safe; `publish` never blocks.
public final class EventBus: Sendable {
    /// Events a subscriber may have waiting before it is dropped.
    public let bufferSize: Int
    private let state = Mutex<(next: UInt64, subscribers: [ObjectIdentifier: EventSubscription])>((1, [:]))
    private let now: @Sendable () -> Date

    /// A bus whose subscribers each hold at most `bufferSize` events.
    public init(bufferSize: Int = 1024, now: @escaping @Sendable () -> Date = Date.init) {
        precondition(bufferSize > 0, "a subscriber needs room for one event")
        self.bufferSize = bufferSize
        self.now = now
    }

    /// Publishes an event to every subscriber that wants it. `key` names the
    /// key it concerns (nil: daemon-wide). Never waits.
    public func publish(_ name: EventName, key: String?, _ fields: @autoclosure () -> [String: EventValue] = [:]) {
        // With no one subscribed (the usual case) the event's number is spent and
        // nothing is made: no time stamp, no fields.
        let listened = state.withLock { state in
            if state.subscribers.isEmpty { state.next += 1 }
            return !state.subscribers.isEmpty
        }
        guard listened else { return }
        let time = Self.timestamp(now())
        let fields = fields()
        // Offered under the bus's lock, so that every subscriber sees events in
        // sequence order even when keys publish at once. Offering only takes
        // the subscriber's own lock and never waits.
        state.withLock { state in
            let event = DaemonEvent(name: name, key: key, time: time, sequence: state.next, fields: fields)
            state.next += 1
            for (id, subscriber) in state.subscribers where subscriber.wants(event) {
                if !subscriber.offer(event) { state.subscribers[id] = nil }
            }
        }
    }

    /// A new subscription to every event, or to those of the key named `key`,
    /// that `filter` lets through (asked as each event is published, under
    /// the bus's lock: it must not publish). It ends when `close()` is
    /// called, or after its `lost` event.
    public func subscribe(key: String? = nil, filter: (@Sendable (DaemonEvent) -> Bool)? = nil) -> EventSubscription {
        let subscription = EventSubscription(key: key, filter: filter, capacity: bufferSize, bus: self)
        state.withLock { $0.subscribers[ObjectIdentifier(subscription)] = subscription }
        return subscription
    }

    /// How many subscriptions are open.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Ends every subscription (daemon shutdown), so that open streams finish.
    public func close() {
        let subscribers = state.withLock { state in
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }

    func remove(_ subscription: EventSubscription) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: ObjectIdentifier(subscription)) }
    }

    static func timestamp(_ date: Date) -> String { RFC3339.string(from: date) }
}

/// One subscriber's events, in order: an `AsyncSequence` that ends when the
/// bus closes or after a `lost` event. Cancelling the task that iterates it
/// unsubscribes.
public final class EventSubscription: AsyncSequence, Sendable {
    public typealias Element = DaemonEvent

    private struct State {
        var queue: [DaemonEvent] = []
        var head = 0
        var waiter: CheckedContinuation<DaemonEvent?, Never>?
        var finished = false
    }

    /// The key whose events it gets; nil for all.
    public let key: String?
    /// Which of those it gets (the subscriber's access); nil for all.
    let filter: (@Sendable (DaemonEvent) -> Bool)?
    let capacity: Int
    private weak let bus: EventBus?
    private let state = Mutex(State())

    init(key: String?, filter: (@Sendable (DaemonEvent) -> Bool)?, capacity: Int, bus: EventBus) {
        self.key = key
        self.filter = filter
        self.capacity = capacity
        self.bus = bus
    }

    func wants(_ event: DaemonEvent) -> Bool {
        (key == nil || event.key == nil || event.key == key) && filter?(event) != false
    }

    /// Hands `event` to the subscriber; false when it is full (and so now
    /// finished, with a `lost` event in place of `event`) or finished.
    func offer(_ event: DaemonEvent) -> Bool {
        let (waiter, accepted) = state.withLock { state -> (CheckedContinuation<DaemonEvent?, Never>?, Bool) in
            if state.finished { return (nil, false) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, true)
            }
            if state.queue.count - state.head < capacity {
                state.queue.append(event)
                return (nil, true)
            }
            state.queue.append(
                DaemonEvent(
                    name: .lost,
                    key: key,
                    time: event.time,
                    sequence: event.sequence,
                    fields: ["reason": "the subscriber fell behind; events from this one on were dropped"]
                )
            )
            state.finished = true
            return (nil, false)
        }
        waiter?.resume(returning: event)
        return accepted
    }

    /// Ends the subscription once what is queued has been read.
    func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Stops receiving events.
    public func cancel() {
        finish()
        bus?.remove(self)
    }

    /// The next event; nil when the subscription ended.
    func next() async -> DaemonEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<DaemonEvent?, Never>) in
                let ready = state.withLock { state -> DaemonEvent?? in
                    if state.head < state.queue.count {
                        let event = state.queue[state.head]
                        state.head += 1
                        if state.head > 64 && state.head * 2 > state.queue.count {
                            state.queue.removeFirst(state.head)
                            state.head = 0
                        }
                        return .some(event)
                    }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            self.cancel()
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let subscription: EventSubscription
        public mutating func next() async -> DaemonEvent? { await subscription.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(subscription: self) }
}

/// The policy publishes through its own small protocol (PolicyDecisionLog.swift)
/// so that it does not depend on the bus; this connects the two. Its fields
/// are text, and stay text on the stream.
extension EventBus: PolicyEventSink {
    public func publish(_ event: PolicyEvent) {
        publish(EventName(rawValue: event.type), key: event.key, event.fields.mapValues { .string($0) })
    }
}
