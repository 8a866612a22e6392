#!/usr/bin/env bash
# build-image.sh: the guest image of latchkey's VM rig (README.md beside this file).
#
#   build-image.sh [--chromium] [--out DIR] [--force] [--keep-build]
#   build-image.sh [--chromium] --print-dir      # where the image for these options lives
#   build-image.sh [--chromium] --check          # exit 0 when that image is built and current
#
# Builds, as root, from Debian bookworm packages:
#   vmlinux       Debian's stock kernel (linux-image-amd64), uncompressed so that qemu
#                 boots it directly (PVH) instead of letting it decompress itself under TCG
#   initrd.img    a busybox initramfs that mounts the root and the 9p shares (guest/init)
#   rootfs.ext4   debootstrap --variant=minbase, the packages below, fido2 from PyPI,
#                 the kernel modules the rig loads (and what they depend on), and the
#                 rig's PID 1 (guest/rig-init)
#   build-info.txt  what went in: key, packages and versions, sizes, times
#   image.key     the cache key this image was built for
#
# Packages: busybox-static kmod procps python3 python3-cryptography fido2-tools usbip;
# --chromium adds chromium chromium-driver fonts-dejavu-core udev. PyPI: fido2 (the
# wheel only: its one dependency, cryptography, is Debian's).
#
# Environment:
#   RIG_CACHE       images, the .deb cache and the wheel cache (default ~/.cache/latchkey-rig)
#   EXTRA_PACKAGES  "pkg ..."       more Debian packages (e.g. openssh-client)
#   EXTRA_WHEELS    "name==ver ..." more PyPI packages, with their dependencies (binary
#                   wheels for the guest's CPython 3.11 on x86_64, or pure-Python ones)
#   EXTRA_MODULES   "name ..."      more kernel modules to keep (default: uhid, hid-generic,
#                   usbhid, vhci-hcd, usbip-host, virtio_net, inet_diag, tcp_diag,
#                   and the boot modules)
#   FIDO2_VERSION   python-fido2's version (default 2.2.1)
#   MIRROR          Debian mirror (default: the first one in this machine's apt sources)
#
# The cache key is a hash of this script, the guest files it installs, --chromium and
# the variables above except MIRROR and RIG_CACHE: without --out the image goes to
# $RIG_CACHE/image-KEY (image-chromium-KEY), so a changed list or script gets a new
# image. An image whose image.key matches is left alone (exit 0, no root needed)
# unless --force. Files are replaced only once everything is built.
set -euo pipefail

RIG=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CACHE=${RIG_CACHE:-$HOME/.cache/latchkey-rig}
SUITE=bookworm
FIDO2_VERSION=${FIDO2_VERSION:-2.2.1}
EXTRA_PACKAGES=${EXTRA_PACKAGES:-}
EXTRA_WHEELS=${EXTRA_WHEELS:-}
EXTRA_MODULES=${EXTRA_MODULES:-}

CHROMIUM=0 OUT= FORCE=0 KEEP_BUILD=0 PRINT_DIR=0 CHECK=0
while [ $# -gt 0 ]; do
    case "$1" in
        --chromium) CHROMIUM=1 ;;
        --no-chromium) CHROMIUM=0 ;;
        --out) [ $# -ge 2 ] || { echo "build-image.sh: --out needs a directory" >&2; exit 2; }
            OUT=$2; shift ;;
        --force) FORCE=1 ;;
        --keep-build|--keep-rootfs) KEEP_BUILD=1 ;;
        --print-dir) PRINT_DIR=1 ;;
        --check) CHECK=1 ;;
        -h|--help) sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
        *) echo "build-image.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done

# Debian packages of the guest. The base image stays small: it is booted on every CI run.
PACKAGES=(busybox-static kmod procps python3 python3-cryptography fido2-tools usbip)
[ "$CHROMIUM" = 1 ] && PACKAGES+=(chromium chromium-driver fonts-dejavu-core udev)
# shellcheck disable=SC2206 # a list of words by design
PACKAGES+=($EXTRA_PACKAGES)
# Kernel modules: what the initramfs loads to reach the root (BOOT_MODULES, in this
# order, with their dependencies first) and what rig-init may load (KEEP_MODULES).
BOOT_MODULES="virtio_pci virtio_blk ext4 9pnet_virtio 9p"
# inet_diag and tcp_diag: NETLINK_SOCK_DIAG for TCP, through which latchkeyd and
# latchkey-webdriver learn the uid at the other end of a loopback connection (they
# refuse a peer the kernel does not name); the kernel loads them on the first request
KEEP_MODULES="uhid hid-generic usbhid vhci-hcd usbip-host virtio_net inet_diag tcp_diag $EXTRA_MODULES"

