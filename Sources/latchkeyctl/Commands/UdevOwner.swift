// `latchkeyctl udev-owner DEVPATH`: udev's helper (IMPORT{program} in
// udev/70-latchkey.rules), run as root for a hidraw node the rules took for a
// latchkey key. It tells udev whose node it is, asking the daemon that serves
// the key, found through the kernel rather than through any path a user could
// choose (LatchkeySystem/KeyDevices.swift):
//
// - a uhid key: the processes holding /dev/uhid open (only root and the
//   service account may open it);
// - a USB/IP import (vhci-hcd): the server usbip recorded for the vhci port in
//   /var/run/vhci_hcd, the listener on that port (sock_diag; every listener on
//   it must be one account's), the processes holding that listener.
//
// Each such process's control socket answers GET /v1/keys for root; the key
// whose serial number the device carries gives the owner, believed only as
// far as `KeyDevices.nodeOwner` allows (a person's daemon names only itself).
// A daemon makes its startup keys' uhid devices before its control socket
// listens, so a key no daemon knows yet is asked for again until --wait runs
// out. It prints udev properties, LATCHKEY_KEY and LATCHKEY_OWNER_UID, and exits 0;
// any doubt prints nothing and exits non-zero, and the rules leave the node
// root's, mode 0600.

import ArgumentParser
import Foundation
import LatchkeySystem

struct UdevOwner: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "udev-owner",
        abstract: "Tell udev whose a latchkey key's hidraw node is (run by udev, as root).",
        discussion: """
            udev/70-latchkey.rules runs it for a hidraw node that is a latchkey key's: a uhid \
            device whose uniq starts with latchkey-, or a USB device on vhci_hcd (usbip \
            attach) whose serial does. It finds the daemon serving the key through the \
            kernel (the holders of /dev/uhid; for USB/IP, the listener on the port usbip \
            recorded in /var/run/vhci_hcd), asks it for the key's owner over its control \
            socket and prints

              LATCHKEY_KEY=<name>
              LATCHKEY_OWNER_UID=<uid>

            A daemon run by root or by the service account may name any owner; any other \
            daemon only its own account. When anything is in doubt it prints nothing and \
            exits non-zero, and the node stays root's (mode 0600).

            Examples:
              latchkeyctl udev-owner /devices/virtual/misc/uhid/0003:1209:0001.0004/hidraw/hidraw3
              udevadm test /sys/class/hidraw/hidraw3     # what the rules make of it
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The node's device path below /sys (udev's %p).", valueName: "devpath"))
    var devpath: String

    @Option(help: ArgumentHelp("Where sysfs is mounted.", valueName: "path"))
    var sysfs = "/sys"

    @Option(
        name: .customLong("vhci-records"),
        help: ArgumentHelp("Where usbip attach records each vhci port's server.", valueName: "path")
    )
    var vhciRecords = "/var/run/vhci_hcd"

    @Option(help: ArgumentHelp("The uhid device whose holders serve uhid keys.", valueName: "path"))
    var uhid = "/dev/uhid"

    @Option(
        name: .customLong("service-user"),
        help: ArgumentHelp("The system service's account, which may name any owner.", valueName: "name")
    )
    var serviceUser = "latchkey"

    @Option(help: ArgumentHelp("How long to wait for a daemon that knows the key.", valueName: "seconds"))
    var wait: Double = 10

    func validate() throws {
        guard wait.isFinite, wait >= 0, wait <= 120 else { throw ValidationError("--wait must be 0 to 120 seconds") }
    }

    func run() throws {
        let origin: KeyDeviceOrigin
        do {
            origin = try KeyDevices.origin(of: devpath, sysfs: sysfs)
        } catch {
            throw CtlError(.notFound, "\(devpath): \(error.message)")
        }
        let deadline = ContinuousClock.now + .milliseconds(Int64(wait * 1000))
        while true {
            let found: (key: String, owner: UInt32)
            do {
                found = try lookUp(origin)
            } catch {
                guard error.code == .notFound, ContinuousClock.now < deadline else { throw error }
                Thread.sleep(forTimeInterval: 0.2)
                continue
            }
            print("LATCHKEY_KEY=\(found.key)")
            print("LATCHKEY_OWNER_UID=\(found.owner)")
            return
        }
    }

    /// The key's name and its node's owner, from the daemon that serves it.
    private func lookUp(_ origin: KeyDeviceOrigin) throws(CtlError) -> (String, UInt32) {
        let (daemons, listenerUID) = try servingDaemons(origin)
        let timeout = Duration.milliseconds(Int64(global.requestTimeout * 1000))
        for daemon in daemons {
            if let listenerUID, daemon.peer.uid != listenerUID { continue }
            guard let keys = try? daemon.keys(timeout: timeout),
                let key = keys.first(where: { $0.serial == origin.serial })
            else { continue }
            guard
                let owner = KeyDevices.nodeOwner(
                    claimed: key.owner?.uid, daemon: daemon.peer.uid, serviceAccount: Accounts.uid(of: serviceUser)
                )
            else {
                throw CtlError(
                    .refused,
                    "\(devpath): the daemon of \(daemon.description) says key \(key.name) belongs to "
                        + "\(Accounts.describe(uid: key.owner?.uid ?? 0)); only root's or \(serviceUser)'s "
                        + "daemon may name another account"
                )
            }
            return (key.name, owner)
        }
        throw CtlError(.notFound, "\(devpath): no daemon serving it knows a key with serial \(origin.serial)")
    }

    /// The daemons that may serve the device, and for USB/IP the uid of the listener they
    /// must run as.
    private func servingDaemons(_ origin: KeyDeviceOrigin) throws(CtlError) -> ([ServingDaemon], UInt32?) {
        switch origin {
        case .uhid:
            return (PeerIdentity.processes(holding: uhid).flatMap(ServingDaemon.of(pid:)), nil)
        case .vhci(_, let usbDevice):
            guard let port = KeyDevices.vhciPort(of: usbDevice, sysfs: sysfs) else {
                throw CtlError(.notFound, "\(devpath): no vhci port holds USB device \(usbDevice)")
            }
            guard let record = KeyDevices.vhciRecord(port: port, directory: vhciRecords) else {
                throw CtlError(.notFound, "\(devpath): usbip recorded no server for vhci port \(port) in \(vhciRecords)")
            }
            guard ["localhost", "::1"].contains(record.host) || record.host.hasPrefix("127.") else {
                throw CtlError(.notFound, "\(devpath): imported from \(record.host), not from this machine")
            }
            let listeners: [TCPSocketRecord]
            do {
                listeners = try PeerIdentity.tcpListeners(port: record.port)
            } catch {
                throw CtlError(.unavailable, "\(devpath): cannot look up the listeners on port \(record.port): \(error)")
            }
            guard let uid = listeners.first?.uid, listeners.allSatisfy({ $0.uid == uid }) else {
                let who = listeners.map(\.holder).joined(separator: "; ")
                throw CtlError(
                    .refused,
                    "\(devpath): port \(record.port) has \(listeners.isEmpty ? "no listener" : "listeners of several accounts: \(who)")"
                )
            }
            let pids = Set(listeners.flatMap { PeerIdentity.processes(holdingSocket: $0.inode) })
            return (pids.sorted().flatMap(ServingDaemon.of(pid:)), uid)
        }
    }
}
