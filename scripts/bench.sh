#!/usr/bin/env bash
# Runs the benchmarks in Benchmarks/ (package-benchmark, release build) once and prints each
# figure as a ratio of the raw OpenSSL P-256 signature measured in the same run, including
# getAssertion round trips through a release latchkeyd's USB/IP server on loopback next to a
# CTAPHID_PING of as many reports (the daemon runs only while those two are measured).
#   scripts/bench.sh [ITERATIONS]   (default 2000; makeCredential-rk-sqlite runs a tenth)
# The run is kept as package-benchmark's baseline "latest" (Benchmarks/.benchmarkBaselines/),
# so `swift package --package-path Benchmarks --scratch-path .build-bench benchmark baseline
# read latest` shows every percentile, and Benchmarks/Thresholds/ can be re-recorded from it
# without another run (docs/testing.md, "Benchmarks").
set -euo pipefail
cd "$(dirname "$0")/.."
iterations="${1:-2000}"
if [[ $# -gt 1 || ! $iterations =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: scripts/bench.sh [ITERATIONS]" >&2
    exit 64  # EX_USAGE
fi
# One scratch folder for the daemon and the benchmarks, so the root package's targets are
# compiled for release once for both.
scratch="$PWD/.build-bench"
# SwiftPM does not notice source files added to the root package (a path dependency)
# since the last build of this package; a newer manifest makes it plan again.
touch Benchmarks/Package.swift
swift build -c release --package-path Benchmarks --scratch-path "$scratch" --product latchkeyd
export LATCHKEYD="$(swift build -c release --package-path Benchmarks --scratch-path "$scratch" --show-bin-path)/latchkeyd"
export LATCHKEY_BENCH_ITERATIONS="$iterations"
benchmark=(swift package --package-path Benchmarks --scratch-path "$scratch")
"${benchmark[@]}" --allow-writing-to-package-directory benchmark baseline update latest --no-progress
export_dir="$(mktemp -d)"
trap 'rm -rf "$export_dir"' EXIT
"${benchmark[@]}" --allow-writing-to-directory "$export_dir" \
    benchmark baseline read latest --format jmh --path "$export_dir" --no-progress >/dev/null
python3 Benchmarks/ratios.py "$export_dir/latest.jmh.json" "$LATCHKEYD"
