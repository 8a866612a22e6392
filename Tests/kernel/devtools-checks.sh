#!/bin/bash
# Runs INSIDE the rig guest, as root (scripts/kernel-tests.sh, suite devtools): the
# DevTools gateway (latchkey-webdriver --devtools) in front of Debian's Chromium, with
# latchkeyd as a system daemon (root) whose keys belong to test accounts, udev giving each
# key's hidraw node to its owner (udev/70-latchkey.rules, latchkeyctl udev-owner).
#
#   devtools-checks.sh --bin DIR [--rounds N]
#
# 1. test_passkeys.py (Playwright, connect_over_cdp) against Chromium's own debugging
#    port: its in-browser virtual authenticator (the control);
# 2. the same file through the gateway: a latchkey key the browser reaches through HID
#    (fido2-token -L lists it while the test runs; its node is the account's, 0600);
# 3. raw_cdp.py: plain CDP over a WebSocket through the gateway;
# 4. test_parallel.py with pytest-xdist -n 4: four workers, each its own account, browser,
#    gateway and key, N rounds each (default 20): every worker sees only its own;
# 5. the same with two workers sharing one account and --isolation off: what goes wrong.
#
# Prints "ok N - name" / "not ok N - name" lines, "# ..." diagnostics, and last
# "N passed, M failed" alone on a line.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=
ROUNDS=20
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) BIN=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        *) echo "devtools-checks.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$BIN" ] || { echo "devtools-checks.sh: --bin DIR is required" >&2; exit 2; }
export PYTHONDONTWRITEBYTECODE=1
N=0 PASSED=0 FAILED=0
T_ALL=$(date +%s)
note() { printf '# %s\n' "$*"; }
indent() { sed 's/^/#   /' "$@"; }
pass() { N=$((N + 1)); PASSED=$((PASSED + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
since() { echo "$(( $(date +%s) - $1 )) s"; }
collect() {  # PASS/FAIL lines of a python helper -> checks
    local status name why
    while IFS=$'\t' read -r status name why; do
        case "$status" in
            PASS) pass "$name" ;;
            FAIL) fail "$name"; note "  $why" ;;
        esac
    done
}
# pytest_checks LABEL LOG ARGS...: pytest -v; each PASSED/FAILED test is a check
pytest_checks() {
    local label=$1 log=$2 t
    shift 2
    t=$(date +%s)
    (cd "$HERE/devtools" && timeout -s KILL 1500 python3 -m pytest -v -s -p no:cacheprovider "$@") > "$log" 2>&1
    local rc=$? tests
    tests=$(grep -E '(PASSED|FAILED|ERROR)' "$log" | grep -E '::' | sed -E 's/^\[gw[0-9]+\] //')
    if [ -z "$tests" ]; then
        fail "$label: pytest ran no test (exit $rc, $(since "$t"))"
        tail -n 40 "$log" | indent
        return
    fi
    while read -r line; do
        case "$line" in
            *PASSED*) pass "$label: ${line%% PASSED*}" ;;
            *) fail "$label: $line" ;;
        esac
    done <<< "$tests"
    note "$label: pytest exit $rc in $(since "$t"); its output:"
    grep -vE '^(platform|cachedir|rootdir|plugins|collecting|created:|[0-9]+ workers|scheduling)' "$log" | cut -c 1-300 \
        | tail -n 60 | indent
}

WORK=$(mktemp -d /tmp/lk-devtools.XXXXXX)
chmod 0755 "$WORK"
D_PID= B_PID=
cleanup() {
    [ -n "$B_PID" ] && kill -TERM "$B_PID" 2>/dev/null
    [ -n "$D_PID" ] && kill -TERM "$D_PID" 2>/dev/null
}
trap cleanup EXIT

note "kernel $(uname -r); $(nproc) vCPUs; $(free -m | awk '/Mem:/ { print $2 }') MiB; $(chromium --version 2>/dev/null)"
note "udevd $(pgrep -x systemd-udevd > /dev/null && echo running || echo 'not running');" \
    "playwright $(python3 -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>&1)"

# ---- the binaries where every account can run them ----------------------------------
LK=/opt/latchkey
mkdir -p "$LK/bin" "$LK/lib"
cp "$BIN/latchkeyd" "$BIN/latchkeyctl" "$BIN/latchkey-webdriver" "$LK/bin/" \
    || { fail "latchkeyd, latchkeyctl and latchkey-webdriver are in $BIN"; echo "$PASSED passed, $FAILED failed"; exit 1; }
