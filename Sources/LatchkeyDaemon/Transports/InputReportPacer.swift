// Pacing of the input reports written to /dev/uhid.
//
// The kernel queues at most 64 input reports for each reader of a hidraw node
// (HIDRAW_BUFFER_SIZE) and drops the ones that arrive while the queue is full. A
// hardware key cannot overrun it: the host polls the device about once a millisecond.
// latchkeyd writes a whole message at once, and a message longer than 64 reports (an
// ML-DSA-87 registration is 126) then loses its tail whenever the reader is slow: in
// the rig, Chromium under emulation waited for the missing continuation packets until
// its 20-second timeout. So after the first reports of a burst the writer waits a
// millisecond before each further one, as a device polled every millisecond would; a
// message of up to `unpacedReports` reports goes out at once as before. The writes, and
// so the waits, run in order on the pacer's own serial queue: a wait never holds a
// thread of Swift's cooperative pool, where every key's engine and session run.

import Dispatch
import Foundation
import Synchronization

/// Writes input reports in order on a queue of its own, pacing long bursts.
final class InputReportPacer: Sendable {
    /// Reports written back to back before pacing starts: well under the 64 hidraw queues.
    static let unpacedReports = 32
    /// The wait before each further report of a burst: a USB full-speed interrupt interval.
    static let interval: Duration = .milliseconds(1)

    private struct State {
        var burst = 0
        var last: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    private let queue: DispatchQueue

    /// A pacer whose queue is labelled `label` (the device's name, for a debugger).
    init(label: String = "latchkey.uhid.input") {
        queue = DispatchQueue(label: label)
    }

    /// Runs `write` (one report's) after the writes enqueued before it, waiting
    /// first when it continues a long burst. Returns at once.
    func enqueue(_ write: @escaping @Sendable () -> Void) {
        queue.async {
            self.beforeWrite()
            write()
        }
    }

    /// Returns once every write enqueued so far has run.
    func drain() {
        queue.sync {}
    }

    /// Waits, when the report about to be written continues a long burst. Reports more
    /// than two intervals apart start a new burst.
    func beforeWrite() {
        let wait = state.withLock { state -> Bool in
            let now = ContinuousClock.now
            if let last = state.last, now - last < Self.interval * 2 {
                state.burst += 1
            } else {
                state.burst = 1
            }
            state.last = now
            return state.burst > Self.unpacedReports
        }
        if wait {
            Thread.sleep(forTimeInterval: 0.001)
            state.withLock { $0.last = ContinuousClock.now }
        }
    }
}
