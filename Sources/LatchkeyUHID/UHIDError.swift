// The one error type of LatchkeyUHID: a local failure with its context.
// Callers match on `code`; the reason, the failed system call and its errno,
// and the raising location are for the log.

/// A failure of the uhid transport: a code to match on and the context to log.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: UHIDError(.truncatedEvent, ""))`. Reasons never contain
/// report contents.
public struct UHIDError: Error, Equatable, CustomStringConvertible {
    /// What kind of failure this is. An open set: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// Bytes that should hold a `struct uhid_event` are shorter than its
        /// type field, or than the fixed fields of its payload, or than the
        /// data its size field announces.
        public static let truncatedEvent = Code("truncatedEvent")
        /// The event's `type` is not one latchkey handles (including the
        /// kernel's legacy types 0, 7 and 8).
        public static let unknownEventType = Code("unknownEventType")
        /// An event field is out of range: a size above `UHID_DATA_MAX` or
        /// `HID_MAX_DESCRIPTOR_SIZE`, an empty report descriptor, a name that
        /// does not fit its array or holds a NUL, more than 4380 bytes.
        public static let invalidEvent = Code("invalidEvent")
        /// `/dev/uhid` does not exist (or has no driver behind it): the uhid
        /// module is not loaded.
        public static let uhidUnavailable = Code("uhidUnavailable")
        /// The process may not open `/dev/uhid`.
        public static let permissionDenied = Code("permissionDenied")
        /// A system call failed; `systemCall` and `errno` say which and why.
        public static let systemCall = Code("systemCall")
        /// The device has been destroyed; its descriptor is closed.
        public static let destroyed = Code("destroyed")
        /// `sendInputReport` was called before `start(handler:)`.
        public static let notStarted = Code("notStarted")
        /// `start(handler:)` was called a second time.
        public static let alreadyStarted = Code("alreadyStarted")
        /// The other end closed the descriptor (a read returned 0 bytes).
        public static let endOfFile = Code("endOfFile")
        /// libudev failed (no context, or enumerating devices failed).
        public static let udev = Code("udev")
        /// The waiting task was cancelled.
        public static let cancelled = Code("cancelled")

        /// The code's name, as in `UHIDError.<name>`.
        public var description: String { name }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation.
    public var reason: String
    /// The name of the system call that failed (`"open"`, `"write"`, ...), if one did.
    public var systemCall: String?
    /// The `errno` that system call set, if one failed.
    public var errno: Int32?
    /// The file that raised the error (`#fileID`).
    public var file: String
    /// The line that raised the error.
    public var line: Int

    /// Creates an error; `file` and `line` default to the caller's location.
    public init(
        _ code: Code,
        _ reason: String,
        systemCall: String? = nil,
        errno: Int32? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.reason = reason
        self.systemCall = systemCall
        self.errno = errno
        self.file = file
        self.line = line
    }

    /// `UHIDError.<code>: <reason> (<file>:<line>)`.
    public var description: String {
        "UHIDError.\(code): \(reason) (\(file):\(line))"
    }

    /// Equal by code only; the reason and location are context.
    public static func == (lhs: UHIDError, rhs: UHIDError) -> Bool {
        lhs.code == rhs.code
    }
}
