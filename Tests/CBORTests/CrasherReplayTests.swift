// Replays every input the CBOR fuzzer ever crashed on (Fuzz/, FuzzCBOR): each
// must now decode or fail with an error, never trap.

import Foundation
import LatchkeyTestSupport
import Testing

@testable import CBOR

@Suite("fuzz crashers")
struct CBORCrasherReplayTests {
    @Test("decodes every kept fuzz crasher without trapping")
    func replay() throws {
        for crasher in try keptCrashers(in: .module) {
            // The fuzzer's invariants: whatever decodes is canonical and round-trips.
            if let value = try? CBORDecoder().decode(crasher.bytes) {
                #expect(value.encoded() == crasher.bytes, "\(crasher.name)")
                #expect(try CBORDecoder().decode(value.encoded()) == value, "\(crasher.name)")
            }
        }
    }
}
