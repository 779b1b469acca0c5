#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this). On a fresh Debian machine with Rust:
# installs the Debian packages it needs (when root), builds, runs every test, and cleans up what
# it made (namespaces, veths, processes, temporary files).
#
#   scripts/test.sh            everything (root adds the kernel-SRv6 and DPDK-in-namespace tests)
#   MRC_FUZZ_SECS=60 scripts/test.sh   a longer fuzz smoke run (default: a few seconds per target)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

# Root runs the tests that need namespaces and raw sockets; there, a missing prerequisite is a
# failure rather than a skip.
if [ "$(id -u)" -eq 0 ]; then export MRC_REQUIRE_ALL=1; fi

# A test that skips (a prerequisite missing; the runner still shows it `ok`) records why in
# this file (`mrc-skip`); the list is printed at the end, whether the run passed or not.
MRC_SKIP_LOG=$(mktemp -t mrc-skips.XXXXXX)
export MRC_SKIP_LOG
skipped() {
  local n
  n=$(sort -u "$MRC_SKIP_LOG" | grep -c . || true)
  if [ "$n" -gt 0 ]; then
    echo "== $n tests skipped (run as root, with scripts/install-deps.sh's packages, on a kernel with SRv6, to run them):"
    sort -u "$MRC_SKIP_LOG" | awk -F '\t' '{ printf "  %s: %s\n", $1, $2 }'
  fi
  rm -f "$MRC_SKIP_LOG"
}
trap skipped EXIT

echo "== cargo test (workspace)"
cargo test --workspace --all-targets --locked --no-fail-fast

echo "== doctests (the examples in the API docs compile, and run unless marked no_run)"
cargo test --workspace --doc --locked --no-fail-fast

echo "== the workspace without DPDK (MRC_DPDK_DISABLE=1: what a machine without libdpdk-dev builds)"
MRC_DPDK_DISABLE=1 cargo check --workspace --all-targets --locked --target-dir target/nodpdk

echo "== fuzz smoke"
scripts/fuzz-smoke.sh

if [ -s "$MRC_SKIP_LOG" ]; then
  echo "== all tests that ran passed"
else
  echo "== all tests passed"
fi
