// latchkey-bench: the cost of a signature through the whole engine against the
// cost of the signature alone, measured in one run so that the ratios hold on a
// shared, noisy machine.
//
//   raw-sign             ECDSA P-256 / SHA-256 straight through OpenSSL EVP (measured twice,
//                        first and after the in-process rows; the smaller median is the baseline)
//   getAssertion/memory  in-process getAssertion (allowList, ES256), memory store
//   getAssertion/sqlite  the same on the SQLite store (counter reservations included)
//   getAssertion/usbip   the same getAssertion as a round trip through a release latchkeyd's
//                        USB/IP server on loopback (64-byte reports in URBs over TCP), when
//                        the bench is given the daemon: --daemon PATH or $LATCHKEYD
//   makeCredential/rk    in-process makeCredential, discoverable, SQLite store (a durable commit each)
//
//   latchkey-bench [ITERATIONS] [--daemon PATH]

import CBOR
import CBenchOpenSSL
import CTAP
import CTAPHID
import Foundation
import LatchkeyCrypto
import LatchkeyStore

struct Measurement {
    var name: String
    var samples: [Double]  // microseconds

    var median: Double { samples.sorted()[samples.count / 2] }
    var p90: Double { samples.sorted()[samples.count * 9 / 10] }
    var throughput: Double { 1_000_000 / (samples.reduce(0, +) / Double(samples.count)) }
}

func measure(_ name: String, iterations: Int, warmup: Int = 20, _ body: () async throws -> Void) async rethrows
    -> Measurement
{
    for _ in 0..<warmup { try await body() }
    var samples: [Double] = []
    samples.reserveCapacity(iterations)
    let clock = ContinuousClock()
    for _ in 0..<iterations {
        let start = clock.now
        try await body()
        let elapsed = start.duration(to: clock.now)
        samples.append(Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12)
    }
    return Measurement(name: name, samples: samples)
}

/// An EVP P-256 key and a signing call with nothing of latchkey's in between.
final class RawSigner {
    let key: OpaquePointer

    init() {
        let context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil)
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer? = nil
        precondition(EVP_PKEY_keygen_init(context) == 1)
        precondition(EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime256v1) == 1)
        precondition(EVP_PKEY_keygen(context, &generated) == 1)
        key = generated!
    }

    deinit { EVP_PKEY_free(key) }

    func sign(_ message: [UInt8]) -> Int {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1)
        var length = 80
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(context, &signature, &length, message, message.count) == 1)
        return length
    }
}

func request(_ command: CTAPCommand, _ parameters: CBORValue) -> [UInt8] {
    [command.rawValue] + parameters.encoded()
}

let options: Options
do {
    options = try Options(
        arguments: Array(CommandLine.arguments.dropFirst()),
        environment: ProcessInfo.processInfo.environment
    )
} catch {
    printError("latchkey-bench: \(error)\n\(Options.usage)")
    exit(64)  // EX_USAGE
}
let iterations = options.iterations
let aaguid = Array(repeating: UInt8(0x4C), count: 16)
let clientDataHash = Array(repeating: UInt8(0xAB), count: 32)
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

func makeKey(store: any CredentialStore) throws -> Authenticator {
    try Authenticator(
        // No cap on discoverable credentials: makeCredential/rk makes iterations / 10 of them.
        configuration: AuthenticatorConfiguration(aaguid: aaguid, attestation: .none, maxDiscoverableCredentials: .max),
        store: store, presence: FixedPresence(.approved), clock: ManualClock()
    )
}

func credentialId(_ response: [UInt8]) throws -> [UInt8] {
    precondition(response.first == 0, "makeCredential failed: \(response.first ?? 0xFF)")
    let authData = try CBORDecoder().decode(Array(response.dropFirst())).mapValue().required(2, "authData").bytesValue()
    let length = Int(authData[53]) << 8 | Int(authData[54])
    return Array(authData[55..<55 + length])
}

/// getAssertion for bench.example with `credentialId` in the allowList.
func getAssertionRequest(credentialId id: [UInt8]) -> [UInt8] {
    request(
        .getAssertion,
        .intMap([
            (1, "bench.example"), (2, .bytes(clientDataHash)),
            (3, .array([.textMap([("id", .bytes(id)), ("type", "public-key")])])),
        ])
    )
}

let makeParameters = CBORValue.intMap([
    (1, .bytes(clientDataHash)), (2, .textMap([("id", "bench.example")])),
    (3, .textMap([("id", .bytes([1, 2, 3]))])), (4, .array([.textMap([("alg", -7), ("type", "public-key")])])),
])

var results: [Measurement] = []

let signer = RawSigner()
let message = Array(repeating: UInt8(0x5A), count: 69)
results.append(await measure("raw-sign", iterations: iterations) { _ = signer.sign(message) })

// Named, not iterated as a literal: Swift 6.3.1's optimizer (DeadStoreElimination)
// drops the store into a literal array of tuples holding a protocol value in
// async top-level code, and the loop then reads a null store.
let engineStores: [(String, any CredentialStore)] = [
    ("memory", MemoryCredentialStore()),
    ("sqlite", try SQLiteCredentialStore(path: directory.appendingPathComponent("assert.db").path, masterKey: Array(repeating: 7, count: 32))),
]
for (name, store) in engineStores {
    let key = try makeKey(store: store)
    let id = try credentialId(await key.handleCBOR(request(.makeCredential, makeParameters)))
    let getAssertion = getAssertionRequest(credentialId: id)
    results.append(
        try await measure("getAssertion/\(name)", iterations: iterations) {
            let response = await key.handleCBOR(getAssertion)
            precondition(response.first == 0, "getAssertion failed")
        }
    )
}

