// `latchkeyctl export` and `latchkeyctl import`: a key's passkeys in the FIDO
// Credential Exchange Format, encrypted under a passphrase unless --plaintext
// says otherwise. The daemon encrypts and decrypts (scrypt + AES-256-GCM, the
// envelope in the README); this command asks for the passphrase — on the
// terminal without echo, or one line of standard input with
// --passphrase-stdin, never in argv — and reads and writes the file, 0600.
// A key that is not exportable exports only with its PIN (--pin, --pin-stdin;
// docs/access.md), read the same way.

import ArgumentParser
import Foundation
import Glibc

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export a key's passkeys in the Credential Exchange Format (POST /v1/keys/NAME/export).",
        discussion: """
            Writes the key's discoverable credentials (passkeys), private keys \
            included, as a FIDO Credential Exchange Format (CXF) document encrypted \
            with a passphrase: scrypt (N=2^17, r=8, p=1) derives an AES-256-GCM key \
            (the envelope is described in the README). The passphrase is asked twice \
            on the terminal without echo, or read from the first line of standard \
            input with --passphrase-stdin. --plaintext writes bare CXF instead, with a \
            warning: anyone who reads that file can sign in as you. The file is \
            created mode 0600; without -o the export goes to standard output. \
            Non-discoverable credentials cannot be exported (their key is their ID, \
            wrapped under this key's secret).

            Only the key's owner exports it. A key made exportable exports as it \
            is; any other key needs its PIN: --pin asks for it on the terminal, \
            --pin-stdin reads it from the first line of standard input (before \
            the passphrase, with --passphrase-stdin). A wrong PIN costs one of the \
            key's retries, as with any FIDO client.

            Examples:
              latchkeyctl export --key ci-1 --format cxf -o passkeys.cxf.json
              printf '%s\\n' "$PASSPHRASE" | latchkeyctl export --passphrase-stdin -o passkeys.cxf.json
              printf '%s\\n%s\\n' "$PIN" "$PASSPHRASE" | latchkeyctl export --pin-stdin --passphrase-stdin -o passkeys.cxf.json
              latchkeyctl export --plaintext -o passkeys-PLAINTEXT.json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var key: KeyOption

    @Option(help: ArgumentHelp("The export format; only cxf.", valueName: "format"))
    var format = "cxf"

    @Option(
        name: .shortAndLong,
        help: ArgumentHelp("Write to this file (mode 0600) instead of standard output.", valueName: "file")
    )
    var output: String?

    @Flag(help: "Write the CXF document unencrypted (private keys in the clear).")
    var plaintext = false

    @Flag(help: "Read the passphrase from the first line of standard input instead of the terminal.")
    var passphraseStdin = false

    @Flag(help: "Ask for the key's PIN on the terminal (a key that is not exportable needs it).")
    var pin = false

    @Flag(help: "Read the key's PIN from the first line of standard input instead.")
    var pinStdin = false

    func validate() throws {
        guard format == "cxf" else { throw ValidationError("--format must be cxf.") }
        if plaintext && passphraseStdin {
            throw ValidationError("--plaintext exports are not encrypted; leave out --passphrase-stdin.")
        }
        if pin && pinStdin { throw ValidationError("give --pin or --pin-stdin, not both.") }
    }

    func run() throws {
        let client = global.client()
        var body = ExportBody()
        // The PIN first: with both on standard input, it is the first line.
        if pinStdin {
            guard let line = Terminal.readLine(descriptor: STDIN_FILENO), !line.isEmpty else {
                throw CtlError(.usage, "--pin-stdin: no PIN on standard input")
            }
            body.pin = line
        } else if pin {
            body.pin = try Terminal.readSecret(prompt: "PIN of key \(key.key.quoted): ")
        }
        if plaintext {
            warn(
                "warning: the export is NOT encrypted; it holds private keys in the clear. Keep the file safe and delete it when done."
            )
            body.plaintext = true
        } else {
            body.passphrase = try Passphrase.read(stdin: passphraseStdin, confirm: true)
        }
        let response = try client.post(ControlPath.export(key: key.key), json: body)
        guard let output else {
            FileHandle.standardOutput.write(Data(response.body))
            if response.body.last != UInt8(ascii: "\n") { FileHandle.standardOutput.write(Data("\n".utf8)) }
            return
        }
        try SecretFile.write(response.body + [UInt8(ascii: "\n")], to: output)
        let what = plaintext ? "plaintext CXF" : "encrypted CXF"
        global.say("Wrote the passkeys of key \(key.key.quoted) to \(output.quoted) (\(what), mode 0600).")
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import passkeys from a Credential Exchange Format file (POST /v1/keys/NAME/import).",
        discussion: """
            Reads an export of `latchkeyctl export` (encrypted: the passphrase is asked \
            once on the terminal, or read from standard input with --passphrase-stdin) \
            or a plaintext CXF document of any exporter, and imports its passkeys into \
            the key. A wrong passphrase or a damaged file imports nothing. Otherwise \
            each passkey stands alone: one whose credential ID the key has already, or \
            for whose RP and user the key has a passkey already, or that is malformed, \
            is skipped and reported with its reason, and the others are imported. \
            Imported passkeys start their signature counter afresh.

            Exit status: 0 when every credential was imported, 1 when any was skipped \
            (or the daemon refused the file).

            Examples:
              latchkeyctl import --key ci-2 passkeys.cxf.json
              printf '%s\\n' "$PASSPHRASE" | latchkeyctl import --passphrase-stdin passkeys.cxf.json --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var key: KeyOption

    @Argument(help: ArgumentHelp("The CXF file (encrypted or plaintext).", valueName: "file"))
    var file: String

    @Flag(help: "Read the passphrase from the first line of standard input instead of the terminal.")
    var passphraseStdin = false

    func run() throws {
        guard let contents = FileManager.default.contents(atPath: file) else {
            throw CtlError(.usage, "cannot read \(file.quoted)")
        }
        guard let document = try? JSONSerialization.jsonObject(with: contents) as? [String: Any] else {
            throw CtlError(.usage, "\(file.quoted) is not a JSON object (neither a CXF document nor an export)")
        }
        var body: [String: Any] = ["document": document]
        if let format = document["format"] as? String, format.hasPrefix("latchkey-cxf-") {
            body["passphrase"] = try Passphrase.read(stdin: passphraseStdin, confirm: false)
        }
        let bytes: [UInt8]
        do {
            bytes = Array(try JSONSerialization.data(withJSONObject: body))
        } catch {
            throw CtlError(.internalError, "cannot encode the request: \(error)")
        }
        let response = try global.client().send("POST", ControlPath.importing(key: key.key), body: bytes)
        let report = try response.decode(ImportResult.self)
        try global.show(response, as: ImportResult.self) { report in
            var lines: [String] = []
            lines.append(
                "Imported \(report.imported.count), skipped \(report.skipped.count) into key \(key.key.quoted)."
            )
            if !report.imported.isEmpty {
                var table = Table("IMPORTED", "ID", "RP", "USER")
                for entry in report.imported {
                    table.append(
                        entry.location,
                        entry.credential.id,
                        entry.credential.rpId,
                        Format.optional(entry.credential.userName)
                    )
                }
                lines.append(table.render())
            }
            if !report.skipped.isEmpty {
                var table = Table("SKIPPED", "ID", "RP", "REASON")
                for entry in report.skipped {
                    table.append(
                        entry.location,
                        Format.optional(entry.credentialId),
                        Format.optional(entry.rpId),
                        entry.reason
                    )
                }
                lines.append(table.render())
            }
            return lines.joined(separator: "\n")
        }
        if !report.skipped.isEmpty {
            throw CtlError(.refused, "\(report.skipped.count) credential(s) skipped; the report above says why")
        }
    }
}

