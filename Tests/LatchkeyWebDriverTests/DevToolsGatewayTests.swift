// The DevTools gateway's pure parts: which CDP messages pass to the browser and
// which the gateway answers, the answers' shapes, the discovery rewrite, the
// WebAuthn domain's options and credentials mapped to latchkeyd's, and
// latchkeyd's events mapped to the domain's.

import LatchkeyJSON
import Testing

@testable import LatchkeyWebDriver

@Suite("DevTools: CDP routing")
struct CDPRoutingTests {
    @Test(
        "commands of other domains pass unchanged, flat session or not, and are not parsed",
        arguments: [
            #"{"id":1,"method":"Target.setAutoAttach","params":{"autoAttach":true,"flatten":true}}"#,
            #"{"id":2,"method":"Runtime.evaluate","params":{"expression":"1+1"},"sessionId":"AB12"}"#,
            #"{"id":3,"method":"Page.navigate","params":{"url":"https://example.com/WebAuthn"}}"#,
            #"not json at all"#,
            #"{"id":4,"method":"webauthn.enable"}"#,
            #"{"id":5,"method":"WebAuthnX.enable"}"#,
        ]
    )
    func forwards(text: String) {
        #expect(CDPMessage.route(text) == .forward)
    }

    @Test("a WebAuthn command is the gateway's, with its id, flat session and params")
    func answersWebAuthn() {
        let text = #"{"id":7,"method":"WebAuthn.addVirtualAuthenticator","sessionId":"S1","params":{"options":{}}}"#
        guard case .webAuthn(let command) = CDPMessage.route(text) else {
            Issue.record("not routed to the gateway")
            return
        }
        #expect(command.id == .number(7))
        #expect(command.method == "addVirtualAuthenticator")
        #expect(command.sessionId == "S1")
        #expect(command.params == ["options": .object([:])])
    }

    @Test("a method name spelled with JSON escapes is still the WebAuthn domain (it never reaches the browser)")
    func escapedMethod() {
        let text = #"{"id":8,"method":"WebAuth\u006e.enable"}"#
        guard case .webAuthn(let command) = CDPMessage.route(text) else {
            Issue.record("an escaped WebAuthn.enable would reach the browser")
            return
        }
        #expect(command.method == "enable" && command.sessionId == nil && command.params.isEmpty)
    }

