// `latchkeyctl credentials add | show`: seed a credential from a private key
// file (WebDriver's Add Credential) and show one credential as the daemon
// has it (POST and GET /v1/keys/NAME/credentials[/ID]).

import ArgumentParser
import Foundation
import LatchkeyContract
import LatchkeyJSON

extension Credentials {
    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Seed a credential from a private key (POST /v1/keys/NAME/credentials).",
            discussion: """
                The private key is a PKCS#8 file, DER or PEM ("-----BEGIN PRIVATE KEY-----"), \
                of a P-256, P-384, P-521, secp256k1, Ed25519, RSA or ML-DSA-65/87 key \
                (P-384, P-521, secp256k1 and RSA resident only), for example from \
                `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out k.pem`. \
                A resident credential (the default) keeps --credential-id and needs \
                --user-handle; with --non-resident the key makes the credential ID and \
                prints it. IDs and handles are base64url.

                Examples:
                  latchkeyctl credentials add ci-1 --rp-id example.com --private-key k.pem \\
                      --credential-id q83vEjRWeJA --user-handle dXNlci0x --sign-count 41
                  latchkeyctl credentials add ci-1 --rp-id example.com --private-key k.der --non-resident --json
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The key's name.", transform: KeyName.argument)
        var key: KeyName

        @Option(help: ArgumentHelp("The relying party ID.", valueName: "rp-id"))
        var rpId: String

        @Option(help: ArgumentHelp("A PKCS#8 private key file (DER or PEM).", valueName: "file"))
        var privateKey: String

        // base64url may begin with "-": the next word is the value, whatever it looks like.
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("The credential ID (base64url); random when left out.", valueName: "id")
        )
        var credentialId: String?

        @Option(parsing: .unconditional, help: ArgumentHelp("The user handle (base64url).", valueName: "handle"))
        var userHandle: String?

        @Option(help: ArgumentHelp("The counter the next assertion signs above.", valueName: "n"))
        var signCount = 0

        @Flag(help: "Seed a non-discoverable credential.")
        var nonResident = false

        @Option(help: ArgumentHelp("A file whose bytes become the credential's large blob.", valueName: "file"))
        var largeBlob: String?

        @Option(help: ArgumentHelp("The user name a browser shows.", valueName: "name"))
        var userName: String?

        func run() throws {
            let pkcs8 = try Self.privateKeyDER(path: privateKey)
            var blob: String?
            if let largeBlob {
                guard let data = FileManager.default.contents(atPath: largeBlob) else {
                    throw CtlError(.usage, "cannot read \(largeBlob)")
                }
                blob = Base64URL.encode(data)
            }
            let id =
                credentialId.map(Base64URL.unpadded)
                ?? Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
            let body = WebDriverCredential(
                credentialId: id,
                isResidentCredential: !nonResident,
                rpId: rpId,
                privateKey: Base64URL.encode(pkcs8),
                userHandle: userHandle.map(Base64URL.unpadded),
                signCount: signCount,
                largeBlob: blob,
                userName: userName
            )
            let response = try global.client().post(ControlPath.credentials(key: key), json: body)
            try global.show(response, as: CredentialInfo.self) { credential in
                "Seeded credential \(credential.id) for \(credential.rpId) on key \(key.quoted)."
            }
        }

        /// The DER bytes of a PKCS#8 file, PEM or DER.
        static func privateKeyDER(path: String) throws(CtlError) -> Data {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CtlError(.usage, "cannot read the private key file \(path)")
            }
            guard let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") else { return data }
            guard text.contains("-----BEGIN PRIVATE KEY-----") else {
                throw CtlError(
                    .usage,
                    "\(path) is PEM but not PKCS#8 (\"BEGIN PRIVATE KEY\"); convert it with openssl pkcs8 -topk8 -nocrypt"
                )
            }
            let body = text.components(separatedBy: "\n").filter { !$0.hasPrefix("-----") }.joined()
            guard let der = Data(base64Encoded: body.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CtlError(.usage, "\(path): the PEM body is not base64")
            }
            return der
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one credential (GET /v1/keys/NAME/credentials/ID).",
            discussion: """
                An ID that begins with "-" goes after "--".

                Examples:
                  latchkeyctl credentials show ci-1 q83vEjRWeJA
                  latchkeyctl credentials show ci-1 q83vEjRWeJA --private-key --json
                  latchkeyctl credentials show ci-1 -- -3vEjRWeJA
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The key's name.", transform: KeyName.argument)
        var key: KeyName

        @Argument(help: "The credential ID (base64url).")
        var id: String

        @Flag(help: "Include the PKCS#8 private key (base64url; --json shows it).")
        var privateKey = false

        func run() throws {
            let path =
                ControlPath.credential(key: key, id: Base64URL.unpadded(id)) + (privateKey ? "?privateKey=true" : "")
            let response = try global.client().get(path)
            try global.show(response, as: WebDriverCredential.self) { credential in
                Table.fields([
                    ("id", credential.credentialId),
                    ("resident", credential.isResidentCredential ? "yes" : "no"),
                    ("rp", credential.rpId),
                    ("user handle", Format.optional(credential.userHandle)),
                    ("user", Format.optional(credential.userName)),
                    ("sign count", credential.signCount.map(String.init) ?? "-"),
                    ("large blob", credential.largeBlob.map { "\($0.count) base64url characters" } ?? "-"),
                    ("private key", credential.privateKey == nil ? "-" : "(with --json)"),
                ])
            }
        }
    }
}

/// WebDriver's Credential: the body of POST /v1/keys/NAME/credentials, and
/// the fields of GET's answer latchkeyctl shows.
struct WebDriverCredential: Codable {
    var credentialId: String
    var isResidentCredential: Bool
    var rpId: String
    var privateKey: String?
    var userHandle: String?
    var signCount: Int?
    var largeBlob: String?
    var userName: String?
}
