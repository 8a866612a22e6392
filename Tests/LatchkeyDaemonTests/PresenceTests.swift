// Presence decisions of the daemon: modes, prompts answered through the
// board, time-outs and cancellation.

import CTAP
import Logging
import Testing

@testable import LatchkeyDaemon

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
}
