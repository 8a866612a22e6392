// The persistent pinUvAuthToken (CTAP 2.2, getInfo perCredMgmtRO): the pcmr
// permission and its status codes, the token lasting across power cycles and
// restarts but not a PIN change or a reset, read-only credential management
// with it, and getInfo's encIdentifier and encCredStoreState decrypted the
// way python-fido2's Info.get_identifier does, with TestPlatform's
// independent OpenSSL code.

import CBOR
import COpenSSL
import Testing

@testable import CTAP

/// pcmr, CTAP 2.2 §6.5.5.7 (python-fido2's PERSISTENT_CREDENTIAL_MGMT).
private let pcmr = 0x40

/// AES-128-CBC decryption without padding through EVP_Cipher*.
private func opensslAES128CBCDecrypt(_ input: [UInt8], key: [UInt8], iv: [UInt8]) -> [UInt8] {
    let context = EVP_CIPHER_CTX_new()!
    defer { EVP_CIPHER_CTX_free(context) }
    precondition(EVP_CipherInit_ex(context, EVP_aes_128_cbc(), nil, key, iv, 0) == 1)
    precondition(EVP_CIPHER_CTX_set_padding(context, 0) == 1)
    var output = [UInt8](repeating: 0, count: input.count + 16)
    var written: Int32 = 0
    var finished: Int32 = 0
    precondition(EVP_CipherUpdate(context, &output, &written, input, Int32(input.count)) == 1)
    output.withUnsafeMutableBufferPointer { buffer in
        precondition(EVP_CipherFinal_ex(context, buffer.baseAddress! + Int(written), &finished) == 1)
    }
    return Array(output.prefix(Int(written + finished)))
}

/// A getInfo value encrypted to the persistent token: IV || AES-128-CBC under
/// HKDF-SHA-256(salt = 32 zero bytes, IKM = token, info, L = 16).
private func decryptInfoValue(_ value: [UInt8]?, info: String, token: [UInt8]) throws -> [UInt8] {
    let value = try #require(value)
    #expect(value.count == 32, "IV and one block")
    let key = Array(handHKDF(ikm: token, salt: Array(repeating: 0, count: 32), info: Array(info.utf8)).prefix(16))
    return opensslAES128CBCDecrypt(Array(value.dropFirst(16)), key: key, iv: Array(value.prefix(16)))
}

extension TestKey {
    /// The persistent token, as python-fido2's get_pin_token(PIN, PERSISTENT_CREDENTIAL_MGMT) gets it.
    func persistentToken(protocol version: Int = 2) async throws -> (token: [UInt8], platform: TestPlatform) {
        let (status, token, platform) = try await pinToken("1234", protocol: version, permissions: pcmr, rpId: nil)
        try #require(status == .ok)
        return (try #require(token), platform)
    }

    /// getInfo's identifier and credential store state decrypted with `token`.
    func identity(_ token: [UInt8]) async throws -> KeyIdentity {
        let info = try await authenticator.getInfo()
        return KeyIdentity(
            identifier: try decryptInfoValue(info.encIdentifier, info: "encIdentifier", token: token),
            state: try decryptInfoValue(info.encCredStoreState, info: "encCredStoreState", token: token)
        )
    }
}

/// encIdentifier and encCredStoreState, decrypted.
struct KeyIdentity: Equatable {
    var identifier: [UInt8]
    var state: [UInt8]
}

@Suite("persistent pinUvAuthToken")
struct PersistentTokenTests {
    @Test("pcmr: the same token every time, across power cycles and restarts; getInfo says perCredMgmtRO", arguments: [1, 2])
    func lasts(version: Int) async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let info = try await key.authenticator.getInfo()
        #expect(info.options.contains { $0 == ("perCredMgmtRO", true) })
        #expect(info.encIdentifier == nil && info.encCredStoreState == nil, "no token, no one to tell")
        let (token, _) = try await key.persistentToken(protocol: version)
        #expect(token.count == 32)
        #expect(try await key.persistentToken(protocol: 3 - version).token == token)
        await key.authenticator.powerCycle()
        #expect(try await key.persistentToken(protocol: version).token == token)
        let restarted = TestKey(sharing: key, seed: "restart")
        #expect(try await restarted.persistentToken(protocol: version).token == token)
    }

