// The platform side of PIN/UV auth protocols One and Two (CTAP 2.1 §6.5.6,
// §6.5.7) written straight against OpenSSL, sharing no code with LatchkeyCrypto
// or the engine's PinUvAuthProtocol: ECDH on a fresh P-256 key, the KDFs (HKDF
// assembled by hand from HMAC, RFC 5869), AES-256-CBC and HMAC-SHA-256. Plus
// the clientPIN requests a client sends, built on it.

import CBOR
import COpenSSL
import Testing

@testable import CTAP

/// SHA-256 through EVP_Digest.
func opensslSHA256(_ data: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    precondition(EVP_Digest(data, data.count, &digest, &length, EVP_sha256(), nil) == 1)
    return digest
}

/// HMAC-SHA-256 through EVP_Q_mac.
func opensslHMAC(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
    var code = [UInt8](repeating: 0, count: 32)
    var length = 0
    let keyBytes = key.isEmpty ? [0] : key
    precondition(
        EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, keyBytes, key.count, message, message.count, &code, 32, &length)
            != nil
    )
    return code
}

/// AES-256-CBC without padding through EVP_Cipher*.
func opensslAESCBC(_ input: [UInt8], key: [UInt8], iv: [UInt8], encrypt: Bool) -> [UInt8] {
    let context = EVP_CIPHER_CTX_new()!
    defer { EVP_CIPHER_CTX_free(context) }
    precondition(EVP_CipherInit_ex(context, EVP_aes_256_cbc(), nil, key, iv, encrypt ? 1 : 0) == 1)
    precondition(EVP_CIPHER_CTX_set_padding(context, 0) == 1)
    var output = [UInt8](repeating: 0, count: input.count + 16)
    var written: Int32 = 0
    var finished: Int32 = 0
    if !input.isEmpty {
        precondition(EVP_CipherUpdate(context, &output, &written, input, Int32(input.count)) == 1)
    }
    output.withUnsafeMutableBufferPointer { buffer in
        precondition(EVP_CipherFinal_ex(context, buffer.baseAddress! + Int(written), &finished) == 1)
    }
    return Array(output.prefix(Int(written + finished)))
}

/// HKDF-SHA-256 for one output block (L = 32), from HMAC alone (RFC 5869 §2).
func handHKDF(ikm: [UInt8], salt: [UInt8], info: [UInt8]) -> [UInt8] {
    let prk = opensslHMAC(key: salt, ikm)
    return opensslHMAC(key: prk, info + [0x01])
}

/// A P-256 public key at (x, y) as an OpenSSL EVP_PKEY, or nil when OpenSSL refuses it.
func opensslP256PublicKey(x: [UInt8], y: [UInt8]) -> OpaquePointer? {
    let der = hex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + [0x04] + x + y
    return der.withUnsafeBufferPointer { buffer in
        var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
        return d2i_PUBKEY(nil, &pointer, buffer.count)
    }
}

/// One platform session with one protocol: a fresh key agreement key, the
/// shared secret with the authenticator's key, and the symmetric operations.
struct TestPlatform {
    let version: Int
    /// The platform key agreement key, as keyAgreement (0x03) carries it.
    let keyAgreement: CBORValue
    /// kdf(Z): 32 bytes for One, HMAC key || AES key for Two.
    let sharedSecret: [UInt8]
    /// Z, the ECDH x coordinate, for checking the KDFs.
    let z: [UInt8]

