// Incremental decoders for the two directions of a USB/IP connection. TCP delivers bytes
// split anywhere; these take them as they come and hand back whole messages. Hostile input
// fails as early as the bytes seen allow, the failure sticks (the connection must close),
// and nothing is buffered beyond the message being assembled: at most one header plus a
// transfer buffer under the cap, and whatever the caller appends before draining `next()`.

/// The bytes received and not yet decoded.
struct InputBuffer: Sendable {
    private var bytes: [UInt8] = []
    private var start = 0

    /// The number of bytes not yet consumed.
    var count: Int { bytes.count - start }

    mutating func append(_ new: some Sequence<UInt8>) {
        bytes.append(contentsOf: new)
    }

    /// A reader over the unconsumed bytes.
    var reader: ByteReader { ByteReader(bytes, offset: start) }

    /// The unconsumed byte at `offset`, which must be below `count`.
    subscript(offset: Int) -> UInt8 { bytes[start + offset] }

    /// A big-endian field of the unconsumed bytes; `offset + 4` must not exceed `count`.
    func uint32(at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 << 8 | UInt32(self[offset + $1]) }
    }

    /// A big-endian field of the unconsumed bytes; `offset + 2` must not exceed `count`.
    func uint16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) << 8 | UInt16(self[offset + 1])
    }

    mutating func consume(_ length: Int) {
        start += length
        if start == bytes.count {
            bytes.removeAll(keepingCapacity: bytes.capacity <= 2 * USBIPLimits.defaultMaximumTransferBufferLength)
            start = 0
        } else if start >= 4096 && start * 2 >= bytes.count {
            bytes.removeFirst(start)
            start = 0
        }
    }

    mutating func removeAll() {
        bytes = []
        start = 0
    }
}

/// What the server and client decoders share: the bytes buffered until a whole message is
/// in, and the first failure, which sticks (later bytes are dropped, every later `next()`
/// throws it again).
protocol StreamDecoding {
    associatedtype Message
    var buffer: InputBuffer { get set }
    var failure: USBIPError? { get set }
    /// The next whole message and its length in the buffer, or nil until more bytes arrive.
    mutating func decode() throws(USBIPError) -> (Message, Int)?
}

extension StreamDecoding {
    /// Adds received bytes, unless decoding has failed.
    mutating func receive(_ bytes: some Sequence<UInt8>) {
        guard failure == nil else { return }
        buffer.append(bytes)
    }

    /// The next whole message, consumed from the buffer; a failure is kept and rethrown.
    mutating func nextMessage() throws(USBIPError) -> Message? {
        if let failure { throw failure }
        do throws(USBIPError) {
            guard let (message, length) = try decode() else { return nil }
            buffer.consume(length)
            return message
        } catch {
            failure = error
            buffer.removeAll()
            throw error
        }
    }
}

/// Checks the version of an OP_* reply header as soon as its bytes are there, and returns
/// the code once it is.
private func replyCode(in buffer: InputBuffer) throws(USBIPError) -> UInt16? {
    guard buffer.count >= 2 else { return nil }
    let version = buffer.uint16(at: 0)
    guard version == USBIPVersion.current else {
        throw USBIPError(.unsupportedVersion, "version 0x\(String(version, radix: 16))")
    }
    guard buffer.count >= 4 else { return nil }
    return buffer.uint16(at: 2)
}

/// The URB command code that starts the buffer, once its four bytes are there. A value whose
/// high half is the USB/IP version is an OP_* message where a URB command belongs.
private func commandCode(in buffer: InputBuffer) throws(USBIPError) -> USBIPCommandCode? {
    guard buffer.count >= 4 else { return nil }
    let raw = buffer.uint32(at: 0)
    guard let command = USBIPCommandCode(rawValue: raw) else {
        if raw >> 16 == UInt32(USBIPVersion.current) {
            throw USBIPError(.unexpectedMessage, "an OP_* message (0x\(String(raw, radix: 16))) after the import")
        }
        throw USBIPError(.unknownCommand, "command 0x\(String(raw, radix: 16))")
    }
    return command
}

/// The server side's decoder: OP_REQ_DEVLIST and OP_REQ_IMPORT while the connection is in
/// its operations phase, USBIP_CMD_SUBMIT and USBIP_CMD_UNLINK once a device is imported.
///
/// The connection switches ``phase`` after a successful import; the bytes after
/// OP_REQ_IMPORT are then read as URB commands. The first failure is returned from every
/// later ``next()``, and further bytes are dropped.
public struct USBIPServerDecoder: StreamDecoding, Sendable {
    /// What the decoder expects next.
    public enum Phase: Hashable, Sendable {
        /// OP_REQ_DEVLIST or OP_REQ_IMPORT.
        case operations
        /// USBIP_CMD_SUBMIT or USBIP_CMD_UNLINK.
        case urbs
    }

