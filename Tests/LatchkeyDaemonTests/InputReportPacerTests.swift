// The uhid writer's pacing: a burst longer than hidraw's queue is spread out, as a
// device polled every millisecond would send it. Only a lower bound on time is checked
// (a wait is never shorter than asked; a busy machine only makes it longer).

import Synchronization
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

@Suite("uhid input report pacing")
struct InputReportPacerTests {
    @Test("a burst of 32 + 20 reports takes at least 20 ms")
    func longBurst() {
        let pacer = InputReportPacer()
        let clock = ContinuousClock()
        let paced = clock.measure {
            for _ in 0..<(InputReportPacer.unpacedReports + 20) { pacer.beforeWrite() }
        }
        #expect(paced >= .milliseconds(20))
    }

    @Test("enqueued writes run in order, and drain() waits for them")
    func order() {
        let pacer = InputReportPacer()
        let written = Mutex<[Int]>([])
        for index in 0..<(InputReportPacer.unpacedReports + 8) {
            pacer.enqueue { written.withLock { $0.append(index) } }
        }
        pacer.drain()
        #expect(written.withLock { $0 } == Array(0..<(InputReportPacer.unpacedReports + 8)))
    }
}
