#!/bin/bash
# Runs INSIDE the rig guest, as root (scripts/kernel-tests.sh starts it through
# Tests/rig/run.sh): the real latchkeyd against a real Linux kernel's uhid,
# hidraw and vhci-hcd, with real FIDO clients.
#
#   guest-checks.sh --bin DIR [--suite base|browsers] [--only GROUPS] [--artifacts DIR]
#
#   --bin DIR         where latchkeyd and latchkeyctl are (built on the host)
#   --artifacts DIR   copy the daemons' debug logs (and the browsers') there at the end
#                     (a directory in the share, so that the host keeps them)
#   --suite base      (default) uhid, then USB/IP: fido2-token -L/-I,
#                     fido2-cred -M/-V (ES256, resident, EdDSA), fido2-assert -G/-V,
#                     python-fido2 (Fido2Client + Fido2Server, Ctap1/U2F), then
#                     CTAP 2.1 with a PIN (ctap21_checks.py: fido2-token -I/-S/-C/
#                     -L -r/-L -k/-D, ssh-keygen -t ed25519-sk -O resident and -K),
#                     CI overrides on uhid (deny, drop-connection), and, last, two
#                     CTAPHID channels interleaving on one key (two_channels.py, when
#                     present)
#   --only GROUPS     base suite: run only these groups of checks ("tools python
#                     channels faults ctap21"; default all), for iterating. The
#                     daemons' start and stop checks always run.
#   --suite browsers  (browsers image, udevd) the browser matrix: Chromium (chromedriver,
#                     a window on Xvfb) and Firefox ESR (Marionette, headless), each
#                     x {uhid, USB/IP} x {built-in UV by policy, a PIN the test types
#                     into the browser's prompt} x the four flows of
#                     Tests/kernel/browsers/matrix.py = 32 cells, each verified by
#                     python-fido2's Fido2Server; and "selenium": a Selenium test
#                     through latchkey-webdriver, whose virtual authenticator is a
#                     latchkey key Chromium finds on hidraw (browsers/webdriver_intermediary.py)
#   --browsers LIST   browsers suite: only these ("chromium firefox selenium webdriver-firefox", the default)
#
# Prints one line per check, "ok N - name" or "not ok N - name", diagnostics as
# "# ..." lines, and last "N passed, M failed" alone on a line. Exit status 1
# when a check failed. Every process started here has a time limit; the daemons
# are stopped with SIGTERM and must exit by themselves.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=
SUITE=base
ARTIFACTS=
ONLY=
BROWSERS="chromium firefox selenium webdriver-firefox"
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) BIN=$2; shift ;;
        --suite) SUITE=$2; shift ;;
        --only) ONLY=$2; shift ;;
        --browsers) BROWSERS=$2; shift ;;
        --artifacts) ARTIFACTS=$2; shift ;;
        *) echo "guest-checks.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$BIN" ] || { echo "guest-checks.sh: --bin DIR is required" >&2; exit 2; }
export PYTHONDONTWRITEBYTECODE=1  # the helpers live in the share: leave no __pycache__ there
WORK=$(mktemp -d /tmp/lk-kernel.XXXXXX)
LATCHKEYD=$WORK/bin/latchkeyd
LATCHKEYCTL=$WORK/bin/latchkeyctl
N=0 PASSED=0 FAILED=0
T_ALL=$(date +%s.%N)
D_PID=

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1fs", a - b }'; }
note() { printf '# %s\n' "$*"; }
indent() { sed 's/^/#   /' "$@"; }
section() { printf '#\n# === %s\n' "$*"; }
pass() { N=$((N + 1)); PASSED=$((PASSED + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
# check NAME CMD...: one check from a command's exit status; its output is shown on failure
check() {
    local name=$1 t out
    shift
    t=$(now)
    out=$WORK/check.$((N + 1)).log
    if "$@" > "$out" 2>&1; then
        pass "$name ($(since "$t"))"
    else
        fail "$name (exit $?, $(since "$t"))"
        indent "$out" | tail -n 40
        return 1
    fi
}
# result lines of a python helper ("PASS<TAB>name" / "FAIL<TAB>name<TAB>why") -> checks
collect() {
    local status name why
    while IFS=$'\t' read -r status name why; do
        case "$status" in
            PASS) pass "$name" ;;
            FAIL) fail "$name"; note "  $why" ;;
            '#'*) printf '%s\n' "$status${name:+	$name}${why:+	$why}" ;;
            *) ;;
        esac
    done
}

# want GROUP: whether --only lets the group run
want() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# on an early exit: the `timeout` wrappers pass SIGTERM on to the daemon and the driver
cleanup() {
    [ -n "$D_PID" ] && kill -TERM "$D_PID" 2>/dev/null
    [ -n "${CO_PID:-}" ] && kill -TERM "$CO_PID" 2>/dev/null
    usbip detach -p 0 > /dev/null 2>&1
}
trap cleanup EXIT

