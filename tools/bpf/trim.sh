#!/usr/bin/env bash
# Loader of the tc BPF trimmer (trim.bpf.c) on one switch port of the namespace fabric.
#
#   tools/bpf/trim.sh build  OUT.o [EVERY [SIZE [DSCP]]]   compile (defaults 8, 256, 12)
#   tools/bpf/trim.sh attach NS IFACE OBJ.o                clsact + egress cls_bpf (direct action)
#   tools/bpf/trim.sh stats  NS IFACE                      "matched N trimmed M failed F"
#   tools/bpf/trim.sh detach NS IFACE                      remove the clsact qdisc (and the program)
#
# Each attach loads its own copy of the program and of its counters map, found again through
# the filter's program id: several fabrics can trim at once.
set -euo pipefail

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
here=$(cd "$(dirname "$0")" && pwd)

case $1 in
  build)
    out=$2 every=${3:-8} size=${4:-256} dscp=${5:-12}
    clang -O2 -g -target bpf -I"/usr/include/$(uname -m)-linux-gnu" \
      -DTRIM_EVERY="$every" -DTRIM_SIZE="$size" -DTRIM_DSCP="$dscp" \
      -c "$here/trim.bpf.c" -o "$out"
    ;;
  attach)
    [ $# -eq 4 ] || usage
    tc -n "$2" qdisc add dev "$3" clsact
    tc -n "$2" filter add dev "$3" egress bpf direct-action obj "$4" sec tc
    ;;
  stats)
    [ $# -eq 3 ] || usage
    prog=$(tc -n "$2" filter show dev "$3" egress | sed -n 's/.* id \([0-9]*\).*/\1/p' | head -n1)
    [ -n "$prog" ] || { echo "no trimmer on $2 $3" >&2; exit 1; }
    map=$(bpftool prog show id "$prog" | sed -n 's/.*map_ids \([0-9]*\).*/\1/p' | head -n1)
    [ -n "$map" ] || { echo "trimmer program $prog has no map" >&2; exit 1; }
    value() { bpftool map lookup id "$map" key "$1" 0 0 0 | sed -n 's/.*"value": *\([0-9]*\).*/\1/p'; }
    echo "matched $(value 0) trimmed $(value 1) failed $(value 2)"
    ;;
  detach)
    [ $# -eq 3 ] || usage
    tc -n "$2" qdisc del dev "$3" clsact
    ;;
  *) usage ;;
esac
