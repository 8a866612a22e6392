// The administration methods the daemon's control API calls in-process: PIN
// status, set and change (checked against clientPIN through the OpenSSL
// platform of PinPlatform.swift, since both share retries and the power-cycle
// block), user updates, alwaysUv, setMinPINLength and the administrative
// reset.

import CBOR
import Testing

@testable import CTAP

extension TestKey {
    /// The error an administrative call throws, or nil when it succeeds.
    func refusal(_ operation: (Authenticator) async throws -> Void) async -> AdministrationError? {
        do {
            try await operation(authenticator)
            return nil
        } catch let error as AdministrationError {
            return error
        } catch {
            Issue.record("not an AdministrationError: \(error)")
            return nil
        }
    }

    func pinStatus() async throws -> PINStatus { try await authenticator.pinStatus() }
}

@Suite("administration")
struct AdministrationTests {
    static let protocols = [1, 2]
    /// A key's PIN status before any PIN or setting, and after a reset.
    static let fresh = PINStatus(
        isSet: false,
        retries: 8,
        maxRetries: 8,
        powerCycleRequired: false,
        minPINLength: 4,
        forcePINChange: false,
        alwaysUv: false,
        minPinLengthRPIDs: []
    )

    // MARK: pinStatus

    @Test("pinStatus of a fresh key: no PIN, 8 retries, the default settings")
    func freshStatus() async throws {
        let key = TestKey()
        #expect(try await key.pinStatus() == Self.fresh)
    }

    // MARK: setPIN

    @Test("a PIN set through the administration is accepted by clientPIN", arguments: protocols)
    func setPINThenCTAP(version: Int) async throws {
        let key = TestKey()
        try await key.authenticator.setPIN("1234")
        #expect(try await key.pinStatus().isSet)
        #expect(try key.store.secret(named: "pin.hash") == pinHash("1234") + [4])
        #expect(try await key.pinToken("1234", protocol: version, permissions: nil).0 == .ok, "getPinToken")
        #expect(try await key.pinToken("1234", protocol: version).0 == .ok, "with permissions")
        #expect(try await key.pinToken("4321", protocol: version).0 == .pinInvalid)
        let options = try await key.info().required(4, "options").mapValue()
        #expect(options[text: "clientPin"] == true)
        #expect(key.presence.requests.isEmpty, "no touch is asked for")
    }

    @Test("setPIN refuses a second PIN, and PINs that break the policy, without changing anything")
    func setPINRefusals() async throws {
        let key = TestKey()
        let tooShort = await key.refusal { try await $0.setPIN("123") }
        #expect(tooShort?.code == .pinPolicyViolation)
        #expect(tooShort?.reason.contains("at least 4") == true, "\(String(describing: tooShort))")
        // Code points, not bytes: three two-byte characters are still three.
        #expect(await key.refusal { try await $0.setPIN("ééé") }?.code == .pinPolicyViolation)
        #expect(
            await key.refusal {
                try await $0.setPIN(String(repeating: "1", count: 64))
            }?.code == .pinPolicyViolation,
            "64 bytes"
        )
        #expect(await key.refusal { try await $0.setPIN("12\u{0}34") }?.code == .pinPolicyViolation)
        #expect(await key.refusal { try await $0.setPIN("1234\u{0}") }?.code == .pinPolicyViolation)
        #expect(try await key.pinStatus().isSet == false)

        try await key.authenticator.setPIN("éééé")
        #expect(try key.store.secret(named: "pin.hash") == pinHash("éééé") + [4])
        let again = await key.refusal { try await $0.setPIN("5678") }
        #expect(again?.code == .pinAlreadySet)
        #expect(try await key.pinToken("éééé").0 == .ok, "the first PIN stays")