image_key() {
    {
        echo "suite $SUITE chromium $CHROMIUM fido2 $FIDO2_VERSION"
        echo "packages ${PACKAGES[*]}"
        echo "wheels $EXTRA_WHEELS"
        echo "modules $KEEP_MODULES"
        cat "$RIG/build-image.sh" "$RIG/guest/init" "$RIG/guest/rig-init" "$RIG/guest/rig-command.service"
    } | sha256sum | cut -c 1-16
}
KEY=$(image_key)
if [ -z "$OUT" ]; then
    OUT=$CACHE/image-$KEY
    [ "$CHROMIUM" = 1 ] && OUT=$CACHE/image-chromium-$KEY
fi
if [ "$PRINT_DIR" = 1 ]; then
    echo "$OUT"
    exit 0
fi

log() { printf '[build-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
image_complete() {
    [ -s "$OUT/vmlinux" ] && [ -s "$OUT/initrd.img" ] && [ -s "$OUT/rootfs.ext4" ] \
        && [ "$(cat "$OUT/image.key" 2>/dev/null)" = "$KEY" ]
}
if [ "$CHECK" = 1 ]; then
    image_complete
    exit
fi
if [ "$FORCE" = 0 ] && image_complete; then
    log "up to date: $OUT (key $KEY)"
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "build-image.sh: building an image needs root (debootstrap, chroot)" >&2; exit 1; }

# ---- host tools --------------------------------------------------------------------
need=()
command -v debootstrap > /dev/null || need+=(debootstrap)
command -v mkfs.ext4 > /dev/null || need+=(e2fsprogs)
command -v qemu-system-x86_64 > /dev/null || need+=(qemu-system-x86)
python3 -m pip --version > /dev/null 2>&1 || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]} (host)"
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
        "${need[@]}" > /dev/null
fi
if [ -z "${MIRROR:-}" ]; then
    MIRROR=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n 1 | tr -d ' ' || true)
fi
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${MIRROR%/debian*}/debian-security

mkdir -p "$CACHE/debs" "$CACHE/wheels" "$OUT"
# one build at a time per cache: they share the .deb and wheel caches
exec 9> "$CACHE/.build.lock"
flock 9
if [ "$FORCE" = 0 ] && image_complete; then
    log "up to date: $OUT (built while this one waited)"
    exit 0
fi

