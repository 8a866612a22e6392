// The virtual USB device a latchkey key presents over USB/IP: a full-speed HID device with
// one interface, an interrupt IN and an interrupt OUT endpoint of 64 bytes, and the FIDO
// report descriptor (CTAP 2.1 §11.2.8.2). This file builds its descriptors (USB 2.0 §9.6,
// HID 1.11 §6.2); FIDOUSBDeviceState answers its control requests.

/// What a virtual FIDO USB device says about itself, and the descriptors that follow from it.
///
/// The layout is fixed — one configuration (value 1, bus-powered, 50 mA), one HID interface
/// (class 3, subclass 0, protocol 0: not a boot device), interrupt IN endpoint 0x81 and
/// interrupt OUT endpoint 0x01, 64 bytes each, polled every 5 ms — and the identity and the
/// report descriptor are the caller's. String descriptor 1 is the manufacturer, 2 the
/// product, 3 the serial number; string 0 lists one language, US English (0x0409).
public struct FIDOUSBDevice: Hashable, Sendable {
    /// The vendor id (USB 2.0 §9.6.1 idVendor).
    public let idVendor: UInt16
    /// The product id (USB 2.0 §9.6.1 idProduct).
    public let idProduct: UInt16
    /// The device release number in BCD (USB 2.0 §9.6.1 bcdDevice).
    public let bcdDevice: UInt16
    /// The manufacturer string (string descriptor 1).
    public let manufacturer: String
    /// The product string (string descriptor 2).
    public let product: String
    /// The serial number string (string descriptor 3).
    public let serialNumber: String
    /// The HID report descriptor (HID 1.11 §6.2.2); for a FIDO key, CTAPHID's
    /// `FIDOReportDescriptor.bytes`.
    public let reportDescriptor: [UInt8]

    /// The size of every report and of both interrupt endpoints' packets (CTAP 2.1 §11.2.4).
    public static let reportSize = 64
    /// The default control pipe's maximum packet size (bMaxPacketSize0).
    public static let maxPacketSize0: UInt8 = 64
    /// The interrupt IN endpoint's address: endpoint 1, IN (USB 2.0 §9.6.6).
    public static let inEndpointAddress: UInt8 = 0x81
    /// The interrupt OUT endpoint's address: endpoint 1, OUT.
    public static let outEndpointAddress: UInt8 = 0x01
    /// The interrupt endpoints' polling interval: 5 frames, 5 ms at full speed (USB 2.0 §9.6.6).
    public static let pollingInterval: UInt8 = 5
    /// The value of the one configuration (bConfigurationValue).
    public static let configurationValue: UInt8 = 1
    /// The number of the one interface (bInterfaceNumber).
    public static let interfaceNumber: UInt8 = 0
    /// The configuration's attributes: bit 7 reserved (set), bus-powered, no remote wakeup
    /// (USB 2.0 §9.6.3).
    public static let configurationAttributes: UInt8 = 0x80
    /// The configuration's maximum power in 2 mA units: 25, 50 mA.
    public static let maxPower: UInt8 = 25
    /// The HID class specification release the HID descriptor names: 1.11 (bcdHID 0x0111).
    public static let bcdHID: UInt16 = 0x0111
    /// The one language of the string descriptors: English (United States), 0x0409.
    public static let languageID: UInt16 = 0x0409
    /// The most UTF-16 code units a string descriptor holds: bLength is one byte, two of
    /// which are the header (USB 2.0 §9.6.7).
    public static let maximumStringLength = 126

    /// A device with the given identity. `reportDescriptor` must be 1 to 65535 bytes, the
    /// range of wDescriptorLength (a programmer error otherwise); strings longer than 126
    /// UTF-16 code units are cut to fit a string descriptor.
    public init(
        idVendor: UInt16,
        idProduct: UInt16,
        bcdDevice: UInt16,
        manufacturer: String,
        product: String,
        serialNumber: String,
        reportDescriptor: [UInt8]
    ) {
        precondition((1...0xFFFF).contains(reportDescriptor.count), "a report descriptor has 1 to 65535 bytes")
        self.idVendor = idVendor
        self.idProduct = idProduct
        self.bcdDevice = bcdDevice
        self.manufacturer = manufacturer
        self.product = product
        self.serialNumber = serialNumber
        self.reportDescriptor = reportDescriptor
    }

    /// The 18-byte device descriptor (USB 2.0 §9.6.1, Table 9-8): bcdUSB 2.00, class defined
    /// by the interface, bMaxPacketSize0 64, strings 1–3, one configuration.
    public var deviceDescriptor: [UInt8] {
        var bytes: [UInt8] = [18, USBDescriptorType.device]
        bytes.appendLittleEndian(0x0200)  // bcdUSB
        bytes += [0, 0, 0]  // bDeviceClass, bDeviceSubClass, bDeviceProtocol: per interface
        bytes.append(Self.maxPacketSize0)
        bytes.appendLittleEndian(idVendor)
        bytes.appendLittleEndian(idProduct)
        bytes.appendLittleEndian(bcdDevice)
        bytes += [1, 2, 3]  // iManufacturer, iProduct, iSerialNumber
        bytes.append(1)  // bNumConfigurations
        return bytes
    }