# stage_binaries: copies latchkeyd, latchkeyctl (latchkey-webdriver when built) and the Swift runtime libraries they
# load from outside the system directories into tmpfs. Executing them from the 9p
# share costs 2-10 s per start under TCG (every page fault is a 9p read);
# from tmpfs, well under a second. LD_LIBRARY_PATH (which precedes RUNPATH) points
# our two binaries, and only them, at the copies.
stage_binaries() {
    local lib
    mkdir -p "$WORK/bin" "$WORK/lib"
    cp "$BIN/latchkeyd" "$BIN/latchkeyctl" "$WORK/bin/" || return 1
    # the WebDriver intermediary, for the browsers suite (a release package has none)
    [ -x "$BIN/latchkey-webdriver" ] && { cp "$BIN/latchkey-webdriver" "$WORK/bin/" || return 1; }
    ldd "$WORK"/bin/* > "$WORK/ldd.txt" 2>&1 || { indent "$WORK/ldd.txt"; return 1; }
    if grep -q 'not found' "$WORK/ldd.txt"; then
        note "libraries the guest lacks (run.sh RIG_EXTRA_SHARES for the Swift runtime, EXTRA_PACKAGES for Debian's):"
        grep 'not found' "$WORK/ldd.txt" | sort -u | indent
        return 1
    fi
    for lib in $(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' "$WORK/ldd.txt" | sort -u); do
        case "$lib" in
            /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) ;;
            *) cp "$lib" "$WORK/lib/" || return 1 ;;
        esac
    done
}

# ---- helpers: the daemon and its control API --------------------------------------

# start_daemon NAME ARGS...: latchkeyd with its own state dir and socket under $WORK/NAME;
# sets D_PID (the pid of its `timeout` wrapper, which passes signals on), D_SOCK, D_LOG
start_daemon() {
    local name=$1
    shift
    mkdir -p "$WORK/$name"
    D_SOCK=$WORK/$name/control.sock
    D_LOG=$WORK/$name/latchkeyd.log
    # the daemon's own limit is a backstop; it is stopped with SIGTERM long before
    LD_LIBRARY_PATH=$WORK/lib timeout -s KILL 900 "$LATCHKEYD" --state-dir "$WORK/$name/state" --control-socket "$D_SOCK" \
        --presence auto --log-level debug "$@" > "$D_LOG" 2>&1 &
    D_PID=$!
}

ctl() { LD_LIBRARY_PATH=$WORK/lib timeout 20 "$LATCHKEYCTL" --socket "$D_SOCK" "$@"; }

# json FILE EXPR: a value from a JSON document (python3 without fido2 starts fast)
json() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2], {}, {"d": d})
print("" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))' "$1" "$2"
}

# wait_status SECONDS EXPR: polls `latchkeyctl status --json` until EXPR (python, over d)
# is true; leaves the document in $WORK/status.json
wait_status() {
    local deadline=$(( $(date +%s) + $1 ))
    while :; do
        if ctl --json status > "$WORK/status.json" 2> "$WORK/status.err" \
            && [ "$(json "$WORK/status.json" "bool($2)")" = True ]; then
            return 0
        fi
        kill -0 "$D_PID" 2>/dev/null || { note "latchkeyd exited"; return 1; }
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# stop_daemon [HIDRAW]: SIGTERM, the daemon exits with status 0 within 20 s, and the
# hidraw node (if given) disappears
stop_daemon() {
    local node=${1:-} t rc i
    t=$(now)
    kill -TERM "$D_PID" 2>/dev/null
    for ((i = 0; i < 200; i++)); do kill -0 "$D_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$D_PID" 2>/dev/null; then
        fail "$LABEL: latchkeyd exits on SIGTERM (still running after 20 s; killed)"
        pkill -KILL -P "$D_PID"; kill -KILL "$D_PID"; wait "$D_PID" 2>/dev/null
        tail -n 30 "$D_LOG" | indent
    else
        wait "$D_PID"; rc=$?
        if [ "$rc" = 0 ]; then
            pass "$LABEL: latchkeyd exits 0 on SIGTERM ($(since "$t"))"
        else
            fail "$LABEL: latchkeyd exits 0 on SIGTERM (exit status $rc)"
            tail -n 30 "$D_LOG" | indent
        fi
    fi
    D_PID=
    if [ -n "$node" ]; then
        for ((i = 0; i < 100; i++)); do [ -e "$node" ] || break; sleep 0.1; done
        [ ! -e "$node" ] && pass "$LABEL: $node is gone after the daemon stopped" \
            || fail "$LABEL: $node is gone after the daemon stopped (still there after 10 s)"
    fi
}

# the daemon's log lines at warning level and above (its debug lines say "error" often)
log_problems() {
    grep -E '^[^ ]+ (warning|error|critical) ' "$D_LOG" | head -n 20 | indent
}

# the number of credentials in `latchkeyctl --json credentials list`
CREDS='len(d if isinstance(d, list) else d.get("credentials", []))'

# ---- helpers: libfido2 command-line tools -------------------------------------------

b64rand() { head -c "$1" /dev/urandom | base64 -w0; }

# fido2_tool_checks DEV AAGUID: fido2-token, fido2-cred and fido2-assert (libfido2 1.12)
fido2_tool_checks() {
    local dev=$1 aaguid=$2 d=$WORK/$LABEL-fido2 t user_id cdh
    mkdir -p "$d"
    t=$(now)
    timeout 30 fido2-token -L > "$d/L" 2>&1
    indent "$d/L"
    grep -q "^$dev: vendor=0x1209, product=0x0001" "$d/L" \
        && pass "$LABEL: fido2-token -L lists $dev (vendor=0x1209, product=0x0001) ($(since "$t"))" \
        || fail "$LABEL: fido2-token -L lists $dev (vendor=0x1209, product=0x0001)"

    t=$(now)
    timeout 30 fido2-token -I "$dev" > "$d/I" 2>&1
    indent "$d/I"
    local versions want=${aaguid//-/}
    versions=$(sed -n 's/^version strings: //p' "$d/I")
    if grep -qw FIDO_2_0 <<< "$versions" && grep -qw U2F_V2 <<< "$versions" \
        && grep -qi "^aaguid: $want\$" "$d/I"; then
        pass "$LABEL: fido2-token -I: versions include FIDO_2_0 and U2F_V2, aaguid $want as the control API says ($(since "$t"))"
    else
        fail "$LABEL: fido2-token -I: versions include FIDO_2_0 and U2F_V2, aaguid $want as the control API says (versions: $versions)"
    fi

    # make + verify + assert, for: ES256, ES256 resident (-r), and every other
    # algorithm libfido2 1.12's tools take: EdDSA, ES384, RS256
    local kind type rflag name
    for kind in es256 es256-resident eddsa es384 rs256; do
        case "$kind" in
            es256) type=es256 rflag= name="ES256" ;;
            es256-resident) type=es256 rflag=-r name="ES256, resident" ;;
            eddsa) type=eddsa rflag= name="EdDSA" ;;
            es384) type=es384 rflag= name="ES384" ;;
            rs256) type=rs256 rflag= name="RS256" ;;
        esac
        cdh=$(b64rand 32)
        user_id=$(b64rand 16)
        printf '%s\n%s\n%s\n%s\n' "$cdh" "kernel.latchkey.test" "user-$kind" "$user_id" > "$d/$kind.param"
        if ! check "$LABEL: fido2-cred -M${rflag:+ $rflag} $dev $type: makes a credential ($name)" \
            timeout 60 fido2-cred -M -q $rflag -i "$d/$kind.param" -o "$d/$kind.cred" "$dev" "$type"; then
            fail "$LABEL: fido2-cred -V ($name): prerequisite failed"
            fail "$LABEL: fido2-assert -G/-V ($name): prerequisite failed"
            continue
        fi
        note "credential: format $(sed -n 3p "$d/$kind.cred"), $(wc -l < "$d/$kind.cred") lines" \
             "(with an attestation certificate: $([ "$(wc -l < "$d/$kind.cred")" -ge 7 ] && echo yes || echo no))"
        # -V checks the attestation signature over authData || clientDataHash (packed
        # with x5c or self), and that the flags say user present
        if ! check "$LABEL: fido2-cred -V ($name): attestation verifies" \
            timeout 30 fido2-cred -V -i "$d/$kind.cred" -o "$d/$kind.pub" "$type"; then
            fail "$LABEL: fido2-assert -G/-V ($name): prerequisite failed"
            continue
        fi
        # the public key for fido2-assert -V: everything after the credential id line
        tail -n +2 "$d/$kind.pub" > "$d/$kind.pem"
        {
            b64rand 32; echo
            echo "kernel.latchkey.test"
            [ -z "$rflag" ] && head -n 1 "$d/$kind.pub"
        } > "$d/$kind.aparam"
        t=$(now)
        if timeout 60 fido2-assert -G -p $rflag -i "$d/$kind.aparam" -o "$d/$kind.assert" "$dev" \
                > "$d/$kind.G.log" 2>&1 \
            && timeout 30 fido2-assert -V -p -i "$d/$kind.assert" "$d/$kind.pem" "$type" > "$d/$kind.V.log" 2>&1; then
            if [ -n "$rflag" ] && [ "$(sed -n 5p "$d/$kind.assert")" != "$user_id" ]; then
                fail "$LABEL: fido2-assert -G -r/-V ($name): the assertion names user $(sed -n 5p "$d/$kind.assert"), not $user_id"
            else
                pass "$LABEL: fido2-assert -G${rflag:+ $rflag} + fido2-assert -V ($name): signature verifies with the credential's key${rflag:+, user id returned} ($(since "$t"))"
            fi
        else
            fail "$LABEL: fido2-assert -G${rflag:+ $rflag} + fido2-assert -V ($name)"
            cat "$d/$kind.G.log" "$d/$kind.V.log" 2>/dev/null | indent
        fi
    done
}

# python_checks DEV AAGUID: python-fido2 through hidraw (one python process)
python_checks() {
    local t
    t=$(now)
    (cd "$HERE" && timeout 240 python3 fido2_checks.py --device "$1" --aaguid "$2" --label "$LABEL") \
        > "$WORK/$LABEL-py.out" 2> "$WORK/$LABEL-py.err"
    local rc=$?
    collect < "$WORK/$LABEL-py.out"
    [ "$rc" = 0 ] || cat "$WORK/$LABEL-py.err"
    grep -q . "$WORK/$LABEL-py.out" || fail "$LABEL: fido2_checks.py ran (exit $rc)"
    note "python-fido2 checks took $(since "$t")"
}

# ctap21_checks DEV: CTAP 2.1 with a PIN through libfido2's tools, ssh-keygen and
# python-fido2 (one python process); leaves the key with a PIN
ctap21_checks() {
    local t rc
    t=$(now)
    if ! command -v ssh-keygen > /dev/null; then
        fail "$LABEL: ssh-keygen is in the guest (openssh-client, kernel-tests.sh's GUEST_PACKAGES)"
    fi
    (cd "$HERE" && timeout 600 python3 ctap21_checks.py --device "$1" --label "$LABEL") \
        > "$WORK/$LABEL-ctap21.out" 2> "$WORK/$LABEL-ctap21.err"
    rc=$?
    collect < "$WORK/$LABEL-ctap21.out"
    if [ "$rc" != 0 ]; then
        indent "$WORK/$LABEL-ctap21.err" | tail -n 150
    fi
    # a crash part-way would leave later checks unreported: that is a failure too
    grep -q '^DONE' "$WORK/$LABEL-ctap21.out" || fail "$LABEL: ctap21_checks.py ran to its end (exit $rc)"
    note "CTAP 2.1 checks took $(since "$t")"
}

# channel_checks DEV: two CTAPHID channels on one key through the kernel's hidraw,
# interleaving getAssertion/getNextAssertion and credentialManagement enumerations: no
# channel is ever answered with the other's data (two_channels.py, from the conformance
# work: exit status 0, or PASS/FAIL lines like the other helpers). It needs a PIN and
# sets one on a key without: it runs after ctap21_checks, with the PIN those leave.
# Noted, not failed, while the file is absent.
channel_checks() {
    local t rc out=$WORK/$LABEL-channels pin=()
    if [ ! -f "$HERE/two_channels.py" ]; then
        note "$LABEL: no Tests/kernel/two_channels.py: the two-channel checks did not run"
        return
    fi
    t=$(now)
    if want ctap21; then
        pin=(--pin "$(cd "$HERE" && python3 -c 'from ctap21_checks import NEW_PIN; print(NEW_PIN)')")
    fi
    # 25 rounds: under TCG the script's default 100 took 5 minutes on each transport
    (cd "$HERE" && timeout 900 python3 two_channels.py "$1" --rounds 25 "${pin[@]}") > "$out.out" 2> "$out.err"
    rc=$?
    collect < "$out.out"
    if [ "$rc" != 0 ]; then
        fail "$LABEL: two_channels.py $1: no channel got another channel's data (exit $rc, $(since "$t"))"
        indent "$out.out" | tail -n 60
        indent "$out.err" | tail -n 60
    elif ! grep -qE '^(PASS|FAIL)'$'\t' "$out.out"; then
        pass "$LABEL: two_channels.py $1: no channel got another channel's data" \
            "($(sed -n 's/^two_channels: \([0-9].*checked\)$/\1/p' "$out.out"); $(since "$t"))"
    fi
}

# fault_checks DEV NODE_VAR: CI overrides against the real kernel's uhid (latchkeyctl
# overrides add): a denied makeCredential fails fido2-cred and the next one works; a
# drop-connection on makeCredential destroys the uhid device and creates it again
# (a yank), fido2-cred fails, and once the hidraw node is back the next makeCredential
# works. NODE_VAR names the variable holding the node, updated when it comes back
# under another name. (USB/IP's drop-connection is covered by Tests/e2e.)
fault_checks() {
    local dev=$1 var=$2 d=$WORK/$LABEL-faults t
    mkdir -p "$d"
    printf '%s\n%s\n%s\n%s\n' "$(b64rand 32)" "faults.latchkey.test" "fault-user" "$(b64rand 16)" > "$d/param"
    if ctl overrides add deny --key default --operation makeCredential > "$d/add.log" 2>&1 \
        && ! timeout 60 fido2-cred -M -q -i "$d/param" -o "$d/denied.cred" "$dev" es256 > "$d/denied.log" 2>&1 \
        && timeout 60 fido2-cred -M -q -i "$d/param" -o "$d/after.cred" "$dev" es256 > "$d/after.log" 2>&1; then
        pass "$LABEL: override deny: fido2-cred -M fails once, then works ($(sed -n 's/.*: //p' "$d/denied.log" | head -n 1))"
    else
        fail "$LABEL: override deny: fido2-cred -M fails once, then works"
        cat "$d/add.log" "$d/denied.log" "$d/after.log" 2>/dev/null | indent
    fi

    t=$(now)
    # the HID device instance (0003:1209:0001.NNNN): a yanked device comes back as a new one
    local before after=
    before=$(readlink -f "/sys/class/hidraw/${dev##*/}/device")
    ctl overrides add drop-connection --key default --operation makeCredential > "$d/add2.log" 2>&1
    local dropped=no back= node
    timeout 60 fido2-cred -M -q -i "$d/param" -o "$d/dropped.cred" "$dev" es256 > "$d/dropped.log" 2>&1 || dropped=yes
    local deadline=$(( $(date +%s) + 30 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        ctl --json status > "$d/status.json" 2>/dev/null \
            && node=$(json "$d/status.json" 'd["keys"][0]["uhid"].get("hidraw") or ""') || node=
        if [ -n "$node" ] && [ -c "$node" ] && timeout 60 fido2-cred -M -q -i "$d/param" -o "$d/back.cred" "$node" es256 \
            > "$d/back.log" 2>&1; then
            back=$node
            after=$(readlink -f "/sys/class/hidraw/${node##*/}/device")
            break
        fi
        sleep 0.5
    done
    if [ "$dropped" = yes ] && [ -n "$back" ] && [ "$after" != "$before" ]; then
        pass "$LABEL: override drop-connection: fido2-cred -M loses the device, a new one (${after##*/}, was ${before##*/}) comes back as $back and works ($(since "$t"))"
        printf -v "$var" '%s' "$back"
    else
        fail "$LABEL: override drop-connection: fido2-cred -M loses the device (lost: $dropped), a new one comes back and works (node: ${back:-none}, device ${before##*/} -> ${after##*/})"
        cat "$d/add2.log" "$d/dropped.log" "$d/back.log" 2>/dev/null | indent
        tail -n 30 "$D_LOG" | indent
    fi
}

# ---- uhid --------------------------------------------------------------------------

# uhid_start [NAME [ARGS...]]: a latchkeyd whose key is a uhid device, with its state
# in $WORK/NAME (default uhid) and ARGS as more flags; sets UHID_NODE, UHID_AAGUID
uhid_start() {
    local t name=${1:-uhid}
    shift
    LABEL=$name
    section "$name: latchkeyd --presence auto${*:+ $*} (uhid), $(uname -r)"
    t=$(now)
    start_daemon "$name" "$@"
    UHID_NODE= UHID_AAGUID=
    if wait_status 60 'd["keys"] and d["keys"][0]["uhid"].get("hidraw")'; then
        UHID_NODE=$(json "$WORK/status.json" 'd["keys"][0]["uhid"]["hidraw"]')
        UHID_AAGUID=$(json "$WORK/status.json" 'd["keys"][0]["aaguid"]')
        local state
        state=$(json "$WORK/status.json" 'd["keys"][0]["uhid"]["state"]')
        if [ -c "$UHID_NODE" ]; then
            pass "$LABEL: latchkeyd up, control API reports hidraw $UHID_NODE (uhid state $state) ($(since "$t"))"
        else
            fail "$LABEL: latchkeyd reports hidraw $UHID_NODE, which is not a character device"
            UHID_NODE=
        fi
        note "status: $(json "$WORK/status.json" 'd["keys"][0]')"
        local sysdev=/sys/class/hidraw/${UHID_NODE##*/}/device
        [ -n "$UHID_NODE" ] && grep -E '^(DRIVER|HID_ID|HID_NAME|HID_UNIQ)=' "$sysdev/uevent" 2>/dev/null | indent
    else
        fail "$LABEL: latchkeyd up, control API reports a hidraw node (none within 60 s)"
        cat "$WORK/status.json" "$WORK/status.err" 2>/dev/null | indent
        tail -n 40 "$D_LOG" | indent
    fi
}

suite_base() {
    uhid_start
    if [ -n "$UHID_NODE" ]; then
        want tools && fido2_tool_checks "$UHID_NODE" "$UHID_AAGUID"
        want python && python_checks "$UHID_NODE" "$UHID_AAGUID"
        if want tools && want python; then
            if ctl --json credentials list --key default > "$WORK/creds.json" 2>&1 \
                && [ "$(json "$WORK/creds.json" "$CREDS")" -ge 2 ]; then
                pass "uhid: the control API lists the discoverable credentials ($(json "$WORK/creds.json" "$CREDS"))"
            else
                fail "uhid: the control API lists the discoverable credentials"
                indent "$WORK/creds.json"
            fi
        fi
        want faults && fault_checks "$UHID_NODE" UHID_NODE
        # last: they set a PIN, which the checks above do without
        want ctap21 && ctap21_checks "$UHID_NODE"
        want channels && channel_checks "$UHID_NODE"
    fi
    stop_daemon "$UHID_NODE"
    log_problems

    usbip_start
    if [ -n "$USBIP_NODE" ]; then
        want tools && fido2_tool_checks "$USBIP_NODE" "$USBIP_AAGUID"
        want python && python_checks "$USBIP_NODE" "$USBIP_AAGUID"
        want ctap21 && ctap21_checks "$USBIP_NODE"
        want channels && channel_checks "$USBIP_NODE"
    fi
    usbip_stop
}

# ---- USB/IP ------------------------------------------------------------------------

# usbip_start [NAME [ARGS...]]: a second latchkeyd serving USB/IP on 127.0.0.1:3240,
# attached through vhci-hcd, with its state in $WORK/NAME (default usbip) and ARGS as
# more flags; sets USBIP_NODE, USBIP_AAGUID
usbip_start() {
    local t i n before name=${1:-usbip}
    shift
    LABEL=$name
    section "$name: latchkeyd --no-uhid --usbip 127.0.0.1:3240${*:+ $*}, usbip attach -> vhci-hcd -> usbhid -> hidraw"
    USBIP_NODE= USBIP_AAGUID=
    t=$(now)
    start_daemon "$name" --no-uhid --usbip 127.0.0.1:3240 "$@"
    if wait_status 60 'd["keys"] and (d["keys"][0].get("usbip") or {}).get("busid")'; then
        USBIP_AAGUID=$(json "$WORK/status.json" 'd["keys"][0]["aaguid"]')
        USBIP_BUSID=$(json "$WORK/status.json" 'd["keys"][0]["usbip"]["busid"]')
        pass "$LABEL: latchkeyd up, control API reports bus id $USBIP_BUSID ($(since "$t"))"
    else
        fail "$LABEL: latchkeyd up, control API reports a USB/IP bus id"
        tail -n 40 "$D_LOG" | indent
        return
    fi
    t=$(now)
    timeout 30 usbip list -r 127.0.0.1 > "$WORK/usbip-list" 2>&1
    indent "$WORK/usbip-list"
    grep -Eq "^ *1-1: .*\(1209:0001\)" "$WORK/usbip-list" \
        && pass "$LABEL: usbip list -r 127.0.0.1 shows 1-1 (1209:0001) ($(since "$t"))" \
        || fail "$LABEL: usbip list -r 127.0.0.1 shows 1-1 (1209:0001)"
    before=$(ls /dev/hidraw* 2>/dev/null)
    check "$LABEL: usbip attach -r 127.0.0.1 -b 1-1" timeout 30 usbip attach -r 127.0.0.1 -b 1-1 || return
    t=$(now)
    # the new hidraw node whose HID parent is our device (HID_ID 0003:00001209:00000001)
    for ((i = 0; i < 300; i++)); do
        for n in /dev/hidraw*; do
            [ -e "$n" ] || continue
            grep -qx "$n" <<< "$before" && continue
            grep -q '^HID_ID=0003:00001209:00000001$' "/sys/class/hidraw/${n##*/}/device/uevent" 2>/dev/null \
                && USBIP_NODE=$n && break
        done
        [ -n "$USBIP_NODE" ] && break
        sleep 0.1
    done
    if [ -n "$USBIP_NODE" ]; then
        pass "$LABEL: hidraw node $USBIP_NODE appeared for the attached key ($(since "$t"))"
        grep -E '^(DRIVER|HID_ID|HID_NAME|HID_UNIQ)=' "/sys/class/hidraw/${USBIP_NODE##*/}/device/uevent" | indent
        timeout 10 usbip port 2>&1 | indent
    else
        fail "$LABEL: a hidraw node appeared for the attached key (none within 30 s)"
        timeout 10 usbip port 2>&1 | indent
        dmesg | tail -n 20 | indent
        return
    fi
    wait_status 10 'd["keys"][0]["usbip"]["attached"]' \
        && pass "$LABEL: the control API reports the key attached" \
        || fail "$LABEL: the control API reports the key attached"
}

usbip_stop() {
    local t port i
    if [ -n "$USBIP_NODE" ]; then
        t=$(now)
        port=$(timeout 10 usbip port 2>/dev/null | sed -n 's/^Port \([0-9]*\):.*/\1/p' | head -n 1)
        timeout 30 usbip detach -p "${port:-0}" > "$WORK/detach.log" 2>&1
        for ((i = 0; i < 100; i++)); do [ -e "$USBIP_NODE" ] || break; sleep 0.1; done
        if [ ! -e "$USBIP_NODE" ]; then
            pass "$LABEL: usbip detach -p ${port:-0} removes $USBIP_NODE ($(since "$t"))"
        else
            fail "$LABEL: usbip detach -p ${port:-0} removes $USBIP_NODE"
            indent "$WORK/detach.log"
        fi
        wait_status 10 'not d["keys"][0]["usbip"]["attached"]' \
            && pass "$LABEL: the control API reports the key detached" \
            || fail "$LABEL: the control API reports the key detached"
    fi
    [ -n "${D_PID:-}" ] && stop_daemon
    log_problems
}

# ---- browsers ----------------------------------------------------------------------

# The browser matrix (browsers image, udevd running): each browser in --browsers
# (default "chromium firefox") is one session of Tests/kernel/browsers/matrix.py, a
# coprocess, against four keys in turn, one present at a time: {uhid, USB/IP} x {a key
# whose policy grants built-in UV (user-verification = "auto", presence auto), a key
# with a PIN whose prompt the test answers in the browser}. Each key is a new daemon
# with its own state directory; the four cells of each are PASS/FAIL lines.
MATRIX_CELLS=()

# matrix_run TRANSPORT MODE AAGUID [PIN]: the four cells in the running browser
matrix_run() {
    local line got=0 status name
    [ -n "${LK[1]:-}" ] && echo "run $*" >&"${LK[1]}"
    while [ -n "${LK[0]:-}" ] && IFS= read -r -t 600 line <&"${LK[0]}"; do
        [ "$line" = "DONE $1 $2" ] && break
        case "$line" in
            PASS*|FAIL*)
                got=$((got + 1))
                IFS=$'\t' read -r status name _ <<< "$line"
                MATRIX_CELLS+=("$status ${name%% (*}")
                collect <<< "$line" ;;
            '#'*) printf '%s\n' "$line" ;;
        esac
    done
    [ "$got" -ge 4 ] || fail "$BROWSER $1 $2: the four cells reported (got $got; matrix.py died or hung)"
}

