// One client of a key: a CTAPHID channel, the credentials it made and their public keys, and
// the operations of the workload, each checked and its signature verified.

import CBOR
import CTAPHID
import Crypto
import Foundation
import LatchkeyBenchSupport

/// The operations the workload mixes.
enum Operation: String, CaseIterable {
    case makeCredential = "makeCredential"
    case makeCredentialDiscoverable = "makeCredential rk"
    case getAssertion = "getAssertion allowList"
    case getAssertionDiscoverable = "getAssertion discoverable"
    case getNextAssertion = "getNextAssertion"
}

/// A client on one channel, making and using credentials for its own RP; used by one thread
/// at a time (the load hands each client to a thread of its own).
final class Client: @unchecked Sendable {
    let channel: USBIPHIDChannel
    let rpId: String
    private var publicKeys: [[UInt8]: P256.Signing.PublicKey] = [:]
    /// Non-discoverable credentials, newest last.
    private(set) var credentials: [[UInt8]] = []
    private var clientDataHash = [UInt8](repeating: 0, count: 32)
    private var serial: UInt32 = 0

    init(channel: USBIPHIDChannel, rpId: String) {
        self.channel = channel
        self.rpId = rpId
    }

    /// The reports the last request and its response took.
    private(set) var lastReports = (output: 0, input: 0)

    /// Sends `request`; the response's CBOR map, after a success status.
    private func send(_ request: [UInt8], _ what: String) throws -> CBORMap {
        let response = try channel.cbor(request)
        lastReports = (
            CTAPHIDPacketizer.reportCount(payloadSize: request.count),
            CTAPHIDPacketizer.reportCount(payloadSize: response.count)
        )
        guard response.first == 0 else { throw BenchFailure("\(what): status 0x\(String(response.first ?? 0xFF, radix: 16))") }
        return try CBORDecoder().decode(Array(response.dropFirst())).mapValue()
    }

    /// A fresh client data hash per request, so no two signatures sign the same bytes.
    private func nextClientDataHash() -> [UInt8] {
        serial += 1
        clientDataHash.replaceSubrange(0..<4, with: withUnsafeBytes(of: serial.bigEndian, Array.init))
        return clientDataHash
    }

    /// makeCredential (ES256, self attestation) for `user`; discoverable when `residentKey`.
    /// The request is timed; checking it is not.
    func makeCredential(user: [UInt8], residentKey: Bool, timer: inout Timer) throws {
        let hash = nextClientDataHash()
        let request = BenchRequests.makeCredential(
            user: user, residentKey: residentKey, rpId: rpId, clientDataHash: hash
        )
        timer.start()
        let response = try send(request, "makeCredential")
        timer.stop()
        let authData = try response.required(2, "authData").bytesValue()
        let statement = try response.required(3, "attStmt").mapValue()
        let (id, key) = try Self.attestedCredential(authData)
        try verify(key, try statement.required("sig").bytesValue(), authData + hash, "self attestation")
        publicKeys[id] = key
        if !residentKey { credentials.append(id) }
    }

    /// getAssertion with `allowList` (empty: discoverable). Returns the number of
    /// credentials the key found. Timed like makeCredential.
    @discardableResult
    func getAssertion(allowList: [[UInt8]], timer: inout Timer) throws -> Int {
        let hash = nextClientDataHash()
        let request = BenchRequests.getAssertion(rpId: rpId, clientDataHash: hash, allowList: allowList)
        timer.start()
        let response = try send(request, "getAssertion")
        timer.stop()
        try verifyAssertion(response, hash)
        return try response[int: 5]?.intValue() ?? 1
    }

    /// getNextAssertion after a discoverable getAssertion that found more than one.
    func getNextAssertion(clientDataHash hash: [UInt8], timer: inout Timer) throws {
        timer.start()
        let response = try send([0x08], "getNextAssertion")
        timer.stop()
        try verifyAssertion(response, hash)
    }

    /// The client data hash of the last request.
    var lastClientDataHash: [UInt8] { clientDataHash }

    private func verifyAssertion(_ response: CBORMap, _ hash: [UInt8]) throws {
        let id = try response.required(1, "credential").mapValue().required("id").bytesValue()
        guard let key = publicKeys[id] else { throw BenchFailure("an assertion by a credential this client never made") }
        let authData = try response.required(2, "authData").bytesValue()
        try verify(key, try response.required(3, "signature").bytesValue(), authData + hash, "assertion")
    }

    private func verify(_ key: P256.Signing.PublicKey, _ signature: [UInt8], _ signed: [UInt8], _ what: String) throws {
        let parsed = try P256.Signing.ECDSASignature(derRepresentation: signature)
        guard key.isValidSignature(parsed, for: signed) else { throw BenchFailure("\(what): the signature does not verify") }
    }

    /// The credential ID and ES256 public key in attested credential data (WebAuthn §6.5.1).
    static func attestedCredential(_ authData: [UInt8]) throws -> ([UInt8], P256.Signing.PublicKey) {
        guard authData.count > 55 else { throw BenchFailure("authData without attested credential data") }
        let length = Int(authData[53]) << 8 | Int(authData[54])
        let id = Array(authData[55..<55 + length])
        let cose = try CBORDecoder().decodePrefix(Array(authData[(55 + length)...])).value.mapValue()
        let x = try cose.required(-2, "x").bytesValue()
        let y = try cose.required(-3, "y").bytesValue()
        return (id, try P256.Signing.PublicKey(x963Representation: [0x04] + x + y))
    }
}

/// Times one request: from before its first report goes out to after its response is whole.
struct Timer {
    private var started: UInt64 = 0
    /// The last request's round trip, in nanoseconds.
    private(set) var nanoseconds: UInt64 = 0

    mutating func start() { started = DispatchTime.now().uptimeNanoseconds }
    mutating func stop() { nanoseconds = DispatchTime.now().uptimeNanoseconds - started }
}
