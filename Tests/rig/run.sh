#!/usr/bin/env bash
# run.sh DIR COMMAND [ARG...]: boots the rig guest (Debian's kernel under qemu), shares DIR
# into it, runs COMMAND as root there, streams its stdout and stderr here, powers off
# and exits with COMMAND's exit status (README.md beside this file).
#
# The command is exec'd as given (no shell: use `bash -c '...'` for shell syntax) with
# stdin /dev/null, HOME=/root, RIG_GUEST=1 and RIG_SHARE (where DIR is mounted). DIR is
# mounted at /share and, unless that would cover a system directory, at its own path;
# the command starts there, or in the subdirectory matching the current one when that is
# inside DIR. The root file system is a throw-away snapshot of the image: only writes to
# DIR survive. Exit status besides the command's: 124 after RIG_TIMEOUT, 125 when the
# guest reported no status (the tail of its console is printed).
#
# Environment:
#   RIG_IMAGE_DIR     the image (default: build-image.sh --print-dir, with --chromium when
#                     RIG_CHROMIUM=1, for the EXTRA_* variables in the environment)
#   RIG_CHROMIUM=1    the --chromium image          RIG_CACHE  as for build-image.sh
#   RIG_TIMEOUT       seconds before the VM is killed (default 1800)
#   RIG_MEM, RIG_SMP  guest memory (2G) and vCPUs (2)
#   RIG_MODULES       kernel modules to load (default "uhid hid-generic usbhid vhci-hcd")
#   RIG_ENV           "NAME ..." host variables to export into the guest
#   RIG_UDEV=1        start systemd-udevd and coldplug hidraw/hid/usb/misc/input (Chromium
#                     needs its hotplug events); RIG_UDEV=full coldplugs everything
#   RIG_INIT=systemd  boot systemd as PID 1 (an image with EXTRA_PACKAGES="systemd udev");
#                     the command runs as rig-command.service. Default: rig-init, a shell
#   RIG_EXTRA_SHARES  "/path ..." host directories mounted read-only at the same paths (the
#                     Swift runtime that host-built binaries find through their RUNPATH)
#   RIG_SHARE_RO=1    DIR read-only
#   RIG_NET=1         a NIC with no way out (qemu user networking, restrict=on), plus:
#   RIG_HOSTFWD       "PORT ..." host 127.0.0.1:PORT -> guest PORT (implies RIG_NET=1)
#   RIG_TPM=DIR       a TPM 2.0 on the guest's TIS interface: Debian's swtpm, its state in DIR
#                     (made on first use; keep it to boot the same "machine" again), started
#                     here and ending with qemu (--terminate). Never a directory of the repository
#   RIG_FIRMWARE=uefi boot through OVMF (UEFI, /usr/share/ovmf/OVMF.fd) and the bzImage, so that
#                     the guest sees EFI and the firmware's ACPI TPM2 table (systemd-creds
#                     has-tpm2 says "firmware"); default: qemu's BIOS and the vmlinux (PVH)
#   RIG_ACCEL         tcg (default; KVM does not work on the build machines) | kvm
#   RIG_CPU           the TCG CPU model (max)      RIG_MACHINE  pc (default) | q35
#   RIG_APPEND        more kernel command line     RIG_QEMU_ARGS  more qemu arguments
#   RIG_INTERACTIVE=1 the command on this terminal (serial console; Ctrl-A x quits qemu)
#   RIG_VERBOSE=1     print the guest's console afterwards
#   RIG_TIMING=1      print the time to boot, to run the command and in total
#   RIG_KEEP_CTL=1    keep the control directory (config, cmd.sh, out, err, console.log)
set -uo pipefail
RIG=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

usage() { sed -n '2,/^set -uo/{/^set -uo/d; s/^# \{0,1\}//; p}' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
[ -d "$1" ] || { echo "run.sh: not a directory: $1" >&2; exit 2; }
SHARE=$(cd "$1" && pwd -P)
shift
case "$SHARE" in
    *,* | *' '*) echo "run.sh: qemu cannot share a path with a comma or a space: $SHARE" >&2; exit 2 ;;
esac

