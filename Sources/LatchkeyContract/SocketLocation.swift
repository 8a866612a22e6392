// Where the control socket is: `--socket`, else `$LATCHKEY_SOCKET`, else the
// system service's socket when it exists, else the user service's socket.
// latchkeyctl and latchkey-webdriver share the rule; the caller says whether
// a file exists, so this target still does no I/O.

/// The control socket's path and how it was chosen (for error messages).
public struct SocketLocation: Equatable, Sendable {
    public var path: String
    /// Says where `path` came from, e.g. "from --socket".
    public var origin: String

    public static let systemPath = "/run/latchkeyd/control.sock"

    /// Resolves the socket path.
    ///
    /// - Parameters:
    ///   - option: the `--socket` value, if given.
    ///   - environment: the process environment.
    ///   - exists: whether a file exists at a path.
    public static func resolve(
        option: String?,
        environment: [String: String],
        exists: (String) -> Bool
    ) -> SocketLocation {
        if let option {
            return SocketLocation(path: option, origin: "from --socket")
        }
        if let path = environment["LATCHKEY_SOCKET"], !path.isEmpty {
            return SocketLocation(path: path, origin: "from $LATCHKEY_SOCKET")
        }
        if exists(systemPath) {
            return SocketLocation(path: systemPath, origin: "the system service's socket")
        }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            let directory = runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime
            return SocketLocation(
                path: directory + "/latchkeyd/control.sock",
                origin: "the user service's socket; \(systemPath) does not exist either"
            )
        }
        return SocketLocation(path: systemPath, origin: "the system service's socket; $XDG_RUNTIME_DIR is not set")
    }
}
