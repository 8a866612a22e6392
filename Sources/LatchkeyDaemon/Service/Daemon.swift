// latchkeyd: turns off core dumps and ptrace, prepares the state directory,
// takes the daemon lock, loads the master key from its configured source
// (failing closed), starts the keys and their transports and the control API,
// tells systemd when hosts can see the keys, and on SIGTERM/SIGINT takes
// everything down again (the uhid devices are destroyed, the socket removed).
// `--seal-master-key` (sealMasterKey) moves a plaintext master key into a
// sealed source instead.

import CTAP
import Foundation
import Glibc
import LatchkeyCore
import LatchkeyNotifications
import LatchkeyStore
import LatchkeySystem
import Logging
import ServiceLifecycle

/// The daemon.
public struct Daemon: Sendable {
    public let configuration: DaemonConfiguration
    let logger: Logger

    public init(configuration: DaemonConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs until SIGTERM or SIGINT.
    public func run() async throws {
        try configuration.validate()
        try Self.hardenProcess()
        logger.info("core dumps and ptrace off (PR_SET_DUMPABLE 0, RLIMIT_CORE 0)")
        HeapPolicy.apply()
        // Everything the daemon creates is private unless it says otherwise (the socket: 0660).
        umask(0o077)
        // Nobody else may be able to replace what the daemon keeps there (PrivateDirectory.swift).
        let directories = PrivateDirectory()
        try directories.prepare(configuration.stateDirectory, role: "state directory")
        try directories.prepare(
            PrivateDirectory.absolute((configuration.controlSocket as NSString).deletingLastPathComponent),
            role: "control socket's directory"
        )
        let lock = try DaemonLock(path: configuration.stateDirectory + "/latchkeyd.lock")
        defer { lock.release() }
        let masterKey = try loadMasterKey()

        let plan = TransportPlan.decide(configuration, logger: logger)
        let board = PresenceBoard(notifier: DesktopNotifier(logger: logger))
        let hub = try await DaemonTransportHub.start(plan: plan, configuration: configuration, logger: logger)
        let events = EventBus()
        let manager = KeyManager(
            configuration: configuration, masterKey: masterKey, board: board, transports: hub,
            events: events, blocking: ThreadPoolWork(), logger: logger
        )
        do {
            try await manager.startAll()
        } catch {
            await manager.detachAll()
            await hub.shutdown()
            throw error
        }

        do {
            try ControlSocket.removeStale(configuration.controlSocket)
        } catch {
            await manager.detachAll()
            await hub.shutdown()
            throw error
        }
        let listening = Latch()
        let control = ControlServer(
            manager: manager, board: board, socketPath: configuration.controlSocket,
            stateDirectory: configuration.stateDirectory, listening: listening, logger: logger
        ).application()
        let readiness = ReadinessService(manager: manager, listening: listening, logger: logger)
        let memory = MemoryReleaseService(listening: listening, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                // Last, so that its graceful shutdown runs first and ends the open event streams.
                services: [
                    .init(service: control), .init(service: readiness), .init(service: memory),
                    .init(service: EventStreamCloser(events: events)),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await group.run()
        } catch {
            logger.error("stopping after an error", metadata: ["error": "\(error)"])
        }
        SystemdNotifier().notify("STOPPING=1")
        await manager.detachAll()
        await hub.shutdown()
        board.notifier?.shutdown()
        unlink(configuration.controlSocket)
        logger.info("stopped")
    }

    /// The master key from the configured source; any failure stops the
    /// daemon (exit 78), never a fallback to another source or a new key.
    private func loadMasterKey() throws -> [UInt8] {
        let source = configuration.masterKey(environment: ProcessInfo.processInfo.environment)
        let obtained: ([UInt8], MasterKeyOrigin)
        do {
            obtained = try MasterKey.obtain(source)
        } catch {
            throw ConfigurationError("master key (source \(source.kind.rawValue)): \(error.reason)")
        }
        let (key, origin) = obtained
        var metadata: Logger.Metadata = ["source": "\(origin.source.rawValue)", "at": "\(origin.detail)"]
        if let sealing = origin.sealing { metadata["sealed-with"] = "\(sealing)" }
        logger.notice(origin.created ? "master key created" : "master key loaded", metadata: metadata)
        switch origin.source {
        case .file:
            logger.notice("the master key is a plaintext file: a copy of the state directory opens every key")
        case .systemdCredential where origin.sealing == nil:
            logger.notice(
                "how systemd sealed the credential is not known here",
                metadata: ["credential-file": "\(source.credentialFile)"]
            )
        case .systemdCredential where origin.sealing == "host":
            logger.warning("the credential is sealed with the host key only (no TPM2): a copy of the disk opens it")
        default:
            break
        }
        return key
    }

    /// Core dumps off, and the same account's ptrace and /proc/PID/mem.
    static func hardenProcess() throws {
        do {
            try ProcessHardening.makeUndumpable()
        } catch {
            throw ConfigurationError("cannot turn off core dumps: \(error)")
        }
    }

    /// `--seal-master-key`: moves the state directory's plaintext master key
    /// into the configured sealed source (or makes a new key there on a first
    /// start) under the state directory's lock. Run as the daemon's account
    /// for secret-service, as root for systemd-credential (systemd-creds needs
    /// the TPM or the host key); the state directory must exist.
    public static func sealMasterKey(_ configuration: DaemonConfiguration) throws -> SealOutcome {
        try hardenProcess()
        let source = configuration.masterKey(environment: ProcessInfo.processInfo.environment)
        var status = stat()
        guard stat(source.stateDirectory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw ConfigurationError("state directory \(source.stateDirectory) does not exist")
        }
        let seal = { () throws -> SealOutcome in
            do throws(MasterKeyError) {
                return try MasterKey.seal(source)
            } catch {
                throw ConfigurationError("master key (source \(source.kind.rawValue)): \(error.reason)")
            }
        }
        // A daemon must not start meanwhile. Root sealing another account's
        // directory takes the lock only where that account made it: a lock file
        // made by root would lock the daemon out.
        let lockPath = source.stateDirectory + "/latchkeyd.lock"
        var lockStatus = stat()
        guard lstat(lockPath, &lockStatus) == 0 || status.st_uid == geteuid() else { return try seal() }
        let lock = try DaemonLock(path: lockPath)
        defer { lock.release() }
        return try seal()
    }
}

/// An exclusive lock on the state directory, so two daemons never share it. Opened
/// without following a link: a link there is somebody else's doing.
struct DaemonLock: ~Copyable {
    let descriptor: Int32

    init(path: String) throws {
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let reason = errno == ELOOP ? "it is a symbolic link; remove it" : String(cString: strerror(errno))
            throw ConfigurationError("cannot open lock file \(path): \(reason)")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another latchkeyd is using this state directory" : String(cString: strerror(errno))
            close(descriptor)
            throw ConfigurationError("cannot lock \(path): \(reason)")
        }
        self.descriptor = descriptor
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}

/// A one-shot signal: `wait()` returns once `open()` has been called.
actor Latch {
    private(set) var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
}

/// The control socket's path before binding it.
enum ControlSocket {
    /// Removes a socket file nobody listens on (a daemon that died); refuses
    /// when a live daemon answers on it, rather than stealing its path.
    static func removeStale(_ path: String) throws {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard (status.st_mode & S_IFMT) == S_IFSOCK else {
            throw ConfigurationError("\(path) exists and is not a socket; remove it or choose another control-socket")
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ConfigurationError("control socket path \(path) is too long for a Unix socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected == 0 {
            throw ConfigurationError("another latchkeyd is serving \(path); stop it or choose another control-socket")
        }
        unlink(path)
    }
}

/// Which transports run, decided once at start.
struct TransportPlan: Sendable {
    var uhid: Bool
    var uhidPath: String
    var uhidUnavailableReason: String?
    var usbip: ListenAddress?

    static func decide(_ configuration: DaemonConfiguration, logger: Logger) -> TransportPlan {
        var reason: String?
        var uhid = false
        if configuration.uhid != .off {
            let descriptor = open(configuration.uhidPath, O_RDWR | O_CLOEXEC)
            if descriptor >= 0 {
                close(descriptor)
                uhid = true
            } else {
                let code = errno
                switch code {
                case ENOENT: reason = "\(configuration.uhidPath) does not exist (is the uhid module loaded?)"
                case EACCES, EPERM: reason = "no permission to open \(configuration.uhidPath) (run latchkeyd as its service user or root)"
                default: reason = "cannot open \(configuration.uhidPath): \(String(cString: strerror(code)))"
                }
            }
        } else {
            reason = "disabled by configuration"
        }
        let usbipOn = configuration.usbip == .on || (configuration.usbip == .auto && !uhid)
        let listen = usbipOn ? try? ListenAddress(configuration.usbipListen) : nil
        if uhid {
            logger.notice("uhid: keys appear as hidraw devices", metadata: ["path": "\(configuration.uhidPath)"])
        } else {
            logger.notice("uhid unavailable", metadata: ["reason": "\(reason ?? "-")"])
        }
        if let listen {
            logger.notice("USB/IP: serving keys", metadata: ["listen": "\(listen)"])
        }
        return TransportPlan(uhid: uhid, uhidPath: configuration.uhidPath, uhidUnavailableReason: reason, usbip: listen)
    }
}

/// Tells systemd READY=1 once every key is visible to hosts, then pings the
/// watchdog until shutdown, when it says STOPPING=1.
struct ReadinessService: Service {
    let manager: KeyManager
    let listening: Latch
    let logger: Logger

    func run() async throws {
        let notifier = SystemdNotifier()
        await listening.wait()
        let visible = await manager.waitUntilVisible(timeout: .seconds(10))
        if !visible {
            logger.error("a key's device did not appear within 10 s; reporting ready anyway")
        }
        notifier.notify("READY=1\nSTATUS=\(visible ? "keys ready" : "keys started, device not visible")")
        logger.notice("ready")
        guard let interval = SystemdNotifier.watchdogInterval() else {
            try? await gracefulShutdown()
            notifier.notify("STOPPING=1")
            return
        }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                notifier.notify("WATCHDOG=1")
                try? await Task.sleep(for: interval / 2)
            }
        }
        notifier.notify("STOPPING=1")
    }
}
