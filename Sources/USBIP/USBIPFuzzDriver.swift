// A driver that plays arbitrary bytes against a USB/IP server connection as client and key,
// checking invariants. The fuzzer (Fuzz/Sources/FuzzUSBIP) and the crasher replay test
// (Tests/USBIPTests) share it, so a kept crasher means the same thing to both.

/// Plays an arbitrary byte string against ``USBIPServerConnection`` and reports broken
/// invariants. Not part of the library's API: reached with `@_spi(Fuzzing) import USBIP`.
///
/// The connection exports "1-1" (devid 0x00010002) and "1-2" (0x00010003). The input is a
/// sequence of operations, each starting with one byte `op`:
/// - `op & 3 == 0`: raw client bytes: the next byte is a length, and that many input bytes
///   (or what is left) go to `receive` in one call.
/// - 1: a well-formed client message chosen by bits 2–4, so that deep states are reachable
///   without guessing headers: 0 OP_REQ_IMPORT "1-1", 1 OP_REQ_IMPORT of a bus id picked by
///   the next byte ("1-1", "1-2", "9-9"), 2 OP_REQ_DEVLIST, 3 an interrupt-IN CMD_SUBMIT (a
///   length byte: 64 when even), 4 an interrupt-OUT CMD_SUBMIT with a length byte of data, 5
///   a control CMD_SUBMIT with the next 8 bytes as setup packet (its direction from bit 7 of
///   bmRequestType, flipped when bit 5 of `op` is set), 6 a CMD_UNLINK of one of the last
///   eight submissions picked by the next byte (or of a seqnum never used), 7 a CMD_SUBMIT to
///   an endpoint and direction read from the next byte. Bits 5 and 6 both set send it with
///   the devid of "1-2" instead of "1-1"; bit 7 sends it one byte per `receive`.
/// - 2: an input report from the key, 64 copies of the next byte.
/// - 3: by bits 2–4: 0, the client disconnects (`disconnected()`; a new connection begins);
///   1, "1-2" becomes busy or free; 2, the client's input ends (`inputEnded()`); otherwise
///   `op >> 5` input reports.
///
/// Invariants: no action follows `.close` until `disconnected()`; an OP_REQ_* the connection
/// refuses, or cuts short with `inputEnded()`, is answered before the close; every `.send`, read by a
/// ``USBIPClientDecoder`` that knows each command the connection decoded, is well-formed whole
/// replies — each answers an outstanding command, an IN reply's `actual_length` never
/// exceeds the URB's `transfer_buffer_length`, an URB unlinked with -ECONNRESET never gets a
/// RET_SUBMIT; every delivered output report has 64 bytes and names the imported bus id; the
/// held URBs and queued reports stay under their limits, and never both wait at once.
@_spi(Fuzzing)
public enum USBIPFuzzDriver {
    /// The report descriptor of the fuzzed devices: the FIDO one of CTAP 2.1 §11.2.8.2 (a
    /// stand-in; the USBIP target does not depend on CTAPHID, and the bytes are opaque here).
    static let reportDescriptor: [UInt8] = [
        0x06, 0xD0, 0xF1, 0x09, 0x01, 0xA1, 0x01, 0x09, 0x20, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08,
        0x95, 0x40, 0x81, 0x02, 0x09, 0x21, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x91,
        0x02, 0xC0,
    ]

    /// The two exports every run offers.
    static let exports: [USBIPExport] = {
        let device = FIDOUSBDevice(
            idVendor: 0x1209,
            idProduct: 0x4C4B,
            bcdDevice: 0x0100,
            manufacturer: "latchkey",
            product: "latchkey virtual FIDO2 key",
            serialNumber: "fuzz",
            reportDescriptor: reportDescriptor
        )
        return [
            USBIPExport(busid: "1-1", busnum: 1, devnum: 2, device: device),
            USBIPExport(busid: "1-2", busnum: 1, devnum: 3, device: device),
        ]
    }()

    /// Small limits, so that the fuzzer reaches them.
    static let configuration = USBIPServerConnection.Configuration(
        maximumTransferBufferLength: 4096,
        maximumQueuedInputReports: 4,
        maximumPendingInputURBs: 4
    )

    /// Runs `input` and returns a description of each broken invariant; empty when all held.
    public static func run(_ input: [UInt8]) -> [String] {
        var run = Run(input: input)
        run.play()
        return run.violations
    }

