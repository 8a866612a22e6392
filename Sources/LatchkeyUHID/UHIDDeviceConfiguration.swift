// What the kernel is told about a virtual key: the fields of UHID_CREATE2
// that vary from key to key. The bus is always BUS_USB.

/// The identity and report descriptor of one uhid device.
///
/// `uniq` should be unique per key: `HidrawLocator` finds the key's hidraw
/// node by it (`HID_UNIQ` of the hid device). The lengths the kernel allows
/// are checked by `validate()`, which `UHIDDevice` calls before it opens
/// anything.
public struct UHIDDeviceConfiguration: Hashable, Sendable {
    /// The device name (`HID_NAME`, what python-fido2 shows); at most 127 bytes of UTF-8.
    public var name: String
    /// The physical path (`HID_PHYS`); at most 63 bytes.
    public var phys: String
    /// The unique id (`HID_UNIQ`, the serial number); at most 63 bytes.
    public var uniq: String
    /// The USB vendor id.
    public var vendor: UInt32
    /// The USB product id.
    public var product: UInt32
    /// The device version.
    public var version: UInt32
    /// The HID country code (0: not localised).
    public var country: UInt32
    /// The HID report descriptor (for a key, `FIDOReportDescriptor.bytes`); 1 to 4096 bytes.
    public var reportDescriptor: [UInt8]

    /// Creates a configuration.
    public init(
        name: String,
        phys: String = "",
        uniq: String,
        vendor: UInt32,
        product: UInt32,
        version: UInt32 = 0,
        country: UInt32 = 0,
        reportDescriptor: [UInt8]
    ) {
        self.name = name
        self.phys = phys
        self.uniq = uniq
        self.vendor = vendor
        self.product = product
        self.version = version
        self.country = country
        self.reportDescriptor = reportDescriptor
    }

    /// The UHID_CREATE2 payload: these fields on bus `BUS_USB` (libfido2
    /// lists only USB hidraw devices).
    public var create2Request: UHIDCreate2Request {
        UHIDCreate2Request(
            name: name,
            phys: phys,
            uniq: uniq,
            bus: UHIDCreate2Request.busUSB,
            vendor: vendor,
            product: product,
            version: version,
            country: country,
            rdData: reportDescriptor
        )
    }

    /// Throws `.invalidEvent` when a field does not fit UHID_CREATE2: a
    /// string too long or holding a NUL, a descriptor empty or above 4096 bytes.
    public func validate() throws(UHIDError) {
        _ = try UHIDEvent.create2(create2Request).encoded()
    }
}
