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
import LatchkeyJSON

package struct ExchangeEnvelope: Codable, Sendable, Equatable {
    static let format = "latchkey-cxf-scrypt-aes256gcm-v1"
    /// The largest scrypt memory an envelope may ask for when it is opened:
    /// 256 MiB, twice what the default parameters take, so that a file
    /// cannot make the daemon allocate without bound.
    static let maxMemoryBytes: UInt64 = 256 << 20
    /// The most work an envelope may ask for: N·r·p at most 2^21, twice
    /// what the default parameters take (about a second). The memory cap
    /// alone leaves p free up to 2^20, and an envelope with such a p (at a
    /// memory cost within the cap) would keep a worker thread busy for days.
    package static let maxCost: UInt64 = 1 << 21

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
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package enum Kind: Equatable {
            /// Not an envelope latchkey can open (fields, names, costs).
            case malformed
            /// The tag did not verify: a wrong passphrase, or a changed file.
            case decryptionFailed
        }
        package var kind: Kind
        package var reason: String
        package var description: String { reason }
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

    /// What `open` needs, read from the fields once they are checked.
    package struct Checked: Equatable {
        var salt: [UInt8]
        var nonce: [UInt8]
        var sealed: [UInt8]
        package var parameters: Scrypt.Parameters
    }

    /// Checks every field before any key is derived: the names, the
    /// base64url encodings and lengths, and the scrypt costs against the
    /// memory and work caps.
    package func checked() throws(Failure) -> Checked {
        func malformed(_ reason: String) -> Failure { Failure(kind: .malformed, reason: reason) }
        guard format == Self.format else { throw malformed("unknown envelope format \(format)") }
        guard kdf.name == "scrypt" else { throw malformed("unknown KDF \(kdf.name)") }
        guard cipher.name == "AES-256-GCM" else { throw malformed("unknown cipher \(cipher.name)") }
        guard let salt = Base64URL.decode(kdf.salt, padding: false), salt.count >= 16 else {
            throw malformed("the salt is not 16 or more bytes of base64url")
        }
        guard let nonce = Base64URL.decode(cipher.nonce, padding: false), nonce.count == 12 else {
            throw malformed("the nonce is not 12 bytes of base64url")
        }
        guard let sealed = Base64URL.decode(ciphertext, padding: false) else {
            throw malformed("the ciphertext is not base64url")
        }
        let parameters = Scrypt.Parameters(n: kdf.N, r: kdf.r, p: kdf.p)
        let (nr, nrOverflow) = kdf.N.multipliedReportingOverflow(by: UInt64(kdf.r))
        let (cost, costOverflow) = nr.multipliedReportingOverflow(by: UInt64(kdf.p))
        guard !nrOverflow, !costOverflow, cost <= Self.maxCost else {
            throw malformed("scrypt parameters refused (N·r·p at most \(Self.maxCost))")
        }
        return Checked(salt: salt, nonce: nonce, sealed: sealed, parameters: parameters)
    }

    /// The plaintext, once the fields are checked and the tag verifies.
    package func open(passphrase: String) throws(Failure) -> [UInt8] {
        let checked = try checked()
        let key: [UInt8]
        do {
            key = try Scrypt.deriveKey(
                passphrase: Array(passphrase.precomposedStringWithCanonicalMapping.utf8),
                salt: checked.salt,
                parameters: checked.parameters,
                outputByteCount: 32,
                memoryLimit: Self.maxMemoryBytes
            )
        } catch {
            throw Failure(
                kind: .malformed,
                reason: "scrypt parameters refused (N a power of two, at most \(Self.maxMemoryBytes >> 20) MiB)"
            )
        }
        do {
            return try AES256GCM.open(
                checked.sealed, key: key, nonce: checked.nonce, authenticating: Array(format.utf8)
            )
        } catch {
            throw Failure(
                kind: .decryptionFailed,
                reason: "cannot decrypt: the passphrase is wrong, or the file was changed or corrupted"
            )
        }
    }

    /// Whether a JSON document is an envelope (rather than plain CXF).
    package static func isEnvelope(_ document: JSONValue) -> Bool {
        guard case .object(let fields) = document, case .string(let format)? = fields["format"] else { return false }
        return format.hasPrefix("latchkey-cxf-")
    }
}

extension JSONValue {
    /// The JSON text of an encodable value, keys sorted.
    static func encodable(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The envelope is strings and integers; encoding it cannot fail.
        return try! encoder.encode(value)
    }
}

/// Runs blocking work (scrypt) away from the actors and the callers' threads: the
/// daemon gives NIO's thread pool; tests and tools run it in place.
package protocol BlockingWork: Sendable {
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T
}

/// Runs the work where it is called.
package struct InPlaceWork: BlockingWork {
    package init() {}

    package func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T { try work() }
}
