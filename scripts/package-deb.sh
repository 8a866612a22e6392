#!/usr/bin/env bash
# package-deb.sh: the Debian package of latchkey, latchkey_VERSION_amd64.deb.
#
#   scripts/package-deb.sh                  # build (release, static Swift runtime) and package
#   scripts/package-deb.sh --bin-dir DIR    # a test package of the binaries in DIR as they are
#                                           # (scripts/test.sh's debug build, whose Swift runtime
#                                           # the VM rig shares at its path): no release build,
#                                           # Depends is the release package's list
#   LATCHKEY_DEB_BUILD_PATH=DIR ...         # swift build's scratch path (default .build-deb)
#   LATCHKEY_DEB_OUT=DIR ...                # where the .deb goes (default $LATCHKEY_DEB_BUILD_PATH/deb)
#   LATCHKEY_DEB_MAINTAINER="Name <mail>"   # the Maintainer field (default: git's user)
#
# Prints the path of the .deb on its last line. Needs dpkg-deb and dpkg-shlibdeps
# (dpkg-dev), binutils and Swift 6.3; no debhelper, no root. On the shared 2-core
# machine (load 8-13) the first release build took 28 min; with it done, 17-25 s.
# The package: 49 MB, 132 MiB installed (each binary carries Foundation's ICU data).
#
# What goes in (the paths Debian bookworm's own packages use):
#   /usr/bin/latchkeyd, /usr/bin/latchkeyctl,  swift build -c release --static-swift-stdlib,
#   /usr/bin/latchkey-webdriver                stripped; they link only Debian's libraries
#   /lib/systemd/system/latchkeyd.service      systemd/latchkeyd.service, ExecStart in /usr/bin
#   /usr/lib/systemd/user/latchkeyd.service    systemd/latchkeyd-user.service, likewise
#   /usr/lib/systemd/user/latchkey-agent.service  systemd/latchkey-agent.service (the prompt agent), likewise
#   /lib/udev/rules.d/70-latchkey.rules        udev/70-latchkey.rules (its helper: /usr/bin/latchkeyctl
#                                              udev-owner, which the package installs there)
#   /usr/lib/sysusers.d/latchkey.conf          packaging/sysusers-latchkey.conf
#   /etc/latchkeyd/latchkeyd.toml              packaging/latchkeyd.toml, a conffile
#   /usr/share/man/man1/latchkey{d,ctl,-webdriver}.1.gz   swift-argument-parser's generate-manual
#   bash, zsh and fish completions             latchkey{d,ctl,-webdriver} --generate-completion-script
#   DEBIAN/{postinst,prerm,postrm}             packaging/deb/ (they never enable the service)
# Version: LatchkeyVersion.string (Sources/LatchkeyContract/Version.swift), as the built
# latchkeyd --version reports it. Depends: dpkg-shlibdeps on the binaries (libc6,
# libstdc++6 and libgcc-s1, which the static Swift runtime links; libssl3,
# libsqlite3-0, libudev1, zlib1g; anything else is an error: a Swift runtime library
# there would mean the static runtime did not take), and systemd-sysusers.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd -P)
T0=$(date +%s)
log() { printf '==> [package-deb %ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { echo "package-deb: $*" >&2; exit 1; }

# The programs the package installs in /usr/bin, each with its manual page and completions.
TOOLS=(latchkeyd latchkeyctl latchkey-webdriver)
SCRATCH=${LATCHKEY_DEB_BUILD_PATH:-.build-deb}
OUT=${LATCHKEY_DEB_OUT:-$SCRATCH/deb}
ARCH=amd64
[ "$(uname -m)" = x86_64 ] || die "builds $ARCH packages only, on x86_64"
for tool in dpkg-deb dpkg-shlibdeps objdump strip; do
    command -v "$tool" > /dev/null || die "$tool is missing (apt-get install dpkg-dev binutils)"
done

# ---- 1. the binaries ------------------------------------------------------------------
# generate-manual is swift-argument-parser's tool behind its generate-manual plugin; the
# plugin itself would build every product again without --static-swift-stdlib
TEST_BIN=
[ "${1:-}" = --bin-dir ] && { TEST_BIN=$(cd "${2:?--bin-dir DIR}" && pwd -P) || die "no directory ${2:-}"; }
if [ -n "$TEST_BIN" ]; then
    # the tool comes from the scratch path that holds DIR (its configuration, so nothing
    # else is built again)
    BIN=$TEST_BIN
    if [ ! -x "$BIN/generate-manual" ]; then
        tool_scratch=$(dirname "$(dirname "$BIN")")
        [ -d "$tool_scratch/checkouts" ] || tool_scratch=$(dirname "$BIN")
        log "swift build --scratch-path $tool_scratch --product generate-manual"
        swift build --scratch-path "$tool_scratch" --product generate-manual 2>&1 | grep -vE '^warning: |^    /' >&2
        [ "${PIPESTATUS[0]}" = 0 ] || die "swift build of generate-manual failed"
    fi
    for tool in "${TOOLS[@]}"; do [ -x "$BIN/$tool" ] || die "$BIN has no $tool"; done
else
    BUILD=(swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH")
    for product in "${TOOLS[@]}" generate-manual; do
        log "${BUILD[*]} --product $product"
        "${BUILD[@]}" --product "$product" 2>&1 | grep -vE '^warning: |^    /' >&2
        [ "${PIPESTATUS[0]}" = 0 ] || die "swift build of $product failed"
    done
    BIN=$("${BUILD[@]}" --show-bin-path)
fi

VERSION=$("$BIN/latchkeyd" --version)
SOURCE_VERSION=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/LatchkeyContract/Version.swift)
[ "$VERSION" = "$SOURCE_VERSION" ] || die "latchkeyd --version says '$VERSION', Version.swift '$SOURCE_VERSION'"
[ "$("$BIN/latchkeyctl" --version)" = "$VERSION" ] || die "latchkeyctl --version is not $VERSION"
# the date in the manual pages, and the files' mtimes: the last commit's, so that a
# rebuild of one commit makes the same package
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
DATE=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)

