#!/bin/bash
# Runs INSIDE the rig guest, as root, with systemd as PID 1 (scripts/kernel-tests.sh's
# desktop suite: Tests/rig/run.sh with RIG_INIT=systemd RIG_UDEV=1): latchkey as two
# people on one desktop machine use it, each with a PAM login (a logind session and
# `systemd --user`), a session bus, an X display (Xvfb), Debian's dunst as the
# notification server, and, for alice, Debian's Chromium through chromedriver.
#
#   desktop-checks.sh --deb FILE [--sealing tpm2|host] [--artifacts DIR]
#
# Setup: apt install the package (offline); alice and bob, both in the latchkey group,
# each logged in through PAM (systemd-run -p PAMName=login: pam_systemd registers the
# session and starts user@UID.service) with an Xvfb of their own (a user service) on
# the manager's DISPLAY; alice's Chromium (browsers/desktop.py, a coprocess run as
# alice) starts at once and serves every browser step below.
#
#   A  the user unit, non-root: alice runs `systemctl --user start latchkeyd` (USB/IP
#      on 127.0.0.1:3240, no uhid), root runs `usbip attach`, alice's Chromium
#      registers and signs in (alice answers each presence request with latchkeyctl
#      approve), every result verified by Fido2Server; detach, stop.
#   B  the system unit, two users: alice creates alice-key (hers), Chromium registers
#      and signs in through uhid; bob, in the group, cannot open its hidraw node
#      (EACCES), does not see it in a USB/IP device list (usbip list -r, and the
#      protocol's OP_REQ_DEVLIST) and cannot import it (OP_REQ_IMPORT), cannot open a
#      session or add an authenticator through alice's latchkey-webdriver; bob's own
#      key is his, and his listing shows only it.
#   C  the prompt agent: alice's and bob's `latchkeyctl agent` (user units) and dunst;
#      a sign-in from alice's Chromium on alice-key (presence prompt) shows a
#      notification in alice's dunst, none in bob's; bob's approve of it is 403; alice
#      invokes the notification's Allow action (dunstctl context, whose menu command
#      picks the action, as a person's click would) and the sign-in completes.
#   B  (last, because on a daemon without owners it deletes alice's key) bob walks
#      every route of GET /v1/api/routes on alice-key with curl: each is 403
#      "forbidden"; alice's event stream holds one access.refused event per refusal.
#
# Prints one line per check, "ok N - name" or "not ok N - name", diagnostics as "# ..."
# lines, and last "N passed, M failed" alone on a line (like guest-checks.sh). Exit
# status 1 when a check failed. Every process started here has a time limit.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEB= ARTIFACTS= SEALING=
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) DEB=$2; shift ;;
        --artifacts) ARTIFACTS=$2; shift ;;
        --sealing) SEALING=$2; shift ;;
        *) echo "desktop-checks.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -f "$DEB" ] || { echo "desktop-checks.sh: --deb FILE is required (scripts/package-deb.sh makes it)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive PYTHONDONTWRITEBYTECODE=1
W=$(mktemp -d /tmp/lk-desktop.XXXXXX)
chmod 0755 "$W"
SOCK=/run/latchkeyd/control.sock
LIMIT=1500            # seconds: what any process started here may live at most
KEY=alice-key         # alice's key under the system unit
RP=localhost
N=0 PASSED=0 FAILED=0
T_ALL=$(date +%s)
declare -A DISPLAY_OF=([alice]=:1 [bob]=:2)

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1fs", a - b }'; }
note() { printf '# %s\n' "$*"; }
section() { printf '#\n# === %s\n' "$*"; }
indent() { sed 's/^/#   /' "$@"; }
ok() { N=$((N + 1)) PASSED=$((PASSED + 1)); echo "ok $N - $*"; }
bad() {
    N=$((N + 1)) FAILED=$((FAILED + 1))
    echo "not ok $N - $*"
    [ -s "$W/log" ] && tail -n 30 "$W/log" | indent
}
# expect NAME CMD...: a check from CMD's exit status, its output in $W/log
expect() {
    local name=$1 t
    shift
    t=$(now)
    if "$@" > "$W/log" 2>&1; then ok "$name ($(since "$t"))"; else bad "$name (exit $?)"; fi
}
# result lines of a python helper ("PASS<TAB>name" / "FAIL<TAB>name<TAB>why") -> checks
collect() {
    local status name why
    while IFS=$'\t' read -r status name why; do
        case "$status" in
            PASS) ok "$name" ;;
            FAIL) : > "$W/log"; bad "$name"; note "  $why" ;;
            '#'*) printf '%s\n' "$status${name:+	$name}${why:+	$why}" ;;
        esac
    done
}
json() {  # FILE EXPR [ARG...]: a value from a JSON document (EXPR over d, and a: the ARGs)
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2], {}, {"d": d, "a": sys.argv[3:]})
print("" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))' "$@"
}

error_of() {  # FILE FIELD: a field of the control API's error document ({"error": {code, message, rule}})
    json "$1" '(d.get("error") or {}).get(a[0]) if isinstance(d, dict) else None' "$2" 2> /dev/null
}

