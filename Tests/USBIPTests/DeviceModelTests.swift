// The virtual FIDO device: its descriptors field by field against the layouts of USB 2.0
// §9.6 and HID 1.11 §6.2.1, and its answers to the standard and HID class requests.

import Testing

@testable import USBIP

/// A little-endian 16-bit field of a descriptor.
func le16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
    UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
}

@Suite("virtual FIDO USB device")
struct DeviceModelTests {
    @Test("the device descriptor follows USB 2.0 §9.6.1 Table 9-8")
    func deviceDescriptor() {
        let d = testDevice.deviceDescriptor
        #expect(d.count == 18)
        #expect(d[0] == 18)  // bLength
        #expect(d[1] == 1)  // bDescriptorType DEVICE
        #expect(le16(d, 2) == 0x0200)  // bcdUSB
        #expect(d[4] == 0 && d[5] == 0 && d[6] == 0)  // class, subclass, protocol: per interface
        #expect(d[7] == 64)  // bMaxPacketSize0
        #expect(le16(d, 8) == 0x1209)  // idVendor
        #expect(le16(d, 10) == 0x4C4B)  // idProduct
        #expect(le16(d, 12) == 0x0123)  // bcdDevice
        #expect(d[14] == 1 && d[15] == 2 && d[16] == 3)  // iManufacturer, iProduct, iSerialNumber
        #expect(d[17] == 1)  // bNumConfigurations
    }

    @Test("the configuration descriptor set follows USB 2.0 §9.6.3–§9.6.6 and HID 1.11 §6.2.1 and §7.1")
    func configurationDescriptor() {
        let c = testDevice.configurationDescriptor
        // Configuration (§9.6.3, Table 9-10).
        #expect(c[0] == 9)
        #expect(c[1] == 2)
        #expect(Int(le16(c, 2)) == c.count)  // wTotalLength
        #expect(c.count == 9 + 9 + 9 + 7 + 7)
        #expect(c[4] == 1)  // bNumInterfaces
        #expect(c[5] == 1)  // bConfigurationValue
        #expect(c[6] == 0)  // iConfiguration
        #expect(c[7] == 0x80)  // bmAttributes: reserved bit, bus-powered, no remote wakeup
        #expect(c[8] == 25)  // bMaxPower: 50 mA in 2 mA units

        // Interface (§9.6.5, Table 9-12).
        let i = Array(c[9..<18])
        #expect(i == [9, 4, 0, 0, 2, 3, 0, 0, 0])

        // HID (HID 1.11 §6.2.1), between the interface and its endpoints (§7.1).
        let h = Array(c[18..<27])
        #expect(h[0] == 9)  // bLength
        #expect(h[1] == 0x21)  // bDescriptorType HID
        #expect(le16(h, 2) == 0x0111)  // bcdHID
        #expect(h[4] == 0)  // bCountryCode
        #expect(h[5] == 1)  // bNumDescriptors
        #expect(h[6] == 0x22)  // bDescriptorType Report
        #expect(Int(le16(h, 7)) == fidoReportDescriptor.count)  // wDescriptorLength
        #expect(h == testDevice.hidDescriptor)

        // Endpoints (§9.6.6, Table 9-13).
        let inEndpoint = Array(c[27..<34])
        #expect(inEndpoint[0] == 7 && inEndpoint[1] == 5)
        #expect(inEndpoint[2] == 0x81)  // bEndpointAddress: 1 IN
        #expect(inEndpoint[3] == 0x03)  // bmAttributes: interrupt
        #expect(le16(inEndpoint, 4) == 64)  // wMaxPacketSize
        #expect(inEndpoint[6] == 5)  // bInterval: 5 ms
        let outEndpoint = Array(c[34..<41])
        #expect(outEndpoint == [7, 5, 0x01, 0x03, 64, 0, 5])

        // wTotalLength is the sum of the bLengths.
        var offset = 0
        var sum = 0
        while offset < c.count {
            sum += Int(c[offset])
            offset += Int(c[offset])
        }
        #expect(sum == Int(le16(c, 2)))
    }

    @Test("string descriptors: LANGID 0x0409 at index 0, then UTF-16LE strings")
    func stringDescriptors() throws {
        #expect(testDevice.stringDescriptor(index: 0) == [4, 3, 0x09, 0x04])
        for (index, expected) in [(1, "latchkey"), (2, "latchkey virtual FIDO2 key"), (3, "LK-0001")] {
            let descriptor = try #require(testDevice.stringDescriptor(index: UInt8(index)))
            #expect(Int(descriptor[0]) == descriptor.count)
            #expect(descriptor[1] == 3)
            let units = stride(from: 2, to: descriptor.count, by: 2).map { le16(descriptor, $0) }
            #expect(String(decoding: units, as: UTF16.self) == expected)
        }
        #expect(testDevice.stringDescriptor(index: 4) == nil)
    }

