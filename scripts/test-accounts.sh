#!/usr/bin/env bash
# Creates the unprivileged accounts the tests run latchkeyd and its clients as
# (Tests/e2e/identities.py): lk-owner runs the daemon and owns the keys the
# tests make, lk-other is a second member of the same group, the account that
# must be refused; their group is lk-test. System accounts without a home or a
# login shell; running it again changes nothing. Needs root.
#
#   scripts/test-accounts.sh          # create them if missing
#   scripts/test-accounts.sh --check  # exit 0 when they exist
set -euo pipefail
OWNER=${LATCHKEY_TEST_OWNER:-lk-owner}
OTHER=${LATCHKEY_TEST_OTHER:-lk-other}
GROUP=${LATCHKEY_TEST_GROUP:-lk-test}

exists() { getent passwd "$OWNER" >/dev/null && getent passwd "$OTHER" >/dev/null && getent group "$GROUP" >/dev/null; }

if [ "${1:-}" = --check ]; then exists; exit; fi
if exists; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
    echo "test-accounts.sh: creating $OWNER and $OTHER needs root" >&2
    exit 1
fi
getent group "$GROUP" >/dev/null || groupadd --system "$GROUP"
for name in "$OWNER" "$OTHER"; do
    getent passwd "$name" >/dev/null ||
        useradd --system --gid "$GROUP" --no-create-home --home-dir / --shell /usr/sbin/nologin "$name"
done
echo "test accounts: $OWNER and $OTHER in group $GROUP"
