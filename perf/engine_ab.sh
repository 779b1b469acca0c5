#!/usr/bin/env bash
# Two (or more) builds of the engine bench against each other on this shared box: seven
# alternating runs of `--count-iters` (N 256-packet Writes and nothing else) under
# `perf stat -e task-clock`, then per build the fastest run and the median, in ns per packet
# and Mpps (both ends on one core). The fastest run is the figure to compare: the median moves
# with whatever else the machine runs.
#
#   cargo bench -p mrc-perf-bench --bench engine --no-run   # then copy target/release/deps/engine-<hash>
#   perf/engine_ab.sh 64 10000 /tmp/engine-before /tmp/engine-after
#   ROUNDS=11 perf/engine_ab.sh 4096 3000 A B
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: perf/engine_ab.sh PAYLOAD ITERS BINARY..." >&2
    exit 2
fi
payload=$1
iters=$2
shift 2
rounds=${ROUNDS:-7}
declare -A runs
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        ms=$(perf stat -x, -e task-clock "$bin" --count-iters "$iters" "$payload" 2>&1 >/dev/null |
            awk -F, '/task-clock/ {print $1}')
        runs[$bin]="${runs[$bin]:-} $ms"
    done
done
for bin in "$@"; do
    echo "${runs[$bin]}" | tr ' ' '\n' | grep -v '^$' | sort -g |
        awk -v n="$iters" -v b="$bin" -v p="$payload" '
            { t[NR] = $1 }
            END {
                pkts = n * 256
                fast = t[1] * 1e6 / pkts
                med = t[int((NR + 1) / 2)] * 1e6 / pkts
                printf "%-28s %5s B: fastest %.1f ns/packet (%.2f Mpps), median %.1f ns (%.2f Mpps)\n",
                    b, p, fast, 1e3 / fast, med, 1e3 / med
            }'
done
