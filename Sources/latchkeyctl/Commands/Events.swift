// `latchkeyctl events [--key K]`: follows GET /v1/events (server-sent
// events) and prints one line per event until the daemon ends the stream,
// the connection drops, or --count events were printed. The response is
// read with its own small loop: the request client waits for a whole
// response, and this one never ends by itself.

import ArgumentParser
import Foundation
import Glibc
import LatchkeyNames
import LatchkeySystem

struct Events: ParsableCommand {
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

    func run() throws {
        let path = "/v1/events" + (key.map { "?key=\(ControlPath.segment($0.rawValue))" } ?? "")
        var printed = 0
        try EventStreamReader(client: global.client()).follow(path) { name, data in
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
    /// until it returns false or the stream ends.
    func follow(_ path: String, handle: (String, String) -> Bool) throws(CtlError) {
        let socketPath = client.socket.path
        let address: sockaddr_un
        do throws(TransportError) {
            address = try UnixSocketHTTPClient.address(socketPath)
        } catch {
            throw CtlError(.usage, "invalid socket path \(socketPath): \(error)")
        }
        let descriptor: Int32
        do throws(SystemCallError) {
            descriptor = try Posix.socketUnixStream()
        } catch {
            throw CtlError(.unavailable, "cannot open a socket: \(error)")
        }
        defer { Posix.close(descriptor) }
        do throws(SystemCallError) {
            try Posix.connect(descriptor, to: address)
        } catch {
            throw CtlError(.unavailable, "cannot connect to latchkeyd at \(socketPath): \(error)")
        }
        var request = HTTPRequest(method: "GET", path: path)
        request.headers.append(("Accept", "text/event-stream"))
        do throws(SystemCallError) {
            try Posix.sendAll(descriptor, request.serialized())
        } catch {
            throw CtlError(.unavailable, "talking to latchkeyd at \(socketPath): \(error)")
        }

        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var head: (status: Int, chunked: Bool)?
        var body = ChunkedBody()
        var parser = ServerSentEventParser()
        while true {
            let count: Int
            do throws(SystemCallError) {
                count = try Posix.read(descriptor, into: &chunk)
            } catch {
                throw CtlError(.unavailable, "reading events from latchkeyd: \(error)")
            }
            if count == 0 { return }
            buffer += chunk[0..<count]
            if head == nil {
                guard let end = Self.headEnd(buffer) else { continue }
                let text = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                let lines = text.components(separatedBy: "\r\n")
                let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
                let chunked = lines.contains {
                    $0.lowercased().hasPrefix("transfer-encoding:") && $0.lowercased().contains("chunked")
                }
                guard status == 200 else {
                    let message = String(decoding: buffer.prefix(300), as: UTF8.self)
                    throw CtlError(
                        status == 404 ? .notFound : .refused,
                        "latchkeyd refused GET \(path): HTTP \(status) \(Sanitize.inline(message))"
                    )
                }
                head = (status, chunked)
            }
            let data: [UInt8]
            if head!.chunked {
                data = body.feed(buffer)
            } else {
                data = buffer
            }
            buffer.removeAll()
            for event in parser.feed(data) where !handle(event.name, event.data) { return }
            if body.finished { return }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}

/// HTTP/1.1 chunked transfer coding, decoded incrementally.
struct ChunkedBody {
    private var pending: [UInt8] = []
    private var remaining = 0
    private(set) var finished = false

    /// Feeds received bytes; returns the body bytes they complete.
    mutating func feed(_ bytes: [UInt8]) -> [UInt8] {
        pending += bytes
        var out: [UInt8] = []
        while !finished {
            if remaining > 0 {
                let take = min(remaining, pending.count)
                guard take > 0 else { break }
                out += pending[..<take]
                pending.removeFirst(take)
                remaining -= take
                continue
            }
            // A size line, or the CRLF that ends a chunk's data.
            guard let lineEnd = lineEnd(pending) else { break }
            let line = String(decoding: pending[..<lineEnd], as: UTF8.self)
            pending.removeFirst(lineEnd + 2)
            if line.isEmpty { continue }
            guard let size = Int(line.split(separator: ";").first ?? "", radix: 16) else {
                finished = true
                break
            }
            if size == 0 { finished = true } else { remaining = size }
        }
        return out
    }

    private func lineEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for index in 0..<(bytes.count - 1) where bytes[index] == 13 && bytes[index + 1] == 10 { return index }
        return nil
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
