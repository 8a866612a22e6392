// Presence decisions of the daemon: modes, prompts answered through the
// board, time-outs and cancellation, the requester a transport bound, the
// events of a prompt, and the cooldown after a Deny.

import CTAP
import Foundation
import LatchkeyNotifications
import Logging
import Testing

@testable import LatchkeyCore

@Suite("presence")
struct PresenceTests {
    let logger = Logger(label: "test")

    /// A broker for key "k" that prompts on its board, and a makeCredential waiting there.
    func pendingPrompt() async throws -> (PresenceBoard, PresenceBroker, Task<PresenceOutcome, Never>) {
        let board = PresenceBoard()
        let broker = PresenceBroker(key: "k", mode: .prompt, timeoutSeconds: 30, board: board, logger: logger)
        let waiting = Task { await broker.requestPresence(PresenceRequest(operation: .makeCredential)) }
        while board.pending().isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        return (board, broker, waiting)
    }

    @Test("auto approves and deny refuses at once")
    func fixedModes() async {
        let board = PresenceBoard()
        let auto = PresenceBroker(key: "a", mode: .auto, timeoutSeconds: 30, board: board, logger: logger)
        let deny = PresenceBroker(key: "d", mode: .deny, timeoutSeconds: 30, board: board, logger: logger)
        #expect(await auto.requestPresence(PresenceRequest(operation: .makeCredential)) == .approved)
        #expect(await deny.requestPresence(PresenceRequest(operation: .makeCredential)) == .denied)
        #expect(board.pending().isEmpty)
    }

    @Test("a prompt waits, is listed with its rp and user, and takes the answer given")
    func prompt() async throws {
        let board = PresenceBoard()
        let broker = PresenceBroker(key: "k", mode: .prompt, timeoutSeconds: 30, board: board, logger: logger)
        for outcome in [PresenceOutcome.approved, .denied] {
            let waiting = Task {
                await broker.requestPresence(PresenceRequest(operation: .getAssertion, rpId: "example.com", userName: "alice"))
            }
            var pending: [PendingPresence] = []
            while pending.isEmpty {
                try await Task.sleep(for: .milliseconds(5))
                pending = board.pending()
            }
            #expect(pending.count == 1)
            #expect(pending[0].key == "k")
            #expect(pending[0].operation == "getAssertion")
            #expect(pending[0].rpId == "example.com")
            #expect(pending[0].userName == "alice")
            #expect(pending[0].expiresInMs > 25_000)
            #expect(board.answer(pending[0].id, outcome))
            #expect(await waiting.value == outcome)
            #expect(!board.answer(pending[0].id, outcome), "an answered request is gone")
        }
    }

    @Test("an unanswered prompt times out")
    func timeout() async {
        let board = PresenceBoard()
        let broker = PresenceBroker(key: "k", mode: .prompt, timeoutSeconds: 1, board: board, logger: logger)
        #expect(await broker.requestPresence(PresenceRequest(operation: .makeCredential)) == .timedOut)
        #expect(board.pending().isEmpty)
    }

    @Test("cancelling the waiting task (CTAPHID_CANCEL) ends the prompt")
    func cancel() async throws {
        let (board, _, waiting) = try await pendingPrompt()
        waiting.cancel()
        #expect(await waiting.value == .cancelled)
        #expect(board.pending().isEmpty)
    }

    @Test("switching a key to auto approves what it was waiting for")
    func modeChange() async throws {
        let (_, broker, waiting) = try await pendingPrompt()
        broker.update(mode: .auto, timeoutSeconds: nil)
        #expect(await waiting.value == .approved)
        #expect(await broker.requestPresence(PresenceRequest(operation: .makeCredential)) == .approved)
    }

    /// The first event called `name` on `subscription`.
    func next(_ name: EventName, on subscription: EventSubscription) async -> DaemonEvent? {
        for await event in subscription where event.name == name { return event }
        return nil
    }

