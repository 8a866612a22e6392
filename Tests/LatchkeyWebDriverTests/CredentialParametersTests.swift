// Add Credential's parameters (WebAuthn §11 "Credential Parameters") as
// Selenium's Python bindings send them, the control API request they
// become, and Get Credentials' answer.

import LatchkeyJSON
import Testing

@testable import LatchkeyWebDriver

@Suite("WebDriver: Credential Parameters")
struct CredentialParametersTests {
    /// Credential.create_resident_credential(...).to_dict(): padded base64url.
    static let resident: [String: JSONValue] = [
        "credentialId": .string("AQID"), "isResidentCredential": .bool(true), "rpId": .string("example.com"),
        "privateKey": .string("MIGHAgEAMBMGByqGSM49AgE="), "signCount": .number(41),
        "userHandle": .string("dXNlci0x"), "authenticatorId": .string("wd-1"),
    ]

    static func refusal(_ changes: [String: JSONValue], removing: [String] = []) -> WebDriverError? {
        var members = resident
        for (key, value) in changes { members[key] = value }
        for key in removing { members.removeValue(forKey: key) }
        do {
            _ = try CredentialParameters(parameters: .object(members), supportsLargeBlob: true)
            return nil
        } catch {
            return error
        }
    }

    @Test("a resident credential becomes the seed request, base64url unpadded")
    func seed() throws {
        let parameters = try CredentialParameters(parameters: .object(Self.resident), supportsLargeBlob: false)
        #expect(
            parameters.seedRequest
                == .object([
                    "credentialId": .string("AQID"), "isResidentCredential": .bool(true),
                    "rpId": .string("example.com"),
                    "privateKey": .string("MIGHAgEAMBMGByqGSM49AgE"), "signCount": .number(41),
                    "userHandle": .string("dXNlci0x"),
                ])
        )
    }

    @Test("a large blob goes along only to a key with the largeBlob extension")
    func largeBlob() throws {
        var members = Self.resident
        members["largeBlob"] = .string("aGVsbG8")
        #expect(try CredentialParameters(parameters: .object(members), supportsLargeBlob: true).largeBlob == "aGVsbG8")
        #expect(try CredentialParameters(parameters: .object(members), supportsLargeBlob: false).largeBlob == nil)
    }

    @Test("signCount null is a counter from 0; 41.0 is 41")
    func signCount() throws {
        var members = Self.resident
        members["signCount"] = .null
        #expect(try CredentialParameters(parameters: .object(members), supportsLargeBlob: false).signCount == 0)
        members["signCount"] = .number(41)
        #expect(try CredentialParameters(parameters: .object(members), supportsLargeBlob: false).signCount == 41)
    }

    @Test(
        "invalid argument for missing or ill-typed parameters",
        arguments: [
            ([String: JSONValue](), ["credentialId"]),
            (["credentialId": .string("not base64url!")], []),
            (["credentialId": .number(7)], []),
            ([:], ["isResidentCredential"]),
            (["isResidentCredential": .string("true")], []),
            ([:], ["rpId"]),
            (["rpId": .string("https://example.com")], []),
            (["rpId": .string("")], []),
            ([:], ["privateKey"]),
            (["privateKey": .string("%%%")], []),
            ([:], ["userHandle"]),
            (["userHandle": .bool(true)], []),
            ([:], ["signCount"]),
            (["signCount": .number(-1)], []),
            (["signCount": .number(4_294_967_296)], []),
            (["signCount": .number(1.5)], []),
            (["signCount": .string("1")], []),
            (["largeBlob": .number(1)], []),
            (["userName": .number(1)], []),
            (["backupState": .string("no")], []),
        ]
    )
    func invalidArgument(_ changes: [String: JSONValue], _ removing: [String]) {
        let error = Self.refusal(changes, removing: removing)
        #expect(error?.code == "invalid argument", "\(changes) without \(removing): \(String(describing: error))")
        #expect(error?.status == 400)
    }

    @Test("a non-resident credential and backup flags are unsupported operations")
    func unsupported() {
        let nonResident = Self.refusal(["isResidentCredential": .bool(false)], removing: ["userHandle"])
        #expect(nonResident?.code == "unsupported operation")
        #expect(nonResident?.message.contains("isResidentCredential true") == true)
        #expect(Self.refusal(["backupEligibility": .bool(true)])?.code == "unsupported operation")
        #expect(Self.refusal(["backupState": .bool(false)]) == nil)
    }

    @Test("RP IDs are domains")
    func rpIds() {
        for valid in ["example.com", "localhost", "a-b.example", "xn--bcher-kva.example"] {
            #expect(CredentialParameters.isValidRPID(valid), "\(valid)")
        }
        for invalid in ["", "example.com/", "http://example.com", "-a.com", "a..b", "ex ample.com", "é.com"] {
            #expect(!CredentialParameters.isValidRPID(invalid), "\(invalid)")
        }
    }

    @Test("Get Credentials answers §11's fields from latchkeyd's document")
    func webDriverCredential() {
        let stored: JSONValue = .object([
            "id": .string("AQID"), "credentialId": .string("AQID"), "isResidentCredential": .bool(true),
            "rpId": .string("example.com"), "userId": .string("dXNlci0x"), "userHandle": .string("dXNlci0x"),
            "userName": .string("alice"), "algorithm": .number(-7), "credProtect": .number(1),
            "privateKey": .string("MIGH"), "largeBlob": .string("aGk"),
        ])
        #expect(
            CredentialParameters.webDriverCredential(from: stored)
                == .object([
                    "credentialId": .string("AQID"), "isResidentCredential": .bool(true),
                    "rpId": .string("example.com"),
                    "privateKey": .string("MIGH"), "userHandle": .string("dXNlci0x"), "signCount": .number(0),
                    "largeBlob": .string("aGk"), "backupEligibility": .bool(false), "backupState": .bool(false),
                    "userName": .string("alice"), "userDisplayName": .string(""),
                ])
        )
    }
}
