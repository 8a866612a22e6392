// Who is asking a key through a transport, for prompts and events. A HID
// session runs each engine request with `Requester.$current` bound, so the
// presence broker (and anything else the request reaches) can name the
// transport and, where the kernel tells it, the process on the other end
// (USB/IP on loopback: the peer socket's uid, and its pid and executable when
// the daemon may see them). Task-local, so no protocol target carries it.

/// The transport and, where known, the process behind a request.
public struct Requester: Sendable, Equatable {
    public enum Transport: String, Sendable, Codable {
        /// The key's hidraw node, through /dev/uhid: the kernel does not say who opened it.
        case uhid
        /// USB/IP (on loopback the peer is known; from another host only its address).
        case usbip
    }

    public var transport: Transport
    /// The peer's process, when the kernel identified it.
    public var caller: Caller?
    /// The peer's executable (/proc/PID/exe), when the daemon may read it.
    public var executable: String?
    /// The peer's address, for a USB/IP connection ("127.0.0.1:45678").
    public var address: String?

    public init(transport: Transport, caller: Caller? = nil, executable: String? = nil, address: String? = nil) {
        self.transport = transport
        self.caller = caller
        self.executable = executable
        self.address = address
    }

    /// The requester of the engine request running now, if a transport bound one.
    @TaskLocal public static var current: Requester?
}