    private struct Run {
        let input: [UInt8]
        var position = 0
        var connection = USBIPServerConnection(exports: exports, configuration: configuration)
        /// Decodes the client's bytes as the connection does, to tell the client decoder
        /// which commands were sent.
        var mirror = USBIPServerDecoder(maximumTransferBufferLength: configuration.maximumTransferBufferLength)
        var mirrorStopped = false
        var client = USBIPClientDecoder(maximumTransferBufferLength: configuration.maximumTransferBufferLength)
        var closed = false
        /// The bus id the server's OP_REP_IMPORT named.
        var importedBusID: String?
        /// Whether the mirror saw a request the connection must refuse with a reply.
        var expectsRefusal = false
        var nextSeqnum: UInt32 = 1
        var recentSeqnums: [UInt32] = []
        var violations: [String] = []

        init(input: [UInt8]) {
            self.input = input
        }

        mutating func next() -> UInt8? {
            guard position < input.count else { return nil }
            defer { position += 1 }
            return input[position]
        }

        mutating func play() {
            while let op = next(), violations.isEmpty {
                switch op & 3 {
                case 0:
                    let length = Int(next() ?? 0)
                    let end = min(position + length, input.count)
                    let chunk = Array(input[position..<end])
                    position = end
                    send(chunk)
                case 1:
                    let message = structuredMessage(op)
                    if op & 0x80 != 0 {
                        for byte in message { send([byte]) }
                    } else {
                        send(message)
                    }
                case 2:
                    report(next() ?? 0)
                default:
                    switch (op >> 2) & 7 {
                    case 0: disconnect()
                    case 1: connection.unavailableBusIDs.formSymmetricDifference(["1-2"])
                    case 2: endInput()
                    default: for _ in 0..<(op >> 5) { report(op) }
                    }
                }
            }
        }

        mutating func takeSeqnum() -> UInt32 {
            defer { nextSeqnum &+= 1 }
            recentSeqnums.append(nextSeqnum)
            if recentSeqnums.count > 8 { recentSeqnums.removeFirst() }
            return nextSeqnum
        }

        mutating func structuredMessage(_ op: UInt8) -> [UInt8] {
            let devid: UInt32 = op & 0x60 == 0x60 ? 0x0001_0003 : 0x0001_0002
            switch (op >> 2) & 7 {
            case 0:
                return USBIPOpReqImport(busid: "1-1").encodedBytes
            case 1:
                let busids = ["1-1", "1-2", "9-9"]
                return USBIPOpReqImport(busid: busids[Int(next() ?? 0) % busids.count]).encodedBytes
            case 2:
                return USBIPOpReqDevlist().encodedBytes
            case 3:
                let byte = next() ?? 0
                let length = byte & 1 == 0 ? 64 : Int32(byte)
                return USBIPCmdSubmit(
                    seqnum: takeSeqnum(),
                    devid: devid,
                    direction: .in,
                    ep: 1,
                    transferBufferLength: length,
                    numberOfPackets: 0
                ).encodedBytes
            case 4:
                let length = Int(next() ?? 0)
                let data = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
                return USBIPCmdSubmit(
                    seqnum: takeSeqnum(),
                    devid: devid,
                    direction: .out,
                    ep: 1,
                    transferBufferLength: Int32(length),
                    transferBuffer: data
                ).encodedBytes
            case 5:
                let setupBytes = (0..<8).map { _ in next() ?? 0 }
                let setup = USBSetupPacket(bytes: setupBytes)
                var direction: USBIPDirection = setup.isDeviceToHost ? .in : .out
                if op & 0x20 != 0 { direction = direction == .in ? .out : .in }
                let length = Int(setup.wLength) % 512
                return USBIPCmdSubmit(
                    seqnum: takeSeqnum(),
                    devid: devid,
                    direction: direction,
                    ep: 0,
                    transferBufferLength: Int32(length),
                    setup: setup,
                    transferBuffer: direction == .out ? [UInt8](repeating: 0xA5, count: length) : []
                ).encodedBytes
            case 6:
                let pick = Int(next() ?? 0) % (recentSeqnums.count + 1)
                let target = pick < recentSeqnums.count ? recentSeqnums[recentSeqnums.count - 1 - pick] : 0xFFFF_FF00
                return USBIPCmdUnlink(seqnum: takeSeqnum(), devid: devid, unlinkSeqnum: target).encodedBytes
            default:
                let byte = next() ?? 0
                let direction: USBIPDirection = byte & 0x80 != 0 ? .in : .out
                let length = direction == .out ? Int(byte & 0x0F) : 64
                return USBIPCmdSubmit(
                    seqnum: takeSeqnum(),
                    devid: devid,
                    direction: direction,
                    ep: byte & 0x0F,
                    transferBufferLength: Int32(length),
                    transferBuffer: direction == .out ? [UInt8](repeating: 1, count: length) : []
                ).encodedBytes
            }
        }

