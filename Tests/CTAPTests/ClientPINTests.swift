// authenticatorClientPIN (CTAP 2.1 §6.5.5): every subcommand's success and
// each error path with its exact status and order, retries persistence,
// lockout and power cycles, driven by the OpenSSL platform in PinPlatform.swift.

import CBOR
import Synchronization
import Testing

@testable import CTAP

@Suite("authenticatorClientPIN")
struct ClientPINTests {
    static let protocols = [1, 2]

    func send(_ key: TestKey, _ request: CBORValue) async throws -> CTAPStatus {
        try await key.send(.clientPIN, request).0
    }

    // MARK: framing and dispatch

    @Test("malformed requests and unknown subcommands get their status")
    func framing() async throws {
        let key = TestKey()
        #expect(try await key.sendRaw([0x06]).0 == .missingParameter, "no parameters")
        #expect(try await key.sendRaw([0x06, 0x80]).0 == .cborUnexpectedType, "an array")
        #expect(try await send(key, .intMap([(1, 2)])) == .missingParameter, "no subCommand")
        #expect(try await send(key, .intMap([(2, "getPINRetries")])) == .cborUnexpectedType)
        #expect(try await send(key, .intMap([(1, -1), (2, 1)])) == .cborUnexpectedType, "negative protocol")
        #expect(try await send(key, .intMap([(2, 3), (3, .bytes([1]))])) == .cborUnexpectedType, "keyAgreement bytes")
        #expect(try await send(key, .intMap([(2, 9), (9, "mc")])) == .cborUnexpectedType, "permissions text")
        #expect(try await send(key, .intMap([(2, 9), (10, .bytes([1]))])) == .cborUnexpectedType, "rpId bytes")
        for subCommand in [0, 6, 7, 8, 10, 0xFF] {
            #expect(
                try await send(key, TestKey.clientPINRequest(protocol: 2, subCommand)) == .invalidSubcommand,
                "subCommand \(subCommand)"
            )
        }
        #expect(key.presence.requests.isEmpty, "clientPIN never asks for a touch")
    }

    // MARK: getPINRetries and getKeyAgreement

    @Test("getPINRetries: 8 and no power cycle needed once a PIN is set, with or without a protocol")
    func getPINRetries() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await key.pinRetries() == (8, false))
        let (status, body) = try await key.send(.clientPIN, TestKey.clientPINRequest(protocol: 1, 1))
        #expect(status == .ok)
        #expect(try #require(body).mapValue().entries.count == 2)
    }

    @Test(
        "a key without a PIN: getPINRetries, changePIN and both token subcommands are PIN_NOT_SET; getKeyAgreement and setPIN work",
        arguments: protocols
    )
    func withoutPIN(version: Int) async throws {
        let key = TestKey()
        for request in [TestKey.clientPINRequest(protocol: nil, 1), TestKey.clientPINRequest(protocol: version, 1)] {
            let (status, body) = try await key.send(.clientPIN, request)
            #expect(status == .pinNotSet && body == nil, "getPINRetries: no PIN, no retries")
        }
        #expect(try await key.keyAgreement(version).entries.count == 5, "getKeyAgreement needs no PIN")
        #expect(try await key.changePIN(from: "1234", to: "5678", protocol: version) == .pinNotSet)
        #expect(try await key.pinToken("1234", protocol: version, permissions: nil).0 == .pinNotSet, "getPinToken")
        #expect(try await key.pinToken("1234", protocol: version).0 == .pinNotSet, "...WithPermissions")
        #expect(try await key.send(.clientPIN, TestKey.clientPINRequest(protocol: version, 1)).0 == .pinNotSet)
        #expect(try await key.setPIN("1234", protocol: version) == .ok)
        #expect(try await key.pinRetries() == (8, false), "a PIN set: its full retries counter")

        // authenticatorReset takes the PIN, and the retries with it.
        #expect(try await key.send(.reset).0 == .ok)
        #expect(try await key.send(.clientPIN, TestKey.clientPINRequest(protocol: nil, 1)).0 == .pinNotSet)
    }

    @Test("getKeyAgreement: a stable key per protocol; the protocol is required and checked")
    func getKeyAgreement() async throws {
        let key = TestKey()
        let one = try await key.keyAgreement(1)
        let two = try await key.keyAgreement(2)
        #expect(one.entries != two.entries, "each protocol has its own key")
        #expect(try await key.keyAgreement(2).entries == two.entries, "the key lasts until regenerated")
        #expect(try await send(key, TestKey.clientPINRequest(protocol: nil, 2)) == .missingParameter)
        for unsupported in [0, 3, 255] {
            #expect(try await send(key, TestKey.clientPINRequest(protocol: unsupported, 2)) == .invalidParameter)
        }
    }

    // MARK: setPIN

    @Test("setPIN with either protocol sets the PIN; getInfo says clientPin true", arguments: protocols)
    func setPIN(version: Int) async throws {
        let key = TestKey()
        var info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(4, "options").mapValue()[text: "clientPin"] == false)
        #expect(try await key.setPIN("1234", protocol: version) == .ok)
        info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(4, "options").mapValue()[text: "clientPin"] == true)
        #expect(try await key.pinRetries() == (8, false))
        #expect(try await key.pinToken("1234", protocol: version).0 == .ok)
        let stored = try #require(try key.store.secret(named: "pin.hash"))
        #expect(stored == pinHash("1234") + [4], "LEFT(SHA-256(PIN), 16) and the length in code points")
        #expect(try await key.setPIN("5678", protocol: version) == .pinAuthInvalid, "a set PIN is changed, not set")
    }

    @Test("setPIN answers each bad request with its status, in spec order", arguments: protocols)
    func setPINErrors(version: Int) async throws {
        let key = TestKey()
        let platform = try await key.platform(version)
        let newPinEnc = platform.encrypt(paddedPIN("1234"))
        let mac = platform.authenticate(newPinEnc)
        func request(
            protocol p: Int? = version, keyAgreement: CBORValue? = nil, mac: [UInt8]? = nil, newPinEnc n: [UInt8]? = nil,
            omit: Set<Int> = []
        ) -> CBORValue {
            let n = n ?? newPinEnc
            return TestKey.clientPINRequest(
                protocol: omit.contains(1) ? nil : p, 3,
                keyAgreement: omit.contains(3) ? nil : keyAgreement ?? platform.keyAgreement,
                pinUvAuthParam: omit.contains(4) ? nil : mac ?? platform.authenticate(n),
                newPinEnc: omit.contains(5) ? nil : n
            )
        }
        for missing in [1, 3, 4, 5] {
            #expect(try await send(key, request(omit: [missing])) == .missingParameter, "without key \(missing)")
        }
        #expect(try await send(key, request(protocol: 3)) == .invalidParameter)
        #expect(
            try await send(key, request(protocol: 3, omit: [4])) == .missingParameter,
            "missing parameters win over the protocol"
        )
        #expect(try await send(key, request(keyAgreement: .intMap([(1, 2)]))) == .invalidParameter, "bad COSE key")
        var wrongMac = mac
        wrongMac[0] ^= 1
        #expect(try await send(key, request(mac: wrongMac)) == .pinAuthInvalid)
        #expect(try await send(key, request(mac: [])) == .pinAuthInvalid)

        // Decrypts to other than 64 bytes: INVALID_PARAMETER.
        let short = platform.encrypt(Array(paddedPIN("1234").prefix(48)))
        #expect(try await send(key, request(newPinEnc: short)) == .invalidParameter)
        let long = platform.encrypt(paddedPIN("1234") + Array(repeating: 0, count: 16))
        #expect(try await send(key, request(newPinEnc: long)) == .invalidParameter)
        // Does not decrypt at all (not whole blocks), yet its MAC is right: PIN_AUTH_INVALID.
        let ragged = newPinEnc + [0]
        #expect(try await send(key, request(newPinEnc: ragged)) == .pinAuthInvalid)

        #expect(try key.store.secret(named: "pin.hash") == nil, "none of these set a PIN")
        #expect(try await send(key, request()) == .ok)
    }

    static let policyCases: [(String, [UInt8], CTAPStatus)] = [
        ("three digits", paddedPIN("123"), .pinPolicyViolation),
        ("empty", Array(repeating: 0, count: 64), .pinPolicyViolation),
        ("four digits", paddedPIN("1234"), .ok),
        ("four code points in eight bytes", paddedPIN("äöüß"), .ok),
        ("two code points in four bytes", paddedPIN("ää"), .pinPolicyViolation),
        ("63 bytes", paddedPIN(String(repeating: "x", count: 63)), .ok),
        ("64 bytes, no room for a terminator", Array(repeating: UInt8(ascii: "x"), count: 64), .pinPolicyViolation),
        ("a zero inside, trailing zeros dropped", paddedPIN("12\u{0}34"), .ok),
    ]

    @Test("setPIN enforces the PIN policy", arguments: policyCases.indices)
    func pinPolicy(index: Int) async throws {
        let (name, padded, expected) = Self.policyCases[index]
        let key = TestKey()
        let platform = try await key.platform(2)
        let newPinEnc = platform.encrypt(padded)
        let status = try await send(
            key,
            TestKey.clientPINRequest(
                protocol: 2, 3, keyAgreement: platform.keyAgreement, pinUvAuthParam: platform.authenticate(newPinEnc),
                newPinEnc: newPinEnc
            )
        )
        #expect(status == expected, "\(name)")
    }

    @Test("a stored minimum PIN length raises the policy and getInfo's minPINLength")
    func minPINLength() async throws {
        let key = TestKey()
        var info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(0x0D, "minPINLength").intValue() == 4)
        try key.store.setSecret([6], named: "pin.minLength")
        info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(0x0D, "minPINLength").intValue() == 6)
        #expect(try await key.setPIN("12345") == .pinPolicyViolation)
        #expect(try await key.setPIN("123456") == .ok)
    }

    // MARK: changePIN

    @Test("changePIN replaces the PIN and ends outstanding tokens", arguments: protocols)
    func changePIN(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let (_, token, platform) = try await key.pinToken("1234", protocol: version)
        #expect(try await key.changePIN(from: "1234", to: "abcdef", protocol: version) == .ok)
        #expect(try await key.pinToken("1234", protocol: version).0 == .pinInvalid)
        #expect(try await key.pinToken("abcdef", protocol: version).0 == .ok)
        #expect(try key.store.secret(named: "pin.hash") == pinHash("abcdef") + [6])

        var request = MakeCredentialBuilder()
        request.pinUvAuthProtocol = version
        request.pinUvAuthParam = platform.authenticate(key: try #require(token), request.clientDataHash)
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinAuthInvalid, "the old token is gone")
    }

    @Test("changePIN answers each bad request with its status, in spec order")
    func changePINErrors() async throws {
        let key = TestKey()
        #expect(try await key.changePIN(from: "1234", to: "5678") == .pinNotSet)
        #expect(try await key.setPIN("1234") == .ok)
        let platform = try await key.platform(2)
        let newPinEnc = platform.encrypt(paddedPIN("5678"))
        let pinHashEnc = platform.encrypt(pinHash("1234"))
        func request(
            protocol p: Int = 2, keyAgreement: CBORValue? = nil, mac: [UInt8]? = nil, newPinEnc n: [UInt8]? = nil,
            pinHashEnc h: [UInt8]? = nil, omit: Set<Int> = []
        ) -> CBORValue {
            let n = n ?? newPinEnc
            let h = h ?? pinHashEnc
            return TestKey.clientPINRequest(
                protocol: omit.contains(1) ? nil : p, 4,
                keyAgreement: omit.contains(3) ? nil : keyAgreement ?? platform.keyAgreement,
                pinUvAuthParam: omit.contains(4) ? nil : mac ?? platform.authenticate(n + h),
                newPinEnc: omit.contains(5) ? nil : n, pinHashEnc: omit.contains(6) ? nil : h
            )
        }
        for missing in [1, 3, 4, 5, 6] {
            #expect(try await send(key, request(omit: [missing])) == .missingParameter, "without key \(missing)")
        }
        #expect(try await send(key, request(protocol: 7)) == .invalidParameter)
        #expect(try await send(key, request(keyAgreement: .intMap([(1, 2), (-1, 1)]))) == .invalidParameter)
        #expect(try await send(key, request(mac: platform.authenticate(newPinEnc))) == .pinAuthInvalid, "MAC over newPinEnc alone")
        #expect(try await key.pinRetries().0 == 8, "a bad MAC costs no retry")

        // The right current PIN and a new PIN the policy refuses: the retry is restored.
        let tooShort = platform.encrypt(paddedPIN("12"))
        #expect(try await send(key, request(newPinEnc: tooShort)) == .pinPolicyViolation)
        #expect(try await key.pinRetries().0 == 8)
        let unpadded = platform.encrypt(Array(paddedPIN("5678").prefix(32)))
        #expect(try await send(key, request(newPinEnc: unpadded)) == .invalidParameter)
        let ragged = newPinEnc + [1]
        #expect(try await send(key, request(newPinEnc: ragged)) == .pinAuthInvalid, "does not decrypt")
        #expect(try await key.pinToken("1234").0 == .ok, "the PIN is unchanged")

        // A wrong current PIN: PIN_INVALID and one retry fewer; the key agreement key is new.
        #expect(try await key.changePIN(from: "0000", to: "5678") == .pinInvalid)
        #expect(try await key.pinRetries().0 == 7)
        #expect(try await send(key, request()) == .pinAuthInvalid, "the old shared secret no longer works")
        #expect(try await key.pinRetries().0 == 7)
        #expect(try await key.changePIN(from: "1234", to: "5678") == .ok)
        #expect(try await key.pinRetries().0 == 8)
    }

    @Test("a forced PIN change: tokens refused after the PIN matched, the same PIN refused, then cleared")
    func forcePINChange() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        try key.store.setSecret([1], named: "pin.forceChange")
        var info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(0x0C, "forcePINChange").boolValue() == true)

        #expect(try await key.pinToken("0000").0 == .pinInvalid, "a wrong PIN is still a wrong PIN")
        #expect(try await key.pinRetries().0 == 7)
        #expect(try await key.pinToken("1234").0 == .pinPolicyViolation)
        #expect(try await key.pinRetries().0 == 8, "the PIN matched, so the retries are restored")
        #expect(try await key.pinToken("1234", permissions: nil).0 == .pinInvalid, "getPinToken's status for it")

        #expect(try await key.changePIN(from: "1234", to: "1234") == .pinPolicyViolation)
        #expect(try await key.changePIN(from: "1234", to: "4321") == .ok)
        info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(0x0C, "forcePINChange").boolValue() == false)
        #expect(try await key.pinToken("4321").0 == .ok)
    }

    // MARK: getPinToken and getPinUvAuthTokenUsingPinWithPermissions

    @Test("getPinToken gives a 32-byte token with mc and ga for any RP", arguments: protocols)
    func getPinToken(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let (status, token, platform) = try await key.pinToken("1234", protocol: version, permissions: nil)
        #expect(status == .ok)
        #expect(try #require(token).count == 32)
        var request = MakeCredentialBuilder()
        request.rpId = "any.example"
        request.pinUvAuthProtocol = version
        request.pinUvAuthParam = platform.authenticate(key: try #require(token), request.clientDataHash)
        let made = try await key.makeCredential(request)
        #expect(made.flags & 0x05 == 0x05, "UP and UV")
    }

    @Test("getPinToken refuses permissions and rpId; its other errors are 0x09's")
    func getPinTokenErrors() async throws {
        let key = TestKey()
        let platform = try await key.platform(2)
        let pinHashEnc = platform.encrypt(pinHash("1234"))
        #expect(
            try await send(key, TestKey.clientPINRequest(protocol: 2, 5, keyAgreement: platform.keyAgreement))
                == .missingParameter
        )
        #expect(try await send(key, TestKey.clientPINRequest(protocol: 2, 5, pinHashEnc: pinHashEnc)) == .missingParameter)
        #expect(
            try await send(
                key, TestKey.clientPINRequest(protocol: 4, 5, keyAgreement: platform.keyAgreement, pinHashEnc: pinHashEnc)
            ) == .invalidParameter
        )
        for (permissions, rpId) in [(1, nil), (nil, "example.com"), (3, "example.com")] as [(Int?, String?)] {
            #expect(
                try await send(
                    key,
                    TestKey.clientPINRequest(
                        protocol: 2, 5, keyAgreement: platform.keyAgreement, pinHashEnc: pinHashEnc,
                        permissions: permissions, rpId: rpId
                    )
                ) == .invalidParameter
            )
        }
        #expect(
            try await send(
                key, TestKey.clientPINRequest(protocol: 2, 5, keyAgreement: platform.keyAgreement, pinHashEnc: pinHashEnc)
            ) == .pinNotSet
        )
    }

    struct PermissionCase: CustomTestStringConvertible, Sendable {
        let name: String
        let permissions: Int?
        let rpId: String?
        let status: CTAPStatus
        var testDescription: String { name }
    }

    static let permissionCases: [PermissionCase] = [
        .init(name: "no permissions", permissions: nil, rpId: "example.com", status: .missingParameter),
        .init(name: "permissions 0", permissions: 0, rpId: "example.com", status: .invalidParameter),
        .init(name: "mc without rpId", permissions: 0x01, rpId: nil, status: .invalidParameter),
        .init(name: "ga without rpId", permissions: 0x02, rpId: nil, status: .invalidParameter),
        .init(name: "cm, no rpId needed", permissions: 0x04, rpId: nil, status: .ok),
        .init(name: "be (no bio enrollment)", permissions: 0x08, rpId: nil, status: .unauthorizedPermission),
        .init(name: "lbw, no rpId needed", permissions: 0x10, rpId: nil, status: .ok),
        .init(name: "acfg, no rpId needed", permissions: 0x20, rpId: nil, status: .ok),
        .init(name: "mc with cm", permissions: 0x05, rpId: "example.com", status: .ok),
        .init(name: "cm with be", permissions: 0x0C, rpId: nil, status: .unauthorizedPermission),
        .init(name: "mc", permissions: 0x01, rpId: "example.com", status: .ok),
        .init(name: "ga", permissions: 0x02, rpId: "example.com", status: .ok),
        .init(name: "mc and ga", permissions: 0x03, rpId: "example.com", status: .ok),
        .init(name: "undefined bits are ignored", permissions: 0x182, rpId: "example.com", status: .ok),
        .init(name: "only undefined bits", permissions: 0x80, rpId: nil, status: .ok),
        .init(name: "pcmr alone", permissions: 0x40, rpId: nil, status: .ok),
        .init(name: "pcmr with another permission", permissions: 0x44, rpId: nil, status: .unauthorizedPermission),
    ]

    @Test("getPinUvAuthTokenUsingPinWithPermissions validates permissions", arguments: permissionCases)
    func permissions(testCase: PermissionCase) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let platform = try await key.platform(2)
        let status = try await send(
            key,
            TestKey.clientPINRequest(
                protocol: 2, 9, keyAgreement: platform.keyAgreement, pinHashEnc: platform.encrypt(pinHash("1234")),
                permissions: testCase.permissions, rpId: testCase.rpId
            )
        )
        #expect(status == testCase.status)
        #expect(try await key.pinRetries().0 == 8, "permission errors come before the PIN is checked")
    }

    @Test("getPinUvAuthTokenUsingPinWithPermissions: the checks before the PIN, in order")
    func tokenErrorsBeforePIN() async throws {
        let key = TestKey()
        let platform = try await key.platform(1)
        let pinHashEnc = platform.encrypt(pinHash("1234"))
        func request(_ version: Int, keyAgreement: CBORValue? = nil) -> CBORValue {
            TestKey.clientPINRequest(
                protocol: version, 9, keyAgreement: keyAgreement ?? platform.keyAgreement, pinHashEnc: pinHashEnc,
                permissions: 3, rpId: "example.com"
            )
        }
        #expect(try await send(key, request(1)) == .pinNotSet)
        #expect(try await send(key, request(3)) == .invalidParameter, "the protocol wins over the missing PIN")
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await send(key, request(1, keyAgreement: .intMap([(1, 2)]))) == .invalidParameter)
        #expect(try await key.pinRetries().0 == 8, "a bad key agreement costs no retry")
        #expect(try await send(key, request(1)) == .ok)
        var short = request(1)
        if case .map(let entries) = short {
            short = .map(entries.map { $0.key == .int(6) ? CBORMapEntry(key: $0.key, value: .bytes([1, 2, 3])) : $0 })
        }
        #expect(try await send(key, short) == .pinInvalid, "a pinHashEnc that does not decrypt is a wrong PIN")
        #expect(try await key.pinRetries().0 == 7)
    }

    // MARK: retries, lockout, power cycles

    @Test("three mismatches block PIN attempts until a power cycle, unspent; key agreement regenerates")
    func powerCycleBlock() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        var keyAgreement = try await key.keyAgreement(2)
        for attempt in 1...2 {
            #expect(try await key.pinToken("0000").0 == .pinInvalid, "attempt \(attempt)")
            let next = try await key.keyAgreement(2)
            #expect(next.entries != keyAgreement.entries, "a mismatch regenerates the key agreement key")
            keyAgreement = next
        }
        #expect(try await key.pinToken("0000").0 == .pinAuthBlocked)
        #expect(try await key.pinRetries() == (5, true))
        #expect(try await key.pinToken("1234").0 == .pinAuthBlocked, "even the right PIN")
        #expect(try await key.changePIN(from: "1234", to: "5678") == .pinAuthBlocked)
        #expect(try await key.pinRetries() == (5, true), "refused attempts cost no retry")

        await key.authenticator.powerCycle()
        #expect(try await key.pinRetries() == (5, false))
        #expect(try await key.pinToken("1234").0 == .ok)
        #expect(try await key.pinRetries() == (8, false))
    }

    @Test("a match resets the consecutive mismatch count")
    func mismatchCountResets() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        for _ in 0..<3 {
            #expect(try await key.pinToken("0000").0 == .pinInvalid)
            #expect(try await key.pinToken("0000").0 == .pinInvalid)
            #expect(try await key.pinToken("1234").0 == .ok)
        }
        let before = try await key.keyAgreement(2)
        #expect(try await key.pinToken("1234").0 == .ok)
        #expect(try await key.keyAgreement(2).entries == before.entries, "a match keeps the key agreement key")
    }

    @Test("eight mismatches block the PIN for good; authenticatorReset clears it")
    func lockout() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234", protocol: 1) == .ok)
        var statuses: [CTAPStatus] = []
        for attempt in 0..<8 {
            if attempt % 3 == 0 { await key.authenticator.powerCycle() }
            statuses.append(try await key.pinToken("9999", protocol: attempt % 2 + 1).0)
        }
        #expect(statuses == [.pinInvalid, .pinInvalid, .pinAuthBlocked, .pinInvalid, .pinInvalid, .pinAuthBlocked, .pinInvalid, .pinBlocked])
        #expect(try await key.pinRetries().0 == 0)
        await key.authenticator.powerCycle()
        #expect(try await key.pinToken("1234").0 == .pinBlocked)
        #expect(try await key.pinToken("1234", permissions: nil).0 == .pinBlocked)
        #expect(try await key.changePIN(from: "1234", to: "5678") == .pinBlocked)
        #expect(try await key.setPIN("5678") == .pinAuthInvalid, "still set, just blocked")

        #expect(try await key.send(.reset).0 == .ok)
        #expect(try await key.send(.clientPIN, TestKey.clientPINRequest(protocol: nil, 1)).0 == .pinNotSet)
        let info = try #require(try await key.send(.getInfo).1).mapValue()
        #expect(try info.required(4, "options").mapValue()[text: "clientPin"] == false)
        #expect(try await key.pinToken("1234").0 == .pinNotSet)
        #expect(try await key.setPIN("5678") == .ok)
        #expect(try await key.pinToken("5678").0 == .ok)
    }

    @Test("retries survive a restart: a new Authenticator over the same store")
    func retriesPersist() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        let restarted = TestKey(sharing: key, seed: "restarted")
        #expect(try await restarted.pinRetries() == (6, false))
        #expect(try await restarted.pinToken("0000").0 == .pinInvalid, "the mismatch count starts over")
        #expect(try await restarted.pinRetries().0 == 5)
        #expect(try await restarted.pinToken("1234").0 == .ok)
        #expect(try await key.pinRetries().0 == 8)
    }

    @Test("the decremented retries reach the store before the PIN is compared")
    func retriesPersistedFirst() async throws {
        let store = RecordingStore()
        let key = TestKey(store: store)
        #expect(try await key.setPIN("1234") == .ok)
        store.clearLog()
        #expect(try await key.pinToken("1234").0 == .ok)
        #expect(store.retriesWritten == [7, 8], "7 before the comparison, 8 after the match")
        store.clearLog()
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        #expect(store.retriesWritten == [7])

        // A store that cannot persist the decrement gets no comparison at all.
        store.failRetriesWrites = true
        #expect(try await key.pinToken("1234").0 == .other)
        #expect(try await key.pinToken("0000").0 == .other)
        store.failRetriesWrites = false
        #expect(try await key.pinRetries().0 == 7, "no attempt was made")
    }

    @Test("a power cycle makes new key agreement keys and ends the token")
    func powerCycleResetsSession() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let (_, token, platform) = try await key.pinToken("1234")
        let before = try await key.keyAgreement(2)
        await key.authenticator.powerCycle()
        #expect(try await key.keyAgreement(2).entries != before.entries)
        var request = MakeCredentialBuilder()
        request.pinUvAuthProtocol = 2
        request.pinUvAuthParam = platform.authenticate(key: try #require(token), request.clientDataHash)
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinAuthInvalid)
    }

    // MARK: getInfo

    @Test("getInfo advertises the PIN features")
    func getInfo() async throws {
        let key = TestKey()
        let info = try #require(try await key.send(.getInfo).1).mapValue()
        let options = try info.required(4, "options").mapValue()
        #expect(options[text: "clientPin"] == false)
        #expect(options[text: "pinUvAuthToken"] == true)
        #expect(options[text: "makeCredUvNotRqd"] == true)
        #expect(options[text: "uv"] == nil)
        #expect(try info.required(6, "pinUvAuthProtocols").arrayValue() == [2, 1])
        #expect(try info.required(0x0C, "forcePINChange").boolValue() == false)
        #expect(try info.required(0x0D, "minPINLength").intValue() == 4)
    }
}

