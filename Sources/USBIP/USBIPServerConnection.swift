// The server side of one USB/IP connection as a state machine that does no I/O: bytes from
// the client and input reports from the key go in, actions come out (send these bytes,
// deliver this output report, close). The daemon owns the socket and the keys, and performs
// the actions in order; one connection's calls are made one at a time, which keeps every
// URB of a connection on one serial queue (docs/ARCHITECTURE.md: a server that handles a
// message's reports concurrently corrupts messages under load).

/// A virtual device a server offers: its bus id and numbers, and the device model.
public struct USBIPExport: Hashable, Sendable {
    /// The bus id a client names to import the device, e.g. "1-1".
    public let busid: String
    /// The bus number; with `devnum` it makes the device's `devid`.
    public let busnum: UInt32
    /// The device number on the bus.
    public let devnum: UInt32
    /// The device's path as OP_REP_DEVLIST shows it (a sysfs-style path; nothing reads it).
    public let path: String
    /// The virtual device.
    public let device: FIDOUSBDevice

    /// An export of `device` as `busid`. The bus id must be 1 to 31 UTF-8 bytes and the path
    /// below 256, neither holding a zero byte; `busnum` and `devnum` must fit 16 bits, as the
    /// `devid` packs them (all programmer errors otherwise). The path defaults to
    /// `/sys/devices/platform/latchkey/<busid>`.
    public init(busid: String, busnum: UInt32, devnum: UInt32, path: String? = nil, device: FIDOUSBDevice) {
        let path = path ?? "/sys/devices/platform/latchkey/\(busid)"
        precondition(!busid.isEmpty && busid.utf8.count < USBIPLimits.busidSize, "a bus id has 1 to 31 bytes")
        precondition(path.utf8.count < USBIPLimits.pathSize, "a path has at most 255 bytes")
        precondition(!busid.utf8.contains(0) && !path.utf8.contains(0), "bus ids and paths hold no zero byte")
        precondition(busnum <= 0xFFFF && devnum <= 0xFFFF, "busnum and devnum fit 16 bits")
        self.busid = busid
        self.busnum = busnum
        self.devnum = devnum
        self.path = path
        self.device = device
    }

    /// The `devid` a client puts in every URB command: `(busnum << 16) | devnum`
    /// (usbip_protocol.rst, usbip_header_basic).
    public var devid: UInt32 { busnum << 16 | devnum }

    /// The device record of OP_REP_DEVLIST and OP_REP_IMPORT.
    public var record: USBIPUSBDevice {
        device.usbipRecord(path: path, busid: busid, busnum: busnum, devnum: devnum)
    }
}

/// The server side of one USB/IP connection (usbip_protocol.rst), sans I/O.
///
/// A connection lists the exports (OP_REQ_DEVLIST, then closes), or imports one of them
/// (OP_REQ_IMPORT) and carries its URBs:
/// - Control transfers on endpoint 0 are answered at once by the device model
///   (``FIDOUSBDeviceState``); what it does not support stalls (-EPIPE).
/// - An interrupt OUT URB (endpoint 0x01) is acknowledged at once, on its own, and each 64
///   bytes of its data become one output report for the key (a shorter last part is
///   zero-padded, as the packets on a real bus would be).
/// - An interrupt IN URB (endpoint 0x81) is held until the key has a report
///   (``inputReport(_:)``); the oldest held URB gets the next report. A report that finds no
///   URB waits in a queue of ``Configuration/maximumQueuedInputReports``; past that the
///   oldest queued report is dropped (and counted in ``droppedInputReportCount``): a host that
///   stopped reading for that long has abandoned whatever those reports belonged to, and a
///   fresh CTAPHID_INIT answer must still get through.
/// - An IN URB whose buffer is below 64 bytes is answered at once with -EOVERFLOW, which a
///   64-byte report would cause on a real bus; the queued reports stay for the next URB.
/// - URBs to other endpoints stall. While an interrupt endpoint is halted its URBs stall;
///   while the device is unconfigured they fail with -ESHUTDOWN; halting the IN endpoint or
///   unsetting the configuration fails the held IN URBs the same way.
/// - USBIP_CMD_UNLINK of a held IN URB answers USBIP_RET_UNLINK -ECONNRESET, and that URB
///   never gets a USBIP_RET_SUBMIT; of any other seqnum (unknown, or already answered: every
///   other URB is answered at once) -ENOENT.
///
/// The connection closes (``Action/close``, after any reply) when a listing is sent, when an
/// import fails (OP_REP_IMPORT status 1 for an unknown bus id, 2 for one in
/// ``unavailableBusIDs``), and on every protocol error. Before the import, every OP_REQ_*
/// whose code could be read gets its reply with status 1 first (``USBIPRejectedRequest``):
/// one of another version, of a code latchkey does not implement, with a bus id that is not
/// zero-terminated UTF-8, or cut short by the end of the client's input (``inputEnded()``).
/// Everything else closes without a reply, as USB/IP has no error message: bytes that are no
/// request (a reply's code, another protocol), and after the import malformed or hostile URB
/// commands (see ``USBIPServerDecoder``), an OP_* message, a `devid` other than the
/// imported device's, a seqnum reused while its URB is held, more than
/// ``Configuration/maximumPendingInputURBs`` held IN URBs. The error is kept in ``failure``
/// for the log.
public struct USBIPServerConnection: Sendable {
    /// Something the daemon must do, in order.
    public enum Action: Hashable, Sendable {
        /// Write these bytes to the client.
        case send([UInt8])
        /// Give this 64-byte output report to the key exported as `busid`.
        case deliverOutputReport(busid: String, report: [UInt8])
        /// Close the connection; the connection does nothing more until ``disconnected()``.
        case close
    }

