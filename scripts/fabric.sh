#!/usr/bin/env bash
# The plan's Linux SRv6 fabric in network namespaces (needs root and iproute2 >= 6.1).
#
#   scripts/fabric.sh up       PLAN [PREFIX]               build it (namespaces PREFIX-h0, PREFIX-t0-0-0, ...)
#   scripts/fabric.sh down     PLAN [PREFIX]               delete exactly its namespaces (and so its links)
#   scripts/fabric.sh linkdown PLAN PREFIX NODE IFACE      admin-down one link end, e.g. t0-0-0 u1
#   scripts/fabric.sh linkup   PLAN PREFIX NODE IFACE      bring it up and re-add the routes it lost
#   scripts/fabric.sh routes   PLAN [PREFIX]               re-apply every route and neighbour (idempotent)
#   scripts/fabric.sh mgmt     PLAN PREFIX HA HB           a management veth m0 between hosts HA and HB
#                                                          (IPv4 192.0.2.1/30 on HA, .2 on HB: mrc-perf's TCP exchange)
#   scripts/fabric.sh dpdkhost PLAN PREFIX HOST            hand a host's ports to a DPDK NIC (kernel IPv6 off on them)
#   scripts/fabric.sh counters PLAN PREFIX                 (mrc-fabric counters) "node iface rx_packets tx_packets rx_dropped tx_dropped
#                                                          forwarded no_route" for every interface of every switch
#                                                          (forwarded: IPv6 packets routed out of it, so neither
#                                                          neighbour discovery nor anything the switch sent itself;
#                                                          no_route: packets in on it that had no usable route)
#
# PLAN is a plan file or a built-in name (small). PREFIX defaults to "mrc". Paths between two
# hosts: `mrc-fabric paths PLAN --from h0 --to h3`. The mrc-fabric binary is $MRC_FABRIC, or
# the one on PATH, or built and run with cargo.
#
# up, down and routes take `--part hosts|switches --attach BR` after PREFIX: only that
# side of the host links, each cut link's end a veth hlK on bridge BR<K> of the namespace the
# script runs in (`mrc-fabric linux --help`; the kernel VM of docs/interop.md joins the sides).
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 plan=$2 prefix=${3:-mrc}
split=("${@:4}")

fabric() {
  if [ -n "${MRC_FABRIC:-}" ]; then "$MRC_FABRIC" "$@"
  elif command -v mrc-fabric >/dev/null 2>&1; then mrc-fabric "$@"
  else cargo run --quiet --manifest-path "$(dirname "$0")/../Cargo.toml" -p mrc-apps --bin mrc-fabric -- "$@"
  fi
}

# Emit first, run second: a bad plan stops here with its file:line message, before any change.
run() { local script; script=$(fabric linux "$plan" --prefix "$prefix" "$@"); sh <<<"$script"; }

case $cmd in
  up) run "${split[@]}" ;;
  down) run --teardown "${split[@]}" ;;
  routes) run --routes "${split[@]}" ;;
  linkdown|linkup)
    [ $# -eq 5 ] || usage
    node=$4 iface=$5
    state=${cmd#link}
    ip -n "$prefix-$node" link set "$iface" "$state"
    # IPv6 flushes the routes and neighbours of an admin-down port; put them back.
    # (Lenient: on one side of a split fabric, the other side's namespaces are skipped.)
    if [ "$state" = up ]; then run --routes; fi
    ;;
  mgmt)
    [ $# -eq 5 ] || usage
    a=$prefix-$4 b=$prefix-$5
    ip -n "$a" link add m0 type veth peer name m0 netns "$b"
    ip -n "$a" addr add 192.0.2.1/30 dev m0
    ip -n "$b" addr add 192.0.2.2/30 dev m0
    ip -n "$a" link set m0 up
    ip -n "$b" link set m0 up
    ;;
  dpdkhost)
    [ $# -eq 4 ] || usage
    ns=$prefix-$4
    # Only the DPDK NIC speaks on the ports (it answers and sends neighbour discovery itself);
    # the kernel would otherwise also take every frame the PMD sees.
    for dev in $(ip -n "$ns" -o link show | sed -n 's/^[0-9]*: \(p[0-9]*\)@.*/\1/p'); do
      ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1" >/dev/null
    done
    ;;
  counters)
    fabric counters "$plan" --prefix "$prefix"
    ;;
  *) usage ;;
esac
