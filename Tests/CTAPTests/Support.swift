// Test support: a key with an in-memory store, a manual clock and
// deterministic entropy; request builders; and signature checks that go
// straight to OpenSSL, independent of LatchkeyCrypto.

import CBOR
import COpenSSL
import Foundation
import Synchronization
import Testing

@testable import CTAP

/// Parses a hex string.
func hex(_ string: String) -> [UInt8] {
    let digits = Array(string.utf8).filter { $0 != UInt8(ascii: " ") }
    func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return c - UInt8(ascii: "A") + 10
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) }
}

/// Presence answers taken from a queue (default: approve), recording every request.
final class ScriptedPresence: UserPresence {
    private let state = Mutex<(answers: [PresenceOutcome], seen: [PresenceRequest])>(([], []))

    init(_ answers: [PresenceOutcome] = []) {
        state.withLock { $0.answers = answers }
    }

    func enqueue(_ outcome: PresenceOutcome) { state.withLock { $0.answers.append(outcome) } }

    var requests: [PresenceRequest] { state.withLock { $0.seen } }

    func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome {
        state.withLock { state in
            state.seen.append(request)
            return state.answers.isEmpty ? .approved : state.answers.removeFirst()
        }
    }
}

/// Collects the engine's events.
final class EventRecorder: Sendable {
    private let seen = Mutex<[AuthenticatorEvent]>([])

    func record(_ event: AuthenticatorEvent) { seen.withLock { $0.append(event) } }

    var all: [AuthenticatorEvent] { seen.withLock { $0 } }
    var kinds: [AuthenticatorEvent.Kind] { all.map(\.kind) }
}

let testAAGUID = hex("6c617463686b6579 0074657374 6b6579")

/// The batch identity is slow-ish to make; share one.
let sharedIdentity: AttestationIdentity = try! AttestationIdentity.generate(
    aaguid: testAAGUID, entropy: DeterministicEntropy(seed: Array("identity".utf8)), now: 1_790_000_000
)

/// Everything a test needs around one authenticator.
struct TestKey {
    let authenticator: Authenticator
    let store: any CredentialStore
    let clock: ManualClock
    let presence: ScriptedPresence
    /// Every event the engine emitted, in order.
    let events: EventRecorder

    init(
        attestation: AttestationMode = .batch,
        capacity: Int? = nil,
        maxDiscoverable: Int = 1000,
        algorithms: [COSEAlgorithm] = [.es256, .edDSA],
        u2f: Bool = true,
        seed: String = "test",
        store: (any CredentialStore)? = nil,
        clock: ManualClock = ManualClock(start: 1_000),
        maxSerializedLargeBlobArray: Int = 4096,
        configure: (inout AuthenticatorConfiguration) -> Void = { _ in }
    ) {
        self.store = store ?? MemoryCredentialStore(capacity: capacity)
        self.clock = clock
        presence = ScriptedPresence()
        var configuration = AuthenticatorConfiguration(
            aaguid: testAAGUID, attestation: attestation, attestationIdentity: sharedIdentity,
            algorithms: algorithms, maxDiscoverableCredentials: maxDiscoverable, u2fEnabled: u2f,
            maxSerializedLargeBlobArray: maxSerializedLargeBlobArray
        )
        configure(&configuration)
        let events = EventRecorder()
        self.events = events
        authenticator = try! Authenticator(
            configuration: configuration, store: self.store, presence: presence, clock: clock,
            entropy: DeterministicEntropy(seed: Array(seed.utf8)), events: { events.record($0) }
        )
    }

    /// A second authenticator over `other`'s store and clock: the key after a
    /// daemon restart.
    init(sharing other: TestKey, seed: String) {
        self.init(seed: seed, store: other.store, clock: other.clock)
    }

    /// Sends a CTAP2 command from `origin` and checks that any response body is canonical CBOR.
    func send(
        _ command: CTAPCommand,
        _ parameters: CBORValue? = nil,
        from origin: RequestOrigin = .solitary
    ) async throws -> (CTAPStatus, CBORValue?) {
        var request = [command.rawValue]
        parameters?.encode(into: &request)
        return try await sendRaw(request, from: origin)
    }

