// latchkeyd as a child of a benchmark process: started with only its USB/IP server, on a
// free loopback port; awaited until that server lists the key; stopped with SIGTERM at the
// end, or SIGKILL when the benchmark fails. It never outlives the benchmark: it runs under
// `setpriv --pdeathsig KILL`, so the kernel kills it when the benchmark process dies, however
// it dies (a trap, SIGKILL). It runs without the benchmark's LD_PRELOAD (package-benchmark's
// malloc interposer), so it allocates as it does in service.

import Foundation
import Glibc
import LatchkeySystem
import Synchronization
import USBIP

/// latchkeyd running as the benchmark's child, serving USB/IP on 127.0.0.1:`port`.
public final class DaemonProcess {
    /// The bus id of the daemon's first key, the one it creates at start.
    public static let busid = "1-1"
    static let startTimeout = Duration.seconds(30)
    static let stopTimeout = Duration.seconds(10)

    public let port: UInt16
    /// The daemon's process ID, for reading its memory from /proc.
    public let pid: pid_t
    /// The bus IDs its USB/IP server lists, once it serves.
    public private(set) var busids: [String] = []
    private var isRunning = true

    /// How a child process ended.
    enum Termination: Equatable, CustomStringConvertible {
        case exited(status: Int32)
        case killed(signal: Int32)

        /// Decodes a wait status (WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not
        /// import).
        init(waitStatus: Int32) {
            let signal = waitStatus & 0x7F
            self = signal == 0 ? .exited(status: waitStatus >> 8 & 0xFF) : .killed(signal: signal)
        }

        var description: String {
            switch self {
            case .exited(let status): "exited with status \(status)"
            case .killed(let signal): "was killed by signal \(signal)"
            }
        }
    }

    /// An early exit, most likely because another process took the port in the meantime.
    private struct ExitedEarly: Error, CustomStringConvertible {
        var status: Termination
        var description: String { "latchkeyd \(status) before serving USB/IP (its stderr is above)" }
    }

    /// Starts `binary` with its state in `stateDirectory` and `arguments` after the
    /// benchmarks' own, and waits until its USB/IP server lists `keys` keys; picks another
    /// port when the daemon exits early.
    public static func start(
        binary: String,
        stateDirectory: String,
        arguments: [String] = [],
        keys: Int = 1
    ) throws -> DaemonProcess {
        var failure: any Error = BenchFailure("latchkeyd was not started")
        for _ in 0..<3 {
            let daemon = try DaemonProcess(
                binary: binary, stateDirectory: stateDirectory, port: freeLoopbackPort(), arguments: arguments
            )
            do {
                try daemon.waitUntilServing(keys: keys)
                return daemon
            } catch let error as ExitedEarly {
                failure = error
            }
        }
        throw failure
    }

    private init(binary: String, stateDirectory: String, port: UInt16, arguments: [String]) throws {
        pid = try Self.spawnSupervised(
            [
                "setpriv", "--pdeathsig", "KILL", "--",
                binary, "--state-dir", stateDirectory, "--no-uhid", "--usbip", "127.0.0.1:\(port)",
                "--presence", "auto", "--log-level", "warning",
            ] + arguments
        )
        self.port = port
    }

