// libFuzzer entry point for a CXF document (JSON) as an import reads a plaintext one.
// JSONFuzzDriver.cxf (Sources/LatchkeyDaemon/Fuzzing/JSONFuzzDriver.swift) runs the parser and checks
// its invariants; a broken one traps, and so does a trap in the parser itself.

@_spi(Fuzzing) import LatchkeyDaemon

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> Int32 {
    JSONFuzzDriver.fuzz(start, count, JSONFuzzDriver.cxf)
}
