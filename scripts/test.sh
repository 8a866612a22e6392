#!/usr/bin/env bash
# The test command (README "Run the tests"): installs what the tests need on a
# fresh Debian 12 machine, then builds and runs every test. CI runs exactly this.
#
#   scripts/test.sh                  # everything below, in this order:
#     deps (apt, pip) -> the test accounts (scripts/test-accounts.sh) -> swift build (failing on
#     a warning from Sources/ or Tests/, scripts/warnings.sh) + swift test -> pytest (latchkeyctl, the daemon end to end over USB/IP, run as lk-owner) -> Yubico's device suite over USB/IP
#     (scripts/device-suite.sh) -> systemd unit checks -> the real-kernel
#     tests in the VM rig (scripts/kernel-tests.sh) -> a short fuzz replay -> the
#     allocation gate (scripts/bench-gate.sh: benchmark malloc counts; its release build of
#     latchkeyd is also the check that the release build prints no warning of ours)
#   LATCHKEY_SKIP_DEPS=1 ...         # skip the apt/pip step (offline, already set up)
#   LATCHKEY_SKIP_KERNEL_TESTS=1 ... # skip the VM rig (Tests/rig; building its images needs root)
#   LATCHKEY_FUZZ_RUNS=N ...         # inputs per fuzzer in the smoke run (default 20000, 0 skips)
#   LATCHKEY_SKIP_BENCH_GATE=1 ...   # skip the allocation gate (its release build takes minutes)
#   LATCHKEY_FUZZERS="FuzzCBOR ..."  # which fuzzers the smoke run builds and runs (default the
#                                    # protocol fuzzers; "all" for every one in Fuzz/Sources)
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
    # libsystemd-dev: sd-bus, the desktop notifier's D-Bus client. dbus, libglib2.0-bin
    # (gdbus) and python3-gi: a private session bus and a fake notification server for
    # the desktop-notification tests; dunst and xvfb: Debian's notification server on a
    # display of its own (Tests/e2e/test_dunst.py); gnome-keyring and libsecret-tools
    # (secret-tool): the Secret Service the master key is sealed in
    # (Tests/e2e/test_secrets_at_rest.py). dpkg-dev and binutils:
    # scripts/package-deb.sh, for the kernel tests' deb suite; swtpm and ovmf: that suite's
    # VM has a TPM 2.0 (swtpm, no swtpm_setup: a fresh state directory is a new TPM) and
    # boots through UEFI (systemd-creds has-tpm2 wants the firmware's TPM2 table).
    local apt_packages=(libssl-dev libudev-dev libsystemd-dev libsqlite3-dev zlib1g-dev pkg-config python3 python3-pip
        clang systemd dbus libglib2.0-bin python3-gi dunst xvfb dpkg-dev binutils gnome-keyring libsecret-tools
        swtpm ovmf)
    local missing=()
    for package in "${apt_packages[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "apt-get install ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
    # python-fido2 2.x is the FIDO client and relying party library the tests use.
    # usbip 0.7.0 runs the stand-in USB/IP server that checks our client (Tests/e2e/standin_usbip.py).
    # openapi-spec-validator, jsonschema (4.18+: referencing) and PyYAML check the
    # control API's OpenAPI file and the daemon's answers against it.
    # selenium 4 drives latchkey-webdriver with its own virtual authenticator classes (Tests/e2e/test_webdriver.py).
    # Every version is exact, their own dependencies that the tests touch too
    # (cryptography, referencing), so that two runs of one commit test with the same code;
    # one is changed here on purpose. Installed when any differs from what is there.
    local pip_packages=("fido2==2.2.1" "pytest==9.0.3" "usbip==0.7.0" "openapi-spec-validator==0.9.0"
        "openapi-schema-validator==0.9.0" "jsonschema==4.26.0" "jsonschema-specifications==2025.9.1"
        "referencing==0.37.0" "PyYAML==6.0.3" "selenium==4.51.0" "cryptography==48.0.0")
    if ! python3 - "${pip_packages[@]}" <<'PY' 2>/dev/null; then
import importlib.metadata, sys
for requirement in sys.argv[1:]:
    name, version = requirement.split("==")
    if importlib.metadata.version(name) != version:
        sys.exit(1)
PY
        log "pip install ${pip_packages[*]}"
        python3 -m pip install -q "${pip_packages[@]}" 2>/dev/null ||
            python3 -m pip install -q --break-system-packages "${pip_packages[@]}"
    fi
}

if [ "${LATCHKEY_SKIP_DEPS:-0}" != 1 ]; then install_deps; fi

# The unprivileged accounts the e2e suite runs latchkeyd and its clients as (lk-owner
# runs the daemon, lk-other is the second account that must be refused): a daemon is
# tested as a person's desktop or a user unit runs it, never as root.
if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null; then
    as_root scripts/test-accounts.sh
