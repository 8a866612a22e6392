// The HID report descriptor a FIDO authenticator presents (CTAP 2.1 §11.2.8.2).

/// The FIDO HID report descriptor (CTAP 2.1 §11.2.8.2): usage page 0xF1D0, usage 0x01
/// (CTAPHID), one application collection with a 64-byte input report (usage 0x20, data in)
/// and a 64-byte output report (usage 0x21, data out), no report IDs.
///
/// FIDO clients find authenticators by this usage page and usage; the transport hands these
/// bytes to the kernel (`rd_data` of UHID_CREATE2) or to a USB host (HID class descriptor).
public enum FIDOReportDescriptor {
    /// The descriptor's 34 bytes, item by item.
    public static let bytes: [UInt8] = [
        0x06, 0xD0, 0xF1,  // Usage Page (FIDO Alliance, 0xF1D0)
        0x09, 0x01,  // Usage (CTAPHID, 0x01)
        0xA1, 0x01,  // Collection (Application)
        0x09, 0x20,  //   Usage (Input Report Data, 0x20)
        0x15, 0x00,  //   Logical Minimum (0)
        0x26, 0xFF, 0x00,  //   Logical Maximum (255)
        0x75, 0x08,  //   Report Size (8 bits)
        0x95, 0x40,  //   Report Count (64)
        0x81, 0x02,  //   Input (Data, Variable, Absolute)
        0x09, 0x21,  //   Usage (Output Report Data, 0x21)
        0x15, 0x00,  //   Logical Minimum (0)
        0x26, 0xFF, 0x00,  //   Logical Maximum (255)
        0x75, 0x08,  //   Report Size (8 bits)
        0x95, 0x40,  //   Report Count (64)
        0x91, 0x02,  //   Output (Data, Variable, Absolute)
        0xC0,  // End Collection
    ]
}
