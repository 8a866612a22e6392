#!/usr/bin/env bash
# Runs the benchmarks (release build) and prints medians, p90s and each figure
# as a ratio of the raw OpenSSL P-256 signature measured in the same run,
# including getAssertion round trips through a release latchkeyd's USB/IP
# server on loopback (the daemon is built in its own scratch directory and
# runs only while that row is measured).
#   scripts/bench.sh [ITERATIONS]   (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product latchkeyd --scratch-path .build-bench-daemon
daemon="$(swift build -c release --scratch-path .build-bench-daemon --show-bin-path)/latchkeyd"
# SwiftPM does not notice source files added to the root package (a path dependency)
# since the last build of this package; a newer manifest makes it plan again.
touch Benchmarks/Package.swift
swift build -c release --package-path Benchmarks --product latchkey-bench
"$(swift build -c release --package-path Benchmarks --show-bin-path)/latchkey-bench" "${1:-2000}" --daemon "$daemon"
