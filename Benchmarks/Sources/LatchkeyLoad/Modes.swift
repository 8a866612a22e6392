// The three runs of latchkey-load: one client beside PINGs, parallel load, and scale.

import CTAPHID
import Foundation
import Glibc
import Histogram
import LatchkeyBenchSupport
import Synchronization

/// latchkeyd with keys named k1…kN (ES256, self attestation, presence auto) and `extra`
/// lines in each key's table; its config file and state live in `directory`.
func startDaemon(_ binary: String, keys: Int, extra: String = "", in directory: ScratchDirectory) throws -> DaemonProcess {
    let config = (1...keys).map { "[[keys]]\nname = \"k\($0)\"\nattestation = \"self\"\n\(extra)\n" }.joined()
    let path = directory.path("latchkeyd.toml")
    try config.write(toFile: path, atomically: true, encoding: .utf8)
    return try DaemonProcess.start(
        binary: binary, stateDirectory: directory.path("state"), arguments: ["--config", path], keys: keys
    )
}

/// A host attached to `busid` with `channels` channels, and a client on each.
func attach(_ daemon: DaemonProcess, busid: String, rpIds: [String]) throws -> (USBIPHIDHost, [Client]) {
    let host = try USBIPHIDHost(port: daemon.port, busid: busid)
    try host.setConfiguration()
    let clients = try rpIds.map { Client(channel: try host.openChannel(), rpId: $0) }
    return (host, clients)
}

/// A host on each of the daemon's first keys, with a channel and client for each RP
/// `rpIds` names for that key; the hosts (kept alive with the clients) and every client.
func attach(_ daemon: DaemonProcess, rpIds: [[String]]) throws -> ([USBIPHIDHost], [Client]) {
    var hosts: [USBIPHIDHost] = []
    var clients: [Client] = []
    for (busid, names) in zip(daemon.busids, rpIds) {
        let (host, made) = try attach(daemon, busid: busid, rpIds: names)
        hosts.append(host)
        clients += made
    }
    return (hosts, clients)
}

/// The daemon's resident set, in MB, from /proc.
func residentMegabytes(_ daemon: DaemonProcess) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kB = Double(line.split(separator: " ").dropFirst().first ?? "")
    else { return .nan }
    return kB / 1000
}

