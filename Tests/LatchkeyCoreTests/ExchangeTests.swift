// The export envelope (scrypt + AES-256-GCM) and the CXF codec: round trips,
// a wrong passphrase and changed bytes refused, malformed passkeys skipped
// one by one, documents that are not CXF refused whole.

import CTAP
import Foundation
import LatchkeyCrypto
import LatchkeyJSON
import Testing

@testable import LatchkeyCore

/// Expects opening `envelope` with `passphrase` to fail, and to fail as `kind`; `label`
/// names the case in a failure's message.
func expectOpeningFails(
    _ envelope: ExchangeEnvelope,
    passphrase: String = "pw",
    with kind: ExchangeEnvelope.Failure.Kind,
    _ label: String = "the envelope",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    do {
        _ = try envelope.open(passphrase: passphrase)
        Issue.record("\(label): opened", sourceLocation: sourceLocation)
    } catch {
        #expect(error.kind == kind, "\(label): \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("export envelope")
struct ExchangeEnvelopeTests {
    /// Cheap costs, so that the tests do not spend 128 MiB each.
    static let cheap = Scrypt.Parameters(n: 1 << 10, r: 8, p: 1)
    static let plaintext = Array(#"{"version":{"major":1,"minor":0},"accounts":[]}"#.utf8)

    @Test("seals and opens with the default costs, and says what it used")
    func roundTripDefault() throws {
        let envelope = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "correct horse battery staple")
        #expect(envelope.format == "latchkey-cxf-scrypt-aes256gcm-v1")
        #expect(
            envelope.kdf.name == "scrypt" && envelope.kdf.N == 131_072 && envelope.kdf.r == 8 && envelope.kdf.p == 1
        )
        #expect(envelope.cipher.name == "AES-256-GCM")
        #expect(Base64URL.decode(envelope.kdf.salt, padding: false)?.count == 16)
        #expect(Base64URL.decode(envelope.cipher.nonce, padding: false)?.count == 12)
        #expect(try envelope.open(passphrase: "correct horse battery staple") == Self.plaintext)
    }

    @Test("the JSON form round-trips, and two seals differ (fresh salt and nonce)")
    func jsonRoundTrip() throws {
        let envelope = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "pw", parameters: Self.cheap)
        let json = JSONValue.encodable(envelope)
        let decoded = try JSONDecoder().decode(ExchangeEnvelope.self, from: json)
        #expect(decoded == envelope)
        let document = try JSONDecoder().decode(JSONValue.self, from: json)
        #expect(ExchangeEnvelope.isEnvelope(document))
        guard case .object(let fields) = document else { return }
        #expect(Set(fields.keys) == ["format", "kdf", "cipher", "ciphertext"])
        let other = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "pw", parameters: Self.cheap)
        #expect(other.kdf.salt != envelope.kdf.salt && other.cipher.nonce != envelope.cipher.nonce)
    }

    @Test("a passphrase is compared in NFC, as typed on any keyboard")
    func normalization() throws {
        let envelope = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "caf\u{E9}", parameters: Self.cheap)
        #expect(try envelope.open(passphrase: "cafe\u{301}") == Self.plaintext)
    }

    @Test("a wrong passphrase fails to decrypt")
    func wrongPassphrase() throws {
        let envelope = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "right", parameters: Self.cheap)
        expectOpeningFails(envelope, passphrase: "wrong", with: .decryptionFailed)
    }

    /// The envelope with one field changed.
    static let tampering: [(String, @Sendable (inout ExchangeEnvelope) -> Void)] = [
        ("ciphertext", { $0.ciphertext = flip($0.ciphertext, at: 3) }),
        ("tag", { $0.ciphertext = flip($0.ciphertext, at: -1) }),
        ("salt", { $0.kdf.salt = flip($0.kdf.salt, at: 0) }),
        ("nonce", { $0.cipher.nonce = flip($0.cipher.nonce, at: 0) }),
        ("N", { $0.kdf.N = 1 << 11 }),
        ("p", { $0.kdf.p = 2 }),
    ]

    static func flip(_ text: String, at index: Int) -> String {
        var bytes = Base64URL.decode(text, padding: false)!
        bytes[index < 0 ? bytes.count + index : index] ^= 0x01
        return Base64URL.encode(bytes)
    }

    @Test("a changed ciphertext, tag, salt, nonce or cost fails to decrypt", arguments: 0..<tampering.count)
    func tampered(index: Int) throws {
        var envelope = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "pw", parameters: Self.cheap)
        Self.tampering[index].1(&envelope)
        expectOpeningFails(envelope, with: .decryptionFailed, Self.tampering[index].0)
    }

    @Test("refuses unknown names, bad encodings and costs over the limit as malformed")
    func malformed() throws {
        let good = try ExchangeEnvelope.seal(Self.plaintext, passphrase: "pw", parameters: Self.cheap)
        var changes: [(inout ExchangeEnvelope) -> Void] = [
            { $0.format = "latchkey-cxf-v0" }, { $0.kdf.name = "pbkdf2" }, { $0.cipher.name = "AES-128-GCM" },
            { $0.kdf.salt = "not base64url!" }, { $0.cipher.nonce = "AAAA" }, { $0.ciphertext = "a=" },
            { $0.kdf.N = 1000 }, { $0.kdf.N = 1 << 20 }, { $0.kdf.r = 0 },
        ]
        changes.append { $0.kdf.salt = Base64URL.encode([1, 2, 3]) }
        for (index, change) in changes.enumerated() {
            var envelope = good
            change(&envelope)
            expectOpeningFails(envelope, with: .malformed, "change \(index)")
        }
    }
}