    /// The connection's limits.
    public struct Configuration: Hashable, Sendable {
        /// The largest `transfer_buffer_length` accepted; above it the connection closes.
        public var maximumTransferBufferLength: Int
        /// The most input reports held while no IN URB waits.
        public var maximumQueuedInputReports: Int
        /// The most interrupt-IN URBs held at once; one more closes the connection (Linux's
        /// usbhid holds one).
        public var maximumPendingInputURBs: Int

        /// Limits of 64 KiB per transfer, 256 queued reports and 256 held URBs by default;
        /// none may be negative, and the queue and URB limits must be positive (programmer
        /// errors otherwise).
        public init(
            maximumTransferBufferLength: Int = USBIPLimits.defaultMaximumTransferBufferLength,
            maximumQueuedInputReports: Int = 256,
            maximumPendingInputURBs: Int = 256
        ) {
            precondition(maximumTransferBufferLength >= 0, "a negative transfer cap")
            precondition(maximumQueuedInputReports > 0 && maximumPendingInputURBs > 0, "queue limits must be positive")
            self.maximumTransferBufferLength = maximumTransferBufferLength
            self.maximumQueuedInputReports = maximumQueuedInputReports
            self.maximumPendingInputURBs = maximumPendingInputURBs
        }
    }

    /// An interrupt-IN URB waiting for a report.
    private struct PendingInputURB: Sendable {
        var seqnum: UInt32
        var transferBufferLength: Int
        var numberOfPackets: Int32
    }

    /// The imported device and what is in flight for it.
    private struct Attachment: Sendable {
        var export: USBIPExport
        var state: FIDOUSBDeviceState
        var pendingInputURBs: [PendingInputURB] = []
        var queuedInputReports: [[UInt8]] = []
    }

    /// The devices this server offers, in listing order.
    public let exports: [USBIPExport]
    /// The connection's limits.
    public let configuration: Configuration
    /// Bus ids attached on other connections: an import of one is refused with ST_DEV_BUSY
    /// (2), as Linux refuses a device already in use. The daemon, which sees every
    /// connection, keeps this current.
    public var unavailableBusIDs: Set<String> = []
    /// Whether the connection has closed; it then ignores everything until
    /// ``disconnected()``.
    public private(set) var isClosed = false
    /// The protocol error that closed the connection, for the log; nil while open and after a
    /// normal close.
    public private(set) var failure: USBIPError?
    /// The bus id of the client's OP_REQ_IMPORT, whether it was served or refused (the daemon
    /// names what a refused import asked for); nil before one.
    public private(set) var requestedBusID: String?
    /// The input reports dropped because the queue was full.
    public private(set) var droppedInputReportCount = 0
    private var decoder: USBIPServerDecoder
    private var attachment: Attachment?

