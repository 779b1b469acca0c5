#!/usr/bin/env python3
"""The engine's cost per data packet, stage by stage: instructions counted by callgrind over
the engine bench (both endpoints on one core, perf/benches/engine.rs), attributed to a stage by
the source file the code comes from (after inlining, by the file of the code itself; standard
library code by the file of the function it was inlined into).

    cargo bench -p mrc-perf-bench --bench engine --no-run
    perf/stages.py target/release/deps/engine-<hash> [--payload 64] [--iters 40] [--md]

Two runs (N and 2N Writes of 256 packets) are subtracted, so setup does not count. Counts are
exact and repeatable whatever else the machine runs; valgrind's CPU has no AVX-512, so the
ICRC runs its 128-bit PCLMULQDQ path here (on the real CPU the 512-bit one is faster still).
With --ns T (the measured ns per packet of the same build) each stage also gets its share of
T. docs/benchmarks.md has the table before and after the fast path.
"""

import argparse
import collections
import re
import subprocess
import sys
import tempfile

PACKETS_PER_ITER = 256

# (stage, patterns over the source file); first match wins.
STAGES = [
    ("ICRC", [r"(^|/)crc/src/", r"crc32fast", r"wire/icrc\.rs"]),
    ("RX parse", [r"wire/frame/fast\.rs", r"wire/frame/parse\.rs"]),
    ("TX build (headers)", [r"wire/frame/emit\.rs", r"qp/frames\.rs"]),
    ("headers (fields, by side)", [r"transport/src/wire/", r"srv6/src/wire/", r"smoltcp"]),
    ("payload copies", [r"memmove|memcpy|verbs/memory\.rs|verbs/mr\.rs|qp/sendq\.rs"]),
    ("placement + receive state", [r"qp/responder\.rs", r"reliability/tracker\.rs",
                                   r"reliability/ack_policy\.rs", r"reliability/imm\.rs"]),
    ("SACK build + feedback", [r"qp/control\.rs", r"qp/feedback\.rs"]),
    ("send state (flight, window)", [r"qp/requester\.rs", r"reliability/flight\.rs",
                                     r"reliability/psn\.rs"]),
    ("EV choice + path state", [r"transport/src/ev/"]),
    ("congestion control", [r"transport/src/cc/"]),
    ("timers + loss detection", [r"qp/timers\.rs", r"reliability/loss\.rs",
                                 r"reliability/rtt\.rs", r"reliability/retry\.rs"]),
    ("dispatch + scheduling", [r"transport/src/endpoint/", r"qp/mod\.rs", r"qp/conn\.rs",
                               r"transport/src/ctx\.rs", r"transport/src/slab\.rs"]),
    ("completions", [r"verbs/cq\.rs"]),
]

LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+([^:\s]+):(.+?)(\s+\[[^\]]*\])?\s*$")


def profile(binary, payload, iters):
    """{(file, function): instructions} of one run."""
    with tempfile.NamedTemporaryFile(suffix=".cg") as out:
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}",
             binary, "--count-iters", str(iters), str(payload)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", out.name],
                              check=True, capture_output=True, text=True).stdout
    costs = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        file, func = m.group(2), m.group(3).strip()
        costs[(file, func)] = costs.get((file, func), 0) + n
    # A function's home: the file of ours that most of its own code comes from.
    best = {}
    for (file, func), n in costs.items():
        if is_ours(file) and n > best.get(func, ("", -1))[1]:
            best[func] = (file, n)
    return costs, {f: v[0] for f, v in best.items()}


def is_ours(file):
    """Code of ours or of a crate we call (not the standard library's, not libc's)."""
    return "/rustc/" not in file and not file.startswith("./")


def side(func):
    return "RX parse" if re.search(r"handle_packet|parse", func) else "TX build (headers)"


def stage_of(file, func, homes):
    where = file if is_ours(file) else homes.get(func, file)
    for name, pats in STAGES:
        if any(re.search(p, where) for p in pats):
            if name == "headers (fields, by side)":
                return side(func)
            if name == "payload copies" and not re.search(r"memmove|memcpy", where):
                return name
            return name
    if re.search(r"memmove|memcpy", func):
        return "payload copies"
    return "other"


def stages(binary, payload, iters):
    (c1, h1), (c2, h2) = profile(binary, payload, iters), profile(binary, payload, 2 * iters)
    homes = {**h1, **h2}
    per = collections.Counter()
    for key in set(c1) | set(c2):
        d = c2.get(key, 0) - c1.get(key, 0)
        per[stage_of(key[0], key[1], homes)] += d
    packets = iters * PACKETS_PER_ITER
    return {k: v / packets for k, v in per.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--ns", type=float, help="measured ns per packet of this build")
    ap.add_argument("--md", action="store_true", help="a Markdown table")
    a = ap.parse_args()
    per = stages(a.binary, a.payload, a.iters)
    total = sum(per.values())
    order = [s for s, _ in STAGES if s != "headers (fields, by side)"] + ["other"]
    rows = [(s, per.get(s, 0.0)) for s in order if abs(per.get(s, 0.0)) >= 0.5]
    if a.md:
        ns = " ns/packet |" if a.ns else ""
        print(f"| stage ({a.payload} B) | instructions/packet | share |{ns}")
        print("|---|---:|---:|" + ("---:|" if a.ns else ""))
    for s, v in rows + [("total", total)]:
        share = 100 * v / total if total else 0
        ns = f" {a.ns * v / total:6.1f} |" if a.ns else ""
        if a.md:
            print(f"| {s} | {v:.0f} | {share:.1f} % |{ns}")
        else:
            print(f"{s:32} {v:8.0f}  {share:5.1f} %{ns.rstrip(' |')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
