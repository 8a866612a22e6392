// Feeds raw makeCredential / getAssertion / U2F outputs to a relying party
// library that shares no code with latchkey: python-fido2's Fido2Server and
// attestation verifiers (Tests/python/verify_raw_outputs.py).

import CBOR
import Foundation
import Testing

@testable import CTAP

@Suite("relying party verification (python-fido2)")
struct RelyingPartyVerificationTests {
    static let origin = "https://example.com"

    func clientData(type: String, challenge: [UInt8]) -> [UInt8] {
        let encoded = Data(challenge).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return Array(#"{"type":"\#(type)","challenge":"\#(encoded)","origin":"\#(Self.origin)","crossOrigin":false}"#.utf8)
    }

    func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test("python-fido2 accepts every attestation format, algorithm and assertion, and U2F")
    func verifyWithPythonFido2() async throws {
        var registrations: [[String: Any]] = []
        for attestation in AttestationMode.allCases {
            for algorithm in [-7, -8] {
                for discoverable in [false, true] {
                    let key = TestKey(attestation: attestation)
                    let challenge = sha256(Array("register \(attestation) \(algorithm) \(discoverable)".utf8))
                    let registrationClientData = clientData(type: "webauthn.create", challenge: challenge)
                    var create = MakeCredentialBuilder()
                    create.clientDataHash = sha256(registrationClientData)
                    create.algorithms = [algorithm]
                    create.rk = discoverable
                    let (status, body) = try await key.send(.makeCredential, create.cbor)
                    #expect(status == .ok)
                    let response = try #require(body).mapValue()
                    let authData = try response.required(2, "authData").bytesValue()
                    let made = try MadeCredential(response: try #require(body), clientDataHash: create.clientDataHash)

                    let assertionChallenge = sha256(challenge)
                    let assertionClientData = clientData(type: "webauthn.get", challenge: assertionChallenge)
                    var get = GetAssertionBuilder()
                    get.clientDataHash = sha256(assertionClientData)
                    if !discoverable { get.allowList = [made.credentialId] }
                    let assertion = try Assertion(try await key.getAssertion(get))
                    var assertionCase: [String: Any] = [
                        "challenge": hexString(assertionChallenge),
                        "clientDataJSON": hexString(assertionClientData),
                        "authenticatorData": hexString(assertion.authData),
                        "signature": hexString(assertion.signature),
                        "credentialId": hexString(assertion.credentialId),
                    ]
                    if let userHandle = try assertion.user?.required("id").bytesValue() {
                        assertionCase["userHandle"] = hexString(userHandle)
                    }
                    registrations.append([
                        "rpId": "example.com", "origin": Self.origin,
                        "challenge": hexString(challenge),
                        "clientDataJSON": hexString(registrationClientData),
                        "fmt": try response.required(1, "fmt").textValue(),
                        "authData": hexString(authData),
                        "attStmt": hexString(try response.required(3, "attStmt").encoded()),
                        "aaguid": hexString(testAAGUID),
                        "assertion": assertionCase,
                    ])
                }
            }
        }

        let key = TestKey()
        let challenge = sha256(Array("u2f challenge".utf8))
        let application = sha256(Array("https://example.com".utf8))
        let registration = await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application))
        let keyHandle = try U2FRegistration(registration).keyHandle
        let signature = await key.authenticator.handleAPDU(
            apdu(ins: 0x02, p1: 0x03, data: challenge + application + [UInt8(keyHandle.count)] + keyHandle)
        )
        let u2f: [[String: Any]] = [[
            "application": hexString(application), "challenge": hexString(challenge),
            "registrationData": hexString(Array(registration.dropLast(2))),
            "signatureData": hexString(Array(signature.dropLast(2))),
        ]]

        let document = try JSONSerialization.data(withJSONObject: ["registrations": registrations, "u2f": u2f])
        let (exitCode, output) = try runPython(script: "verify_raw_outputs.py", input: document)
        #expect(exitCode == 0, "python-fido2 said: \(output)")
        #expect(output.contains("verified 12 registrations"), "\(output)")
    }
}

/// Runs a script from Tests/python with python3 (LATCHKEY_PYTHON overrides),
/// feeding `input` on stdin; returns the exit code and everything it printed.
func runPython(script: String, input: Data) throws -> (Int32, String) {
    let (process, stdin, stdout) = try startPython(script)
    stdin.fileHandleForWriting.write(input)
    try stdin.fileHandleForWriting.close()
    let output = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}