# matrix_key TRANSPORT MODE: plugs in a new key for the cells, runs them, unplugs it
matrix_key() {
    local transport=$1 mode=$2 name="$BROWSER-$1-$2" node aaguid pin= args=() t
    t=$(now)
    if [ "$mode" = uv ]; then
        # built-in UV is fixed when the key starts: it comes from the configuration file
        printf '[presence]\nmode = "auto"\n\n[policy]\nuser-verification = "auto"\n' > "$WORK/uv.toml"
        args=(--config "$WORK/uv.toml")
    fi
    if [ "$transport" = uhid ]; then
        uhid_start "$name" "${args[@]}"
        node=$UHID_NODE aaguid=$UHID_AAGUID
    else
        usbip_start "$name" "${args[@]}"
        node=$USBIP_NODE aaguid=$USBIP_AAGUID
    fi
    if [ -n "$node" ] && [ "$mode" = pin ]; then
        pin=$(tr -dc 0-9 < /dev/urandom | head -c 6)
        printf '%s\n' "$pin" | ctl pin set default --pin-stdin > "$WORK/$name-pin.log" 2>&1 \
            && ctl --json pin status default > "$WORK/$name-pin.json" 2>> "$WORK/$name-pin.log" \
            && pass "$LABEL: latchkeyctl pin set: the key has a PIN ($(json "$WORK/$name-pin.json" 'd.get("retries")') retries)" \
            || { fail "$LABEL: latchkeyctl pin set"; indent "$WORK/$name-pin.log"; node=; }
    fi
    if [ -n "$node" ]; then
        note "$BROWSER on $node (aaguid $aaguid), key ready $(since "$t") after its start"
        t=$(now)
        matrix_run "$transport" "$mode" "$aaguid" $pin
        note "$BROWSER $transport $mode: the four cells took $(since "$t")"
        # the key keeps the discoverable credential only
        if ctl --json credentials list --key default > "$WORK/$name-creds.json" 2>&1 \
            && [ "$(json "$WORK/$name-creds.json" "$CREDS")" = 1 ]; then
            pass "$LABEL: the control API lists one discoverable credential (the non-discoverable one is not stored)"
        else
            fail "$LABEL: the control API lists one discoverable credential"
            indent "$WORK/$name-creds.json"
        fi
    else
        for flow in "discoverable create" "non-discoverable create" "allowList get" "usernameless get"; do
            fail "$BROWSER $transport $mode: $flow: prerequisite failed: the key"
            MATRIX_CELLS+=("FAIL $BROWSER $transport $mode: $flow")
        done
    fi
    if [ "$transport" = uhid ]; then stop_daemon "$UHID_NODE"; else usbip_stop; fi
}

