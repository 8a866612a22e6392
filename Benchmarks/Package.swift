// swift-tools-version:6.1
// latchkey benchmarks on package-benchmark (ordo-one/benchmark), kept out of the main
// build. Run with scripts/bench.sh: a release latchkeyd, one run of every benchmark, and
// each figure as a ratio of the raw OpenSSL signature measured in that run.
import PackageDescription

// The root package is a path dependency whose identity is its directory's name.
let root = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "latchkey")

/// Libraries of the root package, by product name.
func latchkey(_ products: String...) -> [Target.Dependency] {
    products.map { .product(name: $0, package: root) }
}

let package = Package(
    name: "latchkey-benchmarks",
    dependencies: [
        .package(path: ".."),
        // The malloc interposer (malloc counts) and not the default traits' Swift runtime
        // interposer (ARC counts), whose package the project's machines do not carry.
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        // ML-DSA's baseline, straight through swift-crypto (as latchkey signs it); latchkey-load
        // verifies ES256 signatures with it.
        .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
        // latchkey-load's latency histograms (package-benchmark's own percentiles).
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", exact: "0.2.0"),
        // Exact versions for what package-benchmark brings too (the root package pins its own
        // graph, Package.swift): listed only to fix them, so SwiftPM warns that no target uses them.
        .package(url: "https://github.com/ordo-one/malloc-interposer", exact: "1.6.1"),
        .package(url: "https://github.com/ordo-one/TextTable", exact: "0.0.2"),
    ],
    targets: [
        // libcrypto itself, so the baseline is OpenSSL with no latchkey code in between.
        .systemLibrary(name: "CBenchOpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // What the benchmarks stand on: the raw signer, the CTAP requests, latchkeyd as a
        // child process and a USB/IP host that imports its key.
        .target(
            name: "LatchkeyBenchSupport",
            dependencies: ["CBenchOpenSSL", .product(name: "Crypto", package: "swift-crypto")]
                + latchkey("CTAP", "CBOR", "LatchkeyCrypto", "LatchkeyStore", "USBIP", "CTAPHID", "LatchkeySystem")
        ),
        // latchkey-load: parallel load, operations beside PINGs, and scale, through a release
        // latchkeyd's USB/IP server (scripts/load.sh).
        .executableTarget(
            name: "LatchkeyLoad",
            dependencies: [
                "LatchkeyBenchSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ] + latchkey("CBOR", "CTAPHID")
        ),
        // package-benchmark finds benchmark targets by their folder: Benchmarks/<Name>.
        .executableTarget(
            name: "Latchkey",
            dependencies: ["LatchkeyBenchSupport", .product(name: "Benchmark", package: "benchmark")]
                + latchkey("CTAP", "CTAPHID", "LatchkeyStore"),
            path: "Benchmarks/Latchkey",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
