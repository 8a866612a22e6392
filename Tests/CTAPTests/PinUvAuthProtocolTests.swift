// PIN/UV auth protocols One and Two against a platform side written straight
// on OpenSSL (PinPlatform.swift), against known answers computed with
// python-fido2's PinProtocolV1/V2 (`fido2.ctap2.pin`, 2.2.1) and with PyPI
// `cryptography` (Tests/python/pin_protocol_vectors.py), and every malformed
// input.

import CBOR
import COpenSSL
import LatchkeyCrypto
import Synchronization
import Testing

@testable import CTAP

@Suite("PIN/UV auth protocols")
struct PinUvAuthProtocolTests {
    static let versions: [PinUvAuthProtocolVersion] = [.one, .two]

    func makeProtocol(_ version: PinUvAuthProtocolVersion, seed: String = "pin") -> PinUvAuthProtocol {
        PinUvAuthProtocol(version: version, entropy: DeterministicEntropy(seed: Array(seed.utf8)))
    }

    /// An OpenSSL platform that agreed on a shared secret with the authenticator's side of
    /// `version`, and the secret as the authenticator decapsulated it.
    func agreed(_ version: PinUvAuthProtocolVersion) throws -> (platform: TestPlatform, shared: [UInt8]) {
        let authenticator = makeProtocol(version)
        let platform = try TestPlatform(
            version: Int(version.rawValue), authenticatorKey: authenticator.getPublicKey().mapValue()
        )
        return (platform, try authenticator.decapsulate(platform.keyAgreement))
    }

    @Test("getPublicKey is an EC2 P-256 COSE_Key with alg -25 on the curve", arguments: versions)
    func publicKey(version: PinUvAuthProtocolVersion) throws {
        let key = try makeProtocol(version).getPublicKey().mapValue()
        #expect(key.entries.count == 5)
        #expect(key[int: 1] == 2)
        #expect(key[int: 3] == -25)
        #expect(key[int: -1] == 1)
        let x = try key.required(-2, "x").bytesValue()
        let y = try key.required(-3, "y").bytesValue()
        #expect(x.count == 32 && y.count == 32)
        let parsed = opensslP256PublicKey(x: x, y: y)
        #expect(parsed != nil, "OpenSSL accepts the point")
        EVP_PKEY_free(parsed)
    }

    @Test("decapsulate agrees with an OpenSSL platform's ECDH and KDF", arguments: versions)
    func decapsulate(version: PinUvAuthProtocolVersion) throws {
        let (platform, shared) = try agreed(version)
        #expect(shared == platform.sharedSecret)
        #expect(shared.count == version.sharedSecretByteCount)
        if version == .one { #expect(shared == opensslSHA256(platform.z)) }
    }

    // Computed with python-fido2: PinProtocolV1().kdf(z), PinProtocolV2().kdf(z)
    // for z = bytes(range(1, 33)).
    @Test("kdf matches python-fido2's for both protocols")
    func kdfKnownAnswers() {
        let z = Array(UInt8(1)...UInt8(32))
        #expect(PinUvAuthProtocolVersion.one.kdf(z) == hex("ae216c2ef5247a3782c135efa279a3e4cdc61094270f5d2be58c6204b7a612c9"))
        #expect(
            PinUvAuthProtocolVersion.two.kdf(z)
                == hex(
                    "9eb685ea1bd795e05cbfbe28f0ef46f1b89ae3a73161c4d64d1181082e82db67"
                        + "e56b82398cbb09e2a1b546808a716befa7907d17976b72193c6f909413c73184"
                )
        )
        #expect(PinUvAuthProtocolVersion.two.kdf(z) == TestPlatform.kdf(version: 2, z: z))
    }

