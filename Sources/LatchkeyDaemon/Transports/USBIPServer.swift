// The USB/IP server: a SwiftNIO TCP listener whose connections each run a
// USBIPServerConnection state machine (the wire codec and device model are
// sans-I/O in the USBIP target). An imported key gets its own HID session
// (`HIDSession.serving`, as a uhid device does), which runs on the connection's
// event loop: each output report is handed to it there as it is decoded, in
// order, and its input reports are written from the same loop. TCP_NODELAY is on: without
// it each CTAPHID exchange waits ~40 ms for Nagle. Remote half-closure is
// allowed, so that a client that shuts down its side halfway through a request
// still reads the request's error reply before the connection closes.
//
// Each connection knows its peer (USBIPPeer.swift): its devlist shows, and its
// OP_REQ_IMPORT accepts, only the keys whose `attach` tier the peer holds; an
// import of another key is answered as an unknown bus id is (status 1), and is
// one `access.refused` event and one journal line. The engine sees each request
// with the peer as its `Requester`, for prompts. The server refuses to start
// when anything already listens on its port, on any address: a squatter on
// [::1]:3240 would receive whatever asks for localhost:3240.

import CTAPHID
import LatchkeyCore
import LatchkeySystem
import Logging
import NIOCore
import NIOPosix
import Synchronization
import USBIP

/// The keys exported over USB/IP, by bus id.
final class USBIPServer: Sendable {
    struct Entry: Sendable {
        var export: USBIPExport
        var key: VirtualKey
        /// The connection that imported it, so that unexporting can drop it.
        var attachedTo: ObjectIdentifier?
        var closeAttached: (@Sendable () -> Void)?
    }

    /// Connections served at once; more are closed at accept, so that a
    /// local process opening sockets in a loop cannot exhaust descriptors.
    static let maxConnections = 64
    /// How long a connection may stay without importing a key. An imported
    /// key may be idle for hours; a connection that never imports only
    /// holds a slot.
    static let importTimeout = TimeAmount.seconds(30)

    let listen: ListenAddress
    let logger: Logger
    private let group: MultiThreadedEventLoopGroup
    private let connections = Atomic<Int>(0)
    private let entries = Mutex<(next: UInt32, byBusID: [String: Entry])>((1, [:]))
    private let channel = Mutex<(any Channel)?>(nil)

    private init(listen: ListenAddress, logger: Logger) {
        self.listen = listen
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    /// Binds the listener. Refuses an address beyond loopback unless allowed.
    static func start(listen: ListenAddress, allowRemote: Bool, logger: Logger) async throws -> USBIPServer {
        if !listen.isLoopback {
            guard allowRemote else {
                throw ConfigurationError(
                    "refusing to serve USB/IP on \(listen): it is not a loopback address; set [usbip] allow-remote = true to allow it"
                )
            }
            logger.warning(
                "USB/IP is listening beyond loopback: anyone who can reach it can use the keys",
                metadata: ["listen": "\(listen)"]
            )
        }
        try refuseSquattedPort(listen)
        let server = USBIPServer(listen: listen, logger: logger)
        let bootstrap = ServerBootstrap(group: server.group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                guard server.admit(channel) else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(USBIPConnectionHandler(server: server))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: listen.host, port: listen.port).get()
            server.channel.withLock { $0 = channel }
            logger.notice("USB/IP listening", metadata: ["listen": "\(channel.localAddress.map { "\($0)" } ?? "\(listen)")"])
        } catch {
            try? await server.group.shutdownGracefully()
            // Someone bound it since the check: name them.
            try refuseSquattedPort(listen)
            throw ConfigurationError("cannot listen for USB/IP on \(listen): \(error)")
        }
        return server
    }

