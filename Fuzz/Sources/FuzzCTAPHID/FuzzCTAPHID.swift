// libFuzzer entry point for the CTAPHID state machine. The input is read as host reports,
// engine answers, keepalives and clock steps by CTAPHIDFuzzDriver (Sources/CTAPHID), which
// the crasher replay test in Tests/CTAPHIDTests runs too; any broken invariant traps.

@_spi(Fuzzing) import CTAPHID

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
    let violations = CTAPHIDFuzzDriver.run(input)
    precondition(violations.isEmpty, "CTAPHID invariant broken: \(violations)")
    return 0
}
