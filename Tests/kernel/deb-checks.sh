#!/bin/bash
# Runs INSIDE the rig guest, as root, with systemd as PID 1 (scripts/kernel-tests.sh's
# deb suite: Tests/rig/run.sh with RIG_INIT=systemd): the Debian package that
# scripts/package-deb.sh builds, installed and used as an administrator and a user would.
#
#   deb-checks.sh --deb FILE
#
# apt install ./latchkey_*.deb (offline: the image has the package's dependencies);
# systemctl enable --now latchkeyd reaches active (Type=notify) with no key of its own
# (the packaged configuration's default-key = false); a user in the latchkey group makes
# a key with latchkeyctl, whose hidraw node is then the user's alone (owner, mode 600:
# udev/70-latchkey.rules and latchkeyctl udev-owner), runs fido2-token -L and
# fido2-cred -M -r, approving its presence request with latchkeyctl approve (the packaged
# configuration asks for approval); systemctl restart keeps the key and the credential
# (an assertion with it verifies); systemctl stop removes the device; apt
# remove stops the daemon, gives /dev/uhid back to root and keeps the state (a
# reinstall finds the credential); apt purge removes the state and the configuration.
#
# Prints one line per check, "ok N - name" or "not ok N - name", diagnostics as "# ..."
# lines, and last "N passed, M failed" alone on a line (like guest-checks.sh). Exit
# status 1 when a check failed. Every command started here has a time limit.
set -u
DEB=
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) DEB=$2; shift ;;
        *) echo "deb-checks.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -f "$DEB" ] || { echo "deb-checks.sh: --deb FILE is required (scripts/package-deb.sh makes it)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive
W=$(mktemp -d /tmp/lk-deb.XXXXXX)
USER_NAME=alice
KEY=alice-key
RP=deb.latchkey.test
STATE=/var/lib/latchkeyd
N=0 PASSED=0 FAILED=0
T_ALL=$(date +%s)

note() { printf '# %s\n' "$*"; }
# ok|bad NAME: one result line; bad also shows what $W/log holds
ok() { N=$((N + 1)) PASSED=$((PASSED + 1)); echo "ok $N - $*"; }
bad() {
    N=$((N + 1)) FAILED=$((FAILED + 1))
    echo "not ok $N - $*"
    [ -s "$W/log" ] && tail -n 40 "$W/log" | sed 's/^/#   /'
}
# expect NAME CMD...: a check from CMD's exit status, its output in $W/log
expect() {
    local name=$1
    shift
    if "$@" > "$W/log" 2>&1; then ok "$name"; else bad "$name (exit $?)"; fi
}
# as_user CMD...: CMD as the test user, with the groups /etc/group gives it
as_user() { runuser -u "$USER_NAME" -- "$@"; }
journal() { journalctl -u latchkeyd.service --no-pager -n 40 -o cat 2>&1 | sed 's/^/#   journal: /'; }
status_json() { as_user timeout 20 latchkeyctl --json status > "$W/status.json" 2> "$W/status.err"; }
json() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2], {}, {"d": d})
print("" if v is None else v)' "$1" "$2"
}
# hidraw_node: the user's key's node, as the control API reports it to its owner (waits up to 30 s)
hidraw_node() {
    local i node
    for ((i = 0; i < 60; i++)); do
        if status_json; then
            node=$(json "$W/status.json" '[k["uhid"].get("hidraw") for k in d["keys"] if k["name"] == "'"$KEY"'"][0] if any(k["name"] == "'"$KEY"'" for k in d["keys"]) else ""')
            [ -n "$node" ] && [ -c "$node" ] && { echo "$node"; return 0; }
        fi
        sleep 0.5
    done
    return 1
}
# approved CMD...: CMD as the user while the user approves the presence request it makes
approved() {
    local pid rc
    as_user timeout 120 "$@" > "$W/log" 2>&1 &
    pid=$!
    as_user timeout 90 latchkeyctl approve --wait 60 > "$W/approve.log" 2>&1
    wait "$pid"
    rc=$?
    cat "$W/approve.log" >> "$W/log"
    return "$rc"
}
has_credential() {  # ID: the credential list of the user's key has it (the owner asks)
    as_user timeout 20 latchkeyctl --json credentials list --key "$KEY" > "$W/creds.json" 2> "$W/log" \
        && grep -q "\"$1\"" "$W/creds.json"
}
# b64url: base64 (fido2-cred's) as the control API spells credential ids
b64url() { tr '+/' '-_' | tr -d '=\n'; }
active() { [ "$(systemctl is-active latchkeyd.service)" = active ]; }
gone() {  # PATH: it disappears within 15 s
    local i
    for ((i = 0; i < 30; i++)); do [ -e "$1" ] || return 0; sleep 0.5; done
    return 1
}

