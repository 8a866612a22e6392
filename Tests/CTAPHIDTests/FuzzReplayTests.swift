// Replays the kept fuzz crashers, and a deterministic sample of generated inputs, through the
// same driver the FuzzCTAPHID fuzzer runs.

import Foundation
import LatchkeyTestSupport
import Testing

@_spi(Fuzzing) @testable import CTAPHID

@Suite("CTAPHID fuzz replay")
struct FuzzReplayTests {
    @Test("every kept crasher replays without breaking an invariant")
    func crashers() throws {
        for crasher in try keptCrashers(in: .module) {
            let violations = CTAPHIDFuzzDriver.run(crasher.bytes)
            #expect(violations.isEmpty, "\(crasher.name): \(violations)")
        }
    }

    @Test("generated inputs run without breaking an invariant")
    func generatedInputs() {
        var generator = SplitMix64(seed: 0x1A7C_4CE7)
        for _ in 0..<300 {
            var input = generator.bytes(below: 2048)
            // Start half of them with an INIT on the broadcast channel, so channel 1 exists.
            if generator.next() % 2 == 0 {
                input = [0x08, 0x02, 0xAA] + input
            }
            let violations = CTAPHIDFuzzDriver.run(input)
            #expect(violations.isEmpty, "\(input): \(violations)")
        }
    }
}