    /// Throws, naming who holds it and what to do, when anything listens on the port of
    /// `listen` (any address: the kernel would let 127.0.0.1:3240 be bound beside a
    /// stranger's [::1]:3240, and clients of "localhost" would reach either).
    static func refuseSquattedPort(_ listen: ListenAddress) throws(ConfigurationError) {
        guard listen.port != 0, let port = UInt16(exactly: listen.port) else { return }
        let holders: [TCPSocketRecord]
        do {
            holders = try PeerIdentity.tcpListeners(port: port)
        } catch {
            throw ConfigurationError("cannot check who listens on port \(port) before serving USB/IP: \(error)")
        }
        guard !holders.isEmpty else { return }
        let who = holders.map { "\($0.holder) on \($0.local)" }.joined(separator: "; ")
        throw ConfigurationError(
            "refusing to serve USB/IP on \(listen): port \(port) is already in use by \(who). Whoever holds it "
                + "would receive the imports meant for these keys (root's usbip attach included). Stop that "
                + "process, or choose another port: [usbip] listen = \"127.0.0.1:PORT\" in the configuration, "
                + "or --usbip 127.0.0.1:PORT"
        )
    }

    /// Counts a new connection in, or refuses it beyond `maxConnections`.
    private func admit(_ channel: any Channel) -> Bool {
        let count = connections.add(1, ordering: .relaxed).newValue
        channel.closeFuture.whenComplete { _ in self.connections.subtract(1, ordering: .relaxed) }
        guard count <= Self.maxConnections else {
            logger.warning(
                "USB/IP connection refused: \(Self.maxConnections) connections are open",
                metadata: ["peer": "\(channel.remoteAddress.map { "\($0)" } ?? "?")"]
            )
            return false
        }
        return true
    }

    /// Connections open now.
    var connectionCount: Int { connections.load(ordering: .relaxed) }

    /// The port actually bound (differs from the configured one when that was 0).
    var boundPort: Int? { channel.withLock { $0?.localAddress?.port } }

    /// Exports `key`; returns its bus id ("1-1", "1-2", …).
    func export(_ key: VirtualKey) -> String {
        entries.withLock { state in
            let number = state.next
            state.next += 1
            let busid = "1-\(number)"
            let device = FIDOUSBDevice(
                idVendor: key.configuration.vendorId, idProduct: key.configuration.productId, bcdDevice: 0x0100,
                manufacturer: key.configuration.manufacturer, product: key.configuration.productName,
                serialNumber: key.serialNumber, reportDescriptor: FIDOReportDescriptor.bytes
            )
            let export = USBIPExport(busid: busid, busnum: 1, devnum: number, device: device)
            state.byBusID[busid] = Entry(export: export, key: key)
            return busid
        }
    }

    /// Stops exporting `busid` and drops the connection that imported it.
    func unexport(_ busid: String) {
        let entry = entries.withLock { $0.byBusID.removeValue(forKey: busid) }
        entry?.closeAttached?()
    }

    /// Drops the connection that imported `busid` (an unplug); the export stays.
    func disconnect(_ busid: String) {
        let close = entries.withLock { $0.byBusID[busid]?.closeAttached }
        close?()
    }

    /// Whether some connection has imported `busid`.
    func isAttached(_ busid: String) -> Bool {
        entries.withLock { $0.byBusID[busid]?.attachedTo != nil }
    }

    /// What a new connection from `peer` offers (the keys it may attach), which of it is in
    /// use elsewhere, and the keys it may not attach, by bus id.
    func snapshot(for peer: USBIPPeer) -> (exports: [USBIPExport], attached: Set<String>, hidden: [String: VirtualKey]) {
        entries.withLock { state in
            let sorted = state.byBusID.values.sorted { $0.export.devnum < $1.export.devnum }
            let offered = sorted.filter { peer.mayAttach(owner: $0.key.owner) }
            let hidden = sorted.filter { !peer.mayAttach(owner: $0.key.owner) }
            return (
                offered.map(\.export), Set(offered.filter { $0.attachedTo != nil }.map(\.export.busid)),
                Dictionary(uniqueKeysWithValues: hidden.map { ($0.export.busid, $0.key) })
            )
        }
    }

