// Finds the hidraw node the kernel made for a uhid device: enumerate the
// "hidraw" subsystem with libudev and pick the node whose parent "hid"
// device carries our HID_UNIQ (and HID_NAME, HID_PHYS). Works without
// udevd: libudev reads sysfs, and devtmpfs makes the node.

/// The uevent properties of the hid device to look for; nil matches anything.
public struct HidrawMatch: Hashable, Sendable {
    /// `HID_UNIQ` (the `uniq` of UHID_CREATE2).
    public var uniq: String?
    /// `HID_NAME` (the `name`).
    public var name: String?
    /// `HID_PHYS` (the `phys`).
    public var phys: String?

    /// Matches the given properties; a nil one is not compared. With all
    /// three nil, any hidraw node matches.
    public init(uniq: String? = nil, name: String? = nil, phys: String? = nil) {
        self.uniq = uniq
        self.name = name
        self.phys = phys
    }

    /// Matches the device a configuration creates: its uniq, name and phys,
    /// each only when not empty.
    public init(configuration: UHIDDeviceConfiguration) {
        self.init(
            uniq: configuration.uniq.isEmpty ? nil : configuration.uniq,
            name: configuration.name.isEmpty ? nil : configuration.name,
            phys: configuration.phys.isEmpty ? nil : configuration.phys
        )
    }

    /// Whether the properties `property` reports match.
    func matches(_ property: (String) -> String?) -> Bool {
        for (key, wanted) in [("HID_UNIQ", uniq), ("HID_NAME", name), ("HID_PHYS", phys)] {
            if let wanted, (property(key) ?? "") != wanted { return false }
        }
        return true
    }
}

/// Finds the `/dev/hidrawN` node of a hid device.
public enum HidrawLocator {
    /// The device node of the first hidraw device whose "hid" parent
    /// matches, and whose node exists; nil when there is none (as on a
    /// machine without uhid or without any hidraw device).
    ///
    /// Blocking (it reads sysfs), but short. Throws `.udev` when libudev
    /// fails, `.systemCall` when checking the node fails other than with ENOENT.
    public static func find(_ match: HidrawMatch) throws(UHIDError) -> String? {
        let context = try UdevContext()
        let enumeration = try UdevEnumeration(context: context, subsystem: "hidraw")
        for syspath in try enumeration.scan() {
            guard let device = UdevDevice(context: context, syspath: syspath),
                let parent = device.parent(subsystem: "hid"),
                match.matches(parent.property),
                let node = device.devnode
            else { continue }
            if try Posix.exists(node) { return node }
        }
        return nil
    }

    /// Looks for the node every `interval` until it appears or `timeout`
    /// has passed; nil after the timeout. The kernel makes the node shortly
    /// after UHID_START.
    ///
    /// Throws `.cancelled` when the task is cancelled, and what `find` throws.
    public static func wait(
        for match: HidrawMatch,
        timeout: Duration,
        interval: Duration = .milliseconds(50)
    ) async throws(UHIDError) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if let node = try find(match) { return node }
            let now = clock.now
            if now >= deadline { return nil }
            do {
                try await Task.sleep(for: min(interval, now.duration(to: deadline)), clock: clock)
            } catch {
                throw UHIDError(.cancelled, "stopped waiting for the hidraw node: the task was cancelled")
            }
        }
    }

    /// Waits for the hidraw node of the device `configuration` creates; see
    /// `wait(for:timeout:interval:)` with `HidrawMatch(configuration:)`.
    public static func wait(
        for configuration: UHIDDeviceConfiguration,
        timeout: Duration
    ) async throws(UHIDError) -> String? {
        try await wait(for: HidrawMatch(configuration: configuration), timeout: timeout)
    }
}