# browser_matrix BROWSER: one browser session, the 16 cells of its four keys
browser_matrix() {
    local line ready=0 t transport mode i
    BROWSER=$1
    t=$(now)
    section "$BROWSER: the browser starts (under TCG: a minute or so)"
    # the whole conversation has a time limit too
    coproc LK { cd "$HERE/browsers" && exec timeout -s KILL 2000 python3 matrix.py --browser "$BROWSER" \
        --browser-log "$WORK/$BROWSER.log" --work "$WORK" 2> "$WORK/$BROWSER-matrix.err"; }
    CO_PID=$LK_PID
    while [ -n "${LK[0]:-}" ] && IFS= read -r -t 900 line <&"${LK[0]}"; do
        case "$line" in
            READY) ready=1; break ;;
            PASS*|FAIL*) collect <<< "$line" ;;
            '#'*) printf '%s\n' "$line" ;;
            "DONE start") break ;;
        esac
    done
    if [ "$ready" = 1 ]; then
        note "$BROWSER ready $(since "$t") after its start"
        for transport in uhid usbip; do
            for mode in uv pin; do
                matrix_key "$transport" "$mode"
            done
        done
    else
        fail "$BROWSER: session ready (the matrix's 16 cells did not run)"
        for i in $(seq 16); do MATRIX_CELLS+=("FAIL $BROWSER: no session"); done
    fi
    [ -n "${LK[1]:-}" ] && echo quit >&"${LK[1]}" 2>/dev/null
    for ((i = 0; i < 300; i++)); do kill -0 "$CO_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$CO_PID" 2>/dev/null && { fail "$BROWSER: matrix.py exits after quit"; kill -KILL "$CO_PID"; }
    wait "$CO_PID" 2>/dev/null
    CO_PID=
    note "$BROWSER: session and its 16 cells took $(since "$t"); matrix.py's log:"
    cut -c 1-300 "$WORK/$BROWSER-matrix.err" | indent | tail -n 40
}