note "kernel $(uname -r); $(systemctl --version | head -n 1); package $(dpkg-deb -f "$DEB" Package Version | tr '\n' ' ')"
for m in uhid hid_generic; do [ -d /sys/module/$m ] || note "module $m is not loaded"; done
cp "$DEB" "$W/" && chmod 0755 "$W" && chmod 0644 "$W"/*.deb
PKG=$W/$(basename "$DEB")
VERSION=$(dpkg-deb -f "$PKG" Version)

# ---- install --------------------------------------------------------------------------
t=$(date +%s)
if timeout 300 apt install -y --no-install-recommends "$PKG" > "$W/log" 2>&1 \
    && [ "$(dpkg-query -W -f '${Status}' latchkey 2>/dev/null)" = "install ok installed" ]; then
    ok "apt install ./$(basename "$PKG") (offline, $(( $(date +%s) - t )) s)"
else
    bad "apt install ./$(basename "$PKG") (offline)"
fi
expect "latchkeyd --version and latchkeyctl --version say $VERSION" \
    bash -c '[ "$(latchkeyd --version)" = "$1" ] && [ "$(latchkeyctl --version)" = "$1" ]' _ "$VERSION"
# (the manual pages are in the package, but the rig's image keeps dpkg from installing any)
expect "latchkey-webdriver is installed: --help runs, its manual page is in the package" \
    bash -c 'latchkey-webdriver --help > /dev/null && dpkg -L latchkey | grep -qx /usr/share/man/man1/latchkey-webdriver.1.gz'
expect "postinst made the latchkey user and group (systemd-sysusers)" \
    bash -c 'getent passwd latchkey && getent group latchkey'
expect "the service is installed, neither enabled nor started" \
    bash -c '[ "$(systemctl is-enabled latchkeyd.service)" = disabled ] && ! systemctl is-active latchkeyd.service'
# /dev/uhid existed before the package (rig-init loads uhid): postinst's udev trigger applies the rule
expect "/dev/uhid: owner latchkey, mode 600 (the udev rule, applied by postinst)" \
    bash -c '[ "$(stat -c "%U %a" /dev/uhid)" = "latchkey 600" ] || { stat /dev/uhid; false; }'

# ---- the service ----------------------------------------------------------------------
t=$(date +%s)
if timeout 120 systemctl enable --now latchkeyd.service > "$W/log" 2>&1 && active; then
    ok "systemctl enable --now latchkeyd: active ($(systemctl show -P Type latchkeyd.service)," \
        "$(( $(date +%s) - t )) s)"
else
    bad "systemctl enable --now latchkeyd: active"
    systemctl status --no-pager latchkeyd.service 2>&1 | sed 's/^/#   /'
    journal
fi
useradd -m -G latchkey "$USER_NAME"
chown "$USER_NAME" "$W"
expect "$USER_NAME (group latchkey): latchkeyctl status, no key yet" \
    bash -c 'runuser -u "$1" -- timeout 20 latchkeyctl status | tee /dev/stderr | grep -q "^latchkeyd $2, "' \
    _ "$USER_NAME" "$VERSION"
expect "$USER_NAME: latchkeyctl keys create $KEY, owned by $USER_NAME" \
    bash -c 'runuser -u "$1" -- timeout 30 latchkeyctl --json keys create "$2" | tee /dev/stderr \
        | python3 -c "import json, sys; d = json.load(sys.stdin); sys.exit(d[\"owner\"][\"name\"] != sys.argv[1])" "$1"' \
    _ "$USER_NAME" "$KEY"
NODE=$(hidraw_node) || NODE=
udevadm settle --timeout=30  # the owner and mode come with udevd's event, not the node
if [ -n "$NODE" ] && [ "$(stat -c '%U %G %a' "$NODE")" = "$USER_NAME root 600" ]; then
    ok "hidraw node $NODE: $USER_NAME's alone, mode 600 (udev/70-latchkey.rules, latchkeyctl udev-owner)"
else
    bad "a hidraw node of $USER_NAME's, mode 600 (node: ${NODE:-none}, $(stat -c '%U:%G %a' "$NODE" 2>&1))"
    cat "$W/status.json" "$W/status.err" 2>/dev/null | sed 's/^/#   /'
fi
expect "$USER_NAME: fido2-token -L lists ${NODE:-the node}" \
    bash -c 'runuser -u "$1" -- timeout 30 fido2-token -L | tee /dev/stderr | grep -q "^$2: vendor=0x1209, product=0x0001"' \
    _ "$USER_NAME" "$NODE"

# a discoverable credential, the presence request approved by the user through latchkeyctl
printf '%s\n%s\n%s\n%s\n' "$(head -c 32 /dev/urandom | base64 -w0)" "$RP" "deb-user" \
    "$(head -c 16 /dev/urandom | base64 -w0)" > "$W/param"
chmod 0644 "$W/param"
CRED_ID=
if [ -n "$NODE" ] && approved fido2-cred -M -q -r -i "$W/param" -o "$W/cred" "$NODE" es256 \
    && fido2-cred -V -i "$W/cred" -o "$W/pub" es256 >> "$W/log" 2>&1; then
    CRED_ID=$(sed -n 5p "$W/cred" | b64url)
    ok "$USER_NAME: fido2-cred -M -r, approved with latchkeyctl approve: a credential for $RP"
else
    bad "$USER_NAME: fido2-cred -M -r, approved with latchkeyctl approve"
fi

# ---- restart, stop --------------------------------------------------------------------
PID=$(systemctl show -P MainPID latchkeyd.service)
t=$(date +%s)
if timeout 120 systemctl restart latchkeyd.service > "$W/log" 2>&1 && active \
    && [ "$(systemctl show -P MainPID latchkeyd.service)" != "$PID" ]; then
    ok "systemctl restart latchkeyd: active again, a new process ($(( $(date +%s) - t )) s)"
else
    bad "systemctl restart latchkeyd: active again"
    journal
fi
NODE=$(hidraw_node) || NODE=
if [ -n "$CRED_ID" ] && has_credential "$CRED_ID" && [ -n "$NODE" ] && {
        head -c 32 /dev/urandom | base64 -w0; echo; echo "$RP"; sed -n 5p "$W/cred"
    } > "$W/aparam" && chmod 0644 "$W/aparam" \
    && approved fido2-assert -G -p -i "$W/aparam" -o "$W/assert" "$NODE" \
    && tail -n +2 "$W/pub" > "$W/pem" && fido2-assert -V -p -i "$W/assert" "$W/pem" es256 >> "$W/log" 2>&1; then
    ok "after the restart: the credential is listed, and an assertion with it verifies"
else
    bad "after the restart: the credential is listed, and an assertion with it verifies (id ${CRED_ID:-none})"
fi

if timeout 60 systemctl stop latchkeyd.service > "$W/log" 2>&1 && ! active && [ -n "$NODE" ] && gone "$NODE"; then
    ok "systemctl stop latchkeyd: inactive, $NODE is gone"
else
    bad "systemctl stop latchkeyd: inactive, the hidraw node ${NODE:-(none)} is gone"
fi

# ---- remove, reinstall, purge ---------------------------------------------------------
timeout 120 systemctl start latchkeyd.service > "$W/log" 2>&1 || note "systemctl start failed: $(cat "$W/log")"
NODE=$(hidraw_node) || NODE=
t=$(date +%s)
if timeout 300 apt remove -y latchkey > "$W/log" 2>&1 \
    && [ "$(dpkg-query -W -f '${Status}' latchkey)" = "deinstall ok config-files" ] && [ ! -e /usr/bin/latchkeyd ]; then
    ok "apt remove latchkey: config-files left, /usr/bin/latchkeyd gone ($(( $(date +%s) - t )) s)"
else
    bad "apt remove latchkey: config-files left, /usr/bin/latchkeyd gone"
fi
expect "apt remove: prerm stopped the daemon, ${NODE:-the node} is gone" \
    bash -c '! systemctl is-active latchkeyd.service && [ -n "$1" ] && [ ! -e "$1" ]' _ "$NODE"
expect "apt remove: /dev/uhid is root's again, mode 600 (postrm)" \
    bash -c '[ "$(stat -c "%U %a" /dev/uhid)" = "root 600" ] || { stat /dev/uhid; false; }'
expect "apt remove: $STATE, /etc/latchkeyd/latchkeyd.toml and the enablement stay" \
    bash -c 'ls -la "$1" && [ -s "$1/master-key" ] && [ -f /etc/latchkeyd/latchkeyd.toml ] \
        && [ -L /etc/systemd/system/multi-user.target.wants/latchkeyd.service ]' _ "$STATE"

if timeout 300 apt install -y --no-install-recommends "$PKG" > "$W/log" 2>&1 \
    && timeout 120 systemctl start latchkeyd.service >> "$W/log" 2>&1 && [ -n "$CRED_ID" ] && has_credential "$CRED_ID"; then
    ok "apt install again, systemctl start: the credential is still there"
else
    bad "apt install again, systemctl start: the credential is still there"
    journal
fi

t=$(date +%s)
# dpkg forgets a purged package, or says "unknown ok not-installed"
if timeout 300 apt purge -y latchkey > "$W/log" 2>&1 && ! dpkg-query -W -f '${Status}' latchkey 2>/dev/null \
    | grep -qE 'ok (installed|config-files)$'; then
    ok "apt purge latchkey ($(( $(date +%s) - t )) s)"
else
    bad "apt purge latchkey (status: $(dpkg-query -W -f '${Status}' latchkey 2>&1))"
fi
expect "apt purge: $STATE, /etc/latchkeyd and the enablement are gone; the daemon is not running" \
    bash -c '[ ! -e "$1" ] && [ ! -e /etc/latchkeyd ] && [ ! -e /etc/systemd/system/multi-user.target.wants/latchkeyd.service ] \
        && ! pgrep -x latchkeyd' _ "$STATE"
note "after purge: the latchkey user $(getent passwd latchkey > /dev/null && echo stays || echo is gone)"

if [ "$FAILED" != 0 ]; then
    journal
fi
note "guest time $(( $(date +%s) - T_ALL )) s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
