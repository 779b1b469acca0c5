#!/usr/bin/env bash
# The issue-5 benchmark: full-stack MRC goodput over memif between two processes, next to the
# raw DPDK frame rate over the same memif, measured in the same run. For each message size it
# runs raw_memif with the Ethernet frame of one MRC data packet of that size, then nic_memif,
# and prints one JSON line with both and their ratio (MRC messages per second / raw frames per
# second: every message is one data packet), then a line of text, on stdout.
#
#   perf/nic_memif.sh                 # 4096-byte and 64-byte Writes, 3 s each
#   SECS=5 SIZES="4096" perf/nic_memif.sh
#   EAL="--in-memory" perf/nic_memif.sh   # hugepages instead of --no-huge
#
# Rates swing with whatever else runs on the machine: compare the ratio, not the rates, and
# run it a few times.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${SECS:-3}
SIZES=${SIZES:-"4096 64"}
EAL=${EAL:-"--no-huge -m 512"}

cargo build --release --quiet -p mrc-perf-bench --bin raw_memif --bin nic_memif
bin=${CARGO_TARGET_DIR:-target}/release

for size in $SIZES; do
    frame=$("$bin/nic_memif" --print-frame-size --size "$size")
    # DPDK 22.11's memif sometimes crashes a side as it closes (after the receiver printed its
    # figures, which are kept); a run that printed none is retried, up to three times.
    raw=""
    for _ in 1 2 3; do
        raw=$( ("$bin/raw_memif" --frame-size "$frame" --secs "$SECS" --eal="$EAL" || true) | grep '^{' | jq -c 'select(.role == "rx")' || true)
        [ -n "$raw" ] && break
    done
    [ -n "$raw" ] || { echo "nic_memif.sh: raw_memif printed no figures in three runs" >&2; exit 1; }
    nic=$("$bin/nic_memif" --size "$size" --secs "$SECS" --eal="$EAL" | grep '^{' | jq -c 'select(.role == "tx")')
    line=$(jq -cn --argjson raw "$raw" --argjson nic "$nic" --argjson size "$size" --argjson frame "$frame" '{
        tool: "nic_memif.sh",
        payload_bytes: $size,
        frame_bytes: $frame,
        raw_mpps: $raw.mpps,
        raw_payload_gbps: ($raw.mpps * $size * 8 / 1000),
        mrc_msg_mpps: $nic.msg_mpps,
        mrc_goodput_gbps: $nic.goodput_gbps,
        ratio: ($nic.msg_mpps / $raw.mpps),
        raw: $raw,
        mrc: $nic
    }')
    echo "$line"
    echo "$line" | jq -r '"\(.payload_bytes) B: MRC \(.mrc_msg_mpps * 1000 | floor) k msg/s (\(.mrc_goodput_gbps * 100 | floor / 100) Gb/s goodput) vs raw \(.raw_mpps * 1000 | floor) k frames/s of \(.frame_bytes) B: ratio \(.ratio * 1000 | floor / 1000)"'
done
