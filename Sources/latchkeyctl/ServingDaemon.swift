// A latchkeyd as the kernel names it, for the commands that act for root on a
// device (`udev-owner`, `attach`): the uid and pid behind a control socket
// (SO_PEERCRED), the control sockets a process listens on, and its keys as
// root sees them (root holds `see` on every key). Nothing here trusts what a
// file or a socket path claims about who serves it.

import Foundation
import Glibc
import LatchkeyContract
import LatchkeySystem

/// A key as these commands need it: from GET /v1/keys (and /v1/keys/NAME).
struct DeviceKey: Decodable {
    struct Owner: Decodable {
        var uid: UInt32
    }

    struct USBIP: Decodable {
        var busid: String
        var listen: String
    }

    var name: String
    /// 32 hex digits.
    var aaguid: String
    /// Absent from a daemon before owners: its keys are the daemon's own.
    var owner: Owner?
    var usbip: USBIP?

    /// The serial number hosts see (VirtualKey.serialNumber).
    var serial: String { String("latchkey-\(aaguid.prefix(8))-\(name)".prefix(63)) }
}

/// One daemon's control socket, and who answers on it.
struct ServingDaemon {
    var socket: String
    var peer: PeerCredentials

    /// Connects to `socket` to ask the kernel who listens on it.
    init(socket: String) throws(CtlError) {
        self.socket = socket
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw CtlError(.internalError, "socket(AF_UNIX): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(socket.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw CtlError(.usage, "the socket path \(socket) is too long for a Unix socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            throw CtlError(.unavailable, "cannot connect to \(socket): \(String(cString: strerror(errno)))")
        }
        do {
            peer = try PeerIdentity.unixPeer(of: descriptor)
        } catch {
            throw CtlError(.unavailable, "cannot tell who listens on \(socket): \(error)")
        }
    }

    /// The daemons process `pid` serves: its listening Unix sockets (reached through
    /// /proc/PID/root) that the same process answers on.
    static func of(pid: Int32) -> [ServingDaemon] {
        ListeningUnixSockets.of(pid: pid).compactMap { socket in
            guard let daemon = try? ServingDaemon(socket: socket), daemon.peer.pid == pid else { return nil }
            return daemon
        }
    }

    /// Its keys.
    func keys(timeout: Duration) throws(CtlError) -> [DeviceKey] {
        let location = SocketLocation.resolve(option: socket, environment: [:], exists: { _ in false })
        let client = ControlClient(socket: location, timeout: timeout)
        return try client.get(ControlPath.keys).decode([DeviceKey].self)
    }

    /// "uid 998 (latchkey), pid 812".
    var description: String { "\(Accounts.describe(uid: peer.uid)), pid \(peer.pid)" }
}