    @Test("params that are not an object are CDP's invalid-params error, on the command's session")
    func badParams() {
        let route = CDPMessage.route(#"{"id":9,"method":"WebAuthn.enable","params":[1],"sessionId":"S"}"#)
        guard case .refuse(let id, let session, let error) = route else {
            Issue.record("not refused: \(route)")
            return
        }
        #expect(id == .number(9) && session == "S" && error.code == -32602 && error.message == "Invalid parameters")
    }

    @Test("answers, errors and events carry CDP's members and the flat session")
    func shapes() throws {
        let command = CDPCommand(id: .number(3), method: "enable", sessionId: "S", params: [:])
        let result = try #require(JSONValue.parse(Array(CDPMessage.result(command, ["a": .bool(true)]).utf8)))
        #expect(result == .object(["id": .number(3), "result": .object(["a": .bool(true)]), "sessionId": .string("S")]))
        let error = try #require(
            JSONValue.parse(Array(CDPMessage.error(id: .number(4), sessionId: nil, .methodNotFound("WebAuthn.x")).utf8))
        )
        #expect(
            error == .object(["id": .number(4), "error": .object(["code": .number(-32601), "message": .string("'WebAuthn.x' wasn't found")])])
        )
        let event = try #require(JSONValue.parse(Array(CDPMessage.event("WebAuthn.credentialAdded", [:], sessionId: "T").utf8)))
        #expect(event == .object(["method": .string("WebAuthn.credentialAdded"), "params": .object([:]), "sessionId": .string("T")]))
    }

    @Test("Target.detachedFromTarget names the flat session that ended; other browser messages name none")
    func detached() {
        #expect(CDPMessage.detachedSession(#"{"method":"Target.detachedFromTarget","params":{"sessionId":"S9","targetId":"T"}}"#) == "S9")
        #expect(CDPMessage.detachedSession(#"{"id":1,"result":{"sessionId":"S9"}}"#) == nil)
        #expect(CDPMessage.detachedSession(#"{"method":"Runtime.consoleAPICalled","params":{"args":["Target.detachedFromTarget"]}}"#) == nil)
    }

    @Test("discovery answers name the gateway in webSocketDebuggerUrl and the front end's ws= parameter, nothing else")
    func discovery() {
        let body = #"""
            [{"description":"ws://127.0.0.1:9222/devtools/page/X is a page","devtoolsFrontendUrl":"/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/X","id":"X","url":"http://localhost:8000/?ws=a/b","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/page/X"}]
            """#
        let rewritten = DevToolsDiscovery.rewrite(body, to: "localhost:9223")
        #expect(
            rewritten == #"""
                [{"description":"ws://localhost:9223/devtools/page/X is a page","devtoolsFrontendUrl":"/devtools/inspector.html?ws=localhost:9223/devtools/page/X","id":"X","url":"http://localhost:8000/?ws=a/b","webSocketDebuggerUrl":"ws://localhost:9223/devtools/page/X"}]
                """#
        )
        let version = #"{"Browser":"Chrome/120","webSocketDebuggerUrl":"ws://localhost:9222/devtools/browser/abc"}"#
        #expect(DevToolsDiscovery.rewrite(version, to: "127.0.0.1:1") == #"{"Browser":"Chrome/120","webSocketDebuggerUrl":"ws://127.0.0.1:1/devtools/browser/abc"}"#)
    }
}

@Suite("DevTools: the WebAuthn domain's types")
struct CDPWebAuthnTypesTests {
    static func options(_ changes: [String: JSONValue], removing: [String] = []) throws(CDPError) -> DevToolsAuthenticatorOptions {
        var members: [String: JSONValue] = ["protocol": .string("ctap2"), "transport": .string("usb")]
        for (key, value) in changes { members[key] = value }
        for key in removing { members.removeValue(forKey: key) }
        return try DevToolsAuthenticatorOptions(params: ["options": .object(members)])
    }

    static func refusal(_ changes: [String: JSONValue], removing: [String] = []) -> CDPError? {
        do {
            _ = try options(changes, removing: removing)
            return nil
        } catch {
            return error
        }
    }

    @Test("the domain's defaults: every feature off, presence simulated (auto), UV not verified, exportable")
    func defaults() throws {
        #expect(
            try Self.options([:]).createKeyRequest(name: "cdp-1")
                == .object([
                    "name": "cdp-1", "presence": "auto", "protocol": "ctap2.1", "hasResidentKey": .bool(false),
                    "hasUserVerification": .bool(false), "isUserVerified": .bool(false), "hasLargeBlob": .bool(false),
                    "hasCredBlob": .bool(false), "hasMinPinLength": .bool(false), "hasPrf": .bool(false),
                    "hasThirdPartyPayment": .bool(false), "exportable": .bool(true),
                ])
        )
    }

    @Test("every switch is carried; automaticPresenceSimulation false is presence prompt; u2f is u2f-only")
    func switches() throws {
        let all = try Self.options([
            "ctap2Version": "ctap2_1", "hasResidentKey": .bool(true), "hasUserVerification": .bool(true),
            "hasLargeBlob": .bool(true), "hasCredBlob": .bool(true), "hasMinPinLength": .bool(true), "hasPrf": .bool(true),
            "automaticPresenceSimulation": .bool(false), "isUserVerified": .bool(true),
            "defaultBackupEligibility": .bool(false), "defaultBackupState": .bool(false),
        ])
        let request = all.createKeyRequest(name: "cdp-2").object!
        for key in ["hasResidentKey", "hasUserVerification", "hasLargeBlob", "hasCredBlob", "hasMinPinLength", "hasPrf", "isUserVerified"] {
            #expect(request[key] == .bool(true), "\(key)")
        }
        #expect(request["presence"] == "prompt")
        #expect(try Self.options(["protocol": "u2f"]).latchkeyProtocol == "u2f-only")
        #expect(try Self.options(["ctap2Version": "ctap2_0"]).latchkeyProtocol == "ctap2.1")
    }

    @Test(
        "unknown fields, wrong types, missing or unknown enum values are invalid params; what a USB key cannot be is a server error",
        arguments: [
            (["extensions": JSONValue.array([])], [String](), -32602),
            (["hasResidentKey": "yes"], [], -32602),
            ([:], ["protocol"], -32602),
            ([:], ["transport"], -32602),
            (["protocol": "ctap3"], [], -32602),
            (["ctap2Version": "ctap2_2"], [], -32602),
            (["transport": "carrier-pigeon"], [], -32602),
            (["transport": "internal"], [], -32000),
            (["transport": "nfc"], [], -32000),
            (["defaultBackupEligibility": .bool(true)], [], -32000),
            (["defaultBackupState": .bool(true)], [], -32000),
        ] as [([String: JSONValue], [String], Int)]
    )
    func refusals(changes: [String: JSONValue], removing: [String], code: Int) {
        #expect(Self.refusal(changes, removing: removing)?.code == code)
    }

    @Test("params other than options, or no options, are invalid params")
    func paramsShape() {
        #expect(throws: CDPError.self) { try DevToolsAuthenticatorOptions(params: [:]) }
        #expect(throws: CDPError.self) {
            try DevToolsAuthenticatorOptions(params: ["options": .object(["protocol": "ctap2", "transport": "usb"]), "x": .null])
        }
    }

    static let resident = try! CDPWebAuthnTypesTests.options(["hasResidentKey": .bool(true), "hasLargeBlob": .bool(true)])

    static func credential(_ changes: [String: JSONValue], removing: [String] = []) -> [String: JSONValue] {
        var members: [String: JSONValue] = [
            "credentialId": "q83v+/8=", "isResidentCredential": .bool(true), "rpId": "example.com",
            "privateKey": "MIGH", "userHandle": "dXNlcg==", "signCount": .number(41),
        ]
        for (key, value) in changes { members[key] = value }
        for key in removing { members.removeValue(forKey: key) }
        return ["authenticatorId": "cdp-1", "credential": .object(members)]
    }

    @Test("addCredential's credential becomes latchkeyd's seed: standard base64 read into base64url")
    func seed() throws {
        let body = try CDPCredential.seedRequest(
            params: Self.credential(["largeBlob": "AQID", "userName": "alice", "userDisplayName": "Alice"]),
            options: Self.resident
        )
        #expect(
            body
                == .object([
                    "credentialId": "q83v-_8", "isResidentCredential": .bool(true), "rpId": "example.com",
                    "privateKey": "MIGH", "signCount": .number(41), "userHandle": "dXNlcg", "largeBlob": "AQID",
                    "userName": "alice", "userDisplayName": "Alice",
                ])
        )
    }

    @Test(
        "a credential latchkey cannot hold, or that breaks the domain's types, is refused",
        arguments: [
            (["isResidentCredential": JSONValue.bool(false)], [String](), -32000),
            ([:], ["rpId"], -32000),
            ([:], ["userHandle"], -32000),
            ([:], ["privateKey"], -32602),
            ([:], ["signCount"], -32602),
            (["signCount": .number(-1)], [], -32602),
            (["credentialId": "not base64!"], [], -32602),
            (["backupState": .bool(true)], [], -32000),
            (["transports": .array([])], [], -32602),
        ] as [([String: JSONValue], [String], Int)]
    )
    func seedRefusals(changes: [String: JSONValue], removing: [String], code: Int) {
        do {
            _ = try CDPCredential.seedRequest(params: Self.credential(changes, removing: removing), options: Self.resident)
            Issue.record("accepted")
        } catch {
            #expect(error.code == code, "\(error)")
        }
    }

    @Test("a resident credential on a key without resident keys, a largeBlob on one without largeBlob: Chromium's refusals")
    func seedOnWrongKey() throws {
        let plain = try Self.options([:])
        #expect(throws: CDPError.server("The Authenticator does not support Resident Credentials.")) {
            try CDPCredential.seedRequest(params: Self.credential([:]), options: plain)
        }
        let noBlob = try Self.options(["hasResidentKey": .bool(true)])
        #expect(throws: CDPError.self) {
            try CDPCredential.seedRequest(params: Self.credential(["largeBlob": "AQID"]), options: noBlob)
        }
    }

    @Test("latchkeyd's credential becomes the domain's: standard base64, backup flags false, no private key as empty")
    func credentialOut() {
        let listed = CDPCredential.from(latchkey: [
            "credentialId": "q83v-_8", "isResidentCredential": .bool(true), "rpId": "example.com",
            "privateKey": "MIGHAg", "userHandle": "dXNlcg", "signCount": .number(3), "largeBlob": "AQID",
            "userName": "alice", "rpName": "Example",
        ])
        #expect(
            listed
                == .object([
                    "credentialId": "q83v+/8=", "isResidentCredential": .bool(true), "rpId": "example.com",
                    "privateKey": "MIGHAg==", "userHandle": "dXNlcg==", "signCount": .number(3), "largeBlob": "AQID",
                    "backupEligibility": .bool(false), "backupState": .bool(false), "userName": "alice",
                    "userDisplayName": "",
                ])
        )
        // An event of a non-discoverable credential: nothing stored, no private key.
        let event = CDPCredential.from(latchkey: ["credentialId": "AQ", "discoverable": .bool(false), "rpId": "a.example"])
        #expect(event.object?["isResidentCredential"] == .bool(false))
        #expect(event.object?["privateKey"] == "")
        #expect(event.object?["signCount"] == .number(0))
    }

    @Test(
        "latchkeyd's credential events and the domain's; seeding (import) is not announced",
        arguments: [
            ("credential.created", "makeCredential", "WebAuthn.credentialAdded"),
            ("credential.created", "import", nil),
            ("credential.asserted", "", "WebAuthn.credentialAsserted"),
            ("credential.deleted", "", "WebAuthn.credentialDeleted"),
            ("credential.updated", "", "WebAuthn.credentialUpdated"),
            ("presence.requested", "", nil),
            ("key.deleted", "", nil),
        ] as [(String, String, String?)]
    )
    func events(name: String, origin: String, method: String?) {
        #expect(CDPCredentialEvent.method(for: name, fields: origin.isEmpty ? [:] : ["origin": .string(origin)]) == method)
    }

    @Test("CDP's binary both ways: standard and url-safe base64 read, standard with padding written")
    func binary() {
        #expect(CDPBinary.latchkey("+/+/") == "-_-_")
        #expect(CDPBinary.latchkey("-_-_") == "-_-_")
        #expect(CDPBinary.latchkey("AQ==") == "AQ")
        #expect(CDPBinary.latchkey("A") == nil)
        #expect(CDPBinary.cdp("AQ") == "AQ==")
        #expect(CDPBinary.cdp("-_-_") == "+/+/")
    }

    @Test("server-sent events: one JSON object per event, across chunk boundaries; comments skipped")
    func sse() {
        var parser = SSEParser()
        #expect(parser.feed(": keep-alive\n\nevent: credential.created\nid: 4\ndata: {\"event\":\"credential.cr").isEmpty)
        let events = parser.feed("eated\",\"key\":\"cdp-1\"}\n\nevent: x\r\ndata: {\"event\":\"x\"}\r\n\r\n")
        #expect(events == [["event": "credential.created", "key": "cdp-1"], ["event": "x"]])
    }
}