    // python-fido2: PinProtocolV1().authenticate(k[:32], b"message"),
    // PinProtocolV2().authenticate(k, b"message"), PinProtocolV1().encrypt(k[:32],
    // bytes(range(32))) for k = bytes(range(64)).
    @Test("authenticate and protocol One's encrypt match python-fido2")
    func symmetricKnownAnswers() throws {
        let key = Array(UInt8(0)..<UInt8(64))
        let message = Array("message".utf8)
        #expect(
            PinUvAuthProtocolVersion.one.authenticate(key: Array(key.prefix(32)), message: message)
                == hex("6297b77508a1a30ea4dfadd8f847c31b")
        )
        #expect(
            PinUvAuthProtocolVersion.two.authenticate(key: key, message: message)
                == hex("6297b77508a1a30ea4dfadd8f847c31b49aba45de10a79daf721d3f7ec112a24")
        )
        let entropy = DeterministicEntropy(seed: [1])
        #expect(
            try PinUvAuthProtocolVersion.one.encrypt(
                key: Array(key.prefix(32)), plaintext: Array(UInt8(0)..<UInt8(32)), entropy: entropy
            ) == hex("5a6e045708fb7196f02e553d02c3a692c77147ebd5121de8d0fae7762423b6bf")
        )
    }

    @Test("encrypt and decrypt interoperate with the OpenSSL platform both ways", arguments: versions)
    func encryptDecrypt(version: PinUvAuthProtocolVersion) throws {
        let (platform, shared) = try agreed(version)
        let entropy = DeterministicEntropy(seed: [2])
        let plaintext = Array(UInt8(100)..<UInt8(132))

        let sealed = try version.encrypt(key: shared, plaintext: plaintext, entropy: entropy)
        #expect(sealed.count == plaintext.count + (version == .one ? 0 : 16))
        #expect(platform.decrypt(sealed) == plaintext)
        #expect(try version.decrypt(key: shared, ciphertext: platform.encrypt(plaintext)) == plaintext)

        let again = try version.encrypt(key: shared, plaintext: plaintext, entropy: entropy)
        if version == .one {
            #expect(again == sealed, "a zero IV: the same plaintext, the same ciphertext")
            #expect(sealed == platform.encrypt(plaintext))
        } else {
            #expect(again.prefix(16) != sealed.prefix(16), "a fresh IV every time")
            #expect(platform.decrypt(again) == plaintext)
        }
    }

    @Test("authenticate matches the platform's MAC; verify refuses any other", arguments: versions)
    func authenticateVerify(version: PinUvAuthProtocolVersion) throws {
        let (platform, shared) = try agreed(version)
        let message = Array("newPinEnc".utf8)
        let mac = platform.authenticate(message)
        #expect(mac.count == (version == .one ? 16 : 32))
        #expect(version.authenticate(key: shared, message: message) == mac)
        #expect(version.verify(key: shared, message: message, signature: mac))

        var flipped = mac
        flipped[3] ^= 0x01
        #expect(!version.verify(key: shared, message: message, signature: flipped))
        #expect(!version.verify(key: shared, message: message + [0], signature: mac))
        #expect(!version.verify(key: shared, message: message, signature: Array(mac.prefix(15))))
        #expect(!version.verify(key: shared, message: message, signature: mac + [0]))
        #expect(!version.verify(key: shared, message: message, signature: []))
        if version == .two {
            #expect(
                !version.verify(key: shared, message: message, signature: Array(mac.prefix(16))),
                "protocol Two never accepts a truncated MAC"
            )
        }
        // A 32-byte pinUvAuthToken is a key too.
        let token = Array(repeating: UInt8(7), count: 32)
        #expect(version.authenticate(key: token, message: message) == platform.authenticate(key: token, message))
    }

    static let malformedKeys: [(String, CBORValue)] = {
        let x = hex("6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296")
        let y = hex("4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5")
        return [
            ("not a map", .bytes(x + y)),
            ("kty OKP", .intMap([(1, 1), (3, -25), (-1, 1), (-2, .bytes(x)), (-3, .bytes(y))])),
            ("kty missing", .intMap([(3, -25), (-1, 1), (-2, .bytes(x)), (-3, .bytes(y))])),
            ("crv P-384", .intMap([(1, 2), (3, -25), (-1, 2), (-2, .bytes(x)), (-3, .bytes(y))])),
            ("crv missing", .intMap([(1, 2), (3, -25), (-2, .bytes(x)), (-3, .bytes(y))])),
            ("x missing", .intMap([(1, 2), (3, -25), (-1, 1), (-3, .bytes(y))])),
            ("y missing", .intMap([(1, 2), (3, -25), (-1, 1), (-2, .bytes(x))])),
            ("x of 31 bytes", .intMap([(1, 2), (3, -25), (-1, 1), (-2, .bytes(Array(x.dropFirst()))), (-3, .bytes(y))])),
            ("y of 33 bytes", .intMap([(1, 2), (3, -25), (-1, 1), (-2, .bytes(x)), (-3, .bytes([0] + y))])),
            ("x is text", .intMap([(1, 2), (3, -25), (-1, 1), (-2, "x"), (-3, .bytes(y))])),
            ("kty is text", .intMap([(1, "EC2"), (3, -25), (-1, 1), (-2, .bytes(x)), (-3, .bytes(y))])),
            ("point off the curve", .intMap([(1, 2), (3, -25), (-1, 1), (-2, .bytes(x)), (-3, .bytes(x))])),
            (
                "all-zero point", .intMap([
                    (1, 2), (3, -25), (-1, 1), (-2, .bytes(Array(repeating: 0, count: 32))),
                    (-3, .bytes(Array(repeating: 0, count: 32))),
                ])
            ),
            (
                "x not below p", .intMap([
                    (1, 2), (3, -25), (-1, 1), (-2, .bytes(Array(repeating: 0xFF, count: 32))), (-3, .bytes(y)),
                ])
            ),
        ]
    }()

    @Test("decapsulate refuses every malformed COSE key", arguments: malformedKeys.indices)
    func malformedKey(index: Int) {
        let (name, key) = Self.malformedKeys[index]
        for version in Self.versions {
            #expect(throws: PinUvAuthError(.malformedKey, ""), "\(name)") {
                try self.makeProtocol(version).decapsulate(key)
            }
        }
        #expect(CTAPStatus(PinUvAuthError(.malformedKey, "")) == .invalidParameter)
    }

    @Test("the generator point itself is accepted (a valid key, whatever its alg)")
    func generatorAccepted() throws {
        let x = hex("6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296")
        let y = hex("4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5")
        for alg in [-25, -7] {
            let key = CBORValue.intMap([(1, 2), (3, .int(alg)), (-1, 1), (-2, .bytes(x)), (-3, .bytes(y))])
            #expect(try makeProtocol(.two).decapsulate(key).count == 64)
        }
    }

    @Test("decrypt refuses ciphertexts that are not whole blocks")
    func decryptLengths() throws {
        let one = PinUvAuthProtocolVersion.one
        let two = PinUvAuthProtocolVersion.two
        let key32 = Array(repeating: UInt8(1), count: 32)
        let key64 = Array(repeating: UInt8(1), count: 64)
        for length in [1, 15, 17, 63] {
            #expect(throws: PinUvAuthError(.invalidLength, "")) {
                try one.decrypt(key: key32, ciphertext: Array(repeating: 0, count: length))
            }
        }
        for length in [0, 15, 17, 31, 16 + 63] {
            #expect(throws: PinUvAuthError(.invalidLength, "")) {
                try two.decrypt(key: key64, ciphertext: Array(repeating: 0, count: length))
            }
        }
        #expect(try one.decrypt(key: key32, ciphertext: []) == [])
        #expect(try two.decrypt(key: key64, ciphertext: Array(repeating: 0, count: 16)) == [])
        #expect(try two.decrypt(key: key64, ciphertext: Array(repeating: 0, count: 32)).count == 16)
    }

    @Test("regenerate replaces the key agreement key; resetPinUvAuthToken the token", arguments: versions)
    func regenerate(version: PinUvAuthProtocolVersion) throws {
        let entropy = DeterministicEntropy(seed: [3])
        var pinProtocol = PinUvAuthProtocol(version: version, entropy: entropy)
        let key = pinProtocol.getPublicKey()
        let token = pinProtocol.pinUvAuthToken
        #expect(token.count == 32)
        let platform = try TestPlatform(version: Int(version.rawValue), authenticatorKey: key.mapValue())
        pinProtocol.regenerate(entropy: entropy)
        #expect(pinProtocol.getPublicKey() != key)
        #expect(pinProtocol.pinUvAuthToken == token)
        #expect(try pinProtocol.decapsulate(platform.keyAgreement) != platform.sharedSecret, "old secrets stop working")
        pinProtocol.resetPinUvAuthToken(entropy: entropy)
        #expect(pinProtocol.pinUvAuthToken != token)
    }

    // Cross-check vectors from Tests/python/pin_protocol_vectors.py, which
    // computes them with PyPI `cryptography` alone (ECDH, SHA-256, HKDF, HMAC,
    // AES-CBC): neither CTAP 2.1 nor the CTAP 2.2 draft publishes test vectors
    // for the PIN/UV auth protocols. The authenticator's key agreement scalar
    // is `a`, the platform's `b`; the platform sends b·G as its keyAgreement.
    static let crossCheck = (
        a: "7a1f3c5e9b2d4f6081a3c5e7092b4d6f8193a5c7e90b2d4f6170839faebdcf01",
        platformX: "73cd2cb3356e1c762f2c0eb587e87512e785632c67f9de2a3870124a7c10aac2",
        platformY: "4f2cb03719e14f2992e9413b64b9ed9897e3cd329804cf1a6523072b2c48176e",
        z: "0cafb72b45cef9517386279ba36cc6f38c56e54b57c6886e6bffeb2c290ac71d",
        kdfOne: "5d9cb390fde7ed1309548fd2377d55147d5a22b0a4b7f7968f8c308f469f3fe5",
        kdfTwo: "e4c4688ad300a0f5407ececbbd627c34e159703add94ac10bab158f989e82283"
            + "c227301e182ed778513f6eaec38126f2600b75912a829bd1f622227e936e00bc",
        authenticateOne: "556521eed5ca4458eeb2a1e4306e4fdd",
        authenticateTwo: "1bd74c514cd907bf1daa8ef119d21b5fdc84723bbf19cc289776c1a979e59e45",
        encryptOne: "28813d168d70dcad27997af569ffef1a5fe48507ddb4a8b7fd24b52c92c14663",
        encryptTwo: "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
            + "8149f9fbd3c3d56f5d4a5c615b15f96e7cd1e58cbcf6769971bcdf208bd05eb1"
    )

    @Test("decapsulate, kdf, authenticate and encrypt match PyPI cryptography's cross-check vectors")
    func cryptographyCrossCheck() throws {
        let v = Self.crossCheck
        let message = Array("CTAP 2.1 cross-check".utf8)
        let plaintext = Array(UInt8(0)..<UInt8(32))
        #expect(PinUvAuthProtocolVersion.one.kdf(hex(v.z)) == hex(v.kdfOne))
        #expect(PinUvAuthProtocolVersion.two.kdf(hex(v.z)) == hex(v.kdfTwo))
        let peer = CBORValue.intMap([
            (1, 2), (3, -25), (-1, 1), (-2, .bytes(hex(v.platformX))), (-3, .bytes(hex(v.platformY))),
        ])
        for (version, kdf) in [(PinUvAuthProtocolVersion.one, v.kdfOne), (.two, v.kdfTwo)] {
            // The key agreement key is the first 32 bytes the entropy gives.
            let pinProtocol = PinUvAuthProtocol(version: version, entropy: FixedEntropy(prefix: hex(v.a)))
            #expect(try pinProtocol.decapsulate(peer) == hex(kdf), "ECDH then kdf, protocol \(version)")
        }
        #expect(
            PinUvAuthProtocolVersion.one.authenticate(key: hex(v.kdfOne), message: message) == hex(v.authenticateOne)
        )
        #expect(
            PinUvAuthProtocolVersion.two.authenticate(key: hex(v.kdfTwo), message: message) == hex(v.authenticateTwo)
        )
        let one = try PinUvAuthProtocolVersion.one.encrypt(
            key: hex(v.kdfOne),
            plaintext: plaintext,
            entropy: FixedEntropy(prefix: [])
        )
        #expect(one == hex(v.encryptOne))
        let iv = Array(UInt8(0xA0)..<UInt8(0xB0))
        let two = try PinUvAuthProtocolVersion.two.encrypt(
            key: hex(v.kdfTwo),
            plaintext: plaintext,
            entropy: FixedEntropy(prefix: iv)
        )
        #expect(two == hex(v.encryptTwo))
        #expect(
            try PinUvAuthProtocolVersion.one.decrypt(key: hex(v.kdfOne), ciphertext: hex(v.encryptOne)) == plaintext
        )
        #expect(
            try PinUvAuthProtocolVersion.two.decrypt(key: hex(v.kdfTwo), ciphertext: hex(v.encryptTwo)) == plaintext
        )
    }
}

/// Entropy that hands out `prefix` first, then zero bytes: a chosen key
/// agreement scalar or IV.
final class FixedEntropy: EntropySource {
    private let remaining: Mutex<[UInt8]>

    init(prefix: [UInt8]) { remaining = Mutex(prefix) }

    func bytes(count: Int) -> [UInt8] {
        let taken = remaining.withLock { remaining in
            defer { remaining.removeFirst(min(count, remaining.count)) }
            return Array(remaining.prefix(count))
        }
        return taken + [UInt8](repeating: 0, count: count - taken.count)
    }
}
