#!/bin/bash
# Runs INSIDE the rig guest, as root, with systemd as PID 1 (scripts/kernel-tests.sh's
# deb suite: Tests/rig/run.sh with RIG_INIT=systemd): the Debian package that
# scripts/package-deb.sh builds, installed and used as an administrator and a user would.
#
#   deb-checks.sh --deb FILE [--sealing tpm2|host] [--export TAR]
#   deb-checks.sh --deb FILE --copy-in TAR --copy-expect refused|opens
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
# The master key is sealed by default: postinst runs latchkeyd --master-key
# systemd-credential --seal-master-key, the unit loads /var/lib/latchkeyd/master-key.cred
# with LoadCredentialEncrypted=. Checked: no plaintext master-key anywhere, the journal's
# sealed-with= (--sealing: tpm2 with the rig's swtpm, RIG_TPM; host without a TPM), a
# deleted and a corrupted credential each stop the unit (243/CREDENTIALS) and make no new
# key, and a plaintext state directory of an older package is moved into the credential
# by the reinstall's postinst. --export TAR saves the state directory (tar, numeric
# owners) and the credential's files for the copy test: --copy-in TAR installs the
# package in a fresh VM, puts that state directory in place of its own and expects the
# unit to be refused (another swtpm state: systemd cannot decrypt the key, root cannot
# either, the store names no site) or to open it (the same swtpm state: the credential is
# listed and an assertion with it verifies).
#
# Prints one line per check, "ok N - name" or "not ok N - name", diagnostics as "# ..."
# lines, and last "N passed, M failed" alone on a line (like guest-checks.sh). Exit
# status 1 when a check failed. Every command started here has a time limit.
set -u
DEB= SEALING= EXPORT= COPY_IN= COPY_EXPECT=
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) DEB=$2; shift ;;
        --sealing) SEALING=$2; shift ;;
        --export) EXPORT=$2; shift ;;
        --copy-in) COPY_IN=$2; shift ;;
        --copy-expect) COPY_EXPECT=$2; shift ;;
        *) echo "deb-checks.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -f "$DEB" ] || { echo "deb-checks.sh: --deb FILE is required (scripts/package-deb.sh makes it)" >&2; exit 2; }
if [ -n "$COPY_IN" ]; then
    [ -f "$COPY_IN" ] || { echo "deb-checks.sh: --copy-in $COPY_IN: no such file" >&2; exit 2; }
    case "$COPY_EXPECT" in refused|opens) ;; *) echo "deb-checks.sh: --copy-expect refused|opens" >&2; exit 2 ;; esac
