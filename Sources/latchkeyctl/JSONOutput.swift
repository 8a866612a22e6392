// `--json`: the daemon's JSON, re-indented but otherwise verbatim. Key order,
// number spelling and string escapes stay exactly as the daemon sent them,
// which a decode-and-encode round trip through JSONSerialization would not
// keep.

import Foundation

enum JSONOutput {
    /// `body` re-indented with two spaces (no final newline).
    ///
    /// - Throws: `.internalError` when `body` is not JSON.
    static func pretty(_ body: [UInt8], request: String) throws(CtlError) -> String {
        do {
            _ = try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])
        } catch {
            throw CtlError(.internalError, "malformed response from latchkeyd to \(request): not JSON")
        }
        return reindent(body)
    }

    /// Re-indents valid JSON: whitespace between tokens is dropped and
    /// newlines and indentation are put back; strings are copied untouched.
    static func reindent(_ json: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(json.count * 2)
        var depth = 0
        var index = 0
        var inString = false
        var escaped = false

        func newline() {
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: depth * 2))
        }
        func nextSignificant(after position: Int) -> UInt8? {
            var position = position + 1
            while position < json.count {
                switch json[position] {
                case 0x20, 0x09, 0x0A, 0x0D: position += 1
                default: return json[position]
                }
            }
            return nil
        }

        while index < json.count {
            let byte = json[index]
            defer { index += 1 }
            if inString {
                out.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                continue
            case UInt8(ascii: "\""):
                inString = true
                out.append(byte)
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                out.append(byte)
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if nextSignificant(after: index) == close {
                    // An empty object or array stays on one line: {} or [].
                    while json[index] != close { index += 1 }
                    out.append(close)
                } else {
                    depth += 1
                    newline()
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                newline()
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                newline()
            case UInt8(ascii: ":"):
                out.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            default:
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
