#!/usr/bin/env bash
# Install the Debian packages the tests need, when they are missing.
# Needs root (or passwordless sudo); without it, prints what to install and carries on, and the
# tests that need a missing tool say so.
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

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-deps: not root; missing Debian packages: ${missing[*]}" >&2
    echo "install-deps: run: sudo apt-get install -y ${missing[*]}" >&2
    exit 0
  fi
fi
echo "install-deps: installing ${missing[*]}" >&2
# tshark asks whether non-root users may capture; answer for it.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections || true
$SUDO apt-get update -qq
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
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
