// libFuzzer entry point for a control API request body: the first byte picks the document type, the rest is the JSON body.
// JSONFuzzDriver.controlRequest (Sources/LatchkeyJSONFuzzing/JSONFuzzDriver.swift) runs the parser and checks
// its invariants; a broken one traps, and so does a trap in the parser itself.

import LatchkeyJSONFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> Int32 {
    JSONFuzzDriver.fuzz(start, count, JSONFuzzDriver.controlRequest)
}
