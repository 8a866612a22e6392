// Which latchkey key a hidraw node is, and which process serves it, as the
// kernel shows it in sysfs, /var/run/vhci_hcd and /proc. udev's helper
// (`latchkeyctl udev-owner`) and `latchkeyctl attach` read it; the daemon
// never does.
//
// A key reaches the kernel in one of two ways, and nothing else may pass for
// one (udev/70-latchkey.rules matches the same two):
//
// - uhid: a HID device under /devices/virtual/misc/uhid whose uniq
//   (HID_UNIQ) is the key's serial number, `latchkey-…`. Only root and the
//   service account may open /dev/uhid, so the process serving it is one of
//   those holding /dev/uhid open.
// - USB/IP: a USB device on vhci-hcd (root's `usbip attach`) whose serial is
//   `latchkey-…`. vhci_hcd's status tables name the vhci port of that USB
//   device, `usbip attach` recorded the server's host and port for that port in
//   /var/run/vhci_hcd/portN, and sock_diag names the listener on that port.
//
// A serving process's control socket is the Unix stream socket it listens on
// (/proc/PID/net/unix, restricted to the inodes in /proc/PID/fd).

import Glibc

/// How a hidraw node reaches the kernel, when it is a latchkey key's.
public enum KeyDeviceOrigin: Sendable, Equatable {
    /// A uhid device; `serial` is its uniq.
    case uhid(serial: String)
    /// A USB device on vhci-hcd: `serial` is its iSerialNumber, `usbDevice` its name ("3-1").
    case vhci(serial: String, usbDevice: String)

    /// The key's serial number (VirtualKey.serialNumber: `latchkey-<aaguid tag>-<name>`).
    public var serial: String {
        switch self {
        case .uhid(let serial), .vhci(let serial, _): serial
        }
    }
}

/// Why a node is not a latchkey key, or its origin cannot be read.
public struct KeyDeviceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Where a USB/IP import came from: what `usbip attach` recorded for its vhci port.
public struct VHCIRecord: Sendable, Equatable {
    public var host: String
    public var port: UInt16
    /// The server's bus id of the device ("1-1").
    public var busid: String
}

/// Reading key devices from sysfs and /var/run/vhci_hcd.
public enum KeyDevices {
    /// Every latchkey key's serial number starts with this.
    public static let serialPrefix = "latchkey-"
    static let uhidDevices = "/devices/virtual/misc/uhid/"
    static let vhciDevices = "/devices/platform/vhci_hcd."

    /// The origin of the hidraw node at `devpath` (udev's %p, below /sys), reading sysfs
    /// under `sysfs`. Throws for anything that is not a latchkey key's node.
    public static func origin(of devpath: String, sysfs: String = "/sys") throws(KeyDeviceError) -> KeyDeviceOrigin {
        let components = devpath.split(separator: "/").map(String.init)
        guard devpath.hasPrefix("/devices/"), !components.contains(".."), !components.contains("."),
            components.count >= 3, components[components.count - 2] == "hidraw",
            components.last?.hasPrefix("hidraw") == true
        else {
            throw KeyDeviceError("\(devpath) is not the device path of a hidraw node")
        }
        // .../<HID device>/hidraw/hidrawN
        let hidDevice = "/" + components.dropLast(2).joined(separator: "/")
        if devpath.hasPrefix(uhidDevices) {
            guard let uevent = readText(sysfs + hidDevice + "/uevent") else {
                throw KeyDeviceError("cannot read \(sysfs)\(hidDevice)/uevent")
            }
            let serial = property("HID_UNIQ", in: uevent) ?? ""
            guard serial.hasPrefix(serialPrefix) else {
                throw KeyDeviceError("uhid device \(hidDevice) has uniq \"\(serial)\", not a latchkey key's")
            }
            return .uhid(serial: serial)
        }
        guard devpath.hasPrefix(vhciDevices) else {
            throw KeyDeviceError("\(devpath) is neither a uhid device nor a USB/IP import (vhci_hcd)")
        }
        // The USB device is the nearest ancestor of the HID device with a bus number:
        // .../vhci_hcd.0/usb3/3-1/3-1:1.0/<HID device>.
        var ancestor = Array(components.dropLast(3))
        while ancestor.count > 3 {
            let directory = sysfs + "/" + ancestor.joined(separator: "/")
            if readText(directory + "/busnum") != nil {
                let serial = readText(directory + "/serial").map(trimmed) ?? ""
                guard serial.hasPrefix(serialPrefix) else {
                    throw KeyDeviceError("USB device \(ancestor.last!) on vhci_hcd has serial \"\(serial)\", not a latchkey key's")
                }
                return .vhci(serial: serial, usbDevice: ancestor.last!)
            }
            ancestor.removeLast()
        }
        throw KeyDeviceError("no USB device above \(devpath) on vhci_hcd")
    }