    /// Records that `connection`, from `peer`, imported `busid`; nil if another one holds
    /// it, it is gone, or the peer may not attach it.
    func claim(
        _ busid: String, by connection: ObjectIdentifier, peer: USBIPPeer, close: @escaping @Sendable () -> Void
    ) -> VirtualKey? {
        entries.withLock { state in
            guard var entry = state.byBusID[busid], entry.attachedTo == nil, peer.mayAttach(owner: entry.key.owner)
            else { return nil }
            entry.attachedTo = connection
            entry.closeAttached = close
            state.byBusID[busid] = entry
            return entry.key
        }
    }

    func release(_ busid: String, by connection: ObjectIdentifier) {
        entries.withLock { state in
            guard var entry = state.byBusID[busid], entry.attachedTo == connection else { return }
            entry.attachedTo = nil
            entry.closeAttached = nil
            state.byBusID[busid] = entry
        }
    }

    /// `peer` asked to import `key`, which it may not attach: one `access.refused` event
    /// on the key's stream and one journal line.
    func refused(_ refusal: AccessRefusal, key: VirtualKey, busid: String, peer: USBIPPeer) {
        key.events.publish(
            .accessRefused, key: refusal.key,
            [
                "access": .string(refusal.access.rawValue), "rule": .string(refusal.rule),
                "uid": .int(Int(refusal.caller.uid)), "door": "usbip",
            ]
        )
        logger.notice(
            "access refused",
            metadata: peer.metadata.merging([
                "key": "\(refusal.key)", "access": "\(refusal.access.rawValue)", "rule": "\(refusal.rule)",
                "door": "usbip", "owner": "\(refusal.owner)", "busid": "\(busid)",
            ]) { $1 }
        )
    }

    func shutdown() async {
        let channel = self.channel.withLock { $0 }
        try? await channel?.close()
        let closers = entries.withLock { $0.byBusID.values.compactMap(\.closeAttached) }
        for close in closers { close() }
        try? await group.shutdownGracefully()
    }
}