    /// A message from a client.
    public enum Message: Hashable, Sendable {
        /// OP_REQ_DEVLIST.
        case opReqDevlist(USBIPOpReqDevlist)
        /// OP_REQ_IMPORT.
        case opReqImport(USBIPOpReqImport)
        /// USBIP_CMD_SUBMIT.
        case cmdSubmit(USBIPCmdSubmit)
        /// USBIP_CMD_UNLINK.
        case cmdUnlink(USBIPCmdUnlink)
        /// An OP_REQ_* that cannot be served but is answered: another version, an unknown
        /// code, a malformed bus id. Its bytes are consumed.
        case rejectedRequest(USBIPRejectedRequest)
    }

    /// What the decoder expects next; the connection sets ``Phase/urbs`` after an import.
    public var phase: Phase = .operations
    /// The largest `transfer_buffer_length` accepted; a larger one is a protocol error.
    public let maximumTransferBufferLength: Int
    var buffer = InputBuffer()
    var failure: USBIPError?

    /// A decoder in the operations phase, accepting transfers up to
    /// `maximumTransferBufferLength` bytes (which must not be negative).
    public init(maximumTransferBufferLength: Int = USBIPLimits.defaultMaximumTransferBufferLength) {
        precondition(maximumTransferBufferLength >= 0, "a negative cap")
        self.maximumTransferBufferLength = maximumTransferBufferLength
    }

    /// The bytes received and not yet decoded.
    public var bufferedByteCount: Int { buffer.count }

    /// Adds received bytes; dropped once decoding has failed.
    public mutating func append(_ bytes: some Sequence<UInt8>) { receive(bytes) }

    /// The next whole message, or nil until more bytes arrive. Throws for input that can
    /// never become a valid message, and keeps throwing that error.
    public mutating func next() throws(USBIPError) -> Message? { try nextMessage() }

    /// The code of an OP_REQ_* whose first four bytes arrived but not the rest of it; nil
    /// when no such request is waiting for bytes (the server answers it if the client stops
    /// sending there).
    public var partialRequestCode: UInt16? {
        guard failure == nil, phase == .operations, buffer.count >= 4 else { return nil }
        let code = buffer.uint16(at: 2)
        return code & USBIPOperationCode.requestBit != 0 ? code : nil
    }

    func decode() throws(USBIPError) -> (Message, Int)? {
        switch phase {
        case .operations:
            return try decodeOperation()
        case .urbs:
            guard let command = try commandCode(in: buffer) else { return nil }
            guard buffer.count >= USBIPLimits.urbHeaderSize else { return nil }
            var reader = buffer.reader
            switch command {
            case .cmdSubmit:
                var submit = try USBIPCmdSubmit.header(
                    reader: &reader,
                    maximumTransferBufferLength: maximumTransferBufferLength
                )
                let length = USBIPLimits.urbHeaderSize + submit.dataLength
                guard buffer.count >= length else { return nil }
                submit.transferBuffer = try reader.readBytes(submit.dataLength)
                return (.cmdSubmit(submit), length)
            case .cmdUnlink:
                return (.cmdUnlink(try USBIPCmdUnlink(reader: &reader)), USBIPLimits.urbHeaderSize)
            case .retSubmit, .retUnlink:
                throw USBIPError(.unexpectedMessage, "\(command), a reply, sent to the server")
            }
        }
    }

    /// An OP_REQ_* once its bytes are there. The version and code are read together, so
    /// that a request of another version or of an unknown code is still known to be a
    /// request and can be answered (``Message/rejectedRequest(_:)``); a code without the
    /// request bit — a reply, or bytes of another protocol — has no reply to give and is an
    /// error. A request is answered only once all its bytes arrived (the common header for
    /// a code latchkey does not know, whose length it cannot know), so that closing after
    /// the answer leaves none of them unread.
    private func decodeOperation() throws(USBIPError) -> (Message, Int)? {
        guard buffer.count >= 4 else { return nil }
        let version = buffer.uint16(at: 0)
        let rawCode = buffer.uint16(at: 2)
        let code = USBIPOperationCode(rawValue: rawCode)
        guard rawCode & USBIPOperationCode.requestBit != 0 else {
            guard version == USBIPVersion.current else {
                throw USBIPError(.unsupportedVersion, "version 0x\(String(version, radix: 16))")
            }
            guard let code else {
                throw USBIPError(.unknownOperation, "operation code 0x\(String(rawCode, radix: 16))")
            }
            throw USBIPError(.unexpectedMessage, "\(code), a reply, sent to the server")
        }
        let length = code == .reqImport ? USBIPOpReqImport.size : USBIPLimits.operationHeaderSize
        guard buffer.count >= length else { return nil }
        func rejected(_ reason: USBIPError) -> (Message, Int) {
            (.rejectedRequest(USBIPRejectedRequest(code: rawCode, reason: reason)), length)
        }
        guard version == USBIPVersion.current else {
            return rejected(USBIPError(.unsupportedVersion, "version 0x\(String(version, radix: 16))"))
        }
        var reader = buffer.reader
        switch code {
        case .reqDevlist:
            return (.opReqDevlist(try USBIPOpReqDevlist(reader: &reader)), length)
        case .reqImport:
            do throws(USBIPError) {
                return (.opReqImport(try USBIPOpReqImport(reader: &reader)), length)
            } catch {
                return rejected(error)
            }
        default:
            return rejected(USBIPError(.unknownOperation, "operation code 0x\(String(rawCode, radix: 16))"))
        }
    }
}

