// latchkeyd's configuration: defaults, the TOML file, and the errors a
// person gets for a bad one.

import CTAP
import Foundation
import Testing

@testable import LatchkeyCore

@Suite("configuration")
struct ConfigurationTests {
    @Test("the defaults follow systemd's directories, then root's, then the user's")
    func defaults() {
        let systemd = DaemonConfiguration.defaults(environment: [
            "STATE_DIRECTORY": "/var/lib/latchkeyd", "RUNTIME_DIRECTORY": "/run/latchkeyd",
        ])
        #expect(systemd.stateDirectory == "/var/lib/latchkeyd")
        #expect(systemd.controlSocket == "/run/latchkeyd/control.sock")
        #expect(systemd.keys.map(\.name) == ["default"])
        #expect(systemd.presence == .prompt)
        #expect(systemd.usbipListen == "127.0.0.1:3240")
        #expect(systemd.usbipAllowRemote == false)
        #expect(systemd.uhid == .auto)
    }

    @Test("the documented defaults parse and change nothing")
    func documentedDefaultsParse() throws {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        let before = configuration
        try configuration.apply(toml: DaemonConfiguration.documentedDefaults, source: "defaults")
        #expect(configuration == before)
    }

    @Test("default-key = false leaves no key unless the file has [[keys]]; the packaged file parses")
    func defaultKey() throws {
        var none = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try none.apply(toml: "default-key = false\n", source: "f")
        #expect(none.keys.isEmpty)
        var listed = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try listed.apply(toml: "default-key = false\n[[keys]]\nname = \"a\"\n", source: "f")
        #expect(listed.keys.map(\.name.rawValue) == ["a"])
        var implicit = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try implicit.apply(toml: "default-key = true\n", source: "f")
        #expect(implicit.keys.map(\.name.rawValue) == ["default"])
        let packaged = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../packaging/latchkeyd.toml").standardized
        var shipped = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try shipped.apply(toml: try String(contentsOf: packaged, encoding: .utf8), source: packaged.path)
        #expect(shipped.keys.isEmpty)
        #expect(shipped.presence == .prompt)
        // the packaged unit's LoadCredentialEncrypted= needs this source (postinst seals it)
        #expect(shipped.masterKeySource.rawValue == "systemd-credential")
    }

    @Test("a full file sets every field")
    func fullFile() throws {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        try configuration.apply(
            toml: """
                state-directory = "/tmp/state"
                control-socket = "/tmp/state/ctl.sock"
                log-level = "debug"
                reset-window-seconds = 20
                [uhid]
                enabled = false
                path = "/dev/uhid2"
                [usbip]
                enabled = "on"
                listen = "127.0.0.1:4000"
                [presence]
                mode = "auto"
                timeout-seconds = 5
                [[keys]]
                name = "ci-1"
                presence = "deny"
                usbip = false
                vendor-id = 0x1050
                product-id = 0x0407
                attestation = "none"
                algorithms = ["RS256", "es384", "-8"]
                max-discoverable-credentials = 2
                [[keys]]
                name = "ci-2"
                """, source: "test.toml")
        try configuration.validate()
        #expect(configuration.stateDirectory == "/tmp/state")
        #expect(configuration.logLevel == "debug")
        #expect(configuration.resetWindowSeconds == 20)
        #expect(configuration.uhid == .off)
        #expect(configuration.uhidPath == "/dev/uhid2")
        #expect(configuration.usbip == .on)
        #expect(configuration.usbipListen == "127.0.0.1:4000")
        #expect(configuration.presence == .auto)
        #expect(configuration.presenceTimeoutSeconds == 5)
        #expect(configuration.keys.map(\.name) == ["ci-1", "ci-2"])
        #expect(configuration.keys[0].presence == .deny)
        #expect(configuration.keys[0].usbip == false)
        #expect(configuration.keys[0].vendorId == 0x1050)
        #expect(configuration.keys[0].productId == 0x0407)
        #expect(configuration.keys[0].attestation == "none")
        #expect(configuration.keys[0].algorithms == [.rs256, .es384, .edDSA])
        #expect(configuration.keys[1].presence == nil)
        #expect(configuration.keys[1].algorithms == COSEAlgorithm.defaultOrder)
        #expect(configuration.keys[0].maxDiscoverableCredentials == 2)
        #expect(configuration.keys[1].maxDiscoverableCredentials == 1000)
    }

