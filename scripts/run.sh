#!/usr/bin/env bash
# The run command (README "Run a key"): on a fresh Debian 12 machine with Swift,
# installs the Debian packages the build links against when any is missing,
# then builds and starts latchkeyd with exactly the arguments given.
#
#   scripts/run.sh                                         # the embedded defaults: one key
#                                                          # "default", presence "prompt", state in
#                                                          # ~/.local/state/latchkeyd (/var/lib/latchkeyd as root)
#   scripts/run.sh --state-dir "$(mktemp -d)" --presence auto  # a throwaway key that approves everything,
#                                                          # in a new directory only you can enter
#   scripts/run.sh --help                                  # every latchkeyd flag
#   LATCHKEY_SKIP_DEPS=1 scripts/run.sh ...                # skip the package check (not Debian, offline)
#
# No arguments are added: presence stays "prompt" unless asked otherwise, so a
# key started by this script never approves a request on its own.
set -euo pipefail
cd "$(dirname "$0")/.."

# What `swift build` needs from Debian: OpenSSL's libcrypto, libudev (and
# linux/uhid.h), libsystemd (sd-bus, for desktop notifications), SQLite, zlib, and
# pkg-config to find them.
build_packages=(libssl-dev libudev-dev libsystemd-dev libsqlite3-dev zlib1g-dev pkg-config)

missing_packages() {
    local package
    for package in "${build_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || echo "$package"
    done
}

install_build_packages() {
    if ! command -v dpkg-query >/dev/null; then
        echo "run.sh: not a Debian system; install ${build_packages[*]} (or your system's equivalents) yourself" >&2
        return 0
    fi
    local missing
    mapfile -t missing < <(missing_packages)
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "run.sh: ${missing[*]} missing; run as root or install sudo" >&2
            exit 1
        }
        sudo=(sudo)
    fi
    echo "==> apt-get install ${missing[*]}" >&2
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

command -v swift >/dev/null || {
    echo "run.sh: swift not found; install Swift 6.3 (https://www.swift.org/install/linux/) first" >&2
    exit 1
}
if [ "${LATCHKEY_SKIP_DEPS:-0}" != 1 ]; then install_build_packages; fi

# swift run builds latchkeyd (debug) when needed, then replaces itself with it,
# so Ctrl-C and SIGTERM reach the daemon directly.
exec swift run latchkeyd "$@"