    /// A connection offering `exports`, whose bus ids must differ (a programmer error
    /// otherwise).
    public init(exports: [USBIPExport], configuration: Configuration = Configuration()) {
        precondition(Set(exports.map(\.busid)).count == exports.count, "bus ids must differ")
        self.exports = exports
        self.configuration = configuration
        self.decoder = USBIPServerDecoder(maximumTransferBufferLength: configuration.maximumTransferBufferLength)
    }

    /// The bus id of the imported device, nil before an import.
    public var attachedBusID: String? { attachment?.export.busid }

    /// The imported device's state (configuration, halts, idle rate), nil before an import.
    public var deviceState: FIDOUSBDeviceState? { attachment?.state }

    /// The interrupt-IN URBs held for a report.
    public var pendingInputURBCount: Int { attachment?.pendingInputURBs.count ?? 0 }

    /// The input reports waiting for an interrupt-IN URB.
    public var queuedInputReportCount: Int { attachment?.queuedInputReports.count ?? 0 }

    /// Takes bytes the client sent, split anywhere, and returns what to do about every
    /// message they complete.
    public mutating func receive(_ bytes: [UInt8]) -> [Action] {
        guard !isClosed else { return [] }
        decoder.append(bytes)
        var actions: [Action] = []
        while !isClosed {
            do throws(USBIPError) {
                guard let message = try decoder.next() else { break }
                try handle(message, actions: &actions)
            } catch {
                failure = error
                close(&actions)
            }
        }
        return actions
    }

    /// Takes a 64-byte input report from the key (a programmer error otherwise): completes the
    /// oldest held interrupt-IN URB with it, or queues it until one arrives. Dropped when no
    /// device is imported or the connection is closed.
    public mutating func inputReport(_ report: [UInt8]) -> [Action] {
        precondition(report.count == FIDOUSBDevice.reportSize, "an input report has 64 bytes")
        guard !isClosed, var attached = attachment.take() else { return [] }
        defer { attachment = attached }
        // A held URB implies the endpoint can send: halting it or unconfiguring fails them all.
        guard !attached.pendingInputURBs.isEmpty else {
            if attached.queuedInputReports.count >= configuration.maximumQueuedInputReports {
                attached.queuedInputReports.removeFirst()
                droppedInputReportCount += 1
            }
            attached.queuedInputReports.append(report)
            return []
        }
        let urb = attached.pendingInputURBs.removeFirst()
        return [Self.completion(of: urb, with: report)]
    }

    /// The client will send nothing more: it shut down its side of the connection, or the
    /// daemon gave up waiting for its request. An OP_REQ_* cut short, once its code is known,
    /// gets its reply with an error status (``USBIPRejectedRequest``); then the connection
    /// closes. Bytes of any other unfinished message are kept in ``failure`` as
    /// ``USBIPError/Code/truncated``.
    public mutating func inputEnded() -> [Action] {
        guard !isClosed else { return [] }
        var actions: [Action] = []
        if let code = decoder.partialRequestCode {
            let reason = USBIPError(.truncated, "the input ended \(decoder.bufferedByteCount) bytes into a request")
            reject(USBIPRejectedRequest(code: code, reason: reason), actions: &actions)
            return actions
        }
        if decoder.bufferedByteCount > 0 {
            failure = USBIPError(.truncated, "the input ended \(decoder.bufferedByteCount) bytes into a message")
        }
        close(&actions)
        return actions
    }

    /// The client went away: forget the import, everything in flight and queued, and any
    /// partial message, so the value can serve a new connection. ``unavailableBusIDs`` is the
    /// daemon's and stays.
    public mutating func disconnected() {
        let unavailable = unavailableBusIDs
        self = USBIPServerConnection(exports: exports, configuration: configuration)
        unavailableBusIDs = unavailable
    }

    // MARK: - Messages

    private mutating func close(_ actions: inout [Action]) {
        isClosed = true
        attachment = nil
        decoder = USBIPServerDecoder(maximumTransferBufferLength: 0)
        actions.append(.close)
    }

    private mutating func handle(_ message: USBIPServerDecoder.Message, actions: inout [Action]) throws(USBIPError) {
        switch message {
        case .opReqDevlist:
            let reply = USBIPOpRepDevlist(
                devices: exports.map { .init(device: $0.record, interfaces: $0.device.usbipInterfaces) }
            )
            actions.append(.send(reply.encodedBytes))
            close(&actions)
        case .opReqImport(let request):
            importDevice(request.busid, actions: &actions)
        case .cmdSubmit(let command):
            try submit(command, actions: &actions)
        case .cmdUnlink(let command):
            try unlink(command, actions: &actions)
        case .rejectedRequest(let request):
            reject(request, actions: &actions)
        }
    }

