#!/usr/bin/env bash
# Runs Yubico's device suite (python-fido2 2.2.1's tests/device, written to qualify
# YubiKeys) against latchkeyd over USB/IP, through the project's pytest plugin
# (Tests/device-suite/latchkey_plugin.py). Fails on any failure, and on any skip that
# is not explained by a feature latchkey does not advertise.
#
#   scripts/device-suite.sh [pytest arguments]      # e.g. -k clientpin
#   LATCHKEYD=.build/debug/latchkeyd                 # the daemon (default: swift build's)
#   LATCHKEY_CACHE=~/.cache/latchkey-pip            # where the sdist is kept
#
# The sdist is downloaded once (pip download --no-binary :all:), checked against its
# SHA-256 and unpacked in the cache, outside the repository; fido2 2.2.1 itself is
# installed from it when the installed library is another version.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

version=2.2.1
sha256=85787428a94c3f8eaf72f0ff30afba983b559a1b1b795c93318c81b4ad4062c4
cache="${LATCHKEY_CACHE:-$HOME/.cache/latchkey-pip}"
sdist="$cache/fido2-$version.tar.gz"
suite="$cache/fido2-$version"

mkdir -p "$cache"
if [ ! -f "$sdist" ]; then
    python3 -m pip download -q --no-binary :all: --no-deps --cache-dir "$cache/pip" -d "$cache" "fido2==$version"
fi
if ! echo "$sha256  $sdist" | sha256sum -c --quiet -; then
    echo "device suite: $sdist does not have the expected SHA-256; delete it to download it again" >&2
    exit 1
fi
if [ ! -f "$suite/tests/device/conftest.py" ]; then
    rm -rf "$suite"
    tar -xzf "$sdist" -C "$cache"
fi
if [ "$(python3 -c 'import importlib.metadata as m; print(m.version("fido2"))' 2>/dev/null)" != "$version" ]; then
    python3 -m pip install -q --cache-dir "$cache/pip" "$sdist" 2>/dev/null ||
        python3 -m pip install -q --cache-dir "$cache/pip" --break-system-packages "$sdist"
fi

LATCHKEYD="$(realpath "${LATCHKEYD:-$(swift build --show-bin-path)/latchkeyd}")"
export LATCHKEYD
export PYTHONPATH="$repo/Tests/device-suite${PYTHONPATH:+:$PYTHONPATH}"
cd "$suite"
# -rs lists every skip with its reason; the plugin adds why each is expected.
exec python3 -m pytest -p latchkey_plugin -p no:cacheprovider -q -rs "$@" tests/device
