// latchkey's benchmarks on package-benchmark: the cost of a signature through the whole
// engine, and through the daemon's USB/IP transport, against the cost of the signature alone.
// package-benchmark runs each benchmark in a process of its own; scripts/bench.sh runs them
// all once and prints each figure as a multiple of raw-sign from that one run, because on a
// shared machine only ratios within a run mean anything.
//
//   raw-sign                   ECDSA P-256 / SHA-256 straight through OpenSSL EVP, over the
//                              69 bytes an assertion signs (authData and clientDataHash)
//   getAssertion-memory        in-process getAssertion (allowList, ES256), memory store
//   getAssertion-sqlite        the same on the SQLite store (counter reservations included)
//   makeCredential-rk-sqlite   in-process discoverable makeCredential, SQLite store (a
//                              durable commit each), 200 calls
//   getAssertion-usbip         the same getAssertion as a round trip through a release
//                              latchkeyd's USB/IP server on loopback (64-byte reports in
//                              URBs over TCP)
//   ping-usbip                 a CTAPHID_PING of as many reports as that round trip, through
//                              the same daemon: the transport's share of it
//   alg-A-raw-sign             for each key type A (ES256, EdDSA, ES384, ES512, ES256K, RS256,
//   alg-A-getAssertion         PS256, ML-DSA-65, ML-DSA-87): its signature straight through
//   alg-A-makeCredential       OpenSSL (swift-crypto for ML-DSA), then in-process getAssertion
//                              (allowList, memory store) and non-discoverable makeCredential
//                              (none attestation: key generation and wrapping) with that
//                              algorithm. ESP256, ESP384, ESP512 and Ed25519 are the same keys
//                              and signatures as ES256, ES384, ES512 and EdDSA.
//
// The USB/IP pair runs when $LATCHKEYD names a latchkeyd binary, as scripts/bench.sh does.
// $LATCHKEY_BENCH_ITERATIONS sets the iterations (default 2000). Every benchmark counts
// mallocs besides wall-clock time: allocations repeat exactly from run to run, so they can
// be gated where times cannot (Thresholds/ holds the recorded counts).

import Benchmark
import CTAP
import CTAPHID
import Foundation
import LatchkeyBenchSupport

/// One benchmark's state: made by its setup, dropped by its teardown, which removes its
/// files (and stops its daemon) before the process exits.
final class Fixture<State> {
    var state: State?

    /// The state the setup made; the benchmark runs only after a setup that succeeded.
    var current: State { state! }
}

/// A key and the getAssertion request for the credential made on it at setup.
struct EngineState {
    var directory: ScratchDirectory
    var key: Authenticator
    var getAssertion: [UInt8]
}

