#!/usr/bin/env bash
# The price of `cargo cmc check --coverage`: the same search with and
# without it, in one run, on two-phase commit and on the AODV flagship.
# Prints, per model, the CPU time per state of each (the command's own and
# its children's: the harness, its workers, llvm-profdata and llvm-cov) and
# their ratio.
#
#   bash scripts/coverage-overhead.sh [STATES]
#
# Each search stops after STATES unique states (default 300000) on one
# worker. Both harnesses are built first (not timed), then each search
# runs three times, alternating, and the fastest run of each counts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
states=${1:-300000}
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p cargo-cmc
cmc="$root/target/release/cargo-cmc"

measure() {
  local dir=$1 model=$2
  local args=(cmc check --model "$model" --max-states "$states" --jobs 1)
  (cd "$dir" && "$cmc" "${args[@]}" >/dev/null 2>&1) || true
  (cd "$dir" && "$cmc" "${args[@]}" --coverage >/dev/null 2>&1) || true
  local best_plain=1e9 best_cov=1e9 unique=0 t flag
  for _ in 1 2 3; do
    for flag in "" --coverage; do
      (cd "$dir" && /usr/bin/time -f '%U %S' -o "$tmp/time" "$cmc" "${args[@]}" $flag >"$tmp/out" 2>&1) || {
        cat "$tmp/out" >&2
        exit 1
      }
      t=$(awk '{print $1 + $2}' "$tmp/time")
      unique=$(grep -o 'unique=[0-9]*' "$tmp/out" | head -1 | cut -d= -f2)
      if [ -z "$flag" ]; then
        best_plain=$(awk -v a="$best_plain" -v b="$t" 'BEGIN{print (b < a) ? b : a}')
      else
        best_cov=$(awk -v a="$best_cov" -v b="$t" 'BEGIN{print (b < a) ? b : a}')
      fi
    done
  done
  awk -v m="$model" -v s="$unique" -v p="$best_plain" -v c="$best_cov" 'BEGIN{
    printf "%-20s %9d states  plain %6.2f us/state  --coverage %6.2f us/state  ratio %.2f\n",
      m, s, 1e6 * p / s, 1e6 * c / s, c / p }'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "coverage overhead, $(nproc) cores, $(date -u +%Y-%m-%d), $states states per search, one worker"
measure "$root/examples/two-phase-commit" two_phase_commit_7
measure "$root/examples/aodv" aodv_4_nodes
