// One virtual HID device on /dev/uhid: writes UHID_CREATE2, reads the
// kernel's events on a dedicated thread, answers GET_REPORT and SET_REPORT
// at once, passes output reports to a handler, and sends input reports.
//
// Threads: the reader thread blocks in poll() on the uhid descriptor and a
// wake-up socket, so destroy() stops it at once. Writes (CREATE2, INPUT2,
// the replies, DESTROY) are one event per write(), serialised by a lock that
// also guards closing the descriptor, so no write ever reaches a closed or
// reused descriptor.

import Glibc
import Synchronization

/// What a `UHIDDevice` reports to its handler.
public enum UHIDDeviceEvent: Equatable, Sendable {
    /// UHID_START: the kernel started the device; the hidraw node appears
    /// about now. The flags say which report types carry a report number.
    case started(UHIDDeviceFlags)
    /// UHID_STOP: the kernel stopped the device (a driver rebind; usually to be ignored).
    case stopped
    /// UHID_OPEN: a process opened the device (a FIDO client opened its hidraw node).
    case opened
    /// UHID_CLOSE: the last user closed it.
    case closed
    /// UHID_OUTPUT with rtype UHID_OUTPUT_REPORT: one report from the host,
    /// without a report-ID byte (see `UHIDDevice.outputReport(from:)`); 64
    /// bytes for a FIDO key.
    case outputReport([UInt8])
    /// The device went on after something it could not handle: an event it
    /// could not decode or does not expect, an OUTPUT of another report
    /// type, or a GET_REPORT/SET_REPORT reply it could not write. For the log.
    case warning(UHIDError)
    /// The reader stopped: a read failed or the descriptor reached end of
    /// file. No further events come; call `destroy()`.
    case failed(UHIDError)
}

/// A virtual HID device registered through `/dev/uhid`.
///
/// ```swift
/// let device = try UHIDDevice(configuration: configuration)
/// try device.start { event in ... }      // writes UHID_CREATE2
/// try device.sendInputReport(report)     // UHID_INPUT2
/// device.destroy()                       // UHID_DESTROY, stops the reader, closes
/// ```
///
/// The handler runs on the device's reader thread, one event at a time. It
/// must return quickly (hand reports to a queue or a task): the kernel
/// queues at most 32 events for the device and drops events past that. It
/// may call `sendInputReport` and `destroy`.
///
/// GET_REPORT and SET_REPORT are answered by the reader itself, at once,
/// with `err` = EIO: a FIDO descriptor has no feature reports, output
/// reports arrive as UHID_OUTPUT, and a prompt error lets the kernel's
/// caller fail at once instead of after the kernel's 5-second timeout.
public final class UHIDDevice: Sendable {
    /// Receives the device's events on its reader thread.
    public typealias Handler = @Sendable (UHIDDeviceEvent) -> Void

    /// The path of the uhid character device.
    public static let defaultPath = "/dev/uhid"

    /// The `err` of every GET_REPORT_REPLY and SET_REPORT_REPLY: EIO.
    public static let reportRequestError = UInt16(EIO)

    /// The device's identity and report descriptor.
    public var configuration: UHIDDeviceConfiguration { core.configuration }

    private let core: Core

    /// Opens `path` (`/dev/uhid`) read-write and close-on-exec. Nothing is
    /// registered until `start(handler:)`.
    ///
    /// Throws `.invalidEvent` for a configuration that does not fit
    /// UHID_CREATE2, `.uhidUnavailable` when the path does not exist (the
    /// uhid module is not loaded), `.permissionDenied` when the process may
    /// not open it, `.systemCall` otherwise.
    public convenience init(configuration: UHIDDeviceConfiguration, path: String = UHIDDevice.defaultPath)
        throws(UHIDError)
    {
        try configuration.validate()
        let descriptor: Int32
        do {
            descriptor = try Posix.open(path, O_RDWR)
        } catch {
            throw Self.openError(error, path: path)
        }
        try self.init(configuration: configuration, fileDescriptor: descriptor)
    }

    /// Uses `fileDescriptor` as the uhid device: a descriptor on which each
    /// `read()` returns one event and each `write()` takes one, such as one
    /// end of an `AF_UNIX` `SOCK_SEQPACKET` socket pair in tests. The device
    /// owns the descriptor from here on and closes it in `destroy()`, and
    /// also when this initialiser throws.
    public init(configuration: UHIDDeviceConfiguration, fileDescriptor: Int32) throws(UHIDError) {
        do {
            try configuration.validate()
            let wakeUp = try Posix.wakeUpPair()
            core = Core(configuration: configuration, descriptor: fileDescriptor, wakeUp: wakeUp)
        } catch {
            Posix.close(fileDescriptor)
            throw error
        }
    }

