// Replays every input the CBOR fuzzer ever crashed on (Fuzz/, FuzzCBOR): each
// must now decode or fail with an error, never trap.

import Foundation
import Testing

@testable import CBOR

@Suite("fuzz crashers")
struct CBORCrasherReplayTests {
    @Test("decodes every kept fuzz crasher without trapping")
    func replay() throws {
        let directory = try #require(Bundle.module.url(forResource: "Crashers", withExtension: nil))
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        for file in files where !file.lastPathComponent.hasPrefix(".") {
            let bytes = [UInt8](try Data(contentsOf: file))
            // The fuzzer's invariants: whatever decodes is canonical and round-trips.
            if let value = try? CBORDecoder().decode(bytes) {
                #expect(value.encoded() == bytes, "\(file.lastPathComponent)")
                #expect(try CBORDecoder().decode(value.encoded()) == value, "\(file.lastPathComponent)")
            }
        }
    }
}
