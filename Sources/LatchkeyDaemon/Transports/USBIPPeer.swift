// Who is on the other end of a USB/IP connection, as the kernel tells it, and
// what the access rules (LatchkeyCore/Keys/Access.swift) make of that: the devlist shows,
// and OP_REQ_IMPORT accepts, only keys whose `attach` tier the peer holds.
//
// At accept, NETLINK_SOCK_DIAG looks up the socket at the other end of the
// connection by its addresses (LatchkeySystem/PeerIdentity.swift):
//
// - found: a process of this machine, whichever address it connected to
//   (loopback, or one of the machine's own): the uid that opened that socket
//   is the caller. Its pid and executable are looked up later, off the event
//   loop, for prompts (`Requester`), where the daemon may read /proc.
// - not found, from a loopback address: the peer's socket went away, or lives
//   in another network namespace; nobody the rules know, so no key.
// - not found, from another address: another host, which only a listener
//   beyond loopback (`[usbip] allow-remote = true`) lets in. It acts as the
//   account that runs the daemon, the one that chose to open the port: it may
//   attach the keys that account may attach (its own; every key for a root
//   daemon) and never another owner's. docs/security.md says so.

import LatchkeyCore
import LatchkeySystem
import Logging
import NIOCore

/// The far end of a USB/IP connection.
struct USBIPPeer: Sendable {
    enum Kind: String, Sendable {
        /// A process on this machine; `caller` is its socket's uid.
        case local
        /// Loopback, but no socket the kernel could find.
        case unidentified
        /// Another host (allow-remote); `caller` is the daemon's own account.
        case remote
    }

    var kind: Kind
    /// Whom the access rules see.
    var caller: Caller
    /// The peer's socket inode (local peers), for finding its process.
    var inode: UInt32?
    /// "127.0.0.1:45678", for logs and prompts.
    var address: String

    /// A caller no rule grants anything: (uid_t)-1, which no process runs as and no key
    /// is owned by.
    static let nobody = Caller(uid: .max)

    /// Identifies the peer of a connection whose ends are `local` (the daemon's) and
    /// `remote`; a failing lookup is logged and leaves the peer unidentified.
    static func identify(local: SocketAddress?, remote: SocketAddress?, logger: Logger) -> USBIPPeer {
        let address = remote.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "?"
        guard let localEnd = endpoint(local), let remoteEnd = endpoint(remote) else {
            return USBIPPeer(kind: .unidentified, caller: nobody, address: address)
        }
        do {
            if let record = try PeerIdentity.tcpPeer(local: localEnd, remote: remoteEnd) {
                return USBIPPeer(kind: .local, caller: Caller(uid: record.uid), inode: record.inode, address: address)
            }
        } catch {
            logger.warning("cannot look up a USB/IP peer", metadata: ["peer": "\(address)", "error": "\(error)"])
            return USBIPPeer(kind: .unidentified, caller: nobody, address: address)
        }
        if remoteEnd.isLoopback {
            return USBIPPeer(kind: .unidentified, caller: nobody, address: address)
        }
        return USBIPPeer(kind: .remote, caller: Caller.daemon, address: address)
    }

    private static func endpoint(_ address: SocketAddress?) -> SocketEndpoint? {
        guard let address, let text = address.ipAddress, let port = address.port else { return nil }
        return SocketEndpoint(ipAddress: text, port: port)
    }

    /// Whether the peer may import (and so see) a key owned by `owner`.
    func mayAttach(owner: UInt32) -> Bool {
        AccessRules.allows(.attach, caller: caller, owner: owner)
    }

    /// Why the peer may not import `key`, nil when it may.
    func refusal(of key: VirtualKey) -> AccessRefusal? {
        do {
            try AccessRules.check(.attach, caller: caller, key: key.configuration.name.rawValue, owner: key.owner)
            return nil
        } catch {
            return error
        }
    }

    /// The requester for prompts and events, with the peer's process where this daemon
    /// may see it. Reads /proc: call it off the event loop.
    func requester() -> Requester {
        guard kind == .local, let inode else { return Requester(transport: .usbip, address: address) }
        var caller = self.caller
        caller.pid = PeerIdentity.processes(holdingSocket: inode).first
        return Requester(
            transport: .usbip, caller: caller, executable: caller.pid.flatMap(PeerIdentity.executable(of:)),
            address: address
        )
    }

    /// The journal's metadata about the peer.
    var metadata: Logger.Metadata {
        ["peer": "\(address)", "peer-kind": "\(kind.rawValue)", "uid": "\(kind == .unidentified ? "unknown" : "\(caller.uid)")"]
    }
}
