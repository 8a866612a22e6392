// libFuzzer entry point for an import's document (JSON), opened as an encrypted export envelope when it is one.
// JSONFuzzDriver.envelope (Sources/LatchkeyJSONFuzzing/JSONFuzzDriver.swift) runs the parser and checks
// its invariants; a broken one traps, and so does a trap in the parser itself.

import LatchkeyJSONFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> Int32 {
    JSONFuzzDriver.fuzz(start, count, JSONFuzzDriver.envelope)
}