    /// encapsulate(authenticatorKey), as a client does with getKeyAgreement's answer.
    init(version: Int, authenticatorKey: CBORMap) throws {
        self.version = version
        let x = try authenticatorKey.required(-2, "x").bytesValue()
        let y = try authenticatorKey.required(-3, "y").bytesValue()
        let peer = try #require(opensslP256PublicKey(x: x, y: y), "the authenticator's key is a P-256 point")
        defer { EVP_PKEY_free(peer) }

        let generator = EVP_PKEY_CTX_new_from_name(nil, "EC", nil)!
        defer { EVP_PKEY_CTX_free(generator) }
        precondition(EVP_PKEY_keygen_init(generator) == 1)
        precondition(EVP_PKEY_CTX_set_group_name(generator, "P-256") == 1)
        var key: OpaquePointer?
        precondition(EVP_PKEY_generate(generator, &key) == 1)
        defer { EVP_PKEY_free(key) }
        var point = [UInt8](repeating: 0, count: 65)
        var pointLength = 0
        precondition(EVP_PKEY_get_octet_string_param(key, "pub", &point, 65, &pointLength) == 1 && pointLength == 65)
        keyAgreement = .intMap([
            (1, 2), (3, -25), (-1, 1), (-2, .bytes(Array(point[1..<33]))), (-3, .bytes(Array(point[33...]))),
        ])

        let deriver = EVP_PKEY_CTX_new(key, nil)!
        defer { EVP_PKEY_CTX_free(deriver) }
        precondition(EVP_PKEY_derive_init(deriver) == 1)
        precondition(EVP_PKEY_derive_set_peer(deriver, peer) == 1)
        var secret = [UInt8](repeating: 0, count: 32)
        var secretLength = 32
        precondition(EVP_PKEY_derive(deriver, &secret, &secretLength) == 1 && secretLength == 32)
        z = secret
        sharedSecret = TestPlatform.kdf(version: version, z: secret)
    }

    static func kdf(version: Int, z: [UInt8]) -> [UInt8] {
        if version == 1 { return opensslSHA256(z) }
        let salt = [UInt8](repeating: 0, count: 32)
        return handHKDF(ikm: z, salt: salt, info: Array("CTAP2 HMAC key".utf8))
            + handHKDF(ikm: z, salt: salt, info: Array("CTAP2 AES key".utf8))
    }

    /// encrypt(sharedSecret, plaintext); `iv` only for Two (random when nil).
    func encrypt(_ plaintext: [UInt8], iv: [UInt8]? = nil) -> [UInt8] {
        if version == 1 {
            return opensslAESCBC(plaintext, key: sharedSecret, iv: Array(repeating: 0, count: 16), encrypt: true)
        }
        var random = [UInt8](repeating: 0, count: 16)
        precondition(RAND_bytes(&random, 16) == 1)
        let iv = iv ?? random
        return iv + opensslAESCBC(plaintext, key: Array(sharedSecret.suffix(32)), iv: iv, encrypt: true)
    }

    /// decrypt(sharedSecret, ciphertext).
    func decrypt(_ ciphertext: [UInt8]) -> [UInt8] {
        if version == 1 {
            return opensslAESCBC(ciphertext, key: sharedSecret, iv: Array(repeating: 0, count: 16), encrypt: false)
        }
        return opensslAESCBC(
            Array(ciphertext.dropFirst(16)), key: Array(sharedSecret.suffix(32)), iv: Array(ciphertext.prefix(16)),
            encrypt: false
        )
    }

    /// authenticate(key, message) with an explicit key (the shared secret or a token).
    func authenticate(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        let code = opensslHMAC(key: Array(key.prefix(32)), message)
        return version == 1 ? Array(code.prefix(16)) : code
    }

    /// authenticate(sharedSecret, message).
    func authenticate(_ message: [UInt8]) -> [UInt8] { authenticate(key: sharedSecret, message) }
}

/// A PIN padded to 64 bytes with zeros, as newPinEnc carries it.
func paddedPIN(_ pin: String) -> [UInt8] {
    let bytes = Array(pin.utf8)
    return bytes + Array(repeating: 0, count: max(0, 64 - bytes.count))
}

/// LEFT(SHA-256(pin), 16).
func pinHash(_ pin: String) -> [UInt8] { Array(opensslSHA256(Array(pin.utf8)).prefix(16)) }

