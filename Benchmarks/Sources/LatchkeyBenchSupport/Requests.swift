// The CTAP requests the benchmarks send, the same in process and over USB/IP: an ES256
// credential for bench.example, and a getAssertion that names it in its allowList.

import CBOR
import CTAP
import Foundation
import LatchkeyStore

/// What every benchmark's key and requests share.
public enum BenchRequests {
    public static let aaguid = Array(repeating: UInt8(0x4C), count: 16)
    public static let clientDataHash = Array(repeating: UInt8(0xAB), count: 32)

    /// A key on `store` that approves every request, with no cap on discoverable
    /// credentials (makeCredential-rk-sqlite makes one per iteration).
    public static func makeKey(store: any CredentialStore) throws -> Authenticator {
        try Authenticator(
            configuration: AuthenticatorConfiguration(aaguid: aaguid, attestation: .none, maxDiscoverableCredentials: .max),
            store: store, presence: FixedPresence(.approved), clock: ManualClock()
        )
    }

    /// The command byte and its CBOR parameters, as CTAPHID_CBOR carries them.
    public static func request(_ command: CTAPCommand, _ parameters: CBORValue) -> [UInt8] {
        [command.rawValue] + parameters.encoded()
    }

    /// makeCredential for `rpId` (bench.example unless told), of COSE algorithm `algorithm`
    /// (ES256 unless told), for user `user`; discoverable when `residentKey`.
    public static func makeCredential(
        user: [UInt8] = [1, 2, 3],
        residentKey: Bool = false,
        algorithm: Int = -7,
        rpId: String = "bench.example",
        clientDataHash: [UInt8] = clientDataHash
    ) -> [UInt8] {
        var parameters: [(Int, CBORValue)] = [
            (1, .bytes(clientDataHash)), (2, .textMap([("id", .text(rpId))])),
            (3, .textMap([("id", .bytes(user))])),
            (4, .array([.textMap([("alg", .int(algorithm)), ("type", "public-key")])])),
        ]
        if residentKey { parameters.append((7, .textMap([("rk", true)]))) }
        return request(.makeCredential, .intMap(parameters))
    }

    /// getAssertion for bench.example with `credentialId` in the allowList.
    public static func getAssertion(credentialId id: [UInt8]) -> [UInt8] {
        getAssertion(rpId: "bench.example", clientDataHash: clientDataHash, allowList: [id])
    }

    /// getAssertion for `rpId` naming `allowList` (none: the RP's discoverable credentials).
    public static func getAssertion(rpId: String, clientDataHash: [UInt8], allowList: [[UInt8]]) -> [UInt8] {
        var parameters: [(Int, CBORValue)] = [(1, .text(rpId)), (2, .bytes(clientDataHash))]
        if !allowList.isEmpty {
            parameters.append((3, .array(allowList.map { .textMap([("id", .bytes($0)), ("type", "public-key")]) })))
        }
        return request(.getAssertion, .intMap(parameters))
    }

    /// The credential ID in a successful makeCredential response (from its authData,
    /// WebAuthn §6.1: rpIdHash 32, flags 1, signCount 4, aaguid 16, length 2, ID).
    public static func credentialId(_ response: [UInt8]) throws -> [UInt8] {
        guard response.first == 0 else { throw BenchFailure("makeCredential failed: status \(response.first ?? 0xFF)") }
        let authData = try CBORDecoder().decode(Array(response.dropFirst())).mapValue().required(2, "authData")
            .bytesValue()
        let length = Int(authData[53]) << 8 | Int(authData[54])
        return Array(authData[55..<55 + length])
    }
}

/// A folder of its own under the temporary directory, for one benchmark's databases and
/// daemon state, removed with the object.
public final class ScratchDirectory {
    public let url: URL

    public init(_ name: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-bench-\(name)-\(getpid())")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// The path of `name` in the folder.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// An SQLite credential store at `name` in the folder.
    public func sqliteStore(_ name: String) throws -> SQLiteCredentialStore {
        try SQLiteCredentialStore(path: path(name), masterKey: Array(repeating: 7, count: 32))
    }
}
