// The event bus: fan-out to subscribers, per-key filtering, the bounded
// buffer that drops a slow subscriber with a final `lost` event, and the
// server-sent event encoding.

import Foundation
import Testing

@testable import LatchkeyCore

@Suite("event bus")
struct EventBusTests {
    static let fixedTime: @Sendable () -> Date = { Date(timeIntervalSince1970: 1_800_000_000.25) }

    @Test("every subscriber gets every event, in order, with increasing sequence numbers")
    func fanOut() async {
        let bus = EventBus(now: Self.fixedTime)
        let first = bus.subscribe()
        let second = bus.subscribe()
        bus.publish(.keyCreated, key: "a")
        bus.publish(.credentialCreated, key: "a", ["rpId": "example.com"])
        for subscription in [first, second] {
            var iterator = subscription.makeAsyncIterator()
            let one = await iterator.next()
            let two = await iterator.next()
            #expect(one?.name == .keyCreated)
            #expect(two?.name == .credentialCreated)
            #expect(two?.fields["rpId"] == "example.com")
            #expect((one?.sequence ?? 0) < (two?.sequence ?? 0))
        }
    }

    @Test("events published from many tasks at once arrive in sequence order")
    func concurrentPublishers() async {
        let bus = EventBus(bufferSize: 4096)
        let subscription = bus.subscribe()
        await withTaskGroup(of: Void.self) { group in
            for key in 0..<8 {
                group.addTask { for _ in 0..<200 { bus.publish(.credentialAsserted, key: "k\(key)") } }
            }
        }
        bus.close()
        var sequences: [UInt64] = []
        for await event in subscription { sequences.append(event.sequence) }
        #expect(sequences.count == 1600)
        #expect(sequences == sequences.sorted())
    }

    @Test("a subscription to one key sees its events and daemon-wide ones only")
    func keyFilter() async {
        let bus = EventBus()
        let subscription = bus.subscribe(key: "b")
        bus.publish(.keyCreated, key: "a")
        bus.publish(.keyCreated, key: "b")
        bus.publish(.policyDecision, key: nil, ["reason": "test"])
        bus.close()
        var names: [String] = []
        for await event in subscription { names.append("\(event.name)/\(event.key ?? "-")") }
        #expect(names == ["key.created/b", "policy.decision/-"])
    }

    @Test("a subscriber that falls behind is dropped with a final lost event; publishing never waits")
    func slowSubscriber() async {
        let bus = EventBus(bufferSize: 4)
        let slow = bus.subscribe()
        let fast = bus.subscribe()
        var fastEvents = fast.makeAsyncIterator()
        for index in 0..<10 {
            bus.publish(.credentialAsserted, key: "a", ["signCount": .int(index)])
            #expect(await fastEvents.next()?.fields["signCount"] == .int(index))
        }
        #expect(bus.subscriberCount == 1, "the slow subscriber is gone from the bus")
        var received: [DaemonEvent] = []
        for await event in slow { received.append(event) }
        #expect(received.count == 5)
        #expect(received.prefix(4).map(\.fields["signCount"]) == [0, 1, 2, 3].map { EventValue.int($0) })
        #expect(received.last?.name == .lost)
        fast.cancel()
        #expect(bus.subscriberCount == 0)
    }

    @Test("a waiting subscriber wakes for the next event, and ends when the bus closes")
    func waiting() async {
        let bus = EventBus()
        let subscription = bus.subscribe()
        let reader = Task { () -> [String] in
            var names: [String] = []
            for await event in subscription { names.append(event.name.rawValue) }
            return names
        }
        while bus.subscriberCount == 0 { await Task.yield() }
        try? await Task.sleep(for: .milliseconds(20))
        bus.publish(.keyReplugged, key: "a")
        try? await Task.sleep(for: .milliseconds(20))
        bus.close()
        #expect(await reader.value == ["key.replugged"])
    }

    @Test("cancelling the reading task unsubscribes")
    func cancellation() async {
        let bus = EventBus()
        let subscription = bus.subscribe()
        let reader = Task { for await _ in subscription {} }
        try? await Task.sleep(for: .milliseconds(20))
        reader.cancel()
        await reader.value
        #expect(bus.subscriberCount == 0)
    }

    @Test("an event is one server-sent event: name, id, and flat JSON data")
    func serverSentEvent() throws {
        let event = DaemonEvent(
            name: .credentialCreated,
            key: "ci-1",
            time: EventBus.timestamp(Self.fixedTime()),
            sequence: 7,
            fields: ["rpId": "example.com", "discoverable": true, "signCount": 3, "event": "ignored"]
        )
        let text = event.serverSentEvent
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 5)
        #expect(lines[0] == "event: credential.created")
        #expect(lines[1] == "id: 7")
        #expect(text.hasSuffix("\n\n"))
        let json = try #require(lines[2].split(separator: "data: ", maxSplits: 1).first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["event"] as? String == "credential.created", "a field cannot replace the envelope")
        #expect(object["key"] as? String == "ci-1")
        #expect(object["seq"] as? Int == 7)
        #expect(object["rpId"] as? String == "example.com")
        #expect(object["discoverable"] as? Bool == true)
        #expect(object["signCount"] as? Int == 3)
        #expect(object["time"] as? String == "2027-01-15T08:00:00.250Z")
    }
}