let benchmarks: @Sendable () -> Void = {
    let environment = ProcessInfo.processInfo.environment
    let iterations = environment["LATCHKEY_BENCH_ITERATIONS"].flatMap { Int($0) }.map { max(1, $0) } ?? 2000
    Benchmark.defaultConfiguration = .init(
        // throughput is what package-benchmark's JMH export (which scripts/bench.sh reads) keys on.
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .microseconds,
        warmupIterations: 20,
        // The iteration count decides; the duration is only a bound on a machine gone slow.
        maxDuration: .seconds(300),
        maxIterations: iterations,
        // What `benchmark thresholds check` (CI, scripts/bench-gate.sh) forgives: a p90 malloc
        // count up to 10% over the count recorded in Thresholds/. Times are never checked.
        thresholds: [.mallocCountTotal: .init(relative: [.p90: 10.0])]
    )

    let signer = Fixture<RawSigner>()
    let message = Array(repeating: UInt8(0x5A), count: 69)
    Benchmark("raw-sign") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(signer.current.sign(message)) }
    } setup: {
        signer.state = RawSigner()
    } teardown: {
        signer.state = nil
    }

    /// The benchmark `name`: getAssertion (allowList) of a credential of `algorithm`
    /// made at setup on the store `store` makes.
    func getAssertion(
        _ name: String, algorithm: Int = -7, store: @escaping (ScratchDirectory) throws -> any CredentialStore
    ) {
        let engine = Fixture<EngineState>()
        Benchmark(name) { benchmark in
            let state = engine.current
            for _ in benchmark.scaledIterations {
                let response = await state.key.handleCBOR(state.getAssertion)
                precondition(response.first == 0, "getAssertion failed: status \(response.first ?? 0xFF)")
            }
        } setup: {
            let directory = try ScratchDirectory(name)
            let key = try BenchRequests.makeKey(store: try store(directory))
            let id = try BenchRequests.credentialId(
                await key.handleCBOR(BenchRequests.makeCredential(algorithm: algorithm))
            )
            engine.state = EngineState(
                directory: directory,
                key: key,
                getAssertion: BenchRequests.getAssertion(credentialId: id)
            )
        } teardown: {
            engine.state = nil
        }
    }
    getAssertion("getAssertion-memory") { _ in MemoryCredentialStore() }
    getAssertion("getAssertion-sqlite") { try $0.sqliteStore("assert.db") }

    let rk = Fixture<(directory: ScratchDirectory, key: Authenticator)>()
    var user: UInt32 = 0
    // Its mallocs grow with the credentials already stored for its RP, so it always runs the
    // same 200 calls, whatever LATCHKEY_BENCH_ITERATIONS says: its count can then be gated.
    Benchmark(
        "makeCredential-rk-sqlite",
        configuration: .init(warmupIterations: 5, maxIterations: 200)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            user += 1
            let request = BenchRequests.makeCredential(
                user: withUnsafeBytes(of: user.bigEndian, Array.init),
                residentKey: true
            )
            let response = await rk.current.key.handleCBOR(request)
            precondition(response.first == 0, "makeCredential failed: status \(response.first ?? 0xFF)")
        }
    } setup: {
        let directory = try ScratchDirectory("rk")
        rk.state = (directory, try BenchRequests.makeKey(store: try directory.sqliteStore("rk.db")))
    } teardown: {
        rk.state = nil
    }

    for algorithm in RawAlgorithm.allCases {
        let raw = Fixture<RawSigner>()
        Benchmark("alg-\(algorithm.rawValue)-raw-sign") { benchmark in
            for _ in benchmark.scaledIterations { blackHole(raw.current.sign(message)) }
        } setup: {
            raw.state = RawSigner(algorithm)
        } teardown: {
            raw.state = nil
        }
        getAssertion("alg-\(algorithm.rawValue)-getAssertion", algorithm: algorithm.coseIdentifier) { _ in
            MemoryCredentialStore()
        }
        // An RSA key is derived (primes searched) at each makeCredential: ≈ 0.15 s.
        let slow = algorithm == .rs256 || algorithm == .ps256
        let maker = Fixture<Authenticator>()
        let request = BenchRequests.makeCredential(algorithm: algorithm.coseIdentifier)
        Benchmark(
            "alg-\(algorithm.rawValue)-makeCredential",
            configuration: .init(warmupIterations: slow ? 1 : 5, maxIterations: slow ? 20 : max(50, iterations / 10))
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                let response = await maker.current.handleCBOR(request)
                precondition(response.first == 0, "makeCredential failed: status \(response.first ?? 0xFF)")
            }
        } setup: {
            maker.state = try BenchRequests.makeKey(store: MemoryCredentialStore())
        } teardown: {
            maker.state = nil
        }
    }

    guard let daemon = USBIPSession.daemonPath else { return }
    let usbip = Fixture<USBIPSession>()
    let startDaemon = { () throws in usbip.state = try USBIPSession(daemon: daemon) }
    let stopDaemon = { () throws in
        defer { usbip.state = nil }
        try usbip.state?.stop()
    }
    // Each of the two also records how many 64-byte reports one round trip moves, both ways.
    let reports = BenchmarkMetric.custom("USB reports", polarity: .prefersSmaller, useScalingFactor: false)
    let usbipConfiguration = Benchmark.Configuration(metrics: Benchmark.defaultConfiguration.metrics + [reports])
    Benchmark("getAssertion-usbip", configuration: usbipConfiguration) { benchmark in
        for _ in benchmark.scaledIterations { try usbip.current.assertOnce() }
        benchmark.measurement(reports, usbip.current.reports.output + usbip.current.reports.input)
    } setup: {
        try startDaemon()
    } teardown: {
        try stopDaemon()
    }
    let ping = Fixture<[UInt8]>()
    Benchmark("ping-usbip", configuration: usbipConfiguration) { benchmark in
        for _ in benchmark.scaledIterations { try usbip.current.host.ping(ping.current) }
        benchmark.measurement(reports, 2 * CTAPHIDPacketizer.reportCount(payloadSize: ping.current.count))
    } setup: {
        try startDaemon()
        ping.state = usbip.current.pingPayload
    } teardown: {
        try stopDaemon()
    }
}
