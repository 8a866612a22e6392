// What a consent prompt says, built in one place for latchkeyd's own
// notifications and for `latchkeyctl agent`: a summary of our words (and a
// site name only when it is a plain domain name), and a body that names the
// site, the user, the transport and the requesting process. Everything a
// requester chose (the RP ID, user and display names, its executable's path)
// passes through `PromptSanitizer` first: control, bidi and other invisible
// characters removed, length capped, and `&`, `<`, `>` escaped for the body
// markup of the Desktop Notifications Specification. Pure: no I/O.

/// What a pending presence request says about itself: the fields of
/// `GET /v1/presence/pending` entries and `presence.pending` events (flat
/// JSON, so that either decodes into this).
public struct PromptFacts: Sendable, Equatable, Codable {
    /// The request's id ("p-3"), for `latchkeyctl approve|deny`.
    public var id: String
    /// The key's name.
    public var key: String
    /// The operation (`makeCredential`, `getAssertion`, `u2fRegister`, …).
    public var operation: String
    /// The relying party as the requester names it; for U2F, the RP ID of a
    /// credential stored on the key for its application parameter.
    public var rpId: String?
    /// U2F's application parameter, hex (CTAP2 operations name `rpId` instead).
    public var rpIdHash: String?
    /// The user name the relying party gave.
    public var userName: String?
    /// The user's display name the relying party gave (makeCredential).
    public var userDisplayName: String?
    /// The platform asked for built-in user verification.
    public var userVerification: Bool
    /// The transport the request came through: "uhid" or "usbip"; nil when
    /// none named it.
    public var transport: String?
    /// The requesting process's uid, when the kernel told it.
    public var requesterUid: UInt32?
    /// That uid's account name.
    public var requesterUser: String?
    /// The requesting process's pid, when the daemon could see it.
    public var requesterPid: Int32?
    /// The requesting process's executable, when the daemon could read it.
    public var requesterExecutable: String?
    /// The peer's address of a USB/IP connection ("127.0.0.1:45678").
    public var requesterAddress: String?

    public init(
        id: String,
        key: String,
        operation: String,
        rpId: String? = nil,
        rpIdHash: String? = nil,
        userName: String? = nil,
        userDisplayName: String? = nil,
        userVerification: Bool = false,
        transport: String? = nil,
        requesterUid: UInt32? = nil,
        requesterUser: String? = nil,
        requesterPid: Int32? = nil,
        requesterExecutable: String? = nil,
        requesterAddress: String? = nil
    ) {
        self.id = id
        self.key = key
        self.operation = operation
        self.rpId = rpId
        self.rpIdHash = rpIdHash
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.userVerification = userVerification
        self.transport = transport
        self.requesterUid = requesterUid
        self.requesterUser = requesterUser
        self.requesterPid = requesterPid
        self.requesterExecutable = requesterExecutable
        self.requesterAddress = requesterAddress
    }
}

/// A notification's text: `summary` is plain text (the specification allows
/// no markup there), `body` is body markup.
public struct PromptText: Sendable, Equatable {
    public var summary: String
    public var body: String

    /// How many hex digits of an unknown U2F site's hash a prompt shows.
    public static let hashPrefixLength = 12

    /// The prompt for a pending request.
    public init(prompt facts: PromptFacts) {
        let site = Site(facts)
        summary = Self.summary(facts.operation, site: site)
        var lines: [String] = []
        if let line = site.line { lines.append(line) }
        if let user = Self.user(facts) { lines.append(user) }
        lines.append(Self.requester(facts))
        if facts.userVerification { lines.append("It asks for user verification too.") }
        let id = PromptSanitizer.markup(facts.id, limit: 32)
        lines.append(
            "Key \(PromptSanitizer.markup(facts.key, limit: 64)), request \(id): "
                + "or answer with latchkeyctl approve|deny \(id)."
        )
        body = lines.joined(separator: "\n")
    }

    /// The announcement of a conditional registration (README "Consent policy").
    public init(conditionalRegistration key: String, rpId: String, userName: String) {
        summary = "Passkey created"
        body =
            "latchkey key \(PromptSanitizer.markup(key, limit: 64)) created a passkey for "
            + "\(PromptSanitizer.markup(userName, limit: PromptSanitizer.nameLimit)) at "
            + "\(PromptSanitizer.markup(rpId, limit: PromptSanitizer.siteLimit, keep: .tail)) "
            + "after its password was used."
    }

