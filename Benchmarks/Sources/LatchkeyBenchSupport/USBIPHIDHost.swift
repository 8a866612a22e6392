// A small blocking USB/IP host for the benchmarks: it imports a key from latchkeyd's USB/IP
// server over loopback TCP and runs CTAPHID transactions on it, with the root package's
// wire types (USBIP for the URBs, CTAPHID for the reports). Every wait is bounded.

import CTAPHID
import Glibc
import LatchkeySystem
import USBIP

/// A blocking TCP connection to 127.0.0.1, with TCP_NODELAY and send and receive timeouts.
final class TCPConnection {
    private let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 16 * 1024)

    /// Connects to 127.0.0.1:`port`; every later send and receive fails after `timeoutSeconds`
    /// without progress.
    init(loopbackPort port: UInt16, timeoutSeconds: Int) throws {
        descriptor = try systemCall("socket") {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        // From here a throw runs deinit, which closes the descriptor.
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        try setOption(SOL_SOCKET, SO_RCVTIMEO, &timeout, "setsockopt(SO_RCVTIMEO)")
        try setOption(SOL_SOCKET, SO_SNDTIMEO, &timeout, "setsockopt(SO_SNDTIMEO)")
        // Without it every small write waits for the previous one's ACK (Nagle), ~40 ms.
        var on: Int32 = 1
        try setOption(Int32(IPPROTO_TCP), TCP_NODELAY, &on, "setsockopt(TCP_NODELAY)")

        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let descriptor = self.descriptor
        // Not restarted on EINTR: the connection attempt goes on, and a second connect()
        // would answer EALREADY. The benchmarks install no signal handlers, so EINTR is a failure.
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 { throw SystemCallError(call: "connect(127.0.0.1:\(port))", errno: errno) }
    }

    deinit { close(descriptor) }

    /// Sends all of `bytes`, however many calls it takes.
    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = try bytes.withUnsafeBytes { raw in
                try timed("send") {
                    try systemCall("send") {
                        Glibc.send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    }
                }
            }
            offset += sent
        }
    }

    /// The next bytes the peer sent (at least one); throws when it closed the connection.
    func receive() throws -> ArraySlice<UInt8> {
        let descriptor = self.descriptor
        let count = try buffer.withUnsafeMutableBytes { raw in
            try timed("recv") { try systemCall("recv") { recv(descriptor, raw.baseAddress, raw.count, 0) } }
        }
        guard count > 0 else { throw BenchFailure("the USB/IP server closed the connection") }
        return buffer[..<count]
    }

    private func setOption<Value: BitwiseCopyable>(_ level: Int32, _ name: Int32, _ value: inout Value, _ call: String)
        throws
    {
        let descriptor = self.descriptor
        let size = socklen_t(MemoryLayout<Value>.size)
        try systemCall(call) { setsockopt(descriptor, level, name, &value, size) }
    }

    /// Names a send or receive timeout (EAGAIN under SO_SNDTIMEO / SO_RCVTIMEO) as one.
    private func timed<Result>(_ call: String, _ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch let error as SystemCallError where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
            throw BenchFailure("\(call) timed out: the USB/IP server stopped answering")
        }
    }
}

/// A USB/IP host attached to one FIDO key, doing what Linux's usbhid does through
/// vhci-hcd: one interrupt-IN URB is always outstanding and is resubmitted as soon as it
/// completes (`hid_irq_in`), and output reports go out one interrupt-OUT URB at a time,
/// each once the one before it is acknowledged (`hid_irq_out`). A round trip therefore
/// costs what it costs a real host: one TCP exchange per report each way.
public final class USBIPHIDHost {
    /// The most a CTAPHID transaction may take, keepalives included.
    static let transactionTimeout = Duration.seconds(10)
    /// The most one send or receive may wait for the server.
    static let socketTimeoutSeconds = 5

