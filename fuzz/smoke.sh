#!/usr/bin/env bash
# A short run of every fuzz target from its seeds (CI's smoke step; the
# long runs are in fuzz/README.md). Usage: fuzz/smoke.sh [SECONDS] [TARGET...]
# Fails on the first crash; its input is left in fuzz/artifacts/<target>/.
# FUZZ_PROFILE=release (the default) builds optimised, for long runs;
# FUZZ_PROFILE=dev builds without optimisation: minutes less to build,
# fewer executions per second, the right trade for CI's seconds per target.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
shift || true
# cargo-fuzz needs nightly rustc flags (-Zsanitizer, -Cpasses=sancov-module);
# RUSTC_BOOTSTRAP=1 lets the stable toolchain take them (fuzz/README.md).
export RUSTC_BOOTSTRAP=1
# The fuzz build's own target directory (instrumented, release), kept
# between runs; never the node's.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
case "${FUZZ_PROFILE:-release}" in
release) flags=(--sanitizer none --debug-assertions) ;;
dev) flags=(--sanitizer none --dev) ;;
*)
  echo "FUZZ_PROFILE is release or dev, not ${FUZZ_PROFILE}" >&2
  exit 2
  ;;
esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list | grep -vx seeds)
fi
cargo fuzz build "${flags[@]}"
mkdir -p fuzz/corpus
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  log="fuzz/corpus/$t.log"
  echo "--- fuzz $t (${secs}s)"
  if ! cargo fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $t failed: the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  grep -E 'cov: ' "$log" | tail -n 1 | cut -d' ' -f1-9 || true
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
done
