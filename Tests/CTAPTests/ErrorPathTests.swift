// Every error path CTAP 2.1 lists for the commands latchkey implements, with
// its exact status, and the order in which they win.

import CBOR
import Testing

@testable import CTAP

@Suite("error paths")
struct ErrorPathTests {
    // MARK: framing of the request

    @Test("an empty request is CTAP1_ERR_INVALID_LENGTH")
    func emptyRequest() async throws {
        #expect(try await TestKey().sendRaw([]).0 == .invalidLength)
    }

    @Test("every command byte gets a status and unknown ones CTAP1_ERR_INVALID_COMMAND")
    func everyCommandByte() async throws {
        let key = TestKey()
        let implemented: Set<UInt8> = [0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0A, 0x0B, 0x0C, 0x0D, 0x41]
        for byte in UInt8.min...UInt8.max {
            let (status, _) = try await key.sendRaw([byte])
            if implemented.contains(byte) {
                #expect(status != .invalidCommand, "command \(byte)")
            } else {
                #expect(status == .invalidCommand, "command \(byte)")
            }
        }
    }

    @Test("parameters that are not CBOR, not canonical or not a map are refused")
    func badParameters() async throws {
        let key = TestKey()
        #expect(try await key.sendRaw([0x01, 0xFF]).0 == .invalidCBOR)
        #expect(try await key.sendRaw([0x01, 0xA2, 0x02, 0x00, 0x01, 0x00]).0 == .invalidCBOR, "keys out of order")
        #expect(try await key.sendRaw([0x01, 0xA2, 0x01, 0x00, 0x01, 0x00]).0 == .invalidCBOR, "duplicate keys")
        #expect(try await key.sendRaw([0x01, 0x18, 0x01]).0 == .invalidCBOR, "non-shortest head")
        #expect(try await key.sendRaw([0x01, 0x9F, 0xFF]).0 == .invalidCBOR, "indefinite length")
        #expect(try await key.sendRaw([0x01, 0x80]).0 == .cborUnexpectedType, "an array, not a map")
        #expect(try await key.sendRaw([0x02, 0x41, 0x00]).0 == .cborUnexpectedType)
        #expect(try await key.sendRaw([0x01]).0 == .missingParameter)
        #expect(try await key.sendRaw([0x02]).0 == .missingParameter)
        #expect(key.presence.requests.isEmpty)
    }

    // MARK: CTAP2 canonical CBOR in a whole request (CTAP 2.1 §8, docs/conformance.md "CBOR strictness")

    /// `bytes` with the first occurrence of `head` replaced by `longer` (the same argument
    /// in a longer head).
    static func lengthening(_ bytes: [UInt8], _ head: [UInt8], to longer: [UInt8]) -> [UInt8] {
        for start in 0...(bytes.count - head.count) where Array(bytes[start..<start + head.count]) == head {
            return Array(bytes[..<start]) + longer + Array(bytes[(start + head.count)...])
        }
        preconditionFailure("no \(head) in the request")
    }

    static let nonMinimalLengths: [(String, [UInt8], [UInt8])] = [
        ("clientDataHash's length 32 in two bytes", [0x58, 0x20], [0x59, 0x00, 0x20]),
        ("clientDataHash's length 32 in four bytes", [0x58, 0x20], [0x5A, 0x00, 0x00, 0x00, 0x20]),
        ("clientDataHash's length 32 in eight bytes", [0x58, 0x20], [0x5B] + [UInt8](repeating: 0, count: 7) + [0x20]),
        ("user.id's length 4 in one byte", [0x44, 1, 2, 3, 4], [0x58, 0x04, 1, 2, 3, 4]),
        ("rp.id's length 11 in one byte", [0x6B], [0x78, 0x0B]),
        ("the request map's count in one byte", [0xA4], [0xB8, 0x04]),
        ("pubKeyCredParams' count in one byte", [0x81], [0x98, 0x01]),
        ("alg -7 in one byte", [0x26], [0x38, 0x06]),
    ]

    @Test(
        "makeCredential with a non-minimal length or integer is CTAP2_ERR_INVALID_CBOR, before any touch",
        arguments: nonMinimalLengths
    )
    func nonMinimalHeads(name: String, head: [UInt8], longer: [UInt8]) async throws {
        let key = TestKey()
        let canonical = [CTAPCommand.makeCredential.rawValue] + MakeCredentialBuilder().cbor.encoded()
        let request = Self.lengthening(canonical, head, to: longer)
        #expect(try await key.sendRaw(request).0 == .invalidCBOR, "\(name)")
        #expect(key.presence.requests.isEmpty)
        #expect(try await key.sendRaw(canonical).0 == .ok, "the canonical request is accepted")
    }

