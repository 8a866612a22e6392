// Owning wrappers of the libudev objects HidrawLocator uses. Each holds one
// reference and drops it in deinit; an object that needs another alive (a
// device needs its context) holds that one too.

import CLinuxHID
import Glibc

/// `struct udev *`: a libudev context.
final class UdevContext {
    let pointer: OpaquePointer

    /// Throws `.udev` when libudev cannot make a context.
    init() throws(UHIDError) {
        guard let pointer = udev_new() else {
            throw UHIDError(.udev, "udev_new failed", systemCall: "udev_new", errno: Glibc.errno)
        }
        self.pointer = pointer
    }

    deinit {
        udev_unref(pointer)
    }
}

/// `struct udev_enumerate *`: the devices of one subsystem.
final class UdevEnumeration {
    private let context: UdevContext
    private let pointer: OpaquePointer

    /// Throws `.udev` when the enumeration cannot be made.
    init(context: UdevContext, subsystem: String) throws(UHIDError) {
        guard let pointer = udev_enumerate_new(context.pointer) else {
            throw UHIDError(.udev, "udev_enumerate_new failed", systemCall: "udev_enumerate_new", errno: Glibc.errno)
        }
        self.context = context
        self.pointer = pointer
        let result = udev_enumerate_add_match_subsystem(pointer, subsystem)
        guard result >= 0 else {
            throw UHIDError(
                .udev,
                "udev_enumerate_add_match_subsystem(\(subsystem)) failed",
                systemCall: "udev_enumerate_add_match_subsystem",
                errno: -result
            )
        }
    }

    deinit {
        udev_enumerate_unref(pointer)
    }

    /// Scans sysfs and returns the sys paths of the matching devices (none
    /// when the subsystem has no devices or does not exist).
    func scan() throws(UHIDError) -> [String] {
        let result = udev_enumerate_scan_devices(pointer)
        guard result >= 0 else {
            throw UHIDError(
                .udev,
                "udev_enumerate_scan_devices failed",
                systemCall: "udev_enumerate_scan_devices",
                errno: -result
            )
        }
        var paths: [String] = []
        var entry = udev_enumerate_get_list_entry(pointer)
        while let current = entry {
            if let name = udev_list_entry_get_name(current) { paths.append(String(cString: name)) }
            entry = udev_list_entry_get_next(current)
        }
        return paths
    }
}

/// `struct udev_device *`: one device, with its properties.
final class UdevDevice {
    private let context: UdevContext
    private let pointer: OpaquePointer

    /// The device at `syspath`, or nil when it is gone (devices come and go
    /// between a scan and a look).
    init?(context: UdevContext, syspath: String) {
        guard let pointer = udev_device_new_from_syspath(context.pointer, syspath) else { return nil }
        self.context = context
        self.pointer = pointer
    }

    private init(context: UdevContext, taking pointer: OpaquePointer) {
        self.context = context
        self.pointer = pointer
    }

    deinit {
        udev_device_unref(pointer)
    }

    /// The nearest ancestor in `subsystem`, holding its own reference
    /// (libudev's parent pointer belongs to the child).
    func parent(subsystem: String) -> UdevDevice? {
        guard let parent = udev_device_get_parent_with_subsystem_devtype(pointer, subsystem, nil),
            let referenced = udev_device_ref(parent)
        else { return nil }
        return UdevDevice(context: context, taking: referenced)
    }

    /// The value of a uevent property (`HID_UNIQ`, ...), or nil.
    func property(_ key: String) -> String? {
        udev_device_get_property_value(pointer, key).map { String(cString: $0) }
    }

    /// The device node (`/dev/hidraw3`), or nil.
    var devnode: String? {
        udev_device_get_devnode(pointer).map { String(cString: $0) }
    }
}
