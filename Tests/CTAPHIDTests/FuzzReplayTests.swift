// Replays the kept fuzz crashers, and a deterministic sample of generated inputs, through the
// same driver the FuzzCTAPHID fuzzer runs.

import Foundation
import Testing

@_spi(Fuzzing) @testable import CTAPHID

@Suite("CTAPHID fuzz replay")
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

    @Test("every kept crasher replays without breaking an invariant")
    func crashers() throws {
        for file in try Self.crasherFiles() {
            let input = [UInt8](try Data(contentsOf: file))
            let violations = CTAPHIDFuzzDriver.run(input)
            #expect(violations.isEmpty, "\(file.lastPathComponent): \(violations)")
        }
    }

    @Test("generated inputs run without breaking an invariant")
    func generatedInputs() {
        var generator = SplitMix64(seed: 0x1A7C_4CE7)
        for _ in 0..<300 {
            let count = Int(generator.next() % 2048)
            var input = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            // Start half of them with an INIT on the broadcast channel, so channel 1 exists.
            if generator.next() % 2 == 0 {
                input = [0x08, 0x02, 0xAA] + input
            }
            let violations = CTAPHIDFuzzDriver.run(input)
            #expect(violations.isEmpty, "\(input): \(violations)")
        }
    }
}

/// A small deterministic generator (SplitMix64), so the sampled inputs are the same every run.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
