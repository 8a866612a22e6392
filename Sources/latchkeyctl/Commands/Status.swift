// `latchkeyctl status` and the keys table it shares with `keys list`.

import ArgumentParser

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the daemon's version, uptime and keys.",
        discussion: """
            Examples:
              latchkeyctl status
              latchkeyctl status --json | jq -r '.keys[].uhid.hidraw'
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        try global.showDocument(at: ControlPath.status, as: StatusInfo.self) { status in
            let keys = status.keys.count == 1 ? "1 key" : "\(status.keys.count) keys"
            let summary =
                "latchkeyd \(Sanitize.inline(status.version)), up \(Format.uptime(seconds: status.uptimeSeconds)), \(keys)"
            return status.keys.isEmpty ? summary : summary + "\n\n" + KeyTable.render(status.keys)
        }
    }
}

enum KeyTable {
    /// The keys, one a row, then any uhid error on a line of its own.
    static func render(_ keys: [KeyInfo]) -> String {
        var table = Table("NAME", "OWNER", "PRESENCE", "CREDENTIALS", "UHID", "USBIP")
        for key in keys {
            table.append(
                key.name,
                Format.optional(key.owner?.label),
                key.presence,
                String(key.credentials),
                Format.uhid(key.uhid),
                Format.usbip(key.usbip)
            )
        }
        let errors = keys.compactMap { key in
            key.uhid.error.map { "\(Sanitize.inline(key.name)): uhid: \(Sanitize.inline($0))" }
        }
        return ([table.render()] + (errors.isEmpty ? [] : [""] + errors)).joined(separator: "\n")
    }

    /// One key as a field list.
    static func fields(_ key: KeyInfo) -> String {
        var fields = [
            ("name", key.name),
            ("owner", Format.optional(key.owner.map { "\($0.label) (uid \($0.uid))" })),
            ("exportable", key.exportable.map { $0 ? "yes" : "no: private keys leave only with its PIN" } ?? "-"),
            ("aaguid", key.aaguid),
            ("presence", key.presence),
            ("credentials", String(key.credentials)),
            ("uhid", key.uhid.state),
            ("hidraw", Format.optional(key.uhid.hidraw)),
        ]
        if let error = key.uhid.error { fields.append(("uhid error", error)) }
        fields.append(("usbip", Format.usbip(key.usbip)))
        if let algorithms = key.options?.algorithms {
            fields.append(("algorithms", algorithms.joined(separator: ", ")))
        }
        if let limit = key.options?.maxDiscoverableCredentials {
            fields.append(("max discoverable", String(limit)))
        }
        return Table.fields(fields)
    }
}