extension TestKey {
    /// A clientPIN request map.
    static func clientPINRequest(
        protocol version: Int?,
        _ subCommand: Int,
        keyAgreement: CBORValue? = nil,
        pinUvAuthParam: [UInt8]? = nil,
        newPinEnc: [UInt8]? = nil,
        pinHashEnc: [UInt8]? = nil,
        permissions: Int? = nil,
        rpId: String? = nil
    ) -> CBORValue {
        .intMap(present: [
            (2, .int(subCommand)), (1, version.map(CBORValue.int)), (3, keyAgreement),
            (4, pinUvAuthParam.map(CBORValue.bytes)), (5, newPinEnc.map(CBORValue.bytes)),
            (6, pinHashEnc.map(CBORValue.bytes)), (9, permissions.map(CBORValue.int)), (10, rpId.map(CBORValue.text)),
        ])
    }

    /// The authenticator's key agreement key for `version`.
    func keyAgreement(_ version: Int) async throws -> CBORMap {
        let (status, body) = try await send(.clientPIN, Self.clientPINRequest(protocol: version, 2))
        try #require(status == .ok)
        return try #require(body).mapValue().required(1, "keyAgreement").mapValue()
    }

    /// A platform session with the authenticator's current key agreement key.
    func platform(_ version: Int) async throws -> TestPlatform {
        try TestPlatform(version: version, authenticatorKey: try await keyAgreement(version))
    }

    /// setPIN as a client sends it.
    func setPIN(_ pin: String, protocol version: Int = 2) async throws -> CTAPStatus {
        let platform = try await platform(version)
        let newPinEnc = platform.encrypt(paddedPIN(pin))
        let (status, body) = try await send(
            .clientPIN,
            Self.clientPINRequest(
                protocol: version, 3, keyAgreement: platform.keyAgreement,
                pinUvAuthParam: platform.authenticate(newPinEnc), newPinEnc: newPinEnc
            )
        )
        #expect(body == nil, "setPIN answers with the status alone")
        return status
    }

    /// changePIN as a client sends it.
    func changePIN(from old: String, to new: String, protocol version: Int = 2) async throws -> CTAPStatus {
        let platform = try await platform(version)
        let newPinEnc = platform.encrypt(paddedPIN(new))
        let pinHashEnc = platform.encrypt(pinHash(old))
        let (status, body) = try await send(
            .clientPIN,
            Self.clientPINRequest(
                protocol: version, 4, keyAgreement: platform.keyAgreement,
                pinUvAuthParam: platform.authenticate(newPinEnc + pinHashEnc), newPinEnc: newPinEnc,
                pinHashEnc: pinHashEnc
            )
        )
        #expect(body == nil, "changePIN answers with the status alone")
        return status
    }

    /// A pinUvAuthToken: getPinUvAuthTokenUsingPinWithPermissions when
    /// `permissions` is given, else getPinToken. Returns the status, and the
    /// decrypted token with the platform that got it on success.
    func pinToken(
        _ pin: String,
        protocol version: Int = 2,
        permissions: Int? = 0x03,
        rpId: String? = "example.com"
    ) async throws -> (CTAPStatus, token: [UInt8]?, platform: TestPlatform) {
        let platform = try await platform(version)
        let request = Self.clientPINRequest(
            protocol: version, permissions == nil ? 5 : 9, keyAgreement: platform.keyAgreement,
            pinHashEnc: platform.encrypt(pinHash(pin)), permissions: permissions, rpId: permissions == nil ? nil : rpId
        )
        let (status, body) = try await send(.clientPIN, request)
        guard status == .ok else { return (status, nil, platform) }
        let encrypted = try #require(body).mapValue().required(2, "pinUvAuthToken").bytesValue()
        #expect(encrypted.count == (version == 1 ? 32 : 48))
        return (status, platform.decrypt(encrypted), platform)
    }

    /// pinRetries and powerCycleState.
    func pinRetries() async throws -> (Int, Bool?) {
        let (status, body) = try await send(.clientPIN, Self.clientPINRequest(protocol: nil, 1))
        try #require(status == .ok)
        let map = try #require(body).mapValue()
        return (try map.required(3, "pinRetries").intValue(), try map[int: 4]?.boolValue())
    }
}