/// The client side's decoder: OP_REP_DEVLIST or OP_REP_IMPORT, then, after a successful
/// import, USBIP_RET_SUBMIT and USBIP_RET_UNLINK.
///
/// A RET_SUBMIT's header does not say whether data follows; like vhci-hcd, the decoder
/// knows from the submission it answers, so the client reports every command it sends
/// (``expectReply(to:)-(USBIPCmdSubmit)``). It also checks what a careful client relies on:
/// every reply answers an outstanding command, an IN reply's `actual_length` fits the URB's
/// buffer, and an URB whose unlink was answered -ECONNRESET gets no RET_SUBMIT, before or
/// after. After OP_REP_DEVLIST, a failed import or a bare failed reply (``USBIPOpRepStatus``)
/// nothing more may come.
public struct USBIPClientDecoder: StreamDecoding, Sendable {
    /// What the decoder expects next.
    public enum Phase: Hashable, Sendable {
        /// OP_REP_DEVLIST or OP_REP_IMPORT.
        case operations
        /// USBIP_RET_SUBMIT or USBIP_RET_UNLINK.
        case urbs
        /// Nothing: the server answered OP_REQ_DEVLIST or refused the import.
        case finished
    }

    /// A message from a server.
    public enum Message: Hashable, Sendable {
        /// OP_REP_DEVLIST.
        case opRepDevlist(USBIPOpRepDevlist)
        /// OP_REP_IMPORT.
        case opRepImport(USBIPOpRepImport)
        /// USBIP_RET_SUBMIT.
        case retSubmit(USBIPRetSubmit)
        /// USBIP_RET_UNLINK.
        case retUnlink(USBIPRetUnlink)
        /// The bare header of a failed reply to a request latchkey does not implement.
        case opRepStatus(USBIPOpRepStatus)
    }

    private struct Submission: Sendable {
        var direction: USBIPDirection
        var transferBufferLength: Int
    }

    /// What the decoder expects next; ``Phase/urbs`` after a successful OP_REP_IMPORT.
    public private(set) var phase: Phase = .operations
    /// The largest `actual_length` accepted.
    public let maximumTransferBufferLength: Int
    /// The longest OP_REP_DEVLIST accepted.
    public let maximumDevices: Int
    var buffer = InputBuffer()
    var failure: USBIPError?
    /// The submissions not yet answered, by seqnum, oldest first.
    private var submissions: [UInt32: [Submission]] = [:]
    /// The unlink requests not yet answered: their seqnum and the seqnum they unlink.
    private var unlinks: [UInt32: [UInt32]] = [:]

    /// A decoder in the operations phase.
    public init(
        maximumTransferBufferLength: Int = USBIPLimits.defaultMaximumTransferBufferLength,
        maximumDevices: Int = USBIPOpRepDevlist.defaultMaximumDevices
    ) {
        precondition(maximumTransferBufferLength >= 0 && maximumDevices >= 0, "a negative cap")
        self.maximumTransferBufferLength = maximumTransferBufferLength
        self.maximumDevices = maximumDevices
    }

    /// The bytes received and not yet decoded.
    public var bufferedByteCount: Int { buffer.count }

    /// The number of submissions sent and neither answered nor unlinked.
    public var outstandingSubmissionCount: Int { submissions.values.reduce(0) { $0 + $1.count } }

    /// Notes a USBIP_CMD_SUBMIT the client sent, so that its reply can be read.
    public mutating func expectReply(to command: USBIPCmdSubmit) {
        submissions[command.seqnum, default: []].append(
            Submission(direction: command.direction, transferBufferLength: Int(command.transferBufferLength))
        )
    }

    /// Notes a USBIP_CMD_UNLINK the client sent.
    public mutating func expectReply(to command: USBIPCmdUnlink) {
        unlinks[command.seqnum, default: []].append(command.unlinkSeqnum)
    }

    /// Adds received bytes; dropped once decoding has failed.
    public mutating func append(_ bytes: some Sequence<UInt8>) { receive(bytes) }