for lib in $(ldd "$LK"/bin/* | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
    case "$lib" in /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) ;; *) cp "$lib" "$LK/lib/" ;; esac
done
chmod -R a+rX "$LK"
export LK_BIN=$LK/bin LK_LIB=$LK/lib LK_WORK=$WORK

# ---- udev: a key's hidraw node is its owner's (the package's rule, its helper here) ----
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$LK/lib" "$LK/bin/latchkeyctl" > /usr/bin/latchkeyctl
chmod 0755 /usr/bin/latchkeyctl
# /dev/uhid's own line names the package's service account, which this guest has not
grep -v 'KERNEL=="uhid"' "$HERE/../../udev/70-latchkey.rules" > /etc/udev/rules.d/70-latchkey.rules
udevadm control --reload && pass "udev: the package's rule for latchkey keys is loaded" \
    || fail "udev: the package's rule for latchkey keys is loaded (is udevd running? RIG_UDEV=1)"

# ---- accounts: four workers and one shared, in the control socket's group ------------
groupadd -f lk-ci
for account in lk-w0 lk-w1 lk-w2 lk-w3 lk-shared; do
    id "$account" > /dev/null 2>&1 || useradd -M -N -g lk-ci -s /usr/sbin/nologin "$account"
done
pass "accounts lk-w0..lk-w3 and lk-shared, group lk-ci"

# ---- latchkeyd as the system daemon (root), its socket the group's -------------------
mkdir -p /run/lkd /var/tmp/lkd
chgrp lk-ci /run/lkd && chmod 0750 /run/lkd && chmod 0700 /var/tmp/lkd
export LK_SOCKET=/run/lkd/control.sock
LD_LIBRARY_PATH=$LK/lib timeout -s KILL 3000 "$LK/bin/latchkeyd" --state-dir /var/tmp/lkd/state \
    --control-socket "$LK_SOCKET" --no-usbip --presence auto --log-level debug > "$WORK/latchkeyd.log" 2>&1 &
D_PID=$!
for ((i = 0; i < 300; i++)); do [ -S "$LK_SOCKET" ] && break; sleep 0.2; done
if [ -S "$LK_SOCKET" ] && chgrp lk-ci "$LK_SOCKET"; then
    pass "latchkeyd up as root, its control socket group lk-ci"
else
    fail "latchkeyd up as root"
    tail -n 30 "$WORK/latchkeyd.log" | indent
fi

# start_browser ACCOUNT DISPLAY [ARGS]: harness.py browser in the background; sets B_PID,
# CHROMIUM_PORT, GATEWAY_PORT
start_browser() {
    local account=$1 display=$2 line t
    shift 2
    t=$(date +%s)
    mkfifo "$WORK/browser.in" 2>/dev/null
    (cd "$HERE/devtools" && exec python3 harness.py browser --account "$account" --display "$display" "$@" \
        < "$WORK/browser.in" > "$WORK/browser.out" 2> "$WORK/browser.err") &
    B_PID=$!
    exec 7> "$WORK/browser.in"
    for ((i = 0; i < 1800; i++)); do
        line=$(head -n 1 "$WORK/browser.out" 2>/dev/null)
        [ -n "$line" ] && break
        sleep 0.5
    done
    read -r word CHROMIUM_PORT GATEWAY_PORT <<< "$line"
    if [ "$word" = READY ]; then
        pass "$account's Chromium (port $CHROMIUM_PORT) and its DevTools gateway (port $GATEWAY_PORT) up in $(since "$t")"
    else
        fail "$account's Chromium and gateway up: ${line:-nothing within 900 s}"
        indent "$WORK/browser.err" | tail -n 30
        return 1
    fi
}
stop_browser() {
    exec 7>&-
    wait "$B_PID"
    B_PID=
    if grep -q 'STOPPED gateway exit 0' "$WORK/browser.out"; then
        pass "the DevTools gateway exits 0 on SIGTERM"
    else
        fail "the DevTools gateway exits 0 on SIGTERM: $(tail -n 1 "$WORK/browser.out")"
    fi
    rm -f "$WORK/browser.in" "$WORK/browser.out"
}

# ---- 1-3: one browser (lk-w0), its own port, then the gateway ------------------------
if start_browser lk-w0 11; then
    LK_CDP_URL=http://127.0.0.1:$CHROMIUM_PORT pytest_checks \
        "control: Playwright against Chromium's own port (its in-browser authenticator)" "$WORK/control.log" \
        test_passkeys.py
    LK_CDP_URL=http://127.0.0.1:$GATEWAY_PORT LK_EXPECT_HID=1 pytest_checks \
        "Playwright through the DevTools gateway (a latchkey key on HID)" "$WORK/gateway.log" test_passkeys.py
    grep -E 'on HID while|UV-required' "$WORK/control.log" "$WORK/gateway.log" | sed "s#$WORK/##" | indent
    collect < <(cd "$HERE/devtools" && timeout -s KILL 900 python3 raw_cdp.py --url "http://127.0.0.1:$GATEWAY_PORT" \
        2> "$WORK/raw.err")
    stop_browser
fi

# ---- 4: four parallel workers, each its own account ---------------------------------
LK_ROUNDS=$ROUNDS pytest_checks "parallel (-n 4, $ROUNDS rounds each, one account per worker)" \
    "$WORK/parallel.log" -n 4 test_parallel.py
grep -E '^worker ' "$WORK/parallel.log" | indent

# ---- 5: without isolation: two workers, one account ---------------------------------
LK_ROUNDS=3 LK_SHARED_ACCOUNT=lk-shared pytest_checks "without isolation (-n 2, one account, --isolation off)" \
    "$WORK/shared.log" -n 2 test_parallel.py
grep -E '^worker ' "$WORK/shared.log" | indent
foreign=$(cat "$WORK"/shared-w*.json 2>/dev/null | python3 -c 'import json, sys
docs = [json.loads(line) for line in sys.stdin if line.strip()]
print(sum(d["foreign_events"] for d in docs), sum(len(d["rps"]) > 1 or d["credentials"] != d["own"] for d in docs))')
read -r events keys <<< "${foreign:-0 0}"
if [ "${events:-0}" -gt 0 ]; then
    pass "without isolation, requests reached the other worker's key: $events events of another RP; $keys key(s) holding credentials of another RP or not the worker's own"
else
    fail "without isolation, the two browsers reached each other's keys (no event of another RP was seen)"
fi

kill -TERM "$D_PID" 2>/dev/null
wait "$D_PID" && pass "latchkeyd exits 0 on SIGTERM" || fail "latchkeyd exits 0 on SIGTERM"
D_PID=
if [ "$FAILED" != 0 ]; then
    note "latchkeyd's log (tail):"
    tail -n 40 "$WORK/latchkeyd.log" | cut -c 1-300 | indent
fi
note "guest time $(since "$T_ALL")"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
