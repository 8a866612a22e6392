// A small USB/IP host for the benchmarks: it imports a key from latchkeyd's USB/IP server
// over loopback TCP and runs CTAPHID transactions on it, on one channel or on several from
// several threads, with the root package's wire types (USBIP for the URBs, CTAPHID for the
// reports). Every wait is bounded.

import CTAPHID
import Foundation
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

    /// Ends both directions, which wakes a thread blocked in `receive`.
    func shutdown() { _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR)) }

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
            throw TimedOut(call: call)
        }
    }
}

/// A send or receive that made no progress for the connection's timeout.
struct TimedOut: Error, CustomStringConvertible {
    var call: String
    var description: String { "\(call) timed out: the USB/IP server stopped answering" }
}


/// A USB/IP host attached to one FIDO key, doing what Linux's usbhid does through
/// vhci-hcd: one interrupt-IN URB is always outstanding and is resubmitted as soon as it
/// completes (`hid_irq_in`), and output reports go out one interrupt-OUT URB at a time,
/// each once the one before it is acknowledged (`hid_irq_out`), whichever channel they
/// belong to. A round trip therefore costs what it costs a real host: one TCP exchange per
/// report each way. A thread of the host's reads what the server sends; transactions run on
/// the calling threads, one at a time per channel, so several threads with a channel each
/// share the key as several programs on one machine do.
public final class USBIPHIDHost {
    /// The most a CTAPHID transaction may take, keepalives and busy retries included.
    static let transactionTimeout = Duration.seconds(10)
    /// The most one send may wait for the server.
    static let socketTimeoutSeconds = 5

    private let link: USBIPHIDLink
    /// The channel `cbor` and `ping` use, once `allocateChannel` has made it.
    private var channel: USBIPHIDChannel?

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
        link = try USBIPHIDLink(connection: connection, decoder: decoder, devid: device.busnum << 16 | device.devnum)
    }

    /// The reading thread stops and the connection closes, which detaches the key.
    deinit { link.close() }

    /// SET_CONFIGURATION(1), as the host's USB core sends it before binding a driver
    /// (USB 2.0 §9.4.7).
    public func setConfiguration() throws {
        let setup = USBSetupPacket(
            bmRequestType: USBRequestType.standardOutDevice,
            bRequest: USBStandardRequest.setConfiguration,
            wValue: UInt16(FIDOUSBDevice.configurationValue)
        )
        let reply = try link.submitOutput(ep: 0, setup: setup, before: ContinuousClock.now + Self.transactionTimeout)
        guard reply.status == .success else {
            throw BenchFailure("SET_CONFIGURATION failed with URB status \(reply.status.rawValue)")
        }
    }

    /// Allocates a channel with CTAPHID_INIT on the broadcast channel (CTAP 2.1 §11.2.9.1.3).
    /// Channels are allocated one at a time (the broadcast channel's answers are told apart
    /// by nonce, and this host sends one nonce).
    public func openChannel() throws -> USBIPHIDChannel {
        let nonce: [UInt8] = [0x6C, 0x61, 0x74, 0x63, 0x68, 0x6B, 0x65, 0x79]
        let broadcast = USBIPHIDChannel(link: link, id: CTAPHIDConstants.broadcastChannel)
        let payload = try broadcast.transact(.initialize, nonce)
        // nonce(8) | CID(4) | CTAPHID protocol version | major | minor | build | capabilities
        guard payload.count >= 17, Array(payload[0..<8]) == nonce else {
            throw BenchFailure("CTAPHID_INIT answered \(payload.count) bytes without our nonce")
        }
        return USBIPHIDChannel(link: link, id: payload[8..<12].reduce(0) { $0 << 8 | UInt32($1) })
    }

    /// Allocates the channel that `cbor` and `ping` use.
    public func allocateChannel() throws { channel = try openChannel() }

    /// `cbor` on the channel `allocateChannel` made.
    public func cbor(_ request: [UInt8]) throws -> [UInt8] { try allocated().cbor(request) }

    /// `ping` on the channel `allocateChannel` made.
    public func ping(_ payload: [UInt8]) throws { try allocated().ping(payload) }

    private func allocated() throws -> USBIPHIDChannel {
        guard let channel else { throw BenchFailure("allocate a channel first") }
        return channel
    }
}