    /// The 9-byte HID descriptor (HID 1.11 §6.2.1): bcdHID 1.11, no country code, one report
    /// descriptor of `reportDescriptor.count` bytes.
    public var hidDescriptor: [UInt8] {
        var bytes: [UInt8] = [9, USBDescriptorType.hid]
        bytes.appendLittleEndian(Self.bcdHID)
        bytes.append(0)  // bCountryCode: not localized
        bytes.append(1)  // bNumDescriptors
        bytes.append(USBDescriptorType.report)
        bytes.appendLittleEndian(UInt16(reportDescriptor.count))
        return bytes
    }

    /// The configuration descriptor with everything GET_DESCRIPTOR(CONFIGURATION) returns
    /// after it, in the order HID 1.11 §7.1 gives: configuration (9, USB 2.0 §9.6.3),
    /// interface (9, §9.6.5), HID (9, HID 1.11 §6.2.1), endpoint 0x81 (7, §9.6.6), endpoint
    /// 0x01 (7). wTotalLength is their sum, 41.
    public var configurationDescriptor: [UInt8] {
        var interface: [UInt8] = [9, USBDescriptorType.interface]
        interface += [Self.interfaceNumber, 0, 2]  // bInterfaceNumber, bAlternateSetting, bNumEndpoints
        interface += [3, 0, 0]  // bInterfaceClass HID, bInterfaceSubClass none, bInterfaceProtocol none
        interface.append(0)  // iInterface

        var body = interface + hidDescriptor
        for address in [Self.inEndpointAddress, Self.outEndpointAddress] {
            body += [7, USBDescriptorType.endpoint, address, 0x03]  // bmAttributes: interrupt
            body.appendLittleEndian(UInt16(Self.reportSize))  // wMaxPacketSize
            body.append(Self.pollingInterval)  // bInterval
        }

        var bytes: [UInt8] = [9, USBDescriptorType.configuration]
        bytes.appendLittleEndian(UInt16(9 + body.count))  // wTotalLength
        bytes.append(1)  // bNumInterfaces
        bytes.append(Self.configurationValue)
        bytes.append(0)  // iConfiguration
        bytes.append(Self.configurationAttributes)
        bytes.append(Self.maxPower)
        return bytes + body
    }

    /// String descriptor `index` (USB 2.0 §9.6.7): 0 lists the supported language IDs
    /// (0x0409 only); 1–3 are the manufacturer, product and serial number in UTF-16LE. Nil for
    /// any other index. The language ID a host asks for is not checked: there is only one.
    public func stringDescriptor(index: UInt8) -> [UInt8]? {
        let string: String
        switch index {
        case 0:
            var bytes: [UInt8] = [4, USBDescriptorType.string]
            bytes.appendLittleEndian(Self.languageID)
            return bytes
        case 1: string = manufacturer
        case 2: string = product
        case 3: string = serialNumber
        default: return nil
        }
        var units = Array(string.utf16.prefix(Self.maximumStringLength))
        // Never end on the first half of a surrogate pair that the cut split.
        if units.count == Self.maximumStringLength, let last = units.last, UTF16.isLeadSurrogate(last) {
            units.removeLast()
        }
        var bytes: [UInt8] = [UInt8(2 + 2 * units.count), USBDescriptorType.string]
        for unit in units {
            bytes.appendLittleEndian(unit)
        }
        return bytes
    }

    /// The device's record in OP_REP_DEVLIST and OP_REP_IMPORT: its identity and the
    /// configuration it is in once exported (Linux's usbipd reports the active one, 1).
    func usbipRecord(path: String, busid: String, busnum: UInt32, devnum: UInt32) -> USBIPUSBDevice {
        USBIPUSBDevice(
            path: path,
            busid: busid,
            busnum: busnum,
            devnum: devnum,
            speed: .full,
            idVendor: idVendor,
            idProduct: idProduct,
            bcdDevice: bcdDevice,
            bDeviceClass: 0,
            bDeviceSubClass: 0,
            bDeviceProtocol: 0,
            bConfigurationValue: Self.configurationValue,
            bNumConfigurations: 1,
            bNumInterfaces: 1
        )
    }

    /// The interface records of OP_REP_DEVLIST: one HID interface.
    var usbipInterfaces: [USBIPUSBInterface] {
        [USBIPUSBInterface(bInterfaceClass: 3, bInterfaceSubClass: 0, bInterfaceProtocol: 0)]
    }
}