    private let connection: TCPConnection
    private var decoder: USBIPClientDecoder
    private let devid: UInt32
    private var nextSeqnum: UInt32 = 1
    private var inputSeqnum: UInt32 = 0
    /// RET_SUBMITs of control and interrupt-OUT URBs, by seqnum, until someone waits for them.
    private var replies: [UInt32: USBIPRetSubmit] = [:]
    private var assembler = CTAPHIDResponseAssembler()
    /// CTAPHID messages reassembled and not yet taken.
    private var messages: [(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8])] = []
    private var channel = CTAPHIDConstants.broadcastChannel

    /// Connects to 127.0.0.1:`port`, imports `busid` and submits the first interrupt-IN URB.
    public init(port: UInt16, busid: String) throws {
        let connection = try TCPConnection(loopbackPort: port, timeoutSeconds: Self.socketTimeoutSeconds)
        try connection.send(USBIPOpReqImport(busid: busid).encodedBytes)
        var decoder = USBIPClientDecoder()
        var message: USBIPClientDecoder.Message?
        let deadline = ContinuousClock.now + Self.transactionTimeout
        while message == nil {
            guard ContinuousClock.now < deadline else {
                throw BenchFailure("no OP_REP_IMPORT within \(Self.transactionTimeout)")
            }
            decoder.append(try connection.receive())
            message = try decoder.next()
        }
        guard case .opRepImport(let reply) = message, let device = reply.device else {
            throw BenchFailure("import of \(busid) refused: \(String(describing: message))")
        }
        guard device.busid == busid else { throw BenchFailure("imported \(device.busid), asked for \(busid)") }
        self.connection = connection
        self.decoder = decoder
        self.devid = device.busnum << 16 | device.devnum
        try submitInputURB()
    }

    /// SET_CONFIGURATION(1), as the host's USB core sends it before binding a driver
    /// (USB 2.0 §9.4.7).
    public func setConfiguration() throws {
        let setup = USBSetupPacket(
            bmRequestType: USBRequestType.standardOutDevice,
            bRequest: USBStandardRequest.setConfiguration,
            wValue: UInt16(FIDOUSBDevice.configurationValue)
        )
        let seqnum = try submit(direction: .out, ep: 0, length: 0, setup: setup)
        let reply = try awaitReply(to: seqnum, before: ContinuousClock.now + Self.transactionTimeout)
        guard reply.status == .success else {
            throw BenchFailure("SET_CONFIGURATION failed with URB status \(reply.status.rawValue)")
        }
    }

    /// Allocates a channel with CTAPHID_INIT on the broadcast channel (CTAP 2.1 §11.2.9.1.3);
    /// later transactions use it.
    public func allocateChannel() throws {
        let nonce: [UInt8] = [0x6C, 0x61, 0x74, 0x63, 0x68, 0x6B, 0x65, 0x79]
        channel = CTAPHIDConstants.broadcastChannel
        let payload = try transact(.initialize, nonce)
        // nonce(8) | CID(4) | CTAPHID protocol version | major | minor | build | capabilities
        guard payload.count >= 17, Array(payload[0..<8]) == nonce else {
            throw BenchFailure("CTAPHID_INIT answered \(payload.count) bytes without our nonce")
        }
        channel = payload[8..<12].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// One CTAP2 request through CTAPHID_CBOR: the command byte and CBOR parameters in, the
    /// status byte and CBOR response out (CTAP 2.1 §11.2.9.1.2).
    public func cbor(_ request: [UInt8]) throws -> [UInt8] {
        precondition(channel != CTAPHIDConstants.broadcastChannel, "allocate a channel first")
        return try transact(.cbor, request)
    }

    /// CTAPHID_PING (CTAP 2.1 §11.2.9.1.4): `payload` out and the same bytes back, the
    /// transport's cost for a message of that size with no command behind it.
    public func ping(_ payload: [UInt8]) throws {
        precondition(channel != CTAPHIDConstants.broadcastChannel, "allocate a channel first")
        guard try transact(.ping, payload) == payload else { throw BenchFailure("CTAPHID_PING echoed other bytes") }
    }

    /// Sends one CTAPHID request and returns the payload of its response, skipping
    /// KEEPALIVEs; a CTAPHID_ERROR or a response of another command is a failure.
    private func transact(_ command: CTAPHIDCommand, _ payload: [UInt8]) throws -> [UInt8] {
        guard messages.isEmpty else { throw BenchFailure("the key sent a CTAPHID message nobody asked for") }
        let deadline = ContinuousClock.now + Self.transactionTimeout
        for report in CTAPHIDPacketizer.fragment(channel: channel, command: command, payload: payload) {
            let seqnum = try submit(direction: .out, ep: 1, length: report.count, data: report)
            let reply = try awaitReply(to: seqnum, before: deadline)
            guard reply.status == .success else {
                throw BenchFailure("interrupt-OUT URB failed with URB status \(reply.status.rawValue)")
            }
        }
        while messages.isEmpty { try receiveMore(before: deadline) }
        let response = messages.removeFirst()
        guard response.channel == channel else {
            throw BenchFailure("a response on channel \(response.channel), asked on \(channel)")
        }
        guard response.command == command else {
            let detail = response.command == .error ? " 0x\(String(response.payload.first ?? 0, radix: 16))" : ""
            throw BenchFailure("CTAPHID \(command) answered with \(response.command)\(detail)")
        }
        return response.payload
    }

    private func submit(
        direction: USBIPDirection,
        ep: UInt8,
        length: Int,
        setup: USBSetupPacket = USBSetupPacket(),
        data: [UInt8] = []
    ) throws -> UInt32 {
        let command = USBIPCmdSubmit(
            seqnum: nextSeqnum,
            devid: devid,
            direction: direction,
            ep: ep,
            transferBufferLength: Int32(length),
            setup: setup,
            transferBuffer: data
        )
        nextSeqnum += 1
        decoder.expectReply(to: command)
        try connection.send(command.encodedBytes)
        return command.seqnum
    }

    private func submitInputURB() throws {
        inputSeqnum = try submit(direction: .in, ep: 1, length: CTAPHIDConstants.reportSize)
    }

    private func awaitReply(to seqnum: UInt32, before deadline: ContinuousClock.Instant) throws -> USBIPRetSubmit {
        while true {
            if let reply = replies.removeValue(forKey: seqnum) { return reply }
            try receiveMore(before: deadline)
        }
    }

    /// Reads what the server sent next and handles every whole message in it.
    private func receiveMore(before deadline: ContinuousClock.Instant) throws {
        guard ContinuousClock.now < deadline else {
            throw BenchFailure("no CTAPHID response within \(Self.transactionTimeout)")
        }
        decoder.append(try connection.receive())
        while let message = try decoder.next() {
            guard case .retSubmit(let reply) = message else {
                throw BenchFailure("the server sent \(message) to a host that unlinks nothing")
            }
            guard reply.seqnum == inputSeqnum else {
                replies[reply.seqnum] = reply
                continue
            }
            guard reply.status == .success else {
                throw BenchFailure("interrupt-IN URB failed with URB status \(reply.status.rawValue)")
            }
            try submitInputURB()
            switch assembler.receive(reply.transferBuffer) {
            case nil, .keepalive:
                break
            case .message(let channel, let command, let payload):
                messages.append((channel, command, payload))
            case .error:
                throw BenchFailure("the key sent a report that breaks CTAPHID framing")
            }
        }
    }
}
