// The control API's connection cap: over it, the connection idle the
// longest makes room; when every one is busy, the newcomer is refused.

import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

@Suite("connection governor")
struct ConnectionGovernorTests {
    private func isClosed(_ channel: EmbeddedChannel) -> Bool {
        channel.embeddedEventLoop.run()
        let closed = Mutex(false)
        channel.closeFuture.whenComplete { _ in closed.withLock { $0 = true } }
        return closed.withLock { $0 }
    }

    @Test("over the cap the longest-idle connection is closed; a busy one never is")
    func evictsIdleFirst() throws {
        let governor = ConnectionGovernor(limit: 2, logger: Logger(label: "test"))
        let (a, b, c, d) = (EmbeddedChannel(), EmbeddedChannel(), EmbeddedChannel(), EmbeddedChannel())
        #expect(governor.admit(ObjectIdentifier(a), channel: a))
        #expect(governor.admit(ObjectIdentifier(b), channel: b))
        governor.busy(ObjectIdentifier(a))
        #expect(governor.admit(ObjectIdentifier(c), channel: c), "b is idle: it makes room")
        #expect(isClosed(b))
        #expect(!isClosed(a), "a is busy with a request")
        governor.busy(ObjectIdentifier(c))
        #expect(!governor.admit(ObjectIdentifier(d), channel: d), "every slot is busy: refused")
        #expect(governor.count == 2)
        governor.idle(ObjectIdentifier(a))
        #expect(governor.admit(ObjectIdentifier(d), channel: d), "a finished its request and is idle now")
        #expect(isClosed(a))
        governor.closed(ObjectIdentifier(c))
        #expect(governor.count == 1)
    }
}
