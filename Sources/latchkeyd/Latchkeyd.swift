// latchkeyd: the latchkey daemon. Configuration comes from an embedded
// default, then --config FILE, then the flags below.

import ArgumentParser
import Foundation
import LatchkeyCore
import LatchkeyDaemon
import LatchkeyContract
import LatchkeyStore
import Logging

@main
struct Latchkeyd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latchkeyd",
        abstract: "A virtual FIDO2 security key: a CTAP2 USB HID authenticator through /dev/uhid and USB/IP.",
        discussion: """
            With no options latchkeyd runs one key named "default": as a uhid device when /dev/uhid can \
            be opened, otherwise exported over USB/IP on 127.0.0.1:3240 (attach it with \
            `usbip attach -r 127.0.0.1 -b 1-1`). It logs which to stderr.

            Examples:
              latchkeyd --state-dir /tmp/lk --presence auto          # a CI key, no human needed
              latchkeyd --no-uhid --usbip 127.0.0.1:3240             # USB/IP only
              latchkeyd --config /etc/latchkeyd/latchkeyd.toml       # the system service
              latchkeyd --print-default-config                       # every setting and its default
              latchkeyd --master-key secret-service --seal-master-key  # move ~/.local/state/latchkeyd/master-key into the keyring

            Drive it with latchkeyctl (status, keys, credentials, presence approve/deny).
            """,
        version: LatchkeyVersion.string
    )

    @Option(name: .long, help: "Read settings from this TOML file (see --print-default-config).")
    var config: String?

    @Option(name: .customLong("state-dir"), help: "Directory for key stores, the master key and the lock.")
    var stateDirectory: String?

    @Option(name: .long, help: "Serve USB/IP on HOST:PORT (enables it even when uhid works).")
    var usbip: String?

    @Flag(name: .customLong("no-usbip"), help: "Do not serve USB/IP.")
    var noUSBIP = false

    @Flag(name: .customLong("no-uhid"), help: "Do not create uhid devices.")
    var noUHID = false

    @Option(name: .long, help: "Presence mode of every key: auto, prompt or deny.")
    var presence: PresenceMode?

    @Option(name: .customLong("control-socket"), help: "Path of the control API socket.")
    var controlSocket: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    @Option(name: .customLong("master-key"), help: "Where the master key is kept: file, systemd-credential or secret-service.")
    var masterKey: MasterKeySourceKind?

    @Flag(
        name: .customLong("seal-master-key"),
        help: """
            Move the state directory's plaintext master-key into the --master-key source (or make a new key \
            there on a first start), read it back, remove the plaintext file, and exit. Safe to run again.
            """
    )
    var sealMasterKey = false

    @Flag(name: .customLong("print-default-config"), help: "Print the configuration file format with every default, and exit.")
    var printDefaultConfig = false

    func run() async throws {
        if printDefaultConfig {
            print(DaemonConfiguration.documentedDefaults)
            return
        }
        var configuration = DaemonConfiguration.defaults()
        if let config {
            guard let text = try? String(contentsOfFile: config, encoding: .utf8) else {
                throw ValidationError("cannot read --config \(config)")
            }
            do {
                try configuration.apply(toml: text, source: config)
            } catch {
                FileHandle.standardError.write(Data("latchkeyd: \(error.message)\n".utf8))
                throw ExitCode(78)  // EX_CONFIG
            }
        }
        if let stateDirectory { configuration.stateDirectory = stateDirectory }
        if let controlSocket { configuration.controlSocket = controlSocket }
        if let logLevel { configuration.logLevel = logLevel }
        if let masterKey { configuration.masterKeySource = masterKey }
        if noUHID { configuration.uhid = .off }
        if let usbip {
            configuration.usbip = .on
            configuration.usbipListen = usbip
        }
        if noUSBIP { configuration.usbip = .off }
        if let presence {
            configuration.presence = presence
            for index in configuration.keys.indices { configuration.keys[index].presence = presence }
        }
        if controlSocket == nil, stateDirectory != nil, ProcessInfo.processInfo.environment["RUNTIME_DIRECTORY"] == nil {
            // A state directory given on the command line keeps its socket with it, so two
            // foreground daemons (two CI rigs) never fight over one socket path.
            configuration.controlSocket = configuration.stateDirectory + "/control.sock"
        }
        do {
            try configuration.validate()
        } catch {
            FileHandle.standardError.write(Data("latchkeyd: \(error.message)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }

        if sealMasterKey {
            do {
                let outcome = try Daemon.sealMasterKey(configuration)
                print(Self.describe(outcome, configuration))
                return
            } catch let error as ConfigurationError {
                FileHandle.standardError.write(Data("latchkeyd: \(error.message)\n".utf8))
                throw ExitCode(78)  // EX_CONFIG
            }
        }

        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "latchkeyd")
        logger.info(
            "starting",
            metadata: ["state": "\(configuration.stateDirectory)", "socket": "\(configuration.controlSocket)"]
        )
        do {
            try await Daemon(configuration: configuration, logger: logger).run()
        } catch let error as ConfigurationError {
            logger.critical("\(error.message)")
            throw ExitCode(78)  // EX_CONFIG
        }
    }
}

extension PresenceMode: ExpressibleByArgument {}
extension MasterKeySourceKind: ExpressibleByArgument {}

extension Latchkeyd {
    /// What --seal-master-key did, in one line.
    static func describe(_ outcome: SealOutcome, _ configuration: DaemonConfiguration) -> String {
        let source = configuration.masterKeySource.rawValue
        let file = configuration.stateDirectory + "/master-key"
        switch outcome {
        case .moved: return "sealed: the master key moved from \(file) into \(source), read back, and \(file) is removed"
        case .removedLeftover: return "sealed: \(source) already held the key; the leftover \(file) is removed"
        case .alreadySealed: return "sealed: \(source) holds the master key; nothing to move"
        case .created: return "sealed: a new master key was made in \(source)"
        }
    }
}

