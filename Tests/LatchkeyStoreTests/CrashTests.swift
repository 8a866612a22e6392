// Durability under kill -9: a child process (StoreCrashProbe) saves
// credentials and takes counter values, printing each only after the store
// returned; the test kills it mid-stream and checks that every printed
// promise holds in the reopened store.

import CTAP
import Foundation
import Glibc
import LatchkeyStore
import Testing

@Suite("SQLite credential store under kill -9")
struct CrashTests {
    /// The counter scopes the probe uses, by the names it prints.
    static let scopes: [String: [UInt8]] = [
        "global": [],
        "fixed": [0x6c, 0x61, 0x74, 0x63, 0x68],
    ]

    @Test(
        "every credential and counter value a killed process confirmed survives, and counters never repeat",
        .timeLimit(.minutes(2))
    )
    func killNine() throws {
        let directory = try TemporaryDirectory()
        let storePath = directory.file("store.db")
        let keyPath = directory.file("master-key")
        var highest: [String: UInt32] = [:]
        var confirmed: [[UInt8]] = []
        // Kill after different amounts of work so kills land at different points.
        for linesBeforeKill in [25, 160, 7, 333, 90] {
            let probe = try Probe(storePath: storePath, keyPath: keyPath)
            let deadline = ContinuousClock.now + .seconds(30)
            var lines = 0
            var roundHighest: [String: UInt32] = [:]
            func record(_ line: String) throws {
                let fields = line.split(separator: " ")
                switch fields.first {
                case "ready":
                    break
                case "credential":
                    confirmed.append(try #require(bytes(hex: fields[1])))
                case "counter":
                    let name = String(fields[1])
                    let value = try #require(UInt32(fields[2]))
                    // Within one run a scope strictly increases, and starts
                    // above everything any earlier run (or the test) got.
                    #expect(value > max(roundHighest[name] ?? 0, highest[name] ?? 0))
                    roundHighest[name] = value
                default:
                    Issue.record("unexpected probe output: \(line)")
                }
            }
            while lines < linesBeforeKill {
                guard let line = try probe.nextLine(before: deadline) else {
                    Issue.record("the probe ended early: \(probe.errorOutput())")
                    return
                }
                try record(line)
                lines += 1
            }
            // While it runs, the probe holds the store.
            #expect(throws: StoreError(.locked, "")) {
                try SQLiteCredentialStore(path: storePath, masterKey: [UInt8](repeating: 0, count: 32))
            }
            probe.kill9()
            // Lines written before the kill are promises too.
            while let line = try probe.nextLine(before: ContinuousClock.now + .seconds(10)) {
                try record(line)
            }
            #expect(probe.process.terminationReason == .uncaughtSignal)
            for (name, value) in roundHighest { highest[name] = value }

            let key = try MasterKeyFile.loadOrCreate(at: keyPath)
            let store = try SQLiteCredentialStore(path: storePath, masterKey: key)
            for id in confirmed {
                #expect(try store.credential(id: id) != nil, "a confirmed credential was lost")
            }
            for (name, scope) in Self.scopes {
                let next = try store.nextSignatureCounter(scope: scope)
                #expect(next > highest[name] ?? 0, "counter \(name) went back after kill -9")
                highest[name] = next
            }
        }
        #expect(confirmed.count > 0)
    }
}
