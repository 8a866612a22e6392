// The intermediary's WebDriver surface: which requests it answers, and the
// error documents it answers with (WebDriver §6.6).

import Foundation
import NIOCore
import LatchkeyJSON
import Testing

@testable import LatchkeyWebDriver

@Suite("WebDriver: routes and errors")
struct WebDriverProtocolTests {
    @Test(
        "§11 commands are recognised, with or without a URL prefix",
        arguments: [
            ("POST", "/session/s1/webauthn/authenticator", WebDriverRoute.webAuthn(session: "s1", .addAuthenticator)),
            (
                "DELETE", "/session/s1/webauthn/authenticator/wd-1",
                .webAuthn(session: "s1", .removeAuthenticator("wd-1"))
            ),
            (
                "POST", "/session/s1/webauthn/authenticator/wd-1/credential",
                .webAuthn(session: "s1", .addCredential("wd-1"))
            ),
            (
                "GET", "/session/s1/webauthn/authenticator/wd-1/credentials",
                .webAuthn(session: "s1", .getCredentials("wd-1"))
            ),
            (
                "DELETE", "/session/s1/webauthn/authenticator/wd-1/credentials/AQID%3D",
                .webAuthn(session: "s1", .removeCredential("wd-1", credential: "AQID="))
            ),
            (
                "DELETE", "/session/s1/webauthn/authenticator/wd-1/credentials",
                .webAuthn(session: "s1", .removeAllCredentials("wd-1"))
            ),
            ("POST", "/session/s1/webauthn/authenticator/wd-1/uv", .webAuthn(session: "s1", .setUserVerified("wd-1"))),
            (
                "POST", "/session/s1/webauthn/authenticator/wd-1/credentials/AQID/props",
                .webAuthn(session: "s1", .setCredentialProperties("wd-1", credential: "AQID"))
            ),
            ("POST", "/wd/hub/session/s1/webauthn/authenticator", .webAuthn(session: "s1", .addAuthenticator)),
            ("GET", "/session/s1/webauthn/authenticator", .webAuthn(session: "s1", .unknownMethod(allowed: ["POST"]))),
            (
                "PUT", "/session/s1/webauthn/authenticator/a/credentials",
                .webAuthn(session: "s1", .unknownMethod(allowed: ["DELETE", "GET"]))
            ),
            ("GET", "/session/s1/webauthn/other", .webAuthn(session: "s1", .unknown)),
        ]
    )
    func webAuthn(_ method: String, _ path: String, _ route: WebDriverRoute) {
        #expect(WebDriverRoute(method: method, path: path) == route)
    }

    @Test(
        "sessions and everything else",
        arguments: [
            ("POST", "/session", WebDriverRoute.newSession),
            ("POST", "/wd/hub/session", .newSession),
            ("DELETE", "/session/s1", .deleteSession("s1")),
            ("GET", "/session/s1", .forward(session: "s1")),
            ("POST", "/session/s1/url", .forward(session: "s1")),
            ("GET", "/status", .forward(session: nil)),
            ("GET", "/", .forward(session: nil)),
        ]
    )
    func others(_ method: String, _ path: String, _ route: WebDriverRoute) {
        #expect(WebDriverRoute(method: method, path: path) == route)
    }

    @Test("an error is {value: {error, message, stacktrace}} with the table's status")
    func errorDocument() throws {
        let error = WebDriverError.noSuchAuthenticator("wd-x")
        #expect(error.status == 400)
        let text = try #require(String(data: error.document.text, encoding: .utf8))
        #expect(text.hasPrefix(#"{"value":{"error":"invalid argument","message":"no such virtual authenticator: wd-x"#))
        #expect(text.hasSuffix(#","stacktrace":""}}"#))
        #expect(WebDriverError.invalidSessionId("s").status == 404)
        #expect(WebDriverError.unknownCommand("GET", "/x").status == 404)
        #expect(WebDriverError.unknownMethod("GET", "/x", allowed: ["POST"]).status == 405)
        #expect(WebDriverError.unsupportedOperation("x").status == 500)
    }

    @Test("a New Session answer's session ID, W3C or legacy")
    func sessionIds() {
        let w3c = ByteBuffer(string: #"{"value":{"sessionId":"abc","capabilities":{}}}"#)
        let legacy = ByteBuffer(string: #"{"sessionId":"def","status":0,"value":{}}"#)
        #expect(IntermediaryResponder.sessionId(of: w3c) == "abc")
        #expect(IntermediaryResponder.sessionId(of: legacy) == "def")
        #expect(IntermediaryResponder.sessionId(of: ByteBuffer(string: "not json")) == nil)
    }

    @Test("JSON keeps booleans, integers and fractions apart")
    func json() {
        #expect(JSONValue.parse(Array("true".utf8)) == .bool(true))
        #expect(JSONValue.parse(Array("1".utf8))?.integer == 1)
        #expect(JSONValue.parse(Array("41.0".utf8))?.integer == 41)
        #expect(JSONValue.parse(Array("1.5".utf8)) == .number(1.5))
        #expect(JSONValue.parse(Array("1.5".utf8))?.integer == nil)
        #expect(JSONValue.parse(Array("true".utf8))?.integer == nil)
        #expect(String(data: JSONValue.number(4_294_967_295).text, encoding: .utf8) == "4294967295")
        #expect(JSONValue.parse(Array(#"{"a":[null]}"#.utf8)) == .object(["a": .array([.null])]))
        #expect(JSONValue.parse(Array("{".utf8)) == nil)
    }

    @Test("base64url: padded or not in, unpadded out")
    func base64url() {
        #expect(Base64URL.canonical("AQID") == "AQID")
        #expect(Base64URL.canonical("AQI=") == "AQI")
        #expect(Base64URL.canonical("-_8=") == "-_8")
        #expect(Base64URL.canonical("a+b/") == nil)
        #expect(Base64URL.canonical("A") == nil)
    }
}
