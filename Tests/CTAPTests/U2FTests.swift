// CTAP1/U2F over CTAPHID_MSG: VERSION, REGISTER, AUTHENTICATE in its three
// modes, and the status words for malformed APDUs.

import Testing

@testable import CTAP

/// An extended-length APDU as python-fido2 sends it: 00 | Lc(2) | data | Le(2),
/// with Lc = 0 when there is no data.
func apdu(ins: UInt8, p1: UInt8 = 0, data: [UInt8] = [], cla: UInt8 = 0) -> [UInt8] {
    [cla, ins, p1, 0, 0, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data + [0, 0]
}

func statusWord(_ response: [UInt8]) -> UInt16 {
    UInt16(response[response.count - 2]) << 8 | UInt16(response[response.count - 1])
}

struct U2FRegistration {
    var publicKey: [UInt8]
    var keyHandle: [UInt8]
    var certificate: [UInt8]
    var signature: [UInt8]

    init(_ response: [UInt8]) throws {
        #expect(response[0] == 0x05)
        publicKey = Array(response[1..<66])
        let length = Int(response[66])
        keyHandle = Array(response[67..<67 + length])
        // The certificate is one DER SEQUENCE with a two-byte length (0x30 0x82 hi lo).
        let start = 67 + length
        #expect(response[start] == 0x30 && response[start + 1] == 0x82)
        let certificateLength = 4 + (Int(response[start + 2]) << 8 | Int(response[start + 3]))
        certificate = Array(response[start..<start + certificateLength])
        signature = Array(response[(start + certificateLength)..<(response.count - 2)])
    }
}

@Suite("U2F")
struct U2FTests {
    let challenge = Array(repeating: UInt8(0x11), count: 32)
    let application = Array(repeating: UInt8(0x22), count: 32)

    @Test("VERSION answers U2F_V2")
    func version() async {
        let response = await TestKey().authenticator.handleAPDU(apdu(ins: 0x03))
        #expect(response == Array("U2F_V2".utf8) + [0x90, 0x00])
        // The other encodings work too: no body, short Le, extended Le.
        for bytes: [UInt8] in [[0, 3, 0, 0], [0, 3, 0, 0, 0], [0, 3, 0, 0, 0, 0, 0]] {
            #expect(await TestKey().authenticator.handleAPDU(bytes) == Array("U2F_V2".utf8) + [0x90, 0x00])
        }
    }

    @Test("REGISTER then AUTHENTICATE: fido-u2f signatures verify with OpenSSL")
    func registerAndAuthenticate() async throws {
        let key = TestKey()
        let response = await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application))
        #expect(statusWord(response) == 0x9000)
        let registration = try U2FRegistration(response)
        let signed = [0x00] + application + challenge + registration.keyHandle + registration.publicKey
        #expect(opensslVerify(certificate: registration.certificate, signature: registration.signature, message: signed))
        #expect(registration.certificate == sharedIdentity.certificateChain[0])
        #expect(key.presence.requests.map(\.operation) == [.u2fRegister])

        let spki = hex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + registration.publicKey
        var lastCounter: UInt32 = 0
        for (p1, flags) in [(UInt8(0x03), UInt8(0x01)), (0x08, 0x00)] {
            let request = challenge + application + [UInt8(registration.keyHandle.count)] + registration.keyHandle
            let answer = await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: p1, data: request))
            #expect(statusWord(answer) == 0x9000)
            #expect(answer[0] == flags)
            let counter = answer[1..<5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(counter > lastCounter)
            lastCounter = counter
            let signature = Array(answer[5..<(answer.count - 2)])
            #expect(opensslVerify(spki: spki, signature: signature, message: application + Array(answer[0..<5]) + challenge))
        }
        #expect(key.presence.requests.map(\.operation) == [.u2fRegister, .u2fAuthenticate])
    }

    @Test("check-only says 'conditions not satisfied' for our handle and 'wrong data' for others")
    func checkOnly() async throws {
        let key = TestKey()
        let registration = try U2FRegistration(await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application)))
        let ours = challenge + application + [UInt8(registration.keyHandle.count)] + registration.keyHandle
        #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x07, data: ours))) == 0x6985)
        let otherApp = challenge + Array(repeating: 0x33, count: 32) + [UInt8(registration.keyHandle.count)]
            + registration.keyHandle
        #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x07, data: otherApp))) == 0x6A80)
        #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x03, data: otherApp))) == 0x6A80)
    }

    @Test("a U2F registration is usable through CTAP2 getAssertion with the same rpIdHash")
    func crossProtocol() async throws {
        let key = TestKey()
        let appId = "https://example.com/app-id.json"
        let application = sha256(Array(appId.utf8))
        let registration = try U2FRegistration(await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application)))
        var get = GetAssertionBuilder()
        get.rpId = appId
        get.allowList = [registration.keyHandle]
        let assertion = try Assertion(try await key.getAssertion(get))
        let spki = hex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + registration.publicKey
        #expect(opensslVerify(spki: spki, signature: assertion.signature, message: assertion.authData + get.clientDataHash))
    }

    @Test("a U2F prompt names the site when a credential stored for its application parameter tells it")
    func siteOfTheApplicationParameter() async throws {
        let key = TestKey()
        let known = sha256(Array("example.com".utf8))
        var create = MakeCredentialBuilder()
        create.rk = true
        _ = try await key.makeCredential(create)
        for application in [known, application] {
            let registration = try U2FRegistration(
                await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application))
            )
            let sign = challenge + application + [UInt8(registration.keyHandle.count)] + registration.keyHandle
            #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x03, data: sign))) == 0x9000)
        }
        let u2f = key.presence.requests.filter { $0.operation == .u2fRegister || $0.operation == .u2fAuthenticate }
        #expect(u2f.map(\.operation) == [.u2fRegister, .u2fAuthenticate, .u2fRegister, .u2fAuthenticate])
        #expect(u2f.map(\.rpId) == ["example.com", "example.com", nil, nil])
        #expect(u2f.map(\.rpIdHash) == [known, known, application, application])
    }

    @Test("presence refused: REGISTER and enforce answer 'conditions not satisfied'")
    func presenceRefused() async throws {
        let key = TestKey()
        let registration = try U2FRegistration(await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application)))
        key.presence.enqueue(.denied)
        #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application))) == 0x6985)
        key.presence.enqueue(.timedOut)
        let request = challenge + application + [UInt8(registration.keyHandle.count)] + registration.keyHandle
        #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x03, data: request))) == 0x6985)
    }

    @Test("malformed APDUs get ISO status words, never a crash")
    func malformed() async {
        let key = TestKey()
        let cases: [([UInt8], UInt16)] = [
            ([], 0x6700), ([0, 1, 0], 0x6700), ([0, 3, 0, 0, 0, 0], 0x6700),
            (apdu(ins: 0x03, cla: 0x80), 0x6E00),
            (apdu(ins: 0x42), 0x6D00),
            (apdu(ins: 0x03, data: [1]), 0x6700),
            (apdu(ins: 0x01, data: Array(repeating: 0, count: 63)), 0x6700),
            (apdu(ins: 0x02, p1: 0x03, data: Array(repeating: 0, count: 64)), 0x6700),
            (apdu(ins: 0x02, p1: 0x03, data: Array(repeating: 0, count: 64) + [5, 1, 2]), 0x6700),
            (apdu(ins: 0x02, p1: 0x03, data: Array(repeating: 0, count: 64) + [3, 1, 2, 3]), 0x6A80),
            ([0, 1, 0, 0, 0, 0, 64, 1, 2], 0x6700),  // extended Lc beyond the data
            ([0, 1, 0, 0, 5, 1, 2], 0x6700),  // short Lc beyond the data
        ]
        for (bytes, expected) in cases {
            #expect(statusWord(await key.authenticator.handleAPDU(bytes)) == expected, "\(bytes)")
        }
        #expect(key.presence.requests.isEmpty)
        // An unknown P1 for AUTHENTICATE with a valid handle.
        let registration = try? U2FRegistration(await key.authenticator.handleAPDU(apdu(ins: 0x01, data: challenge + application)))
        if let registration {
            let request = challenge + application + [UInt8(registration.keyHandle.count)] + registration.keyHandle
            #expect(statusWord(await key.authenticator.handleAPDU(apdu(ins: 0x02, p1: 0x09, data: request))) == 0x6A86)
        }
    }

    @Test("a key without U2F refuses every APDU")
    func disabled() async {
        #expect(statusWord(await TestKey(u2f: false).authenticator.handleAPDU(apdu(ins: 0x03))) == 0x6D00)
    }
}

import LatchkeyCrypto

func sha256(_ bytes: [UInt8]) -> [UInt8] { SHA256.hash(bytes) }
