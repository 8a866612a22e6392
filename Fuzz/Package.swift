// swift-tools-version:6.1
// latchkey fuzzers: libFuzzer executables over the protocol targets, kept out of the main
// build. Build and run them all with scripts/fuzz.sh; each target's entry point is
// LLVMFuzzerTestOneInput, and libFuzzer supplies main: build with `swift build -c release
// --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address` (the SwiftPM flags
// make the link use libFuzzer's main; the -Xswiftc copy instruments the root package's
// targets, which the SwiftPM flags leave uninstrumented).
import PackageDescription

// The root package is a path dependency, whose identity is its directory's name; a clone may
// live in a directory of any name, so take it from where this manifest is.
let root = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "latchkey")

let package = Package(
    name: "latchkey-fuzz",
    dependencies: [
        .package(path: "..")
    ],
    targets: [
        .executableTarget(
            name: "FuzzCTAPHID",
            dependencies: [.product(name: "CTAPHID", package: root)]
        ),
        .executableTarget(
            name: "FuzzCBOR",
            dependencies: [.product(name: "CBOR", package: root)]
        ),
        .executableTarget(
            name: "FuzzCTAP",
            dependencies: [.product(name: "CTAP", package: root), .product(name: "CBOR", package: root)]
        ),
        .executableTarget(
            name: "FuzzUSBIP",
            dependencies: [.product(name: "USBIP", package: root)]
        ),
    ]
        // The key core's JSON parsers: control API request bodies, CXF, the export envelope.
        + ["FuzzControlRequests", "FuzzCXF", "FuzzExchangeEnvelope"].map { name in
            .executableTarget(name: name, dependencies: [.product(name: "LatchkeyJSONFuzzing", package: root)])
        }
)