# A check of latchkey-webdriver in the browsers image, against a latchkeyd whose own key
# has no transport, so that the key the check adds is the only one the browser finds.
# intermediary_check LABEL SCRIPT TITLE: runs browsers/SCRIPT with the daemon's socket,
# latchkey-webdriver, latchkeyctl and the Swift runtime, and collects its checks.
intermediary_check() {
    local label=$1 script=$2 title=$3 t
    LABEL=$label
    section "$title"
    if [ ! -x "$WORK/bin/latchkey-webdriver" ]; then
        fail "$label: latchkey-webdriver is in $BIN"
        return
    fi
    t=$(now)
    printf '[[keys]]\nname = "parked"\nuhid = false\nusbip = false\n' > "$WORK/$label.toml"
    start_daemon "$label" --config "$WORK/$label.toml" --no-usbip
    if ! wait_status 60 'd["keys"]'; then
        fail "$label: latchkeyd up"
        tail -n 40 "$D_LOG" | indent
        stop_daemon
        return
    fi
    # collect in this shell (not a pipeline's subshell), so that its checks count
    collect < <(cd "$HERE/browsers" && exec timeout -s KILL 1500 python3 "$script" \
        --socket "$D_SOCK" --intermediary "$WORK/bin/latchkey-webdriver" --ctl "$LATCHKEYCTL" \
        --lib-dir "$WORK/lib" --browser-log "$WORK/$label-browser.log" --work "$WORK" 2> "$WORK/$label.err")
    note "$label: $(since "$t"); $script's log:"
    cut -c 1-300 "$WORK/$label.err" | indent | tail -n 60
    stop_daemon
}

