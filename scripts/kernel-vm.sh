#!/usr/bin/env bash
# Debian's kernel in QEMU under virtme-ng: Linux SRv6 switches on a machine whose own kernel
# was built without them (docs/interop.md "In a VM"). The guest shares the host's filesystem
# read-only, so the binaries built here run there unchanged; it runs tests/vm/agent.py, which
# the tests drive over a unix socket (tests/support/vm.rs).
#
#   scripts/kernel-vm.sh check                      the kernel the VM boots, or one line saying what
#                                                   is missing (exit 1)
#   scripts/kernel-vm.sh boot DIR LINKS             boot (needs root): the agent serves on DIR/ctl.sock
#                                                   (QEMU waits for the connection before it starts
#                                                   the guest); DIR/share is a directory both sides
#                                                   write; LINKS host links, each a TAP tK on a
#                                                   bridge brK in a network namespace of the VM's
#                                                   own (the hosts' ends join brK; in the guest,
#                                                   bK). DIR is removed when the VM ends.
#   scripts/kernel-vm.sh shell                      an interactive shell in the VM (needs root)
#
# Settings: MRC_VM_KERNEL (a vmlinux or vmlinuz; default the newest /opt/mrc-vm/vmlinux-6.12*,
# else /boot/vmlinuz-6.12*), MRC_VM_CPUS (2), MRC_VM_MEMORY (768M), MRC_VM_KVM=1 (use /dev/kvm;
# default off: the machines' nested KVM cannot run a stock kernel). scripts/install-deps.sh
# installs QEMU, the kernel, busybox and virtme-ng (in /opt/mrc-vm/venv) as root.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
VENV=/opt/mrc-vm/venv
export PATH="$VENV/bin:$PATH"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage

kernel() {
  if [ -n "${MRC_VM_KERNEL:-}" ]; then echo "$MRC_VM_KERNEL"; return; fi
  local k
  k=$( (ls -1 /opt/mrc-vm/vmlinux-6.12* 2>/dev/null || true) | sort -V | tail -n1)
  [ -n "$k" ] || k=$( (ls -1 /boot/vmlinuz-6.12* 2>/dev/null || true) | sort -V | tail -n1)
  echo "$k"
}

# One line naming what is missing, or nothing.
missing() {
  local k
  k=$(kernel)
  command -v qemu-system-x86_64 >/dev/null ||
    { echo "no qemu-system-x86_64 (scripts/install-deps.sh installs qemu-system-x86 from bookworm-backports)"; return; }
  command -v vng >/dev/null ||
    { echo "no virtme-ng in $VENV (scripts/install-deps.sh: python3 -m venv $VENV && $VENV/bin/pip install virtme-ng)"; return; }
  command -v busybox >/dev/null ||
    { echo "no busybox, which virtme-ng needs (apt-get install busybox-static)"; return; }
  [ -n "$k" ] && [ -r "$k" ] ||
    { echo "no 6.12 kernel image (apt-get install linux-image-6.12-amd64, or set MRC_VM_KERNEL)"; return; }
  command -v unshare >/dev/null && command -v nsenter >/dev/null ||
    { echo "no unshare/nsenter (util-linux)"; return; }
  return 0
}

# vng's command line for the guest command "$@".
vng_args() {
  local mods
  # Modules udev would load for the emulated q35 board: ~10 s of an emulated boot for nothing.
  mods=kvm,kvm_amd,kvm_intel,ccp,sr_mod,cdrom,sg,iTCO_wdt,intel_pmc_bxt,iTCO_vendor_support
  mods=$mods,irqbypass,ahci,libahci,libata,scsi_mod,scsi_common,psmouse,evdev,serio_raw,pcspkr
  mods=$mods,i2c_i801,i2c_smbus,lpc_ich,button,crct10dif_pclmul,crc32_pclmul,ghash_clmulni_intel
  mods=$mods,sha512_ssse3,sha256_ssse3,sha1_ssse3,aesni_intel,gf128mul,crypto_simd,cryptd
  VNG=(vng --run "$(kernel)" --cpus "${MRC_VM_CPUS:-2}" --memory "${MRC_VM_MEMORY:-768M}"
    --append "modprobe.blacklist=$mods")
  [ "${MRC_VM_KVM:-0}" = 1 ] || VNG+=(--disable-kvm)
}

case $1 in
  check)
    why=$(missing) || true
    if [ -n "$why" ]; then echo "$why"; exit 1; fi
    kernel
    ;;
  boot)
    [ $# -eq 3 ] || usage
    why=$(missing) || true
    [ -z "$why" ] || { echo "kernel-vm: $why" >&2; exit 1; }
    # A network namespace of the VM's own (gone with QEMU): its TAPs never live in the host's.
    exec unshare --net -- "$0" _boot "$2" "$3"
    ;;
  _boot)
    dir=$2 links=$3 sock=$2/ctl.sock share=$2/share
    mkdir -p "$share"
    trap 'rm -rf "$dir"' EXIT
    sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip link set lo up
    vng_args
    opts="-chardev socket,id=mrcctl,path=$sock,server=on,wait=on"
    opts="$opts -device virtio-serial-pci -device virtserialport,chardev=mrcctl,name=mrc.ctl"
    for ((k = 0; k < links; k++)); do
      ip tuntap add "t$k" mode tap
      # A deep queue: the emulated guest drains its TAP in bursts, and a frame dropped here
      # would look like a switch losing it.
      ip link set "t$k" mtu 9000 txqueuelen 20000
      ip link add "br$k" type bridge mcast_snooping 0
      ip link set "t$k" master "br$k"
      ip link set "t$k" up
      ip link set "br$k" up
      mac=$(printf '02:6d:72:63:00:%02x' "$k")
      opts="$opts -netdev tap,id=l$k,ifname=t$k,script=no,downscript=no"
      opts="$opts -device virtio-net-pci,netdev=l$k,mac=$mac"
    done
    # The agent powers the guest off when the process that booted it closes the socket (its
    # end, whichever way); this shell stays to remove DIR.
    "${VNG[@]}" --rwdir "$share" --qemu-opts="$opts" \
      --exec "/usr/bin/python3 $here/../tests/vm/agent.py" </dev/null
    ;;
  shell)
    why=$(missing) || true
    [ -z "$why" ] || { echo "kernel-vm: $why" >&2; exit 1; }
    vng_args
    exec "${VNG[@]}"
    ;;
  *) usage ;;
esac
