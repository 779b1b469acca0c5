#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this). On a fresh Debian machine with Rust:
# installs what it needs (when root: Debian packages, and the kernel VM that runs the
# kernel-switch tests where this kernel has no SRv6), builds, runs every test, and cleans up what
# it made (namespaces, veths, processes, VMs, temporary files).
#
#   scripts/test.sh            everything (root adds the kernel-SRv6 and DPDK-in-namespace tests)
#   MRC_FUZZ_SECS=60 scripts/test.sh   a longer fuzz smoke run (default: a few seconds per target)
#   MRC_KERNEL_VM=1 scripts/test.sh    the kernel-switch tests in the VM even where this kernel
#                                      has SRv6 (MRC_KERNEL_VM=0: never in a VM)
#
# Every stage runs, whatever the one before did; the script reports each stage's time and
# result, and fails at the end if any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# Root runs the tests that need namespaces and raw sockets; there, a missing prerequisite is a
# failure rather than a skip.
if [ "$(id -u)" -eq 0 ]; then export MRC_REQUIRE_ALL=1; fi

# A test that skips (a prerequisite missing; the runner still shows it `ok`) records why in
# this file (`mrc-skip`); the list is printed at the end, whether the run passed or not.
MRC_SKIP_LOG=$(mktemp -t mrc-skips.XXXXXX)
export MRC_SKIP_LOG

started=$SECONDS
results=()
failed=0
# stage NAME COMMAND...: runs it, records "NAME: ok|FAILED (N s)".
stage() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name"
  if "$@"; then
    results+=("ok      $(printf '%5d' $((SECONDS - t0))) s  $name")
  else
    results+=("FAILED  $(printf '%5d' $((SECONDS - t0))) s  $name")
    failed=1
  fi
}

summary() {
  local n
  n=$(sort -u "$MRC_SKIP_LOG" | grep -c . || true)
  if [ "$n" -gt 0 ]; then
    echo "== $n tests skipped (run as root after scripts/install-deps.sh to run them):"
    sort -u "$MRC_SKIP_LOG" | awk -F '\t' '{ printf "  %s: %s\n", $1, $2 }'
  fi
  rm -f "$MRC_SKIP_LOG"
  echo "== stages ($((SECONDS - started)) s in all):"
  printf '  %s\n' "${results[@]}"
}
trap summary EXIT

stage "install the dependencies" scripts/install-deps.sh
stage "cargo test (workspace)" cargo test --workspace --all-targets --locked --no-fail-fast
stage "doctests (the examples in the API docs compile, and run unless marked no_run)" \
  cargo test --workspace --doc --locked --no-fail-fast
stage "the workspace without DPDK (MRC_DPDK_DISABLE=1: what a machine without libdpdk-dev builds)" \
  env MRC_DPDK_DISABLE=1 cargo check --workspace --all-targets --locked --target-dir target/nodpdk
stage "fuzz smoke" scripts/fuzz-smoke.sh

if [ "$failed" -ne 0 ]; then
  echo "== FAILED: a stage failed (the list below)"
  exit 1
fi
if [ -s "$MRC_SKIP_LOG" ]; then
  echo "== all tests that ran passed"
else
  echo "== all tests passed"
fi
