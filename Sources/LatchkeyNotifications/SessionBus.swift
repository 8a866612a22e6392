// The notifier's one connection to the session bus, through sd-bus (libsystemd), and
// the only code that holds sd-bus's C pointers (docs/CONTRIBUTING.md): the bus, freed
// in deinit, and the messages each call makes, freed before the call returns. It
// speaks the few members of org.freedesktop.Notifications the notifier needs
// (Notify, CloseNotification, GetCapabilities) and collects the signals it listens
// for: ActionInvoked and NotificationClosed, which a server sends to the connection
// that called Notify (dunst as a unicast signal, others to everyone), and the bus's
// NameOwnerChanged for the server's name, which says when a server starts or goes.
// sd-bus is not thread-safe: one thread, the notifier's (NotifierLoop.swift), uses
// a connection from its start to its end.

import CSystemdBus
import Glibc
import LatchkeyErrors

/// What went wrong on the session bus.
enum SessionBusFailure: String, ErrorCode {
    /// No connection: the bus is not there, refused us, or went away.
    case connection
    /// No notification server owns org.freedesktop.Notifications, and none can be started.
    case noServer
    /// A call that failed otherwise: the server's error, a time-out, an answer of another shape.
    case call

    var title: String {
        switch self {
        case .connection: "session bus connection"
        case .noServer: "no notification server"
        case .call: "notification server call"
        }
    }
}

typealias SessionBusError = CodedError<SessionBusFailure>

/// A signal the notifier acts on, as read from the bus.
enum BusSignal: Equatable {
    /// ActionInvoked(id, action_key), from the connection `sender`.
    case actionInvoked(id: UInt32, action: String, sender: String)
    /// NotificationClosed(id, reason), from the connection `sender`.
    case notificationClosed(id: UInt32, sender: String)
    /// NameOwnerChanged for the notifications name: `old` and `new` owner ("" for none).
    case serverChanged(old: String, new: String)
}

/// A connection to one session bus. Not thread-safe: used by one thread only.
final class SessionBus {
    static let name = "org.freedesktop.Notifications"
    static let objectPath = "/org/freedesktop/Notifications"
    /// How long a call may wait for its answer: long enough for the bus to start a
    /// D-Bus activated server (dunst), short enough that a hung server does not hold
    /// the notifier's other calls for long.
    static let callTimeoutMicroseconds: UInt64 = 10_000_000

    private let bus: OpaquePointer
    /// Signals the match callbacks read during `process`, handed out by it.
    private var received: [BusSignal] = []

