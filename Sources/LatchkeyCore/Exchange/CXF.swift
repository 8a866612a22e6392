// The FIDO Alliance Credential Exchange Format (CXF v1.0), as far as latchkey
// reads and writes it: a header with accounts, each with items, each with
// credentials; of those, latchkey knows the "passkey" credential (a WebAuthn
// credential with its PKCS#8 private key and FIDO extension data). Byte
// strings are base64url without padding.
//
// Writing produces one account holding one item per passkey. Reading is
// lenient where CXF is open (unknown members and credential types are
// ignored, the latter reported) and strict about what becomes a credential:
// each passkey is checked on its own, so one malformed item is skipped and
// reported, not fatal to the others. A document that is not CXF at all
// (not JSON, no header, another major version) is refused whole.

import CTAP
import Foundation
import LatchkeyJSON

/// A passkey as CXF carries it (the "passkey" credential type).
package struct CXFPasskey: Sendable, Equatable {
    var credentialId: [UInt8]
    var rpId: String
    /// user.name; "" when the credential has none.
    var username: String
    /// user.displayName; "" when the credential has none.
    var userDisplayName: String
    var userHandle: [UInt8]
    /// PKCS#8 PrivateKeyInfo DER.
    var key: [UInt8]
    /// fido2Extensions.hmacCredentials (algorithm "hmac-sha256"): the
    /// hmac-secret CredRandom with UV, then without, 32 bytes each.
    var hmacCredentials: (withUV: [UInt8], withoutUV: [UInt8])?
    /// fido2Extensions.credBlob.
    var credBlob: [UInt8]?
    /// Whether fido2Extensions.largeBlob was present (latchkey keeps large
    /// blobs per key, not per credential, so it is not imported).
    package var hasLargeBlob = false

    package static func == (lhs: CXFPasskey, rhs: CXFPasskey) -> Bool {
        lhs.credentialId == rhs.credentialId && lhs.rpId == rhs.rpId && lhs.username == rhs.username
            && lhs.userDisplayName == rhs.userDisplayName && lhs.userHandle == rhs.userHandle && lhs.key == rhs.key
            && lhs.hmacCredentials?.withUV == rhs.hmacCredentials?.withUV
            && lhs.hmacCredentials?.withoutUV == rhs.hmacCredentials?.withoutUV && lhs.credBlob == rhs.credBlob
            && lhs.hasLargeBlob == rhs.hasLargeBlob
    }
}

extension CXFPasskey {
    /// The passkey of an exported credential.
    init(_ exported: ExportedCredential) {
        let credential = exported.credential
        credentialId = credential.id
        rpId = credential.rpId
        username = credential.userName ?? ""
        userDisplayName = credential.userDisplayName ?? ""
        userHandle = credential.userId
        key = exported.pkcs8
        if let random = credential.credRandom, random.count == 64 {
            hmacCredentials = (Array(random.prefix(32)), Array(random.suffix(32)))
        }
        credBlob = credential.credBlob
    }
}

/// A CXF document refused whole.
package struct CXFError: Error, Equatable, CustomStringConvertible {
    package var reason: String
    init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}

/// One credential of a document being read: a passkey ready to import, or
/// why it was skipped.
package struct CXFEntry: Sendable, Equatable {
    /// Where it is: "accounts[0].items[3].credentials[0]".
    var location: String
    /// The credential ID and RP ID, when they could be read, for the report.
    var credentialId: [UInt8]?
    var rpId: String?
    package var outcome: Outcome

    package enum Outcome: Sendable, Equatable {
        case passkey(CXFPasskey)
        case skipped(String)
    }
}