/// One client connection. Runs on its channel's event loop.
final class USBIPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let server: USBIPServer
    /// Who is on the other end, from accept on.
    private var peer = USBIPPeer(kind: .unidentified, caller: USBIPPeer.nobody, address: "?")
    /// The keys this peer may not attach, by bus id, as of its first request.
    private var hidden: [String: VirtualKey] = [:]
    private var connection: USBIPServerConnection?
    /// The imported key's session, which runs on this connection's event loop.
    private var attached: (busid: String, session: HIDSession)?
    private var logger: Logger

    init(server: USBIPServer) {
        self.server = server
        self.logger = server.logger
    }

    func channelActive(context: ChannelHandlerContext) {
        logger[metadataKey: "peer"] = "\(context.remoteAddress.map { "\($0)" } ?? "?")"
        peer = USBIPPeer.identify(local: context.localAddress, remote: context.remoteAddress, logger: logger)
        logger[metadataKey: "uid"] = peer.metadata["uid"]
        switch peer.kind {
        case .local: logger.debug("USB/IP connection")
        case .unidentified:
            // Info, not notice: a peer that connects and closes at once ends here, and may do so in a loop.
            logger.info("USB/IP connection from a loopback peer the kernel cannot name: no key is offered")
        case .remote:
            logger.notice("USB/IP connection from another host: it may attach what \(Caller.daemon) may attach")
        }
        let channel = context.channel
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let contextBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: USBIPServer.importTimeout) {
            guard handler.value.attached == nil, channel.isActive else { return }
            handler.value.logger.info("USB/IP connection closed: no key imported within \(USBIPServer.importTimeout.nanoseconds / 1_000_000_000) s")
            // A request begun and never finished still gets its error reply.
            handler.value.inputEnded(context: contextBound.value)
        }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client shut down its side: nothing more will come.
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputEnded(context: context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Answers a request the client left unfinished, if any, and closes.
    private func inputEnded(context: ChannelHandlerContext) {
        guard var connection else {
            context.close(promise: nil)
            return
        }
        let actions = connection.inputEnded()
        self.connection = connection
        guard !actions.isEmpty else {
            // Closed already; make sure the channel follows.
            context.close(promise: nil)
            return
        }
        perform(actions, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard let bytes = buffer.readBytes(length: buffer.readableBytes) else { return }
        // The exports are read when the client's first bytes arrive, not at accept: a
        // connection opened a while ago must still see the keys as they are now.
        var connection = self.connection ?? {
            let (exports, attachedElsewhere, hidden) = server.snapshot(for: peer)
            self.hidden = hidden
            var fresh = USBIPServerConnection(exports: exports)
            fresh.unavailableBusIDs = attachedElsewhere
            return fresh
        }()
        let actions = connection.receive(bytes)
        self.connection = connection
        if attached == nil, let busid = connection.requestedBusID, let key = hidden.removeValue(forKey: busid),
            let refusal = peer.refusal(of: key)
        {
            // Answered by the connection as a bus id it does not know.
            server.refused(refusal, key: key, busid: busid, peer: peer)
        }
        if attached == nil, let busid = connection.attachedBusID {
            guard attach(busid, context: context) else {
                // Another connection claimed the key (or it was deleted) since the
                // snapshot: answer as Linux does for a device in use, then close.
                let reply = USBIPOpRepImport(failure: .deviceBusy).encodedBytes
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: reply)), promise: nil)
                context.close(promise: nil)
                return
            }
        }
        perform(actions, context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        detach()
        connection?.disconnected()
        logger.debug("USB/IP connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("USB/IP connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func perform(_ actions: [USBIPServerConnection.Action], context: ChannelHandlerContext) {
        var wrote = false
        for action in actions {
            switch action {
            case .send(let bytes):
                context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
                wrote = true
            case .deliverOutputReport(_, let report):
                // On the session's own executor (the event loop): received now, in order.
                attached?.session.assumeIsolated { session in session.receive(report, arrivedAt: session.arrival()) }
            case .close:
                // Debug only: a peer sending garbage must not be able to fill the log.
                if let failure = connection?.failure {
                    logger.debug(
                        wrote ? "USB/IP request refused" : "closing a USB/IP connection after a protocol error",
                        metadata: ["error": "\(failure)"]
                    )
                }
                if wrote { context.flush() }
                context.close(promise: nil)
                return
            }
        }
        if wrote { context.flush() }
    }

    /// The client imported `busid`: give it a HID session on this connection's event
    /// loop. False when the key is no longer free.
    private func attach(_ busid: String, context: ChannelHandlerContext) -> Bool {
        let loop = context.eventLoop
        let channel = context.channel
        let identifier = ObjectIdentifier(self)
        guard
            let key = server.claim(busid, by: identifier, peer: peer, close: { channel.close(promise: nil) })
        else {
            logger.warning("refusing an import: the key is in use or gone", metadata: ["busid": "\(busid)"])
            return false
        }
        let bound = NIOLoopBound(self, eventLoop: loop)
        let contextBound = NIOLoopBound(context, eventLoop: loop)
        var sessionLogger = key.logger
        sessionLogger[metadataKey: "transport"] = "usbip"
        sessionLogger[metadataKey: "busid"] = "\(busid)"
        // /proc is read once, off the event loop; the first request waits for it.
        let peer = self.peer
        let lookup = Task.detached(priority: .utility) { peer.requester() }
        let session = HIDSession.serving(
            key, logger: sessionLogger, executor: loop.executor, requester: { await lookup.value },
            drop: { channel.close(promise: nil) }
        ) { report in
            // Written after what the loop is doing now (a report received
            // mid-read answers once that read's replies are out).
            loop.execute { bound.value.inputReport(report, context: contextBound.value) }
        }
        attached = (busid, session)
        key.logger.info("USB/IP host imported the key", metadata: peer.metadata.merging(["busid": "\(busid)"]) { $1 })
        return true
    }

    private func inputReport(_ report: [UInt8], context: ChannelHandlerContext) {
        guard var connection, context.channel.isActive else { return }
        let actions = connection.inputReport(report)
        self.connection = connection
        perform(actions, context: context)
    }

    private func detach() {
        guard let attached else { return }
        attached.session.assumeIsolated { $0.close() }
        server.release(attached.busid, by: ObjectIdentifier(self))
        self.attached = nil
    }
}
