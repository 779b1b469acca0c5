#!/usr/bin/env bash
# Run every cargo-fuzz target for a few seconds on stable Rust (-s none: no sanitizer needs
# nightly), starting from the committed corpora. -a (--debug-assertions) turns on debug
# assertions and overflow checks in the optimised build, so an overflow in a decoder or the
# engine panics instead of wrapping. MRC_FUZZ_SECS sets seconds per target.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${MRC_FUZZ_SECS:-4}
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz-smoke: installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi
targets=$(cargo fuzz list)
[ -n "$targets" ] || { echo "fuzz-smoke: no targets"; exit 1; }
# One build of every target first (the runs below then only start them).
cargo fuzz build -s none --release -a
for t in $targets; do
  mkdir -p "corpus/$t"
  # Run on a scratch copy so the committed corpus only grows when someone means it to.
  work=$(mktemp -d)
  cp -r "corpus/$t/." "$work/" 2>/dev/null || true
  echo "fuzz-smoke: $t for ${secs}s"
  log="$work.log"
  status=0
  cargo fuzz run -s none --release -a "$t" "$work" -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E 'stat::number_of_executed_units|SUMMARY|panicked' "$log" || true
  [ "$status" -eq 0 ] || tail -40 "$log"
  rm -f "$log"
  rm -rf "$work"
  [ "$status" -eq 0 ] || { echo "fuzz-smoke: $t FAILED"; exit 1; }
done