    /// Spawns `arguments` from a thread of its own, which then waits for the child to exit.
    ///
    /// The kernel sends the parent-death signal when the *thread* that spawned the child ends
    /// (prctl(2), PR_SET_PDEATHSIG), and the threads that run Swift tasks come and go, the
    /// main actor's included (on Linux the main thread parks in dispatch_main and a worker
    /// thread drains the main queue). This thread ends only once the child has exited.
    private static func spawnSupervised(_ arguments: [String]) throws -> pid_t {
        let handoff = Handoff()
        let supervisor = Thread {
            let pid: pid_t
            do {
                pid = try spawn(arguments)
            } catch {
                handoff.publish(.failure(error))
                return
            }
            handoff.publish(.success(pid))
            // WNOWAIT: learn of the exit without reaping the child, so its pid stays ours
            // (a zombie) until the benchmark reaps it; signals sent until then reach no one else.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        }
        supervisor.name = "latchkeyd supervisor"
        supervisor.start()
        return try handoff.wait().get()
    }

    private static func spawn(_ arguments: [String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        try errorNumberCall("posix_spawn_file_actions_init") { posix_spawn_file_actions_init(&actions) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        try errorNumberCall("posix_spawn_file_actions_addopen(/dev/null)") {
            posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        }
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        // posix_spawnp returns the error number rather than setting errno.
        let environment = daemonEnvironment()
        defer { for variable in environment { free(variable) } }
        let code = posix_spawnp(&pid, arguments[0], &actions, nil, argv, environment)
        guard code != ENOENT else {
            throw BenchFailure("\(arguments[0]) (util-linux) is needed to tie latchkeyd's life to the benchmark's")
        }
        guard code == 0 else { throw SystemCallError(call: "posix_spawnp(\(arguments[0]))", errno: code) }
        return pid
    }

    /// The benchmark's environment without LD_PRELOAD, whose malloc interposer counts the
    /// benchmark's allocations and would slow the daemon's; a nil-terminated copy to free.
    private static func daemonEnvironment() -> [UnsafeMutablePointer<CChar>?] {
        var copy: [UnsafeMutablePointer<CChar>?] = []
        var entry = environ
        while let variable = entry.pointee {
            if strncmp(variable, "LD_PRELOAD=", 11) != 0 { copy.append(strdup(variable)) }
            entry += 1
        }
        return copy + [nil]
    }

    /// The spawn's outcome, handed from the supervising thread to the benchmark's.
    private final class Handoff: Sendable {
        private let outcome = Mutex<Result<pid_t, any Error>?>(nil)
        private let published = DispatchSemaphore(value: 0)

        func publish(_ value: Result<pid_t, any Error>) {
            outcome.withLock { $0 = value }
            published.signal()
        }

        /// Blocks until `publish`, which comes at once: posix_spawn returns when the child has
        /// called exec or failed to.
        func wait() -> Result<pid_t, any Error> {
            published.wait()
            return outcome.withLock { $0! }
        }
    }

    /// Whatever happened, the daemon does not outlive this object.
    deinit { kill() }

    /// Sends SIGTERM and waits for the daemon to exit, sending SIGKILL after `stopTimeout`.
    /// Throws when it needed SIGKILL or exited with a failure.
    public func stop() throws {
        guard isRunning else { return }
        try systemCall("kill(SIGTERM)") { Glibc.kill(pid, SIGTERM) }
        let deadline = ContinuousClock.now + Self.stopTimeout
        while ContinuousClock.now < deadline {
            if let termination = try reap() {
                guard termination == .exited(status: 0) else {
                    throw BenchFailure("latchkeyd \(termination) on SIGTERM")
                }
                return
            }
            pause(milliseconds: 10)
        }
        kill()
        throw BenchFailure("latchkeyd ignored SIGTERM for \(Self.stopTimeout) and was killed")
    }

    /// SIGKILL, for a benchmark that failed; waits for the daemon to go.
    public func kill() {
        guard isRunning else { return }
        isRunning = false
        do {
            try systemCall("kill(SIGKILL)") { Glibc.kill(pid, SIGKILL) }
            var status: Int32 = 0
            try systemCall("waitpid") { waitpid(pid, &status, 0) }
        } catch {
            // Nothing else to do here: parent-death still kills it when the benchmark exits.
            printError("latchkey benchmarks: stopping latchkeyd (pid \(pid)): \(error)")
        }
    }

    /// Polls the USB/IP server with OP_REQ_DEVLIST until it lists `keys` keys, the first
    /// among them.
    private func waitUntilServing(keys: Int) throws {
        let deadline = ContinuousClock.now + Self.startTimeout
        var lastAttempt: any Error = BenchFailure("nothing tried")
        while ContinuousClock.now < deadline {
            if let termination = try reap() { throw ExitedEarly(status: termination) }
            do {
                busids = try listedKeys(before: deadline)
                if busids.count >= keys, busids.contains(Self.busid) { return }
                lastAttempt = BenchFailure("the server lists \(busids), not \(keys) keys with \(Self.busid), yet")
            } catch {
                lastAttempt = error
            }
            pause(milliseconds: 20)
        }
        kill()
        throw BenchFailure("latchkeyd did not serve USB/IP within \(Self.startTimeout): \(lastAttempt)")
    }

    private func listedKeys(before deadline: ContinuousClock.Instant) throws -> [String] {
        let connection = try TCPConnection(loopbackPort: port, timeoutSeconds: 2)
        try connection.send(USBIPOpReqDevlist().encodedBytes)
        var decoder = USBIPClientDecoder()
        while ContinuousClock.now < deadline {
            decoder.append(try connection.receive())
            if case .opRepDevlist(let reply)? = try decoder.next() {
                return reply.devices.map(\.device.busid).sorted()
            }
        }
        return []
    }

    /// How the daemon ended, reaping it, or nil while it runs.
    private func reap() throws -> Termination? {
        var status: Int32 = 0
        guard try systemCall("waitpid", { waitpid(pid, &status, WNOHANG) }) == pid else { return nil }
        isRunning = false
        return Termination(waitStatus: status)
    }
}

/// A TCP port on 127.0.0.1 that nothing listened on a moment ago: the kernel's pick for a
/// socket bound to port 0. Someone may take it before the daemon binds it; `start` retries.
func freeLoopbackPort() throws -> UInt16 {
    let descriptor = try systemCall("socket") {
        socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    try withUnsafeMutablePointer(to: &address) { pointer in
        try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            try systemCall("bind(127.0.0.1:0)") { bind(descriptor, socketAddress, length) }
            try systemCall("getsockname") { getsockname(descriptor, socketAddress, &length) }
        }
    }
    return UInt16(bigEndian: address.sin_port)
}