# as USER CMD...: CMD as USER (uid, gid and groups from /etc/group, as a login has
# them) in that user's session environment: runtime directory, session bus, display.
# as_argv USER sets ASU to the argv prefix, for `"${ASU[@]}" CMD &`, whose $! is then
# CMD's own pid (setpriv and env exec), so that a signal reaches it.
as_argv() {
    local u=$1 uid
    uid=$(id -u "$u")
    ASU=(setpriv --reuid="$u" --regid="$u" --init-groups -- env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
        HOME="/home/$u" USER="$u" LOGNAME="$u" LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
        XDG_RUNTIME_DIR="/run/user/$uid" DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus"
        DISPLAY="${DISPLAY_OF[$u]:-}")
}
as() {
    as_argv "$1"
    shift
    "${ASU[@]}" "$@"
}
ctl() { local u=$1; shift; as "$u" timeout 30 latchkeyctl "$@"; }
root_ctl() { timeout 30 latchkeyctl "$@"; }
# api USER METHOD PATH [BODY]: curl on the control socket as USER; prints the HTTP
# status, the body goes to $W/api.body
api() {
    local u=$1 method=$2 path=$3 data=()
    [ $# -ge 4 ] && data=(-H 'Content-Type: application/json' --data-binary "$4")
    as "$u" curl -s -w '\n%{http_code}' --max-time 20 -X "$method" --unix-socket "$SOCK" \
        "${data[@]}" "http://localhost$path" > "$W/api.out" 2> "$W/api.err"
    sed '$d' "$W/api.out" > "$W/api.body"
    tail -n 1 "$W/api.out"
}
# wait_for SECONDS CMD...: polls CMD (quietly) until it succeeds
wait_for() {
    local deadline=$(( $(date +%s) + $1 ))
    shift
    until "$@" > /dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.5
    done
}
user_journal() {  # USER UNIT: the tail of a user unit's journal
    journalctl --no-pager -n "${3:-30}" -o cat _UID="$(id -u "$1")" _SYSTEMD_USER_UNIT="$2" 2>&1 | indent
}
system_journal() { journalctl --no-pager -n 40 -o cat -u latchkeyd.service 2>&1 | indent; }

BG_PIDS=()
cleanup() {
    [ -n "${BROWSER_PID:-}" ] && kill -TERM "$BROWSER_PID" 2> /dev/null
    [ ${#BG_PIDS[@]} -gt 0 ] && kill -TERM "${BG_PIDS[@]}" 2> /dev/null
    usbip detach -p 0 > /dev/null 2>&1
}
trap cleanup EXIT

note "kernel $(uname -r); $(systemctl --version | head -n 1); package $(dpkg-deb -f "$DEB" Package Version | tr '\n' ' ')"
note "$(chromium --version 2>/dev/null); dunst $(dpkg-query -W -f '${Version}' dunst 2>/dev/null)"

# ---- setup: the package, two people, their logins ------------------------------------
section "setup: the package, alice and bob logged in"
cp "$DEB" "$W/" && chmod 0644 "$W"/*.deb
PKG=$W/$(basename "$DEB")
t=$(now)
if timeout 300 apt install -y --no-install-recommends "$PKG" > "$W/log" 2>&1; then
    ok "apt install ./$(basename "$PKG") ($(since "$t"))"
else
    bad "apt install ./$(basename "$PKG")"
fi
# the prompt agent's user unit: the package's, else the repository's (a package that
# predates it), with ExecStart in /usr/bin as package-deb.sh writes units
AGENT_UNIT=/usr/lib/systemd/user/latchkey-agent.service
REPO_UNIT=$HERE/../../systemd/latchkey-agent.service
if [ ! -f "$AGENT_UNIT" ] && [ -f "$REPO_UNIT" ]; then
    sed 's|/usr/local/bin/|/usr/bin/|g' "$REPO_UNIT" > "$AGENT_UNIT"
    note "latchkey-agent.service is not in the package: installed the repository's"
fi

# dunst's configuration: its context menu's command picks the action whose key is its
# argument (what a click on that button does); a rule runs a script that records each
# notification it shows
dunst_config() {  # USER
    local home=/home/$1
    mkdir -p "$home/.config/dunst" "$home/.local/bin"
    cat > "$home/.local/bin/lk-pick-action" << 'EOF'
#!/bin/sh
# dunst's menu command (dmenu): stdin lists "#LABEL (SUMMARY) [ID,KEY]" lines; picks KEY=$1
menu=$(cat)
printf '%s\n' "$menu" >> "$HOME/dunst-menu.log"
printf '%s\n' "$menu" | grep -m 1 ",$1\]\$"
EOF
    cat > "$home/.local/bin/lk-record" << 'EOF'
#!/bin/sh
# a dunst rule's script: one line per notification shown
printf '%s\t%s\t%s\t%s\n' "$DUNST_ID" "$DUNST_APP_NAME" "$DUNST_SUMMARY" "$DUNST_BODY" | tr -d '\n' >> "$HOME/dunst-shown.log"
echo >> "$HOME/dunst-shown.log"
EOF
    chmod 0755 "$home/.local/bin/lk-pick-action" "$home/.local/bin/lk-record"
    cat > "$home/.config/dunst/dunstrc" << EOF
[global]
    dmenu = $home/.local/bin/lk-pick-action allow
    always_run_script = true
[lk-record]
    summary = "*"
    script = $home/.local/bin/lk-record
EOF
    : > "$home/dunst-shown.log"
    chown -R "$1:$1" "$home/.config" "$home/.local" "$home/dunst-shown.log"
}

# login USER: a PAM session (service "login": pam_systemd registers it with logind,
# which starts user@UID.service, systemd --user, and its dbus.socket), then Xvfb on the
# user's display as a user service, and DISPLAY in the manager's environment
login() {
    local u=$1 uid d=${DISPLAY_OF[$1]} t session
    uid=$(id -u "$u")
    t=$(now)
    # (a session with neither tty nor display is of class "background" unless it says otherwise)
    systemd-run --quiet --unit="lk-login-$u" -p PAMName=login -p User="$u" -p RuntimeMaxSec=$LIMIT \
        --setenv=XDG_SESSION_CLASS=user /bin/sleep $LIMIT > "$W/log" 2>&1
    if wait_for 90 test -S "/run/user/$uid/bus" && wait_for 30 systemctl is-active "user@$uid.service" \
        && session=$(loginctl show-user "$u" -P Sessions 2> /dev/null) && [ -n "$session" ]; then
        ok "$u: a logind session ($session: $(loginctl show-session "${session%% *}" -P Service -P Class \
            | tr '\n' ' ')), user@$uid.service (systemd --user) and its session bus ($(since "$t"))"
    else
        loginctl list-sessions >> "$W/log" 2>&1
        systemctl status --no-pager "lk-login-$u" "user@$uid.service" >> "$W/log" 2>&1
        bad "$u: a logind session, user@$uid.service (systemd --user) and its session bus"
        return 1
    fi
    t=$(now)
    as "$u" systemd-run --user --quiet --unit=lk-xvfb -p RuntimeMaxSec=$LIMIT \
        Xvfb "$d" -screen 0 1280x1024x24 -nolisten tcp > "$W/log" 2>&1
    as "$u" systemctl --user set-environment DISPLAY="$d" >> "$W/log" 2>&1
    if wait_for 60 test -S "/tmp/.X11-unix/X${d#:}"; then
        ok "$u: Xvfb $d as a user service, DISPLAY in the user manager ($(since "$t"))"
    else
        user_journal "$u" lk-xvfb.service >> "$W/log"
        bad "$u: Xvfb $d as a user service"
    fi
}

for u in alice bob; do
    useradd -m -s /bin/bash -G latchkey "$u"
    dunst_config "$u"
done
# logind lets users in once boot has finished (/run/nologin)
timeout 60 systemctl start systemd-user-sessions.service systemd-logind.service || note "systemd-user-sessions did not start"
login alice
login bob
ALICE=$(id -u alice) BOB=$(id -u bob)

# alice's Chromium: a coprocess as alice, started now (it takes a minute under TCG)
AW=$W/alice
install -d -o alice -g alice -m 0700 "$AW"
as_argv alice
coproc BR { exec "${ASU[@]}" LK_CHROMIUM_DISPLAY="${DISPLAY_OF[alice]}" timeout -s KILL $LIMIT \
    python3 "$HERE/browsers/desktop.py" --browser-log "$AW/chromium.log" --work "$AW" --timeout-ms 90000 \
    2> "$W/desktop-browser.err"; }
BROWSER_PID=$BR_PID  # (bash unsets BR_PID once the coprocess ends)
BROWSER_READY=
# browser COMMAND...: one command to alice's browser; its check lines until DONE (or
# STARTED); fails when one of them did
browser() {
    local line failed=0
    if [ -z "$BROWSER_READY" ] || [ -z "${BR[1]:-}" ]; then
        : > "$W/log"; bad "${*:3} (alice's Chromium is not up)"; return 1
    fi
    echo "$*" >&"${BR[1]}"
    while IFS= read -r -t 600 line <&"${BR[0]}"; do
        case "$line" in
            DONE | STARTED) return "$failed" ;;
            FAIL*) failed=1; collect <<< "$line" ;;
            PASS*) collect <<< "$line" ;;
            *) printf '%s\n' "$line" ;;
        esac
    done
    : > "$W/log"; bad "${*:3} (alice's Chromium did not answer)"
    return 1
}
browser_ready() {  # waits for the coprocess's READY (once)
    local line
    [ -n "$BROWSER_READY" ] && return 0
    while [ -n "${BR[0]:-}" ] && IFS= read -r -t 900 line <&"${BR[0]}"; do
        case "$line" in
            READY*) read -r _ DEVTOOLS CHROMEDRIVER <<< "$line"; BROWSER_READY=1; return 0 ;;
            "DONE start") break ;;
            PASS* | FAIL*) collect <<< "$line" ;;
            *) printf '%s\n' "$line" ;;
        esac
    done
    tail -n 30 "$W/desktop-browser.err" | indent
    return 1
}
# approving USER: a background `latchkeyctl approve --wait` as USER (the next request)
approving() {
    as_argv "$1"
    "${ASU[@]}" timeout 120 latchkeyctl approve --wait 100 > "$W/approve.log" 2>&1 &
    BG_PIDS+=($!)
}
hidraw_of() {  # USER KEY: the key's hidraw node, as the control API tells USER (30 s)
    local i node
    for ((i = 0; i < 60; i++)); do
        if ctl "$1" --json keys show "$2" > "$W/key.json" 2> /dev/null; then
            node=$(json "$W/key.json" '(d.get("uhid") or {}).get("hidraw")')
            [ -n "$node" ] && [ -c "$node" ] && { echo "$node"; return 0; }
        fi
        sleep 0.5
    done
    return 1
}

# ---- A: the user unit, non-root, USB/IP attached by root -----------------------------
section "A: alice's user unit (systemctl --user start latchkeyd), USB/IP attached by root"
t=$(now)
if as alice timeout 120 systemctl --user start latchkeyd.service > "$W/log" 2>&1 \
    && [ "$(as alice systemctl --user is-active latchkeyd.service)" = active ]; then
    ok "alice: systemctl --user start latchkeyd: active, pid $(as alice systemctl --user show -P MainPID latchkeyd.service)" \
        "as uid $(ps -o uid= -p "$(as alice systemctl --user show -P MainPID latchkeyd.service)" | tr -d ' ') ($(since "$t"))"
else
    user_journal alice latchkeyd.service >> "$W/log"
    bad "alice: systemctl --user start latchkeyd: active"
fi
USER_NODE=
t=$(now)
if wait_for 30 bash -c 'timeout 20 usbip list -r 127.0.0.1 > "$1" 2>&1 && grep -Eq "^ *1-1: .*\(1209:0001\)" "$1"' \
    _ "$W/usbip-list"; then
    ok "root: usbip list -r 127.0.0.1 shows alice's key 1-1 (1209:0001) ($(since "$t"))"
else
    cp "$W/usbip-list" "$W/log"
    user_journal alice latchkeyd.service >> "$W/log"
    bad "root: usbip list -r 127.0.0.1 shows alice's key 1-1 (1209:0001)"
fi
before=$(ls /dev/hidraw* 2> /dev/null)
t=$(now)
if timeout 30 usbip attach -r 127.0.0.1 -b 1-1 > "$W/log" 2>&1; then
    for ((i = 0; i < 120; i++)); do
        for n in /dev/hidraw*; do
            [ -e "$n" ] && ! grep -qx "$n" <<< "$before" && USER_NODE=$n
        done
        [ -n "$USER_NODE" ] && break
        sleep 0.25
    done
fi
if [ -n "$USER_NODE" ]; then
    udevadm settle --timeout=30
    ok "root: usbip attach -r 127.0.0.1 -b 1-1: $USER_NODE ($(stat -c '%U:%G %a' "$USER_NODE")) ($(since "$t"))"
else
    user_journal alice latchkeyd.service >> "$W/log"
    bad "root: usbip attach -r 127.0.0.1 -b 1-1 gives a hidraw node"
fi
browser_ready
if [ -n "$USER_NODE" ]; then
    for step in "create a-cred" "get a-cred"; do
        approving alice
        browser $step "alice's Chromium: ${step%% *} over USB/IP through alice's user unit (alice approves with latchkeyctl)"
        wait "${BG_PIDS[-1]}" 2> /dev/null
    done
else
    : > "$W/log"
    bad "alice's Chromium: create and get over USB/IP through alice's user unit (no device to use)"
fi
t=$(now)
port=$(timeout 10 usbip port 2> /dev/null | sed -n 's/^Port \([0-9]*\):.*/\1/p' | head -n 1)
[ -n "$port" ] && timeout 30 usbip detach -p "$port" > /dev/null 2>&1
if as alice timeout 60 systemctl --user stop latchkeyd.service > "$W/log" 2>&1 \
    && { [ -z "$USER_NODE" ] || wait_for 15 test ! -e "$USER_NODE"; }; then
    ok "usbip detach; alice: systemctl --user stop latchkeyd ($(since "$t"))"
else
    bad "usbip detach; alice: systemctl --user stop latchkeyd"
fi
note "alice's user unit's journal:"
user_journal alice latchkeyd.service 15

# ---- B: the system unit, alice's key, bob's attempts ---------------------------------
section "B: the system unit; alice's key; bob (group latchkey) tries it"
cat > /etc/latchkeyd/latchkeyd.toml << 'EOF'
# the desktop suite: keys are made by their owners; USB/IP on loopback
[presence]
mode = "prompt"
timeout-seconds = 120

[uhid]
enabled = "auto"

[usbip]
enabled = "on"
listen = "127.0.0.1:3240"

[master-key]
source = "systemd-credential"   # the packaged unit's LoadCredentialEncrypted= (postinst sealed it)

[[keys]]
name = "parked"
uhid = false
usbip = false
EOF
t=$(now)
if timeout 120 systemctl enable --now latchkeyd.service > "$W/log" 2>&1 \
    && [ "$(systemctl is-active latchkeyd.service)" = active ]; then
    ok "systemctl enable --now latchkeyd (the system unit, USB/IP on): active ($(since "$t"))"
else
    system_journal >> "$W/log"
    bad "systemctl enable --now latchkeyd: active"
fi
# the key Chromium signs in with below: sealed by postinst, to the VM's TPM when the rig gives
# one (kernel-tests.sh: swtpm and UEFI, --sealing tpm2), else to the host key
line=$(journalctl -q -o cat -u latchkeyd.service 2> /dev/null | grep 'master key loaded' | tail -n 1)
if grep -q 'source=systemd-credential' <<< "$line" && grep -q "sealed-with=${SEALING:-[a-z]}" <<< "$line" \
    && [ ! -e /var/lib/latchkeyd/master-key ]; then
    ok "the system unit's master key: the sealed credential, $(grep -o 'sealed-with=[^ ]*' <<< "$line"), no plaintext file"
else
    echo "# line: ${line:-none}"; ls -la /var/lib/latchkeyd 2>&1 | sed 's/^/# /'
    bad "the system unit's master key: the sealed credential${SEALING:+, sealed-with=$SEALING}, no plaintext file"
fi
# alice's event stream, from before bob tries anything to the end
as_argv alice
"${ASU[@]}" timeout $LIMIT curl -sN --unix-socket "$SOCK" "http://localhost/v1/events?key=$KEY" \
    > "$W/alice-events.sse" 2> /dev/null &
EVENTS_PID=$!
BG_PIDS+=($EVENTS_PID)

expect "alice (group latchkey): latchkeyctl keys create $KEY" \
    ctl alice --json keys create "$KEY" --presence auto
ctl alice --json keys show "$KEY" > "$W/key.json" 2> "$W/log"
owner=$(json "$W/key.json" 'd.get("owner")' 2> /dev/null)
if python3 -c 'import json, sys
o = json.loads(sys.argv[1]) if sys.argv[1][:1] in "{[\"" else sys.argv[1]
o = o.get("uid", o.get("name")) if isinstance(o, dict) else o
sys.exit(str(o) not in (sys.argv[2], "alice"))' "${owner:-null}" "$ALICE" 2> /dev/null; then
    ok "$KEY is alice's: owner $owner"
else
    cat "$W/key.json" >> "$W/log"
    bad "$KEY is alice's (owner: ${owner:-none})"
fi
NODE=$(hidraw_of alice "$KEY") || NODE=
BUSID=$(json "$W/key.json" '(d.get("usbip") or {}).get("busid")' 2> /dev/null)
udevadm settle --timeout=30
if [ -n "$NODE" ] && [ "$(stat -c '%U %a' "$NODE")" = "alice 600" ]; then
    ok "$KEY's hidraw node $NODE: owner alice, mode 600"
else
    : > "$W/log"
    bad "$KEY's hidraw node: owner alice, mode 600 (${NODE:-no node}: $(stat -c '%U:%G %a' "$NODE" 2>&1))"
fi
browser create b-cred "alice's Chromium: registers with $KEY through uhid (the system unit)"
browser get b-cred "alice's Chromium: signs in with $KEY through uhid"

expect "bob (group latchkey): latchkeyctl keys create bob-key (his own key)" \
    ctl bob --json keys create bob-key --no-uhid --no-usbip
if ctl bob --json keys list > "$W/bob-keys.json" 2> "$W/log" \
    && [ "$(json "$W/bob-keys.json" '" ".join(sorted(k["name"] for k in d))')" = "bob-key" ]; then
    ok "bob: latchkeyctl keys list shows bob-key and none of alice's or the daemon's"
else
    cat "$W/bob-keys.json" >> "$W/log"
    bad "bob: latchkeyctl keys list shows only bob-key (got: $(json "$W/bob-keys.json" '[k["name"] for k in d]' 2>&1))"
fi

if [ -n "$NODE" ]; then
    as bob python3 "$HERE/desktop_peer.py" open "$NODE" > "$W/log" 2>&1
    if [ "$(json "$W/log" 'd.get("errno")' 2> /dev/null)" = EACCES ]; then
        ok "bob cannot open $NODE (EACCES)"
    else
        bad "bob cannot open $NODE (EACCES) (got: $(cat "$W/log"))"
    fi
else
    : > "$W/log"; bad "bob cannot open $KEY's hidraw node (no node)"
fi

# USB/IP: root (who attaches keys for their owners) sees alice's key; bob sees nothing of hers
t=$(now)
timeout 20 usbip list -r 127.0.0.1 > "$W/log" 2>&1
ROOT_LISTED=
if [ -n "$BUSID" ] && grep -Eq "^ *$BUSID: " "$W/log"; then
    ROOT_LISTED=1
    ok "root: usbip list -r 127.0.0.1 shows $KEY ($BUSID) ($(since "$t"))"
else
    bad "root: usbip list -r 127.0.0.1 shows $KEY (${BUSID:-no bus id})"
fi
as bob timeout 20 usbip list -r 127.0.0.1 > "$W/bob-usbip-list" 2>&1
as bob timeout 30 python3 "$HERE/desktop_peer.py" usbip-devlist 127.0.0.1 3240 > "$W/bob-devlist.json" 2>&1
cat "$W/bob-usbip-list" "$W/bob-devlist.json" > "$W/log"
# (root's list above shows that the server answers: without it, bob's empty list
# would prove nothing)
if [ -n "$ROOT_LISTED" ] && ! grep -Eq "^ *$BUSID: " "$W/bob-usbip-list" \
    && [ "$(json "$W/bob-devlist.json" 'a[0] not in d["busids"]' "$BUSID" 2> /dev/null)" = True ]; then
    ok "bob: usbip list -r 127.0.0.1 and OP_REQ_DEVLIST show nothing of alice's ($(json "$W/bob-devlist.json" 'd["busids"]'))"
else
    bad "bob: usbip list -r 127.0.0.1 and OP_REQ_DEVLIST show nothing of alice's (bus id ${BUSID:-unknown}$([ -n "$ROOT_LISTED" ] || echo "; the list as root failed too"))"
fi
as bob timeout 30 python3 "$HERE/desktop_peer.py" usbip-import 127.0.0.1 3240 "${BUSID:-1-1}" > "$W/bob-import.json" 2>&1
IMPORT_REFUSED=0
if [ -n "$ROOT_LISTED" ] && [ "$(json "$W/bob-import.json" 'd.get("imported")' 2> /dev/null)" = False ]; then
    IMPORT_REFUSED=1
    ok "bob: OP_REQ_IMPORT of $BUSID is refused ($(cat "$W/bob-import.json"))"
else
    : > "$W/log"; bad "bob: OP_REQ_IMPORT of alice's ${BUSID:-key} is refused (got: $(cat "$W/bob-import.json"))"
fi

# latchkey-webdriver: alice's, as a user service, in front of her Chromium's chromedriver
WD_PORT=4445
REFUSED=0  # refusals the daemon itself can see (each should be one access.refused event)
if [ -n "$BROWSER_READY" ]; then
    t=$(now)
    as alice systemd-run --user --quiet --unit=lk-webdriver -p RuntimeMaxSec=$LIMIT latchkey-webdriver \
        --port $WD_PORT --upstream "http://127.0.0.1:$CHROMEDRIVER" --socket "$SOCK" --idle-timeout 600 \
        > "$W/log" 2>&1
    wait_for 60 as alice curl -s --max-time 5 "http://127.0.0.1:$WD_PORT/status"
    SESSION_BODY="{\"capabilities\":{\"alwaysMatch\":{\"browserName\":\"chrome\",\"goog:chromeOptions\":{\"debuggerAddress\":\"127.0.0.1:$DEVTOOLS\"}}}}"
    as alice curl -s --max-time 300 -H 'Content-Type: application/json' --data-binary "$SESSION_BODY" \
        "http://127.0.0.1:$WD_PORT/session" > "$W/wd-session.json" 2>> "$W/log"
    SID=$(json "$W/wd-session.json" 'd["value"]["sessionId"]' 2> /dev/null)
    if [ -n "$SID" ]; then
        ok "alice: a WebDriver session through her latchkey-webdriver on 127.0.0.1:$WD_PORT ($(since "$t"))"
    else
        cat "$W/wd-session.json" >> "$W/log"; user_journal alice lk-webdriver.service >> "$W/log"
        bad "alice: a WebDriver session through her latchkey-webdriver on 127.0.0.1:$WD_PORT"
    fi
    root_ctl --json keys list > "$W/keys-before.json" 2> /dev/null
    wd_bob() {  # PATH BODY: bob's POST to alice's latchkey-webdriver; prints the HTTP status
        as bob curl -s -w '\n%{http_code}' --max-time 120 -H 'Content-Type: application/json' \
            --data-binary "$2" "http://127.0.0.1:$WD_PORT$1" > "$W/wd-bob.out" 2> /dev/null
        sed '$d' "$W/wd-bob.out" > "$W/wd-bob.json"
        tail -n 1 "$W/wd-bob.out"
    }
    code=$(wd_bob /session "$SESSION_BODY")
    if [ "$code" != 200 ] && [ -z "$(json "$W/wd-bob.json" 'd["value"].get("sessionId")' 2> /dev/null)" ]; then
        ok "bob: POST /session on alice's latchkey-webdriver is refused (HTTP $code: $(head -c 200 "$W/wd-bob.json"))"
    else
        : > "$W/log"; bad "bob: POST /session on alice's latchkey-webdriver is refused (HTTP $code: $(head -c 300 "$W/wd-bob.json"))"
    fi
    code=$(wd_bob "/session/${SID:-none}/webauthn/authenticator" \
        '{"protocol":"ctap2","transport":"usb","hasResidentKey":true,"hasUserVerification":true,"isUserConsenting":true,"isUserVerified":true}')
    root_ctl --json keys list > "$W/keys-after.json" 2> /dev/null
    added=$(python3 -c 'import json, sys
before = {k["name"] for k in json.load(open(sys.argv[1]))}
print(" ".join(k["name"] for k in json.load(open(sys.argv[2])) if k["name"] not in before))' \
        "$W/keys-before.json" "$W/keys-after.json" 2> /dev/null)
    if [ -n "$SID" ] && [ "$code" != 200 ] && [ -z "$added" ]; then
        ok "bob: adding a virtual authenticator to alice's session through her latchkey-webdriver is refused (HTTP $code)"
    else
        : > "$W/log"
        bad "bob: adding a virtual authenticator to alice's session is refused (HTTP $code: $(head -c 300 "$W/wd-bob.json"); keys added: ${added:-none})"
    fi
    for k in $added; do root_ctl keys delete "$k" > /dev/null 2>&1; done  # bob's key, visible to Chromium
    note "alice's latchkey-webdriver's journal:"
    user_journal alice lk-webdriver.service 12
else
    : > "$W/log"; bad "bob: cannot add an authenticator through alice's latchkey-webdriver (alice's Chromium is not up)"
fi

# ---- C: the prompt agent --------------------------------------------------------------
section "C: the prompt agent (latchkeyctl agent, a user service) and dunst"
expect "alice: latchkeyctl presence set prompt --key $KEY" ctl alice presence set prompt --key "$KEY"
for u in alice bob; do
    t=$(now)
    as "$u" timeout 60 systemctl --user start dunst.service > "$W/log" 2>&1
    as "$u" timeout 60 systemctl --user start latchkey-agent.service >> "$W/log" 2>&1
    sleep 2  # an agent that cannot start exits at once
    if [ "$(as "$u" systemctl --user is-active dunst.service)" = active ] \
        && [ "$(as "$u" systemctl --user is-active latchkey-agent.service)" = active ]; then
        ok "$u: dunst and latchkey-agent (user units) active ($(since "$t"))"
    else
        user_journal "$u" latchkey-agent.service >> "$W/log"; user_journal "$u" dunst.service >> "$W/log"
        bad "$u: dunst and latchkey-agent (user units) active (agent: $(as "$u" systemctl --user is-active latchkey-agent.service))"
    fi
done
pending_of() {  # USER: the ids of the pending requests USER is shown, one a line
    ctl "$1" --json pending > "$W/pending-$1.json" 2> /dev/null && json "$W/pending-$1.json" '"\n".join(p["id"] for p in d)'
}
shown() { [ -s "/home/$1/dunst-shown.log" ]; }
# what dunst showed before (alice's user unit prompts through it too) is not the agent's
for u in alice bob; do : > "/home/$u/dunst-shown.log"; rm -f "/home/$u/dunst-menu.log"; done
PENDING_ID=
if browser begin-get b-cred; then
    t=$(now)
    deadline=$(( $(date +%s) + 60 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        [ -z "$PENDING_ID" ] && PENDING_ID=$(pending_of alice | head -n 1)
        [ -n "$PENDING_ID" ] && shown alice && break
        sleep 1
    done
    if [ -n "$PENDING_ID" ] && shown alice; then
        ok "alice's agent shows her sign-in ($PENDING_ID) as a notification of dunst ($(since "$t")):" \
            "$(tr '\t' '|' < /home/alice/dunst-shown.log | head -n 1 | cut -c 1-300)"
        if grep -q "$RP" /home/alice/dunst-shown.log; then ok "the notification names the site ($RP)"
        else : > "$W/log"; bad "the notification names the site ($RP)"; fi
    else
        user_journal alice latchkey-agent.service >> "$W/log"
        bad "alice's agent shows her sign-in as a notification of dunst (pending: ${PENDING_ID:-none})"
    fi
    if [ -n "$PENDING_ID" ]; then
        pending_of bob > "$W/log" 2>&1
        if ! grep -qx "$PENDING_ID" "$W/log" && pending_of alice | grep -qx "$PENDING_ID"; then
            ok "bob: latchkeyctl pending does not show alice's request (alice's does)"
        else
            bad "bob: latchkeyctl pending does not show alice's request (alice's does)"
        fi
        code=$(api bob POST "/v1/presence/pending/$PENDING_ID/approve")
        if [ "$code" = 403 ] && [ "$(error_of "$W/api.body" code)" = forbidden ]; then
            REFUSED=$((REFUSED + 1))
            ok "bob: approving alice's request is refused: 403 forbidden, rule $(error_of "$W/api.body" rule)"
        else
            cp "$W/api.body" "$W/log"; bad "bob: approving alice's request is refused: 403 forbidden (HTTP $code)"
        fi
    fi
    if [ "$(as bob systemctl --user is-active latchkey-agent.service)" = active ] && ! shown bob \
        && [ "$(as bob timeout 10 dunstctl count displayed)" = 0 ]; then
        ok "bob's agent and dunst show nothing of alice's request"
    else
        tr '\t' '|' < /home/bob/dunst-shown.log > "$W/log"
        bad "bob's agent (running) and dunst show nothing of alice's request"
    fi
    # Allow, through dunst's menu: only while the request waits for alice (bob's answer
    # must not have ended it), and only what the menu command picked counts
    if shown alice && pending_of alice | grep -qx "$PENDING_ID" \
        && as alice timeout 20 dunstctl context > "$W/log" 2>&1 \
        && wait_for 20 grep -q ',allow\]$' /home/alice/dunst-menu.log; then
        note "alice invoked Allow through dunst's menu: $(grep ',allow\]$' /home/alice/dunst-menu.log | head -n 1)"
        browser end-get b-cred 90 "alice's Allow on the notification completes the sign-in (Fido2Server verifies it)"
    else
        bad "alice invokes the notification's Allow action (dunstctl context) while her request waits" \
            "(pending for alice: $(pending_of alice | tr '\n' ' '))"
        [ -n "$PENDING_ID" ] && ctl alice deny "$PENDING_ID" > /dev/null 2>&1
        browser end-get b-cred 20 "# the sign-in, not answered by alice's agent"
    fi
fi
note "alice's agent's journal:"
user_journal alice latchkey-agent.service 12

# ---- B, last: bob on every control route of alice's key -------------------------------
section "B: bob on every route of the control API on $KEY (curl --unix-socket, as bob)"
# a credential the key stores (Chromium's above is not discoverable): alice seeds one
as alice python3 -c 'import sys
from cryptography.hazmat.primitives import serialization as s
from cryptography.hazmat.primitives.asymmetric import ec
open(sys.argv[1], "wb").write(ec.generate_private_key(ec.SECP256R1()).private_bytes(
    s.Encoding.DER, s.PrivateFormat.PKCS8, s.NoEncryption()))' "$AW/seed.der" > "$W/log" 2>&1
ctl alice --json credentials add "$KEY" --rp-id example.org --private-key "$AW/seed.der" \
    --user-handle "$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')" --user-name alice@example.org \
    > "$W/seed.json" 2>> "$W/log"
CRED_ID=$(json "$W/seed.json" 'd.get("credentialId")' 2> /dev/null)
if [ -n "$CRED_ID" ]; then ok "alice: latchkeyctl credentials add $KEY (a discoverable credential, $CRED_ID)"
else cat "$W/seed.json" >> "$W/log"; bad "alice: latchkeyctl credentials add $KEY"; fi
code=$(api bob GET /v1/api/routes)
cp "$W/api.body" "$W/routes.json"
# the routes on one key, in the listing's order, except that what deletes comes last,
# the key itself at the very end (on a daemon that lets bob through, the rest still
# find what they ask for); GET of a credential asks for its private key
python3 -c 'import json, sys
routes = [(r["method"], r["path"]) for r in json.load(open(sys.argv[1])) if "{name}" in r["path"]]
def rank(route):
    method, path = route
    return (route == ("DELETE", "/v1/keys/{name}"), method == "DELETE" or path.endswith("/reset"))
for method, path in sorted(routes, key=rank):
    print(method, path + ("?privateKey=true" if (method, path) == ("GET", "/v1/keys/{name}/credentials/{id}") else ""))' \
    "$W/routes.json" > "$W/routes.txt" 2> "$W/log"
echo "GET /v1/events?key={name}" >> "$W/routes.txt"
if [ "$code" = 200 ] && [ "$(wc -l < "$W/routes.txt")" -gt 10 ]; then
    : > "$W/answers.txt"
    while read -r method path; do
        path=${path//\{name\}/$KEY}
        path=${path//\{id\}/${CRED_ID:-AAAA}}
        case "$method" in
            POST | PUT | PATCH) code=$(api bob "$method" "$path" '{}') ;;
            *) code=$(api bob "$method" "$path") ;;
        esac
        # status, method, path and the body on one line (a python per answer costs a
        # second under TCG: the bodies are read together below)
        printf '%s\t%s\t%s\t%s\n' "$code" "$method" "$path" "$(tr -d '\n\t' < "$W/api.body")" >> "$W/answers.txt"
    done < "$W/routes.txt"
    # "STATUS CODE METHOD PATH RULE" per route, CODE and RULE from the error document
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    status, method, path, body = line.rstrip("\n").split("\t", 3)
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    print(status, error.get("code") or "-", method, path, error.get("rule") or "")' "$W/answers.txt" > "$W/walk.txt"
    total=$(wc -l < "$W/walk.txt")
    REFUSED=$((REFUSED + $(grep -c '^403 forbidden ' "$W/walk.txt")))
    refused=$(grep -c '^403 forbidden ' "$W/walk.txt")
    if [ "$refused" = "$total" ]; then
        ok "bob: 403 forbidden on all $total routes on $KEY (GET /v1/api/routes' {name} routes and the event stream)"
    else
        grep -v '^403 forbidden ' "$W/walk.txt" > "$W/log"
        bad "bob: 403 forbidden on all $total routes on $KEY ($refused were; the others, as status code method path:)"
    fi
else
    bad "bob: GET /v1/api/routes lists the routes (HTTP $code)"
fi

# alice's event stream: one access.refused event per refusal the daemon saw (bob's
# USB/IP import, his approve, each route above), each naming bob
sleep 2
kill -TERM "$EVENTS_PID" 2> /dev/null
wait "$EVENTS_PID" 2> /dev/null
python3 - "$W/alice-events.sse" "$BOB" > "$W/events.txt" 2>&1 << 'EOF'
import json, sys
events = []
for block in open(sys.argv[1], errors="replace").read().split("\n\n"):
    fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
    if fields.get("event") == "access.refused":
        events.append(json.loads(fields.get("data", "{}")))
named = [e for e in events if sys.argv[2] in json.dumps(e)]
print(len(events), len(named))
for e in events[:60]:
    print(json.dumps(e, sort_keys=True)[:300])
EOF
read -r got named < "$W/events.txt"
want=$((REFUSED + IMPORT_REFUSED))
if [ "${got:-0}" = "$want" ] && [ "${named:-0}" = "$want" ] && [ "$want" -gt 0 ]; then
    ok "alice's event stream: $got access.refused events, one per refusal (bob's import, approve and routes), each naming bob's uid $BOB"
else
    tail -n +2 "$W/events.txt" > "$W/log"
    bad "alice's event stream: one access.refused event per refusal naming bob (want $want, got ${got:-none}, ${named:-0} naming uid $BOB)"
fi

# ---- the end ----------------------------------------------------------------------------
if [ -n "${BR[1]:-}" ]; then
    echo quit >&"${BR[1]}"
    for ((i = 0; i < 60; i++)); do kill -0 "$BROWSER_PID" 2> /dev/null || break; sleep 0.5; done
fi
note "alice's Chromium: $(tail -n 5 "$W/desktop-browser.err" | tr '\n' ' ' | cut -c 1-400)"
timeout 60 systemctl stop latchkeyd.service || note "systemctl stop latchkeyd failed"
if [ "$FAILED" != 0 ]; then
    note "the system unit's journal:"
    system_journal
fi
if [ -n "$ARTIFACTS" ] && mkdir -p "$ARTIFACTS/desktop"; then
    journalctl --no-pager -b -o short-monotonic > "$ARTIFACTS/desktop/journal.txt" 2>&1
    cp "$AW/chromium.log" "$W/desktop-browser.err" "$W/alice-events.sse" "$W/walk.txt" "$ARTIFACTS/desktop/" 2> /dev/null
    for u in alice bob; do
        cp "/home/$u/dunst-shown.log" "$ARTIFACTS/desktop/$u-dunst-shown.log" 2> /dev/null
        cp "/home/$u/dunst-menu.log" "$ARTIFACTS/desktop/$u-dunst-menu.log" 2> /dev/null
    done
    note "artifacts: $ARTIFACTS/desktop"
fi
note "guest time $(( $(date +%s) - T_ALL )) s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