# ---- 2. the tree ----------------------------------------------------------------------
STAGE=$SCRATCH/deb-root
rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN"
for tool in "${TOOLS[@]}"; do
    install -D -m 0755 "$BIN/$tool" "$STAGE/usr/bin/$tool"
    strip --strip-unneeded "$STAGE/usr/bin/$tool"
done
# the units name /usr/local/bin (make install's PREFIX); the package installs to /usr/bin
unit() { sed 's|/usr/local/bin/|/usr/bin/|g' "$1" > "$2" && chmod 0644 "$2"; }
mkdir -p "$STAGE/lib/systemd/system" "$STAGE/usr/lib/systemd/user"
unit systemd/latchkeyd.service "$STAGE/lib/systemd/system/latchkeyd.service"
unit systemd/latchkeyd-user.service "$STAGE/usr/lib/systemd/user/latchkeyd.service"
unit systemd/latchkey-agent.service "$STAGE/usr/lib/systemd/user/latchkey-agent.service"
grep -q '^ExecStart=/usr/bin/latchkeyd ' "$STAGE/lib/systemd/system/latchkeyd.service" \
    || die "the unit's ExecStart is not /usr/bin/latchkeyd"
install -D -m 0644 udev/70-latchkey.rules "$STAGE/lib/udev/rules.d/70-latchkey.rules"
grep -q 'IMPORT{program}="/usr/bin/latchkeyctl udev-owner %p"' "$STAGE/lib/udev/rules.d/70-latchkey.rules" \
    || die "the udev rule does not run /usr/bin/latchkeyctl udev-owner"
install -D -m 0644 packaging/sysusers-latchkey.conf "$STAGE/usr/lib/sysusers.d/latchkey.conf"
install -D -m 0644 packaging/latchkeyd.toml "$STAGE/etc/latchkeyd/latchkeyd.toml"
echo /etc/latchkeyd/latchkeyd.toml > "$STAGE/DEBIAN/conffiles"

log "manual pages and shell completions"
mkdir -p "$STAGE/usr/share/man/man1" "$STAGE/usr/share/bash-completion/completions" \
    "$STAGE/usr/share/zsh/vendor-completions" "$STAGE/usr/share/fish/vendor_completions.d"
for tool in "${TOOLS[@]}"; do
    "$BIN/generate-manual" "$BIN/$tool" --date "$DATE" --output-directory "$STAGE/usr/share/man/man1" \
        || die "generate-manual $tool failed"
    gzip -9n "$STAGE/usr/share/man/man1/$tool.1"
    "$BIN/$tool" --generate-completion-script bash > "$STAGE/usr/share/bash-completion/completions/$tool"
    "$BIN/$tool" --generate-completion-script zsh > "$STAGE/usr/share/zsh/vendor-completions/_$tool"
    "$BIN/$tool" --generate-completion-script fish > "$STAGE/usr/share/fish/vendor_completions.d/$tool.fish"