    // MARK: makeCredential

    struct MakeCase: CustomTestStringConvertible, Sendable {
        let name: String
        let status: CTAPStatus
        let edit: @Sendable (inout CBORValue) -> Void
        var testDescription: String { name }
    }

    static func removing(_ key: Int) -> @Sendable (inout CBORValue) -> Void {
        { value in if case .map(let entries) = value { value = .map(entries.filter { $0.key != .int(key) }) } }
    }

    static func replacing(_ key: Int, with replacement: CBORValue) -> @Sendable (inout CBORValue) -> Void {
        { value in
            if case .map(let entries) = value {
                value = .map(entries.filter { $0.key != .int(key) } + [CBORMapEntry(key: .int(key), value: replacement)])
            }
        }
    }

    static let makeCases: [MakeCase] = [
        .init(name: "missing clientDataHash", status: .missingParameter, edit: removing(1)),
        .init(name: "missing rp", status: .missingParameter, edit: removing(2)),
        .init(name: "missing user", status: .missingParameter, edit: removing(3)),
        .init(name: "missing pubKeyCredParams", status: .missingParameter, edit: removing(4)),
        .init(name: "clientDataHash is text", status: .cborUnexpectedType, edit: replacing(1, with: "hash")),
        .init(name: "rp is an array", status: .cborUnexpectedType, edit: replacing(2, with: .array([]))),
        .init(name: "rp.id missing", status: .missingParameter, edit: replacing(2, with: .textMap([("name", "x")]))),
        .init(name: "rp.id is bytes", status: .cborUnexpectedType, edit: replacing(2, with: .textMap([("id", .bytes([1]))]))),
        .init(name: "user.id missing", status: .missingParameter, edit: replacing(3, with: .textMap([("name", "x")]))),
        .init(name: "user.id is text", status: .cborUnexpectedType, edit: replacing(3, with: .textMap([("id", "x")]))),
        .init(
            name: "user.id longer than 64 bytes", status: .invalidLength,
            edit: replacing(3, with: .textMap([("id", .bytes(Array(repeating: 1, count: 65)))]))
        ),
        .init(name: "user.id empty", status: .invalidLength, edit: replacing(3, with: .textMap([("id", .bytes([]))]))),
        .init(name: "clientDataHash of 31 bytes", status: .invalidLength, edit: replacing(1, with: .bytes(Array(repeating: 0, count: 31)))),
        .init(name: "pubKeyCredParams is a map", status: .cborUnexpectedType, edit: replacing(4, with: .map([]))),
        .init(name: "pubKeyCredParams element is text", status: .cborUnexpectedType, edit: replacing(4, with: .array(["x"]))),
        .init(
            name: "pubKeyCredParams element without alg", status: .missingParameter,
            edit: replacing(4, with: .array([.textMap([("type", "public-key")])]))
        ),
        .init(
            name: "pubKeyCredParams alg is text", status: .cborUnexpectedType,
            edit: replacing(4, with: .array([.textMap([("alg", "ES256"), ("type", "public-key")])]))
        ),
        .init(
            name: "only unsupported algorithms", status: .unsupportedAlgorithm,
            edit: replacing(4, with: .array([.textMap([("alg", -257), ("type", "public-key")])]))
        ),
        .init(name: "empty pubKeyCredParams", status: .unsupportedAlgorithm, edit: replacing(4, with: .array([]))),
        .init(name: "excludeList is a map", status: .cborUnexpectedType, edit: replacing(5, with: .map([]))),
        .init(
            name: "excludeList element without id", status: .missingParameter,
            edit: replacing(5, with: .array([.textMap([("type", "public-key")])]))
        ),
        .init(name: "extensions is an array", status: .cborUnexpectedType, edit: replacing(6, with: .array([]))),
        .init(name: "options is an array", status: .cborUnexpectedType, edit: replacing(7, with: .array([]))),
        .init(name: "option rk is a number", status: .cborUnexpectedType, edit: replacing(7, with: .textMap([("rk", 1)]))),
        .init(name: "option up=false", status: .invalidOption, edit: replacing(7, with: .textMap([("up", false)]))),
        .init(name: "option uv=true without built-in UV", status: .invalidOption, edit: replacing(7, with: .textMap([("uv", true)]))),
        .init(name: "pinUvAuthParam is text", status: .cborUnexpectedType, edit: replacing(8, with: "x")),
        .init(name: "pinUvAuthParam without protocol", status: .missingParameter, edit: replacing(8, with: .bytes([1, 2, 3]))),
        .init(name: "enterpriseAttestation requested", status: .invalidParameter, edit: replacing(10, with: 1)),
    ]