# Selenium through latchkey-webdriver (browsers/webdriver_intermediary.py): a virtual
# authenticator test as Selenium's documentation writes one, whose authenticator is a
# latchkey key Chromium reaches through hidraw.
webdriver_check() {
    intermediary_check webdriver webdriver_intermediary.py \
        "Selenium through latchkey-webdriver: Chromium, and the key the test adds (uhid)"
}

# Firefox and latchkey-webdriver's §11 HTTP API (browsers/webdriver_firefox.py): no
# geckodriver exists for Debian 12 or on PyPI, so the test sends Selenium's §11 JSON to
# latchkey-webdriver itself while Marionette drives Firefox, which signs in with the
# credential the commands seeded on the key they made.
webdriver_firefox_check() {
    intermediary_check webdriver-firefox webdriver_firefox.py \
        "latchkey-webdriver's §11 commands and Firefox (Marionette), the key they add (uhid)"
}

suite_browsers() {
    local browser cell passed=0 failed=0
    command -v chromium > /dev/null && command -v firefox-esr > /dev/null && command -v Xvfb > /dev/null \
        || fail "browsers: the image has chromium, firefox-esr and Xvfb (kernel-tests.sh's browsers image)"
    note "$(chromium --version 2>/dev/null); $(firefox-esr --version 2>/dev/null);" \
        "udevd $(pgrep -x systemd-udevd > /dev/null && echo running || echo 'not running')"
    for browser in $BROWSERS; do
        case "$browser" in
            selenium) webdriver_check ;;
            webdriver-firefox) webdriver_firefox_check ;;
            *) browser_matrix "$browser" ;;
        esac
    done
    section "the browser matrix"
    for cell in "${MATRIX_CELLS[@]}"; do
        case "$cell" in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
        note "  $cell"
    done
    note "matrix: $passed of $(( passed + failed )) cells passed"
}