    /// Connects to the bus at `address` (a D-Bus address, as DBUS_SESSION_BUS_ADDRESS
    /// gives it), says Hello, and subscribes to the notification server's signals and
    /// to its name's owner changes.
    init(address: String) throws(SessionBusError) {
        var made: OpaquePointer?
        try Self.check(sd_bus_new(&made), .connection, "sd_bus_new")
        guard let made else { throw SessionBusError(.connection, "sd_bus_new gave no bus") }
        bus = made
        // From here deinit frees the bus, also when this initialiser throws.
        try Self.check(sd_bus_set_address(bus, address), .connection, "the address \(address)")
        try Self.check(sd_bus_set_bus_client(bus, 1), .connection, "sd_bus_set_bus_client")
        try Self.check(sd_bus_start(bus), .connection, "connecting to \(address)")
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        // No sender in the first rule: a unicast signal carries the server's unique
        // name, not the well-known one. `process` keeps only what the notifier can
        // use; ShownPrompts checks the sender against the server that showed the
        // notification.
        for rule in [
            "type='signal',interface='\(Self.name)',path='\(Self.objectPath)'",
            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.name)'",
        ] {
            // A floating slot (nil): the match lives as long as the bus. AddMatch is a
            // call to the bus, so this also proves the connection works.
            try Self.check(
                sd_bus_add_match(bus, nil, rule, Self.onSignal, userdata),
                .connection,
                "AddMatch \(rule)"
            )
        }
    }

    deinit {
        // Every call here waits for its answer, so nothing is left to flush.
        sd_bus_close_unref(bus)
    }

    /// The connection still stands (sd-bus closes it when the bus goes away).
    var isOpen: Bool { sd_bus_is_open(bus) > 0 }

    /// Reads and dispatches what arrived, and returns the signals among it.
    func process() throws(SessionBusError) -> [BusSignal] {
        while true {
            let result = sd_bus_process(bus, nil)
            if result < 0 { throw SessionBusError(.connection, "sd_bus_process: \(Self.errnoText(result))") }
            if result == 0 { break }
        }
        defer { received = [] }
        return received
    }

    /// What to poll(2) for before `process` has more to do: the descriptor, its
    /// events and sd-bus's own deadline (a call's time-out), in CLOCK_MONOTONIC
    /// microseconds, or nil.
    func pollRequest() throws(SessionBusError) -> (descriptor: Int32, events: Int16, deadline: UInt64?) {
        let descriptor = sd_bus_get_fd(bus)
        let events = sd_bus_get_events(bus)
        try Self.check(descriptor, .connection, "sd_bus_get_fd")
        try Self.check(events, .connection, "sd_bus_get_events")
        var deadline: UInt64 = 0
        try Self.check(sd_bus_get_timeout(bus, &deadline), .connection, "sd_bus_get_timeout")
        return (descriptor, Int16(truncatingIfNeeded: events), deadline == UInt64.max ? nil : deadline)
    }

    /// The id of the notification the server shows, and the server's unique name.
    func notify(
        summary: String,
        body: String,
        actions: [String],
        urgency: UInt8,
        expireTimeout: Int32
    ) throws(SessionBusError) -> (id: UInt32, server: String) {
        let (reply, server) = try call("Notify") { (message) throws(SessionBusError) in
            try Self.append(message, string: "latchkey")
            var replacesId: UInt32 = 0
            try Self.check(sd_bus_message_append_basic(message, Self.type("u"), &replacesId), .call, "replaces_id")
            for text in ["security-high", summary, body] { try Self.append(message, string: text) }
            try Self.container(message, "a", "s") { () throws(SessionBusError) in
                for action in actions { try Self.append(message, string: action) }
            }
            try Self.container(message, "a", "{sv}") { () throws(SessionBusError) in
                try Self.container(message, "e", "sv") { () throws(SessionBusError) in
                    try Self.append(message, string: "urgency")
                    try Self.container(message, "v", "y") { () throws(SessionBusError) in
                        var level = urgency
                        try Self.check(sd_bus_message_append_basic(message, Self.type("y"), &level), .call, "urgency")
                    }
                }
                try Self.container(message, "e", "sv") { () throws(SessionBusError) in
                    try Self.append(message, string: "category")
                    try Self.container(message, "v", "s") { () throws(SessionBusError) in
                        try Self.append(message, string: "device")
                    }
                }
            }
            var timeout = expireTimeout
            try Self.check(sd_bus_message_append_basic(message, Self.type("i"), &timeout), .call, "expire_timeout")
        } read: { (reply) throws(SessionBusError) in
            var id: UInt32 = 0
            try Self.check(sd_bus_message_read_basic(reply, Self.type("u"), &id), .call, "Notify's answer")
            return id
        }
        return (reply, server)
    }

    /// Asks the server to close the notification `id`.
    func closeNotification(_ id: UInt32) throws(SessionBusError) {
        _ = try call("CloseNotification") { (message) throws(SessionBusError) in
            var id = id
            try Self.check(sd_bus_message_append_basic(message, Self.type("u"), &id), .call, "id")
        } read: { _ in
            ()
        }
    }

    /// The server's capabilities ("actions", "body-markup", …) and its unique name.
    func capabilities() throws(SessionBusError) -> (names: [String], server: String) {
        try call("GetCapabilities") { _ in
        } read: { (reply) throws(SessionBusError) in
            var names: [String] = []
            try Self.check(sd_bus_message_enter_container(reply, Self.type("a"), "s"), .call, "GetCapabilities' answer")
            while true {
                var name: UnsafePointer<CChar>?
                let result = sd_bus_message_read_basic(reply, Self.type("s"), &name)
                try Self.check(result, .call, "GetCapabilities' answer")
                guard result > 0, let name else { break }
                names.append(String(cString: name))
            }
            return names
        }
    }

    // MARK: - Messages

    /// Calls `member` on the notification server: `append` writes the arguments,
    /// `read` reads the answer. Returns what `read` made and the answer's sender.
    private func call<Answer>(
        _ member: String,
        append: (OpaquePointer) throws(SessionBusError) -> Void,
        read: (OpaquePointer) throws(SessionBusError) -> Answer
    ) throws(SessionBusError) -> (Answer, String) {
        var made: OpaquePointer?
        try Self.check(
            sd_bus_message_new_method_call(bus, &made, Self.name, Self.objectPath, Self.name, member),
            .call,
            member
        )
        guard let message = made else { throw SessionBusError(.call, "\(member): no message") }
        defer { sd_bus_message_unref(message) }
        try append(message)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var answered: OpaquePointer?
        let result = sd_bus_call(bus, message, Self.callTimeoutMicroseconds, &error, &answered)
        defer { if let answered { sd_bus_message_unref(answered) } }
        guard result >= 0, let reply = answered else {
            let name = error.name.map { String(cString: $0) }
            let detail = error.message.map { String(cString: $0) } ?? Self.errnoText(result)
            if !isOpen { throw SessionBusError(.connection, "\(member): \(detail)") }
            guard let name, Self.meansNoServer(name) else {
                throw SessionBusError(.call, "\(member): \(name.map { "\($0): " } ?? "")\(detail)")
            }
            throw SessionBusError(.noServer, "\(member): \(name): \(detail)")
        }
        let sender = sd_bus_message_get_sender(reply).map { String(cString: $0) } ?? ""
        return (try read(reply), sender)
    }

    /// Whether the bus answered for the server that nobody owns the name and it
    /// could not start one: not activatable, or its activation failed (dunst
    /// without a display ends at once).
    static func meansNoServer(_ errorName: String) -> Bool {
        ["org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner"].contains(errorName)
            || errorName.hasPrefix("org.freedesktop.DBus.Error.Spawn.")
    }

    private static func append(_ message: OpaquePointer, string: String) throws(SessionBusError) {
        // A string argument goes as the C string itself, not a pointer to it. sd-bus
        // refuses text that is not UTF-8, which a Swift string always is.
        let result = string.withCString { sd_bus_message_append_basic(message, type("s"), $0) }
        try check(result, .call, "a string argument")
    }

    private static func container(
        _ message: OpaquePointer,
        _ kind: Unicode.Scalar,
        _ contents: String,
        _ body: () throws(SessionBusError) -> Void
    ) throws(SessionBusError) {
        try check(sd_bus_message_open_container(message, type(kind), contents), .call, "a container \(contents)")
        try body()
        try check(sd_bus_message_close_container(message), .call, "a container \(contents)")
    }

    // MARK: - Signals

    /// The match callback: runs inside sd_bus_process, on the bus's thread, and
    /// only records what arrived.
    private static let onSignal: sd_bus_message_handler_t = { message, userdata, _ in
        guard let message, let userdata else { return 0 }
        let bus = Unmanaged<SessionBus>.fromOpaque(userdata).takeUnretainedValue()
        if let signal = read(signal: message) { bus.received.append(signal) }
        return 0
    }

    /// The signal `message` is, when the notifier cares about it.
    private static func read(signal message: OpaquePointer) -> BusSignal? {
        guard let member = sd_bus_message_get_member(message).map({ String(cString: $0) }),
            let sender = sd_bus_message_get_sender(message).map({ String(cString: $0) })
        else { return nil }
        switch member {
        case "ActionInvoked":
            var id: UInt32 = 0
            var action: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, type("u"), &id) > 0,
                sd_bus_message_read_basic(message, type("s"), &action) > 0, let action
            else { return nil }
            return .actionInvoked(id: id, action: String(cString: action), sender: sender)
        case "NotificationClosed":
            var id: UInt32 = 0
            guard sd_bus_message_read_basic(message, type("u"), &id) > 0 else { return nil }
            return .notificationClosed(id: id, sender: sender)
        case "NameOwnerChanged":
            var strings: [String] = []
            for _ in 0..<3 {
                var text: UnsafePointer<CChar>?
                guard sd_bus_message_read_basic(message, type("s"), &text) > 0, let text else { return nil }
                strings.append(String(cString: text))
            }
            guard strings[0] == Self.name else { return nil }
            return .serverChanged(old: strings[1], new: strings[2])
        default:
            return nil
        }
    }

    // MARK: - Helpers

    /// A D-Bus type code as sd-bus takes it (a C char).
    private static func type(_ code: Unicode.Scalar) -> CChar { CChar(truncatingIfNeeded: code.value) }

    /// Throws when an sd-bus call returned a negative errno.
    @discardableResult
    private static func check(
        _ result: Int32,
        _ code: SessionBusFailure,
        _ what: @autoclosure () -> String
    ) throws(SessionBusError) -> Int32 {
        guard result < 0 else { return result }
        throw SessionBusError(code, "\(what()): \(errnoText(result))")
    }

    private static func errnoText(_ result: Int32) -> String {
        "\(String(cString: strerror(-result))) (errno \(-result))"
    }
}