    @Test("makeCredential answers each malformed request with its status", arguments: makeCases)
    func makeCredentialErrors(testCase: MakeCase) async throws {
        let key = TestKey()
        var request = MakeCredentialBuilder().cbor
        testCase.edit(&request)
        #expect(try await key.send(.makeCredential, request).0 == testCase.status)
        #expect(key.presence.requests.isEmpty, "no touch for a request that is refused before presence")
        #expect(try key.store.credentialCount() == 0)
    }

    @Test("an unsupported pinUvAuthProtocol is CTAP1_ERR_INVALID_PARAMETER", arguments: [0, 3])
    func unsupportedProtocol(pinUvAuthProtocol: Int) async throws {
        var request = MakeCredentialBuilder()
        request.pinUvAuthParam = Array(repeating: 1, count: 16)
        request.pinUvAuthProtocol = pinUvAuthProtocol
        #expect(try await TestKey().send(.makeCredential, request.cbor).0 == .invalidParameter)
        var get = GetAssertionBuilder()
        get.pinUvAuthParam = Array(repeating: 1, count: 16)
        get.pinUvAuthProtocol = pinUvAuthProtocol
        #expect(try await TestKey().send(.getAssertion, get.cbor).0 == .invalidParameter)
    }

    @Test("the empty pinUvAuthParam touch probe waits for a touch, then says PIN_NOT_SET")
    func touchProbe() async throws {
        let key = TestKey()
        var request = MakeCredentialBuilder()
        request.pinUvAuthParam = []
        request.pinUvAuthProtocol = 1
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinNotSet)
        #expect(key.presence.requests.map(\.operation) == [.touchProbe])
        key.presence.enqueue(.denied)
        #expect(try await key.send(.makeCredential, request.cbor).0 == .operationDenied)
        var get = GetAssertionBuilder()
        get.pinUvAuthParam = []
        get.pinUvAuthProtocol = 1
        #expect(try await key.send(.getAssertion, get.cbor).0 == .pinNotSet)
        #expect(try key.store.credentialCount() == 0)
    }

    @Test("presence refused, timed out or cancelled maps to its status and creates nothing")
    func presenceOutcomes() async throws {
        let cases: [(PresenceOutcome, CTAPStatus)] = [
            (.denied, .operationDenied), (.timedOut, .userActionTimeout), (.cancelled, .keepaliveCancel),
        ]
        for (outcome, status) in cases {
            let key = TestKey()
            key.presence.enqueue(outcome)
            let request = MakeCredentialBuilder(rk: true)
            #expect(try await key.send(.makeCredential, request.cbor).0 == status)
            #expect(try key.store.credentialCount() == 0)

            let made = try await key.makeCredential(request)
            key.presence.enqueue(outcome)
            var get = GetAssertionBuilder()
            get.allowList = [made.credentialId]
            #expect(try await key.send(.getAssertion, get.cbor).0 == status)
            key.presence.enqueue(outcome)
            #expect(try await key.send(.selection).0 == status)
        }
    }

    @Test("excludeList: a touch, then CTAP2_ERR_CREDENTIAL_EXCLUDED; other RPs' credentials don't match")
    func excludeList() async throws {
        let key = TestKey()
        let wrapped = try await key.makeCredential(MakeCredentialBuilder())
        var resident = MakeCredentialBuilder(rk: true)
        resident.userId = [9]
        let stored = try await key.makeCredential(resident)
        for id in [wrapped.credentialId, stored.credentialId] {
            var request = MakeCredentialBuilder()
            request.excludeList = [[1, 2, 3], id]
            let before = key.presence.requests.count
            #expect(try await key.send(.makeCredential, request.cbor).0 == .credentialExcluded)
            #expect(key.presence.requests.count == before + 1)
            #expect(key.presence.requests.last?.operation == .excludedCredential)
        }
        var otherRP = MakeCredentialBuilder()
        otherRP.rpId = "other.example"
        otherRP.excludeList = [wrapped.credentialId, stored.credentialId]
        #expect(try await key.send(.makeCredential, otherRP.cbor).0 == .ok)
        key.presence.enqueue(.denied)
        var denied = MakeCredentialBuilder()
        denied.excludeList = [wrapped.credentialId]
        #expect(try await key.send(.makeCredential, denied.cbor).0 == .operationDenied)
    }

    @Test("a full store answers CTAP2_ERR_KEY_STORE_FULL and keeps every credential")
    func storeFull() async throws {
        let key = TestKey(maxDiscoverable: 2)
        var ids: [[UInt8]] = []
        for index in 0..<2 {
            var request = MakeCredentialBuilder(rk: true)
            request.userId = [UInt8(index)]
            ids.append(try await key.makeCredential(request).credentialId)
        }
        var third = MakeCredentialBuilder(rk: true)
        third.userId = [7]
        #expect(try await key.send(.makeCredential, third.cbor).0 == .keyStoreFull)
        // Replacing one of the two users needs no room.
        var replace = MakeCredentialBuilder(rk: true)
        replace.userId = [1]
        #expect(try await key.send(.makeCredential, replace.cbor).0 == .ok)
        #expect(try key.store.credential(id: ids[0]) != nil)

        // The disk filling up is the same status.
        let disk = TestKey(capacity: 1)
        var request = MakeCredentialBuilder(rk: true)
        let kept = try await disk.makeCredential(request)
        request.userId = [5]
        #expect(try await disk.send(.makeCredential, request.cbor).0 == .keyStoreFull)
        #expect(try disk.store.credential(id: kept.credentialId) != nil)
        let info = try #require(try await disk.send(.getInfo).1).mapValue()
        #expect(try info.required(0x14, "remaining").intValue() == 999)
    }

    // MARK: getAssertion

    struct GetCase: CustomTestStringConvertible, Sendable {
        let name: String
        let status: CTAPStatus
        let request: CBORValue
        var testDescription: String { name }
    }

    static let getCases: [GetCase] = [
        .init(name: "missing rpId", status: .missingParameter, request: .intMap([(2, .bytes(Array(repeating: 0, count: 32)))])),
        .init(name: "missing clientDataHash", status: .missingParameter, request: .intMap([(1, "example.com")])),
        .init(name: "rpId is bytes", status: .cborUnexpectedType, request: .intMap([(1, .bytes([1])), (2, .bytes(Array(repeating: 0, count: 32)))])),
        .init(
            name: "allowList is a map", status: .cborUnexpectedType,
            request: .intMap([(1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32))), (3, .map([]))])
        ),
        .init(
            name: "allowList element id is text", status: .cborUnexpectedType,
            request: .intMap([
                (1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32))),
                (3, .array([.textMap([("id", "x"), ("type", "public-key")])])),
            ])
        ),
        .init(
            name: "option rk present", status: .unsupportedOption,
            request: .intMap([(1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32))), (5, .textMap([("rk", true)]))])
        ),
        .init(
            name: "option uv=true without built-in UV", status: .invalidOption,
            request: .intMap([(1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32))), (5, .textMap([("uv", true)]))])
        ),
        .init(
            name: "option up is text", status: .cborUnexpectedType,
            request: .intMap([(1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32))), (5, .textMap([("up", "yes")]))])
        ),
        .init(
            name: "no credentials for the RP", status: .noCredentials,
            request: .intMap([(1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32)))])
        ),
        .init(
            name: "allowList with unknown IDs only", status: .noCredentials,
            request: .intMap([
                (1, "example.com"), (2, .bytes(Array(repeating: 0, count: 32))),
                (3, .array([.textMap([("id", .bytes(Array(repeating: 1, count: 63))), ("type", "public-key")])])),
            ])
        ),
        .init(
            name: "clientDataHash of 33 bytes", status: .invalidLength,
            request: .intMap([(1, "example.com"), (2, .bytes(Array(repeating: 0, count: 33)))])
        ),
    ]

    @Test("getAssertion answers each bad request with its status", arguments: getCases)
    func getAssertionErrors(testCase: GetCase) async throws {
        let key = TestKey()
        #expect(try await key.send(.getAssertion, testCase.request).0 == testCase.status)
        #expect(key.presence.requests.isEmpty)
    }

    // MARK: reset

    @Test("reset works within 10 s of power-up and wipes every credential, wrapped ones too")
    func reset() async throws {
        let key = TestKey()
        var request = MakeCredentialBuilder(rk: true)
        let stored = try await key.makeCredential(request)
        request.rk = false
        let wrapped = try await key.makeCredential(request)
        try key.store.setSecret([7], named: "device.aaguid")
        key.clock.advance(by: 9_000)
        #expect(try await key.send(.reset).0 == .ok)
        #expect(try key.store.secret(named: "device.aaguid") == [7], "the device's identity survives")
        #expect(key.presence.requests.last?.operation == .reset)
        #expect(try key.store.credentialCount() == 0)
        var get = GetAssertionBuilder()
        get.allowList = [wrapped.credentialId, stored.credentialId]
        #expect(try await key.send(.getAssertion, get.cbor).0 == .noCredentials)
        // A counter value is never reused, reset or not.
        let after = try await key.makeCredential(MakeCredentialBuilder())
        #expect(after.signCount > wrapped.signCount)
    }

    @Test("reset after the window is CTAP2_ERR_NOT_ALLOWED until the key is plugged in again")
    func resetWindow() async throws {
        let key = TestKey()
        _ = try await key.makeCredential(MakeCredentialBuilder())
        key.clock.advance(by: 10_001)
        #expect(try await key.send(.reset).0 == .notAllowed)
        #expect(key.presence.requests.count == 1, "no touch for a refused reset")
        await key.authenticator.powerCycle()
        key.presence.enqueue(.denied)
        #expect(try await key.send(.reset).0 == .operationDenied)
        key.presence.enqueue(.timedOut)
        #expect(try await key.send(.reset).0 == .userActionTimeout)
        #expect(try await key.send(.reset).0 == .ok)
    }

    // MARK: getInfo

    @Test("getInfo advertises exactly what the key does")
    func getInfo() async throws {
        let info = try #require(try await TestKey().send(.getInfo).1).mapValue()
        #expect(try info.required(1, "versions").arrayValue() == ["U2F_V2", "FIDO_2_0", "FIDO_2_1"])
        #expect(try info.required(3, "aaguid").bytesValue() == testAAGUID)
        let options = try info.required(4, "options").mapValue()
        #expect(options[text: "rk"] == true)
        #expect(options[text: "up"] == true)
        #expect(options[text: "uv"] == nil, "no built-in user verification")
        #expect(options[text: "clientPin"] == false, "a PIN can be set, none is")
        #expect(options[text: "pinUvAuthToken"] == true)
        #expect(options[text: "credMgmt"] == true)
        #expect(options[text: "alwaysUv"] == false)
        #expect(options[text: "authnrCfg"] == true)
        #expect(options[text: "setMinPINLength"] == true)
        #expect(options[text: "makeCredUvNotRqd"] == true)
        #expect(options[text: "perCredMgmtRO"] == true)
        #expect(try info.required(0x10, "maxRPIDsForSetMinPINLength").intValue() == 8)
        #expect(
            try info.required(2, "extensions").arrayValue()
                == [
                    "credProtect", "hmac-secret", "hmac-secret-mc", "credBlob", "largeBlobKey", "minPinLength",
                    "thirdPartyPayment",
                ]
        )
        #expect(try info.required(0x0F, "maxCredBlobLength").intValue() == 32)
        #expect(try info.required(6, "pinUvAuthProtocols").arrayValue() == [2, 1])
        #expect(try info.required(5, "maxMsgSize").intValue() == 7609)
        #expect(try info.required(9, "transports").arrayValue() == ["usb"])
        let algorithms = try info.required(10, "algorithms").arrayValue().map { try $0.mapValue().required("alg").intValue() }
        #expect(algorithms == [-7, -8])
        // CTAP 2.2's keys: a batch-attesting key's format, no complexity
        // policy, the 63 a 64-byte paddedNewPin allows, the config subcommands.
        #expect(try info.required(0x16, "attestationFormats").arrayValue() == ["packed", "none"])
        #expect(try info.required(0x1B, "pinComplexityPolicy").boolValue() == false)
        #expect(try info.required(0x1D, "maxPINLength").intValue() == 63)
        #expect(try info.required(0x1F, "authenticatorConfigCommands").arrayValue() == [2, 3])
        for absent in [0x11, 0x12, 0x13, 0x15, 0x17, 0x18, 0x1A, 0x1C] {
            #expect(info[int: absent] == nil, "absent says it: \(absent)")
        }

        let u2fless = try #require(try await TestKey(u2f: false).send(.getInfo).1).mapValue()
        #expect(try u2fless.required(1, "versions").arrayValue() == ["FIDO_2_0", "FIDO_2_1"])
    }

    @Test("attestationFormats is what makeCredential returns, config commands what the key accepts")
    func getInfoAttestationFormats() async throws {
        let none = try await TestKey(attestation: .none).authenticator.getInfo()
        #expect(none.attestationFormats == ["none"])
        #expect(try await TestKey(attestation: .selfAttestation).authenticator.getInfo().attestationFormats == ["packed", "none"])
        let enterprise = EnterpriseAttestationTests.capableKey()
        #expect(try await enterprise.authenticator.getInfo().authenticatorConfigCommands == [1, 2, 3])
    }
}