IMG=${RIG_IMAGE_DIR:-}
if [ -z "$IMG" ]; then
    chromium=()
    [ "${RIG_CHROMIUM:-0}" = 1 ] && chromium=(--chromium)
    IMG=$("$RIG/build-image.sh" "${chromium[@]}" --print-dir)
fi
KERNEL=$IMG/vmlinux
[ -s "$KERNEL" ] || KERNEL=$IMG/vmlinuz
FIRMWARE=()
case "${RIG_FIRMWARE:-bios}" in
    bios) ;;
    uefi)
        # OVMF loads a kernel with an EFI stub, not the bare ELF
        KERNEL=$IMG/vmlinuz
        [ -s /usr/share/ovmf/OVMF.fd ] \
            || { echo "run.sh: RIG_FIRMWARE=uefi needs /usr/share/ovmf/OVMF.fd (apt-get install ovmf)" >&2; exit 125; }
        FIRMWARE=(-bios /usr/share/ovmf/OVMF.fd)
        ;;
    *) echo "run.sh: RIG_FIRMWARE must be bios or uefi, not $RIG_FIRMWARE" >&2; exit 2 ;;
esac
for f in "$KERNEL" "$IMG/initrd.img" "$IMG/rootfs.ext4"; do
    [ -s "$f" ] || { echo "run.sh: $f is missing: build the image first (build-image.sh)" >&2; exit 125; }
done
command -v qemu-system-x86_64 > /dev/null \
    || { echo "run.sh: qemu-system-x86_64 is missing (apt-get install qemu-system-x86)" >&2; exit 125; }
if [ -n "${RIG_GUESTFWD:-}" ]; then
    echo "run.sh: RIG_GUESTFWD is not supported by this rig: run the server in the guest" >&2
    exit 2
fi