package enum CXF {
    /// The CXF version written and read (major 1; any minor is read).
    static let majorVersion = 1
    static let minorVersion = 0
    /// The longest user name and display name kept (WebAuthn §6.4.1 lets an
    /// authenticator truncate them to 64 bytes; the engine refuses longer).
    static let maxUserFieldBytes = 64
    static let maxUserHandleBytes = 64

    // MARK: Writing

    /// The CXF JSON of `passkeys`: one account (`accountId`), one item per
    /// passkey, `timestamp` in Unix seconds.
    package static func encode(
        _ passkeys: [CXFPasskey],
        accountId: [UInt8],
        exporterDisplayName: String,
        timestamp: UInt64
    ) -> Data {
        let items: [JSONValue] = passkeys.map { passkey in
            var credential: [String: JSONValue] = [
                "type": "passkey",
                "credentialId": .string(Base64URL.encode(passkey.credentialId)),
                "rpId": .string(passkey.rpId),
                "username": .string(passkey.username),
                "userDisplayName": .string(passkey.userDisplayName),
                "userHandle": .string(Base64URL.encode(passkey.userHandle)),
                "key": .string(Base64URL.encode(passkey.key)),
            ]
            var extensions: [String: JSONValue] = [:]
            if let hmac = passkey.hmacCredentials {
                extensions["hmacCredentials"] = .object([
                    "algorithm": "hmac-sha256",
                    "credWithUV": .string(Base64URL.encode(hmac.withUV)),
                    "credWithoutUV": .string(Base64URL.encode(hmac.withoutUV)),
                ])
            }
            if let blob = passkey.credBlob { extensions["credBlob"] = .string(Base64URL.encode(blob)) }
            if !extensions.isEmpty { credential["fido2Extensions"] = .object(extensions) }
            var item: [String: JSONValue] = [
                // An item ID is at most 64 bytes; a credential ID may be longer.
                "id": .string(Base64URL.encode(Array(passkey.credentialId.prefix(64)))),
                "title": .string(passkey.rpId),
                "credentials": .array([.object(credential)]),
            ]
            if !passkey.username.isEmpty { item["subtitle"] = .string(passkey.username) }
            return .object(item)
        }
        let document: JSONValue = .object([
            "version": .object(["major": .number(Double(majorVersion)), "minor": .number(Double(minorVersion))]),
            "exporterRpId": "latchkey",
            "exporterDisplayName": .string(exporterDisplayName),
            "timestamp": .number(Double(timestamp)),
            "accounts": .array([
                .object([
                    "id": .string(Base64URL.encode(accountId)),
                    "username": "",
                    "email": "",
                    "collections": .array([]),
                    "items": .array(items),
                ])
            ]),
        ])
        return document.jsonData()
    }

    // MARK: Reading

    /// Every credential of a CXF document, each a passkey or a reason it was
    /// skipped. Throws when the document is not CXF v1 at all.
    package static func read(_ data: Data) throws(CXFError) -> [CXFEntry] {
        guard let document = try? JSONDecoder().decode(JSONValue.self, from: data) else {
            throw CXFError("not JSON")
        }
        return try read(document)
    }

    static func read(_ document: JSONValue) throws(CXFError) -> [CXFEntry] {
        guard case .object(let header) = document else { throw CXFError("a CXF document is a JSON object") }
        guard case .object(let version)? = header["version"], case .number(let major)? = version["major"] else {
            throw CXFError("no CXF header: version.major is missing")
        }
        guard major == Double(majorVersion) else {
            throw CXFError("CXF version \(major) is not supported (only \(majorVersion).x)")
        }
        guard case .array(let accounts)? = header["accounts"] else { throw CXFError("no CXF header: no accounts") }
        var entries: [CXFEntry] = []
        for (a, account) in accounts.enumerated() {
            guard case .object(let account) = account, case .array(let items)? = account["items"] else {
                throw CXFError("accounts[\(a)] has no items")
            }
            for (i, item) in items.enumerated() {
                let at = "accounts[\(a)].items[\(i)]"
                guard case .object(let item) = item, case .array(let credentials)? = item["credentials"] else {
                    entries.append(CXFEntry(location: at, outcome: .skipped("malformed item: no credentials")))
                    continue
                }
                for (c, credential) in credentials.enumerated() {
                    entries.append(entry(credential, at: "\(at).credentials[\(c)]"))
                }
            }
        }
        return entries
    }

    /// One credential, checked on its own.
    private static func entry(_ value: JSONValue, at location: String) -> CXFEntry {
        guard case .object(let credential) = value, case .string(let type)? = credential["type"] else {
            return CXFEntry(location: location, outcome: .skipped("malformed credential: no type"))
        }
        var entry = CXFEntry(location: location, outcome: .skipped(""))
        if case .string(let text)? = credential["credentialId"] { entry.credentialId = Base64URL.decode(text, padding: false) }
        if case .string(let text)? = credential["rpId"] { entry.rpId = text }
        guard type == "passkey" else {
            entry.outcome = .skipped("a \(type) credential, not a passkey")
            return entry
        }
        do throws(CXFError) {
            entry.outcome = .passkey(try passkey(credential))
        } catch {
            entry.outcome = .skipped("malformed passkey: \(error.reason)")
        }
        return entry
    }

    private static func passkey(_ credential: [String: JSONValue]) throws(CXFError) -> CXFPasskey {
        func string(_ name: String) throws(CXFError) -> String {
            guard case .string(let value)? = credential[name] else { throw CXFError("\(name) is missing") }
            return value
        }
        func bytes(_ name: String, in object: [String: JSONValue]) throws(CXFError) -> [UInt8] {
            guard case .string(let text)? = object[name] else { throw CXFError("\(name) is missing") }
            guard let value = Base64URL.decode(text, padding: false) else { throw CXFError("\(name) is not base64url") }
            return value
        }
        let credentialId = try bytes("credentialId", in: credential)
        guard (1...Authenticator.maxCredentialIdLength).contains(credentialId.count) else {
            throw CXFError("credentialId must be 1 to \(Authenticator.maxCredentialIdLength) bytes")
        }
        let rpId = try string("rpId")
        guard !rpId.isEmpty else { throw CXFError("rpId is empty") }
        let userHandle = try bytes("userHandle", in: credential)
        guard (1...maxUserHandleBytes).contains(userHandle.count) else {
            throw CXFError("userHandle must be 1 to \(maxUserHandleBytes) bytes")
        }
        let username = try string("username")
        let userDisplayName = try string("userDisplayName")
        for (name, value) in [("username", username), ("userDisplayName", userDisplayName)]
        where value.utf8.count > maxUserFieldBytes {
            throw CXFError("\(name) is over \(maxUserFieldBytes) bytes of UTF-8")
        }
        let key = try bytes("key", in: credential)
        guard (try? CredentialPrivateKey(pkcs8: key)) != nil else {
            throw CXFError(
                "key is not a PKCS#8 private key of P-256, P-384, P-521, secp256k1, Ed25519, RSA (2048 to 4096 bits) or ML-DSA-65/87"
            )
        }
        var passkey = CXFPasskey(
            credentialId: credentialId,
            rpId: rpId,
            username: username,
            userDisplayName: userDisplayName,
            userHandle: userHandle,
            key: key
        )
        guard let extensionsValue = credential["fido2Extensions"] else { return passkey }
        guard case .object(let extensions) = extensionsValue else { throw CXFError("fido2Extensions is not an object") }
        if let hmacValue = extensions["hmacCredentials"] {
            guard case .object(let hmac) = hmacValue, case .string(let algorithm)? = hmac["algorithm"] else {
                throw CXFError("hmacCredentials is malformed")
            }
            guard algorithm == "hmac-sha256" else {
                throw CXFError("hmacCredentials algorithm \(algorithm) is not hmac-sha256")
            }
            let withUV = try bytes("credWithUV", in: hmac)
            let withoutUV = try bytes("credWithoutUV", in: hmac)
            guard withUV.count == 32, withoutUV.count == 32 else {
                throw CXFError("hmacCredentials must be 32 bytes each")
            }
            passkey.hmacCredentials = (withUV, withoutUV)
        }
        if extensions["credBlob"] != nil {
            let blob = try bytes("credBlob", in: extensions)
            guard blob.count <= 32 else { throw CXFError("credBlob is over 32 bytes (maxCredBlobLength)") }
            passkey.credBlob = blob
        }
        passkey.hasLargeBlob = extensions["largeBlob"] != nil
        return passkey
    }
}

extension JSONValue {
    /// The value as JSON text, keys sorted.
    package func jsonData() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a tree of plain values cannot fail.
        return try! encoder.encode(self)
    }
}