/// One CTAPHID channel of a host: its transactions run one at a time, from any one thread.
public final class USBIPHIDChannel: @unchecked Sendable {
    let link: USBIPHIDLink
    /// The channel ID the key allocated.
    public let id: UInt32
    /// How many times the key answered CTAPHID_ERROR(CHANNEL_BUSY) because another channel's
    /// transaction was in progress; each was retried after a millisecond, as libfido2 does.
    public private(set) var busyAnswers = 0

    init(link: USBIPHIDLink, id: UInt32) {
        self.link = link
        self.id = id
    }

    /// One CTAP2 request through CTAPHID_CBOR: the command byte and CBOR parameters in, the
    /// status byte and CBOR response out (CTAP 2.1 §11.2.9.1.2).
    public func cbor(_ request: [UInt8]) throws -> [UInt8] { try transact(.cbor, request) }

    /// CTAPHID_PING (CTAP 2.1 §11.2.9.1.4): `payload` out and the same bytes back, the
    /// transport's cost for a message of that size with no command behind it.
    public func ping(_ payload: [UInt8]) throws {
        guard try transact(.ping, payload) == payload else { throw BenchFailure("CTAPHID_PING echoed other bytes") }
    }

    /// Sends one CTAPHID request and returns the payload of its response, skipping
    /// KEEPALIVEs and sending it again after CHANNEL_BUSY; any other CTAPHID_ERROR or a
    /// response of another command is a failure.
    func transact(_ command: CTAPHIDCommand, _ payload: [UInt8]) throws -> [UInt8] {
        let deadline = ContinuousClock.now + USBIPHIDHost.transactionTimeout
        while true {
            for report in CTAPHIDPacketizer.fragment(channel: id, command: command, payload: payload) {
                let reply = try link.submitOutput(ep: 1, data: report, before: deadline)
                guard reply.status == .success else {
                    throw BenchFailure("interrupt-OUT URB failed with URB status \(reply.status.rawValue)")
                }
            }
            let response = try link.awaitMessage(on: id, before: deadline)
            if response.command == .error, response.payload == [CTAPHIDError.channelBusy.rawValue] {
                busyAnswers += 1
                pause(milliseconds: 1)
                continue
            }
            guard response.command == command else {
                let detail = response.command == .error ? " 0x\(String(response.payload.first ?? 0, radix: 16))" : ""
                throw BenchFailure("CTAPHID \(command) answered with \(response.command)\(detail)")
            }
            return response.payload
        }
    }
}

/// The connection a host and its channels share, and the thread that reads it.
final class USBIPHIDLink: @unchecked Sendable {
    private let connection: TCPConnection
    private let devid: UInt32
    /// Held while a command is numbered, noted and sent, so the server gets them in order.
    private let sending = NSLock()
    /// Held while an interrupt-OUT URB is outstanding: one at a time, as `hid_irq_out`.
    private let output = NSLock()
    /// Guards what follows; waiters wait on it.
    private let state = NSCondition()
    private var decoder: USBIPClientDecoder
    private var nextSeqnum: UInt32 = 1
    private var inputSeqnum: UInt32 = 0
    /// RET_SUBMITs of control and interrupt-OUT URBs, by seqnum, until someone takes them.
    private var replies: [UInt32: USBIPRetSubmit] = [:]
    /// One reassembler per channel: a key may answer one channel BUSY between the reports of
    /// another's response.
    private var assemblers: [UInt32: CTAPHIDResponseAssembler] = [:]
    /// Messages reassembled and not yet taken, by channel.
    private var messages: [UInt32: [(command: CTAPHIDCommand, payload: [UInt8])]] = [:]
    private var failure: (any Error)?
    private var closing = false
    private let readerFinished = DispatchSemaphore(value: 0)

