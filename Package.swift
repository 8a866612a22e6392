// swift-tools-version:6.1
// latchkey: a virtual FIDO2 security key for Linux.
//
// Layering (see DESIGN.md): CBOR, CTAPHID and CTAP are protocol targets that do
// no I/O; LatchkeyCrypto wraps OpenSSL libcrypto; LatchkeyStore owns the SQLite
// credential store. Fuzzers and benchmarks are sibling packages (Fuzz/,
// Benchmarks/) so this build stays lean.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "latchkey",
    products: [
        .library(name: "CBOR", targets: ["CBOR"]),
        .library(name: "CTAPHID", targets: ["CTAPHID"]),
        .library(name: "LatchkeyCrypto", targets: ["LatchkeyCrypto"]),
        .library(name: "CTAP", targets: ["CTAP"]),
        .library(name: "LatchkeyStore", targets: ["LatchkeyStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // System libraries.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLinuxHID",
            pkgConfig: "libudev",
            providers: [.apt(["libudev-dev"])]
        ),

        // Protocol targets: no I/O, no Foundation.
        .target(name: "CBOR", swiftSettings: strict),
        .target(name: "CTAPHID", swiftSettings: strict),
        .target(name: "CTAP", dependencies: ["CBOR", "LatchkeyCrypto"], swiftSettings: strict),

        // Crypto over OpenSSL libcrypto.
        .target(name: "LatchkeyCrypto", dependencies: ["COpenSSL"], swiftSettings: strict),

        // Durable credential store (SQLite through GRDB).
        .target(
            name: "LatchkeyStore",
            dependencies: ["CTAP", "CBOR", "LatchkeyCrypto", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),

        .testTarget(name: "CBORTests", dependencies: ["CBOR"], resources: [.copy("Crashers")]),
        .testTarget(name: "CTAPHIDTests", dependencies: ["CTAPHID"], resources: [.copy("Crashers")]),
        .testTarget(name: "LatchkeyCryptoTests", dependencies: ["LatchkeyCrypto", "COpenSSL"]),
        .testTarget(
            name: "CTAPTests",
            dependencies: ["CTAP", "CBOR", "CTAPHID", "LatchkeyCrypto", "LatchkeyStore", "COpenSSL"],
            resources: [.copy("Crashers")]
        ),
        // A child process the store tests kill -9 mid-write.
        .executableTarget(
            name: "StoreCrashProbe",
            dependencies: ["LatchkeyStore", "CTAP"],
            path: "Tests/StoreCrashProbe",
            swiftSettings: strict
        ),
        .testTarget(
            name: "LatchkeyStoreTests",
            dependencies: ["LatchkeyStore", "CTAP", "LatchkeyCrypto", "StoreCrashProbe"]
        ),
    ]
)