# ---- main --------------------------------------------------------------------------

section "environment"
note "kernel $(uname -r); $(nproc) vCPUs; $(free -m | awk '/Mem:/ { print $2 }') MiB; suite $SUITE; binaries from $BIN"
for m in uhid hid_generic usbhid vhci_hcd; do
    [ -d /sys/module/$m ] || note "module $m is not loaded"
done
t=$(now)
if ! stage_binaries; then
    fail "latchkeyd and latchkeyctl from $BIN run in the guest"
else
    note "binaries and $(ls "$WORK/lib" | wc -l) runtime libraries copied to $WORK in $(since "$t")"
    case "$SUITE" in
        base) suite_base ;;
        browsers) suite_browsers ;;
        *) fail "unknown suite $SUITE" ;;
    esac
fi

if [ "$FAILED" != 0 ]; then
    for f in "$WORK"/*/latchkeyd.log; do
        [ -e "$f" ] || continue
        note "latchkeyd log $f (tail):"
        tail -n 60 "$f" | indent
    done
fi
if [ -n "$ARTIFACTS" ]; then
    mkdir -p "$ARTIFACTS/$SUITE"
    for f in "$WORK"/*/latchkeyd.log; do
        [ -e "$f" ] && cp "$f" "$ARTIFACTS/$SUITE/latchkeyd-$(basename "$(dirname "$f")").log"
    done
    for f in "$WORK"/chromium.log "$WORK"/firefox.log "$WORK"/*-matrix.err "$WORK"/*.xwd; do
        [ -e "$f" ] && cp "$f" "$ARTIFACTS/$SUITE/"
    done
    note "logs copied to $ARTIFACTS/$SUITE"
fi
note "guest time $(since "$T_ALL")"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
