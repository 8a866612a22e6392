// Who is on the other end of a local socket, as the kernel tells it:
// SO_PEERCRED for a Unix stream socket (socket(7), unix(7)); for a TCP
// connection on this machine, NETLINK_SOCK_DIAG's inet_diag (sock_diag(7))
// gives the uid that opened the peer's socket and its inode; /proc maps an
// inode to the processes holding it, where the caller may look. The daemon
// and latchkey-webdriver use it to know whose connection they serve, and
// latchkeyctl to check who listens on a port before root attaches it.
//
// The netlink structures (linux/netlink.h, linux/sock_diag.h,
// linux/inet_diag.h) are written and read by offset here: they are fixed
// by the kernel's ABI, and Glibc does not import the inet_diag headers.

import Glibc

/// What SO_PEERCRED says about the process that connected a Unix socket.
public struct PeerCredentials: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32

    public init(uid: UInt32, gid: UInt32, pid: Int32) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }
}

/// An IPv4 or IPv6 address and a port.
public struct SocketEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6), network order.
    public var address: [UInt8]
    public var port: UInt16

    public init?(address: [UInt8], port: UInt16) {
        guard address.count == 4 || address.count == 16 else { return nil }
        self.address = address
        self.port = port
    }

    /// Parses a numeric address ("127.0.0.1", "::1"); nil for anything else.
    public init?(ipAddress text: String, port: Int) {
        guard let port = UInt16(exactly: port) else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.address = withUnsafeBytes(of: &v4) { Array($0) }
            self.port = port
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self.address = withUnsafeBytes(of: &v6) { Array($0) }
            self.port = port
            return
        }
        return nil
    }

    public var isIPv4: Bool { address.count == 4 }

    /// The IPv4 endpoint an IPv4-mapped IPv6 one (::ffff:a.b.c.d, what a dual-stack socket
    /// sees of an IPv4 peer) stands for; nil for any other.
    public var unmappedIPv4: SocketEndpoint? {
        guard !isIPv4, address.prefix(10).allSatisfy({ $0 == 0 }), address[10] == 0xff, address[11] == 0xff else {
            return nil
        }
        return SocketEndpoint(address: Array(address[12...]), port: port)
    }

    /// Whether the address is loopback (127.0.0.0/8, ::1, or ::ffff:127.x.x.x).
    public var isLoopback: Bool {
        if isIPv4 { return address[0] == 127 }
        if address == [UInt8](repeating: 0, count: 15) + [1] { return true }
        return unmappedIPv4?.isLoopback ?? false
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = isIPv4 ? AF_INET : AF_INET6
        let text = address.withUnsafeBytes { bytes in
            guard inet_ntop(family, bytes.baseAddress, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return isIPv4 ? "\(text):\(port)" : "[\(text)]:\(port)"
    }
}

/// A TCP socket as inet_diag reports it.
public struct TCPSocketRecord: Sendable, Equatable {
    /// The uid that opened the socket.
    public var uid: UInt32
    /// Its inode (the number in /proc/PID/fd's `socket:[N]`).
    public var inode: UInt32
    public var local: SocketEndpoint
    public var remote: SocketEndpoint
    /// The TCP state (linux/tcp_states.h: 1 established, 10 listen).
    public var state: UInt8
}

/// Lookups of local peers.
public enum PeerIdentity {
    /// SO_PEERCRED of a connected Unix stream socket: the process that connected it, as it
    /// was at connect(2).
    public static func unixPeer(of descriptor: Int32) throws(SystemCallError) -> PeerCredentials {
        // struct ucred (socket(7)): pid, uid, gid; Glibc imports it only under _GNU_SOURCE.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        try SystemCall.run("getsockopt(SO_PEERCRED)") {
            getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length)
        }
        return PeerCredentials(uid: credentials.1, gid: credentials.2, pid: credentials.0)
    }

    /// The socket at the other end of a TCP connection on this machine: `local` and
    /// `remote` are the connection's ends as the caller's socket sees them (its own
    /// address first). Nil when the kernel knows no such socket (the peer is another host,
    /// or it closed). A dual-stack listener sees an IPv4 peer at IPv4-mapped addresses; the
    /// peer's own socket may be IPv4, so that is asked too. A peer that closed and lingers
    /// in TIME_WAIT is no peer: the kernel reports such a socket with uid 0 (and no inode),
    /// which would read as root.
    public static func tcpPeer(local: SocketEndpoint, remote: SocketEndpoint) throws(SystemCallError)
        -> TCPSocketRecord?
    {
        guard local.isIPv4 == remote.isIPv4 else { return nil }
        // The peer's socket has the two ends the other way round.
        let request = inetDiagRequest(
            family: local.isIPv4 ? UInt8(AF_INET) : UInt8(AF_INET6),
            states: ~(1 << tcpTimeWait | 1 << tcpNewSynRecv),
            dump: false,
            source: remote,
            destination: local
        )
        if let found = try query(request).first(where: { $0.inode != 0 }) { return found }
        guard let local = local.unmappedIPv4, let remote = remote.unmappedIPv4 else { return nil }
        return try tcpPeer(local: local, remote: remote)
    }

    /// The TCP sockets listening on `port`, on any address.
    public static func tcpListeners(port: UInt16) throws(SystemCallError) -> [TCPSocketRecord] {
        var found: [TCPSocketRecord] = []
        for family in [UInt8(AF_INET), UInt8(AF_INET6)] {
            let any = SocketEndpoint(address: [UInt8](repeating: 0, count: family == UInt8(AF_INET) ? 4 : 16), port: 0)!
            let request = inetDiagRequest(
                family: family,
                states: 1 << tcpListen,
                dump: true,
                source: any,
                destination: any
            )
            found += try query(request).filter { $0.local.port == port }
        }
        return found
    }

    /// The processes holding the socket with `inode` open, as far as this process may read
    /// their /proc/PID/fd (its own uid's, or every one as root).
    public static func processes(holdingSocket inode: UInt32) -> [Int32] {
        processes(holding: "socket:[\(inode)]")
    }

    /// The processes with a descriptor whose /proc/PID/fd link reads `target` (a path such as
    /// "/dev/uhid", or "socket:[INODE]"), as far as this process may read their /proc/PID/fd.
    public static func processes(holding target: String) -> [Int32] {
        directoryEntries("/proc").compactMap(Int32.init).filter { pid in
            directoryEntries("/proc/\(pid)/fd").contains { readLink("/proc/\(pid)/fd/\($0)") == target }
        }
    }

    /// /proc/PID/exe, when this process may read it.
    public static func executable(of pid: Int32) -> String? {
        readLink("/proc/\(pid)/exe")
    }

    // MARK: - inet_diag

    /// linux/tcp_states.h TCP_LISTEN, TCP_TIME_WAIT, TCP_NEW_SYN_RECV.
    static let tcpListen: UInt32 = 10
    static let tcpTimeWait: UInt32 = 6
    static let tcpNewSynRecv: UInt32 = 12
    /// linux/netlink.h NETLINK_SOCK_DIAG.
    static let netlinkSockDiag: Int32 = 4
    /// linux/sock_diag.h SOCK_DIAG_BY_FAMILY.
    static let sockDiagByFamily: UInt16 = 20
    /// linux/netlink.h NLMSG_ERROR, NLMSG_DONE, NLM_F_REQUEST, NLM_F_DUMP.
    static let nlmsgError: UInt16 = 2
    static let nlmsgDone: UInt16 = 3
    static let nlmFRequest: UInt16 = 0x1
    static let nlmFDump: UInt16 = 0x300
    /// linux/inet_diag.h INET_DIAG_NOCOOKIE.
    static let noCookie: UInt32 = ~0
    /// sizeof(struct nlmsghdr), sizeof(struct inet_diag_req_v2), sizeof(struct inet_diag_msg).
    static let headerSize = 16
    static let requestSize = 56
    static let messageSize = 72

    /// An inet_diag_req_v2 for TCP in a netlink message.
    static func inetDiagRequest(
        family: UInt8,
        states: UInt32,
        dump: Bool,
        source: SocketEndpoint,
        destination: SocketEndpoint
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerSize + requestSize)
        appendLittle(UInt32(headerSize + requestSize), to: &bytes)  // nlmsg_len
        appendLittle(sockDiagByFamily, to: &bytes)  // nlmsg_type
        appendLittle(nlmFRequest | (dump ? nlmFDump : 0), to: &bytes)  // nlmsg_flags
        appendLittle(UInt32(1), to: &bytes)  // nlmsg_seq
        appendLittle(UInt32(0), to: &bytes)  // nlmsg_pid
        bytes += [family, UInt8(IPPROTO_TCP), 0, 0]  // sdiag_family, sdiag_protocol, idiag_ext, pad
        appendLittle(states, to: &bytes)  // idiag_states
        // inet_diag_sockid: ports big-endian, addresses in network order, padded to 16 bytes.
        bytes += [UInt8(source.port >> 8), UInt8(source.port & 0xff)]
        bytes += [UInt8(destination.port >> 8), UInt8(destination.port & 0xff)]
        bytes += source.address + [UInt8](repeating: 0, count: 16 - source.address.count)
        bytes += destination.address + [UInt8](repeating: 0, count: 16 - destination.address.count)
        appendLittle(UInt32(0), to: &bytes)  // idiag_if
        appendLittle(noCookie, to: &bytes)  // idiag_cookie
        appendLittle(noCookie, to: &bytes)
        return bytes
    }

    /// Sends one request on a fresh NETLINK_SOCK_DIAG socket and reads every record of the answer.
    static func query(_ request: [UInt8]) throws(SystemCallError) -> [TCPSocketRecord] {
        let descriptor = try SystemCall.run("socket(AF_NETLINK)") {
            socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        }
        defer { SystemCall.close(descriptor) }
        // struct sockaddr_nl (netlink(7)) of the kernel: nl_family, pad, nl_pid 0, nl_groups 0.
        var kernel = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: UInt16(AF_NETLINK).littleEndian) { kernel.replaceSubrange(0..<2, with: $0) }
        try SystemCall.run("sendto(NETLINK_SOCK_DIAG)") {
            request.withUnsafeBytes { bytes in
                kernel.withUnsafeBytes { address in
                    sendto(
                        descriptor,
                        bytes.baseAddress,
                        bytes.count,
                        0,
                        address.baseAddress?.assumingMemoryBound(to: sockaddr.self),
                        socklen_t(address.count)
                    )
                }
            }
        }
        var records: [TCPSocketRecord] = []
        var buffer = [UInt8](repeating: 0, count: 32768)
        while true {
            let count = try SystemCall.run("recv(NETLINK_SOCK_DIAG)") {
                buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            }
            var offset = 0
            while offset + headerSize <= count {
                let length = Int(readLittle(UInt32.self, buffer, offset))
                let type = readLittle(UInt16.self, buffer, offset + 4)
                guard length >= headerSize, offset + length <= count else { return records }
                switch type {
                case nlmsgDone:
                    return records
                case nlmsgError:
                    // An exact lookup that found nothing answers ENOENT.
                    let code = -Int32(bitPattern: readLittle(UInt32.self, buffer, offset + headerSize))
                    if code == 0 || code == ENOENT { return records }
                    throw SystemCallError(call: "NETLINK_SOCK_DIAG", errno: code)
                case sockDiagByFamily where length >= headerSize + messageSize:
                    if let record = record(buffer, at: offset + headerSize) { records.append(record) }
                default:
                    break
                }
                offset += (length + 3) & ~3
            }
            // An exact lookup answers in one message, without NLMSG_DONE.
            if request.count > 6, readLittle(UInt16.self, request, 6) & nlmFDump == 0 { return records }
        }
    }

    /// An inet_diag_msg at `offset`.
    static func record(_ bytes: [UInt8], at offset: Int) -> TCPSocketRecord? {
        let family = bytes[offset]
        let size = family == UInt8(AF_INET) ? 4 : 16
        let id = offset + 4
        let sport = UInt16(bytes[id]) << 8 | UInt16(bytes[id + 1])
        let dport = UInt16(bytes[id + 2]) << 8 | UInt16(bytes[id + 3])
        guard
            let local = SocketEndpoint(address: Array(bytes[(id + 4)..<(id + 4 + size)]), port: sport),
            let remote = SocketEndpoint(address: Array(bytes[(id + 20)..<(id + 20 + size)]), port: dport)
        else { return nil }
        return TCPSocketRecord(
            uid: readLittle(UInt32.self, bytes, offset + 64),
            inode: readLittle(UInt32.self, bytes, offset + 68),
            local: local,
            remote: remote,
            state: bytes[offset + 1]
        )
    }

    private static func appendLittle<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    private static func readLittle<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], _ offset: Int) -> T {
        var value = T.zero
        for index in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + index]) << (8 * index) }
        return value
    }
}