    /// Answers a request that cannot be served with its error reply, and closes.
    private mutating func reject(_ request: USBIPRejectedRequest, actions: inout [Action]) {
        failure = request.reason
        actions.append(.send(request.reply))
        close(&actions)
    }

    private mutating func importDevice(_ busid: String, actions: inout [Action]) {
        // The decoder reads OP_* requests only before an import, so this is the first.
        requestedBusID = busid
        guard let export = exports.first(where: { $0.busid == busid }) else {
            actions.append(.send(USBIPOpRepImport(failure: .notAvailable).encodedBytes))
            close(&actions)
            return
        }
        guard !unavailableBusIDs.contains(busid) else {
            actions.append(.send(USBIPOpRepImport(failure: .deviceBusy).encodedBytes))
            close(&actions)
            return
        }
        actions.append(.send(USBIPOpRepImport(device: export.record).encodedBytes))
        attachment = Attachment(export: export, state: FIDOUSBDeviceState(device: export.device))
        decoder.phase = .urbs
    }

    /// Checks the `devid` of a URB command against the imported device.
    private func checkDevice(_ devid: UInt32, of attached: Attachment) throws(USBIPError) {
        guard devid == attached.export.devid else {
            throw USBIPError(
                .deviceMismatch,
                "devid 0x\(String(devid, radix: 16)), the imported device is 0x\(String(attached.export.devid, radix: 16))"
            )
        }
    }

    private mutating func submit(_ command: USBIPCmdSubmit, actions: inout [Action]) throws(USBIPError) {
        guard var attached = attachment.take() else {
            throw USBIPError(.unexpectedMessage, "USBIP_CMD_SUBMIT before an import")
        }
        defer { attachment = attached }
        try checkDevice(command.devid, of: attached)
        guard !attached.pendingInputURBs.contains(where: { $0.seqnum == command.seqnum }) else {
            throw USBIPError(.duplicateSeqnum, "seqnum \(command.seqnum) is held already")
        }
        switch (command.ep, command.direction) {
        case (0, _):
            controlTransfer(command, attached: &attached, actions: &actions)
        case (FIDOUSBDevice.inEndpointAddress & 0x0F, .in):
            try interruptIn(command, attached: &attached, actions: &actions)
        case (FIDOUSBDevice.outEndpointAddress, .out):
            interruptOut(command, attached: &attached, actions: &actions)
        default:
            // No such endpoint: the device stalls rather than leave the URB unanswered.
            actions.append(Self.reply(to: command, status: .stall))
        }
    }

    private func controlTransfer(_ command: USBIPCmdSubmit, attached: inout Attachment, actions: inout [Action]) {
        let setup = command.setup
        // A data stage must go the way the URB does (USB 2.0 §9.3.1 bit 7); with no data
        // stage Linux sends every request on the OUT pipe.
        if setup.wLength > 0 && setup.isDeviceToHost != (command.direction == .in) {
            actions.append(Self.reply(to: command, status: .stall))
            return
        }
        let outData = command.direction == .out ? Array(command.transferBuffer.prefix(Int(setup.wLength))) : []
        let wasAbleToSend = attached.state.canSendInputReport
        switch attached.state.handleControlTransfer(setup, data: outData) {
        case .stall:
            actions.append(Self.reply(to: command, status: .stall))
        case .dataIn(let data):
            let sent = command.direction == .in ? Array(data.prefix(Int(command.transferBufferLength))) : []
            actions.append(Self.reply(to: command, status: .success, actualLength: sent.count, data: sent))
        case .acknowledged:
            actions.append(Self.reply(to: command, status: .success, actualLength: outData.count))
        case .outputReport(let report):
            actions.append(Self.reply(to: command, status: .success, actualLength: outData.count))
            actions.append(.deliverOutputReport(busid: attached.export.busid, report: report))
        }
        // Halting the IN endpoint or unsetting the configuration ends the URBs held on it.
        if wasAbleToSend && !attached.state.canSendInputReport {
            let status: URBStatus = attached.state.isConfigured ? .stall : .shutdown
            for urb in attached.pendingInputURBs {
                actions.append(Self.reply(seqnum: urb.seqnum, numberOfPackets: urb.numberOfPackets, status: status))
            }
            attached.pendingInputURBs.removeAll()
        }
    }

