// Puts keys on the daemon's transports: a uhid device per key (when uhid is
// usable) and a USB/IP export per key (when the server runs).

import CTAPHID
import LatchkeyUHID
import Logging
import Synchronization

/// The transports of a running daemon.
final class DaemonTransportHub: TransportHub {
    let plan: TransportPlan
    let usbip: USBIPServer?
    let logger: Logger

    private init(plan: TransportPlan, usbip: USBIPServer?, logger: Logger) {
        self.plan = plan
        self.usbip = usbip
        self.logger = logger
    }

    static func start(plan: TransportPlan, configuration: DaemonConfiguration, logger: Logger) async throws
        -> DaemonTransportHub
    {
        var server: USBIPServer?
        if let listen = plan.usbip {
            server = try await USBIPServer.start(
                listen: listen, allowRemote: configuration.usbipAllowRemote, logger: logger
            )
        }
        return DaemonTransportHub(plan: plan, usbip: server, logger: logger)
    }

    func attach(_ key: VirtualKey) async -> any KeyAttachment {
        let attachment = LiveAttachment(key: key, usbip: usbip)
        if key.configuration.uhid {
            if plan.uhid {
                attachment.startUHID(path: plan.uhidPath)
            } else {
                attachment.setUHID(state: "unavailable", error: plan.uhidUnavailableReason)
            }
        }
        if let usbip, key.configuration.usbip {
            attachment.busid = usbip.export(key)
            key.logger.notice(
                "exported over USB/IP; attach with: usbip attach -r \(usbip.listen.host) -b \(attachment.busid ?? "?")",
                metadata: ["busid": "\(attachment.busid ?? "?")", "listen": "\(usbip.listen)"]
            )
        }
        return attachment
    }

    func shutdown() async {
        await usbip?.shutdown()
    }
}

/// A key's live uhid device and USB/IP export.
final class LiveAttachment: KeyAttachment, @unchecked Sendable {
    struct UHIDState {
        var state = "disabled"
        var hidraw: String?
        var error: String?
        var device: UHIDDevice?
        var session: HIDSession?
        var queue: AsyncStream<(event: UHIDDeviceEvent, arrivedAt: UInt64)>.Continuation?
    }

    let key: VirtualKey
    let usbip: USBIPServer?
    /// Set once in `DaemonTransportHub.attach`, before the attachment is shared.
    var busid: String?
    private let uhid = Mutex(UHIDState())
    private let uhidPath = Mutex<String?>(nil)

    init(key: VirtualKey, usbip: USBIPServer?) {
        self.key = key
        self.usbip = usbip
    }

    func setUHID(state: String, error: String?) {
        uhid.withLock {
            $0.state = state
            $0.error = error
        }
    }

    /// Creates the uhid device; its events reach the HID session through one serial queue.
    func startUHID(path: String) {
        uhidPath.withLock { $0 = path }
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
            setUHID(state: "unavailable", error: "\(error)")
            return
        }
        let writeLogger = logger
        let pacer = InputReportPacer(label: "latchkey.uhid.input.\(key.configuration.name)")
        let hooks = key.sessionHooks { [weak self] in Task { await self?.replugUHID() } }
        // The kernel does not say who opened the hidraw node.
        let session = HIDSession(
            authenticator: key.authenticator, presence: key.presence, logger: logger,
            capabilities: key.hidCapabilities, hooks: hooks, engineExecutor: key.engineExecutor,
            requester: { Requester(transport: .uhid) }
        ) { report in
            pacer.enqueue {
                do {
                    try device.sendInputReport(report)
                } catch {
                    writeLogger.warning("cannot write an input report", metadata: ["error": "\(error)"])
                }
            }
        }
        let (events, continuation) = AsyncStream<(event: UHIDDeviceEvent, arrivedAt: UInt64)>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let stateLogger = logger
        Task { [weak self] in
            for await (event, arrivedAt) in events {
                switch event {
                case .outputReport(let report):
                    await session.receive(report, arrivedAt: arrivedAt)
                case .started:
                    self?.setUHID(state: "started", error: nil)
                    stateLogger.info("uhid device started")
                case .opened:
                    await session.reopen()
                    self?.setUHID(state: "opened", error: nil)
                case .closed:
                    await session.close()
                    self?.setUHID(state: "closed", error: nil)
                case .stopped:
                    self?.setUHID(state: "stopped", error: nil)
                case .warning(let error):
                    stateLogger.warning("uhid", metadata: ["error": "\(error)"])
                case .failed(let error):
                    stateLogger.error("uhid device failed", metadata: ["error": "\(error)"])
                    await session.close()
                    self?.setUHID(state: "failed", error: "\(error)")
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
            setUHID(state: "unavailable", error: "\(error)")
            return
        }
        uhid.withLock { state in
            state = UHIDState(state: "created", device: device, session: session, queue: continuation)
        }
        let match = HidrawMatch(configuration: configuration)
        Task { [weak self] in
            if let node = try? await HidrawLocator.wait(for: match, timeout: .seconds(10)) {
                self?.uhid.withLock { $0.hidraw = node }
                stateLogger.notice("hidraw node ready", metadata: ["hidraw": "\(node)"])
            } else {
                stateLogger.error("the kernel made no hidraw node for the key within 10 s")
            }
        }
    }

    func uhidStatus() async -> KeyDocument.UHIDStatus {
        uhid.withLock { KeyDocument.UHIDStatus(state: $0.state, hidraw: $0.hidraw, error: $0.error) }
    }

    func usbipStatus() async -> KeyDocument.USBIPStatus? {
        guard let usbip, let busid else { return nil }
        let port = usbip.boundPort ?? usbip.listen.port
        let listen = usbip.listen.host.contains(":") ? "[\(usbip.listen.host)]:\(port)" : "\(usbip.listen.host):\(port)"
        return KeyDocument.USBIPStatus(busid: busid, listen: listen, attached: usbip.isAttached(busid))
    }

    func waitUntilVisible(timeout: Duration) async -> Bool {
        let start = ContinuousClock.now
        while uhid.withLock({ $0.device != nil && $0.hidraw == nil }) {
            if ContinuousClock.now - start > timeout { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return true
    }

    func detach() async {
        let state = uhid.withLock { state -> UHIDState in
            defer { state = UHIDState(state: "destroyed") }
            return state
        }
        if let session = state.session { await session.close() }
        state.queue?.finish()
        state.device?.destroy()
        if let usbip, let busid { usbip.unexport(busid) }
    }

    func replug() async {
        if let usbip, let busid { usbip.disconnect(busid) }
        await replugUHID()
    }

    /// Destroys the uhid device and makes it again: the kernel sees the key
    /// unplugged and plugged in.
    func replugUHID() async {
        let state = uhid.withLock { state -> UHIDState in
            // A key without a device (uhid disabled or unavailable) keeps its state and reason.
            guard state.device != nil else { return state }
            defer { state = UHIDState(state: "destroyed") }
            return state
        }
        guard state.device != nil, let path = uhidPath.withLock({ $0 }) else { return }
        if let session = state.session { await session.close() }
        state.queue?.finish()
        state.device?.destroy()
        startUHID(path: path)
    }
}