    deinit {
        core.destroy()
    }

    /// Registers the device (writes UHID_CREATE2 on bus `BUS_USB` with the
    /// configuration) and starts the reader, which passes events to
    /// `handler`. The kernel answers with UHID_START (`.started`) shortly
    /// after, once its driver has bound.
    ///
    /// Throws `.alreadyStarted` on a second call, `.destroyed` after
    /// `destroy()`, `.systemCall` when the kernel refuses CREATE2 (EINVAL
    /// for a bad descriptor) or the thread cannot start.
    public func start(handler: @escaping Handler) throws(UHIDError) {
        try core.start(handler: handler)
    }

    /// Sends one input report to the host (UHID_INPUT2, one event per
    /// write). The report goes as given: 64 bytes for a FIDO key, with no
    /// report-ID byte since its descriptor has none. Safe from any thread.
    ///
    /// Throws `.notStarted` before `start(handler:)`, `.destroyed` after
    /// `destroy()`, `.invalidEvent` above 4096 bytes, `.systemCall` when the
    /// write fails.
    public func sendInputReport(_ report: [UInt8]) throws(UHIDError) {
        try core.sendInputReport(report)
    }

    /// Unregisters the device (UHID_DESTROY, when it was started), stops the
    /// reader and closes the descriptor. Idempotent; also done on deinit.
    ///
    /// Called from any thread but the handler's, it returns after the reader
    /// has stopped: the handler is not called again. Called from the
    /// handler, it returns at once, and the reader closes the descriptor
    /// when the handler returns.
    public func destroy() {
        core.destroy()
    }

    /// The report an UHID_OUTPUT's data carries, as the CTAPHID layer
    /// expects it: exactly 65 bytes whose first byte is 0x00 lose that
    /// byte (hidraw passes on a leading report ID 0 when the writer put one
    /// before the 64 report bytes, as libfido2 does); any other data is
    /// returned unchanged (hidraw writes of 64 bytes arrive as is).
    public static func outputReport(from data: [UInt8]) -> [UInt8] {
        if data.count == 65 && data[0] == 0 {
            return Array(data.dropFirst())
        }
        return data
    }

    /// The error for a failed open of `path`, with the fix in its reason.
    static func openError(_ error: UHIDError, path: String) -> UHIDError {
        switch error.errno {
        case ENOENT, ENODEV, ENXIO:
            return UHIDError(
                .uhidUnavailable,
                "no \(path): the uhid module is not loaded (modprobe uhid)",
                systemCall: error.systemCall,
                errno: error.errno
            )
        case EACCES, EPERM:
            return UHIDError(
                .permissionDenied,
                "no permission to open \(path): run as the latchkey service / root",
                systemCall: error.systemCall,
                errno: error.errno
            )
        default:
            return UHIDError(
                .systemCall,
                "cannot open \(path): \(error.reason)",
                systemCall: error.systemCall,
                errno: error.errno
            )
        }
    }
}

extension UHIDDevice {
    /// The device's state and descriptors, shared by the owner and the
    /// reader thread (which must not keep the `UHIDDevice` alive, so that
    /// its deinit can destroy the device).
    private final class Core: Sendable {
        enum Phase {
            case idle
            case started
            case destroyed
        }

        struct State {
            var phase = Phase.idle
            var reader: PosixThread?
            /// Set when `destroy()` ran on the reader thread: the reader
            /// closes the descriptors when it ends.
            var readerClosesOnExit = false
        }

        let configuration: UHIDDeviceConfiguration
        let descriptor: Int32
        let wakeUp: (read: Int32, write: Int32)
        let state = Mutex(State())
        /// True once the descriptors are closed. Held for every write and
        /// for closing, so writes are serialised and never outlive the descriptor.
        let output = Mutex(false)

        init(configuration: UHIDDeviceConfiguration, descriptor: Int32, wakeUp: (read: Int32, write: Int32)) {
            self.configuration = configuration
            self.descriptor = descriptor
            self.wakeUp = wakeUp
        }

        var isDestroyed: Bool {
            state.withLock { $0.phase == .destroyed }
        }

        func start(handler: @escaping Handler) throws(UHIDError) {
            try state.withLock { (state: inout State) throws(UHIDError) in
                switch state.phase {
                case .started: throw UHIDError(.alreadyStarted, "the uhid device is already started")
                case .destroyed: throw UHIDError(.destroyed, "the uhid device was destroyed")
                case .idle: break
                }
                try write(.create2(configuration.create2Request))
                // Set before the thread starts, so pthread_create orders it
                // before everything the reader reads.
                state.phase = .started
                do throws(UHIDError) {
                    state.reader = try PosixThread.spawn { [self] in runReader(handler: handler) }
                } catch {
                    state.phase = .idle
                    try? write(.destroy)
                    throw error
                }
            }
        }

