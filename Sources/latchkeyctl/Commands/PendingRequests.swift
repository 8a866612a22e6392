// `latchkeyctl pending`, `approve` and `deny`: the presence requests a key in
// `prompt` mode is waiting on, and the answers to them.

import ArgumentParser
import Foundation
import LatchkeyContract

/// Options shared by `pending`, `approve` and `deny`.
struct PendingOptions: ParsableArguments {
    @Option(
        name: .shortAndLong,
        help: ArgumentHelp("Only consider requests for this key.", valueName: "name"),
        transform: KeyName.argument
    )
    var key: KeyName?

    @Option(
        help: ArgumentHelp(
            "Poll until a request is pending, for at most this long; exit 4 if none comes.",
            valueName: "seconds"
        )
    )
    var wait: Double?

    func validate() throws {
        if let wait, !(wait.isFinite && wait >= 0 && wait <= 86400) {
            throw ValidationError("--wait must be between 0 and 86400 seconds.")
        }
    }

    /// How often `--wait` asks the daemon.
    static let pollInterval = 0.1

    /// Fetches the pending requests (for `key`, if given). With `--wait`,
    /// polls until `isDone` holds; without, returns the first answer.
    ///
    /// - Returns: the requests and the last response (for `--json`).
    func fetch(
        _ client: ControlClient,
        until isDone: ([PendingRequest]) -> Bool
    ) throws(CtlError) -> (requests: [PendingRequest], response: ControlResponse, satisfied: Bool) {
        let deadline = Date(timeIntervalSinceNow: wait ?? 0)
        while true {
            let response = try client.get(ControlPath.pending)
            let requests = try response.decode([PendingRequest].self).filter { key == nil || $0.key == key?.rawValue }
            if isDone(requests) { return (requests, response, true) }
            guard wait != nil, Date() < deadline else { return (requests, response, false) }
            Thread.sleep(forTimeInterval: min(Self.pollInterval, max(0, deadline.timeIntervalSinceNow)))
        }
    }

    /// "pending for key "ci-1"" or "pending".
    var scope: String { key.map { "pending for key \($0.quoted)" } ?? "pending" }

    /// " after waiting 2 s", or "" without `--wait`.
    var waited: String { wait.map { " after waiting \(Format.seconds($0))" } ?? "" }
}

