#!/usr/bin/env bash
# The test command (README "Run the tests"): installs what the tests need on a
# fresh Debian 12 machine, then builds and runs every test. CI runs exactly this.
#
#   scripts/test.sh            # deps, swift test, a short fuzz replay
#   LATCHKEY_SKIP_DEPS=1 ...   # skip the apt/pip step (offline, already set up)
#   LATCHKEY_FUZZ_RUNS=N ...   # inputs per fuzzer in the smoke run (default 20000, 0 skips)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "need root (or sudo) to run: $*" >&2
        return 1
    fi
}

install_deps() {
    local apt_packages=(libssl-dev libudev-dev libsqlite3-dev pkg-config python3 clang)
    local missing=()
    for package in "${apt_packages[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "apt-get install ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
    # python-fido2 2.x is the relying party library the tests verify against.
    if ! python3 -c 'import fido2.server, fido2.webauthn; from fido2.webauthn import RegistrationResponse' 2>/dev/null; then
        log "pip install fido2 (2.x)"
        python3 -m pip install -q "fido2>=2,<3" 2>/dev/null ||
            python3 -m pip install -q --break-system-packages "fido2>=2,<3"
    fi
}

if [ "${LATCHKEY_SKIP_DEPS:-0}" != 1 ]; then install_deps; fi

log "swift build"
swift build --build-tests

log "swift test"
swift test --skip-build

runs="${LATCHKEY_FUZZ_RUNS:-20000}"
if [ "$runs" != 0 ]; then
    log "fuzz smoke run ($runs inputs per fuzzer; scripts/fuzz.sh runs 1,000,000)"
    scripts/fuzz.sh --runs "$runs"
fi
