// `latchkeyctl events [--key K]`: follows GET /v1/events (server-sent
// events) and prints one line per event until the daemon ends the stream,
// the connection drops, or --count events were printed. The response is
// read as it arrives (`ControlTransport.stream`): a request waits for a
// whole response, and this one never ends by itself.

import ArgumentParser
import Foundation
import Glibc
import LatchkeyContract

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the daemon's events as they happen (GET /v1/events).",
        discussion: """
            One line per event: its time, its name, the key, then its fields. With \
            --json, each event's JSON object on a line of its own (JSON Lines). A \
            `lost` event means latchkeyctl read too slowly and the daemon dropped it.

            Examples:
              latchkeyctl events
              latchkeyctl events --key ci-1 --json
              latchkeyctl events --key ci-1 --count 1    # wait for the next event
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .shortAndLong, help: ArgumentHelp("Only this key's events.", valueName: "name"), transform: KeyName.argument)
    var key: KeyName?

    @Option(help: ArgumentHelp("Stop after this many events.", valueName: "n"))
    var count: Int?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1.") }
    }

    func run() async throws {
        let path = "/v1/events" + (key.map { "?key=\(ControlPath.segment($0.rawValue))" } ?? "")
        var printed = 0
        try await EventStreamReader(client: global.client()).follow(path) { name, data in
            if global.json {
                print(data)
            } else {
                print(Self.line(name: name, data: data))
            }
            fflush(nil)
            printed += 1
            return count.map { printed < $0 } ?? true
        }
    }

    /// `time  name  key  field=value …` from an event's JSON.
    static func line(name: String, data: String) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any] else {
            return "\(name) \(Sanitize.inline(data))"
        }
        let envelope: Set<String> = ["event", "key", "time", "seq"]
        let fields = object.keys.filter { !envelope.contains($0) }.sorted().map { field in
            "\(field)=\(Sanitize.inline(String(describing: object[field]!)))"
        }
        let time = object["time"] as? String ?? "-"
        let key = object["key"] as? String ?? "-"
        return ([time, name, Sanitize.inline(key)] + fields).joined(separator: "  ")
    }
}

/// Reads a server-sent events response over the control socket.
struct EventStreamReader {
    var client: ControlClient

    /// Sends GET `path` and calls `handle` with each event's name and data
    /// until it returns false or the stream ends (the daemon closing it,
    /// even inside a chunk, ends it too). `opened` runs once the daemon
    /// accepted the stream: from then on no event is missed.
    func follow(
        _ path: String,
        opened: () -> Void = {},
        handle: (String, String) -> Bool
    ) async throws(CtlError) {
        let socketPath = client.socket.path
        var parser = ServerSentEventParser()
        var reading = false
        do {
            try await ControlTransport(socketPath: socketPath).stream(path, headers: [("Accept", "text/event-stream")]) {
                status, body in
                guard status == 200 else {
                    var message: [UInt8] = []
                    for try await piece in body where message.count < 300 { message += piece }
                    throw CtlError(
                        status == 404 ? .notFound : .refused,
                        "latchkeyd refused GET \(path): HTTP \(status) "
                            + Sanitize.inline(String(decoding: message.prefix(300), as: UTF8.self))
                    )
                }
                reading = true
                opened()
                for try await piece in body {
                    for event in parser.feed(piece) where !handle(event.name, event.data) { return }
                }
            }
        } catch let error as CtlError {
            throw error
        } catch {
            let failure = TransportError(error)
            switch failure {
            case .invalidSocketPath:
                throw CtlError(.usage, "invalid socket path \(socketPath): \(failure)")
            case .connectFailed(let error):
                throw CtlError(.unavailable, "cannot connect to latchkeyd at \(socketPath): \(error)")
            case .closedWithoutAnswer:
                return
            case .malformed where reading:
                return  // the daemon closed it inside a chunk
            case .malformed(let reason):
                throw CtlError(.internalError, "malformed HTTP response from latchkeyd to GET \(path): \(reason)")
            case .reset(let error), .system(let error):
                throw CtlError(.unavailable, "reading events from latchkeyd: \(error)")
            case .timedOut:
                throw CtlError(.unavailable, "latchkeyd at \(socketPath) did not answer GET \(path)")
            }
        }
    }
}

/// The text/event-stream format (HTML Living Standard §9.2.6), as much of it
/// as latchkeyd sends: `event:` and `data:` fields, comments, blank lines.
struct ServerSentEventParser {
    private var partial: [UInt8] = []
    private var name = "message"
    private var data: [String] = []

    mutating func feed(_ bytes: [UInt8]) -> [(name: String, data: String)] {
        partial += bytes
        var events: [(name: String, data: String)] = []
        while let newline = partial.firstIndex(of: 10) {
            var line = String(decoding: partial[..<newline], as: UTF8.self)
            partial.removeFirst(newline + 1)
            if line.hasSuffix("\r") { line.removeLast() }
            if line.isEmpty {
                if !data.isEmpty { events.append((name, data.joined(separator: "\n"))) }
                name = "message"
                data = []
            } else if line.hasPrefix(":") {
                continue
            } else if line.hasPrefix("event:") {
                name = line.dropFirst(6).trimmingCharacters(in: .whitespaces)
            } else if line.hasPrefix("data:") {
                var value = line.dropFirst(5)
                if value.hasPrefix(" ") { value = value.dropFirst() }
                data.append(String(value))
            }
        }
        return events
    }
}