struct Pending: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the presence requests waiting for an answer.",
        discussion: """
            A key in `prompt` mode holds each operation that needs user presence \
            (makeCredential, getAssertion, reset, ...) until `latchkeyctl approve` \
            or `deny` answers it or it times out. With --wait, exits 4 when none \
            is pending in time.

            Examples:
              latchkeyctl pending
              latchkeyctl pending --key ci-1 --wait 10 --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var options: PendingOptions

    func run() throws {
        let client = global.client()
        let (requests, response, _) = try options.fetch(client) { !$0.isEmpty }
        if options.wait != nil && requests.isEmpty {
            throw CtlError(.notFound, "no presence request \(options.scope)\(options.waited)")
        }
        if global.json {
            if let key = options.key {
                // Only the requests for --key; re-encoded, so keys come sorted.
                print(try Self.filteredJSON(response, key: key.rawValue))
            } else {
                print(try JSONOutput.pretty(response.body, request: response.request))
            }
            return
        }
        guard !requests.isEmpty else {
            print("No presence requests \(options.scope).")
            return
        }
        var table = Table("ID", "KEY", "OPERATION", "RP", "USER", "AGE", "EXPIRES IN")
        for request in requests {
            table.append(
                request.id,
                request.key,
                request.operation,
                Format.optional(request.rpId),
                Format.optional(request.userName),
                Format.span(milliseconds: request.ageMs),
                Format.span(milliseconds: request.expiresInMs)
            )
        }
        print(table.render())
    }

    /// The pending list keeping only `key`'s requests.
    private static func filteredJSON(_ response: ControlResponse, key: String) throws(CtlError) -> String {
        guard let all = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [Any] else {
            throw CtlError(.internalError, "malformed response from latchkeyd to \(response.request): not a JSON array")
        }
        let kept = all.filter { (($0 as? [String: Any])?["key"] as? String) == key }
        guard let data = try? JSONSerialization.data(withJSONObject: kept, options: [.sortedKeys]) else {
            throw CtlError(.internalError, "cannot re-encode the pending requests")
        }
        return JSONOutput.reindent(Array(data))
    }
}

/// What `approve` and `deny` share.
struct DecisionOptions: ParsableArguments {
    @Argument(help: "The pending request's ID (default: the only pending request, or the oldest with --oldest).")
    var id: String?

    @Flag(help: "When several requests are pending, answer the oldest.")
    var oldest = false

    func validate() throws {
        if id != nil && oldest { throw ValidationError("Give an ID or --oldest, not both.") }
    }

    /// The help text of `approve` and `deny`: how the request is chosen (`verb`
    /// is "approves" or "denies"), then `examples`.
    static func discussion(_ verb: String, examples: String) -> String {
        """
        Without an ID, \(verb) the only pending request; when several are \
        pending, give the ID or --oldest. Exits 4 when nothing is pending (or \
        the ID is not), after --wait if given.

        Examples:
        \(examples)
        """
    }

    /// Answers one pending request and prints the outcome.
    func decide(approve: Bool, global: GlobalOptions, pending: PendingOptions) throws(CtlError) {
        let client = global.client()
        let verb = approve ? "approve" : "deny"
        var chosen: PendingRequest?

        if let id {
            if pending.wait != nil || pending.key != nil {
                let (requests, _, found) = try pending.fetch(client) { $0.contains { $0.id == id } }
                guard found else {
                    throw CtlError(.notFound, "no presence request \(id.quoted) \(pending.scope)\(pending.waited)")
                }
                chosen = requests.first { $0.id == id }
            }
        } else {
            let (requests, _, _) = try pending.fetch(client) { !$0.isEmpty }
            switch requests.count {
            case 0:
                let hint = pending.wait == nil ? " (use --wait SECONDS to wait for one)" : ""
                throw CtlError(.notFound, "no presence request \(pending.scope)\(pending.waited)\(hint)")
            case 1:
                chosen = requests[0]
            default:
                guard oldest else {
                    let ids = requests.map(\.id).joined(separator: ", ")
                    throw CtlError(
                        .usage,
                        "\(requests.count) presence requests are \(pending.scope) (\(ids)); "
                            + "give the ID to \(verb), or --oldest"
                    )
                }
                // The largest age; the daemon's order breaks ties.
                chosen =
                    requests.enumerated().max { lhs, rhs in
                        lhs.element.ageMs != rhs.element.ageMs
                            ? lhs.element.ageMs < rhs.element.ageMs : lhs.offset > rhs.offset
                    }!.element
            }
        }

        let target = id ?? chosen!.id
        let response = try client.post(ControlPath.decide(pending: target, approve: approve))
        try global.show(response, as: PresenceDecision.self) { decision in
            var line = "\(decision.id): \(decision.outcome)"
            if let chosen { line += " (\(Self.describe(chosen)))" }
            return Sanitize.inline(line)
        }
    }

    /// "makeCredential for alice at example.com on key "default"".
    static func describe(_ request: PendingRequest) -> String {
        var text = request.operation
        if let user = request.userName { text += " for \(user)" }
        if let rp = request.rpId { text += " at \(rp)" }
        return text + " on key \(request.key.quoted)"
    }
}

struct Approve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Approve a pending presence request (as if the key were touched).",
        discussion: DecisionOptions.discussion(
            "approves",
            examples: """
                  latchkeyctl approve
                  latchkeyctl approve p-7
                  latchkeyctl approve --oldest --key ci-1
                  latchkeyctl approve --wait 10        # in a CI rig, before the browser asks
                """
        )
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var decision: DecisionOptions
    @OptionGroup var pending: PendingOptions

    func run() throws {
        try decision.decide(approve: true, global: global, pending: pending)
    }
}

struct Deny: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deny a pending presence request.",
        discussion: DecisionOptions.discussion(
            "denies",
            examples: """
                  latchkeyctl deny
                  latchkeyctl deny p-7
                  latchkeyctl deny --wait 10 --key ci-1
                """
        )
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var decision: DecisionOptions
    @OptionGroup var pending: PendingOptions

    func run() throws {
        try decision.decide(approve: false, global: global, pending: pending)
    }
}
