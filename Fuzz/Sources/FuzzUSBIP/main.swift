// libFuzzer entry point for the USB/IP server connection. The input is read as client bytes
// (split into chunks by input bytes, or well-formed commands), input reports from the key and
// disconnects by USBIPFuzzDriver (Sources/USBIP), which the crasher replay test in
// Tests/USBIPTests runs too; any broken invariant traps — a trap in the connection itself
// is a crash libFuzzer keeps on its own. The invariants checked: no trap; a RET_SUBMIT for an
// IN URB never exceeds its transfer_buffer_length; an unlinked URB gets no RET_SUBMIT; after
// a close action nothing more is sent; output reports are 64 bytes for the imported bus id.

@_spi(Fuzzing) import USBIP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
    let violations = USBIPFuzzDriver.run(input)
    precondition(violations.isEmpty, "USB/IP invariant broken: \(violations)")
    return 0
}
