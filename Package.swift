// swift-tools-version:6.1
// latchkey: a virtual FIDO2 security key for Linux.
//
// Layering (see docs/ARCHITECTURE.md): CBOR, CTAPHID and CTAP are protocol targets that do
// no I/O; LatchkeyCrypto wraps OpenSSL libcrypto; LatchkeyStore owns the SQLite
// credential store. Fuzzers and benchmarks are sibling packages (Fuzz/,
// Benchmarks/) so this build stays lean.
import PackageDescription

/// The daemon is an application, not an API: its public declarations exist for
/// its executables and tests, so its imports stay public by default.
let daemonSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// Products of the package dependencies that several targets use, named once.
let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
let nioCore: Target.Dependency = .product(name: "NIOCore", package: "swift-nio")
let nioHTTP1: Target.Dependency = .product(name: "NIOHTTP1", package: "swift-nio")
let asyncHTTPClient: Target.Dependency = .product(name: "AsyncHTTPClient", package: "async-http-client")
let hummingbird: Target.Dependency = .product(name: "Hummingbird", package: "hummingbird")
let serviceLifecycle: Target.Dependency = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let swiftCrypto: Target.Dependency = .product(name: "Crypto", package: "swift-crypto")

let package = Package(
    name: "latchkey",
    // Each product is the target of its name.
    products: [
        "CBOR", "CTAPHID", "LatchkeyCrypto", "CTAP", "LatchkeyStore", "USBIP", "LatchkeySystem", "LatchkeyNames",
        // Only for the fuzzers in Fuzz/ (its JSON parsers, through @_spi(Fuzzing)); the
        // daemon is an application, not an API.
        "LatchkeyDaemon",
    ].map { .library(name: $0, targets: [$0]) }
        + ["latchkeyd", "latchkeyctl", "latchkey-webdriver"].map { .executable(name: $0, targets: [$0]) },
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        // latchkeyctl's HTTP client on the control socket (http+unix).
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // ML-DSA-65/87 (BoringSSL), which Debian 12's OpenSSL 3.0 lacks.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // HTTPField for the headers latchkey-webdriver forwards (Hummingbird's own types).
        .package(url: "https://github.com/apple/swift-http-types", from: "1.4.0"),
        // latchkey-webdriver --devtools: the DevTools gateway's WebSocket server (for CDP clients)
        // and its message types; the browser's side is NIO's own client (BrowserSocket.swift).
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", exact: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket", exact: "1.6.2"),
    ],
    targets: [
        // System libraries.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // glibc's <malloc.h> (mallopt, malloc_trim), part of libc itself.
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(
            name: "CLinuxHID",
            pkgConfig: "libudev",
            providers: [.apt(["libudev-dev"])]
        ),

        // The one shape of a local failure (code, reason, location) that CBOR, USBIP, CTAP and
        // LatchkeyCrypto share: a generic value type, no I/O, no Foundation.
        .target(name: "LatchkeyErrors", swiftSettings: strict),

        // Protocol targets: no I/O, no Foundation.
        .target(name: "CBOR", dependencies: ["LatchkeyErrors"], swiftSettings: strict),
        .target(name: "CTAPHID", swiftSettings: strict),
        .target(
            name: "CTAP",
            dependencies: ["CBOR", "LatchkeyCrypto", "LatchkeyErrors"],
            swiftSettings: strict
        ),
        .target(name: "USBIP", dependencies: ["LatchkeyErrors"], swiftSettings: strict),

        // Values shared by the daemon, latchkeyctl and latchkey-webdriver (KeyName, LatchkeyVersion,
        // SocketLocation, JSONValue): no I/O, no Foundation.
        .target(name: "LatchkeyNames", swiftSettings: strict),

        // The one system-call wrapper (EINTR, errno) the I/O targets share.
        .target(name: "LatchkeySystem", swiftSettings: strict),

        // Consent prompts as desktop notifications (org.freedesktop.Notifications through gdbus) and
        // their text, escaped in one place: latchkeyd shows its own user's, `latchkeyctl agent` each
        // owner's in their session.
        .target(name: "LatchkeyNotifications", dependencies: [logging], swiftSettings: strict),

        // Transports: the kernel's uhid device (system calls live here and in the daemon).
        .target(name: "LatchkeyUHID", dependencies: ["CLinuxHID", "LatchkeySystem"], swiftSettings: strict),

        // Crypto over OpenSSL libcrypto, and swift-crypto for ML-DSA alone.
        .target(
            name: "LatchkeyCrypto",
            dependencies: ["COpenSSL", "LatchkeyErrors", swiftCrypto],
            swiftSettings: strict
        ),

        // Durable credential store (SQLite through GRDB).
        .target(
            name: "LatchkeyStore",
            dependencies: [
                "CTAP", "CBOR", "LatchkeyCrypto", "LatchkeySystem", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),

        // The daemon: configuration, keys, HID sessions, the USB/IP server, the
        // control API. It owns the system calls the protocol targets never make.
        .target(
            name: "LatchkeyDaemon",
            dependencies: [
                "CBOR", "CTAPHID", "CTAP", "LatchkeyCrypto", "LatchkeyStore", "USBIP", "LatchkeyUHID", "CZlib",
                "LatchkeyNames", "LatchkeyNotifications", "LatchkeySystem", "CMalloc",
                nioCore, .product(name: "NIOPosix", package: "swift-nio"), nioHTTP1,
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"), logging, serviceLifecycle, hummingbird,
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            // one folder per concern, each with a README saying what it owns
            exclude: ["README.md"] + ["Service", "Keys", "Transports", "Consent", "Control", "Exchange", "Fuzzing"]
                .map { "\($0)/README.md" },
            swiftSettings: daemonSettings
        ),
        .executableTarget(
            name: "latchkeyd",
            dependencies: ["LatchkeyDaemon", "LatchkeyNames", argumentParser, logging],
            swiftSettings: daemonSettings
        ),
        .executableTarget(
            name: "latchkeyctl",
            dependencies: [
                "LatchkeySystem", "LatchkeyNames", "LatchkeyNotifications", argumentParser, asyncHTTPClient, nioCore,
                nioHTTP1, logging,
            ],
            swiftSettings: strict
        ),

        // The WebDriver intermediary (README "Selenium and WebDriver"): WebAuthn §11's virtual
        // authenticator commands answered with latchkeyd keys, every other command forwarded to the
        // browser's driver. The logic is a library so that its tests can reach it; the executable
        // only parses arguments.
        .target(
            name: "LatchkeyWebDriver",
            dependencies: [
                "LatchkeyNames", "LatchkeySystem", hummingbird, .product(name: "HTTPTypes", package: "swift-http-types"),
                asyncHTTPClient, nioCore, nioHTTP1, logging, serviceLifecycle,
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            path: "Sources/latchkey-webdriver/Intermediary",
            swiftSettings: daemonSettings
        ),
        .executableTarget(
            name: "latchkey-webdriver",
            dependencies: ["LatchkeyWebDriver", "LatchkeyNames", argumentParser, logging],
            path: "Sources/latchkey-webdriver/Command",
            swiftSettings: daemonSettings
        ),

        // What the Swift test targets share: kept fuzz crashers, a seeded generator.
        .target(name: "LatchkeyTestSupport", path: "Tests/LatchkeyTestSupport", swiftSettings: strict),

        .testTarget(name: "CBORTests", dependencies: ["CBOR", "LatchkeyTestSupport"], resources: [.copy("Crashers")]),
        .testTarget(
            name: "CTAPHIDTests",
            dependencies: ["CTAPHID", "LatchkeyTestSupport"],
            resources: [.copy("Crashers")]
        ),
        .testTarget(name: "LatchkeyNamesTests", dependencies: ["LatchkeyNames"]),
        .testTarget(name: "LatchkeySystemTests", dependencies: ["LatchkeySystem"]),
        .testTarget(name: "LatchkeyNotificationsTests", dependencies: ["LatchkeyNotifications"]),
        .testTarget(
            name: "LatchkeyWebDriverTests",
            dependencies: ["LatchkeyWebDriver", "LatchkeyNames", nioCore, .product(name: "NIOPosix", package: "swift-nio")]
        ),
        .testTarget(
            name: "LatchkeyDaemonTests",
            dependencies: [
                "LatchkeyDaemon", "LatchkeyNames", "CTAP", "CTAPHID", "USBIP",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "LatchkeyUHIDTests", dependencies: ["LatchkeyUHID", "CLinuxHID", "LatchkeyTestSupport"]),
        .testTarget(name: "USBIPTests", dependencies: ["USBIP", "LatchkeyTestSupport"], resources: [.copy("Crashers")]),
        .testTarget(name: "LatchkeyCryptoTests", dependencies: ["LatchkeyCrypto", "COpenSSL"]),
        .testTarget(
            name: "CTAPTests",
            dependencies: [
                "CTAP", "CBOR", "CTAPHID", "LatchkeyCrypto", "LatchkeyStore", "COpenSSL", "LatchkeyTestSupport",
                swiftCrypto,
            ],
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