/// A MemoryCredentialStore that records every pinRetries write and can refuse
/// them, and can refuse one secret as a full disk would.
final class RecordingStore: CredentialStore {
    let inner = MemoryCredentialStore()
    private let state = Mutex<(log: [UInt8], fail: Bool, full: String?)>(([], false, nil))

    var retriesWritten: [UInt8] { state.withLock { $0.log } }
    var failRetriesWrites: Bool {
        get { state.withLock { $0.fail } }
        set { state.withLock { $0.fail = newValue } }
    }
    func clearLog() { state.withLock { $0.log = [] } }
    /// The name of a secret whose writes fail with `.full`.
    var fullSecret: String? {
        get { state.withLock { $0.full } }
        set { state.withLock { $0.full = newValue } }
    }

    func save(_ credential: StoredCredential) throws(StoreError) -> StoredCredential { try inner.save(credential) }
    func update(_ credential: StoredCredential) throws(StoreError) -> Bool { try inner.update(credential) }
    func credentials(rpIdHash: [UInt8]) throws(StoreError) -> [StoredCredential] {
        try inner.credentials(rpIdHash: rpIdHash)
    }
    func credential(id: [UInt8]) throws(StoreError) -> StoredCredential? { try inner.credential(id: id) }
    func allCredentials() throws(StoreError) -> [StoredCredential] { try inner.allCredentials() }
    func deleteCredential(id: [UInt8]) throws(StoreError) -> Bool { try inner.deleteCredential(id: id) }
    func credentialCount() throws(StoreError) -> Int { try inner.credentialCount() }
    func nextSignatureCounter(scope: [UInt8]) throws(StoreError) -> UInt32 {
        try inner.nextSignatureCounter(scope: scope)
    }
    func raiseSignatureCounter(scope: [UInt8], above value: UInt32) throws(StoreError) {
        try inner.raiseSignatureCounter(scope: scope, above: value)
    }
    func secret(named name: String) throws(StoreError) -> [UInt8]? { try inner.secret(named: name) }
    func setSecret(_ value: [UInt8]?, named name: String) throws(StoreError) {
        if name == fullSecret { throw StoreError(.full, "no space left for the test") }
        if name == "pin.retries" {
            let fail = state.withLock { state in
                if !state.fail, let value { state.log.append(contentsOf: value) }
                return state.fail
            }
            if fail { throw StoreError(.io, "refused for the test") }
        }
        try inner.setSecret(value, named: name)
    }
    func reset() throws(StoreError) { try inner.reset() }
}
