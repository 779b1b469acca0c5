#!/usr/bin/env bash
# Install what the tests need, when it is missing: Debian packages, and the kernel VM's pieces
# (QEMU, Debian's 6.12 kernel, virtme-ng: scripts/kernel-vm.sh), which let the kernel-switch
# tests run on a machine whose own kernel has no SRv6 (docs/interop.md).
# Needs root (or passwordless sudo); without it, prints what to install and carries on, and the
# tests that need a missing tool say so. MRC_KERNEL_VM=0 skips the VM's pieces.
set -euo pipefail

PKGS=(
  pkg-config gcc clang libclang-dev        # build: bindgen + the DPDK shim
  libdpdk-dev                              # DPDK 22.11 and its virtual PMDs (memif, af_packet, af_xdp, ring, null)
  libibverbs-dev                           # rdma-core's <infiniband/verbs.h>: the C API's programs compile against it
  iproute2 tshark python3-scapy            # interop: namespaces + kernel SRv6, decoding oracles
  libbpf-dev bpftool                       # the tc BPF trimmer
  libopenmpi-dev openmpi-bin               # mpirun bootstrap for mrc-coll
  prometheus prometheus-pushgateway        # telemetry tests: a real server (+ promtool) and Pushgateway
)
# The kernel VM: Debian's 6.12 (uA needs it), QEMU from bookworm-backports (the machines' own
# qemu-utils comes from there, and bookworm's qemu-system-x86 7.2 would remove it), busybox for
# virtme-ng's initramfs.
VM_PKGS=(linux-image-6.12-amd64 busybox-static qemu-system-x86 zstd)
VM_DIR=/opt/mrc-vm
VNG_VERSION=1.42

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${PKGS[@]}"; do installed "$p" || missing+=("$p"); done
vm_missing=()
if [ "${MRC_KERNEL_VM:-}" != 0 ]; then
  for p in "${VM_PKGS[@]}"; do installed "$p" || vm_missing+=("$p"); done
fi
vm_ready() { [ -x "$VM_DIR/venv/bin/vng" ] && ls "$VM_DIR"/vmlinux-6.12* >/dev/null 2>&1; }
if [ ${#missing[@]} -eq 0 ] && [ ${#vm_missing[@]} -eq 0 ] && { [ "${MRC_KERNEL_VM:-}" = 0 ] || vm_ready; }; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    [ ${#missing[@]} -eq 0 ] || {
      echo "install-deps: not root; missing Debian packages: ${missing[*]}" >&2
      echo "install-deps: run: sudo apt-get install -y ${missing[*]}" >&2
    }
    echo "install-deps: not root; the kernel VM's pieces are installed by: sudo scripts/install-deps.sh" >&2
    exit 0
  fi
fi

apt_install() {
  DEBIAN_FRONTEND=noninteractive INITRD=No $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

updated=""
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  # tshark asks whether non-root users may capture; answer for it.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections || true
  $SUDO apt-get update -qq
  updated=1
  # prometheus and prometheus-pushgateway start their daemons (:9090, :9091) from postinst through
  # invoke-rc.d; the tests start their own on free ports, so forbid service starts while installing
  # (policy-rc.d exit 101), unless the machine already has a policy of its own.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  apt_install "${missing[@]}"
fi

[ "${MRC_KERNEL_VM:-}" != 0 ] || exit 0

if [ ${#vm_missing[@]} -gt 0 ]; then
  echo "install-deps: installing the kernel VM's ${vm_missing[*]}" >&2
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  qemu=(qemu-system-x86)
  if [ "$codename" = bookworm ]; then
    list=/etc/apt/sources.list.d/mrc-bookworm-backports.sources
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
        $SUDO tee "$list" >/dev/null
      updated=""
    fi
    qemu=(qemu-system-x86/bookworm-backports qemu-system-common/bookworm-backports
      qemu-system-data/bookworm-backports seabios/bookworm-backports)
  fi
  [ -n "$updated" ] || $SUDO apt-get update -qq
  # INITRD=No: virtme-ng boots the kernel without Debian's initramfs (~2 min saved).
  apt_install linux-image-6.12-amd64 busybox-static zstd "${qemu[@]}"
fi

# virtme-ng, in a venv of its own.
if [ ! -x "$VM_DIR/venv/bin/vng" ]; then
  echo "install-deps: installing virtme-ng $VNG_VERSION in $VM_DIR/venv" >&2
  $SUDO mkdir -p "$VM_DIR"
  if ! $SUDO python3 -m venv "$VM_DIR/venv" 2>/dev/null; then
    apt_install python3-venv
    $SUDO rm -rf "$VM_DIR/venv"
    $SUDO /usr/bin/python3 -m venv "$VM_DIR/venv"
  fi
  $SUDO "$VM_DIR/venv/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi

# The kernel as an uncompressed ELF: QEMU boots it by its PVH note, without firmware or the
# decompressor (an emulated boot 35-47 s -> 19-28 s).
for z in /boot/vmlinuz-6.12*; do
  [ -e "$z" ] || continue
  out=$VM_DIR/vmlinux-${z#/boot/vmlinuz-}
  [ -s "$out" ] && continue
  off=$(grep -abo $'\x28\xb5\x2f\xfd' "$z" | head -n1 | cut -d: -f1)
  [ -n "$off" ] || { echo "install-deps: $z is not zstd-compressed; the VM boots it as it is" >&2; continue; }
  tail -c +$((off + 1)) "$z" | zstd -dcq 2>/dev/null | $SUDO tee "$out.tmp" >/dev/null || true
  if [ "$(head -c 4 "$out.tmp" | od -An -c | tr -d ' ')" = "177ELF" ]; then
    $SUDO mv "$out.tmp" "$out"
  else
    $SUDO rm -f "$out.tmp"
    echo "install-deps: could not extract vmlinux from $z; the VM boots it as it is" >&2
  fi
done