done

install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$STAGE/DEBIAN/"

# ---- 3. Depends: what the binaries link, as Debian names it ---------------------------
RELEASE_DEPENDS="libc6 (>= 2.35), libgcc-s1, libsqlite3-0, libssl3, libstdc++6 (>= 12), libsystemd0, libudev1, zlib1g"
if [ -n "$TEST_BIN" ]; then
    # the test build links the toolchain's Swift runtime, which no Debian package has
    LIB_DEPENDS=$RELEASE_DEPENDS
    log "a test package of $TEST_BIN: Depends is the release package's list"
else
    SHLIBS=$(mktemp -d)
    trap 'rm -rf "$SHLIBS"' EXIT
    mkdir -p "$SHLIBS/debian"
    printf 'Source: latchkey\n\nPackage: latchkey\nArchitecture: %s\n' "$ARCH" > "$SHLIBS/debian/control"
    (cd "$SHLIBS" && dpkg-shlibdeps -O "${TOOLS[@]/#/-e$REPO/$STAGE/usr/bin/}") \
        > "$SHLIBS/out" 2> "$SHLIBS/err" || { cat "$SHLIBS/err" >&2; die "dpkg-shlibdeps failed"; }
    LIB_DEPENDS=$(sed -n 's/^shlibs:Depends=//p' "$SHLIBS/out")
    unexpected=$(tr ',' '\n' <<< "$LIB_DEPENDS" | awk '{ print $1 }' \
        | grep -vxE 'libc6|libstdc\+\+6|libgcc-s1|libssl3|libsqlite3-0|libsystemd0|libudev1|zlib1g' || true)
    if [ -n "$unexpected" ]; then
        objdump -p "${TOOLS[@]/#/$STAGE/usr/bin/}" | grep NEEDED >&2
        die "the binaries need packages beyond Debian's libc6 libstdc++6 libgcc-s1 libssl3 libsqlite3-0" \
            "libsystemd0 libudev1 zlib1g:" \
            "$(tr '\n' ' ' <<< "$unexpected")"
    fi
    log "the binaries link: $(objdump -p "${TOOLS[@]/#/$STAGE/usr/bin/}" \
        | awk '$1 == "NEEDED" { print $2 }' | sort -u | tr '\n' ' ')"
fi

MAINTAINER=${LATCHKEY_DEB_MAINTAINER:-$(git config user.name 2>/dev/null) <$(git config user.email 2>/dev/null)>}
[ "$MAINTAINER" != " <>" ] || MAINTAINER="latchkey maintainers <latchkey@localhost>"
cat > "$STAGE/DEBIAN/control" << EOF
Package: latchkey
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$STAGE" | cut -f 1)
Depends: $LIB_DEPENDS, systemd | systemd-standalone-sysusers | systemd-sysusers
Section: utils
Priority: optional
Description: virtual FIDO2 security key
 latchkeyd presents virtual FIDO2/CTAP2 security keys to this machine's kernel
 through /dev/uhid, as USB HID devices that browsers, libfido2 and python-fido2
 use like hardware keys, or exports them over USB/IP. latchkeyctl drives it:
 keys, credentials, PINs, and approving or denying user-presence requests.
 .
 The service is not enabled on installation: systemctl enable --now latchkeyd.
 Each key belongs to one account: its hidraw node is that account's alone.
EOF
(cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    > "$STAGE/DEBIAN/md5sums"
find "$STAGE" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# ---- 4. the package -------------------------------------------------------------------
mkdir -p "$OUT"
DEB=$OUT/latchkey_${VERSION}_$ARCH.deb
log "dpkg-deb --build $DEB"
# zstd: xz took 150 s on a busy 2-core machine, zstd 2 s (51 MB instead of 33 MB). Every
# dpkg that can meet the Depends (glibc 2.35: bookworm, jammy and later) reads zstd.
dpkg-deb --root-owner-group -Zzstd --build "$STAGE" "$DEB" > /dev/null
log "done: $(du -h "$DEB" | cut -f 1) ($(sed -n 's/^Installed-Size: //p' "$STAGE/DEBIAN/control") KiB installed)," \
    "Depends: $(dpkg-deb -f "$DEB" Depends)"
echo "$DEB"
