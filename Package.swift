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

/// The packages our dependencies bring, at the versions they resolve to today (see
/// `dependencies` below for why they are listed).
let pinnedTransitiveDependencies: [Package.Dependency] = [
    ("apple/swift-algorithms", "1.2.1"), ("apple/swift-asn1", "1.7.4"), ("apple/swift-async-algorithms", "1.1.4"),
    ("apple/swift-atomics", "1.3.0"), ("apple/swift-certificates", "1.21.1"), ("apple/swift-collections", "1.6.0"),
    ("apple/swift-configuration", "1.4.0"), ("apple/swift-distributed-tracing", "1.7.3"),
    ("apple/swift-http-structured-headers", "1.7.0"), ("apple/swift-metrics", "2.13.0"),
    ("apple/swift-nio-http2", "1.46.0"), ("apple/swift-nio-ssl", "2.37.6"),
    ("apple/swift-nio-transport-services", "1.28.0"), ("apple/swift-numerics", "1.1.1"),
    ("apple/swift-service-context", "1.5.1"), ("apple/swift-system", "1.8.1"),
].map { .package(url: "https://github.com/\($0.0)", exact: Version(stringLiteral: $0.1)) }

let package = Package(
    name: "latchkey",
    // Each product is the target of its name.
    products: [
        "CBOR", "CTAPHID", "LatchkeyCrypto", "CTAP", "LatchkeyStore", "USBIP", "LatchkeySystem", "LatchkeyJSON",
        "LatchkeyContract",
        // Only for the fuzzers in Fuzz/: the key core's JSON parsers. The core and the
        // daemon are an application, not an API.
        "LatchkeyJSONFuzzing",
    ].map { .library(name: $0, targets: [$0]) }
        + ["latchkeyd", "latchkeyctl", "latchkey-webdriver"].map { .executable(name: $0, targets: [$0]) },
    // Every version exact, the packages the ones we use depend on included: Package.resolved is
    // not committed (these machines' copies of the packages have their own commit ids), so this
    // list is what makes two builds of one commit link the same code. A package is updated here
    // on purpose, with its reason in the commit. The transitive ones are listed only to fix
    // their versions (SwiftPM warns that no target uses them).
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras", exact: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/LebJe/TOMLKit", exact: "0.6.0"),
        // latchkeyctl's HTTP client on the control socket (http+unix).
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        // ML-DSA-65/87 (BoringSSL), which Debian 12's OpenSSL 3.0 lacks.
        .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
        // HTTPField for the headers latchkey-webdriver forwards (Hummingbird's own types).
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        // base64url, in the one place latchkey reads and writes it (LatchkeyJSON), without Foundation.
        .package(url: "https://github.com/swift-extras/swift-extras-base64", exact: "1.2.0"),
        // latchkey-webdriver --devtools: the DevTools gateway's WebSocket server (for CDP clients)
        // and its message types; the browser's side is NIO's own client (BrowserSocket.swift).
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", exact: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket", exact: "1.6.2"),
    ] + pinnedTransitiveDependencies,
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
        // prctl(2) with fixed arguments (Swift cannot call a variadic C function).
        .systemLibrary(name: "CProcessControl"),
        .systemLibrary(
            name: "CLinuxHID",
            pkgConfig: "libudev",
            providers: [.apt(["libudev-dev"])]
        ),
        // sd-bus, the desktop notifier's session bus connection (LatchkeyNotifications/SessionBus.swift).
        .systemLibrary(name: "CSystemdBus", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),

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

        // What latchkeyd and its clients (latchkeyctl, latchkey-webdriver) agree on: a key's name
        // (KeyName), its feature switches (KeyFeature), where the control socket is, the version.
        // No I/O, no Foundation.
        .target(name: "LatchkeyContract", swiftSettings: strict),
        // JSON as WebAuthn, CXF and the control API write it: any JSON value as a tree (JSONValue)
        // and byte strings as base64url. No I/O, no Foundation.
        .target(
            name: "LatchkeyJSON",
            dependencies: [.product(name: "ExtrasBase64", package: "swift-extras-base64")],
            swiftSettings: strict
        ),

        // The one system-call wrapper (EINTR, errno) the I/O targets share; process hardening.
        .target(name: "LatchkeySystem", dependencies: ["CProcessControl"], swiftSettings: strict),

        // Consent prompts as desktop notifications (org.freedesktop.Notifications on one sd-bus
        // connection) and their text, escaped in one place: latchkeyd shows its own user's,
        // `latchkeyctl agent` each owner's in their session.
        .target(
            name: "LatchkeyNotifications",
            dependencies: ["CSystemdBus", "LatchkeyErrors", "LatchkeySystem", logging],
            swiftSettings: strict
        ),

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
                "CTAP", "CBOR", "LatchkeyCrypto", "LatchkeyErrors", "LatchkeySystem",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),

        // The key core: configuration values, the state directory, the keys with their access
        // rules, consent, exchange and events, and the documents that show them. No NIO, no
        // Hummingbird, no HTTP: its callers map its errors (CoreError) to their own.
        .target(
            name: "LatchkeyCore",
            dependencies: [
                "CBOR", "CTAP", "LatchkeyCrypto", "LatchkeyStore", "LatchkeySystem", "LatchkeyNotifications",
                "LatchkeyJSON", "LatchkeyContract", "CZlib", logging, .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            // one folder per concern, each with a README saying what it owns
            exclude: ["README.md"] + ["Keys", "Consent", "Exchange"].map { "\($0)/README.md" },
            swiftSettings: daemonSettings
        ),
        // The key core's JSON parsers played with arbitrary bytes, for the fuzzers in Fuzz/ and
        // the replay tests.
        .target(
            name: "LatchkeyJSONFuzzing",
            dependencies: ["LatchkeyCore", "LatchkeyJSON", "LatchkeyCrypto", "CTAP"],
            exclude: ["README.md"],
            swiftSettings: strict
        ),

        // The daemon: the key core's adapters. The service (start, stop, systemd), the
        // transports (uhid, the USB/IP server, HID sessions) and the control API (Hummingbird).
        // It owns the system calls the protocol targets never make.
        .target(
            name: "LatchkeyDaemon",
            dependencies: [
                "LatchkeyCore", "CTAPHID", "CTAP", "LatchkeyStore", "USBIP", "LatchkeyUHID", "LatchkeyContract",
                "LatchkeyNotifications", "LatchkeySystem", "CMalloc",
                nioCore, .product(name: "NIOPosix", package: "swift-nio"), nioHTTP1,
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"), logging, serviceLifecycle, hummingbird,
                .product(name: "HummingbirdCore", package: "hummingbird"),
            ],
            // one folder per concern, each with a README saying what it owns
            exclude: ["README.md"] + ["Service", "Transports", "Control"].map { "\($0)/README.md" },
            swiftSettings: daemonSettings
        ),
        .executableTarget(
            name: "latchkeyd",
            dependencies: ["LatchkeyDaemon", "LatchkeyCore", "LatchkeyContract", "LatchkeyStore", argumentParser, logging],
            swiftSettings: daemonSettings
        ),
        .executableTarget(
            name: "latchkeyctl",
            dependencies: [
                "LatchkeySystem", "LatchkeyContract", "LatchkeyJSON", "LatchkeyNotifications", argumentParser,
                asyncHTTPClient, nioCore,
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
                "LatchkeyContract", "LatchkeyJSON", "LatchkeySystem", hummingbird, .product(name: "HTTPTypes", package: "swift-http-types"),
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
            dependencies: ["LatchkeyWebDriver", "LatchkeyContract", argumentParser, logging],
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
        .testTarget(name: "LatchkeyContractTests", dependencies: ["LatchkeyContract"]),
        .testTarget(name: "LatchkeyJSONTests", dependencies: ["LatchkeyJSON"]),
        .testTarget(name: "LatchkeySystemTests", dependencies: ["LatchkeySystem"]),
        .testTarget(name: "LatchkeyNotificationsTests", dependencies: ["LatchkeyNotifications"]),
        .testTarget(
            name: "LatchkeyWebDriverTests",
            dependencies: ["LatchkeyWebDriver", "LatchkeyJSON", "LatchkeyContract", nioCore, .product(name: "NIOPosix", package: "swift-nio")]
        ),
        .testTarget(
            name: "LatchkeyCoreTests",
            dependencies: [
                "LatchkeyCore", "LatchkeyJSONFuzzing", "LatchkeyContract", "LatchkeyJSON", "CTAP", "CBOR",
                "LatchkeyCrypto", "LatchkeyNotifications",
            ]
        ),
        .testTarget(
            name: "LatchkeyDaemonTests",
            dependencies: [
                "LatchkeyDaemon", "LatchkeyCore", "LatchkeyContract", "CTAP", "CTAPHID", "USBIP",
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