    @Test("bad files are refused with a message that says where", arguments: [
        ("log-levl = \"info\"", "unknown key log-levl"),
        ("[presence]\nmode = \"maybe\"", "mode must be"),
        ("[usbip]\nlisten = 3240", "listen must be a string"),
        ("[[keys]]\npresence = \"auto\"", "needs a name"),
        ("[[keys]]\nname = \"a\"\nvendor-id = 70000", "vendor-id must be between"),
        ("[[keys]]\nname = \"..\"", "[[keys]] #1: name: the key name does not start with a letter or digit"),
        ("[[keys]]\nname = \"a/b\"", "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
        ("[[keys]]\nname = \"\"", "the key name is empty"),
        ("[uhid]\nenabled = \"sometimes\"", "enabled must be"),
        ("[[keys]]\nname = \"a\"\nalgorithms = [\"ES999\"]", "algorithm \"ES999\" is not one of ES256, EdDSA"),
        ("[[keys]]\nname = \"a\"\nalgorithms = [\"ES256\", \"es256\"]", "algorithm ES256 is listed twice"),
        ("[[keys]]\nname = \"a\"\nalgorithms = []", "algorithms lists none"),
        ("[[keys]]\nname = \"a\"\nalgorithms = [-7]", "algorithms must be a list of algorithm names"),
        ("[[keys]]\nname = \"a\"\nmax-discoverable-credentials = 0", "(key a): max-discoverable-credentials: a limit"),
        ("[[keys]]\nname = \"a\"\nmax-discoverable-credentials = 100001", "is 1 to 100000, not 100001"),
        ("[[keys]]\nname = \"a\"\nmax-discoverable-credentials = \"9\"", "credentials must be an integer"),
        ("this is not toml", "not valid TOML"),
    ])
    func badFiles(text: String, message: String) {
        var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
        #expect {
            try configuration.apply(toml: text, source: "bad.toml")
        } throws: { error in
            (error as? ConfigurationError)?.message.contains(message) == true
                && (error as? ConfigurationError)?.message.contains("bad.toml") == true
        }
    }

    @Test("validation refuses duplicate names, listen addresses and levels")
    func validation() {
        func invalid(_ edit: (inout DaemonConfiguration) -> Void) -> Bool {
            var configuration = DaemonConfiguration(stateDirectory: "/s", controlSocket: "/s/c")
            edit(&configuration)
            return (try? configuration.validate()) == nil
        }
        #expect(invalid { $0.keys = [KeyConfiguration(name: "a"), KeyConfiguration(name: "a")] })
        #expect(invalid { $0.usbipListen = "localhost" })
        #expect(invalid { $0.usbipListen = "127.0.0.1:99999" })
        #expect(invalid { $0.logLevel = "loud" })
        #expect(invalid { $0.presenceTimeoutSeconds = 0 })
        #expect(!invalid { _ in })
    }

    @Test("listen addresses parse, IPv6 too, and know loopback")
    func listenAddresses() throws {
        #expect(try ListenAddress("127.0.0.1:3240").isLoopback)
        #expect(try ListenAddress("[::1]:3240").host == "::1")
        #expect(try ListenAddress("[::1]:3240").isLoopback)
        #expect(try !ListenAddress("0.0.0.0:3240").isLoopback)
        #expect(try ListenAddress("localhost:1").description == "localhost:1")
    }
}