T0=$(date +%s)
BUILD=$(mktemp -d "$CACHE/build.XXXXXX")
ROOT=$BUILD/rootfs
MOUNTS=(proc sys dev var/cache/apt/archives)
unmount_all() {
    local m i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        m=$ROOT/${MOUNTS[$i]}
        if mountpoint -q "$m" 2> /dev/null; then umount "$m" || umount -l "$m"; fi
    done
}
cleanup() {
    unmount_all
    if [ "$KEEP_BUILD" = 1 ]; then log "build directory kept: $BUILD"; else rm -rf "$BUILD"; fi
    rm -f "$OUT"/*.new
}
trap cleanup EXIT
in_root() {
    chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@"
}
# run_logged LOG CMD...: output to LOG, shown (its tail) only when CMD fails
run_logged() {
    local out=$1
    shift
    "$@" >> "$out" 2>&1 || { tail -n 30 "$out" >&2; return 1; }
}

# ---- 1. debootstrap ----------------------------------------------------------------
log "debootstrap --variant=minbase $SUITE ($MIRROR)"
t=$(date +%s)
run_logged "$BUILD/debootstrap.log" debootstrap --variant=minbase --cache-dir="$CACHE/debs" \
    "$SUITE" "$ROOT" "$MIRROR"
T_DEBOOTSTRAP=$(( $(date +%s) - t ))

cat > "$ROOT/etc/apt/sources.list" << EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
EOF
# no documentation, man pages or translations in the guest
cat > "$ROOT/etc/dpkg/dpkg.cfg.d/90-rig-small" << 'EOF'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
# no daemon starts while packages are installed
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
mount -t proc proc "$ROOT/proc"
mount -t sysfs sysfs "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind "$CACHE/debs" "$ROOT/var/cache/apt/archives"

# ---- 2. packages -------------------------------------------------------------------
log "apt-get install ${PACKAGES[*]}"
t=$(date +%s)
run_logged "$BUILD/apt.log" in_root apt-get update
run_logged "$BUILD/apt.log" in_root apt-get install -y --no-install-recommends "${PACKAGES[@]}"

# ---- 3. the kernel: Debian's package, unpacked (its postinst would build an initramfs
# with initramfs-tools, which the rig does not use)
KPKG=$(in_root apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$KPKG" ] || { echo "build-image.sh: no kernel package behind linux-image-amd64" >&2; exit 1; }
ls "$CACHE/debs/${KPKG}_"*.deb > /dev/null 2>&1 \
    || run_logged "$BUILD/apt.log" in_root sh -c "cd /var/cache/apt/archives && apt-get download $KPKG"
KDEB=$(ls "$CACHE/debs/${KPKG}_"*.deb | tail -n 1)
KPKG_VERSION=$(dpkg-deb -f "$KDEB" Version)
log "kernel: $KPKG $KPKG_VERSION"
dpkg-deb -x "$KDEB" "$BUILD/kernel"
KVER=$(ls "$BUILD/kernel/lib/modules")
# every module first, so that depmod and modprobe can tell what the wanted ones need
mkdir -p "$ROOT/usr/lib/modules"
cp -a "$BUILD/kernel/lib/modules/$KVER" "$ROOT/usr/lib/modules/"
in_root depmod "$KVER"
# shellcheck disable=SC2086
in_root modprobe -S "$KVER" --show-depends -a $BOOT_MODULES > "$BUILD/boot-modules.txt"
# shellcheck disable=SC2086
in_root modprobe -S "$KVER" --show-depends -a $KEEP_MODULES > "$BUILD/keep-modules.txt"
# "insmod /lib/modules/KVER/kernel/.../x.ko" lines, dependencies first (builtin ones
# have none); compared by their path under kernel/
module_paths() { awk '$1 == "insmod" { sub(/^.*\/modules\/[^\/]+\/kernel\//, "", $2); print $2 }' "$@"; }
module_paths "$BUILD/boot-modules.txt" "$BUILD/keep-modules.txt" | sort -u > "$BUILD/modules-kept.txt"
(cd "$ROOT/usr/lib/modules/$KVER/kernel" && find . -name '*.ko*' | sed 's|^\./||' | sort) > "$BUILD/modules-all.txt"
comm -23 "$BUILD/modules-all.txt" "$BUILD/modules-kept.txt" | (cd "$ROOT/usr/lib/modules/$KVER/kernel" && xargs rm -f)
find "$ROOT/usr/lib/modules/$KVER/kernel" -type d -empty -delete
in_root depmod "$KVER"
T_APT=$(( $(date +%s) - t ))

# vmlinux: the ELF inside the bzImage (Debian compresses it with xz); run.sh boots the
# bzImage (vmlinuz) when there is no vmlinux
python3 - "$BUILD/kernel/boot/vmlinuz-$KVER" "$OUT/vmlinux.new" << 'EOF' || log "no vmlinux: run.sh will boot vmlinuz"
import lzma, sys
image = open(sys.argv[1], "rb").read()
start = image.find(b"\xfd7zXZ\x00")
if start < 0:
    sys.exit("no xz stream in " + sys.argv[1])
elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(image[start:])
if elf[:4] != b"\x7fELF":
    sys.exit("the xz stream of " + sys.argv[1] + " is not an ELF file")
open(sys.argv[2], "wb").write(elf)
EOF
cp "$BUILD/kernel/boot/vmlinuz-$KVER" "$OUT/vmlinuz.new"

# ---- 4. PyPI: downloaded on the host (cached in $RIG_CACHE/wheels), installed into the
# guest's /usr/local. A cached wheel is used without asking PyPI.
PYVER=$(in_root python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
SITE=/usr/local/lib/python$PYVER/dist-packages
log "PyPI: fido2==$FIDO2_VERSION${EXTRA_WHEELS:+ $EXTRA_WHEELS} (CPython $PYVER)"
mkdir -p "$BUILD/wheels"
download() {  # download ARGS...: into $BUILD/wheels; from the wheel cache when it has them
    local pip=(python3 -m pip download -q --disable-pip-version-check --only-binary=:all:
        --python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" --abi abi3 --abi none
        --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform linux_x86_64
        --platform any -d "$BUILD/wheels")
    "${pip[@]}" --no-index --find-links "$CACHE/wheels" "$@" > /dev/null 2>&1 || "${pip[@]}" "$@"
    cp -n "$BUILD"/wheels/*.whl "$CACHE/wheels/"
}
download --no-deps "fido2==$FIDO2_VERSION"
# shellcheck disable=SC2086 # EXTRA_WHEELS is a list of requirements
[ -z "$EXTRA_WHEELS" ] || download $EXTRA_WHEELS
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --no-index \
    --no-compile --target "$ROOT$SITE" "$BUILD"/wheels/*.whl
in_root python3 -m compileall -q "$SITE" > /dev/null || true
in_root python3 -c 'import importlib.metadata as m, sys
for d in sorted(m.distributions(path=[sys.argv[1]]), key=lambda d: d.metadata["Name"].lower()):
    print(d.metadata["Name"], d.version)' "$SITE" > "$BUILD/wheels.txt"
in_root python3 -c 'import fido2.hid, fido2.server, cryptography'

# ---- 5. the rig's own files --------------------------------------------------------
install -m 0755 "$RIG/guest/rig-init" "$ROOT/usr/local/sbin/rig-init"
if [ -d "$ROOT/etc/systemd/system" ] && [ -x "$ROOT/lib/systemd/systemd" ]; then
    # systemd as PID 1 (run.sh RIG_INIT=systemd): the command runs as a service
    install -m 0644 "$RIG/guest/rig-command.service" "$ROOT/etc/systemd/system/rig-command.service"
    mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
    ln -sf ../rig-command.service "$ROOT/etc/systemd/system/multi-user.target.wants/rig-command.service"
    in_root systemctl mask getty@tty1.service serial-getty@ttyS0.service systemd-timesyncd.service \
        > /dev/null 2>&1 || true
fi
echo rig > "$ROOT/etc/hostname"
printf '127.0.0.1\tlocalhost rig\n::1\tlocalhost ip6-localhost\n' > "$ROOT/etc/hosts"
mkdir -p "$ROOT/rig" "$ROOT/share"
in_root dpkg-query -W -f '${Package} ${Version}\n' > "$BUILD/packages.txt"

unmount_all
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/*.deb \
    "$ROOT"/var/log/*.log "$ROOT"/usr/sbin/policy-rc.d "${ROOT:?}"/tmp/*

# ---- 6. initramfs: busybox and the boot modules, in load order ---------------------
log "initramfs"
IR=$ROOT/tmp/initramfs  # inside the root, so that the guest's busybox can pack it
mkdir -p "$IR/bin" "$IR/lib/modules" "$IR/dev" "$IR/proc" "$IR/sys" "$IR/root"
cp "$ROOT/bin/busybox" "$IR/bin/busybox"
install -m 0755 "$RIG/guest/init" "$IR/init"
module_paths "$BUILD/boot-modules.txt" | awk '!seen[$0]++' | while read -r m; do
    cp "$ROOT/usr/lib/modules/$KVER/kernel/$m" "$IR/lib/modules/"
    basename "$m" >> "$IR/lib/modules/order"
done
in_root sh -c 'cd /tmp/initramfs && find . | sort | busybox cpio -o -H newc' 2> /dev/null \
    | gzip -1 > "$OUT/initrd.img.new"
rm -rf "$IR"

# ---- 7. the root file system -------------------------------------------------------
log "mkfs.ext4"
used_mib=$(( $(du -sk "$ROOT" | cut -f 1) / 1024 ))
size_mib=$(( used_mib * 11 / 10 + 512 ))  # a sparse file: the free space costs no disk
mkfs.ext4 -q -F -L rig -m 0 -E lazy_itable_init=0,lazy_journal_init=0 -d "$ROOT" "$OUT/rootfs.ext4.new" \
    "${size_mib}M" > /dev/null
T_TOTAL=$(( $(date +%s) - T0 ))
{
    echo "key: $KEY"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in ${T_TOTAL} s" \
        "(debootstrap ${T_DEBOOTSTRAP} s, apt and kernel ${T_APT} s)"
    echo "chromium: $CHROMIUM"
    echo "packages: ${PACKAGES[*]}"
    echo "extra packages: $EXTRA_PACKAGES"
    echo "extra wheels: $EXTRA_WHEELS"
    echo "kernel: $KPKG $KPKG_VERSION ($KVER), $(wc -l < "$BUILD/modules-kept.txt") modules kept"
    echo "python $PYVER: $(tr '\n' ' ' < "$BUILD/wheels.txt")"
    echo "rootfs: ${used_mib} MiB of files; rootfs.ext4 ${size_mib} MiB," \
        "$(du -m "$OUT/rootfs.ext4.new" | cut -f 1) MiB on disk"
    echo "initrd.img: $(du -k "$OUT/initrd.img.new" | cut -f 1) KiB;" \
        "vmlinux: $(du -m "$OUT/vmlinux.new" 2> /dev/null | cut -f 1) MiB"
    echo "--- modules"
    cat "$BUILD/modules-kept.txt"
    echo "--- packages"
    cat "$BUILD/packages.txt"
} > "$OUT/build-info.txt.new"
rm -f "$OUT/image.key"
for f in vmlinux vmlinuz initrd.img rootfs.ext4 build-info.txt; do
    if [ -e "$OUT/$f.new" ]; then mv -f "$OUT/$f.new" "$OUT/$f"; else rm -f "$OUT/$f"; fi
done
echo "$KEY" > "$OUT/image.key"
sed -n '1,10p' "$OUT/build-info.txt" >&2
log "done: $OUT"
