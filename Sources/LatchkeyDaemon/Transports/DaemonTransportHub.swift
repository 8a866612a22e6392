// Puts keys on the daemon's transports: a uhid device per key (when uhid is
// usable; UHIDAttachment.swift) and a USB/IP export per key (when the server
// runs; USBIPServer.swift). This is the key core's `TransportHub`.

import LatchkeyCore
import Logging

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
        var uhid: UHIDAttachment?
        if key.configuration.uhid {
            uhid =
                plan.uhid
                ? UHIDAttachment(key: key, path: plan.uhidPath)
                : UHIDAttachment(key: key, unavailable: plan.uhidUnavailableReason)
        }
        var busid: String?
        if let usbip, key.configuration.usbip {
            let exported = usbip.export(key)
            busid = exported
            key.logger.notice(
                "exported over USB/IP; attach with: usbip attach -r \(usbip.listen.host) -b \(exported)",
                metadata: ["busid": "\(exported)", "listen": "\(usbip.listen)"]
            )
        }
        return LiveAttachment(key: key, uhid: uhid, usbip: usbip, busid: busid)
    }

    func shutdown() async {
        await usbip?.shutdown()
    }
}

/// A key's live uhid device and USB/IP export.
final class LiveAttachment: KeyAttachment {
    let key: VirtualKey
    let usbip: USBIPServer?
    /// The key's uhid device; nil when the key has uhid off.
    let uhid: UHIDAttachment?
    /// The key's bus id on the USB/IP server; nil when it is not exported.
    let busid: String?

    init(key: VirtualKey, uhid: UHIDAttachment?, usbip: USBIPServer?, busid: String?) {
        self.key = key
        self.uhid = uhid
        self.usbip = usbip
        self.busid = busid
    }

    func uhidStatus() async -> KeyDocument.UHIDStatus {
        uhid?.status ?? KeyDocument.UHIDStatus(state: .disabled)
    }

    func usbipStatus() async -> KeyDocument.USBIPStatus? {
        guard let usbip, let busid else { return nil }
        let port = usbip.boundPort ?? usbip.listen.port
        let listen = usbip.listen.host.contains(":") ? "[\(usbip.listen.host)]:\(port)" : "\(usbip.listen.host):\(port)"
        return KeyDocument.USBIPStatus(busid: busid, listen: listen, attached: usbip.isAttached(busid))
    }

    func waitUntilVisible(timeout: Duration) async -> Bool {
        let start = ContinuousClock.now
        while uhid?.isVisible == false {
            if ContinuousClock.now - start > timeout { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return true
    }

    func detach() async {
        await uhid?.detach()
        if let usbip, let busid { usbip.unexport(busid) }
    }

    func replug() async {
        if let usbip, let busid { usbip.disconnect(busid) }
        await uhid?.replug()
    }
}
