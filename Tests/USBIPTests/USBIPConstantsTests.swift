// The protocol version every OP_* message carries.

import Testing

@testable import USBIP

@Test("speaks USB/IP version 1.1.1")
func usbipVersion() {
    #expect(USBIPVersion.current == 0x0111)
}
