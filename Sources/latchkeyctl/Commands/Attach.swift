// `latchkeyctl attach KEY`: root's `usbip attach` of a key, checked first.
// Whoever listens on the USB/IP port receives root's import, and the port is
// unprivileged: a squatter that bound it before the daemon (or beside it, on
// the other address family) would get the host's registrations (issue 24). So
// before running usbip, this asks the kernel who the daemon is (SO_PEERCRED on
// its control socket: uid and pid) and who listens on the key's port
// (NETLINK_SOCK_DIAG): every listener must be the daemon's account, and, where
// root can see it, the daemon's own process. Only then does usbip connect.
// What remains is the moment between the check and usbip's connect: the
// daemon would have to die and a stranger bind the port within it.

import ArgumentParser
import Foundation
import LatchkeyContract
import LatchkeySystem

struct Attach: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Attach a key over USB/IP (usbip attach), once the kernel says the daemon holds its port.",
        discussion: """
            For root, in place of `usbip attach -r HOST -b BUSID`: it finds the key's bus id and \
            USB/IP address through the control API, checks that every socket listening on that \
            port belongs to the daemon answering on the control socket (its account, and its \
            process where root can see it), then runs usbip. If anything else listens on the \
            port it names it and attaches nothing.

            Examples:
              sudo latchkeyctl attach default
              sudo latchkeyctl --socket /run/user/1000/latchkeyd/control.sock attach alice
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The key's name.", valueName: "key"), transform: KeyName.argument)
    var key: KeyName

    @Option(help: ArgumentHelp("The usbip program.", valueName: "path"))
    var usbip = "usbip"

    func run() throws {
        let client = global.client()
        let daemon = try ServingDaemon(socket: client.socket.path)
        let document = try client.get(ControlPath.key(key)).decode(DeviceKey.self)
        guard let export = document.usbip else {
            throw CtlError(.refused, "key \(key.quoted) is not exported over USB/IP")
        }
        let (host, port) = try Self.connectAddress(export.listen)
        try Self.checkListeners(port: port, daemon: daemon)
        let arguments = ["--tcp-port", String(port), "attach", "-r", host, "-b", export.busid]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.locate(usbip))
        process.arguments = arguments
        do {
            try process.run()
        } catch {
            throw CtlError(.unavailable, "cannot run \(usbip): \(error.localizedDescription)")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CtlError(.refused, "\(usbip) \(arguments.joined(separator: " ")) failed (exit \(process.terminationStatus))")
        }
        print("Attached key \(key.quoted) (bus id \(export.busid), served by \(daemon.description) on \(host):\(port)).")
    }

    /// Where usbip connects for a listener on `listen` ("127.0.0.1:3240", "[::1]:3240",
    /// "0.0.0.0:3240").
    static func connectAddress(_ listen: String) throws(CtlError) -> (host: String, port: UInt16) {
        let host: Substring
        let port: Substring
        if listen.hasPrefix("["), let close = listen.firstIndex(of: "]") {
            host = listen[listen.index(after: listen.startIndex)..<close]
            port = listen[listen.index(after: close)...].dropFirst()
        } else if let colon = listen.lastIndex(of: ":") {
            host = listen[..<colon]
            port = listen[listen.index(after: colon)...]
        } else {
            throw CtlError(.internalError, "latchkeyd listens for USB/IP on \"\(listen)\", which has no port")
        }
        guard let number = UInt16(port), number > 0 else {
            throw CtlError(.internalError, "latchkeyd listens for USB/IP on \"\(listen)\", which has no port")
        }
        switch host {
        case "0.0.0.0": return ("127.0.0.1", number)
        case "::": return ("::1", number)
        default: return (String(host), number)
        }
    }

    /// Refuses unless every listener on `port` is the daemon's.
    static func checkListeners(port: UInt16, daemon: ServingDaemon) throws(CtlError) {
        let listeners: [TCPSocketRecord]
        do {
            listeners = try PeerIdentity.tcpListeners(port: port)
        } catch {
            throw CtlError(.unavailable, "cannot look up who listens on port \(port): \(error)")
        }
        guard !listeners.isEmpty else {
            throw CtlError(.unavailable, "nothing listens on port \(port), where latchkeyd (\(daemon.description)) said it serves USB/IP")
        }
        for listener in listeners {
            let holders = PeerIdentity.processes(holdingSocket: listener.inode)
            // Another account, or (where root sees the holders) another process of the daemon's account.
            guard listener.uid == daemon.peer.uid, holders.isEmpty || holders.contains(daemon.peer.pid) else {
                throw CtlError(
                    .refused,
                    "not attaching: port \(port) is also held by \(listener.holder) on \(listener.local), not by "
                        + "latchkeyd (\(daemon.description)); whoever holds it would receive this import. Stop "
                        + "that process, or move latchkeyd to a port nobody else holds"
                )
            }
        }
    }

    /// `program` as a path: itself when it has a slash, else found in $PATH.
    static func locate(_ program: String) throws(CtlError) -> String {
        if program.contains("/") { return program }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(program)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw CtlError(.unavailable, "\(program) is not in $PATH (apt-get install usbip)")
    }
}