private struct ExportBody: Encodable {
    var passphrase: String?
    var plaintext: Bool?
    /// The key's PIN, for a key that is not exportable. Never logged.
    var pin: String?
}

/// The answer to an import.
struct ImportResult: Decodable {
    struct Imported: Decodable {
        var location: String
        var credential: CredentialInfo
    }

    struct Skipped: Decodable {
        var location: String
        var credentialId: String?
        var rpId: String?
        var reason: String
    }

    var imported: [Imported]
    var skipped: [Skipped]
}

/// Where an export's passphrase comes from.
enum Passphrase {
    /// One line of standard input, or asked on the terminal without echo
    /// (twice when `confirm`).
    static func read(stdin: Bool, confirm: Bool) throws(CtlError) -> String {
        if stdin {
            guard let line = Terminal.readLine(descriptor: STDIN_FILENO), !line.isEmpty else {
                throw CtlError(.usage, "--passphrase-stdin: no passphrase on standard input")
            }
            return line
        }
        guard Terminal.isInteractive else {
            throw CtlError(
                .usage,
                "standard input is not a terminal: pass --passphrase-stdin to read the passphrase from it"
            )
        }
        let passphrase = try Terminal.readSecret(
            prompt: "Passphrase: ", secret: "passphrase", stdinFlag: "--passphrase-stdin"
        )
        guard !passphrase.isEmpty else { throw CtlError(.usage, "no passphrase entered") }
        if confirm,
            try Terminal.readSecret(
                prompt: "Repeat the passphrase: ", secret: "passphrase", stdinFlag: "--passphrase-stdin"
            ) != passphrase
        {
            throw CtlError(.usage, "the two passphrases differ; nothing was exported")
        }
        return passphrase
    }
}

/// Files that hold secrets: created mode 0600 (an existing file is made
/// 0600 before it is written), replaced whole.
enum SecretFile {
    static func write(_ bytes: [UInt8], to path: String) throws(CtlError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw CtlError(.usage, "cannot create \(path.quoted): \(String(cString: strerror(errno)))")
        }
        defer { _ = close(descriptor) }
        guard fchmod(descriptor, 0o600) == 0 else {
            throw CtlError(.usage, "cannot make \(path.quoted) mode 0600: \(String(cString: strerror(errno)))")
        }
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                throw CtlError(.usage, "cannot write \(path.quoted): \(String(cString: strerror(errno)))")
            }
            written += count
        }
    }
}

private func warn(_ message: String) {
    FileHandle.standardError.write(Data("\(message)\n".utf8))
}
