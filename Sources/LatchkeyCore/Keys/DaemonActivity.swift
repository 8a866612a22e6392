// How busy the daemon is: a count of the work it serves (each engine job of a key,
// each control request), which its memory release watches to tell when it has gone
// quiet (LatchkeyDaemon/Service/ResidentMemory.swift). The keys' executors count their
// jobs here; the control API its requests.

import Synchronization

/// A count that moves with every request the daemon serves (each engine job
/// of a key, each control API request): how `MemoryReleaseService` tells
/// that the daemon has gone quiet.
public enum DaemonActivity {
    private static let counter = Atomic<Int>(0)

    /// Counts one piece of work.
    public static func note() {
        counter.wrappingAdd(1, ordering: .relaxed)
    }

    /// The count so far.
    public static var count: Int { counter.load(ordering: .relaxed) }
}
