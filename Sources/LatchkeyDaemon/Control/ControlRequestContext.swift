// Who asks the control API. Each connection to the socket is identified once,
// when it is accepted: SO_PEERCRED names the process that connected (uid, gid,
// pid, as the kernel recorded them at connect(2)); a connection it cannot
// identify is closed before any request is read. The connection's task carries
// that `Caller` (a task-local bound around Hummingbird's request loop), and
// every request's context holds it, so a route hands it to the key manager,
// which decides (Keys/Access.swift). Routes under /v1/keys/{name} get the
// name, validated once, in `KeyRequestContext`.

import Glibc
import Hummingbird
import HummingbirdCore
import LatchkeyContract
import LatchkeyCore
import Logging
import NIOCore

/// The context of every control API request: Hummingbird's core and the caller.
struct ControlRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The process on the other end of the connection.
    let caller: Caller

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        // Bound for every connection the server accepts (ControlConnection);
        // without it, the request holds no tier on any key.
        caller = ControlConnection.caller ?? .unidentified
    }
}

/// The context of a route under /v1/keys/{name}: the caller and the key's name,
/// checked against the grammar before the route runs (a 400 that states it).
struct KeyRequestContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let caller: Caller
    let key: KeyName

    init(context: ControlRequestContext) throws(ControlError) {
        coreContext = context.coreContext
        caller = context.caller
        key = try keyName(parameter(context, "name"))
    }
}

/// The peer of the connection whose requests run now.
enum ControlConnection {
    @TaskLocal static var caller: Caller?

    /// SO_PEERCRED of a connection the control socket accepted; on its event loop.
    static func peer(of channel: any Channel) -> EventLoopFuture<Caller> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ControlError.internalError("the connection has no socket"))
        }
        // struct ucred (socket(7)): pid, uid, gid.
        let credentials: EventLoopFuture<(Int32, UInt32, UInt32)> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(SO_PEERCRED)
        )
        return credentials.map { pid, uid, gid in Caller(uid: uid, gid: gid, pid: pid) }
    }
}
