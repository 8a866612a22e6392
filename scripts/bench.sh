#!/usr/bin/env bash
# Runs the benchmarks (release build) and prints medians, p90s and each figure
# as a ratio of the raw OpenSSL P-256 signature measured in the same run.
#   scripts/bench.sh [ITERATIONS]   (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --package-path Benchmarks --product latchkey-bench
"$(swift build -c release --package-path Benchmarks --show-bin-path)/latchkey-bench" "${1:-2000}"
