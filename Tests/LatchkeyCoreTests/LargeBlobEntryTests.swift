// Large-blob array entries as the control API seeds and reads them.

import CBOR
import Testing

@testable import LatchkeyCore

@Suite("large-blob entries")
struct LargeBlobEntryTests {
    let key = [UInt8](repeating: 7, count: 32)
    let other = [UInt8](repeating: 9, count: 32)

    @Test("an entry opens with its credential's key only, and gives back the blob")
    func roundTrip() throws {
        let blob = Array("a blob that compresses, a blob that compresses".utf8)
        let entry = try LargeBlobEntry.seal(blob, largeBlobKey: key, nonce: [UInt8](repeating: 1, count: 12))
        let map = try entry.mapValue()
        #expect(try map[int: 3]?.intValue() == blob.count)
        #expect(try map[int: 2]?.bytesValue().count == 12)
        let foreign = try LargeBlobEntry.seal([1, 2, 3], largeBlobKey: other, nonce: [UInt8](repeating: 2, count: 12))
        #expect(LargeBlobEntry.open([foreign, entry], largeBlobKey: key) == blob)
        #expect(LargeBlobEntry.open([foreign], largeBlobKey: key) == nil)
    }

    @Test("the serialized array carries its truncated hash, which is checked on reading")
    func serialization() throws {
        let serialized = LargeBlobEntry.serialize([])
        #expect(serialized.count == 17, "the empty array: 0x80 and 16 bytes of hash")
        #expect(try LargeBlobEntry.entries(ofSerialized: serialized).isEmpty)
        var corrupt = serialized
        corrupt[16] ^= 1
        #expect(throws: LargeBlobEntry.Failure.self) { try LargeBlobEntry.entries(ofSerialized: corrupt) }
    }

    @Test("raw DEFLATE round-trips, and a wrong original size is refused")
    func deflate() throws {
        let data = [UInt8](repeating: 0x41, count: 5000)
        let compressed = try LargeBlobEntry.deflate(data)
        #expect(compressed.count < data.count)
        #expect(try LargeBlobEntry.inflate(compressed, expected: data.count) == data)
        #expect(throws: LargeBlobEntry.Failure.self) { try LargeBlobEntry.inflate(compressed, expected: 4999) }
        #expect(throws: LargeBlobEntry.Failure.self) { try LargeBlobEntry.inflate(compressed, expected: 5001) }
    }
}