    /// What the prompt can say about the site.
    private enum Site {
        /// A plain domain name, fit for the summary; `fromU2FHash` when a
        /// stored credential told it for U2F's application parameter.
        case domain(String, fromU2FHash: Bool)
        /// A name that is not a plain domain (markup, spaces, non-ASCII
        /// letters): only in the body, escaped, and said to be unusual.
        case unusual(String)
        /// U2F with no stored credential for its application parameter.
        case unknownU2F(hashPrefix: String?)
        /// The operation names no site (reset, selection).
        case none

        init(_ facts: PromptFacts) {
            let u2f = facts.operation.hasPrefix("u2f")
            if let rpId = facts.rpId {
                self =
                    PromptSanitizer.isPlainDomain(rpId) ? .domain(rpId.lowercased(), fromU2FHash: u2f) : .unusual(rpId)
            } else if u2f {
                let length = PromptText.hashPrefixLength
                self = .unknownU2F(
                    hashPrefix: facts.rpIdHash.map { PromptSanitizer.plain(String($0.prefix(length)), limit: length) }
                )
            } else {
                self = .none
            }
        }

        /// The site's name in the summary.
        var summaryName: String? {
            switch self {
            case .domain(let name, _): name
            case .unusual: "a site with an unusual name (see below)"
            case .unknownU2F: "an unknown site"
            case .none: nil
            }
        }

        /// The body's line about the site.
        var line: String? {
            switch self {
            case .domain(let name, fromU2FHash: false): "Site: \(name), as the requesting program names it."
            case .domain(let name, fromU2FHash: true):
                "Site: \(name): U2F names it by a hash, and a passkey on this key is for that site."
            case .unusual(let name):
                "Site: \u{201C}\(PromptSanitizer.markup(name, limit: PromptSanitizer.siteLimit, keep: .tail))\u{201D}, "
                    + "as the requesting program names it: not a plain domain name."
            case .unknownU2F(let prefix):
                "Site: unknown. U2F names it only by a hash"
                    + (prefix.map { " (\($0)…)" } ?? "")
                    + ", and no passkey on this key is for that hash."
            case .none: nil
            }
        }
    }

    private static func summary(_ operation: String, site: Site) -> String {
        let name = site.summaryName
        switch operation {
        case "makeCredential": return "Create a passkey for \(name ?? "a site")?"
        case "getAssertion": return "Sign in to \(name ?? "a site")?"
        case "excludedCredential": return "Confirm the security key for \(name ?? "a site")?"
        case "reset": return "Reset the security key? Every passkey is erased"
        case "userVerificationToken": return "Verify yourself to the security key\(name.map { " for \($0)" } ?? "")?"
        case "u2fRegister": return "Register the security key with \(name ?? "a site") (U2F)?"
        case "u2fAuthenticate": return "Sign in to \(name ?? "a site") (U2F)?"
        default: return "Use the security key?"
        }
    }

    private static func user(_ facts: PromptFacts) -> String? {
        let name = facts.userName.map { PromptSanitizer.markup($0, limit: PromptSanitizer.nameLimit) }
            .flatMap { $0.isEmpty ? nil : $0 }
        let display = facts.userDisplayName.map { PromptSanitizer.markup($0, limit: PromptSanitizer.nameLimit) }
            .flatMap { $0.isEmpty || $0 == name ? nil : $0 }
        switch (name, display) {
        case (let name?, let display?): return "User: \(name) (\(display))"
        case (let name?, nil): return "User: \(name)"
        case (nil, let display?): return "User: (\(display))"
        case (nil, nil): return nil
        }
    }

