// The text of a consent prompt: what a requester chose arrives escaped for
// body markup and stripped of control, bidi and invisible characters and of
// excess length; the prompt names the transport and requester for each
// transport, and a U2F site when a stored credential tells it.

import Testing

@testable import LatchkeyNotifications

@Suite("prompt text")
struct PromptTextTests {
    static func prompt(
        operation: String = "makeCredential",
        rpId: String? = "example.com",
        change: (inout PromptFacts) -> Void = { _ in }
    ) -> PromptText {
        var facts = PromptFacts(id: "p-3", key: "default", operation: operation, rpId: rpId, userName: "alice")
        change(&facts)
        return PromptText(prompt: facts)
    }

    @Test(
        "body markup's special characters are escaped",
        arguments: [
            ("<b>bold</b>", "&lt;b&gt;bold&lt;/b&gt;"),
            ("Tom & Jerry", "Tom &amp; Jerry"),
            ("&amp;", "&amp;amp;"),
            ("<a href=\"https://evil.example\">click</a>", "&lt;a href=\"https://evil.example\"&gt;click&lt;/a&gt;"),
            ("<img src=\"file:///etc/passwd\"/>", "&lt;img src=\"file:///etc/passwd\"/&gt;"),
        ]
    )
    func markup(text: String, escaped: String) {
        #expect(PromptSanitizer.markup(text, limit: 200) == escaped)
        #expect(PromptSanitizer.unescape(escaped) == text)
    }

    @Test(
        "bidi controls, zero-width and other format characters are removed",
        arguments: [
            ("evil\u{202E}moc.elgoog", "evilmoc.elgoog"),  // RIGHT-TO-LEFT OVERRIDE
            ("a\u{202A}b\u{202B}c\u{202C}d\u{202D}e", "abcde"),  // embeddings, pop, LRO
            ("a\u{2066}b\u{2067}c\u{2068}d\u{2069}e", "abcde"),  // isolates
            ("a\u{200E}b\u{200F}c\u{061C}d", "abcd"),  // LRM, RLM, ALM
            ("pay\u{200B}pal\u{200C}\u{200D}\u{2060}\u{FEFF}", "paypal"),  // zero-width, word joiner, BOM
            ("soft\u{00AD}hyphen", "softhyphen"),
            ("tag\u{E0041}\u{E007F}s", "tags"),  // tag characters
            // Noncharacters, which a Swift literal cannot spell.
            ("non" + String(Unicode.Scalar(0xFFFE)!) + "character" + String(Unicode.Scalar(0xFDD0)!), "noncharacter"),
        ] as [(String, String)]
    )
    func invisible(text: String, shown: String) {
        #expect(PromptSanitizer.plain(text, limit: 200) == shown)
    }

    @Test(
        "control characters and line or paragraph separators become one space; ends are trimmed",
        arguments: [
            ("alice\nbob", "alice bob"),
            ("alice\r\n\tbob", "alice bob"),
            ("\u{1B}[31mred\u{1B}[0m", "[31mred [0m"),
            ("a\u{0}b\u{7F}c\u{85}d", "a b c d"),
            ("line\u{2028}para\u{2029}end", "line para end"),
            ("  wide\u{00A0}\u{3000}space  ", "wide space"),
        ]
    )
    func controls(text: String, shown: String) {
        #expect(PromptSanitizer.plain(text, limit: 200) == shown)
    }

    @Test("overlong text is cut with an ellipsis: names keep their start, domains and paths their end")
    func length() {
        let long = String(repeating: "a", count: 300)
        #expect(PromptSanitizer.plain(long, limit: 64) == String(repeating: "a", count: 63) + "…")
        #expect(PromptSanitizer.plain("exactly", limit: 7) == "exactly")
        let domain = "accounts.google.com." + String(repeating: "x", count: 80) + ".evil.example"
        let shown = PromptSanitizer.plain(domain, limit: 40, keep: .tail)
        #expect(shown.count == 40 && shown.hasPrefix("…") && shown.hasSuffix(".evil.example"))
        // A pile of combining marks counts as one replacement character, not one "character" of any height.
        let zalgo = "z" + String(repeating: "\u{0301}", count: 50) + "ok"
        #expect(PromptSanitizer.plain(zalgo, limit: 10) == "\u{FFFD}ok")
        #expect(PromptSanitizer.plain("e\u{0301}", limit: 10) == "e\u{0301}")
    }