    @Test("pcmr is granted alone, and only by keys that offer it (CTAP2_ERR_UNAUTHORIZED_PERMISSION)")
    func grantedAlone() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        for permissions in [pcmr | 0x04, pcmr | 0x01, pcmr | 0x20] {
            #expect(try await key.pinToken("1234", permissions: permissions).0 == .unauthorizedPermission)
        }
        let off = TestKey { $0.persistentPinUvAuthToken = false }
        #expect(try await off.setPIN("1234") == .ok)
        #expect(try await off.pinToken("1234", permissions: pcmr, rpId: nil).0 == .unauthorizedPermission)
        let info = try await off.authenticator.getInfo()
        #expect(!info.options.contains { $0.0 == "perCredMgmtRO" })
    }

    @Test("the token lists credentials, before and after a power cycle, and never changes them (PIN_AUTH_INVALID)")
    func readOnly() async throws {
        let fixture = try await CredentialManagementFixture()
        let persistent = try await fixture.key.persistentToken()
        for cycle in [false, true] {
            if cycle { await fixture.key.authenticator.powerCycle() }
            let persistent = (token: persistent.token, platform: try await fixture.key.platform(2))
            let (metadataStatus, metadata) = try await fixture.send(0x01, token: persistent)
            #expect(metadataStatus == .ok && metadata?[int: 0x01] == 3)
            let (rpsStatus, rps) = try await fixture.send(0x02, token: persistent)
            #expect(rpsStatus == .ok && rps?[int: 0x05] == 2)
            #expect(try await fixture.send(0x03, token: nil).0 == .ok)
            let (credentialsStatus, credentials) = try await fixture.send(
                0x04, rpIDHashParams("example.com"), token: persistent
            )
            #expect(credentialsStatus == .ok && credentials?[int: 0x09] == 2)
            #expect(try await fixture.send(0x05, token: nil).0 == .ok)
            let id = fixture.made[0].credentialId
            #expect(try await fixture.send(0x06, credentialParams(id), token: persistent).0 == .pinAuthInvalid)
            let user = CBORValue.textMap([("id", .bytes([1])), ("name", "mallory")])
            #expect(try await fixture.send(0x07, credentialParams(id, user: user), token: persistent).0 == .pinAuthInvalid)
        }
        // A session token with cm still changes them.
        let fresh = try await fixture.token()
        #expect(try await fixture.send(0x06, credentialParams(fixture.made[0].credentialId), token: fresh).0 == .ok)
        // A wrong MAC with the persistent token is PIN_AUTH_INVALID too.
        let stranger = (token: Array(repeating: UInt8(7), count: 32), platform: try await fixture.key.platform(2))
        #expect(try await fixture.send(0x01, token: stranger).0 == .pinAuthInvalid)
    }

    @Test("encCredStoreState changes with every created, updated or deleted credential, and only then")
    func credentialStoreState() async throws {
        let fixture = try await CredentialManagementFixture()
        let key = fixture.key
        let (token, _) = try await key.persistentToken()
        let first = try await key.identity(token)
        let once = try await key.authenticator.getInfo().encIdentifier
        let twice = try await key.authenticator.getInfo().encIdentifier
        #expect(once != twice, "a new IV each time")
        #expect(try await key.identity(token) == first)
        await key.authenticator.powerCycle()
        #expect(try await key.identity(token) == first)
        #expect(try await TestKey(sharing: key, seed: "restart").identity(token) == first)

        var create = MakeCredentialBuilder(rk: true)
        create.userId = [9]
        create.pinUvAuthParam = try await key.uvParam(create.clientDataHash)
        create.pinUvAuthProtocol = 2
        _ = try await key.makeCredential(create)
        let created = try await key.identity(token)
        #expect(created.identifier == first.identifier && created.state != first.state)

        let cm = try await fixture.token()
        let user = CBORValue.textMap([("id", .bytes([1])), ("name", "alicia")])
        #expect(try await fixture.send(0x07, credentialParams(fixture.made[0].credentialId, user: user), token: cm).0 == .ok)
        let updated = try await key.identity(token)
        #expect(updated.state != created.state)
        #expect(try await fixture.send(0x06, credentialParams(fixture.made[0].credentialId), token: cm).0 == .ok)
        let deleted = try await key.identity(token)
        #expect(deleted.state != updated.state && deleted.identifier == first.identifier)

        // A non-discoverable credential is not in the store.
        _ = try await key.makeCredential(MakeCredentialBuilder())
        #expect(try await key.identity(token) == deleted)
    }

    @Test("changePIN and reset revoke the token; reset gives the key a new identifier")
    func revoked() async throws {
        let key = TestKey()
        #expect(try await key.setPIN("1234") == .ok)
        let (token, _) = try await key.persistentToken()
        let before = try await key.identity(token)
        #expect(try await key.changePIN(from: "1234", to: "5678") == .ok)
        let info = try await key.authenticator.getInfo()
        #expect(info.encIdentifier == nil && info.encCredStoreState == nil)
        let fixture = CredentialManagementFixture(key: key, made: [])
        let revoked = (token: token, platform: try await key.platform(2))
        #expect(try await fixture.send(0x01, token: revoked).0 == .pinAuthInvalid)
        #expect(try await key.changePIN(from: "5678", to: "1234") == .ok)
        let (renewed, _) = try await key.persistentToken()
        #expect(renewed != token)
        #expect(try await key.identity(renewed).identifier == before.identifier)

        #expect(try await key.send(.reset).0 == .ok)
        #expect(try await key.setPIN("1234") == .ok)
        #expect(try await key.authenticator.getInfo().encIdentifier == nil)
        let (afterReset, _) = try await key.persistentToken()
        #expect(try await key.identity(afterReset).identifier != before.identifier)
    }
}
