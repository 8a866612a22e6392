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
        #expect(try crashersBreakingInvariants(in: .module, of: CTAPHIDFuzzDriver.run) == [])
    }

    @Test("generated inputs run without breaking an invariant")
    func generatedInputs() {
        // Half of them start with an INIT on the broadcast channel, so channel 1 exists.
        let failures = generatedInputsBreakingInvariants(
            seed: 0x1A7C_4CE7, count: 300, below: 2048, biasingHalf: { [0x08, 0x02, 0xAA] + $0 },
            of: CTAPHIDFuzzDriver.run
        )
        #expect(failures == [])
    }
}
