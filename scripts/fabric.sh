#!/usr/bin/env bash
# The plan's Linux SRv6 fabric in network namespaces (needs root and iproute2 >= 6.1).
#
#   scripts/fabric.sh up       PLAN [PREFIX]               build it (namespaces PREFIX-h0, PREFIX-t0-0-0, ...)
#   scripts/fabric.sh down     PLAN [PREFIX]               delete exactly its namespaces (and so its links)
#   scripts/fabric.sh linkdown PLAN PREFIX NODE IFACE      admin-down one link end, e.g. t0-0-0 u1
#   scripts/fabric.sh linkup   PLAN PREFIX NODE IFACE      bring it up and re-add the routes it lost
#   scripts/fabric.sh routes   PLAN [PREFIX]               re-apply every route and neighbour (idempotent)
#
# PLAN is a plan file or a built-in name (small). PREFIX defaults to "mrc". Paths between two
# hosts: `mrc-fabric paths PLAN --from h0 --to h3`. The mrc-fabric binary is $MRC_FABRIC, or
# the one on PATH, or built and run with cargo.
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 plan=$2 prefix=${3:-mrc}

fabric() {
  if [ -n "${MRC_FABRIC:-}" ]; then "$MRC_FABRIC" "$@"
  elif command -v mrc-fabric >/dev/null 2>&1; then mrc-fabric "$@"
  else cargo run --quiet --manifest-path "$(dirname "$0")/../Cargo.toml" -p mrc-apps --bin mrc-fabric -- "$@"
  fi
}

# Emit first, run second: a bad plan stops here with its file:line message, before any change.
run() { local script; script=$(fabric linux "$plan" --prefix "$prefix" "$@"); sh <<<"$script"; }

case $cmd in
  up) run ;;
  down) run --teardown ;;
  routes) run --routes ;;
  linkdown|linkup)
    [ $# -eq 5 ] || usage
    node=$4 iface=$5
    state=${cmd#link}
    ip -n "$prefix-$node" link set "$iface" "$state"
    # IPv6 flushes the routes and neighbours of an admin-down port; put them back.
    if [ "$state" = up ]; then run --routes; fi
    ;;
  *) usage ;;
esac