    init(connection: TCPConnection, decoder: USBIPClientDecoder, devid: UInt32) throws {
        self.connection = connection
        self.decoder = decoder
        self.devid = devid
        try submitInputURB()
        let reader = Thread { [self] in
            read()
            readerFinished.signal()
        }
        reader.name = "USB/IP host reader"
        reader.start()
    }

    /// Stops the reader and waits for it; later waits fail.
    func close() {
        state.lock()
        closing = true
        state.unlock()
        connection.shutdown()
        readerFinished.wait()
    }

    /// Submits an OUT URB on `ep` and waits for its RET_SUBMIT.
    func submitOutput(
        ep: UInt8,
        setup: USBSetupPacket = USBSetupPacket(),
        data: [UInt8] = [],
        before deadline: ContinuousClock.Instant
    ) throws -> USBIPRetSubmit {
        output.lock()
        defer { output.unlock() }
        let seqnum = try submit(direction: .out, ep: ep, length: data.count, setup: setup, data: data)
        return try wait(before: deadline) { $0.replies.removeValue(forKey: seqnum) }
    }

    /// The next message on `channel`.
    func awaitMessage(on channel: UInt32, before deadline: ContinuousClock.Instant) throws
        -> (command: CTAPHIDCommand, payload: [UInt8])
    {
        try wait(before: deadline) { link in
            guard link.messages[channel]?.isEmpty == false else { return nil }
            return link.messages[channel]!.removeFirst()
        }
    }

    /// Waits until `take` finds what it looks for, under the state lock.
    private func wait<Value>(before deadline: ContinuousClock.Instant, _ take: (USBIPHIDLink) -> Value?) throws -> Value {
        state.lock()
        defer { state.unlock() }
        while true {
            if let value = take(self) { return value }
            if let failure { throw failure }
            if closing { throw BenchFailure("the USB/IP host was closed") }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw BenchFailure("no answer within \(USBIPHIDHost.transactionTimeout)") }
            let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) * 1e-18
            _ = state.wait(until: Date(timeIntervalSinceNow: seconds))
        }
    }

    private func submit(
        direction: USBIPDirection,
        ep: UInt8,
        length: Int,
        setup: USBSetupPacket = USBSetupPacket(),
        data: [UInt8] = []
    ) throws -> UInt32 {
        sending.lock()
        defer { sending.unlock() }
        state.lock()
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
        if direction == .in { inputSeqnum = command.seqnum }
        state.unlock()
        try connection.send(command.encodedBytes)
        return command.seqnum
    }

    private func submitInputURB() throws {
        _ = try submit(direction: .in, ep: 1, length: CTAPHIDConstants.reportSize)
    }

    /// The reader: takes what the server sends until the host closes or the link fails.
    private func read() {
        do {
            while true {
                let bytes: ArraySlice<UInt8>
                do {
                    bytes = try connection.receive()
                } catch is TimedOut {
                    continue
                }
                if try take(bytes) { try submitInputURB() }
            }
        } catch {
            state.lock()
            if !closing { failure = error }
            state.broadcast()
            state.unlock()
        }
    }

    /// Decodes `bytes` and files what they complete; whether the interrupt-IN URB completed
    /// (and is to be submitted again).
    private func take(_ bytes: ArraySlice<UInt8>) throws -> Bool {
        state.lock()
        defer {
            state.broadcast()
            state.unlock()
        }
        if closing { throw BenchFailure("closed") }
        decoder.append(bytes)
        var inputCompleted = false
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
            inputCompleted = true
            try file(reply.transferBuffer)
        }
        return inputCompleted
    }

    /// Gives an input report to its channel's reassembler.
    private func file(_ report: [UInt8]) throws {
        guard report.count >= 4 else { throw BenchFailure("an input report of \(report.count) bytes") }
        let channel = report[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
        switch assemblers[channel, default: CTAPHIDResponseAssembler()].receive(report) {
        case nil, .keepalive:
            break
        case .message(let channel, let command, let payload):
            messages[channel, default: []].append((command, payload))
        case .error:
            throw BenchFailure("the key sent a report that breaks CTAPHID framing")
        }
    }
}