/// The CPU time this process has had, in nanoseconds.
func ownCPUNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// The CPU time the daemon's threads have had, in nanoseconds (the first field of each
/// thread's /proc schedstat; a thread that has exited no longer counts).
func daemonCPUNanoseconds(_ daemon: DaemonProcess) -> UInt64 {
    let tasks = "/proc/\(daemon.pid)/task"
    let threads = (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? []
    return threads.reduce(0) { sum, thread in
        let text = (try? String(contentsOfFile: "\(tasks)/\(thread)/schedstat", encoding: .utf8)) ?? ""
        return sum + (text.split(separator: " ").first.flatMap { UInt64($0) } ?? 0)
    }
}

func median(_ values: [UInt64]) -> Double {
    let sorted = values.sorted()
    return Double(sorted[sorted.count / 2])
}

func microseconds(_ nanoseconds: Double) -> String { String(format: "%.0f", nanoseconds / 1000) }

/// A daemon with one key, one client on it, and the client's first (non-discoverable)
/// credential: where `single` and `quiet` start.
struct OneClient {
    let directory: ScratchDirectory
    let daemon: DaemonProcess
    let host: USBIPHIDHost
    let client: Client

    init(_ binary: String, name: String) throws {
        directory = try ScratchDirectory("load-\(name)")
        daemon = try startDaemon(binary, keys: 1, in: directory)
        do {
            let (host, clients) = try attach(daemon, busid: DaemonProcess.busid, rpIds: ["\(name).example"])
            (self.host, client) = (host, clients[0])
            var untimed = Timer()
            try client.makeCredential(user: [1], residentKey: false, timer: &untimed)
        } catch {
            try? daemon.stop()
            throw error
        }
    }
}

// MARK: single

/// Each operation beside a PING of the same report counts, alternated so the machine's
/// noise falls on both alike; medians and their difference.
func single(daemon binary: String, iterations: Int) throws {
    let one = try OneClient(binary, name: "single")
    defer { try? one.daemon.stop() }
    let (daemon, client) = (one.daemon, one.client)
    var timer = Timer()
    for user: UInt8 in [2, 3] { try client.makeCredential(user: [user], residentKey: true, timer: &timer) }
    let allowList = [client.credentials[0]]
    var user: UInt8 = 10
    let runs: [(Operation, () throws -> Void)] = [
        (.getAssertion, { try client.getAssertion(allowList: allowList, timer: &timer) }),
        (.getAssertionDiscoverable, { try client.getAssertion(allowList: [], timer: &timer) }),
        (.getNextAssertion, {
            var untimed = Timer()
            try client.getAssertion(allowList: [], timer: &untimed)
            try client.getNextAssertion(clientDataHash: client.lastClientDataHash, timer: &timer)
        }),
        (.makeCredential, { try client.makeCredential(user: [1], residentKey: false, timer: &timer) }),
        (.makeCredentialDiscoverable, {
            // Ten users in turn: each registration replaces that user's credential.
            user = 10 + (user - 9) % 10
            try client.makeCredential(user: [user], residentKey: true, timer: &timer)
        }),
    ]
    print("latchkey-load single: \(iterations) of each, one client, USB/IP on loopback; in µs")
    print("                                     round trip (median)        daemon CPU (mean)")
    print("operation                   reports  operation   PING  difference  operation   PING")
    for (operation, run) in runs {
        let count = operation == .makeCredential || operation == .makeCredentialDiscoverable
            ? max(20, iterations / 5) : iterations
        try run()
        let reports = client.lastReports
        let perWay = (reports.output + reports.input + 1) / 2
        let ping = Array(repeating: UInt8(0x50), count: CTAPHIDConstants.initPayloadSize
            + (perWay - 1) * CTAPHIDConstants.continuationPayloadSize)
        var times: [UInt64] = []
        var pings: [UInt64] = []
        for index in 0..<(count + 20) {
            try run()
            var pingTimer = Timer()
            pingTimer.start()
            try client.channel.ping(ping)
            pingTimer.stop()
            guard index >= 20 else { continue }
            times.append(timer.nanoseconds)
            pings.append(pingTimer.nanoseconds)
        }
        let (op, pg) = (median(times), median(pings))
        // The daemon's CPU time over `count` more of each, not alternated.
        var cpu = daemonCPUNanoseconds(daemon)
        for _ in 0..<count { try run() }
        let operationCPU = Double(daemonCPUNanoseconds(daemon) - cpu) / Double(count)
        cpu = daemonCPUNanoseconds(daemon)
        for _ in 0..<count { try client.channel.ping(ping) }
        let pingCPU = Double(daemonCPUNanoseconds(daemon) - cpu) / Double(count)
        print(
            operation.rawValue.padding(toLength: 28, withPad: " ", startingAt: 0)
                + "\(reports.output)+\(reports.input)".padding(toLength: 9, withPad: " ", startingAt: 0)
                + microseconds(op).leftPadded(9) + microseconds(pg).leftPadded(7)
                + microseconds(op - pg).leftPadded(12)
                + microseconds(operationCPU).leftPadded(11) + microseconds(pingCPU).leftPadded(7)
        )
    }
    print("(PING: \(CTAPHIDConstants.reportSize)-byte reports, as many each way as the operation's two counts share, rounded up)")
}

// MARK: quiet

/// What giving memory back costs the next request: a getAssertion's round trip while the
/// daemon is busy (back to back), beside the first one after it has been quiet long enough
/// to give its unused pages back (Service/ResidentMemory.swift), and the RSS at both.
func quiet(daemon binary: String, rounds: Int) throws {
    let one = try OneClient(binary, name: "quiet")
    defer { try? one.daemon.stop() }
    let (daemon, client) = (one.daemon, one.client)
    var timer = Timer()
    let allowList = [client.credentials[0]]
    var busy: [UInt64] = []
    var first: [UInt64] = []
    var busyRSS: [Double] = []
    var quietRSS: [Double] = []
    for _ in 0..<rounds {
        for _ in 0..<200 {
            try client.getAssertion(allowList: allowList, timer: &timer)
            busy.append(timer.nanoseconds)
        }
        busyRSS.append(residentMegabytes(daemon))
        pause(seconds: 8)
        quietRSS.append(residentMegabytes(daemon))
        try client.getAssertion(allowList: allowList, timer: &timer)
        first.append(timer.nanoseconds)
    }
    print("latchkey-load quiet: \(rounds) rounds of 200 getAssertions back to back, then 8 s without a request")
    print("getAssertion (allowList) round trip, median: \(microseconds(median(busy))) µs busy, "
        + "\(microseconds(median(first))) µs first after the quiet (max \(microseconds(Double(first.max() ?? 0))) µs)")
    let mean = { (values: [Double]) in values.reduce(0, +) / Double(values.count) }
    print(String(format: "RSS, mean of the rounds: %.1f MB busy, %.1f MB quiet", mean(busyRSS), mean(quietRSS)))
}

// MARK: load

/// 4 clients on keys of their own and 2 channels sharing a fifth key, each running the mix
/// below until `operations` are done between them.
func load(daemon binary: String, operations: Int) throws {
    let directory = try ScratchDirectory("load")
    let daemon = try startDaemon(binary, keys: 5, in: directory)
    defer { try? daemon.stop() }
    let (hosts, clients) = try attach(
        daemon, rpIds: (1...4).map { ["load\($0).example"] } + [["load5.example", "load6.example"]]
    )
    var untimed = Timer()
    for client in clients {
        try client.makeCredential(user: [0], residentKey: false, timer: &untimed)
        for user: UInt8 in [1, 2] { try client.makeCredential(user: [user], residentKey: true, timer: &untimed) }
    }
    // latchkeyd gives back unused pages after 3 to 6 s without a request
    // (Service/ResidentMemory.swift): the figures before and 10 s after are those of a
    // quiet daemon, the one right after those of a busy one.
    pause(seconds: 8)
    let before = residentMegabytes(daemon)
    // The mix, in turn: 1 makeCredential, 1 discoverable makeCredential (two users in turn,
    // each replacing its credential), 4 getAssertions with an allowList, 1 discoverable
    // getAssertion finding two credentials and its getNextAssertion.
    let mix: [Operation] = [
        .getAssertion, .makeCredential, .getAssertion, .makeCredentialDiscoverable,
        .getAssertion, .getAssertionDiscoverable, .getNextAssertion, .getAssertion,
    ]
    let results = Mutex<[Operation: Histogram<UInt64>]>([:])
    // Every operation again by where its client is: alone on its key, or sharing one.
    let byKey = Mutex<[Bool: Histogram<UInt64>]>([:])
    let failures = Mutex<[String]>([])
    let group = DispatchGroup()
    let daemonCPUBefore = daemonCPUNanoseconds(daemon)
    let ownCPUBefore = ownCPUNanoseconds()
    let started = DispatchTime.now().uptimeNanoseconds
    for (index, client) in clients.enumerated() {
        let share = operations / clients.count + (index < operations % clients.count ? 1 : 0)
        group.enter()
        let thread = Thread {
            defer { group.leave() }
            var histograms: [Operation: Histogram<UInt64>] = [:]
            var mine = Histogram<UInt64>(highestTrackableValue: 60_000_000)
            let shared = index >= 4
            var timer = Timer()
            do {
                for step in 0..<share {
                    let operation = mix[step % mix.count]
                    switch operation {
                    case .getAssertion:
                        try client.getAssertion(allowList: [client.credentials.last!], timer: &timer)
                    case .makeCredential:
                        try client.makeCredential(user: [0], residentKey: false, timer: &timer)
                    case .makeCredentialDiscoverable:
                        try client.makeCredential(user: [UInt8(1 + step / mix.count % 2)], residentKey: true, timer: &timer)
                    case .getAssertionDiscoverable:
                        let found = try client.getAssertion(allowList: [], timer: &timer)
                        guard found == 2 else { throw BenchFailure("a discoverable getAssertion found \(found), not 2") }
                    case .getNextAssertion:
                        try client.getNextAssertion(clientDataHash: client.lastClientDataHash, timer: &timer)
                    }
                    _ = histograms[operation, default: Histogram(highestTrackableValue: 60_000_000)]
                        .record(timer.nanoseconds / 1000)
                    _ = mine.record(timer.nanoseconds / 1000)
                }
            } catch {
                failures.withLock { $0.append("\(client.rpId): \(error)") }
            }
            byKey.withLock { $0[shared, default: Histogram(highestTrackableValue: 60_000_000)].add(mine) }
            results.withLock { merged in
                for (operation, histogram) in histograms {
                    merged[operation, default: Histogram(highestTrackableValue: 60_000_000)].add(histogram)
                }
            }
        }
        thread.name = "load client \(index + 1)"
        thread.start()
    }
    group.wait()
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
    let daemonCPU = Double(daemonCPUNanoseconds(daemon) - daemonCPUBefore) / 1e9
    let ownCPU = Double(ownCPUNanoseconds() - ownCPUBefore) / 1e9
    let after = residentMegabytes(daemon)
    let problems = failures.withLock { $0 }
    guard problems.isEmpty else { throw BenchFailure(problems.joined(separator: "; ")) }
    pause(seconds: 10)
    let settled = residentMegabytes(daemon)
    let histograms = results.withLock { $0 }
    var all = Histogram<UInt64>(highestTrackableValue: 60_000_000)
    for histogram in histograms.values { all.add(histogram) }
    let busy = clients.map(\.channel.busyAnswers).reduce(0, +)
    print("latchkey-load load: \(all.totalCount) operations, 6 clients (4 keys with one, 1 key with two channels), every signature verified")
    print(String(format: "%.1f s, %.0f operations/s; CHANNEL_BUSY answers retried: %d", seconds, Double(all.totalCount) / seconds, busy))
    print(String(
        format: "CPU: latchkeyd %.1f s (%.0f µs an operation), this load generator %.1f s; %.0f%% of the machine's %d cores",
        daemonCPU, daemonCPU / Double(all.totalCount) * 1e6, ownCPU,
        (daemonCPU + ownCPU) / seconds / Double(ProcessInfo.processInfo.activeProcessorCount) * 100,
        ProcessInfo.processInfo.activeProcessorCount))
    print("operation                    count    p50    p90    p99    max   (ms)")
    for operation in Operation.allCases {
        guard let histogram = histograms[operation] else { continue }
        print(row(operation.rawValue, histogram))
    }
    print(row("all", all))
    let where_ = byKey.withLock { $0 }
    if let alone = where_[false] { print(row("all, clients alone on a key", alone)) }
    if let sharing = where_[true] { print(row("all, the two sharing a key", sharing)) }
    print(String(format: "RSS: %.1f MB before, %.1f MB right after, %.1f MB 10 s later", before, after, settled))
    withExtendedLifetime(hosts) {}
}

func row(_ name: String, _ histogram: Histogram<UInt64>) -> String {
    let cells = [50.0, 90, 99].map { histogram.valueAtPercentile($0) } + [histogram.max]
    return name.padding(toLength: 28, withPad: " ", startingAt: 0) + "\(histogram.totalCount)".leftPadded(6)
        + cells.map { String(format: "%.2f", Double($0) / 1000).leftPadded(7) }.joined()
}

// MARK: isolation

/// Whether one key's disk writes hold another key's requests: two clients register
/// discoverable credentials (a durable commit each) on keys of their own, as fast as they
/// can, while a third makes `operations` getAssertions on a key of its own; and, first, the
/// third alone.
func isolation(daemon binary: String, operations: Int) throws {
    let directory = try ScratchDirectory("load-isolation")
    let daemon = try startDaemon(binary, keys: 3, in: directory)
    defer { try? daemon.stop() }
    let (hosts, clients) = try attach(daemon, rpIds: (1...3).map { ["isolation\($0).example"] })
    var untimed = Timer()
    let reader = clients[2]
    try reader.makeCredential(user: [0], residentKey: false, timer: &untimed)
    func assertions() throws -> Histogram<UInt64> {
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var timer = Timer()
        for _ in 0..<operations {
            try reader.getAssertion(allowList: [reader.credentials[0]], timer: &timer)
            _ = histogram.record(timer.nanoseconds / 1000)
        }
        return histogram
    }
    let alone = try assertions()
    let stop = Atomic<Bool>(false)
    let writes = Mutex<(count: Int, failure: String?)>((0, nil))
    let group = DispatchGroup()
    for writer in clients.prefix(2) {
        group.enter()
        Thread {
            defer { group.leave() }
            var timer = Timer()
            var user: UInt32 = 0
            do {
                while !stop.load(ordering: .relaxed) {
                    user = user % 500 + 1
                    try writer.makeCredential(
                        user: withUnsafeBytes(of: user.bigEndian, Array.init), residentKey: true, timer: &timer
                    )
                    writes.withLock { $0.count += 1 }
                }
            } catch {
                writes.withLock { $0.failure = "\(writer.rpId): \(error)" }
            }
        }.start()
    }
    pause(seconds: 0.2)
    let beside = try assertions()
    stop.store(true, ordering: .relaxed)
    group.wait()
    let (count, failure) = writes.withLock { $0 }
    if let failure { throw BenchFailure(failure) }
    print("latchkey-load isolation: getAssertion on one key, alone and beside two keys registering discoverable credentials")
    print("                             count    p50    p90    p99    max   (ms)")
    print(row("alone", alone))
    print(row("beside \(count) registrations", beside))
    withExtendedLifetime(hosts) {}
}

// MARK: scale

/// getAssertion and discoverable makeCredential on a key holding 10 discoverable
/// credentials and on one holding `credentials` (spread over 50 RPs), in the same daemon,
/// the two keys' requests alternated so that the machine's noise falls on both alike.
func scale(daemon binary: String, credentials: Int) throws {
    let directory = try ScratchDirectory("load-scale")
    let daemon = try startDaemon(
        binary, keys: 2, extra: "max-discoverable-credentials = \(max(1000, credentials + 200))", in: directory
    )
    defer { try? daemon.stop() }
    /// One key's clients: an allowList target, an RP with one discoverable credential, an RP
    /// registered to during the measurement, and the RPs it is filled with.
    struct Side {
        var host: USBIPHIDHost
        var target: Client
        var discoverable: Client
        var maker: Client
        var fillers: [Client]
    }
    func side(_ busid: String) throws -> Side {
        let (host, clients) = try attach(
            daemon, busid: busid,
            rpIds: ["target.example", "disc.example", "make.example"] + (0..<5).map { "fill\($0).example" }
        )
        var timer = Timer()
        try clients[0].makeCredential(user: [1], residentKey: false, timer: &timer)
        try clients[1].makeCredential(user: [1], residentKey: true, timer: &timer)
        return Side(host: host, target: clients[0], discoverable: clients[1], maker: clients[2], fillers: Array(clients[3...]))
    }
    let (small, big) = (try side(daemon.busids[0]), try side(daemon.busids[1]))
    func fill(_ side: Side, _ count: Int) throws {
        let start = DispatchTime.now().uptimeNanoseconds
        var timer = Timer()
        for index in 0..<count {
            try side.fillers[index % side.fillers.count].makeCredential(
                user: withUnsafeBytes(of: UInt32(index).bigEndian, Array.init), residentKey: true, timer: &timer
            )
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        print(String(format: "stored %d discoverable credentials on a key in %.1f s", count, seconds))
    }
    try fill(small, 8)
    try fill(big, credentials - 2)
    var timer = Timer()
    var user: UInt32 = 0
    /// Medians of `count` runs of `body` on each side, alternated.
    func alternated(_ count: Int, _ body: (Side) throws -> Void) throws -> (Double, Double) {
        var times: ([UInt64], [UInt64]) = ([], [])
        for _ in 0..<count {
            try body(small)
            times.0.append(timer.nanoseconds)
            try body(big)
            times.1.append(timer.nanoseconds)
        }
        return (median(times.0), median(times.1))
    }
    let rows: [(String, (Double, Double))] = [
        ("getAssertion, allowList of one", try alternated(500) {
            try $0.target.getAssertion(allowList: [$0.target.credentials[0]], timer: &timer)
        }),
        ("getAssertion, discoverable (RP with one)", try alternated(500) {
            try $0.discoverable.getAssertion(allowList: [], timer: &timer)
        }),
        ("makeCredential, discoverable (new user)", try alternated(100) {
            user += 1
            try $0.maker.makeCredential(user: withUnsafeBytes(of: user.bigEndian, Array.init), residentKey: true, timer: &timer)
        }),
    ]
    print("latchkey-load scale: medians in ms, one client per key, USB/IP on loopback, the two keys alternated")
    print("operation                                   10 stored  \(credentials) stored  ratio")
    for (name, (few, many)) in rows {
        print(
            name.padding(toLength: 44, withPad: " ", startingAt: 0) + String(format: "%.3f", few / 1e6).leftPadded(9)
                + String(format: "%.3f", many / 1e6).leftPadded(13) + String(format: "%.2f", many / few).leftPadded(7)
        )
    }
    print(String(format: "RSS with %d discoverable credentials on the second key: %.1f MB", credentials + 100, residentMegabytes(daemon)))
    withExtendedLifetime((small.host, big.host)) {}
}

func pause(seconds: Double) { usleep(useconds_t(seconds * 1e6)) }

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