    /// The vhci port that holds the USB device named `usbDevice` ("3-1"), from the text of
    /// vhci_hcd's status tables (Linux drivers/usb/usbip/vhci_sysfs.c: a header line, then
    /// `hub port sta spd dev sockfd local_busid` per port).
    public static func vhciPort(of usbDevice: String, status: String) -> Int? {
        for line in status.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 7, fields[6] == usbDevice, let port = Int(fields[1]) else { continue }
            return port
        }
        return nil
    }

    /// The vhci port of `usbDevice`, from every status table of the vhci controllers (they
    /// all live on vhci_hcd.0: `status`, `status.1`, …).
    public static func vhciPort(of usbDevice: String, sysfs: String = "/sys") -> Int? {
        let directory = sysfs + "/devices/platform/vhci_hcd.0"
        for name in directoryEntries(directory) where name == "status" || name.hasPrefix("status.") {
            if let text = readText(directory + "/" + name), let port = vhciPort(of: usbDevice, status: text) {
                return port
            }
        }
        return nil
    }

    /// What `usbip attach` wrote for a port (usbip_attach.c: "HOST PORT BUSID\n").
    public static func vhciRecord(_ text: String) -> VHCIRecord? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 3, let port = UInt16(fields[1]), port > 0 else { return nil }
        return VHCIRecord(host: String(fields[0]), port: port, busid: String(fields[2]))
    }

    /// The record of vhci port `port` under `directory` (/var/run/vhci_hcd).
    public static func vhciRecord(port: Int, directory: String = "/var/run/vhci_hcd") -> VHCIRecord? {
        readText(directory + "/port\(port)").flatMap(vhciRecord)
    }

    /// The owner a hidraw node gets, from what the serving daemon says (`claimed`; nil when
    /// it names none, as before owners existed) and the uid the kernel says it runs as.
    /// A daemon of root or of the service account serves every owner; any other daemon
    /// only its own account, so a person's daemon cannot hand a node to someone else.
    /// Nil: the claim is not believed, and the node stays root's.
    public static func nodeOwner(claimed: UInt32?, daemon: UInt32, serviceAccount: UInt32?) -> UInt32? {
        guard let claimed, claimed != daemon else { return daemon }
        return daemon == 0 || daemon == serviceAccount ? claimed : nil
    }

    /// `NAME=value` in a uevent file's text.
    static func property(_ name: String, in uevent: String) -> String? {
        for line in uevent.split(separator: "\n") where line.hasPrefix(name + "=") {
            return String(line.dropFirst(name.count + 1))
        }
        return nil
    }

    static func trimmed(_ text: String) -> String {
        String(text.drop { $0 == " " || $0 == "\n" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
    }
}

/// The Unix stream sockets a process listens on.
public enum ListeningUnixSockets {
    /// The paths of the listening Unix stream sockets among `inodes`, from the text of
    /// /proc/PID/net/unix (unix(7): `Num RefCount Protocol Flags Type St Inode Path`;
    /// flag 0x10000 is __SO_ACCEPTCON, a listening socket). Abstract sockets are left out.
    public static func paths(in table: String, inodes: Set<UInt32>) -> [String] {
        var paths: [String] = []
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", maxSplits: 7, omittingEmptySubsequences: true)
            guard fields.count == 8, let flags = UInt32(fields[3], radix: 16), flags & 0x10000 != 0,
                fields[4] == "0001", let inode = UInt32(fields[6]), inodes.contains(inode), fields[7].hasPrefix("/")
            else { continue }
            paths.append(String(fields[7]))
        }
        return paths
    }

    /// The listening Unix stream sockets of process `pid`, each as a path this process can
    /// connect to whatever mount namespace `pid` is in (/proc/PID/root/…); empty when its
    /// /proc entries cannot be read.
    public static func of(pid: Int32) -> [String] {
        var inodes: Set<UInt32> = []
        for fd in directoryEntries("/proc/\(pid)/fd") {
            guard let link = readLink("/proc/\(pid)/fd/\(fd)"), link.hasPrefix("socket:["), link.hasSuffix("]"),
                let inode = UInt32(link.dropFirst(8).dropLast())
            else { continue }
            inodes.insert(inode)
        }
        guard !inodes.isEmpty, let table = readText("/proc/\(pid)/net/unix", limit: 4 << 20) else { return [] }
        return paths(in: table, inodes: inodes).map { "/proc/\(pid)/root" + $0 }
    }
}

/// The uid a process runs as (the owner of /proc/PID), nil when it is gone.
public func processUID(_ pid: Int32) -> UInt32? {
    var status = stat()
    guard stat("/proc/\(pid)", &status) == 0 else { return nil }
    return status.st_uid
}

/// A small text file's contents, nil when it cannot be read.
func readText(_ path: String, limit: Int = 65536) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { SystemCall.close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while bytes.count < limit {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        bytes += buffer[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The names in a directory, without "." and "..".
func directoryEntries(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// A symbolic link's target, nil when it is not one or cannot be read.
func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Account names from the password database, for messages and for finding the service
/// account.
public enum Accounts {
    /// The name of `uid`, nil when it has none.
    public static func name(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1024)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, let result else { return nil }
        return String(cString: result.pointee.pw_name)
    }

    /// The uid of the account `name`, nil when there is none.
    public static func uid(of name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1024)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, let result else { return nil }
        return result.pointee.pw_uid
    }

    /// "uid 1001 (alice)", or "uid 1001".
    public static func describe(uid: UInt32) -> String {
        name(of: uid).map { "uid \(uid) (\($0))" } ?? "uid \(uid)"
    }
}

extension TCPSocketRecord {
    /// Who holds this socket, for messages: "uid 1002 (bob), process 4242 (/usr/bin/python3.11)",
    /// the process as far as this one may see it.
    public var holder: String {
        let processes = PeerIdentity.processes(holdingSocket: inode).map { pid in
            PeerIdentity.executable(of: pid).map { "process \(pid) (\($0))" } ?? "process \(pid)"
        }
        return ([Accounts.describe(uid: uid)] + processes).joined(separator: ", ")
    }
}
