#!/usr/bin/env bash
# latchkeyd measured from outside under a CI fleet's load (Benchmarks/Sources/LatchkeyLoad):
# a release latchkeyd on loopback USB/IP, the benchmarks' own USB/IP host, every signature
# verified. Prints, from one run of each:
#   single     each operation's median round trip beside a CTAPHID_PING of as many reports
#   load       p50/p90/p99/max of 10,005 mixed operations from 6 clients on 5 keys, RSS
#   isolation  getAssertions on one key, alone and while two other keys write to disk
#   quiet      a getAssertion while busy and first after 8 s quiet (memory given back), RSS
#   scale      getAssertion and makeCredential with 10 and with 10,000 discoverable credentials
#   scripts/load.sh [single|load|isolation|quiet|scale [COUNT]]   (default: all five, default counts)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -gt 2 || ( $# -ge 1 && ! $1 =~ ^(single|load|isolation|quiet|scale)$ ) || ( $# -eq 2 && ! $2 =~ ^[1-9][0-9]*$ ) ]]; then
    echo "usage: scripts/load.sh [single|load|isolation|quiet|scale [COUNT]]" >&2
    exit 64  # EX_USAGE
fi
# The benchmarks' scratch folder: the root package's targets are compiled for release once
# for scripts/bench.sh and this.
scratch="$PWD/.build-bench"
touch Benchmarks/Package.swift  # see scripts/bench.sh
build=(swift build -c release --package-path Benchmarks --scratch-path "$scratch")
"${build[@]}" --product latchkeyd
"${build[@]}" --product LatchkeyLoad
bin="$("${build[@]}" --show-bin-path)"
export LATCHKEYD="$bin/latchkeyd"
if [[ $# -ge 1 ]]; then
    "$bin/LatchkeyLoad" "$@"
else
    for mode in single load isolation quiet scale; do "$bin/LatchkeyLoad" "$mode"; echo; done
fi
