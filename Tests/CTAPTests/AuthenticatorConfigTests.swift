// authenticatorConfig (CTAP 2.1 §6.11): toggleAlwaysUv and setMinPINLength,
// the subcommands latchkey refuses, the pinUvAuthParam checks in order with
// both PIN protocols, and what the settings change elsewhere (getInfo,
// makeCredential, getAssertion, U2F, setPIN, authenticatorReset).

import CBOR
import Testing

@testable import CTAP

extension TestKey {
    /// An authenticatorConfig request, authenticated over 32×0xff || 0x0d ||
    /// subCommand || subCommandParams with `token` when given.
    func config(
        _ subCommand: Int,
        _ params: CBORValue? = nil,
        token: (token: [UInt8], platform: TestPlatform)? = nil
    ) async throws -> CTAPStatus {
        var entries: [(Int, CBORValue)] = [(1, .int(subCommand))]
        if let params { entries.append((2, params)) }
        if let token {
            var message = [UInt8](repeating: 0xFF, count: 32) + [0x0D, UInt8(subCommand)]
            if let params { message += params.encoded() }
            entries.append((3, .int(token.platform.version)))
            entries.append((4, .bytes(token.platform.authenticate(key: token.token, message))))
        }
        let (status, body) = try await send(.config, .intMap(entries))
        #expect(body == nil, "authenticatorConfig answers with the status alone")
        return status
    }

