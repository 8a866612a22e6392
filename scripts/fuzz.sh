#!/usr/bin/env bash
# Builds the Fuzz package with libFuzzer and AddressSanitizer, then runs every fuzzer in it
# (each directory of Fuzz/Sources is one fuzzer) for a number of inputs.
#
# usage: scripts/fuzz.sh [-runs=N | N] [FUZZER...]
#   N        inputs per fuzzer (default 1000000)
#   FUZZER   run only these (e.g. FuzzCTAPHID); default: all of Fuzz/Sources/*
#   FUZZ_FLAGS  extra libFuzzer flags, e.g. FUZZ_FLAGS="-max_total_time=600 -jobs=2"
#
# Each fuzzer keeps its corpus in .build/fuzz-corpus/NAME and starts from the kept crashers
# of its test target (Tests/<NAME without Fuzz>Tests/Crashers; for the daemon's JSON
# fuzzers Tests/LatchkeyCoreTests/Crashers/NAME) when there are any. A crash leaves its
# input in fuzz-artifacts/NAME-crash-…: copy it into that Crashers directory once fixed, so
# the test suite replays it. Exits non-zero if any fuzzer found a crash.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

runs=1000000
fuzzers=()
for argument in "$@"; do
    case "$argument" in
        -runs=* | --runs=*) runs="${argument#*=}" ;;
        *[!0-9]*) fuzzers+=("$argument") ;;
        *) runs="$argument" ;;
    esac
done
if [[ ${#fuzzers[@]} -eq 0 ]]; then
    for directory in Fuzz/Sources/*/; do
        fuzzers+=("$(basename "$directory")")
    done
fi

# --sanitize makes SwiftPM link libFuzzer's main in place of the executables' own; the
# -Xswiftc copy instruments the root package's targets too, which --sanitize leaves alone.
# SwiftPM does not notice source files added to a path dependency (the root package)
# since its last build of this package; a newer manifest makes it plan the build again.
touch Fuzz/Package.swift
build=(swift build -c release --package-path Fuzz
    --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address)
# Only the fuzzers asked for, and so only their dependencies: the protocol fuzzers need
# none of the daemon's (NIO, Hummingbird, GRDB), whose release + ASan build is most of
# the time of a run of them all.
for name in "${fuzzers[@]}"; do
    echo "+ ${build[*]} --product $name"
    "${build[@]}" --product "$name"
done
bin="$("${build[@]}" --show-bin-path)"

mkdir -p fuzz-artifacts
failed=()
for name in "${fuzzers[@]}"; do
    if [[ ! -x "$bin/$name" ]]; then
        echo "error: no fuzzer executable $bin/$name" >&2
        failed+=("$name")
        continue
    fi
    corpus=".build/fuzz-corpus/$name"
    mkdir -p "$corpus"
    seeds=()
    for crashers in "Tests/${name#Fuzz}Tests/Crashers" "Tests/LatchkeyCoreTests/Crashers/$name"; do
        if [[ -d "$crashers" ]]; then
            seeds+=("$crashers")
        fi
    done
    # Hand-made valid inputs, so short runs reach past the parsers.
    if [[ -d "Fuzz/Seeds/$name" ]]; then
        seeds+=("Fuzz/Seeds/$name")
    fi
    # shellcheck disable=SC2206  # FUZZ_FLAGS is split into flags on purpose.
    command=("$bin/$name" "-runs=$runs" "-artifact_prefix=fuzz-artifacts/$name-" "-print_final_stats=1"
        ${FUZZ_FLAGS:-} "$corpus" "${seeds[@]}")
    echo "+ ${command[*]}"
    if ! "${command[@]}"; then
        failed+=("$name")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: failed: ${failed[*]} (inputs in fuzz-artifacts/)" >&2
    exit 1
fi
echo "fuzz: ${#fuzzers[@]} fuzzer(s) ran $runs inputs each without a crash"