else
    echo "test accounts: not root and no sudo; the e2e suite runs latchkeyd as $(id -un) and skips the other-account tests" >&2
fi

log "swift build (no warning from our sources: scripts/warnings.sh)"
build_log="$(mktemp)"
swift build --build-tests 2>&1 | tee "$build_log"
scripts/warnings.sh "$build_log"
rm -f "$build_log"

log "swift test"
swift test --skip-build

bin="$(swift build --show-bin-path)"
log "pytest: latchkeyctl against a fake daemon, latchkeyd end to end over USB/IP, latchkey-webdriver"
LATCHKEYD="$bin/latchkeyd" LATCHKEYCTL="$bin/latchkeyctl" LATCHKEY_WEBDRIVER="$bin/latchkey-webdriver" \
    python3 -m pytest -q Tests/latchkeyctl Tests/e2e Tests/docs

log "device suite: Yubico's tests/device (python-fido2 $(sed -n 's/^version=//p' scripts/device-suite.sh)) against latchkeyd over USB/IP"
LATCHKEYD="$bin/latchkeyd" scripts/device-suite.sh

if command -v systemd-analyze >/dev/null; then
    log "systemd unit: systemd-analyze verify and security"
    unit_dir="$(mktemp -d)"
    trap 'rm -rf "$unit_dir"' EXIT
    sed "s|/usr/local/bin/latchkeyd|$bin/latchkeyd|" systemd/latchkeyd.service > "$unit_dir/latchkeyd.service"
    verify="$(systemd-analyze verify "$unit_dir/latchkeyd.service" 2>&1 || true)"
    if [ -n "$verify" ]; then
        echo "$verify"
        echo "systemd-analyze verify found problems in systemd/latchkeyd.service" >&2
        exit 1
    fi
    # The exposure score must stay in systemd's "OK" band (below 4.0).
    score="$(systemd-analyze security --offline=true --threshold=40 "$unit_dir/latchkeyd.service" 2>&1 | tail -n 1)"
    echo "$score"
    case "$score" in
        *"Overall exposure level"*" OK"* | *"Overall exposure level"*" SAFE"*) ;;
        *) echo "systemd-analyze security: the unit is not in the OK band" >&2; exit 1 ;;
    esac
    # The user unit: what a user manager applies without PrivateUsers= (which would hide
    # root from the daemon; the unit's comments name each directive left out) rates 6.2;
    # it must not get worse. Rated as the system unit would be, ExecStart a stand-in.
    sed "s|^ExecStart=.*|ExecStart=/bin/true|" systemd/latchkeyd-user.service > "$unit_dir/latchkeyd-user.service"
    verify="$(systemd-analyze verify "$unit_dir/latchkeyd-user.service" 2>&1 || true)"
    [ -z "$verify" ] || { echo "$verify"; echo "systemd-analyze verify found problems in systemd/latchkeyd-user.service" >&2; exit 1; }
    if ! score="$(systemd-analyze security --offline=true --threshold=62 "$unit_dir/latchkeyd-user.service" 2>&1 | tail -n 1)" \
        || [ -z "$score" ]; then
        echo "$score"
        echo "systemd-analyze security: the user unit rates above 6.2" >&2
        exit 1
    fi
    echo "user unit: $score"
fi

if [ "${LATCHKEY_SKIP_KERNEL_TESTS:-0}" != 1 ]; then
    log "real kernel: uhid and USB/IP in the VM rig"
    scripts/kernel-tests.sh
fi

runs="${LATCHKEY_FUZZ_RUNS:-20000}"
if [ "$runs" != 0 ]; then
    log "fuzz smoke run ($runs inputs per fuzzer; scripts/fuzz.sh runs 1,000,000)"
    # The protocol fuzzers: their release + ASan build is small. The daemon's JSON
    # fuzzers need the daemon's whole dependency tree built so (NIO, Hummingbird, GRDB,
    # TOMLKit), most of a CI run's budget; `swift test` replays their seeds and kept
    # crashers (JSONFuzzReplayTests), and scripts/fuzz.sh runs them all.
    fuzzers=${LATCHKEY_FUZZERS:-FuzzCBOR FuzzCTAPHID FuzzCTAP FuzzUSBIP}
    [ "$fuzzers" = all ] && fuzzers=
    # shellcheck disable=SC2086 # a list of names
    scripts/fuzz.sh "$runs" $fuzzers
fi

if [ "${LATCHKEY_SKIP_BENCH_GATE:-0}" != 1 ]; then
    log "allocation gate: each benchmark's p90 malloc count within 10% of Benchmarks/Thresholds/"
    scripts/bench-gate.sh
fi
