// Human output: tables with aligned columns, field lists, durations, and the
// sanitising of strings that came from relying parties (a user name is
// whatever a web site sent, so it must not move the cursor or recolour the
// terminal).

/// A table: a header row and rows, columns left-aligned and separated by two
/// spaces; the last column is not padded.
struct Table {
    var columns: [String]
    var rows: [[String]] = []

    init(_ columns: String...) {
        self.columns = columns
    }

    mutating func append(_ row: String...) {
        precondition(row.count == columns.count, "a row has one cell per column")
        rows.append(row.map(Sanitize.inline))
    }

    func render() -> String {
        Self.align([columns] + rows)
    }

    /// "name  value" lines with the names padded to one width.
    static func fields(_ fields: [(String, String)]) -> String {
        align(fields.map { [$0.0, Sanitize.inline($0.1)] })
    }

    private static func align(_ lines: [[String]]) -> String {
        let count = lines.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: count)
        for line in lines {
            for (index, cell) in line.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        return lines.map { line in
            var text = ""
            for (index, cell) in line.enumerated() {
                if index > 0 { text += "  " }
                text += index == line.count - 1 ? cell : cell.padding(to: widths[index])
            }
            while text.hasSuffix(" ") { text.removeLast() }
            return text
        }.joined(separator: "\n")
    }
}

enum Sanitize {
    /// `text` on one line: control and format characters (newlines, escape
    /// sequences, bidirectional overrides) are shown as `\u{…}`.
    static func inline(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned:
                result += "\\u{\(String(scalar.value, radix: 16))}"
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

enum Format {
    /// "-" for a missing or empty value.
    static func optional(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        return value
    }

    /// An uptime: "12s", "5m 03s", "2h 05m", "3d 04h".
    static func uptime(seconds: Double) -> String {
        let total = Int(max(0, seconds))
        let (days, hours, minutes, secs) = (total / 86400, total / 3600 % 24, total / 60 % 60, total % 60)
        func two(_ value: Int) -> String { String(value).leftPadded(to: 2, with: "0") }
        if days > 0 { return "\(days)d \(two(hours))h" }
        if hours > 0 { return "\(hours)h \(two(minutes))m" }
        if minutes > 0 { return "\(minutes)m \(two(secs))s" }
        return "\(secs)s"
    }

    /// A short span given in milliseconds: "0.8s", "28.8s", "2m 05s".
    static func span(milliseconds: Double) -> String {
        let tenths = Int((max(0, milliseconds) / 100).rounded())
        if tenths < 600 { return "\(tenths / 10).\(tenths % 10)s" }
        return uptime(seconds: Double(tenths) / 10)
    }

    /// Whole seconds without a fraction, others with it: "30 s", "2.5 s".
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }

    /// A COSE algorithm's name, or its number.
    static func algorithm(_ value: Int) -> String {
        switch value {
        case -7: return "ES256"
        case -8: return "EdDSA"
        case -9: return "ESP256"
        case -19: return "Ed25519"
        case -35: return "ES384"
        case -36: return "ES512"
        case -37: return "PS256"
        case -47: return "ES256K"
        case -49: return "ML-DSA-65"
        case -50: return "ML-DSA-87"
        case -51: return "ESP384"
        case -52: return "ESP512"
        case -257: return "RS256"
        default: return String(value)
        }
    }

    /// A credProtect level (CTAP 2.1 section 12.1).
    static func credProtect(_ value: Int?) -> String {
        switch value {
        case nil: return "-"
        case 1: return "uvOptional"
        case 2: return "uvOptionalWithList"
        case 3: return "uvRequired"
        case let value?: return String(value)
        }
    }

    /// How a key is reachable over uhid: "opened /dev/hidraw3".
    static func uhid(_ uhid: KeyInfo.UHIDInfo) -> String {
        uhid.hidraw.map { "\(uhid.state) \($0)" } ?? uhid.state
    }

    /// "1-1 on 127.0.0.1:3240", or "-".
    static func usbip(_ usbip: KeyInfo.USBIPInfo?) -> String {
        usbip.map { "\($0.busid) on \($0.listen)" } ?? "-"
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