# system_path PATH: whether mounting at PATH would cover the guest's own files
system_path() {
    case "$1" in
        / | /bin* | /boot* | /dev* | /etc* | /lib* | /proc* | /run* | /sbin* | /sys* | /usr* | /var* \
            | /rig | /rig/* | /share | /share/* | /tmp | /root | /opt | /home | /srv | /mnt | /media) return 0 ;;
    esac
    return 1
}
SHARE_AT=
system_path "$SHARE" || SHARE_AT=$SHARE
EXTRA=()
for p in ${RIG_EXTRA_SHARES:-}; do
    [ -d "$p" ] || { echo "run.sh: RIG_EXTRA_SHARES: not a directory: $p" >&2; exit 2; }
    p=$(cd "$p" && pwd -P)
    system_path "$p" && { echo "run.sh: RIG_EXTRA_SHARES: $p would cover the guest's own files" >&2; exit 2; }
    EXTRA+=("$p")
done
GUEST_SHARE=${SHARE_AT:-/share}
GUEST_CWD=$GUEST_SHARE
case "$(pwd -P)/" in "$SHARE"/*) GUEST_CWD=$GUEST_SHARE${PWD#"$SHARE"} ;; esac

NET=${RIG_NET:-0}
[ -n "${RIG_HOSTFWD:-}" ] && NET=1
CTL=$(mktemp -d "${TMPDIR:-/tmp}/latchkey-rig.XXXXXX")
QEMU_PID=
SWTPM_PID=
TAIL_PIDS=()
cleanup() {
    [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2> /dev/null
    [ -n "$SWTPM_PID" ] && kill "$SWTPM_PID" 2> /dev/null
    [ ${#TAIL_PIDS[@]} -gt 0 ] && kill "${TAIL_PIDS[@]}" 2> /dev/null
    if [ "${RIG_KEEP_CTL:-0}" = 1 ]; then echo "run.sh: control directory kept: $CTL" >&2; else rm -rf "$CTL"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# q WORD: WORD in POSIX single quotes (the guest reads these files with sh)
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
    echo "RIG_MODULES=$(q "${RIG_MODULES:-uhid hid-generic usbhid vhci-hcd}")"
    echo "RIG_UDEV=$(q "${RIG_UDEV:-0}")"
    echo "RIG_NET=$(q "$NET")"
    echo "RIG_INIT=$(q "${RIG_INIT:-rig}")"
    echo "RIG_INTERACTIVE=$(q "${RIG_INTERACTIVE:-0}")"
    echo "RIG_SHARE_AT=$(q "$SHARE_AT")"
    [ "${RIG_SHARE_RO:-0}" = 1 ] && echo "RIG_SHARE_RO=1" || echo "RIG_SHARE_RO="
    echo "RIG_EXTRA_SHARES=$(q "${EXTRA[*]}")"
} > "$CTL/config"
{
    echo "cd -- $(q "$GUEST_CWD") || exit 126"
    echo "export RIG_GUEST=1 RIG_SHARE=$(q "$GUEST_SHARE")"
    for name in ${RIG_ENV:-}; do
        [ -n "${!name+set}" ] && echo "export $name=$(q "${!name}")"
    done
    printf 'exec'
    for word in "$@"; do printf ' %s' "$(q "$word")"; done
    echo
} > "$CTL/cmd.sh"
: > "$CTL/out"
: > "$CTL/err"

# acpi=noirq: routing PCI interrupts through ACPI costs about 150 ms per virtio device
# under TCG; cryptomgr.notests: the crypto self-tests cost about half a second
APPEND="console=ttyS0 quiet loglevel=3 panic=-1 acpi=noirq cryptomgr.notests mitigations=off random.trust_cpu=on"
if [ "${RIG_ACCEL:-tcg}" = kvm ]; then
    ACCEL=(-accel kvm -cpu host)
else
    ACCEL=(-accel tcg,thread=multi -cpu "${RIG_CPU:-max}")
fi
QEMU=(qemu-system-x86_64 -machine "${RIG_MACHINE:-pc}" "${ACCEL[@]}" -smp "${RIG_SMP:-2}" -m "${RIG_MEM:-2G}"
    "${FIRMWARE[@]}" -nodefaults -no-user-config -display none -no-reboot -monitor none
    -kernel "$KERNEL" -initrd "$IMG/initrd.img" -append "$APPEND ${RIG_APPEND:-}"
    -drive "id=root,file=$IMG/rootfs.ext4,format=raw,if=none,snapshot=on,cache=unsafe"
    -device virtio-blk-pci,drive=root
    -fsdev "local,id=rigctl,path=$CTL,security_model=none" -device virtio-9p-pci,fsdev=rigctl,mount_tag=rigctl
    -fsdev "local,id=share,path=$SHARE,security_model=none$([ "${RIG_SHARE_RO:-0}" = 1 ] && echo ,readonly=on)"
    -device virtio-9p-pci,fsdev=share,mount_tag=share)
i=0
for p in "${EXTRA[@]}"; do
    QEMU+=(-fsdev "local,id=extra$i,path=$p,security_model=none,readonly=on"
        -device "virtio-9p-pci,fsdev=extra$i,mount_tag=extra$i")
    i=$((i + 1))
done
if [ "$NET" = 1 ]; then
    netdev=user,id=net0,restrict=on,net=10.0.2.0/24,host=10.0.2.2
    for port in ${RIG_HOSTFWD:-}; do netdev+=",hostfwd=tcp:127.0.0.1:$port-:$port"; done
    QEMU+=(-netdev "$netdev" -device virtio-net-pci,netdev=net0)
else
    QEMU+=(-nic none)
fi
if [ -n "${RIG_TPM:-}" ]; then
    # qemu's TPM emulator backend speaks swtpm's control protocol on this socket and
    # hands it the data channel; --terminate ends swtpm when qemu goes
    command -v swtpm > /dev/null || { echo "run.sh: RIG_TPM needs swtpm (apt-get install swtpm)" >&2; exit 125; }
    mkdir -p "$RIG_TPM" || exit 125
    # the TPM's seeds are what the guest seals with: never where the guest can read them
    case "$(cd "$RIG_TPM" && pwd -P)/" in
        "$SHARE"/* | "${SHARE_AT:-/nonexistent}"/*)
            echo "run.sh: RIG_TPM=$RIG_TPM is inside the shared directory $SHARE: the guest would see its TPM's state" >&2
            exit 2 ;;
    esac
    swtpm socket --tpm2 --tpmstate "dir=$RIG_TPM" --ctrl "type=unixio,path=$CTL/swtpm.sock" --terminate \
        --log "file=$CTL/swtpm.log" < /dev/null > /dev/null 2>&1 &
    SWTPM_PID=$!
    for _ in $(seq 100); do [ -S "$CTL/swtpm.sock" ] && break; sleep 0.1; done
    [ -S "$CTL/swtpm.sock" ] || { echo "run.sh: swtpm did not start:" >&2; cat "$CTL/swtpm.log" >&2 2> /dev/null; exit 125; }
    QEMU+=(-chardev "socket,id=chrtpm,path=$CTL/swtpm.sock" -tpmdev emulator,id=tpm0,chardev=chrtpm
        -device tpm-tis,tpmdev=tpm0)
fi
if [ "${RIG_INTERACTIVE:-0}" = 1 ]; then QEMU+=(-serial mon:stdio); else QEMU+=(-serial "file:$CTL/console.log"); fi
# shellcheck disable=SC2206 # extra arguments, split as words by design
[ -n "${RIG_QEMU_ARGS:-}" ] && QEMU+=($RIG_QEMU_ARGS)

T_START=$(date +%s.%N)
if [ "${RIG_INTERACTIVE:-0}" = 1 ]; then
    timeout -k 5 "${RIG_TIMEOUT:-1800}" "${QEMU[@]}"
    QEMU_RC=$?
else
    timeout -k 5 "${RIG_TIMEOUT:-1800}" "${QEMU[@]}" < /dev/null > "$CTL/qemu.log" 2>&1 &
    QEMU_PID=$!
    tail -n +1 -s 0.2 -f --pid="$QEMU_PID" "$CTL/out" &
    TAIL_PIDS+=($!)
    tail -n +1 -s 0.2 -f --pid="$QEMU_PID" "$CTL/err" >&2 &
    TAIL_PIDS+=($!)
    wait "$QEMU_PID"
    QEMU_RC=$?
    QEMU_PID=
    # swtpm ends by itself once qemu's connection closes (a backstop if it did not)
    if [ -n "$SWTPM_PID" ]; then
        for _ in $(seq 50); do kill -0 "$SWTPM_PID" 2> /dev/null || break; sleep 0.1; done
        kill "$SWTPM_PID" 2> /dev/null && echo "run.sh: swtpm had to be stopped" >&2
        wait "$SWTPM_PID" 2> /dev/null
        SWTPM_PID=
    fi
    wait "${TAIL_PIDS[@]}" 2> /dev/null
    TAIL_PIDS=()
fi
T_END=$(date +%s.%N)

if [ "${RIG_VERBOSE:-0}" = 1 ]; then
    echo "----- guest console -----" >&2
    cat "$CTL/console.log" "$CTL/qemu.log" >&2 2> /dev/null
fi
if [ "${RIG_TIMING:-0}" = 1 ] && [ -s "$CTL/t_start" ]; then
    # the guest wrote its uptime when the command started; the file's mtime is then
    awk -v t0="$T_START" -v t1="$T_END" -v started="$(stat -c %.9Y "$CTL/t_start")" -v up="$(cat "$CTL/t_start")" \
        -v ended="$(stat -c %.9Y "$CTL/rc" 2> /dev/null || echo "$T_END")" 'BEGIN {
        printf "run.sh: boot to command %.1f s (guest uptime %.1f s), command %.1f s, total %.1f s\n",
            started - t0, up, ended - started, t1 - t0 }' >&2
fi
if [ -s "$CTL/rc" ]; then
    exit "$(cat "$CTL/rc")"
fi
if [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
    echo "run.sh: the guest ran out of time (RIG_TIMEOUT=${RIG_TIMEOUT:-1800} s)" >&2
    exit 124
fi
echo "run.sh: the guest reported no exit status (qemu exited with $QEMU_RC)" >&2
if [ "${RIG_VERBOSE:-0}" != 1 ]; then
    echo "----- qemu and the guest's console (tail) -----" >&2
    tail -n 5 "$CTL/qemu.log" >&2 2> /dev/null
    tail -n 40 "$CTL/console.log" >&2 2> /dev/null
fi
exit 125
