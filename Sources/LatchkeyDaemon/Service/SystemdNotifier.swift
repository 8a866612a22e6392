// sd_notify(3) without libsystemd: one datagram per state change to the
// AF_UNIX socket systemd names in $NOTIFY_SOCKET (an abstract socket when it
// starts with '@'). Nothing happens outside systemd.

import Foundation
import Glibc

/// Talks to systemd's service manager.
struct SystemdNotifier: Sendable {
    let path: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The watchdog interval systemd expects pings within, if any.
    static func watchdogInterval(environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let usec = Int64(text), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], let value = Int32(pid), value != getpid() { return nil }
        return .microseconds(usec)
    }

    /// Sends `state` ("READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=…").
    /// Returns false when there is no socket or the send failed.
    @discardableResult
    func notify(_ state: String) -> Bool {
        guard let path else { return false }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                sendto(descriptor, message, message.count, Int32(MSG_NOSIGNAL), socketAddress, length)
            }
        }
        return sent == message.count
    }
}