    /// A token with `permissions` (acfg by default) for the PIN "1234".
    func configToken(
        _ version: Int = 2,
        permissions: Int = 0x20
    ) async throws -> (token: [UInt8], platform: TestPlatform) {
        let (status, token, platform) = try await pinToken(
            "1234", protocol: version, permissions: permissions, rpId: permissions & 0x03 != 0 ? "example.com" : nil
        )
        try #require(status == .ok)
        return (try #require(token), platform)
    }

    func info() async throws -> CBORMap { try #require(try await send(.getInfo).1).mapValue() }
}

@Suite("authenticatorConfig")
struct AuthenticatorConfigTests {
    static let protocols = [1, 2]

    // MARK: toggleAlwaysUv

    @Test("toggleAlwaysUv turns alwaysUv on and off, and getInfo follows", arguments: protocols)
    func toggleAlwaysUv(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234", protocol: version) == .ok)
        let token = try await key.configToken(version)
        #expect(try await key.config(0x02, token: token) == .ok)
        var info = try await key.info()
        var options = try info.required(4, "options").mapValue()
        #expect(options[text: "alwaysUv"] == true)
        #expect(options[text: "makeCredUvNotRqd"] == false)
        #expect(try info.required(1, "versions").arrayValue() == ["FIDO_2_0", "FIDO_2_1"], "no U2F under alwaysUv")

        #expect(try await key.config(0x02, token: token) == .ok)
        info = try await key.info()
        options = try info.required(4, "options").mapValue()
        #expect(options[text: "alwaysUv"] == false)
        #expect(options[text: "makeCredUvNotRqd"] == true)
        #expect(try info.required(1, "versions").arrayValue() == ["U2F_V2", "FIDO_2_0", "FIDO_2_1"])
    }

    @Test("alwaysUv: makeCredential and getAssertion need a token, U2F is off, reset restores the default")
    func alwaysUvEffects() async throws {
        let key = TestKey()
        // An unprotected key is configured without a token.
        #expect(try await key.config(0x02) == .ok)
        #expect(try await key.sendRaw([0x0D] + CBORValue.intMap([(1, 2)]).encoded()).0 == .pinUvAuthTokenRequired,
            "alwaysUv protects the key: toggling back needs a token")
        #expect(try await key.send(.makeCredential, MakeCredentialBuilder().cbor).0 == .pinUvAuthTokenRequired)
        #expect(try await key.send(.getAssertion, GetAssertionBuilder().cbor).0 == .pinUvAuthTokenRequired)
        #expect(key.presence.requests.isEmpty, "refused before any touch")
        #expect(
            await key.authenticator.handleAPDU([0x00, 0x03, 0x00, 0x00, 0x00]) == [0x6D, 0x00],
            "U2F VERSION is refused"
        )
        // With a PIN and a token it works, and the token is what allows it.
        #expect(try await key.setPIN("1234") == .ok)
        let (status, token, platform) = try await key.pinToken("1234", permissions: 0x01)
        #expect(status == .ok)
        var request = MakeCredentialBuilder()
        request.pinUvAuthParam = platform.authenticate(key: try #require(token), request.clientDataHash)
        request.pinUvAuthProtocol = 2
        #expect(try await key.makeCredential(request).flags & 0x04 == 0x04, "UV")

        await key.authenticator.powerCycle()
        #expect(try await key.send(.reset).0 == .ok)
        let options = try await key.info().required(4, "options").mapValue()
        #expect(options[text: "alwaysUv"] == false)
        #expect(try await key.send(.getAssertion, GetAssertionBuilder().cbor).0 == .noCredentials)
    }

    // MARK: setMinPINLength

    @Test("setMinPINLength raises the minimum; setPIN then enforces it", arguments: protocols)
    func setMinPINLength(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.config(0x03, .intMap([(1, 6)])) == .ok, "no PIN: no token needed")
        #expect(try await key.info().required(0x0D, "minPINLength").intValue() == 6)
        #expect(try await key.setPIN("12345", protocol: version) == .pinPolicyViolation)
        #expect(try await key.setPIN("123456", protocol: version) == .ok)
        #expect(try await key.info().required(0x0C, "forcePINChange").boolValue() == false)

        let (status, token, platform) = try await key.pinToken(
            "123456", protocol: version, permissions: 0x20, rpId: nil
        )
        #expect(status == .ok)
        let acfg = (try #require(token), platform)
        #expect(try await key.config(0x03, .intMap([(1, 8)]), token: acfg) == .ok)
        let info = try await key.info()
        #expect(try info.required(0x0D, "minPINLength").intValue() == 8)
        #expect(try info.required(0x0C, "forcePINChange").boolValue() == true, "the PIN is now too short")
        #expect(try await key.pinToken("123456", protocol: version).0 == .pinPolicyViolation, "must change first")
        #expect(try await key.changePIN(from: "123456", to: "1234567", protocol: version) == .pinPolicyViolation)
        #expect(try await key.changePIN(from: "123456", to: "12345678", protocol: version) == .ok)
        #expect(try await key.info().required(0x0C, "forcePINChange").boolValue() == false)
    }

    @Test("setMinPINLength: never lower, at most 63, at most 8 RP IDs, forceChangePin needs a PIN")
    func setMinPINLengthErrors() async throws {
        let key = TestKey()
        #expect(try await key.config(0x03, .intMap([(1, 6)])) == .ok)
        #expect(try await key.config(0x03, .intMap([(1, 5)])) == .pinPolicyViolation, "lower than the current")
        #expect(try await key.config(0x03, .intMap([(1, 64)])) == .pinPolicyViolation, "no PIN could meet it")
        #expect(try await key.config(0x03, .intMap([(1, 6)])) == .ok, "the same is fine")
        #expect(try await key.config(0x03, .intMap([])) == .ok, "absent keeps the current")
        #expect(try await key.config(0x03) == .ok, "no parameters at all")
        let nine = (1...9).map { CBORValue.text("rp\($0).example") }
        #expect(try await key.config(0x03, .intMap([(2, .array(nine))])) == .keyStoreFull)
        #expect(try await key.config(0x03, .intMap([(2, .array(Array(nine.prefix(8))))])) == .ok)
        #expect(try await key.config(0x03, .intMap([(2, .array([]))])) == .ok, "an empty list clears it")
        #expect(try await key.config(0x03, .intMap([(3, true)])) == .pinNotSet)
        #expect(try await key.config(0x03, .intMap([(1, "six")])) == .cborUnexpectedType)
        #expect(try await key.config(0x03, .intMap([(2, .array([1]))])) == .cborUnexpectedType)
        #expect(try await key.info().required(0x0D, "minPINLength").intValue() == 6)
    }

    @Test("forceChangePin forces a PIN change", arguments: protocols)
    func forceChangePin(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let token = try await key.configToken(version)
        #expect(try await key.config(0x03, .intMap([(3, true)]), token: token) == .ok)
        #expect(try await key.info().required(0x0C, "forcePINChange").boolValue() == true)
        #expect(try await key.info().required(0x0D, "minPINLength").intValue() == 4, "unchanged")
    }

    @Test("authenticatorReset restores the default minimum")
    func resetRestoresMinimum() async throws {
        let key = TestKey()
        #expect(try await key.config(0x03, .intMap([(1, 10)])) == .ok)
        #expect(try await key.send(.reset).0 == .ok)
        #expect(try await key.info().required(0x0D, "minPINLength").intValue() == 4)
    }

    // MARK: refused subcommands and authentication

    @Test("enterprise attestation, vendorPrototype and unknown subcommands are INVALID_SUBCOMMAND")
    func refusedSubcommands() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        for subCommand in [0x00, 0x01, 0x04, 0xFF] {
            #expect(try await key.config(subCommand) == .invalidSubcommand, "subCommand \(subCommand), no token")
        }
        let token = try await key.configToken()
        #expect(try await key.config(0x01, token: token) == .invalidSubcommand)
        #expect(try await key.config(0xFF, .intMap([(1, 1)]), token: token) == .invalidSubcommand)
        let options = try await key.info().required(4, "options").mapValue()
        #expect(options[text: "ep"] == nil)
    }

