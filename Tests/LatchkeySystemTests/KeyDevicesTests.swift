// Telling a latchkey key's hidraw node from any other, and finding what serves
// it, from fake sysfs trees and the texts the kernel and usbip write; and the
// rule that decides whose node it becomes.

import Foundation
import Glibc
import Testing

@testable import LatchkeySystem

/// A fake /sys (and /var/run/vhci_hcd) under a temporary directory.
private struct FakeSysfs {
    let root = FileManager.default.temporaryDirectory.path + "/latchkey-sysfs-\(UUID().uuidString)"

    func write(_ path: String, _ text: String) throws {
        let url = URL(fileURLWithPath: root + path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: root) }
}

private let uhidNode = "/devices/virtual/misc/uhid/0003:1209:0001.0004/hidraw/hidraw3"
private let vhciNode = "/devices/platform/vhci_hcd.0/usb3/3-1/3-1:1.0/0003:1209:0001.0005/hidraw/hidraw4"
private let serial = "latchkey-0a1b2c3d-alice-key"
private let status = """
    hub port sta spd dev      sockfd local_busid
    hs  0000 004 000 00000000 000000 0-0
    hs  0001 006 002 00030002 000005 3-1
    ss  0008 004 000 00000000 000000 0-0

    """

@Suite struct KeyDevicesTests {
    @Test("a uhid node is a key's by its uniq") func uhid() throws {
        let sysfs = FakeSysfs()
        defer { sysfs.cleanUp() }
        try sysfs.write("/devices/virtual/misc/uhid/0003:1209:0001.0004/uevent",
                        "HID_ID=0003:00001209:00000001\nHID_NAME=latchkey Virtual FIDO2 Key\nHID_PHYS=latchkey/alice-key\nHID_UNIQ=\(serial)\n")
        #expect(try KeyDevices.origin(of: uhidNode, sysfs: sysfs.root) == .uhid(serial: serial))
    }

    @Test("a vhci node is a key's by its USB device's serial") func vhci() throws {
        let sysfs = FakeSysfs()
        defer { sysfs.cleanUp() }
        try sysfs.write("/devices/platform/vhci_hcd.0/usb3/3-1/busnum", "3\n")
        try sysfs.write("/devices/platform/vhci_hcd.0/usb3/3-1/serial", serial + "\n")
        try sysfs.write("/devices/platform/vhci_hcd.0/status", status)
        let origin = try KeyDevices.origin(of: vhciNode, sysfs: sysfs.root)
        #expect(origin == .vhci(serial: serial, usbDevice: "3-1"))
        #expect(KeyDevices.vhciPort(of: "3-1", sysfs: sysfs.root) == 1)
    }

    @Test(
        "nodes that are not a latchkey key's are refused",
        arguments: [
            // a real USB device, a uhid device of another program, a vhci device of another server
            "/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/0003:1209:0001.0001/hidraw/hidraw0",
            "/devices/virtual/misc/uhid/0003:1209:0001.0009/hidraw/hidraw9",
            "/devices/platform/vhci_hcd.0/usb4/4-1/4-1:1.0/0003:1209:0001.0008/hidraw/hidraw8",
            // not a hidraw node, or a path that climbs out
            "/devices/virtual/misc/uhid/0003:1209:0001.0004",
            "/devices/virtual/misc/uhid/../../../etc/hidraw/hidraw0",
            "hidraw/hidraw0",
        ]
    )
    func refused(_ devpath: String) throws {
        let sysfs = FakeSysfs()
        defer { sysfs.cleanUp() }
        try sysfs.write("/devices/virtual/misc/uhid/0003:1209:0001.0009/uevent", "HID_UNIQ=not-latchkey\n")
        try sysfs.write("/devices/platform/vhci_hcd.0/usb4/4-1/busnum", "4\n")
        try sysfs.write("/devices/platform/vhci_hcd.0/usb4/4-1/serial", "YK123456\n")
        try sysfs.write("/devices/pci0000:00/0000:00:14.0/usb1/1-2/serial", serial)
        #expect(throws: KeyDeviceError.self) { try KeyDevices.origin(of: devpath, sysfs: sysfs.root) }
    }

    @Test("vhci status tables name the port of a USB device") func statusTable() {
        #expect(KeyDevices.vhciPort(of: "3-1", status: status) == 1)
        #expect(KeyDevices.vhciPort(of: "0-0", status: status) == 0)
        #expect(KeyDevices.vhciPort(of: "5-1", status: status) == nil)
    }

    @Test("usbip's port records give the server", arguments: [
        ("127.0.0.1 3240 1-1\n", VHCIRecord(host: "127.0.0.1", port: 3240, busid: "1-1")),
        ("localhost 40001 1-12", VHCIRecord(host: "localhost", port: 40001, busid: "1-12")),
        ("127.0.0.1 usbip 1-1\n", nil), ("127.0.0.1 0 1-1", nil), ("127.0.0.1 3240", nil), ("", nil),
    ])
    func records(_ text: String, _ expected: VHCIRecord?) {
        #expect(KeyDevices.vhciRecord(text) == expected)
    }

    @Test("a daemon of root or the service account gives any owner; any other only its own", arguments: [
        // claimed, daemon, service account, node owner
        (UInt32?.none, UInt32(1001), UInt32?.some(998), UInt32?.some(1001)),
        (1001, 1001, 998, 1001),
        (1002, 1001, 998, nil),
        (1002, 998, 998, 1002),
        (1002, 0, 998, 1002),
        (1002, 998, nil, nil),
        (0, 1001, 998, nil),
    ])
    func owners(claimed: UInt32?, daemon: UInt32, service: UInt32?, expected: UInt32?) {
        #expect(KeyDevices.nodeOwner(claimed: claimed, daemon: daemon, serviceAccount: service) == expected)
    }

    @Test("/proc/net/unix gives the paths of a process's listening stream sockets") func unixTable() {
        let table = """
            Num       RefCount Protocol Flags    Type St Inode Path
            0000000000000000: 00000002 00000000 00010000 0001 01 4711 /run/latchkeyd/control.sock
            0000000000000000: 00000002 00000000 00010000 0001 01 4712 /run/other daemon.sock
            0000000000000000: 00000003 00000000 00000000 0001 03 4713 /run/latchkeyd/control.sock
            0000000000000000: 00000002 00000000 00010000 0002 01 4714 /run/datagram.sock
            0000000000000000: 00000002 00000000 00010000 0001 01 4715 @abstract
            0000000000000000: 00000002 00000000 00010000 0001 01 4716

            """
        #expect(ListeningUnixSockets.paths(in: table, inodes: [4711, 4713, 4714, 4715, 4716]) == [
            "/run/latchkeyd/control.sock"
        ])
        #expect(ListeningUnixSockets.paths(in: table, inodes: [4712]) == ["/run/other daemon.sock"])
    }

    @Test("this process's listening Unix socket is found through /proc") func ownSocket() throws {
        let path = FileManager.default.temporaryDirectory.path + "/latchkey-\(getpid())-\(UUID().uuidString.prefix(8)).sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0 && listen(descriptor, 1) == 0)
        #expect(ListeningUnixSockets.of(pid: getpid()).contains("/proc/\(getpid())/root" + path))
        #expect(processUID(getpid()) == getuid())
    }

    @Test("accounts are named") func accounts() {
        #expect(Accounts.name(of: 0) == "root")
        #expect(Accounts.uid(of: "root") == 0)
        #expect(Accounts.describe(uid: 0) == "uid 0 (root)")
        #expect(Accounts.uid(of: "no-such-account-here") == nil)
    }
}
