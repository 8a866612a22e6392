// Replays the kept fuzz crashers, and a deterministic sample of generated inputs, through the
// same driver the FuzzUSBIP fuzzer runs.

import Foundation
import Testing

@_spi(Fuzzing) @testable import USBIP

@Suite("USB/IP fuzz replay")
struct FuzzReplayTests {
    /// Every file in `Crashers/` except hidden ones (such as `.keep`) and notes (`*.md`).
    static func crasherFiles() throws -> [URL] {
        guard let directory = Bundle.module.url(forResource: "Crashers", withExtension: nil) else {
            Issue.record("the Crashers resource directory is missing")
            return []
        }
        return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") && $0.pathExtension != "md" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test("every kept crasher replays through the server connection without breaking an invariant")
    func crashers() throws {
        for file in try Self.crasherFiles() {
            let input = [UInt8](try Data(contentsOf: file))
            let violations = USBIPFuzzDriver.run(input)
            #expect(violations.isEmpty, "\(file.lastPathComponent): \(violations)")
        }
    }

    @Test("generated inputs run without breaking an invariant")
    func generatedInputs() {
        var generator = SplitMix64(seed: 0x0005_B1B1)
        for _ in 0..<400 {
            let count = Int(generator.next() % 1024)
            var input = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            // Bias half the inputs toward deep states: an import of "1-1" first, then mostly
            // structured commands and reports.
            if generator.next() % 2 == 0 {
                input = [0x01] + input.map { $0 & 0x03 == 0 ? $0 | 0x01 : $0 }
            }
            let violations = USBIPFuzzDriver.run(input)
            #expect(violations.isEmpty, "\(input): \(violations)")
        }
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
