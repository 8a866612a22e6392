// An HTTP/1.1 response parser for one response on a `Connection: close`
// connection: the status line and headers, then a body delimited by
// Content-Length, by chunked transfer coding, or by the end of the stream
// (RFC 9112 section 6.3). Bytes in, a response out; it does no I/O, so the
// socket code and tests feed it however they like.

/// One parsed HTTP response.
struct HTTPResponse: Equatable {
    var status: Int
    var reason: String
    /// Header fields in order, names as sent.
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    /// The value of the last header named `name` (case-insensitively).
    func header(_ name: String) -> String? {
        headers.last { $0.name.lowercased() == name.lowercased() }?.value
    }

    static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.reason == rhs.reason && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

/// Why a byte stream is not an HTTP response we accept.
struct HTTPParseError: Error, Equatable, CustomStringConvertible {
    var reason: String
    init(_ reason: String) { self.reason = reason }
    var description: String { reason }
}

/// Parses one HTTP/1.1 response fed in pieces.
///
/// Call `feed(_:)` with each read and `finish()` at end of stream; `response`
/// is set once a whole message has arrived. Interim 1xx responses are skipped.
struct HTTPResponseParser {
    /// The most a head (status line and headers) may take.
    static let maximumHeadSize = 64 * 1024
    /// The most a body may take; the control API's answers are far smaller.
    static let maximumBodySize = 64 * 1024 * 1024
    /// The most a chunk-size or trailer line may take.
    static let maximumLineSize = 4096

    private enum State {
        case head
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case bodyUntilEnd
        case done
    }

    private var state = State.head
    private var buffer: [UInt8] = []
    private var position = 0
    private var status = 0
    private var reason = ""
    private var headers: [(name: String, value: String)] = []
    private var body: [UInt8] = []

    /// The response, once complete.
    private(set) var response: HTTPResponse?

    /// Whether the request was HEAD (no body follows whatever the headers say).
    private let requestHadNoBody: Bool

    init(requestMethod: String = "GET") {
        requestHadNoBody = requestMethod == "HEAD"
    }

    /// Consumes `bytes`. Bytes after a complete response are ignored.
    mutating func feed(_ bytes: some Collection<UInt8>) throws(HTTPParseError) {
        if case .done = state { return }
        buffer.append(contentsOf: bytes)
        try advance()
        // Drop what has been consumed so the buffer holds only the unparsed tail.
        if position > 0 {
            buffer.removeFirst(position)
            position = 0
        }
    }

    /// Signals the end of the stream and returns the complete response.
    mutating func finish() throws(HTTPParseError) -> HTTPResponse {
        switch state {
        case .done:
            break
        case .bodyUntilEnd:
            complete()
        case .head:
            throw HTTPParseError(
                buffer.isEmpty ? "connection closed before a response" : "connection closed inside the response head"
            )
        case .fixedBody(let remaining):
            throw HTTPParseError("connection closed with \(remaining) bytes of the body missing")
        case .chunkSize, .chunkData, .chunkDataEnd, .trailers:
            throw HTTPParseError("connection closed inside a chunked body")
        }
        return response!
    }

    /// Whether nothing at all has arrived yet.
    var isEmpty: Bool {
        if case .head = state { return buffer.isEmpty && status == 0 }
        return false
    }

    // MARK: - States

    private mutating func advance() throws(HTTPParseError) {
        while true {
            switch state {
            case .head:
                guard let end = find([13, 10, 13, 10]) else {
                    if buffer.count - position > Self.maximumHeadSize {
                        throw HTTPParseError("response head too large")
                    }
                    return
                }
                let head = Array(buffer[position..<end])
                position = end + 4
                try parseHead(head)

            case .fixedBody(let remaining):
                let take = min(remaining, buffer.count - position)
                body.append(contentsOf: buffer[position..<position + take])
                position += take
                if take == remaining {
                    complete()
                } else {
                    state = .fixedBody(remaining: remaining - take)
                    return
                }

            case .chunkSize:
                guard let line = try takeLine() else { return }
                let size = try parseChunkSize(line)
                if size == 0 {
                    state = .trailers
                } else {
                    guard body.count + size <= Self.maximumBodySize else {
                        throw HTTPParseError("response body too large")
                    }
                    state = .chunkData(remaining: size)
                }

            case .chunkData(let remaining):
                let take = min(remaining, buffer.count - position)
                body.append(contentsOf: buffer[position..<position + take])
                position += take
                if take == remaining {
                    state = .chunkDataEnd
                } else {
                    state = .chunkData(remaining: remaining - take)
                    return
                }

            case .chunkDataEnd:
                guard let line = try takeLine() else { return }
                guard line.isEmpty else { throw HTTPParseError("chunk data longer than its size") }
                state = .chunkSize

            case .trailers:
                // Trailer fields are read and ignored; an empty line ends them.
                guard let line = try takeLine() else { return }
                if line.isEmpty { complete() }

            case .bodyUntilEnd:
                body.append(contentsOf: buffer[position...])
                position = buffer.count
                guard body.count <= Self.maximumBodySize else { throw HTTPParseError("response body too large") }
                return

            case .done:
                return
            }
        }
    }