    /// Who asks, as far as the kernel told the daemon.
    private static func requester(_ facts: PromptFacts) -> String {
        var who: [String] = []
        if let uid = facts.requesterUid {
            let account = facts.requesterUser.map { " (\(PromptSanitizer.markup($0, limit: 32)))" } ?? ""
            who.append("uid \(uid)\(account)")
        }
        if let pid = facts.requesterPid { who.append("pid \(pid)") }
        if let executable = facts.requesterExecutable {
            who.append(PromptSanitizer.markup(executable, limit: PromptSanitizer.pathLimit, keep: .tail))
        }
        let process = who.joined(separator: ", ")
        let address = facts.requesterAddress.map { PromptSanitizer.markup($0, limit: 64) }
        switch facts.transport {
        case "usbip":
            switch (process.isEmpty, address) {
            case (false, _): return "Asked over USB/IP by \(process)."
            case (true, let address?): return "Asked over USB/IP from \(address); the program is not known."
            case (true, nil): return "Asked over USB/IP; the program is not known."
            }
        case "uhid":
            return process.isEmpty
                ? "Asked through the key's hidraw device; the kernel does not say which program."
                : "Asked through the key's hidraw device by \(process)."
        case let transport?:
            let name = PromptSanitizer.markup(transport, limit: 16)
            return process.isEmpty ? "Asked over \(name)." : "Asked over \(name) by \(process)."
        case nil:
            return process.isEmpty ? "Who asks is not known." : "Asked by \(process)."
        }
    }
}

/// Makes text a requester chose safe to show in a notification.
public enum PromptSanitizer {
    /// At most this many characters of a site name, user name or path.
    public static let siteLimit = 80
    public static let nameLimit = 64
    public static let pathLimit = 96

    /// Which end of overlong text stays.
    public enum Keep: Sendable {
        /// The start (names: the end is what was added).
        case head
        /// The end (domain names and paths: the end is what identifies them).
        case tail
    }

    /// `text` with control characters and line or paragraph separators made
    /// spaces, format characters (bidi embeddings, overrides and isolates,
    /// zero-width characters, soft hyphens, tags) and noncharacters removed,
    /// runs of white space folded into one and the ends trimmed, then cut to
    /// `limit` characters with an ellipsis where it was cut.
    public static func plain(_ text: String, limit: Int, keep: Keep = .head) -> String {
        var cleaned = String.UnicodeScalarView()
        var pendingSpace = false
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator, .spaceSeparator:
                pendingSpace = !cleaned.isEmpty
                continue
            case .format, .surrogate:
                continue
            default:
                if scalar.properties.isNoncharacterCodePoint { continue }
            }
            if pendingSpace {
                cleaned.append(" ")
                pendingSpace = false
            }
            cleaned.append(scalar)
        }
        return cut(String(cleaned), limit: limit, keep: keep)
    }

    /// `plain(text)` with `&`, `<` and `>` escaped for body markup.
    public static func markup(_ text: String, limit: Int, keep: Keep = .head) -> String {
        escape(plain(text, limit: limit, keep: keep))
    }

    /// `&`, `<` and `>` as entities (the markup is XML: nothing else is special in text).
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(character)
            }
        }
        return out
    }

    /// Body markup as plain text, for a server without the body-markup
    /// capability (the specification says to strip markup then): our bodies
    /// hold no tags, only the entities `escape` writes.
    public static func unescape(_ markup: String) -> String {
        markup.replacing("&lt;", with: "<").replacing("&gt;", with: ">").replacing("&amp;", with: "&")
    }

    /// Whether `rpId` is a plain ASCII domain name (letters, digits, `-` and
    /// `.`, no empty label, at most 253 characters), fit for a summary.
    public static func isPlainDomain(_ rpId: String) -> Bool {
        guard !rpId.isEmpty, rpId.utf8.count <= 253 else { return false }
        return rpId.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63
                && label.utf8.allSatisfy { byte in
                    switch byte {
                    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                        true
                    default: false
                    }
                }
        }
    }

    /// At most `limit` characters, each at most 8 scalars long (so that a
    /// pile of combining marks cannot stand for one character), with `…`
    /// where text was cut.
    static func cut(_ text: String, limit: Int, keep: Keep) -> String {
        let characters = text.map { $0.unicodeScalars.count > 8 ? Character("\u{FFFD}") : $0 }
        guard characters.count > limit else { return String(characters) }
        let kept = max(0, limit - 1)
        switch keep {
        case .head: return String(characters.prefix(kept)) + "…"
        case .tail: return "…" + String(characters.suffix(kept))
        }
    }
}