@Suite("export envelope costs")
struct ExchangeEnvelopeCostTests {
    static func envelope(n: UInt64, r: UInt32, p: UInt32) throws -> ExchangeEnvelope {
        var envelope = try ExchangeEnvelope.seal([1, 2, 3], passphrase: "pw", parameters: ExchangeEnvelopeTests.cheap)
        envelope.kdf.N = n
        envelope.kdf.r = r
        envelope.kdf.p = p
        return envelope
    }

    @Test("an envelope asking for days of scrypt work within the memory cap is refused at once")
    func workCap() throws {
        // 128·r·N + 128·r·p = 256 MiB, within the memory cap; N·r·p = 2^40.
        let parameters = Scrypt.Parameters(n: 1 << 20, r: 1, p: 1 << 20)
        #expect(try #require(parameters.memoryByteCount) <= ExchangeEnvelope.maxMemoryBytes)
        let envelope = try Self.envelope(n: 1 << 20, r: 1, p: 1 << 20)
        let started = ContinuousClock.now
        expectOpeningFails(envelope, with: .malformed)
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    /// N, r, p, and whether the checks pass them.
    static let costs: [(UInt64, UInt32, UInt32, Bool)] = [
        (1 << 17, 8, 1, true),
        (1 << 17, 8, 2, true),
        (1 << 18, 8, 1, true),
        (1 << 17, 8, 3, false),
        (1 << 19, 8, 1, false),
        (2, 1, 1 << 21, false),
        (1 << 63, 0xFFFF_FFFF, 0xFFFF_FFFF, false),
    ]

    @Test(
        "the work cap is N·r·p ≤ 2^21: the default export costs and twice their work pass, more does not",
        arguments: costs
    )
    func workCapBoundary(n: UInt64, r: UInt32, p: UInt32, passes: Bool) throws {
        let envelope = try Self.envelope(n: n, r: r, p: p)
        #expect(((try? envelope.checked()) != nil) == passes, "N \(n), r \(r), p \(p)")
    }
}

@Suite("CXF codec")
struct CXFTests {
    static func passkeys() throws -> [CXFPasskey] {
        let p256 = try P256PrivateKey()
        let ed25519 = try Ed25519PrivateKey()
        return [
            CXFPasskey(
                credentialId: Array(repeating: 0xAB, count: 32),
                rpId: "example.com",
                username: "alice",
                userDisplayName: "Alice",
                userHandle: [1, 2, 3],
                key: p256.pkcs8DERRepresentation,
                hmacCredentials: (Array(repeating: 1, count: 32), Array(repeating: 2, count: 32)),
                credBlob: [9, 8, 7]
            ),
            CXFPasskey(
                credentialId: [0xFF, 0xFE],
                rpId: "other.org",
                username: "",
                userDisplayName: "",
                userHandle: Array(repeating: 7, count: 64),
                key: ed25519.pkcs8DERRepresentation
            ),
        ]
    }

