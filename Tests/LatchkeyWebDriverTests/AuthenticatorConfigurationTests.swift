// Add Virtual Authenticator's parameters (WebAuthn §11 "Authenticator
// Configuration") and the latchkeyd key they become.

import LatchkeyContract
import LatchkeyJSON
import Testing

@testable import LatchkeyWebDriver

@Suite("WebDriver: Authenticator Configuration")
struct AuthenticatorConfigurationTests {
    /// What Selenium's VirtualAuthenticatorOptions() sends by default.
    static let selenium: JSONValue = .object([
        "protocol": .string("ctap2"), "transport": .string("usb"), "hasResidentKey": .bool(false),
        "hasUserVerification": .bool(false), "isUserConsenting": .bool(true), "isUserVerified": .bool(false),
    ])

    static func configuration(_ changes: [String: JSONValue], removing: [String] = []) throws(WebDriverError)
        -> AuthenticatorConfiguration
    {
        var members = selenium.object!
        for (key, value) in changes { members[key] = value }
        for key in removing { members.removeValue(forKey: key) }
        return try AuthenticatorConfiguration(parameters: .object(members))
    }

    static func refusal(_ changes: [String: JSONValue], removing: [String] = []) -> WebDriverError? {
        do {
            _ = try configuration(changes, removing: removing)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "Selenium's defaults: an exportable CTAP 2.1 key with presence auto and every switch the spec defaults off, off"
    )
    func defaults() throws {
        let request = try Self.configuration([:]).createKeyRequest(name: "wd-1")
        #expect(
            request
                == .object([
                    "name": .string("wd-1"), "presence": .string("auto"), "protocol": .string("ctap2.1"),
                    "hasResidentKey": .bool(false), "hasUserVerification": .bool(false), "isUserVerified": .bool(false),
                    "hasLargeBlob": .bool(false), "hasCredBlob": .bool(false), "hasMinPinLength": .bool(false),
                    "hasPrf": .bool(false), "hasThirdPartyPayment": .bool(false), "exportable": .bool(true),
                ])
        )
    }

    @Test(
        "protocol names map to latchkeyd's",
        arguments: [("ctap2", "ctap2.1"), ("ctap2_1", "ctap2.1"), ("ctap1/u2f", "u2f-only")]
    )
    func protocols(_ name: String, _ latchkey: String) throws {
        #expect(try Self.configuration(["protocol": .string(name)]).latchkeyProtocol == latchkey)
    }

    @Test("the switches pass through; isUserConsenting false is presence deny")
    func switches() throws {
        let configuration = try Self.configuration([
            "hasResidentKey": .bool(true), "hasUserVerification": .bool(true), "isUserVerified": .bool(true),
            "isUserConsenting": .bool(false), "hasLargeBlob": .bool(true), "hasPrf": .bool(true),
        ])
        let request = configuration.createKeyRequest(name: "wd-2").object!
        #expect(request["presence"] == .string("deny"))
        #expect(request["hasResidentKey"] == .bool(true))
        #expect(request["hasUserVerification"] == .bool(true))
        #expect(request["isUserVerified"] == .bool(true))
        #expect(request["hasLargeBlob"] == .bool(true))
        #expect(request["hasPrf"] == .bool(true))
        #expect(request["hasCredBlob"] == .bool(false))
    }

    @Test("the extensions array switches the extensions on")
    func extensions() throws {
        let configuration = try Self.configuration([
            "extensions": .array([.string("largeBlob"), .string("credBlob"), .string("minPinLength"), .string("prf")])
        ])
        #expect(configuration[.largeBlob] && configuration[.credBlob] && configuration[.minPinLength])
        #expect(configuration[.prf] && !configuration[.residentKeys])
    }

    @Test(
        "invalid argument: wrong types, unknown keys, missing or unknown protocol and transport, a transport not usb",
        arguments: [
            (["hasResidentKey": JSONValue.string("yes")], [String]()),
            (["isUserVerified": .number(1)], []),
            (["protocol": .number(2)], []),
            (["protocol": .string("ctap3")], []),
            (["transport": .string("internal")], []),
            (["transport": .string("nfc")], []),
            (["transport": .string("carrier pigeon")], []),
            (["colour": .string("blue")], []),
            (["extensions": .string("prf")], []),
            ([:], ["protocol"]),
            ([:], ["transport"]),
        ]
    )
    func invalidArgument(_ changes: [String: JSONValue], _ removing: [String]) {
        let error = Self.refusal(changes, removing: removing)
        #expect(error?.code == "invalid argument")
        #expect(error?.status == 400)
    }

    @Test("a non-object is invalid argument")
    func notAnObject() {
        #expect(throws: WebDriverError.self) { try AuthenticatorConfiguration(parameters: .array([])) }
    }

    @Test(
        "unsupported operation: an unknown extension, backup eligibility",
        arguments: [
            ["extensions": JSONValue.array([.string("uvm")])],
            ["defaultBackupEligibility": .bool(true)],
            ["defaultBackupState": .bool(true)],
        ]
    )
    func unsupported(_ changes: [String: JSONValue]) {
        let error = Self.refusal(changes)
        #expect(error?.code == "unsupported operation")
        #expect(error?.status == 500)
    }

    @Test("the transport refusal says why")
    func transportMessage() {
        #expect(Self.refusal(["transport": .string("internal")])?.message.contains("USB") == true)
    }

    @Test("new key names are authenticatorIds and key names")
    func names() {
        let name = VirtualAuthenticators.newKeyName()
        #expect(name.hasPrefix("wd-") && name.count == 19)
        #expect(name != VirtualAuthenticators.newKeyName())
    }
}
