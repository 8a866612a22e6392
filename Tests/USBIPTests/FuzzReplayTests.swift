// Replays the kept fuzz crashers, and a deterministic sample of generated inputs, through the
// same driver the FuzzUSBIP fuzzer runs.

import Foundation
import LatchkeyTestSupport
import Testing

@_spi(Fuzzing) @testable import USBIP

@Suite("USB/IP fuzz replay")
struct FuzzReplayTests {
    @Test("every kept crasher replays through the server connection without breaking an invariant")
    func crashers() throws {
        #expect(try crashersBreakingInvariants(in: .module, of: USBIPFuzzDriver.run) == [])
    }

    /// What half the generated inputs become, to reach deep states: an import of "1-1"
    /// first, then mostly structured commands and reports.
    static func towardDeepStates(_ input: [UInt8]) -> [UInt8] {
        [0x01] + input.map { $0 & 0x03 == 0 ? $0 | 0x01 : $0 }
    }

    @Test("generated inputs run without breaking an invariant")
    func generatedInputs() {
        let failures = generatedInputsBreakingInvariants(
            seed: 0x0005_B1B1, count: 400, below: 1024, biasingHalf: Self.towardDeepStates, of: USBIPFuzzDriver.run
        )
        #expect(failures == [])
    }

    @Test(
        "structured sessions through the driver break no invariant",
        arguments: [
            // import "1-1"; IN URB; input report; 64-byte OUT URB; unlink of the OUT URB.
            [0x01, 0x0D, 0x00, 0x02, 0x55, 0x11, 64, 0x19, 0x00],
            // import "1-1"; IN URB; unlink of it; input report (must stay queued).
            [0x01, 0x0D, 0x00, 0x19, 0x00, 0x02, 0x55],
            // import; GET_DESCRIPTOR(CONFIGURATION) one byte at a time; devlist after import.
            [0x01, 0x95, 0x80, 0x06, 0x00, 0x02, 0x00, 0x00, 0xFF, 0x00, 0x09],
        ] as [[UInt8]]
    )
    func structuredSessions(input: [UInt8]) {
        #expect(USBIPFuzzDriver.run(input).isEmpty)
    }
}
