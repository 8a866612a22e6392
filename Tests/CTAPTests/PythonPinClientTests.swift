// python-fido2 as the platform for clientPIN: Tests/python/pin_client.py runs
// ClientPin with PinProtocolV1 and V2 and a Fido2Client that requires user
// verification, and sends every CTAP2 message to this test, which answers from
// an in-process authenticator. A client that shares no code with latchkey.
// Tests/python/credman_config_client.py does the same with python-fido2's
// CredentialManagement and Config classes.

import Foundation
import Testing

@testable import CTAP

@Suite("clientPIN with python-fido2 as the platform")
struct PythonPinClientTests {
    @Test("python-fido2's ClientPin (protocols One and Two) and Fido2Client with UV required work against the key")
    func pythonClient() async throws {
        let key = TestKey()
        try await expectPythonClient("pin_client.py", against: key, checks: 26, callsOver: 30)
        #expect(try await key.pinRetries().0 == 8)
    }

    @Test("python-fido2's CredentialManagement and Config (protocols One and Two) work against the key")
    func pythonCredentialManagementAndConfig() async throws {
        let key = TestKey()
        try await expectPythonClient("credman_config_client.py", against: key, checks: 54, callsOver: 60)
        // What the script left behind, read here rather than taken on its word:
        // every credential deleted, alwaysUv off again, minPINLength 6 and the
        // forced change done with the PIN it chose.
        #expect(try key.store.credentialCount() == 0)
        let info = try await key.info()
        #expect(try info.required(0x0D, "minPINLength").intValue() == 6)
        #expect(try info.required(0x0C, "forcePINChange").boolValue() == false)
        #expect(try info.required(0x04, "options").mapValue()[text: "alwaysUv"] == false)
        #expect(try await key.pinToken("654321", protocol: 2, permissions: 0x04, rpId: nil).0 == .ok)
    }
}

/// Runs `script`, a python-fido2 client from Tests/python, against `key`, and expects it to
/// exit 0 having passed `checks` checks in more than `calls` calls (so it really talked to
/// the key).
func expectPythonClient(
    _ script: String,
    against key: TestKey,
    checks: Int,
    callsOver calls: Int,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let (exitCode, output, made) = try await runPythonClient(script: script) { request in
        await key.authenticator.handleCBOR(request)
    }
    #expect(exitCode == 0, "\(script) said: \(output)", sourceLocation: sourceLocation)
    #expect(output.contains("DONE \(checks) checks"), "\(output)", sourceLocation: sourceLocation)
    #expect(made > calls, "the client really talked to the key", sourceLocation: sourceLocation)
}

/// Runs a script from Tests/python that sends `CALL <hex>` lines and reads one hex answer
/// line for each from `answer`. Returns the exit code, every other line it printed, and how
/// many calls it made.
func runPythonClient(
    script: String,
    answer: ([UInt8]) async -> [UInt8]
) async throws -> (Int32, String, Int) {
    let (process, stdin, stdout) = try startPython(script)

    var log = ""
    var calls = 0
    var buffer: [UInt8] = []
    let reader = stdout.fileHandleForReading
    while true {
        guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else {
            let data = reader.availableData
            if data.isEmpty { break }
            buffer.append(contentsOf: data)
            continue
        }
        let line = String(decoding: buffer[..<newline], as: UTF8.self)
        buffer.removeSubrange(...newline)
        guard line.hasPrefix("CALL ") else {
            log += line + "\n"
            continue
        }
        calls += 1
        let response = await answer(hex(String(line.dropFirst(5))))
        let encoded = response.map { String(format: "%02x", $0) }.joined() + "\n"
        stdin.fileHandleForWriting.write(Data(encoded.utf8))
    }
    log += String(decoding: buffer, as: UTF8.self)
    try stdin.fileHandleForWriting.close()
    process.waitUntilExit()
    return (process.terminationStatus, log, calls)
}

/// Starts a script from Tests/python with python3 (LATCHKEY_PYTHON overrides), its
/// standard output and standard error on one pipe.
func startPython(_ script: String) throws -> (process: Process, stdin: Pipe, stdout: Pipe) {
    let scriptURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("python").appendingPathComponent(script)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    let python = ProcessInfo.processInfo.environment["LATCHKEY_PYTHON"] ?? "python3"
    process.arguments = [python, scriptURL.path]
    let stdin = Pipe()
    let stdout = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stdout
    try process.run()
    return (process, stdin, stdout)
}