        mutating func send(_ bytes: [UInt8]) {
            mirrorReceive(bytes)
            check(connection.receive(bytes), during: "receive")
        }

        mutating func report(_ byte: UInt8) {
            check(
                connection.inputReport([UInt8](repeating: byte, count: FIDOUSBDevice.reportSize)),
                during: "inputReport"
            )
        }

        mutating func endInput() {
            expectsRefusal = expectsRefusal || (!mirrorStopped && mirror.partialRequestCode != nil)
            check(connection.inputEnded(), during: "inputEnded")
            if !closed { violations.append("inputEnded: the connection stayed open") }
        }

        mutating func disconnect() {
            connection.disconnected()
            if connection.isClosed || connection.attachedBusID != nil || connection.pendingInputURBCount != 0
                || connection.queuedInputReportCount != 0
            {
                violations.append("disconnected() left state behind")
            }
            mirror = USBIPServerDecoder(maximumTransferBufferLength: configuration.maximumTransferBufferLength)
            mirrorStopped = false
            client = USBIPClientDecoder(maximumTransferBufferLength: configuration.maximumTransferBufferLength)
            closed = false
            importedBusID = nil
            expectsRefusal = false
        }

        /// Decodes the client's bytes as the connection will, and tells the client decoder of
        /// every command, before the connection's answers are read.
        mutating func mirrorReceive(_ bytes: [UInt8]) {
            guard !mirrorStopped else { return }
            mirror.append(bytes)
            while true {
                let message: USBIPServerDecoder.Message?
                do throws(USBIPError) {
                    message = try mirror.next()
                } catch {
                    mirrorStopped = true
                    return
                }
                switch message {
                case nil:
                    return
                case .opReqDevlist:
                    mirrorStopped = true
                    return
                case .rejectedRequest:
                    expectsRefusal = true
                    mirrorStopped = true
                    return
                case .opReqImport(let request):
                    guard exports.contains(where: { $0.busid == request.busid }),
                        !connection.unavailableBusIDs.contains(request.busid)
                    else {
                        mirrorStopped = true
                        return
                    }
                    mirror.phase = .urbs
                case .cmdSubmit(let command):
                    client.expectReply(to: command)
                case .cmdUnlink(let command):
                    client.expectReply(to: command)
                }
            }
        }

        mutating func check(_ actions: [USBIPServerConnection.Action], during call: String) {
            var sent = false
            for action in actions {
                if closed {
                    violations.append("\(call): \(action) after .close")
                    return
                }
                switch action {
                case .send(let bytes):
                    sent = true
                    client.append(bytes)
                    do throws(USBIPError) {
                        while let message = try client.next() {
                            if case .opRepImport(let reply) = message, let device = reply.device {
                                importedBusID = device.busid
                            }
                        }
                    } catch {
                        violations.append("\(call): the client cannot read what was sent: \(error)")
                        return
                    }
                    if client.bufferedByteCount != 0 {
                        violations.append("\(call): a .send ended inside a message")
                    }
                case .deliverOutputReport(let busid, let report):
                    if report.count != FIDOUSBDevice.reportSize {
                        violations.append("\(call): an output report of \(report.count) bytes")
                    }
                    if busid != importedBusID {
                        violations.append("\(call): an output report for \(busid), not the imported device")
                    }
                case .close:
                    if expectsRefusal && !sent {
                        violations.append("\(call): a refused request got no reply before the close")
                    }
                    closed = true
                }
            }
            if closed != connection.isClosed {
                violations.append("\(call): isClosed is \(connection.isClosed) after \(closed ? "" : "no ").close")
            }
            if connection.pendingInputURBCount > configuration.maximumPendingInputURBs
                || connection.queuedInputReportCount > configuration.maximumQueuedInputReports
            {
                violations.append("\(call): a limit was passed")
            }
            if connection.pendingInputURBCount > 0 && connection.queuedInputReportCount > 0 {
                violations.append("\(call): a report is queued while an IN URB waits")
            }
        }
    }
}
