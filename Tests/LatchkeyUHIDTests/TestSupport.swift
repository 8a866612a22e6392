// Test helpers: a stand-in kernel on the far end of an AF_UNIX
// SOCK_SEQPACKET socket pair (it keeps message boundaries, as /dev/uhid
// keeps event boundaries), a recorder for device events, and fixtures.

import Glibc
import LatchkeyUHID
import Synchronization
import Testing

/// The FIDO report descriptor (CTAP 2.1 §11.2.8.2), as CTAPHID's `FIDOReportDescriptor.bytes`.
let fidoReportDescriptor: [UInt8] = [
    0x06, 0xD0, 0xF1, 0x09, 0x01, 0xA1, 0x01, 0x09, 0x20, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40,
    0x81, 0x02, 0x09, 0x21, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x91, 0x02, 0xC0,
]

/// A configuration like the daemon's, with a uniq no real device has.
func testConfiguration(uniq: String = "latchkey-test-0001") -> UHIDDeviceConfiguration {
    UHIDDeviceConfiguration(
        name: "latchkey test key",
        phys: "latchkey/test",
        uniq: uniq,
        vendor: 0x1209,
        product: 0x0001,
        version: 0x0100,
        country: 0,
        reportDescriptor: fidoReportDescriptor
    )
}

/// `count` bytes counting up from `start`, wrapping.
func pattern(_ count: Int, start: UInt8 = 1) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: Int(start) + $0) }
}

/// A failure of the stand-in kernel's own plumbing.
struct StandInError: Error, CustomStringConvertible {
    var description: String
}

/// Plays the kernel on one end of a SOCK_SEQPACKET pair; the other end goes
/// to `UHIDDevice(configuration:fileDescriptor:)`.
final class StandInKernel {
    /// The kernel's end.
    let descriptor: Int32
    /// The end to hand to the device (which then owns it).
    let deviceDescriptor: Int32

    init() throws {
        // A write to a pair whose other end is closed must fail with EPIPE,
        // not kill the test process.
        signal(SIGPIPE, SIG_IGN)
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &pair) == 0 else {
            throw StandInError(description: "socketpair failed: errno \(errno)")
        }
        descriptor = pair[0]
        deviceDescriptor = pair[1]
    }

    deinit {
        close(descriptor)
    }

    /// A device on this kernel's far end.
    func device(_ configuration: UHIDDeviceConfiguration = testConfiguration()) throws -> UHIDDevice {
        try UHIDDevice(configuration: configuration, fileDescriptor: deviceDescriptor)
    }

    /// A started device whose events `recorder` keeps, past the UHID_CREATE2 it sent.
    func startedDevice(recording recorder: EventRecorder) throws -> UHIDDevice {
        let device = try self.device()
        try device.start(handler: recorder.handler)
        _ = try readEvent()
        return device
    }

    /// One message, or nil at end of file (the device closed its end);
    /// throws when nothing comes within `timeout`.
    func readMessage(timeout: Duration = .seconds(5)) throws -> [UInt8]? {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(
            timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        )
        var ready: Int32
        repeat { ready = poll(&entry, 1, milliseconds) } while ready == -1 && errno == EINTR
        guard ready > 0 else { throw StandInError(description: "no message from the device within \(timeout)") }
        var buffer = [UInt8](repeating: 0, count: 8192)
        let got = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard got >= 0 else { throw StandInError(description: "read failed: errno \(errno)") }
        if got == 0 { return nil }
        return Array(buffer[..<got])
    }

    /// The next event the device wrote, checking it is one whole 4380-byte event.
    func readEvent(timeout: Duration = .seconds(5)) throws -> UHIDEvent {
        guard let bytes = try readMessage(timeout: timeout) else {
            throw StandInError(description: "the device closed its end")
        }
        #expect(bytes.count == 4380)
        return try UHIDEvent(bytes: bytes)
    }

    /// Reads until the device's end is closed; returns the events read
    /// before the end of file. Throws when the end stays open past `timeout`.
    func eventsUntilEndOfFile(timeout: Duration = .seconds(5)) throws -> [UHIDEvent] {
        var events: [UHIDEvent] = []
        while let message = try readMessage(timeout: timeout) {
            events.append(try UHIDEvent(bytes: message))
        }
        return events
    }

    /// Sends raw bytes as one message.
    func send(bytes: [UInt8]) throws {
        let sent = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard sent == bytes.count else { throw StandInError(description: "write failed: errno \(errno)") }
    }

    /// Sends one event as the kernel would.
    func send(_ event: UHIDEvent) throws {
        try send(bytes: try event.encoded())
    }
}

/// Collects what a device hands its handler.
final class EventRecorder: Sendable {
    private let events = Mutex<[UHIDDeviceEvent]>([])

    /// The handler to pass to `start(handler:)`.
    var handler: UHIDDevice.Handler {
        { [self] event in events.withLock { $0.append(event) } }
    }

    /// Everything recorded so far.
    var recorded: [UHIDDeviceEvent] {
        events.withLock { $0 }
    }

    /// Waits until `count` events are recorded or `timeout` passes; returns them.
    func wait(forCount count: Int, timeout: Duration = .seconds(5)) -> [UHIDDeviceEvent] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let now = recorded
            if now.count >= count { return now }
            usleep(1000)
        }
        return recorded
    }

    /// Waits until an event satisfying `predicate` is recorded; returns it, or nil after `timeout`.
    func wait(
        timeout: Duration = .seconds(5),
        for predicate: (UHIDDeviceEvent) -> Bool
    ) -> UHIDDeviceEvent? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = recorded.first(where: predicate) { return found }
            usleep(1000)
        }
        return nil
    }
}