    @Test("strings too long for a descriptor are cut at 126 code units, never inside a surrogate pair")
    func longStrings() throws {
        let device = FIDOUSBDevice(
            idVendor: 1,
            idProduct: 2,
            bcdDevice: 3,
            manufacturer: String(repeating: "a", count: 125) + "😀",
            product: String(repeating: "é", count: 300),
            serialNumber: "",
            reportDescriptor: [0xC0]
        )
        let manufacturer = try #require(device.stringDescriptor(index: 1))
        #expect(manufacturer[0] == 2 + 2 * 125)
        let product = try #require(device.stringDescriptor(index: 2))
        #expect(product[0] == 254)
        #expect(product.count == 254)
        #expect(device.stringDescriptor(index: 3) == [2, 3])
    }

    @Test("GET_DESCRIPTOR honours wLength: 9 bytes of the configuration, then all of it")
    func getDescriptorTruncation() {
        var state = FIDOUSBDeviceState(device: testDevice)
        let full = testDevice.configurationDescriptor
        #expect(
            state.handleControlTransfer(Setup.getDescriptor(USBDescriptorType.configuration, length: 9))
                == .dataIn(Array(full.prefix(9)))
        )
        #expect(
            state.handleControlTransfer(Setup.getDescriptor(USBDescriptorType.configuration, length: 0xFF))
                == .dataIn(full)
        )
        #expect(
            state.handleControlTransfer(Setup.getDescriptor(USBDescriptorType.device, length: 8))
                == .dataIn(Array(testDevice.deviceDescriptor.prefix(8)))
        )
        #expect(state.handleControlTransfer(Setup.getReportDescriptor(length: 0x100)) == .dataIn(fidoReportDescriptor))
        #expect(
            state.handleControlTransfer(
                USBSetupPacket(bmRequestType: 0x81, bRequest: 6, wValue: 0x2100, wIndex: 0, wLength: 9)
            )
                == .dataIn(testDevice.hidDescriptor)
        )
    }

    @Test(
        "requests the device does not support stall",
        arguments: [
            Setup.getDescriptor(USBDescriptorType.deviceQualifier, length: 10),
            Setup.getDescriptor(USBDescriptorType.otherSpeedConfiguration, length: 9),
            Setup.getDescriptor(0x0F, length: 5),  // BOS: bcdUSB 2.00 has none
            Setup.getDescriptor(USBDescriptorType.string, index: 9, length: 255),
            Setup.getDescriptor(USBDescriptorType.configuration, index: 1, length: 9),
            USBSetupPacket(bmRequestType: 0x81, bRequest: 6, wValue: 0x2200, wIndex: 1, wLength: 34),  // interface 1
            USBSetupPacket(bmRequestType: 0xC0, bRequest: 1, wLength: 4),  // vendor
            USBSetupPacket(bmRequestType: 0x00, bRequest: USBStandardRequest.setConfiguration, wValue: 2),
            USBSetupPacket(bmRequestType: 0x00, bRequest: USBStandardRequest.setFeature, wValue: 1),  // remote wakeup
            USBSetupPacket(bmRequestType: 0x00, bRequest: USBStandardRequest.setFeature, wValue: 2),  // test mode
            // SET_FEATURE(ENDPOINT_HALT) on the default pipe
            USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.setFeature, wValue: 0, wIndex: 0x00),
            USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.setFeature, wValue: 0, wIndex: 0x82),
            USBSetupPacket(bmRequestType: 0x01, bRequest: USBStandardRequest.setInterface, wValue: 1),
            USBSetupPacket(bmRequestType: 0x82, bRequest: USBStandardRequest.synchFrame, wIndex: 0x81, wLength: 2),
            USBSetupPacket(
                bmRequestType: 0x00,
                bRequest: USBStandardRequest.setDescriptor,
                wValue: 0x0100,
                wLength: 18
            ),
            // GET_REPORT(Feature)
            USBSetupPacket(bmRequestType: 0xA1, bRequest: HIDClassRequest.getReport, wValue: 0x0300, wLength: 64),
            // GET_REPORT(Input) of report ID 1
            USBSetupPacket(bmRequestType: 0xA1, bRequest: HIDClassRequest.getReport, wValue: 0x0101, wLength: 64),
            USBSetupPacket(bmRequestType: 0x21, bRequest: HIDClassRequest.setProtocol, wValue: 0),  // boot
            USBSetupPacket(bmRequestType: 0x21, bRequest: HIDClassRequest.setIdle, wValue: 0x0001),  // report ID 1
            USBSetupPacket(bmRequestType: 0x23, bRequest: USBStandardRequest.setFeature, wValue: 4),  // port reset
        ]
    )
    func unsupportedRequestsStall(setup: USBSetupPacket) {
        var state = FIDOUSBDeviceState(device: testDevice)
        #expect(state.handleControlTransfer(setup) == .stall)
    }

    @Test("GET_STATUS answers device, interface and endpoint, the halt bit included")
    func getStatus() {
        var state = FIDOUSBDeviceState(device: testDevice)
        let device = USBSetupPacket(bmRequestType: 0x80, bRequest: 0, wLength: 2)
        let interface = USBSetupPacket(bmRequestType: 0x81, bRequest: 0, wLength: 2)
        let endpoint = USBSetupPacket(bmRequestType: 0x82, bRequest: 0, wIndex: 0x81, wLength: 2)
        #expect(state.handleControlTransfer(device) == .dataIn([0, 0]))
        #expect(state.handleControlTransfer(interface) == .dataIn([0, 0]))
        #expect(state.handleControlTransfer(endpoint) == .dataIn([0, 0]))
        let halt = USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.setFeature, wIndex: 0x81)
        #expect(state.handleControlTransfer(halt) == .acknowledged)
        #expect(state.handleControlTransfer(endpoint) == .dataIn([1, 0]))
        #expect(!state.canSendInputReport)
        let clear = USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.clearFeature, wIndex: 0x81)
        #expect(state.handleControlTransfer(clear) == .acknowledged)
        #expect(state.handleControlTransfer(endpoint) == .dataIn([0, 0]))
        #expect(state.canSendInputReport)
        let ep0 = USBSetupPacket(bmRequestType: 0x82, bRequest: 0, wIndex: 0x80, wLength: 2)
        #expect(state.handleControlTransfer(ep0) == .dataIn([0, 0]))
    }

    @Test("SET_CONFIGURATION, GET_CONFIGURATION and the Address state")
    func configuration() {
        var state = FIDOUSBDeviceState(device: testDevice)
        let get = USBSetupPacket(bmRequestType: 0x80, bRequest: USBStandardRequest.getConfiguration, wLength: 1)
        #expect(state.handleControlTransfer(get) == .dataIn([1]))  // exported devices come configured
        #expect(state.handleControlTransfer(Setup.setConfiguration(0)) == .acknowledged)
        #expect(state.handleControlTransfer(get) == .dataIn([0]))
        #expect(!state.canSendInputReport && !state.canReceiveOutputReport)
        // Interface requests stall in the Address state (USB 2.0 §9.4).
        #expect(state.handleControlTransfer(Setup.setIdle()) == .stall)
        #expect(state.handleControlTransfer(Setup.setConfiguration(1)) == .acknowledged)
        #expect(state.handleControlTransfer(get) == .dataIn([1]))
        #expect(state.handleControlTransfer(Setup.setIdle()) == .acknowledged)
    }

    @Test("GET_INTERFACE answers alternate setting 0 and SET_INTERFACE(0) clears halts")
    func interfaceRequests() {
        var state = FIDOUSBDeviceState(device: testDevice)
        #expect(
            state.handleControlTransfer(
                USBSetupPacket(bmRequestType: 0x81, bRequest: USBStandardRequest.getInterface, wLength: 1)
            )
                == .dataIn([0])
        )
        _ = state.handleControlTransfer(
            USBSetupPacket(bmRequestType: 0x02, bRequest: USBStandardRequest.setFeature, wIndex: 0x01)
        )
        #expect(state.isOutEndpointHalted)
        #expect(
            state.handleControlTransfer(USBSetupPacket(bmRequestType: 0x01, bRequest: USBStandardRequest.setInterface))
                == .acknowledged
        )
        #expect(!state.isOutEndpointHalted)
    }

    @Test("HID class requests: idle rate, report protocol, GET_REPORT and SET_REPORT")
    func hidClassRequests() {
        var state = FIDOUSBDeviceState(device: testDevice)
        let getIdle = USBSetupPacket(bmRequestType: 0xA1, bRequest: HIDClassRequest.getIdle, wLength: 1)
        #expect(state.handleControlTransfer(getIdle) == .dataIn([0]))
        #expect(state.handleControlTransfer(Setup.setIdle(duration: 125)) == .acknowledged)
        #expect(state.handleControlTransfer(getIdle) == .dataIn([125]))
        #expect(state.idleRate == 125)

        let getProtocol = USBSetupPacket(bmRequestType: 0xA1, bRequest: HIDClassRequest.getProtocol, wLength: 1)
        #expect(state.handleControlTransfer(getProtocol) == .dataIn([1]))
        #expect(
            state.handleControlTransfer(
                USBSetupPacket(bmRequestType: 0x21, bRequest: HIDClassRequest.setProtocol, wValue: 1)
            )
                == .acknowledged
        )

        let getReport = USBSetupPacket(
            bmRequestType: 0xA1,
            bRequest: HIDClassRequest.getReport,
            wValue: 0x0100,
            wLength: 64
        )
        #expect(state.handleControlTransfer(getReport) == .dataIn([UInt8](repeating: 0, count: 64)))

        let setReport = USBSetupPacket(
            bmRequestType: 0x21,
            bRequest: HIDClassRequest.setReport,
            wValue: 0x0200,
            wLength: 3
        )
        #expect(
            state.handleControlTransfer(setReport, data: [1, 2, 3])
                == .outputReport([1, 2, 3] + [UInt8](repeating: 0, count: 61))
        )
        #expect(state.handleControlTransfer(setReport, data: []) == .stall)
        #expect(state.handleControlTransfer(setReport, data: report(0) + [0]) == .stall)
    }
}