    static func document(_ passkeys: [CXFPasskey]) -> Data {
        CXF.encode(passkeys, accountId: [1, 2, 3, 4], exporterDisplayName: "test", timestamp: 1_790_000_000)
    }

    @Test("encodes passkeys and reads them back unchanged")
    func roundTrip() throws {
        let passkeys = try Self.passkeys()
        let data = Self.document(passkeys)
        let entries = try CXF.read(data)
        #expect(entries.map(\.outcome) == passkeys.map { .passkey($0) })
        #expect(
            entries.map(\.location) == ["accounts[0].items[0].credentials[0]", "accounts[0].items[1].credentials[0]"]
        )
        // Re-encoding what was read gives the same bytes (keys sorted, no whitespace).
        let read = entries.compactMap { if case .passkey(let p) = $0.outcome { p } else { nil } }
        #expect(Self.document(read) == data)
    }

    @Test("writes the members CXF names, base64url without padding")
    func shape() throws {
        let data = Self.document(try Self.passkeys())
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((json["version"] as? [String: Int]) == ["major": 1, "minor": 0])
        #expect(json["exporterRpId"] as? String == "latchkey" && json["timestamp"] as? Int == 1_790_000_000)
        let account = try #require((json["accounts"] as? [[String: Any]])?.first)
        #expect(account["id"] as? String == "AQIDBA")
        let item = try #require((account["items"] as? [[String: Any]])?.first)
        #expect(item["title"] as? String == "example.com")
        let credential = try #require((item["credentials"] as? [[String: Any]])?.first)
        #expect(credential["type"] as? String == "passkey")
        #expect(credential["userHandle"] as? String == "AQID")
        #expect(!(credential["key"] as? String ?? "=").contains("="))
        let extensions = try #require(credential["fido2Extensions"] as? [String: Any])
        let hmac = try #require(extensions["hmacCredentials"] as? [String: String])
        #expect(hmac["algorithm"] == "hmac-sha256" && hmac["credWithUV"]?.count == 43)
        #expect(extensions["credBlob"] as? String == "CQgH")
    }

    /// A passkey credential with one member changed (nil removes it).
    static func passkeyJSON(_ change: [String: JSONValue?]) throws -> JSONValue {
        let data = Self.document([try Self.passkeys()[0]])
        guard case .object(var header) = try JSONDecoder().decode(JSONValue.self, from: data),
            case .array(var accounts)? = header["accounts"], case .object(var account) = accounts[0],
            case .array(var items)? = account["items"], case .object(var item) = items[0],
            case .array(var credentials)? = item["credentials"], case .object(var credential) = credentials[0]
        else { throw CXFError("unexpected shape") }
        for (name, value) in change { credential[name] = value }
        credentials[0] = .object(credential)
        item["credentials"] = .array(credentials)
        items[0] = .object(item)
        account["items"] = .array(items)
        accounts[0] = .object(account)
        header["accounts"] = .array(accounts)
        return .object(header)
    }

