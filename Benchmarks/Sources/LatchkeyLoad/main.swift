// latchkey-load: latchkeyd under the load of parallel tests, as a CI fleet puts it on a key
// server, measured from outside through its USB/IP server on loopback with the benchmarks'
// own host (LatchkeyBenchSupport). Every response is checked and every signature verified
// (ES256, self attestation, so a registration is verified with the key it returns).
//
//   latchkey-load single [ITERATIONS]  each operation beside a CTAPHID_PING that moves as many
//                                      reports each way, one client, medians side by side
//   latchkey-load load [OPERATIONS]    4 clients on keys of their own and 2 channels sharing a
//                                      fifth key, a mixed workload; p50/p90/p99/max per
//                                      operation and overall, RSS before and after
//   latchkey-load isolation [OPERATIONS]
//                                      getAssertions on one key, alone and while two other
//                                      keys register discoverable credentials (disk writes)
//   latchkey-load quiet [ROUNDS]       a getAssertion's round trip while busy and first after
//                                      8 s quiet (the daemon gives unused pages back), RSS at both
//   latchkey-load scale [CREDENTIALS]  getAssertion (allowList and discoverable) and
//                                      discoverable makeCredential with 10 and with
//                                      CREDENTIALS discoverable credentials stored
//
// $LATCHKEYD names the release latchkeyd (scripts/load.sh builds it). Only ratios within one
// run mean anything on a shared machine.

import Crypto
import Foundation
import Glibc
import Histogram
import LatchkeyBenchSupport

let arguments = Array(CommandLine.arguments.dropFirst())
let usage = "usage: latchkey-load single [ITERATIONS] | load [OPERATIONS] | isolation [OPERATIONS] | quiet [ROUNDS] | scale [CREDENTIALS]"
guard let mode = arguments.first, arguments.count <= 2,
    let count = arguments.count == 2 ? Int(arguments[1]) : [
        "single": 1000, "load": 10_005, "isolation": 2000, "quiet": 5, "scale": 10_000,
    ][mode], count > 0
else {
    printError(usage)
    exit(64)  // EX_USAGE
}
guard let daemon = USBIPSession.daemonPath else {
    printError("latchkey-load: set LATCHKEYD to a latchkeyd binary (scripts/load.sh does)")
    exit(64)
}

do {
    switch mode {
    case "single": try single(daemon: daemon, iterations: count)
    case "load": try load(daemon: daemon, operations: count)
    case "isolation": try isolation(daemon: daemon, operations: count)
    case "quiet": try quiet(daemon: daemon, rounds: count)
    case "scale": try scale(daemon: daemon, credentials: count)
    default:
        printError(usage)
        exit(64)
    }
} catch {
    printError("latchkey-load: \(error)")
    exit(1)
}
