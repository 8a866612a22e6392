#!/usr/bin/env bash
# Fails when a build log holds a compiler warning from a file of this repository's
# Sources/ or Tests/; the dependencies' own warnings (and SwiftPM's notes about their
# packages) do not count. The test command runs it on its debug build of every target
# (scripts/test.sh) and the allocation gate on its release build of latchkeyd
# (scripts/bench-gate.sh). A build prints a file's warnings only when it compiles the
# file: CI builds from a fresh clone, so it sees all of them; locally, build from clean.
#
#   swift build --build-tests 2>&1 | tee build.log; scripts/warnings.sh build.log
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd -P)"
log="${1:?usage: scripts/warnings.sh BUILD-LOG}"
# "/…/Sources/X/Y.swift:12:5: warning: …" (the compiler names files by absolute path)
found="$(grep -E "^${root}/(Sources|Tests)/[^:]+:[0-9]+:[0-9]+: warning: " "$log" | sort -u || true)"
if [ -n "$found" ]; then
    echo "$found" >&2
    echo "warnings: $(printf '%s\n' "$found" | wc -l) in this repository's sources (above); the build must print none" >&2
    exit 1
fi
echo "warnings: none in Sources/ or Tests/"
