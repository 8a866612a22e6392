// `latchkeyctl watch`: an interactive consent prompt in a terminal. It
// polls the daemon's pending requests, shows each new one (operation, rp,
// user, key) and answers it with the person's y or n; a request answered
// elsewhere, timed out or withdrawn by the host (CTAPHID_CANCEL) is said to
// be gone and the prompt moves on. Ctrl-D or Ctrl-C ends it, exit status 0.

import ArgumentParser
import Foundation
import Glibc
import LatchkeyContract

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer presence requests interactively, one y/n prompt each.",
        discussion: """
            Shows each request a key in prompt mode is waiting on as it arrives, and \
            approves (y) or denies (n) it. Needs a terminal; scripts use \
            `latchkeyctl approve|deny --wait`. Ends at end of input (Ctrl-D) or Ctrl-C.

            Examples:
              latchkeyctl watch
              latchkeyctl watch --key default
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .shortAndLong, help: ArgumentHelp("Only requests for this key.", valueName: "name"), transform: KeyName.argument)
    var key: KeyName?

    @Option(help: ArgumentHelp("How often to ask the daemon for new requests.", valueName: "seconds"))
    var interval: Double = 0.2

    func validate() throws {
        guard interval.isFinite, interval >= 0.05, interval <= 10 else {
            throw ValidationError("--interval must be between 0.05 and 10 seconds.")
        }
    }

    func run() throws {
        guard Terminal.isInteractive else {
            throw CtlError(
                .usage,
                "latchkeyctl watch needs a terminal on standard input; "
                    + "scripts answer with `latchkeyctl approve|deny [ID] --wait SECONDS`"
            )
        }
        let client = global.client()
        WatchSignals.install()
        defer { WatchSignals.remove() }
        say(
            "Watching for presence requests\(key.map { " for key \($0.quoted)" } ?? ""). Answer y or n; Ctrl-D or Ctrl-C ends."
        )

        var current: PendingRequest?
        var finished = Set<String>()
        while !WatchSignals.stopped {
            let pending = try client.get(ControlPath.pending).decode([PendingRequest].self)
                .filter { key == nil || $0.key == key?.rawValue }
            if let shown = current, !pending.contains(where: { $0.id == shown.id }) {
                say("\n\(shown.id) is gone: answered elsewhere, timed out or withdrawn by the host.")
                finished.insert(shown.id)
                current = nil
            }
            if current == nil, let next = pending.first(where: { !finished.contains($0.id) }) {
                current = next
                prompt(next)
            }
            switch waitForLine() {
            case .stopped:
                break
            case .idle:
                continue
            case .endOfInput:
                say("")
                return
            case .line(let text):
                guard let request = current else { continue }
                let reply = text.trimmingCharacters(in: .whitespaces).lowercased()
                guard ["y", "yes", "n", "no"].contains(reply) else {
                    write("Answer y or n: ")
                    continue
                }
                let approve = reply.hasPrefix("y")
                finished.insert(request.id)
                current = nil
                say(try answer(request, approve: approve, client: client))
            }
        }
        say("")
    }

    /// Sends the answer; what to tell the person.
    private func answer(_ request: PendingRequest, approve: Bool, client: ControlClient) throws(CtlError) -> String {
        let response: ControlResponse
        do {
            response = try client.post(ControlPath.decide(pending: request.id, approve: approve))
        } catch {
            guard error.code == .notFound else { throw error }
            return "\(request.id) is gone: answered elsewhere, timed out or withdrawn by the host."
        }
        let decision = try response.decode(PresenceDecision.self)
        return Sanitize.inline("\(decision.id) \(decision.outcome).")
    }

    private func prompt(_ request: PendingRequest) {
        var lines = ["", Sanitize.inline("\(request.id) on key \(request.key.quoted): \(request.operation)")]
        if let rp = request.rpId { lines.append(Sanitize.inline("  rp:   \(rp)")) }
        if let user = request.userName { lines.append(Sanitize.inline("  user: \(user)")) }
        if request.userVerification == true { lines.append("  asks for user verification") }
        lines.append("  expires in \(Format.span(milliseconds: request.expiresInMs))")
        say(lines.joined(separator: "\n"))
        write("Allow? [y/n] ")
    }

    enum Input {
        case line(String)
        case idle
        case endOfInput
        case stopped
    }

    /// Waits up to `interval` for a line on standard input.
    private func waitForLine() -> Input {
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(interval * 1000))
        if WatchSignals.stopped { return .stopped }
        if ready < 0 { return errno == EINTR ? .idle : .endOfInput }
        if ready == 0 { return .idle }
        guard let line = Terminal.readLine(descriptor: STDIN_FILENO) else { return .endOfInput }
        return .line(line)
    }

    private func say(_ text: String) {
        write(text + "\n")
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    }
}

/// Ctrl-C (SIGINT) and SIGTERM end `watch` cleanly: the handler only sets
/// a flag, which the loop checks after each poll (which the signal interrupts).
private enum WatchSignals {
    nonisolated(unsafe) static var flag: sig_atomic_t = 0
    static let signals = [SIGINT, SIGTERM, SIGHUP]

    static var stopped: Bool { flag != 0 }

    static func install() {
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in WatchSignals.flag = 1 }
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0  // no SA_RESTART: a blocked read returns EINTR
            sigaction(signal, &action, nil)
        }
    }

    static func remove() {
        for signal in signals { _ = Glibc.signal(signal, SIG_DFL) }
    }
}
