// prctl(2), which Swift cannot call: it is variadic. Each option the daemon
// sets is a function of fixed arguments here (LatchkeySystem/ProcessHardening.swift).
#ifndef CPROCESSCONTROL_H
#define CPROCESSCONTROL_H

#include <sys/prctl.h>

/// PR_SET_DUMPABLE: 0 means no core dump, and /proc/PID files owned by root
/// (no ptrace, no /proc/PID/mem or environ for the same user).
static inline int latchkey_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}

/// PR_GET_DUMPABLE: the current setting, or -1 with errno.
static inline int latchkey_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}

#endif