    private func interruptIn(
        _ command: USBIPCmdSubmit,
        attached: inout Attachment,
        actions: inout [Action]
    ) throws(USBIPError) {
        guard attached.state.canSendInputReport else {
            actions.append(Self.reply(to: command, status: attached.state.isConfigured ? .stall : .shutdown))
            return
        }
        guard command.transferBufferLength >= FIDOUSBDevice.reportSize else {
            actions.append(Self.reply(to: command, status: .overflow))
            return
        }
        let urb = PendingInputURB(
            seqnum: command.seqnum,
            transferBufferLength: Int(command.transferBufferLength),
            numberOfPackets: command.numberOfPackets
        )
        guard attached.queuedInputReports.isEmpty else {
            actions.append(Self.completion(of: urb, with: attached.queuedInputReports.removeFirst()))
            return
        }
        guard attached.pendingInputURBs.count < configuration.maximumPendingInputURBs else {
            throw USBIPError(
                .tooManyPendingURBs,
                "more than \(configuration.maximumPendingInputURBs) interrupt-IN URBs held"
            )
        }
        attached.pendingInputURBs.append(urb)
    }

    private func interruptOut(_ command: USBIPCmdSubmit, attached: inout Attachment, actions: inout [Action]) {
        guard attached.state.canReceiveOutputReport else {
            actions.append(Self.reply(to: command, status: attached.state.isConfigured ? .stall : .shutdown))
            return
        }
        let data = command.transferBuffer
        actions.append(Self.reply(to: command, status: .success, actualLength: data.count))
        for start in stride(from: 0, to: data.count, by: FIDOUSBDevice.reportSize) {
            var report = Array(data[start..<min(start + FIDOUSBDevice.reportSize, data.count)])
            report += repeatElement(0, count: FIDOUSBDevice.reportSize - report.count)
            actions.append(.deliverOutputReport(busid: attached.export.busid, report: report))
        }
    }

    private mutating func unlink(_ command: USBIPCmdUnlink, actions: inout [Action]) throws(USBIPError) {
        guard var attached = attachment.take() else {
            throw USBIPError(.unexpectedMessage, "USBIP_CMD_UNLINK before an import")
        }
        defer { attachment = attached }
        try checkDevice(command.devid, of: attached)
        let status: URBStatus
        if let index = attached.pendingInputURBs.firstIndex(where: { $0.seqnum == command.unlinkSeqnum }) {
            attached.pendingInputURBs.remove(at: index)
            status = .connectionReset
        } else {
            status = .noEntry
        }
        actions.append(.send(USBIPRetUnlink(seqnum: command.seqnum, status: status).encodedBytes))
    }

    // MARK: - Replies

    /// A USBIP_RET_SUBMIT for `command`, echoing its number_of_packets as Linux's stub does.
    private static func reply(
        to command: USBIPCmdSubmit,
        status: URBStatus,
        actualLength: Int = 0,
        data: [UInt8] = []
    ) -> Action {
        reply(
            seqnum: command.seqnum,
            numberOfPackets: command.numberOfPackets,
            status: status,
            actualLength: actualLength,
            data: data
        )
    }

    private static func reply(
        seqnum: UInt32,
        numberOfPackets: Int32,
        status: URBStatus,
        actualLength: Int = 0,
        data: [UInt8] = []
    ) -> Action {
        .send(
            USBIPRetSubmit(
                seqnum: seqnum,
                status: status,
                actualLength: Int32(actualLength),
                numberOfPackets: numberOfPackets,
                transferBuffer: data
            ).encodedBytes
        )
    }

    /// The USBIP_RET_SUBMIT that gives `report` to a held IN URB; its buffer holds 64 bytes or
    /// more, or it would not have been held.
    private static func completion(of urb: PendingInputURB, with report: [UInt8]) -> Action {
        reply(
            seqnum: urb.seqnum,
            numberOfPackets: urb.numberOfPackets,
            status: .success,
            actualLength: report.count,
            data: report
        )
    }
}