        func sendInputReport(_ report: [UInt8]) throws(UHIDError) {
            switch state.withLock({ $0.phase }) {
            case .idle: throw UHIDError(.notStarted, "the uhid device is not started")
            case .destroyed: throw UHIDError(.destroyed, "the uhid device was destroyed")
            case .started: try write(.input2(report))
            }
        }

        func destroy() {
            let step = state.withLock { state -> (wasStarted: Bool, reader: PosixThread?, onReader: Bool)? in
                guard state.phase != .destroyed else { return nil }
                let wasStarted = state.phase == .started
                state.phase = .destroyed
                let onReader = state.reader?.isCurrent ?? false
                if onReader { state.readerClosesOnExit = true }
                return (wasStarted, state.reader, onReader)
            }
            guard let step else { return }
            // Closing the descriptor would destroy the device too; DESTROY
            // says so explicitly, and a failure of it changes nothing.
            if step.wasStarted { try? write(.destroy) }
            guard let reader = step.reader else {
                closeDescriptors()
                return
            }
            if step.onReader {
                reader.detach()
                return
            }
            Posix.writeWakeUp(wakeUp.write)
            reader.join()
            closeDescriptors()
        }

        private func write(_ event: UHIDEvent) throws(UHIDError) {
            let bytes = try event.encoded()
            try output.withLock { (closed: inout Bool) throws(UHIDError) in
                guard !closed else { throw UHIDError(.destroyed, "the uhid device was destroyed") }
                try Posix.writeEvent(descriptor, bytes)
            }
        }

        private func closeDescriptors() {
            output.withLock { closed in
                guard !closed else { return }
                closed = true
                Posix.close(descriptor)
                Posix.close(wakeUp.read)
                Posix.close(wakeUp.write)
            }
        }

        /// The reader thread: one event per read, until a wake-up, a
        /// failure or `destroy()`.
        private func runReader(handler: Handler) {
            readLoop(handler: handler)
            if state.withLock({ $0.readerClosesOnExit }) { closeDescriptors() }
        }

        private func readLoop(handler: Handler) {
            func deliver(_ event: UHIDDeviceEvent) {
                if !isDestroyed { handler(event) }
            }
            while !isDestroyed {
                let bytes: [UInt8]
                do {
                    let ready = try Posix.poll([descriptor, wakeUp.read], timeout: -1)
                    if ready[1] != 0 { return }
                    if ready[0] == 0 { continue }
                    bytes = try Posix.read(descriptor, count: UHIDEvent.encodedSize)
                } catch {
                    deliver(.failed(error))
                    return
                }
                guard !bytes.isEmpty else {
                    deliver(.failed(UHIDError(.endOfFile, "the uhid descriptor reached end of file")))
                    return
                }
                let event: UHIDEvent
                do {
                    event = try UHIDEvent(bytes: bytes)
                } catch {
                    deliver(.warning(error))
                    continue
                }
                handle(event, deliver: deliver)
            }
        }

        private func handle(_ event: UHIDEvent, deliver: (UHIDDeviceEvent) -> Void) {
            switch event {
            case .start(let flags):
                deliver(.started(flags))
            case .stop:
                deliver(.stopped)
            case .open:
                deliver(.opened)
            case .close:
                deliver(.closed)
            case .output(let request):
                guard request.rtype == .output else {
                    deliver(
                        .warning(
                            UHIDError(.unknownEventType, "UHID_OUTPUT of rtype \(request.rtype.rawValue) ignored")
                        )
                    )
                    return
                }
                deliver(.outputReport(UHIDDevice.outputReport(from: request.data)))
            case .getReport(let request):
                let reply = UHIDGetReportReply(id: request.id, err: UHIDDevice.reportRequestError, data: [])
                do { try write(.getReportReply(reply)) } catch { deliver(.warning(error)) }
            case .setReport(let request):
                let reply = UHIDSetReportReply(id: request.id, err: UHIDDevice.reportRequestError)
                do { try write(.setReportReply(reply)) } catch { deliver(.warning(error)) }
            case .create2, .destroy, .input2, .getReportReply, .setReportReply:
                deliver(
                    .warning(UHIDError(.unknownEventType, "the kernel does not send \(event.type); ignored"))
                )
            }
        }
    }
}
