// swift-tools-version:6.1
// latchkey benchmarks, kept out of the main build. Run with scripts/bench.sh
// (release build): figures are reported side by side from one run, as ratios.
import PackageDescription

// The root package is a path dependency whose identity is its directory's name.
let root = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "latchkey")

let package = Package(
    name: "latchkey-benchmarks",
    dependencies: [
        .package(path: "..")
    ],
    targets: [
        // libcrypto itself, so the baseline is OpenSSL with no latchkey code in between.
        .systemLibrary(name: "CBenchOpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .executableTarget(
            name: "latchkey-bench",
            dependencies: [
                "CBenchOpenSSL",
                .product(name: "CTAP", package: root),
                .product(name: "CBOR", package: root),
                .product(name: "LatchkeyCrypto", package: root),
                .product(name: "LatchkeyStore", package: root),
                // getAssertion/usbip: the bench's USB/IP host speaks the daemon's wire types.
                .product(name: "USBIP", package: root),
                .product(name: "CTAPHID", package: root),
                .product(name: "LatchkeySystem", package: root),
            ]
        ),
    ]
)
