#!/usr/bin/env bash
# CI's allocation gate: builds the benchmarks in Benchmarks/ (release, as scripts/bench.sh
# does) and checks each benchmark's p90 malloc count against Benchmarks/Thresholds/; a
# count more than 10% over its recorded value fails (the tolerance is in the benchmarks'
# configuration). Times are never checked: on a shared machine they mean nothing alone.
# Allocation counts repeat exactly from run to run, so a change in one is a change in code.
# Its release build of latchkeyd also fails on a warning from our sources (scripts/warnings.sh).
#   scripts/bench-gate.sh   (LATCHKEY_BENCH_ITERATIONS, default 200, sets the iterations)
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="$PWD/.build-bench"
touch Benchmarks/Package.swift  # see scripts/bench.sh
# The release build of latchkeyd and every target it links: it must print no warning from our
# sources (scripts/warnings.sh), so CI checks release warnings without a second release build.
build_log="$(mktemp)"
swift build -c release --package-path Benchmarks --scratch-path "$scratch" --product latchkeyd 2>&1 | tee "$build_log"
scripts/warnings.sh "$build_log"
rm -f "$build_log"
export LATCHKEYD="$(swift build -c release --package-path Benchmarks --scratch-path "$scratch" --show-bin-path)/latchkeyd"
export LATCHKEY_BENCH_ITERATIONS="${LATCHKEY_BENCH_ITERATIONS:-200}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
(cd Benchmarks && swift package --scratch-path "$scratch" benchmark thresholds check --no-progress) 2>&1 \
    | tee "$log" || status=$?
if [[ $status -eq 0 ]]; then
    echo "allocation gate: every p90 malloc count within 10% of Benchmarks/Thresholds/"
elif grep -q benchmarkThresholdRegression "$log"; then
    echo "allocation gate: a benchmark allocates more than Benchmarks/Thresholds/ allows (above)" >&2
    exit 1
elif grep -q benchmarkThresholdImprovement "$log"; then
    # Fewer mallocs than recorded: not a failure, but the record should follow (docs/testing.md).
    echo "allocation gate: fewer mallocs than recorded (above); re-record Benchmarks/Thresholds/"
else
    echo "allocation gate: the benchmarks did not run (exit $status, above)" >&2
    exit 1
fi
