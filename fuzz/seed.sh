#!/usr/bin/env bash
# Rebuilds the seed corpora, fuzz/seeds/<target>/, from the repository's
# golden vectors and examples (proto/) and the testbed's publishers, with
# the seed writer src/bin/seeds.rs (built with the fuzz targets, so it
# reuses their build). Run it after a format, a vector or the testbed
# changes, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
SEEDS_DIR="$PWD/fuzz/seeds" cargo fuzz run --sanitizer none --debug-assertions seeds
du -sh fuzz/seeds
for d in fuzz/seeds/*/; do printf '%-14s %3d seeds\n' "$(basename "$d")" "$(ls "$d" | wc -l)"; done