    /// The next whole message, or nil until more bytes arrive. Throws for input that can
    /// never become a valid reply, and keeps throwing that error.
    public mutating func next() throws(USBIPError) -> Message? { try nextMessage() }

    mutating func decode() throws(USBIPError) -> (Message, Int)? {
        switch phase {
        case .finished:
            guard buffer.count == 0 else {
                throw USBIPError(.unexpectedMessage, "\(buffer.count) bytes after the server's last reply")
            }
            return nil
        case .operations:
            guard let rawCode = try replyCode(in: buffer) else { return nil }
            guard let code = USBIPOperationCode(rawValue: rawCode) else {
                // The bare failed reply to a request latchkey does not implement; a request's
                // code or an OK status (which would promise an unknown body) is an error.
                guard rawCode & USBIPOperationCode.requestBit == 0 else {
                    throw USBIPError(.unknownOperation, "operation code 0x\(String(rawCode, radix: 16))")
                }
                guard buffer.count >= USBIPLimits.operationHeaderSize else { return nil }
                var reader = buffer.reader
                let reply = try USBIPOpRepStatus(reader: &reader)
                phase = .finished
                return (.opRepStatus(reply), USBIPLimits.operationHeaderSize)
            }
            switch code {
            case .repDevlist:
                var reader = buffer.reader
                guard
                    let length = try USBIPOpRepDevlist.length(
                        in: reader.bytes,
                        at: reader.offset,
                        maximumDevices: maximumDevices
                    )
                else { return nil }
                let reply = try USBIPOpRepDevlist(reader: &reader, maximumDevices: maximumDevices)
                phase = .finished
                return (.opRepDevlist(reply), length)
            case .repImport:
                guard buffer.count >= USBIPLimits.operationHeaderSize else { return nil }
                let ok = buffer.uint32(at: 4) == USBIPOperationStatus.ok.rawValue
                let length = USBIPLimits.operationHeaderSize + (ok ? USBIPLimits.deviceRecordSize : 0)
                guard buffer.count >= length else { return nil }
                var reader = buffer.reader
                let reply = try USBIPOpRepImport(reader: &reader)
                phase = ok ? .urbs : .finished
                return (.opRepImport(reply), length)
            case .reqDevlist, .reqImport:
                throw USBIPError(.unexpectedMessage, "\(code), a request, sent to the client")
            }
        case .urbs:
            guard let command = try commandCode(in: buffer) else { return nil }
            guard buffer.count >= USBIPLimits.urbHeaderSize else { return nil }
            var reader = buffer.reader
            switch command {
            case .retSubmit:
                var reply = try USBIPRetSubmit.header(
                    reader: &reader,
                    maximumTransferBufferLength: maximumTransferBufferLength
                )
                guard let submission = submissions[reply.seqnum]?.first else {
                    throw USBIPError(.unknownSeqnum, "USBIP_RET_SUBMIT for seqnum \(reply.seqnum), not outstanding")
                }
                guard Int(reply.actualLength) <= submission.transferBufferLength else {
                    throw USBIPError(
                        .lengthExceedsBuffer,
                        "actual_length \(reply.actualLength) for a buffer of \(submission.transferBufferLength)"
                    )
                }
                let dataLength = submission.direction == .in ? Int(reply.actualLength) : 0
                guard buffer.count >= USBIPLimits.urbHeaderSize + dataLength else { return nil }
                reply.transferBuffer = try reader.readBytes(dataLength)
                submissions[reply.seqnum]?.removeFirst()
                if submissions[reply.seqnum]?.isEmpty == true { submissions[reply.seqnum] = nil }
                return (.retSubmit(reply), USBIPLimits.urbHeaderSize + dataLength)
            case .retUnlink:
                let reply = try USBIPRetUnlink(reader: &reader)
                guard let target = unlinks[reply.seqnum]?.first else {
                    throw USBIPError(.unknownSeqnum, "USBIP_RET_UNLINK for seqnum \(reply.seqnum), not outstanding")
                }
                unlinks[reply.seqnum]?.removeFirst()
                if unlinks[reply.seqnum]?.isEmpty == true { unlinks[reply.seqnum] = nil }
                if reply.status == .connectionReset {
                    // The URB was unlinked: it must still be outstanding, and gets no reply.
                    guard submissions[target]?.isEmpty == false else {
                        throw USBIPError(.unknownSeqnum, "-ECONNRESET for seqnum \(target), which was not pending")
                    }
                    submissions[target]?.removeFirst()
                    if submissions[target]?.isEmpty == true { submissions[target] = nil }
                }
                return (.retUnlink(reply), USBIPLimits.urbHeaderSize)
            case .cmdSubmit, .cmdUnlink:
                throw USBIPError(.unexpectedMessage, "\(command), a request, sent to the client")
            }
        }
    }
}