    @Test("a hostile RP ID and user name arrive escaped, and the summary names no site that is not a plain domain")
    func hostile() {
        let text = Self.prompt(rpId: "<b>bank</b>&\u{202E}moc") {
            $0.userName = "<i>root</i>\u{202E}"
            $0.userDisplayName = "Alice & <Bob>\nSecond line"
        }
        #expect(text.summary == "Create a passkey for a site with an unusual name (see below)?")
        #expect(text.body.contains("Site: \u{201C}&lt;b&gt;bank&lt;/b&gt;&amp;moc\u{201D}"))
        #expect(text.body.contains("not a plain domain name"))
        #expect(text.body.contains("User: &lt;i&gt;root&lt;/i&gt; (Alice &amp; &lt;Bob&gt; Second line)"))
        for forbidden in ["<b>", "<i>", "\u{202E}", "& "] { #expect(!text.body.contains(forbidden)) }
        #expect(!text.summary.contains("<"))
        // Unicode look-alikes are not plain domains either: no homograph in the summary.
        #expect(Self.prompt(rpId: "exаmple.com").summary.contains("unusual name"))
    }

    @Test("the summary names a plain domain and the operation")
    func summaries() {
        #expect(Self.prompt().summary == "Create a passkey for example.com?")
        #expect(Self.prompt(operation: "getAssertion", rpId: "Example.COM").summary == "Sign in to example.com?")
        #expect(Self.prompt(operation: "reset", rpId: nil).summary == "Reset the security key? Every passkey is erased")
        #expect(Self.prompt(operation: "selection", rpId: nil).summary == "Use the security key?")
    }

    @Test(
        "the body names the transport and what the kernel told of the requester",
        arguments: [
            (
                "usbip", UInt32(1001) as UInt32?, "alice" as String?, Int32(4242) as Int32?,
                "/usr/lib/chromium/chromium" as String?, "127.0.0.1:45678" as String?,
                "Asked over USB/IP by uid 1001 (alice), pid 4242, /usr/lib/chromium/chromium."
            ),
            ("usbip", 0, "root", nil, nil, "127.0.0.1:45678", "Asked over USB/IP by uid 0 (root)."),
            (
                "usbip", nil, nil, nil, nil, "192.0.2.7:50000",
                "Asked over USB/IP from 192.0.2.7:50000; the program is not known."
            ),
            (
                "uhid", nil, nil, nil, nil, nil,
                "Asked through the key's hidraw device; the kernel does not say which program."
            ),
        ] as [(String, UInt32?, String?, Int32?, String?, String?, String)]
    )
    func requester(
        transport: String,
        uid: UInt32?,
        user: String?,
        pid: Int32?,
        executable: String?,
        address: String?,
        line: String
    ) {
        let text = Self.prompt {
            $0.transport = transport
            $0.requesterUid = uid
            $0.requesterUser = user
            $0.requesterPid = pid
            $0.requesterExecutable = executable
            $0.requesterAddress = address
        }
        #expect(text.body.split(separator: "\n").contains(Substring(line)), "\(text.body)")
        #expect(text.body.contains("Site: example.com, as the requesting program names it."))
        #expect(text.body.contains("Key default, request p-3: or answer with latchkeyctl approve|deny p-3."))
    }

    @Test("without a transport the prompt says who asks is not known; an executable is escaped and cut at its start")
    func unknownRequester() {
        #expect(Self.prompt().body.contains("Who asks is not known."))
        let path = "/tmp/" + String(repeating: "d/", count: 80) + "<evil>"
        let text = Self.prompt {
            $0.transport = "usbip"
            $0.requesterUid = 1002
            $0.requesterExecutable = path
        }
        #expect(text.body.contains("Asked over USB/IP by uid 1002, …"))
        #expect(text.body.contains("d/&lt;evil&gt;."))
    }

    @Test("a U2F prompt names the site a stored credential told, else says it is unknown with a short hash")
    func u2f() {
        let hash = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
        let known = Self.prompt(operation: "u2fAuthenticate", rpId: "example.com") {
            $0.rpIdHash = hash
            $0.userName = nil
        }
        #expect(known.summary == "Sign in to example.com (U2F)?")
        #expect(
            known.body.contains(
                "Site: example.com: U2F names it by a hash, and a passkey on this key is for that site."
            )
        )
        let unknown = Self.prompt(operation: "u2fRegister", rpId: nil) {
            $0.rpIdHash = hash
            $0.userName = nil
        }
        #expect(unknown.summary == "Register the security key with an unknown site (U2F)?")
        #expect(unknown.body.contains("Site: unknown. U2F names it only by a hash (a1b2c3d4e5f6…)"))
        #expect(!unknown.body.contains(hash))
    }

    @Test("user verification is said; the announcement of a conditional registration is escaped too")
    func others() {
        #expect(Self.prompt { $0.userVerification = true }.body.contains("It asks for user verification too."))
        let created = PromptText(conditionalRegistration: "default", rpId: "example.com", userName: "<x>")
        #expect(created.summary == "Passkey created")
        #expect(
            created.body
                == "latchkey key default created a passkey for &lt;x&gt; at example.com after its password was used."
        )
    }
}
