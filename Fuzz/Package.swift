// swift-tools-version:6.1
// latchkey fuzzers: libFuzzer executables over the protocol targets, kept out of the main
// build. Build and run them all with scripts/fuzz.sh; each target's entry point is
// LLVMFuzzerTestOneInput, and libFuzzer supplies main when built with
// `-sanitize=fuzzer,address -parse-as-library`.
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
)
