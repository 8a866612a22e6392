// libFuzzer target for the strict CBOR decoder. Invariants: decoding never
// traps, and whatever it accepts is canonical, so re-encoding gives back the
// input byte for byte and decodes to the same value.

import CBOR

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCBOR(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let value = try? CBORDecoder().decode(bytes) else { return 0 }
    let encoded = value.encoded()
    precondition(encoded == bytes, "accepted input that is not canonical")
    precondition((try? CBORDecoder().decode(encoded)) == value, "re-encoded value decodes differently")
    return 0
}