    @Test("a prompt names the transport and the requester the transport bound, in the list and its events")
    func requester() async throws {
        let board = PresenceBoard()
        let bus = EventBus()
        let broker = PresenceBroker(
            key: "k", mode: .prompt, timeoutSeconds: 30, board: board, logger: logger, eventBus: bus
        )
        let subscription = bus.subscribe(key: "k")
        let asking = Requester(
            transport: .usbip, caller: Caller(uid: 0, gid: 0, pid: 4242), executable: "/usr/bin/python3",
            address: "127.0.0.1:45678"
        )
        let request = PresenceRequest(
            operation: .makeCredential, rpId: "example.com", userName: "alice", userDisplayName: "Alice A."
        )
        let waiting = Task { await Requester.$current.withValue(asking) { await broker.requestPresence(request) } }
        let requested = try #require(await next(.presenceRequested, on: subscription))
        #expect(requested.fields["transport"] == "usbip" && requested.fields["requesterUid"] == 0)
        let pendingEvent = try #require(await next(.presencePending, on: subscription))
        #expect(board.pending().count == 1)
        let pending = try #require(board.pending().first)
        #expect(pending.transport == "usbip")
        #expect(pending.requesterUid == 0 && pending.requesterUser == "root" && pending.requesterPid == 4242)
        #expect(pending.requesterExecutable == "/usr/bin/python3" && pending.requesterAddress == "127.0.0.1:45678")
        #expect(pending.userDisplayName == "Alice A.")
        #expect(pending.notification == .agent, "a board without a notifier leaves prompts to an agent")
        #expect(pendingEvent.fields["request"] == .string(pending.id))
        #expect(pendingEvent.fields["requesterExecutable"] == "/usr/bin/python3")
        #expect(pendingEvent.fields["notification"] == "agent" && pendingEvent.fields["expiresInMs"] == 30_000)
        board.answer(pending.id, .approved)
        #expect(await waiting.value == .approved)
        let answered = try #require(await next(.presenceAnswered, on: subscription))
        #expect(answered.fields["request"] == .string(pending.id) && answered.fields["outcome"] == "approved")

        // The pending list is flat JSON: the prompt's facts and its times, one object.
        let entry = PendingPresence(prompt: pending.prompt, notification: .agent, ageMs: 5, expiresInMs: 10)
        let object = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(entry)) as? [String: Any]
        )
        #expect(object["id"] as? String == pending.id && object["requesterUser"] as? String == "root")
        #expect(object["notification"] as? String == "agent" && object["expiresInMs"] as? Int == 10)
        #expect(try JSONDecoder().decode(PendingPresence.self, from: JSONEncoder().encode(entry)) == entry)
    }

    @Test("without a bound requester the prompt names no transport")
    func noRequester() async throws {
        let (board, _, waiting) = try await pendingPrompt()
        let pending = try #require(board.pending().first)
        #expect(pending.transport == nil && pending.requesterUid == nil)
        board.answer(pending.id, .approved)
        _ = await waiting.value
    }

    @Test("after a Deny the key refuses without a prompt until the cooldown ends, and records why")
    func cooldown() async throws {
        let board = PresenceBoard()
        let clock = ManualClock(start: 1_000)
        var settings = PolicySettings()
        settings.denyCooldownSeconds = 10
        let broker = PresenceBroker(
            key: "k", mode: .prompt, timeoutSeconds: 30, board: board, logger: logger, policy: settings, clock: clock
        )
        let waiting = Task { await broker.requestPresence(PresenceRequest(operation: .makeCredential)) }
        while board.pending().isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        board.answer(board.pending()[0].id, .denied)
        #expect(await waiting.value == .denied)
        clock.advance(by: 9_999)
        #expect(await broker.requestPresence(PresenceRequest(operation: .getAssertion)) == .denied)
        #expect(board.pending().isEmpty)
        let record = try #require(broker.decisions.latest(1).first)
        #expect(record.path == .cooldown && record.outcome == .denied)
        clock.advance(by: 1)
        let next = Task { await broker.requestPresence(PresenceRequest(operation: .getAssertion)) }
        while board.pending().isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        board.answer(board.pending()[0].id, .approved)
        #expect(await next.value == .approved)
    }
}
