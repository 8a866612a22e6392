// What a process holding keys turns off about itself: core dumps and the
// same user's ptrace and /proc/PID/mem (PR_SET_DUMPABLE 0, prctl(2)). The
// kernel then makes the process's /proc/PID files root's, so the same
// account can no longer read its memory, environment or descriptors there
// either; root still can. setrlimit(RLIMIT_CORE, 0) is set as well, for a
// process that a later exec would make dumpable again.

import CProcessControl
import Glibc

/// Core dumps and ptrace off for this process.
public enum ProcessHardening {
    /// Makes the process undumpable and its core limit zero; throws when the
    /// kernel refuses (it never should for a process lowering its own setting).
    public static func makeUndumpable() throws(SystemCallError) {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        try SystemCall.run("setrlimit(RLIMIT_CORE)") { setrlimit(Int32(RLIMIT_CORE.rawValue), &limit) }
        try SystemCall.run("prctl(PR_SET_DUMPABLE)") { latchkey_set_dumpable(0) }
    }

    /// Whether the process may dump core and be traced by its own account
    /// (PR_GET_DUMPABLE), nil when the kernel does not say.
    public static var isDumpable: Bool? {
        let value = latchkey_get_dumpable()
        return value < 0 ? nil : value != 0
    }
}
