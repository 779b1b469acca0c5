#!/usr/bin/env bash
# The simulator's own speed and memory (issue #14): builds of `mrc-experiments` against each
# other on the UEC-style single-plane fabric (plans/uec-1024.toml's links and buffers, 32
# hosts per rack, 32 spines) with a random permutation of 2 MB flows, alternating runs under
# /usr/bin/time. Per build: the fastest run's CPU seconds (user + system), events per CPU
# second, CPU microseconds per packet sent, peak RSS and RSS per simulated host; the median
# CPU too. Every run must finish with every byte checked (`run` exits 1 otherwise).
#
#   cargo build --release -p mrc-perf-bench --bin mrc-experiments
#   cp target/release/mrc-experiments /tmp/mx-after    # and a build of the commit before
#   perf/sim_scale.sh 1024 /tmp/mx-before /tmp/mx-after
#   ROUNDS=1 perf/sim_scale.sh 8192 /tmp/mx-after       # the 8192-host run (~4 GB)
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: perf/sim_scale.sh HOSTS BINARY..." >&2
    exit 2
fi
hosts=$1
shift
if [ $((hosts % 32)) -ne 0 ] || [ "$hosts" -lt 64 ]; then
    echo "perf/sim_scale.sh: HOSTS must be a multiple of 32, at least 64 (got $hosts)" >&2
    exit 2
fi
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
racks=$((hosts / 32))
sed -e "s/^name = .*/name = \"uec-$hosts\"/" -e "s/^t0_per_plane = .*/t0_per_plane = $racks/" \
    "$here/plans/uec-1024.toml" >"$work/plan.toml"
python3 - "$hosts" >"$work/perm.cm" <<'EOF'
import random, sys
n = int(sys.argv[1])
r = random.Random(1)
while True:
    p = list(range(n))
    r.shuffle(p)
    if all(i != p[i] for i in range(n)):
        break
print(f"Nodes {n}\nConnections {n}")
for i in range(n):
    print(f"{i}->{p[i]} start 0 size 2000000")
EOF
declare -A cpu
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        /usr/bin/time -f "TIME %U %S %M" "$bin" run --plan "$work/plan.toml" \
            --traffic "$work/perm.cm" --out "$work/out" --no-progress >"$work/log" 2>&1
        read -r user sys rss < <(awk '/^TIME/ {print $2, $3, $4}' "$work/log")
        events=$(grep -oE '[0-9]+ events in' "$work/log" | head -1 | awk '{print $1}')
        pkts=$(awk '/^plane +pkts_sent/ {on = 1; next} on && $1 ~ /^[0-9]+$/ {s += $2; next} {on = 0} END {print s}' "$work/log")
        cpu[$bin]="${cpu[$bin]:-} $(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}'):$rss:$events:$pkts"
    done
done
printf "%s hosts, %s rounds\n" "$hosts" "$rounds"
for bin in "$@"; do
    echo "${cpu[$bin]}" | tr ' ' '\n' | grep -v '^$' | sort -t: -g -k1 |
        awk -F: -v b="$bin" -v h="$hosts" '
            { c[NR] = $1; r[NR] = $2; e[NR] = $3; p[NR] = $4 }
            END {
                printf "%-24s CPU %.2f s (median %.2f), %.2f M events/CPU-s, %.2f µs CPU per packet (%d events, %d packets), peak RSS %.0f MB = %.3f MB per host\n",
                    b, c[1], c[int((NR + 1) / 2)], e[1] / c[1] / 1e6, c[1] * 1e6 / p[1], e[1], p[1],
                    r[1] / 1024, r[1] / 1024 / h
            }'
done