    private mutating func complete() {
        response = HTTPResponse(status: status, reason: reason, headers: headers, body: body)
        state = .done
    }

    private mutating func parseHead(_ head: [UInt8]) throws(HTTPParseError) {
        var lines = split(head)
        guard !lines.isEmpty else { throw HTTPParseError("empty response head") }
        let statusLine = lines.removeFirst()

        // HTTP-version SP 3DIGIT SP [reason-phrase]
        let prefix = Array("HTTP/1.".utf8)
        guard statusLine.count >= 12, Array(statusLine.prefix(prefix.count)) == prefix,
            statusLine[8] == 32, statusLine[9...11].allSatisfy({ (48...57).contains($0) }),
            statusLine.count == 12 || statusLine[12] == 32
        else {
            throw HTTPParseError("not an HTTP/1.x status line: \(printable(statusLine))")
        }
        let code = statusLine[9...11].reduce(0) { $0 * 10 + Int($1 - 48) }
        let reasonPhrase = statusLine.count > 13 ? String(decoding: statusLine[13...], as: UTF8.self) : ""

        var fields: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: 58), colon > 0 else {
                throw HTTPParseError("malformed header line: \(printable(line))")
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            guard !name.contains(where: { $0 == " " || $0 == "\t" }) else {
                throw HTTPParseError("malformed header name: \(name)")
            }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
                .trimmingOWS()
            fields.append((name, value))
        }

        // An interim response (100 Continue, 103 Early Hints) precedes the real one.
        if (100...199).contains(code) && code != 101 {
            return
        }

        status = code
        reason = reasonPhrase
        headers = fields

        // Body length, in the order of RFC 9112 section 6.3.
        if requestHadNoBody || code == 204 || code == 304 || code == 101 {
            complete()
            return
        }
        let response = HTTPResponse(status: code, reason: reasonPhrase, headers: fields, body: [])
        if let coding = response.header("Transfer-Encoding") {
            let last = coding.split(separator: ",").last.map { String($0).trimmingOWS().lowercased() }
            state = last == "chunked" ? .chunkSize : .bodyUntilEnd
            return
        }
        let lengths = fields.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if let first = lengths.first {
            guard lengths.allSatisfy({ $0 == first }), !first.isEmpty,
                first.utf8.allSatisfy({ (48...57).contains($0) }),
                let length = Int(first)
            else {
                throw HTTPParseError("invalid Content-Length: \(lengths.joined(separator: ", "))")
            }
            guard length <= Self.maximumBodySize else { throw HTTPParseError("response body too large") }
            if length == 0 { complete() } else { state = .fixedBody(remaining: length) }
            return
        }
        state = .bodyUntilEnd
    }

    /// chunk-size [ chunk-ext ], the size in hex.
    private func parseChunkSize(_ line: [UInt8]) throws(HTTPParseError) -> Int {
        let digits = line.prefix { $0 != 59 /* ; */ }.filter { $0 != 32 && $0 != 9 }
        guard !digits.isEmpty, digits.count <= 8, let size = Int(String(decoding: digits, as: UTF8.self), radix: 16)
        else {
            throw HTTPParseError("invalid chunk size: \(printable(line))")
        }
        return size
    }

    // MARK: - Bytes

    /// The next CRLF-terminated line without its CRLF, or nil until one has arrived.
    private mutating func takeLine() throws(HTTPParseError) -> [UInt8]? {
        guard let end = find([13, 10]) else {
            if buffer.count - position > Self.maximumLineSize { throw HTTPParseError("line too long in chunked body") }
            return nil
        }
        let line = Array(buffer[position..<end])
        position = end + 2
        return line
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard buffer.count - position >= needle.count else { return nil }
        var index = position
        while index + needle.count <= buffer.count {
            if buffer[index] == needle[0] && buffer[index..<index + needle.count].elementsEqual(needle) {
                return index
            }
            index += 1
        }
        return nil
    }

    private func split(_ head: [UInt8]) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == 13 && index + 1 < head.endIndex && head[index + 1] == 10 {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        return lines
    }

    private func printable(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes.prefix(80), as: UTF8.self).debugDescription
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    fileprivate func trimmingOWS() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
