// PeerIdentity against the kernel itself: a socket pair, a loopback TCP
// connection and a listener this process made, so the expected uid, pid and
// inode are known.

import Foundation
import Glibc
import Testing

@testable import LatchkeySystem

@Suite struct PeerIdentityTests {
    @Test("SO_PEERCRED names this process on a socket pair") func socketPair() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { pair.forEach { close($0) } }
        let peer = try PeerIdentity.unixPeer(of: pair[0])
        #expect(peer == PeerCredentials(uid: getuid(), gid: getgid(), pid: getpid()))
    }

    @Test("sock_diag names the uid and inode of a loopback connection's other end and its listener") func loopback()
        throws
    {
        let listener = try LoopbackListener()
        defer { close(listener.descriptor) }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        var address = listener.address
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected == 0)
        let server = accept(listener.descriptor, nil, nil)
        defer { close(server) }
        let (local, remote) = (try endpoint(server, peer: false), try endpoint(server, peer: true))
        let record = try #require(try PeerIdentity.tcpPeer(local: local, remote: remote))
        #expect(record.uid == getuid())
        #expect(record.local == remote && record.remote == local)
        #expect(record.inode == inode(client))
        #expect(PeerIdentity.processes(holdingSocket: record.inode).contains(getpid()))
        #expect(PeerIdentity.executable(of: getpid()) != nil)

        let listeners = try PeerIdentity.tcpListeners(port: local.port)
        #expect(listeners.map(\.uid) == [getuid()])
        #expect(listeners.map(\.inode) == [inode(listener.descriptor)])
    }

    @Test("a dual-stack listener's IPv4-mapped view of an IPv4 client still finds the client") func mapped() throws {
        let listener = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var off: Int32 = 0
        setsockopt(listener, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &off, socklen_t(MemoryLayout<Int32>.size))
        var any = sockaddr_in6()
        any.sin6_family = sa_family_t(AF_INET6)
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let bound = withUnsafeMutablePointer(to: &any) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        address.sin_port = any.sin6_port
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let server = accept(listener, nil, nil)
        defer { close(server) }
        let (local, remote) = (try endpoint(server, peer: false), try endpoint(server, peer: true))
        #expect(local.unmappedIPv4?.isIPv4 == true && remote.isLoopback)
        let record = try #require(try PeerIdentity.tcpPeer(local: local, remote: remote))
        #expect(record.inode == inode(client) && record.uid == getuid())
    }

    @Test("the processes holding a file open are found through /proc") func holders() throws {
        let path = FileManager.default.temporaryDirectory.path + "/latchkey-holder-\(getpid())"
        let descriptor = open(path, O_RDWR | O_CREAT, 0o600)
        defer {
            close(descriptor)
            unlink(path)
        }
        #expect(PeerIdentity.processes(holding: path) == [getpid()])
    }

    @Test("a peer that closed first, lingering in TIME_WAIT with uid 0, is no peer") func timeWait() throws {
        let listener = try LoopbackListener()
        defer { close(listener.descriptor) }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = listener.address
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let server = accept(listener.descriptor, nil, nil)
        let (local, remote) = (try endpoint(server, peer: false), try endpoint(server, peer: true))
        #expect(try PeerIdentity.tcpPeer(local: local, remote: remote) != nil)
        // The client closes first and, once the server has closed too, waits in TIME_WAIT.
        close(client)
        close(server)
        usleep(100_000)
        #expect(try PeerIdentity.tcpPeer(local: local, remote: remote) == nil)
    }

    @Test("a connection that does not exist has no peer") func missing() throws {
        let local = try #require(SocketEndpoint(ipAddress: "127.0.0.1", port: 1))
        let remote = try #require(SocketEndpoint(ipAddress: "127.0.0.1", port: 2))
        #expect(try PeerIdentity.tcpPeer(local: local, remote: remote) == nil)
    }

    @Test(
        "loopback addresses are told apart",
        arguments: [
            ("127.0.0.1", true), ("127.3.4.5", true), ("::1", true), ("::ffff:127.0.0.1", true),
            ("10.0.0.1", false), ("::2", false), ("::ffff:10.0.0.1", false),
        ]
    )
    func loopbackAddresses(text: String, loopback: Bool) throws {
        let endpoint = try #require(SocketEndpoint(ipAddress: text, port: 3240))
        #expect(endpoint.isLoopback == loopback)
    }

    @Test("endpoints print as the address and port") func printing() throws {
        #expect(SocketEndpoint(ipAddress: "127.0.0.1", port: 3240)?.description == "127.0.0.1:3240")
        #expect(SocketEndpoint(ipAddress: "::1", port: 80)?.description == "[::1]:80")
        #expect(SocketEndpoint(ipAddress: "localhost", port: 80) == nil)
    }
}

private struct LoopbackListener {
    var descriptor: Int32
    var address: sockaddr_in

    init() throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var bound = address
        let result = withUnsafePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(result == 0 && listen(descriptor, 4) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
    }
}

/// A socket's own (or its peer's) address, IPv4 or IPv6.
private func endpoint(_ descriptor: Int32, peer: Bool) throws -> SocketEndpoint {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            peer ? getpeername(descriptor, $0, &length) : getsockname(descriptor, $0, &length)
        }
    }
    let endpoint = withUnsafeBytes(of: storage) { raw -> SocketEndpoint? in
        if storage.ss_family == sa_family_t(AF_INET) {
            let address = raw.load(as: sockaddr_in.self)
            return SocketEndpoint(
                address: withUnsafeBytes(of: address.sin_addr) { Array($0) }, port: UInt16(bigEndian: address.sin_port))
        }
        let address = raw.load(as: sockaddr_in6.self)
        return SocketEndpoint(
            address: withUnsafeBytes(of: address.sin6_addr) { Array($0) }, port: UInt16(bigEndian: address.sin6_port))
    }
    return try #require(endpoint)
}

private func inode(_ descriptor: Int32) -> UInt32 {
    var status = stat()
    fstat(descriptor, &status)
    return UInt32(truncatingIfNeeded: status.st_ino)
}