        let longest = TestKey()
        try await longest.authenticator.setPIN(String(repeating: "7", count: 63))
        #expect(try await longest.pinToken(String(repeating: "7", count: 63)).0 == .ok)
    }

    // MARK: changePIN

    @Test("changePIN replaces a PIN set over CTAP; the old PIN and old tokens stop working", arguments: protocols)
    func changePIN(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234", protocol: version) == .ok)
        let (_, token, platform) = try await key.pinToken("1234", protocol: version, permissions: 0x20, rpId: nil)
        try await key.authenticator.changePIN(from: "1234", to: "56789")
        #expect(try await key.pinToken("1234", protocol: version).0 == .pinInvalid)
        #expect(try await key.pinToken("56789", protocol: version).0 == .ok)
        #expect(try await key.pinStatus().retries == 8)
        #expect(
            try await key.config(0x02, token: (try #require(token), platform)) == .pinAuthInvalid,
            "tokens issued before the change are dead"
        )
    }

    @Test("a wrong current PIN costs a retry, as over clientPIN, and says how many are left")
    func wrongPINSpendsARetry() async throws {
        let key = TestKey()
        try await key.authenticator.setPIN("1234")
        let wrong = await key.refusal { try await $0.changePIN(from: "0000", to: "5678") }
        #expect(wrong?.code == .pinInvalid)
        #expect(wrong?.retries == 7)
        #expect(wrong?.reason == "wrong PIN (7 retries left)")
        #expect(try await key.pinRetries() == (7, false), "clientPIN sees the same counter")
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        #expect(try await key.pinStatus().retries == 6, "and the administration sees clientPIN's")
        try await key.authenticator.changePIN(from: "1234", to: "5678")
        #expect(try await key.pinStatus().retries == 8, "a match restores the retries")
    }

    @Test("a new PIN that breaks the policy is refused before the current PIN is checked: no retry spent")
    func policyBeforeRetry() async throws {
        let key = TestKey()
        try await key.authenticator.setPIN("1234")
        for current in ["0000", "1234"] {
            let refused = await key.refusal { try await $0.changePIN(from: current, to: "12") }
            #expect(refused?.code == .pinPolicyViolation)
        }
        #expect(try await key.pinStatus().retries == 8)
        #expect(try await key.pinToken("1234").0 == .ok)
    }

    @Test("changePIN without a PIN is pinNotSet")
    func changeWithoutPIN() async throws {
        let key = TestKey()
        let refused = await key.refusal { try await $0.changePIN(from: "1234", to: "5678") }
        #expect(refused?.code == .pinNotSet)
    }

    @Test("three wrong PINs in a row, over either path, block PIN entry until a power cycle, unspent")
    func powerCycleBlock() async throws {
        let key = TestKey()
        try await key.authenticator.setPIN("1234")
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        #expect(await key.refusal { try await $0.changePIN(from: "0000", to: "5678") }?.code == .pinInvalid)
        let third = await key.refusal { try await $0.changePIN(from: "0000", to: "5678") }
        #expect(third?.code == .pinAuthBlocked)
        #expect(third?.reason.contains("plugged in again") == true)
        let status = try await key.pinStatus()
        #expect(status.powerCycleRequired && status.retries == 5)
        #expect(
            await key.refusal { try await $0.changePIN(from: "1234", to: "5678") }?.code == .pinAuthBlocked,
            "even the right PIN"
        )
        #expect(try await key.pinToken("1234").0 == .pinAuthBlocked, "clientPIN is blocked too")
        #expect(try await key.pinStatus().retries == 5, "refused attempts cost nothing")

        await key.authenticator.powerCycle()
        #expect(try await key.pinStatus().powerCycleRequired == false)
        try await key.authenticator.changePIN(from: "1234", to: "5678")
        #expect(try await key.pinStatus().retries == 8)
    }

    @Test("verifyPIN spends a retry on a wrong PIN and shares clientPIN's counters; the right one restores them")
    func verifyPIN() async throws {
        let key = TestKey()
        #expect(await key.refusal { try await $0.verifyPIN("1234") }?.code == .pinNotSet)
        try await key.authenticator.setPIN("1234")
        let wrong = await key.refusal { try await $0.verifyPIN("0000") }
        #expect(wrong?.code == .pinInvalid && wrong?.retries == 7)
        #expect(try await key.pinToken("0000").0 == .pinInvalid, "clientPIN counts on from there")
        #expect(await key.refusal { try await $0.verifyPIN("0000") }?.code == .pinAuthBlocked)
        #expect(await key.refusal { try await $0.verifyPIN("1234") }?.code == .pinAuthBlocked, "even the right PIN")
        await key.authenticator.powerCycle()
        try await key.authenticator.verifyPIN("1234")
        #expect(try await key.pinStatus().retries == 8)
        #expect(key.presence.requests.isEmpty, "no touch is asked for")
    }

    @Test("eight wrong PINs block the PIN for good; the administrative reset clears it")
    func lockout() async throws {
        let key = TestKey()
        try await key.authenticator.setPIN("1234")
        var codes: [AdministrationError.Code?] = []
        for attempt in 0..<8 {
            if attempt % 3 == 0 { await key.authenticator.powerCycle() }
            codes.append(await key.refusal { try await $0.changePIN(from: "9999", to: "5678") }?.code)
        }
        #expect(
            codes == [
                .pinInvalid, .pinInvalid, .pinAuthBlocked, .pinInvalid, .pinInvalid, .pinAuthBlocked, .pinInvalid,
                .pinBlocked,
            ]
        )
        await key.authenticator.powerCycle()
        let status = try await key.pinStatus()
        #expect(status.isBlocked && status.retries == 0)
        let blocked = await key.refusal { try await $0.changePIN(from: "1234", to: "5678") }
        #expect(blocked?.code == .pinBlocked)
        #expect(blocked?.reason.contains("reset") == true)
        #expect(try await key.pinToken("1234").0 == .pinBlocked)
        #expect(await key.refusal { try await $0.setPIN("5678") }?.code == .pinAlreadySet)

        try await key.authenticator.administrativeReset()
        #expect(try await key.pinStatus() == Self.fresh)
        try await key.authenticator.setPIN("5678")
        #expect(try await key.pinToken("5678").0 == .ok)
    }

    @Test("a forced change refuses the same PIN after checking it, then clears the flag")
    func forcedChange() async throws {
        let key = TestKey()
        try await key.authenticator.setPIN("123456")
        try await key.authenticator.setMinPINLength(nil, forceChange: true)
        #expect(try await key.pinStatus().forcePINChange)
        #expect(try await key.pinToken("123456").0 == .pinPolicyViolation, "clientPIN wants the change too")
        let same = await key.refusal { try await $0.changePIN(from: "123456", to: "123456") }
        #expect(same?.code == .pinPolicyViolation)
        #expect(same?.reason.contains("different") == true)
        let wrong = await key.refusal { try await $0.changePIN(from: "000000", to: "000000") }
        #expect(wrong?.code == .pinInvalid, "no oracle: a wrong guess is a wrong PIN, not a policy answer")
        try await key.authenticator.changePIN(from: "123456", to: "654321")
        #expect(try await key.pinStatus().forcePINChange == false)
        #expect(try await key.pinToken("654321").0 == .ok)
    }

    // MARK: updateUser

    @Test("updateUser: a nil field stays, an empty one goes, the user handle never changes")
    func updateUser() async throws {
        let fixture = try await CredentialManagementFixture(pin: false)
        let key = fixture.key
        let id = fixture.made[0].credentialId
        var updated = try await key.authenticator.updateUser(
            credentialId: id,
            name: "alice@example.com",
            displayName: nil
        )
        #expect(updated.userName == "alice@example.com" && updated.userDisplayName == "ALICE")
        #expect(try key.store.credential(id: id) == updated)
        updated = try await key.authenticator.updateUser(credentialId: id, name: nil, displayName: "")
        #expect(updated.userName == "alice@example.com" && updated.userDisplayName == nil)
        #expect(updated.userId == [1])
        #expect(try key.store.credential(id: id)?.userDisplayName == nil)

        let unknown = await key.refusal {
            _ = try await $0.updateUser(credentialId: [1, 2, 3], name: "x", displayName: nil)
        }
        #expect(unknown?.code == .noCredential)
        let long = await key.refusal {
            _ = try await $0.updateUser(credentialId: id, name: String(repeating: "n", count: 65), displayName: nil)
        }
        #expect(long?.code == .invalidParameter)
        _ = try await key.authenticator.updateUser(
            credentialId: id,
            name: nil,
            displayName: String(repeating: "é", count: 32)
        )
    }

    // MARK: configuration

    @Test("setAlwaysUv sets rather than toggles, and getInfo follows")
    func alwaysUv() async throws {
        let key = TestKey()
        for enabled in [true, true, false, false, true] {
            try await key.authenticator.setAlwaysUv(enabled)
            #expect(try await key.pinStatus().alwaysUv == enabled)
            #expect(try await key.info().required(4, "options").mapValue()[text: "alwaysUv"] == .boolean(enabled))
        }
    }

    @Test("setMinPINLength follows setMinPINLength's rules")
    func minPINLength() async throws {
        let key = TestKey()
        try await key.authenticator.setMinPINLength(6, forceChange: false)
        #expect(try await key.info().required(0x0D, "minPINLength").intValue() == 6)
        for refused in [5, 64, -1, Int.max] {
            let error = await key.refusal { try await $0.setMinPINLength(refused, forceChange: false) }
            #expect(error?.code == .settingRefused, "\(refused)")
            #expect(error?.reason.contains("is 6") == true)
        }
        try await key.authenticator.setMinPINLength(6, forceChange: false)
        try await key.authenticator.setMinPINLength(nil, forceChange: false)
        let noPIN = await key.refusal { try await $0.setMinPINLength(nil, forceChange: true) }
        #expect(noPIN?.code == .pinNotSet)
        #expect(await key.refusal { try await $0.setPIN("12345") }?.code == .pinPolicyViolation)

        try await key.authenticator.setMinPINLength(nil, forceChange: false, rpIds: ["example.com", "b.example"])
        #expect(try await key.pinStatus().minPinLengthRPIDs == ["example.com", "b.example"])
        try await key.authenticator.setMinPINLength(nil, forceChange: false, rpIds: ["c.example"])
        #expect(try await key.pinStatus().minPinLengthRPIDs == ["c.example"], "the list is replaced")
        let many = (0...8).map { "rp\($0).example" }
        let tooMany = await key.refusal { try await $0.setMinPINLength(nil, forceChange: false, rpIds: many) }
        #expect(tooMany?.code == .settingRefused)
        #expect(tooMany?.reason.contains("at most 8 RP IDs") == true)
        #expect(try await key.pinStatus().minPinLengthRPIDs == ["c.example"], "a refusal changes nothing")

        try await key.authenticator.setPIN("123456")
        try await key.authenticator.setMinPINLength(8, forceChange: false)
        #expect(try await key.pinStatus().forcePINChange, "the PIN is shorter than the new minimum")
        #expect(try await key.pinStatus().minPINLength == 8)
    }

    // MARK: large blobs

    @Test("largeBlobStatus: the initial array's 17 bytes, a written array's size, the limit")
    func largeBlobStatus() async throws {
        let key = TestKey()
        #expect(
            try await key.authenticator.largeBlobStatus()
                == LargeBlobStatus(serializedSize: 17, maxSerializedLargeBlobArray: 4096)
        )
        let array = sampleLargeBlobArray(count: 2, size: 300)
        #expect(try await key.writeLargeBlobArray(array) == .ok)
        #expect(try await key.authenticator.largeBlobStatus().serializedSize == array.count)
    }

    // MARK: reset

    @Test("the administrative reset erases as authenticatorReset does, keeps the identity, needs no window or touch")
    func reset() async throws {
        let fixture = try await CredentialManagementFixture()
        let key = fixture.key
        // A non-discoverable credential, a large-blob array and a write left
        // in progress, all with one token (each new token ends the previous).
        let (status, token, platform) = try await key.pinToken("1234", permissions: 0x01 | 0x10)
        #expect(status == .ok)
        let mcLbw = (try #require(token), platform)
        var wrapped = MakeCredentialBuilder()
        wrapped.rk = false
        wrapped.userId = [9]
        wrapped.pinUvAuthProtocol = 2
        wrapped.pinUvAuthParam = platform.authenticate(key: mcLbw.0, wrapped.clientDataHash)
        let nonDiscoverable = try await key.makeCredential(wrapped)
        let blobs = sampleLargeBlobArray(count: 1, size: 200)
        #expect(try await key.writeLargeBlobArray(blobs, token: mcLbw) == .ok)
        #expect(try await key.beginLargeBlobWrite(blobs, token: mcLbw) == .ok, "a write left in progress")
        // Settings, and two wrong PINs towards the power-cycle block.
        try await key.authenticator.setAlwaysUv(true)
        try await key.authenticator.setMinPINLength(8, forceChange: false)
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        #expect(try await key.pinToken("0000").0 == .pinInvalid)
        #expect(try await key.pinStatus().retries == 6)
        let aaguid = try await key.info().required(3, "aaguid").bytesValue()
        try key.store.setSecret([7], named: "device.test")

        key.clock.advance(by: 60_000)
        #expect(try await key.send(.reset).0 == .notAllowed, "authenticatorReset's window has closed")
        let requestsBefore = key.presence.requests.count
        try await key.authenticator.administrativeReset()
        #expect(key.presence.requests.count == requestsBefore, "no touch")

        #expect(try key.store.allCredentials().isEmpty)
        #expect(try key.store.secret(named: "device.test") == [7], "the identity stays")
        #expect(try await key.info().required(3, "aaguid").bytesValue() == aaguid)
        #expect(try await key.pinStatus() == Self.fresh)
        var assertion = GetAssertionBuilder()
        assertion.allowList = [nonDiscoverable.credentialId]
        #expect(try await key.send(.getAssertion, assertion.cbor).0 == .noCredentials, "wrapped IDs stop working")
        #expect(try await key.send(.getAssertion, GetAssertionBuilder().cbor).0 == .noCredentials)
        #expect(try key.store.secret(named: Authenticator.wrappingSecretName)?.count == 32)
        #expect(try await key.readLargeBlobs(offset: 0, get: 100) == (.ok, initialLargeBlobArray))
        #expect(try await key.finishLargeBlobWrite(blobs) == .invalidSequence, "the write in progress ended")
        try await key.authenticator.setPIN("1234")
        var request = MakeCredentialBuilder()
        request.pinUvAuthProtocol = 2
        request.pinUvAuthParam = platform.authenticate(key: mcLbw.0, request.clientDataHash)
        #expect(try await key.send(.makeCredential, request.cbor).0 == .pinAuthInvalid, "old tokens are gone")
    }
}