// The baseline again, after the in-process rows: on a shared machine the first
// row can run at another clock speed than the rest. The smaller median of the
// two is the baseline, and both are printed, so a drift shows.
results.append(await measure("raw-sign (again)", iterations: iterations) { _ = signer.sign(message) })

/// The USB/IP row and the reports that make one of its round trips.
struct USBIPRoundTrip {
    var measurement: Measurement
    var outputReports: Int
    var inputReports: Int
}

/// getAssertion round trips through the daemon's USB/IP server: a non-discoverable ES256
/// credential made over the same connection, then `iterations` sequential round trips.
/// The daemon runs only for this measurement, so it takes no CPU from the others.
func measureUSBIP(daemon binary: String, iterations: Int) async throws -> USBIPRoundTrip {
    let daemon = try DaemonProcess.start(
        binary: binary,
        stateDirectory: directory.appendingPathComponent("latchkeyd").path
    )
    let roundTrip: USBIPRoundTrip
    do {
        let host = try USBIPHIDHost(port: daemon.port, busid: DaemonProcess.busid)
        try host.setConfiguration()
        try host.allocateChannel()
        let made = try host.cbor(request(.makeCredential, makeParameters))
        guard made.first == 0 else { throw BenchFailure("makeCredential over USB/IP: status \(made.first ?? 0xFF)") }
        let getAssertion = getAssertionRequest(credentialId: try credentialId(made))
        func assertOnce() throws -> [UInt8] {
            let response = try host.cbor(getAssertion)
            guard response.first == 0 else {
                throw BenchFailure("getAssertion over USB/IP: status \(response.first ?? 0xFF)")
            }
            return response
        }
        let responseSize = try assertOnce().count
        roundTrip = USBIPRoundTrip(
            measurement: try await measure("getAssertion/usbip", iterations: iterations) { _ = try assertOnce() },
            outputReports: CTAPHIDPacketizer.reportCount(payloadSize: getAssertion.count),
            inputReports: CTAPHIDPacketizer.reportCount(payloadSize: responseSize)
        )
    } catch {
        daemon.kill()
        throw error
    }
    try daemon.stop()
    return roundTrip
}

var usbipRoundTrip: USBIPRoundTrip?
var usbipFailure: (any Error)?
if let daemon = options.daemon {
    do {
        let roundTrip = try await measureUSBIP(daemon: daemon, iterations: iterations)
        results.append(roundTrip.measurement)
        usbipRoundTrip = roundTrip
    } catch {
        usbipFailure = error
    }
}

let rkStore = try SQLiteCredentialStore(
    path: directory.appendingPathComponent("rk.db").path, masterKey: Array(repeating: 7, count: 32)
)
let rkKey = try makeKey(store: rkStore)
var user: UInt32 = 0
results.append(
    try await measure("makeCredential/rk/sqlite", iterations: max(50, iterations / 10), warmup: 5) {
        user += 1
        let parameters = CBORValue.intMap([
            (1, .bytes(clientDataHash)), (2, .textMap([("id", "bench.example")])),
            (3, .textMap([("id", .bytes(withUnsafeBytes(of: user.bigEndian, Array.init)))])),
            (4, .array([.textMap([("alg", -7), ("type", "public-key")])])), (7, .textMap([("rk", true)])),
        ])
        let response = await rkKey.handleCBOR(request(.makeCredential, parameters))
        precondition(response.first == 0, "makeCredential failed")
    }
)

let baseline = results.filter { $0.name.hasPrefix("raw-sign") }.map(\.median).min()!
print("latchkey-bench: \(iterations) iterations (makeCredential: \(max(50, iterations / 10))), one run")
if let daemon = options.daemon { print("USB/IP through \(daemon) on 127.0.0.1") }
print("name                        median µs    p90 µs     ops/s   × raw-sign")
for result in results {
    print(
        result.name.padding(toLength: 26, withPad: " ", startingAt: 0),
        String(format: "%10.1f %9.1f %9.0f %10.2f", result.median, result.p90, result.throughput, result.median / baseline)
    )
}

/// The median of the row named `name`.
@MainActor
func median(_ name: String) -> Double? { results.first { $0.name == name }?.median }

if let usbipRoundTrip, let memory = median("getAssertion/memory"), let sqlite = median("getAssertion/sqlite") {
    let usbip = usbipRoundTrip.measurement.median
    print(
        String(
            format: "USB/IP overhead: %.2f× the in-process getAssertion (memory store), +%.1f µs per round trip",
            usbip / memory,
            usbip - memory
        )
    )
    print(
        String(
            format: "                 %.2f× getAssertion/sqlite, the daemon's store, +%.1f µs per round trip",
            usbip / sqlite,
            usbip - sqlite
        )
    )
    print(
        "(a round trip: \(usbipRoundTrip.outputReports) interrupt-OUT URBs, each sent once the previous one is acknowledged,"
            + " and \(usbipRoundTrip.inputReports) interrupt-IN URBs, one held at a time, as usbhid does over vhci-hcd;"
            + " sequential, one connection)"
    )
} else if let usbipFailure {
    printError("latchkey-bench: getAssertion over USB/IP failed: \(usbipFailure)")
    try? FileManager.default.removeItem(at: directory)
    exit(1)
} else {
    print("getAssertion/usbip: skipped, no latchkeyd given (--daemon PATH or LATCHKEYD=PATH, as scripts/bench.sh does)")
}