    @Test("framing: missing and mistyped parameters")
    func framing() async throws {
        let key = TestKey()
        #expect(try await key.sendRaw([0x0D]).0 == .missingParameter)
        #expect(try await key.send(.config, .intMap([(3, 2)])).0 == .missingParameter)
        #expect(try await key.send(.config, .intMap([(1, -2)])).0 == .cborUnexpectedType)
        #expect(try await key.send(.config, .intMap([(1, 3), (2, 6)])).0 == .cborUnexpectedType)
        #expect(try await key.send(.config, .intMap([(1, 2), (4, "mac")])).0 == .cborUnexpectedType)
    }

    @Test("with a PIN: the pinUvAuthParam checks, in order", arguments: protocols)
    func authentication(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await key.config(0x02) == .pinUvAuthTokenRequired)
        #expect(try await key.send(.config, .intMap([(1, 2), (4, .bytes([0]))])).0 == .missingParameter)
        #expect(try await key.send(.config, .intMap([(1, 2), (3, 9), (4, .bytes([0]))])).0 == .invalidParameter)
        #expect(
            try await key.send(.config, .intMap([(1, 2), (3, .int(version)), (4, .bytes(Array(repeating: 0, count: 32)))]))
                .0 == .pinAuthInvalid,
            "no token"
        )
        let mcga = try await key.configToken(version, permissions: 0x03)
        #expect(try await key.config(0x02, token: mcga) == .pinAuthInvalid, "no acfg permission")
        let cm = try await key.configToken(version, permissions: 0x04)
        #expect(try await key.config(0x02, token: cm) == .pinAuthInvalid, "cm is not acfg")

        var token = try await key.configToken(version)
        // The MAC covers the prefix, the command byte, subCommand and the parameters.
        let bare = token.platform.authenticate(key: token.token, [0x02])
        #expect(
            try await key.send(.config, .intMap([(1, 2), (3, .int(version)), (4, .bytes(bare))])).0 == .pinAuthInvalid,
            "without 32×0xff || 0x0d"
        )
        let other = [UInt8](repeating: 0xFF, count: 32) + [0x0D, 0x03] + CBORValue.intMap([(1, 5)]).encoded()
        let swapped: CBORValue = .intMap([
            (1, 3), (2, .intMap([(1, 9)])), (3, .int(version)), (4, .bytes(token.platform.authenticate(key: token.token, other))),
        ])
        #expect(try await key.send(.config, swapped).0 == .pinAuthInvalid, "other parameters")
        #expect(try await key.info().required(0x0D, "minPINLength").intValue() == 4)
        token.token[0] ^= 1
        #expect(try await key.config(0x02, token: token) == .pinAuthInvalid, "another token")
        token.token[0] ^= 1
        #expect(try await key.config(0x02, token: token) == .ok)
        let options = try await key.info().required(4, "options").mapValue()
        #expect(options[text: "alwaysUv"] == true)
    }
}