    static let malformed: [(String, [String: JSONValue?], String)] = [
        ("no credentialId", ["credentialId": nil], "credentialId is missing"),
        ("padded credentialId", ["credentialId": "AAAA=="], "credentialId is not base64url"),
        ("standard base64", ["credentialId": "ab+/"], "credentialId is not base64url"),
        ("empty rpId", ["rpId": ""], "rpId is empty"),
        ("no userHandle", ["userHandle": nil], "userHandle is missing"),
        ("long userHandle", ["userHandle": .string(Base64URL.encode(Array(repeating: 1, count: 65)))], "userHandle"),
        ("number username", ["username": .number(3)], "username is missing"),
        ("long username", ["username": .string(String(repeating: "u", count: 65))], "over 64 bytes"),
        ("not PKCS#8", ["key": .string(Base64URL.encode([0x30, 0x03, 0x02, 0x01, 0x00]))], "not a PKCS#8"),
        (
            "hmac algorithm",
            [
                "fido2Extensions": .object([
                    "hmacCredentials": .object(["algorithm": "hmac-sha512", "credWithUV": "AA", "credWithoutUV": "AA"])
                ])
            ], "hmac-sha512"
        ),
        (
            "short hmac",
            [
                "fido2Extensions": .object([
                    "hmacCredentials": .object(["algorithm": "hmac-sha256", "credWithUV": "AA", "credWithoutUV": "AA"])
                ])
            ], "32 bytes"
        ),
        (
            "long credBlob",
            ["fido2Extensions": .object(["credBlob": .string(Base64URL.encode(Array(repeating: 0, count: 33)))])],
            "credBlob"
        ),
    ]

    @Test("skips a malformed passkey with its reason", arguments: 0..<malformed.count)
    func malformedPasskey(index: Int) throws {
        let (name, change, reason) = Self.malformed[index]
        let entries = try CXF.read(try Self.passkeyJSON(change))
        #expect(entries.count == 1, "\(name)")
        guard case .skipped(let said) = entries[0].outcome else {
            Issue.record("\(name): read as a passkey")
            return
        }
        #expect(said.hasPrefix("malformed passkey:") && said.contains(reason), "\(name): \(said)")
    }

    @Test("reports other credential types, imports the passkeys beside them, notes a largeBlob")
    func otherTypes() throws {
        let data = Self.document(try Self.passkeys())
        guard case .object(var header) = try JSONDecoder().decode(JSONValue.self, from: data),
            case .array(var accounts)? = header["accounts"], case .object(var account) = accounts[0],
            case .array(var items)? = account["items"]
        else { throw CXFError("unexpected shape") }
        items.append(.object(["id": "AA", "title": "mail", "credentials": .array([.object(["type": "basic-auth"])])]))
        items.append(.object(["id": "AB", "title": "broken"]))
        account["items"] = .array(items)
        accounts[0] = .object(account)
        header["accounts"] = .array(accounts)
        let entries = try CXF.read(.object(header))
        #expect(entries.count == 4)
        #expect(entries[2].outcome == .skipped("a basic-auth credential, not a passkey"))
        #expect(entries[3].outcome == .skipped("malformed item: no credentials"))

        let withBlob = try CXF.read(
            try Self.passkeyJSON([
                "fido2Extensions": .object(["largeBlob": .object(["uncompressedSize": .number(3), "data": "AAAA"])])
            ])
        )
        guard case .passkey(let passkey) = withBlob[0].outcome else {
            Issue.record("a largeBlob makes a passkey malformed")
            return
        }
        #expect(passkey.hasLargeBlob)
    }

    static let notCXF: [(String, String)] = [
        ("not JSON", "{"), ("an array", "[]"), ("no version", #"{"accounts":[]}"#),
        ("version 2", #"{"version":{"major":2,"minor":0},"accounts":[]}"#),
        ("no accounts", #"{"version":{"major":1,"minor":0}}"#),
        ("account without items", #"{"version":{"major":1,"minor":0},"accounts":[{"id":"AA"}]}"#),
    ]

    @Test("refuses a document that is not CXF v1 whole", arguments: notCXF)
    func notCXFDocument(name: String, text: String) {
        #expect(throws: CXFError.self, "\(name)") { try CXF.read(Data(text.utf8)) }
    }

    @Test("a minor version above 0 is read")
    func minorVersion() throws {
        #expect(try CXF.read(Data(#"{"version":{"major":1,"minor":3},"accounts":[]}"#.utf8)).isEmpty)
    }
}