fi
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
# journal_since EPOCH: the unit's journal (systemd's lines and the daemon's) since then
journal_since() { journalctl -u latchkeyd.service --no-pager -o cat --since "@$1" 2>&1; }
# refused_start NAME: systemctl start does not make the unit active, systemd names the
# credential as the reason (243/CREDENTIALS), no plaintext master key appears; the unit is
# stopped again (Restart=on-failure would keep trying)
refused_start() {
    local t0 i
    t0=$(date +%s)
    sleep 1  # the journal's --since has a resolution of a second
    timeout 60 systemctl start latchkeyd.service > "$W/start.log" 2>&1
    for ((i = 0; i < 20; i++)); do active || break; sleep 0.5; done
    journal_since "$t0" > "$W/log"
    if ! active && grep -qiE 'credential' "$W/log" && [ ! -e "$STATE/master-key" ] \
        && [ "$(systemctl show -P ExecMainStatus latchkeyd.service)" = 243 ]; then
        ok "$1: not started, exit 243/CREDENTIALS, no plaintext master-key made"
        grep -iE 'credential|decrypt' "$W/log" | sort -u | head -n 4 | sed 's/^/#   journal: /'
    else
        bad "$1: not started (active: $(systemctl is-active latchkeyd.service)," \
            "status $(systemctl show -P ExecMainStatus latchkeyd.service), master-key: $(ls "$STATE/master-key" 2>&1))"
    fi
    timeout 60 systemctl stop latchkeyd.service > /dev/null 2>&1
    systemctl reset-failed latchkeyd.service > /dev/null 2>&1
}
# sealed_line EPOCH: the daemon's journal line about its master key, since EPOCH, names
# systemd-credential and, with --sealing, how the credential is sealed
sealed_line() {
    journal_since "$1" | grep 'master key loaded' | tail -n 1
}
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
# signs_in: the credential ($CRED_ID, $W/cred and $W/pub from fido2-cred) is listed, and
# an assertion with it on $NODE, approved by the user, verifies with its public key
signs_in() {
    [ -n "$CRED_ID" ] && has_credential "$CRED_ID" && [ -n "$NODE" ] && {
        head -c 32 /dev/urandom | base64 -w0; echo; echo "$RP"; sed -n 5p "$W/cred"
    } > "$W/aparam" && chmod 0644 "$W/aparam" \
        && approved fido2-assert -G -p -i "$W/aparam" -o "$W/assert" "$NODE" \
        && tail -n +2 "$W/pub" > "$W/pem" && fido2-assert -V -p -i "$W/assert" "$W/pem" es256 >> "$W/log" 2>&1
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

if [ -n "$COPY_IN" ]; then
    # ---- a state directory from another VM ----------------------------------------------
    note "systemd-creds has-tpm2: $(systemd-creds has-tpm2 2>&1 | tr '\n' ' ')"
    timeout 60 systemctl stop latchkeyd.service > /dev/null 2>&1
    rm -rf "$STATE" && tar -C "$(dirname "$STATE")" --numeric-owner -xpf "$COPY_IN" \
        && note "the copied state: $(ls -ln "$STATE" | tail -n +2 | awk '{ print $1, $3, $NF }' | tr '\n' ';')"
    expect "the copied state directory holds master-key.cred and no master-key" \
        bash -c '[ -s "$1/master-key.cred" ] && [ ! -e "$1/master-key" ]' _ "$STATE"
    if [ "$COPY_EXPECT" = refused ]; then
        refused_start "another TPM: systemctl start latchkeyd with the copied state"
        expect "another TPM: root cannot decrypt the copied credential either (systemd-creds decrypt)" \
            bash -c '! timeout 60 systemd-creds decrypt --name=master-key "$1/master-key.cred" - > /dev/null' _ "$STATE"
        note "systemd-creds decrypt: $(tr '\n' ' ' < "$W/log")"
        expect "another TPM: the copied stores name no site ($RP) and no account (deb-user)" \
            bash -c '! grep -rqaE "$2|deb-user" "$1/keys"' _ "$STATE" "$RP"
    else
        useradd -m -G latchkey "$USER_NAME"
        chown "$USER_NAME" "$W"
        t=$(date +%s)
        if timeout 120 systemctl start latchkeyd.service > "$W/log" 2>&1 && active \
            && sealed_line "$t" | grep -q "sealed-with=${SEALING:-}"; then
            ok "the same TPM: systemctl start latchkeyd with the copied state: active ($(( $(date +%s) - t )) s)"
            note "$(sealed_line "$t")"
        else
            bad "the same TPM: systemctl start latchkeyd with the copied state: active"
            journal
        fi
        tar -C "$W" -xf "$(dirname "$COPY_IN")/client.tar" || note "no client.tar beside $COPY_IN"
        CRED_ID=$(sed -n 5p "$W/cred" 2>/dev/null | b64url)
        NODE=$(hidraw_node) || NODE=
        udevadm settle --timeout=30
        if signs_in; then
            ok "the same TPM: $USER_NAME's credential is listed, and an assertion with it verifies"
        else
            bad "the same TPM: the credential is listed, and an assertion with it verifies (id ${CRED_ID:-none}, node ${NODE:-none})"
        fi
        timeout 60 systemctl stop latchkeyd.service > /dev/null 2>&1
    fi
    [ "$FAILED" != 0 ] && journal
    note "guest time $(( $(date +%s) - T_ALL )) s"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" = 0 ]
    exit
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

if [ "$SEALING" = tpm2 ]; then
    expect "systemd-creds has-tpm2: yes (the VM's swtpm, found through UEFI's TPM2 table)" \
        bash -c 'systemd-creds has-tpm2 | tee /dev/stderr | head -n 1 | grep -qx yes'
else
    note "systemd-creds has-tpm2: $(systemd-creds has-tpm2 2>&1 | tr '\n' ' ')"
fi
expect "postinst sealed the master key: $STATE/master-key.cred (latchkey's, 600), no plaintext master-key" \
    bash -c 'ls -la "$1"; [ "$(stat -c "%U %a" "$1/master-key.cred")" = "latchkey 600" ] && [ ! -e "$1/master-key" ] \
        && [ "$(stat -c "%U %a" "$1")" = "latchkey 700" ]' _ "$STATE"

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
line=$(sealed_line "$t")
if grep -q 'source=systemd-credential' <<< "$line" && grep -q "sealed-with=${SEALING:-[a-z]}" <<< "$line" \
    && [ ! -e "$STATE/master-key" ]; then
    ok "the journal: the master key came from the sealed credential, sealed-with=$(sed -n 's/.*sealed-with=\([^ ]*\).*/\1/p' <<< "$line")"
    note "$line"
else
    bad "the journal: the master key came from the sealed credential${SEALING:+, sealed-with=$SEALING} (line: ${line:-none})"
    journal
fi
# nothing by the side: no core file (LimitCORE=0, RLIMIT_CORE 0) and not dumpable
# (PR_SET_DUMPABLE 0: the kernel gives the process's /proc files to root, not to latchkey)
PID=$(systemctl show -P MainPID latchkeyd.service)
expect "the running daemon (pid $PID): core file size 0, not dumpable (/proc/$PID/environ is root's)" \
    bash -c 'grep -E "^Max core file size +0 +0 " "/proc/$1/limits" && [ "$(stat -c %U "/proc/$1/environ")" = root ] \
        && [ "$(ps -o user= -p "$1" | tr -d " ")" = latchkey ]' _ "$PID"
score=$(systemd-analyze security latchkeyd.service 2>&1 | tail -n 1)
if grep -qE 'Overall exposure level for latchkeyd.service: [0-9.]+ (OK|SAFE)' <<< "$score"; then
    ok "systemd-analyze security latchkeyd.service, the running unit: ${score#*: }"
else
    bad "systemd-analyze security latchkeyd.service in the OK band (${score:-no answer})"
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
if signs_in; then
    ok "after the restart: the credential is listed, and an assertion with it verifies"
else
    bad "after the restart: the credential is listed, and an assertion with it verifies (id ${CRED_ID:-none})"
fi

# ---- fail closed: a deleted and a corrupted credential ---------------------------------
timeout 60 systemctl stop latchkeyd.service > /dev/null 2>&1
cp -p "$STATE/master-key.cred" "$W/master-key.cred.saved"
rm -f "$STATE/master-key.cred"
refused_start "master-key.cred deleted"
# one base64 character in the middle changed: the file still parses, the sealed data is wrong
python3 -c 'import sys
p, q = sys.argv[1], sys.argv[2]
b = bytearray(open(p, "rb").read())
i = len(b) // 2
while chr(b[i]) not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz": i += 1
b[i] = ord("A") if b[i] != ord("A") else ord("B")
open(q, "wb").write(b)' "$W/master-key.cred.saved" "$STATE/master-key.cred" && chown latchkey:latchkey "$STATE/master-key.cred"
refused_start "master-key.cred corrupted (one character changed)"
cp -p "$W/master-key.cred.saved" "$STATE/master-key.cred"
t=$(date +%s)
if timeout 120 systemctl start latchkeyd.service > "$W/log" 2>&1 && active && [ -n "$CRED_ID" ] && has_credential "$CRED_ID"; then
    ok "the credential file put back: active again, the credential is there ($(( $(date +%s) - t )) s)"
else
    bad "the credential file put back: active again, the credential is there"
    journal
fi
NODE=$(hidraw_node) || NODE=

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
    bash -c 'ls -la "$1" && [ -s "$1/master-key.cred" ] && [ ! -e "$1/master-key" ] && [ -f /etc/latchkeyd/latchkeyd.toml ] \
        && [ -L /etc/systemd/system/multi-user.target.wants/latchkeyd.service ]' _ "$STATE"

# the state directory of a package before the sealed default: the key in plaintext
# (decrypted here as root, as that package kept it), no credential file
(umask 077 && timeout 60 systemd-creds decrypt --name=master-key "$STATE/master-key.cred" - > "$STATE/master-key") \
    && chown latchkey:latchkey "$STATE/master-key" && rm -f "$STATE/master-key.cred" \
    || note "could not make the plaintext state directory"
t=$(date +%s)
if timeout 300 apt install -y --no-install-recommends "$PKG" > "$W/log" 2>&1 \
    && grep -q 'sealed: the master key moved' "$W/log" && [ -s "$STATE/master-key.cred" ] && [ ! -e "$STATE/master-key" ] \
    && timeout 120 systemctl start latchkeyd.service >> "$W/log" 2>&1 && [ -n "$CRED_ID" ] && has_credential "$CRED_ID" \
    && sealed_line "$t" | grep -q 'source=systemd-credential'; then
    ok "apt install over a plaintext master-key (an older package's state): postinst moved it into master-key.cred," \
        "removed the file; the credential is still there"
    grep 'sealed:' "$W/log" | sed 's/^/#   postinst: /'
else
    bad "apt install over a plaintext master-key: postinst moved it into master-key.cred, the credential is still there"
    journal
fi
if [ -n "$EXPORT" ]; then
    # the state directory as a stolen disk has it (the daemon stopped, as at power-off),
    # and the client's side of the credential (its id, the public key) for the copy test
    timeout 60 systemctl stop latchkeyd.service > /dev/null 2>&1
    if tar -C "$(dirname "$STATE")" --numeric-owner -cpf "$EXPORT" "$(basename "$STATE")" \
        && tar -C "$W" -cf "$(dirname "$EXPORT")/client.tar" cred pub; then
        note "exported $STATE to $EXPORT: $(tar -tvf "$EXPORT" | awk '{ print $2, $6 }' | tr '\n' ';')"
    else
        bad "export the state directory to $EXPORT"
    fi
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
