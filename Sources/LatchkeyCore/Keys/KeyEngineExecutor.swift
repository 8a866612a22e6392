// Where a key's engine runs.
//
// The engine (CTAP.Authenticator, an actor) calls its credential store
// synchronously, and the store commits before it answers: a discoverable
// makeCredential, a PIN change or a counter reservation waits for SQLite's
// fsync, milliseconds on a real disk. On Swift's cooperative pool, which has
// one thread per core, two such writes of two keys hold every thread of a
// two-core machine, and every other key's request, however cheap, waits
// behind them. So the requests a key's transports deliver run on a serial
// queue of the key's own, given to their tasks as their executor preference
// (SE-0417): a default actor called from such a task runs on it. A disk write
// then holds the key's own queue and no one else's. libdispatch gives a
// serial queue a thread only while it has work, so an idle key holds no
// thread.

import Dispatch

/// A key's serial queue, as a task executor.
package final class KeyEngineExecutor: TaskExecutor {
    private let queue: DispatchQueue

    /// An executor on a new serial queue labelled `label` (shown in a debugger).
    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        DaemonActivity.note()
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
