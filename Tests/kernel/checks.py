"""The result lines of the kernel tests' python helpers (fido2_checks.py,
ctap21_checks.py): every check prints one line on stdout,
    PASS<TAB>name            or    FAIL<TAB>name<TAB>why
which guest-checks.sh numbers into its `ok N - name` lines; details go to stderr.
"""

from __future__ import annotations

import sys
import traceback

RESULTS: dict[str, bool] = {}


def log(*args) -> None:
    print("#", *args, file=sys.stderr, flush=True)


def check(name: str, *requires: str):
    """Runs the decorated function at once as the check `name`; a check fails when it
    raises, or when a check it requires did not pass (saying so: nothing is skipped
    silently)."""

    def run(fn):
        missing = [r for r in requires if not RESULTS.get(r)]
        if missing:
            RESULTS[name] = False
            print(f"FAIL\t{name}\tprerequisite failed: {', '.join(missing)}", flush=True)
            return fn
        try:
            detail = fn()
        except Exception as e:  # noqa: BLE001 - every failure is reported, never raised
            RESULTS[name] = False
            log(f"{name}:")
            for line in traceback.format_exc().rstrip().splitlines():
                log("   ", line)
            print(f"FAIL\t{name}\t{type(e).__name__}: {e}".replace("\n", " ")[:600], flush=True)
            return fn
        RESULTS[name] = True
        print(f"PASS\t{name}" + (f" ({detail})" if detail else ""), flush=True)
        return fn

    return run
