// One key's uhid device, the way a key reaches this machine's kernel (USBIPServer.swift
// is the other): the device made with the FIDO report descriptor, its events fed in
// order to the key's HID session on a serial queue of the session's own, its input
// reports paced (InputReportPacer.swift), its hidraw node found, and the device
// destroyed and made again on a replug. Its state (`UHIDState`) is what the key's
// document shows.

import CTAPHID
import LatchkeyCore
import LatchkeyUHID
import Logging
import Synchronization

/// A key's uhid device.
final class UHIDAttachment: Sendable {
    private struct Device {
        var state: UHIDState
        var hidraw: String?
        var error: String?
        var device: UHIDDevice?
        var session: HIDSession?
        var queue: AsyncStream<(event: UHIDDeviceEvent, arrivedAt: UInt64)>.Continuation?
    }

    let key: VirtualKey
    /// The uhid character device; nil when the key gets none.
    private let path: String?
    private let device: Mutex<Device>

    /// The key's device on `path`, made at once.
    init(key: VirtualKey, path: String) {
        self.key = key
        self.path = path
        device = Mutex(Device(state: .created))
        start()
    }

    /// A key that gets no device: uhid is `unavailable` here (`reason` says why), or
    /// `disabled` for this key.
    init(key: VirtualKey, unavailable reason: String?) {
        self.key = key
        path = nil
        device = Mutex(Device(state: .unavailable, error: reason))
    }

    /// Where the device stands, for the key's document.
    var status: KeyDocument.UHIDStatus {
        device.withLock { KeyDocument.UHIDStatus(state: $0.state, hidraw: $0.hidraw, error: $0.error) }
    }

    /// Whether the kernel has made the device's hidraw node (true for a key without a device).
    var isVisible: Bool { device.withLock { $0.device == nil || $0.hidraw != nil } }

    private func set(_ state: UHIDState, error: String?) {
        device.withLock {
            $0.state = state
            $0.error = error
        }
    }

    /// Creates the uhid device; its events reach the HID session through one serial queue.
    private func start() {
        guard let path else { return }
        // uhid limits: name 127 bytes, phys and uniq 63 (key names are ASCII). The name
        // is what the kernel's USB HID driver would make of the same device over USB/IP.
        let name = "\(key.configuration.manufacturer) \(key.configuration.productName)"
        let configuration = UHIDDeviceConfiguration(
            name: String(decoding: name.utf8.prefix(127), as: UTF8.self),
            phys: String("latchkey/\(key.configuration.name)".prefix(63)),
            uniq: key.serialNumber,
            vendor: UInt32(key.configuration.vendorId),
            product: UInt32(key.configuration.productId),
            version: 0x0100,
            reportDescriptor: FIDOReportDescriptor.bytes
        )
        var logger = key.logger
        logger[metadataKey: "transport"] = "uhid"
        let device: UHIDDevice
        do {
            device = try UHIDDevice(configuration: configuration, path: path)
        } catch {
            logger.error("cannot create the uhid device", metadata: ["error": "\(error)"])
            set(.unavailable, error: "\(error)")
            return
        }
        let writeLogger = logger
        let pacer = InputReportPacer(label: "latchkey.uhid.input.\(key.configuration.name)")
        // The kernel does not say who opened the hidraw node.
        let session = HIDSession.serving(
            key, logger: logger, requester: { Requester(transport: .uhid) },
            drop: { [weak self] in Task { await self?.replug() } }
        ) { report in
            pacer.enqueue {
                do {
                    try device.sendInputReport(report)
                } catch {
                    writeLogger.warning("cannot write an input report", metadata: ["error": "\(error)"])
                }
            }
        }
        let (events, continuation) = AsyncStream<(event: UHIDDeviceEvent, arrivedAt: UInt64)>.makeStream(
            bufferingPolicy: .bufferingNewest(1024)
        )
        let stateLogger = logger
        Task { [weak self] in
            for await (event, arrivedAt) in events {
                switch event {
                case .outputReport(let report):
                    await session.receive(report, arrivedAt: arrivedAt)
                case .started:
                    self?.set(.started, error: nil)
                    stateLogger.info("uhid device started")
                case .opened:
                    await session.reopen()
                    self?.set(.opened, error: nil)
                case .closed:
                    await session.close()
                    self?.set(.closed, error: nil)
                case .stopped:
                    self?.set(.stopped, error: nil)
                case .warning(let error):
                    stateLogger.warning("uhid", metadata: ["error": "\(error)"])
                case .failed(let error):
                    stateLogger.error("uhid device failed", metadata: ["error": "\(error)"])
                    await session.close()
                    self?.set(.failed, error: "\(error)")
                }
            }
        }
        do {
            try device.start { event in
                // a report's arrival is read here, on the reader's thread (HIDSession)
                guard case .outputReport = event else {
                    continuation.yield((event, 0))
                    return
                }
                session.queue(continuation, (event, session.arrival()))
            }
        } catch {
            logger.error("cannot start the uhid device", metadata: ["error": "\(error)"])
            continuation.finish()
            device.destroy()
            set(.unavailable, error: "\(error)")
            return
        }
        self.device.withLock { state in
            state = Device(state: .created, device: device, session: session, queue: continuation)
        }
        let match = HidrawMatch(configuration: configuration)
        Task { [weak self] in
            if let node = try? await HidrawLocator.wait(for: match, timeout: .seconds(10)) {
                self?.device.withLock { $0.hidraw = node }
                stateLogger.notice("hidraw node ready", metadata: ["hidraw": "\(node)"])
            } else {
                stateLogger.error("the kernel made no hidraw node for the key within 10 s")
            }
        }
    }

    /// Destroys the device (the key is detached).
    func detach() async {
        await destroy(keepingState: false)
    }

    /// Destroys the device and makes it again: the kernel sees the key unplugged and
    /// plugged in. A key without a device keeps its state and reason.
    func replug() async {
        guard await destroy(keepingState: true) else { return }
        start()
    }

    /// Takes the device down; false when there was none (and, `keepingState`, its state
    /// and reason stay).
    @discardableResult
    private func destroy(keepingState: Bool) async -> Bool {
        let taken = device.withLock { state -> Device in
            if keepingState && state.device == nil { return state }
            defer { state = Device(state: .destroyed) }
            return state
        }
        guard taken.device != nil || !keepingState else { return false }
        if let session = taken.session { await session.close() }
        taken.queue?.finish()
        taken.device?.destroy()
        return taken.device != nil && path != nil
    }
}