    func sendRaw(_ request: [UInt8], from origin: RequestOrigin = .solitary) async throws -> (CTAPStatus, CBORValue?) {
        let response = await authenticator.handleCBOR(request, from: origin)
        let status = CTAPStatus(rawValue: try #require(response.first))
        guard response.count > 1 else { return (status, nil) }
        #expect(status == .ok, "only success carries a body")
        let body = Array(response.dropFirst())
        let value = try CBORDecoder().decode(body)
        #expect(value.encoded() == body, "every response is canonical CBOR")
        return (status, value)
    }

    /// makeCredential that must succeed.
    func makeCredential(_ request: MakeCredentialBuilder) async throws -> MadeCredential {
        let (status, body) = try await send(.makeCredential, request.cbor)
        #expect(status == .ok)
        return try MadeCredential(response: try #require(body), clientDataHash: request.clientDataHash)
    }

    /// `count` discoverable credentials for `rpId`, user IDs [0], [1], …, newest last.
    @discardableResult
    func makeAccounts(_ count: Int, rpId: String = "example.com") async throws -> [MadeCredential] {
        var made: [MadeCredential] = []
        for index in 0..<count {
            var create = MakeCredentialBuilder()
            create.rpId = rpId
            create.rk = true
            create.userId = [UInt8(index)]
            made.append(try await makeCredential(create))
        }
        return made
    }

    /// getAssertion that must succeed.
    func getAssertion(_ request: GetAssertionBuilder) async throws -> CBORMap {
        let (status, body) = try await send(.getAssertion, request.cbor)
        #expect(status == .ok)
        return try #require(body).mapValue()
    }
}

extension CBORValue {
    /// An int-keyed map of the members that are present, in the order given.
    static func intMap(present members: [(Int, CBORValue?)]) -> CBORValue {
        .intMap(members.compactMap { key, value in value.map { (key, $0) } })
    }
}

/// A request builder that carries a pinUvAuthParam over its clientDataHash.
protocol PinUvAuthenticatedRequest {
    /// The command the request goes with.
    static var command: CTAPCommand { get }
    var clientDataHash: [UInt8] { get }
    var pinUvAuthParam: [UInt8]? { get set }
    var pinUvAuthProtocol: Int? { get set }
    var cbor: CBORValue { get }
}

struct MakeCredentialBuilder: PinUvAuthenticatedRequest {
    static let command = CTAPCommand.makeCredential

    var clientDataHash = Array(repeating: UInt8(0xC1), count: 32)
    var rpId = "example.com"
    var rpName: String? = "Example"
    var userId: [UInt8] = [1, 2, 3, 4]
    var userName: String? = "alice"
    var displayName: String? = "Alice"
    var algorithms: [Int] = [-7]
    var excludeList: [[UInt8]] = []
    var rk: Bool? = nil
    var up: Bool? = nil
    var uv: Bool? = nil
    var pinUvAuthParam: [UInt8]? = nil
    var pinUvAuthProtocol: Int? = nil
    var enterpriseAttestation: Int? = nil
    var attestationFormatsPreference: [String]? = nil
    var extensions: [(String, CBORValue)] = []

    var cbor: CBORValue {
        var rp: [(String, CBORValue)] = [("id", .text(rpId))]
        if let rpName { rp.append(("name", .text(rpName))) }
        var user: [(String, CBORValue)] = [("id", .bytes(userId))]
        if let userName { user.append(("name", .text(userName))) }
        if let displayName { user.append(("displayName", .text(displayName))) }
        var entries: [(Int, CBORValue)] = [
            (1, .bytes(clientDataHash)), (2, .textMap(rp)), (3, .textMap(user)),
            (4, .array(algorithms.map { .textMap([("alg", .int($0)), ("type", "public-key")]) })),
        ]
        entries += commonEntries(
            from: 5, credentials: excludeList, extensions: extensions, options: [("rk", rk), ("up", up), ("uv", uv)],
            pinUvAuthParam: pinUvAuthParam, pinUvAuthProtocol: pinUvAuthProtocol
        )
        if let enterpriseAttestation { entries.append((10, .int(enterpriseAttestation))) }
        if let attestationFormatsPreference {
            entries.append((11, .array(attestationFormatsPreference.map { .text($0) })))
        }
        return .intMap(entries)
    }
}

struct GetAssertionBuilder: PinUvAuthenticatedRequest {
    static let command = CTAPCommand.getAssertion

    var rpId = "example.com"
    var clientDataHash = Array(repeating: UInt8(0xA5), count: 32)
    var allowList: [[UInt8]] = []
    var rk: Bool? = nil
    var up: Bool? = nil
    var uv: Bool? = nil
    var pinUvAuthParam: [UInt8]? = nil
    var pinUvAuthProtocol: Int? = nil
    var extensions: [(String, CBORValue)] = []

    var cbor: CBORValue {
        let entries: [(Int, CBORValue)] = [(1, .text(rpId)), (2, .bytes(clientDataHash))]
        return .intMap(
            entries + commonEntries(
                from: 3, credentials: allowList, extensions: extensions, options: [("rk", rk), ("up", up), ("uv", uv)],
                pinUvAuthParam: pinUvAuthParam, pinUvAuthProtocol: pinUvAuthProtocol
            )
        )
    }
}

/// The keys makeCredential and getAssertion share, in this order from key `first`: the
/// credential list (excludeList, allowList), extensions, options, pinUvAuthParam and
/// pinUvAuthProtocol. Empty lists and nil values are left out.
private func commonEntries(
    from first: Int,
    credentials: [[UInt8]],
    extensions: [(String, CBORValue)],
    options: [(String, Bool?)],
    pinUvAuthParam: [UInt8]?,
    pinUvAuthProtocol: Int?
) -> [(Int, CBORValue)] {
    var entries: [(Int, CBORValue)] = []
    if !credentials.isEmpty {
        entries.append((first, .array(credentials.map { .textMap([("id", .bytes($0)), ("type", "public-key")]) })))
    }
    if !extensions.isEmpty { entries.append((first + 1, .textMap(extensions))) }
    let set = options.compactMap { name, value in value.map { (name, CBORValue.boolean($0)) } }
    if !set.isEmpty { entries.append((first + 2, .textMap(set))) }
    if let pinUvAuthParam { entries.append((first + 3, .bytes(pinUvAuthParam))) }
    if let pinUvAuthProtocol { entries.append((first + 4, .int(pinUvAuthProtocol))) }
    return entries
}

/// A parsed makeCredential response.
struct MadeCredential {
    var fmt: String
    var authData: [UInt8]
    var attStmt: CBORMap
    var clientDataHash: [UInt8]
    var flags: UInt8
    var signCount: UInt32
    var aaguid: [UInt8]
    var credentialId: [UInt8]
    var publicKey: CBORMap
    /// The public key as SubjectPublicKeyInfo DER, for OpenSSL; empty for
    /// ML-DSA, which OpenSSL 3.0 lacks (`verify(cose:signature:message:)` checks those).
    var publicKeySPKI: [UInt8] { (try? spki(cose: publicKey)) ?? [] }
    /// The extension outputs in authData (ED set).
    var extensions: CBORMap?
    /// largeBlobKey (0x05).
    var largeBlobKey: [UInt8]?

    init(response: CBORValue, clientDataHash: [UInt8]) throws {
        let map = try response.mapValue()
        fmt = try map.required(1, "fmt").textValue()
        authData = try map.required(2, "authData").bytesValue()
        attStmt = try map.required(3, "attStmt").mapValue()
        self.clientDataHash = clientDataHash
        flags = authData[32]
        signCount = authData[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        aaguid = Array(authData[37..<53])
        let length = Int(authData[53]) << 8 | Int(authData[54])
        credentialId = Array(authData[55..<55 + length])
        let (key, used) = try CBORDecoder().decodePrefix(Array(authData[(55 + length)...]))
        if flags & 0x80 != 0 {
            let rest = Array(authData[(55 + length + used)...])
            let outputs = try CBORDecoder().decode(rest)
            #expect(outputs.encoded() == rest, "extension outputs are canonical CBOR and end authData")
            extensions = try outputs.mapValue()
        } else {
            #expect(55 + length + used == authData.count, "nothing after the public key without extensions")
        }
        largeBlobKey = try map[int: 5]?.bytesValue()
        publicKey = try key.mapValue()
    }
}

/// SubjectPublicKeyInfo DER for a COSE key, assembled by hand (RFC 5480, RFC 8410, RFC 8017).
func spki(cose: CBORMap) throws -> [UInt8] {
    /// A DER TLV.
    func der(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let count = content.count
        let length: [UInt8] =
            count < 0x80 ? [UInt8(count)] : count < 0x100 ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        return [tag] + length + content
    }
    /// An unsigned INTEGER from big-endian bytes.
    func integer(_ bytes: [UInt8]) -> [UInt8] { der(0x02, bytes.first.map { $0 & 0x80 != 0 } == true ? [0] + bytes : bytes) }
    func point() throws -> [UInt8] {
        [0x04] + (try cose.required(-2, "x").bytesValue()) + (try cose.required(-3, "y").bytesValue())
    }
    let ecPublicKey = hex("06072a8648ce3d0201")
    switch try cose.required(3, "alg").intValue() {
    case -7, -9:
        return hex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + (try point())
    case -35, -51, -36, -52, -47:
        let curve: [UInt8]
        switch try cose.required(-1, "crv").intValue() {
        case 2: curve = hex("06052b81040022")
        case 3: curve = hex("06052b81040023")
        case 8: curve = hex("06052b8104000a")
        default: throw CBORError(.unexpectedType, "unknown crv")
        }
        return der(0x30, der(0x30, ecPublicKey + curve) + der(0x03, [0] + (try point())))
    case -8, -19:
        return hex("302a300506032b6570032100") + (try cose.required(-2, "x").bytesValue())
    case -257, -37:
        let n = try cose.required(-1, "n").bytesValue()
        let e = try cose.required(-2, "e").bytesValue()
        let rsaEncryption = der(0x30, hex("06092a864886f70d010101") + [0x05, 0x00])
        return der(0x30, rsaEncryption + der(0x03, [0] + der(0x30, integer(n) + integer(e))))
    default:
        throw CBORError(.unexpectedType, "unknown alg")
    }
}

/// Verifies with OpenSSL directly: ECDSA (DER) with the curve's hash,
/// Ed25519, or RSA with SHA-256 (PKCS#1 v1.5, or PSS with a 32-byte salt
/// when `pss`), by key type.
func opensslVerify(spki: [UInt8], signature: [UInt8], message: [UInt8], pss: Bool = false) -> Bool {
    var pointer: UnsafePointer<UInt8>? = nil
    return spki.withUnsafeBufferPointer { buffer -> Bool in
        pointer = buffer.baseAddress
        guard let key = d2i_PUBKEY(nil, &pointer, buffer.count) else { return false }
        defer { EVP_PKEY_free(key) }
        return verify(key: key, signature: signature, message: message, pss: pss)
    }
}

/// Verifies with the public key of a DER certificate.
func opensslVerify(certificate: [UInt8], signature: [UInt8], message: [UInt8]) -> Bool {
    certificate.withUnsafeBufferPointer { buffer -> Bool in
        var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
        guard let cert = d2i_X509(nil, &pointer, buffer.count) else { return false }
        defer { X509_free(cert) }
        guard let key = X509_get_pubkey(cert) else { return false }
        defer { EVP_PKEY_free(key) }
        return verify(key: key, signature: signature, message: message)
    }
}

private func verify(key: OpaquePointer, signature: [UInt8], message: [UInt8], pss: Bool = false) -> Bool {
    guard let context = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(context) }
    let digest: OpaquePointer?
    switch (EVP_PKEY_get_base_id(key), EVP_PKEY_get_bits(key)) {
    case (NID_ED25519, _): digest = nil
    case (NID_X9_62_id_ecPublicKey, 384): digest = EVP_sha384()
    case (NID_X9_62_id_ecPublicKey, 521): digest = EVP_sha512()
    default: digest = EVP_sha256()
    }
    var keyContext: OpaquePointer?
    guard EVP_DigestVerifyInit(context, &keyContext, digest, nil, key) == 1 else { return false }
    if pss {
        guard EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
            EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, 32) == 1
        else { return false }
    }
    return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
}

/// The subject OU and whether a certificate verifies under an issuer certificate.
func opensslCertificateChecks(leaf: [UInt8], issuer: [UInt8]) -> (organizationalUnit: String?, verifies: Bool) {
    func parse(_ der: [UInt8]) -> OpaquePointer? {
        der.withUnsafeBufferPointer { buffer in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &pointer, buffer.count)
        }
    }
    guard let leafCert = parse(leaf), let issuerCert = parse(issuer) else { return (nil, false) }
    defer {
        X509_free(leafCert)
        X509_free(issuerCert)
    }
    var buffer = [CChar](repeating: 0, count: 256)
    let length = X509_NAME_get_text_by_NID(X509_get_subject_name(leafCert), NID_organizationalUnitName, &buffer, 256)
    let ou = length > 0 ? String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    guard let issuerKey = X509_get_pubkey(issuerCert) else { return (ou, false) }
    defer { EVP_PKEY_free(issuerKey) }
    return (ou, X509_verify(leafCert, issuerKey) == 1)
}
