// The passphrase envelope of an encrypted passkey export: a CXF document
// encrypted with AES-256-GCM under a key derived from a passphrase with
// scrypt (RFC 7914), in a small JSON document (README "Export and import"):
//
//   {"format": "latchkey-cxf-scrypt-aes256gcm-v1",
//    "kdf": {"name": "scrypt", "salt": b64url(16 bytes), "N": 131072, "r": 8, "p": 1},
//    "cipher": {"name": "AES-256-GCM", "nonce": b64url(12 bytes)},
//    "ciphertext": b64url(encrypted CXF JSON || 16-byte tag)}
//
// key = scrypt(passphrase as UTF-8, salt, N, r, p, 32 bytes); the GCM AAD is
// the format string. Changing the salt or a cost changes the key, and the
// nonce is the cipher's own input, so every field is covered by the tag.

import Foundation
import LatchkeyCrypto

struct ExchangeEnvelope: Codable, Sendable, Equatable {
    static let format = "latchkey-cxf-scrypt-aes256gcm-v1"
    /// The largest scrypt memory an envelope may ask for when it is opened:
    /// 256 MiB, twice what the default parameters take, so that a file
    /// cannot make the daemon allocate without bound.
    static let maxMemoryBytes: UInt64 = 256 << 20

    struct KDF: Codable, Sendable, Equatable {
        var name: String
        var salt: String
        var N: UInt64
        var r: UInt32
        var p: UInt32
    }

    struct Cipher: Codable, Sendable, Equatable {
        var name: String
        var nonce: String
    }

    var format: String
    var kdf: KDF
    var cipher: Cipher
    var ciphertext: String

    /// Why an envelope did not open.
    struct Failure: Error, Equatable, CustomStringConvertible {
        enum Kind: Equatable {
            /// Not an envelope latchkey can open (fields, names, costs).
            case malformed
            /// The tag did not verify: a wrong passphrase, or a changed file.
            case decryptionFailed
        }
        var kind: Kind
        var reason: String
        var description: String { reason }
    }

    /// Encrypts `plaintext` under `passphrase` with fresh salt and nonce.
    static func seal(
        _ plaintext: [UInt8],
        passphrase: String,
        parameters: Scrypt.Parameters = .export
    ) throws -> ExchangeEnvelope {
        let salt = SecureRandom.bytes(count: 16)
        let nonce = SecureRandom.bytes(count: 12)
        let key = try Scrypt.deriveKey(
            passphrase: Array(passphrase.precomposedStringWithCanonicalMapping.utf8),
            salt: salt,
            parameters: parameters,
            outputByteCount: 32
        )
        let sealed = try AES256GCM.seal(plaintext, key: key, nonce: nonce, authenticating: Array(format.utf8))
        return ExchangeEnvelope(
            format: format,
            kdf: KDF(
                name: "scrypt",
                salt: Base64URL.encode(salt),
                N: parameters.n,
                r: parameters.r,
                p: parameters.p
            ),
            cipher: Cipher(name: "AES-256-GCM", nonce: Base64URL.encode(nonce)),
            ciphertext: Base64URL.encode(sealed)
        )
    }

    /// The plaintext, once the fields are checked and the tag verifies.
    func open(passphrase: String) throws(Failure) -> [UInt8] {
        func malformed(_ reason: String) -> Failure { Failure(kind: .malformed, reason: reason) }
        guard format == Self.format else { throw malformed("unknown envelope format \(format)") }
        guard kdf.name == "scrypt" else { throw malformed("unknown KDF \(kdf.name)") }
        guard cipher.name == "AES-256-GCM" else { throw malformed("unknown cipher \(cipher.name)") }
        guard let salt = Base64URL.strictDecode(kdf.salt), salt.count >= 16 else {
            throw malformed("the salt is not 16 or more bytes of base64url")
        }
        guard let nonce = Base64URL.strictDecode(cipher.nonce), nonce.count == 12 else {
            throw malformed("the nonce is not 12 bytes of base64url")
        }
        guard let sealed = Base64URL.strictDecode(ciphertext) else {
            throw malformed("the ciphertext is not base64url")
        }
        let parameters = Scrypt.Parameters(n: kdf.N, r: kdf.r, p: kdf.p)
        let key: [UInt8]
        do {
            key = try Scrypt.deriveKey(
                passphrase: Array(passphrase.precomposedStringWithCanonicalMapping.utf8),
                salt: salt,
                parameters: parameters,
                outputByteCount: 32,
                memoryLimit: Self.maxMemoryBytes
            )
        } catch {
            throw malformed("scrypt parameters refused (N a power of two, at most \(Self.maxMemoryBytes >> 20) MiB)")
        }
        do {
            return try AES256GCM.open(sealed, key: key, nonce: nonce, authenticating: Array(format.utf8))
        } catch {
            throw Failure(
                kind: .decryptionFailed,
                reason: "cannot decrypt: the passphrase is wrong, or the file was changed or corrupted"
            )
        }
    }

    /// Whether a JSON document is an envelope (rather than plain CXF).
    static func isEnvelope(_ document: JSONValue) -> Bool {
        guard case .object(let fields) = document, case .string(let format)? = fields["format"] else { return false }
        return format.hasPrefix("latchkey-cxf-")
    }
}
