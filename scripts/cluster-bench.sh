#!/usr/bin/env bash
# The price of a search across processes (`cargo cmc check --processes
# N`, over Open MPI on this machine) against the same search in one
# process, in one run: for P = 1, 2 and 4 processes of one worker, 1 and
# 2 processes of two workers each (--processes P --jobs 2), and for
# --jobs 1 and --jobs 2 (one process, forked workers sharing memory), the
# wall time,
# states per second, CPU time per state (the command's and all its
# children's: mpirun, the harnesses, their search processes) and bytes
# sent per state (as sent, LZ4-compressed, and before compression), and
# each one's CPU per state over --jobs 1's.
#
#   bash scripts/cluster-bench.sh [MODEL] [DIR]    (RUNS=k: runs each, default 2)
#
# Default: two_phase_commit_8 (1,745,408 states) in examples/two-phase-commit.
# Every search is complete and must find the same count. Both harnesses
# are built first (not timed); each configuration runs twice (RUNS) and
# the faster run counts. Needs Open MPI (bash scripts/install-mpi.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-two_phase_commit_8}
dir=${2:-$root/examples/two-phase-commit}
bash "$root/scripts/install-mpi.sh"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p cargo-cmc
cmc="$root/target/release/cargo-cmc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$dir" && "$cmc" cmc check --model "$model" --max-states 1 >/dev/null 2>&1) || true
(cd "$dir" && "$cmc" cmc check --model "$model" --processes 1 --max-states 1 >/dev/null 2>&1) || true

echo "bench cluster machine cores=$(nproc) date=$(date -u +%Y-%m-%d) model=$model"
base_cpu=
expect=
for config in "--jobs 1" "--jobs 2" "--processes 1" "--processes 2" "--processes 4" \
  "--processes 1 --jobs 2" "--processes 2 --jobs 2"; do
  best_cpu=1e18 best_wall=0 unique=0 sent=0
  for _ in $(seq "${RUNS:-2}"); do
    (cd "$dir" && /usr/bin/time -f '%e %U %S' -o "$tmp/time" \
      "$cmc" cmc check --strategy bfs --model "$model" $config --message-format json \
      >"$tmp/out" 2>"$tmp/err") || { cat "$tmp/err" >&2; exit 1; }
    read -r wall user sys <"$tmp/time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{print u + s}')
    unique=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    v=json.loads(l)
    if v.get("type")=="result": print(v["unique_states"], v.get("sent_bytes",0), v.get("sent_raw_bytes",0), v["verdict"])' "$tmp/out")
    read -r unique sent raw verdict <<<"$unique"
    [ "$verdict" = pass ] || { echo "expected a complete search, got $verdict" >&2; exit 1; }
    if awk -v a="$cpu" -v b="$best_cpu" 'BEGIN{exit !(a < b)}'; then
      best_cpu=$cpu best_wall=$wall
    fi
  done
  [ -z "$expect" ] && expect=$unique
  [ "$unique" = "$expect" ] || { echo "$config found $unique states, --jobs 1 $expect" >&2; exit 1; }
  [ -z "$base_cpu" ] && base_cpu=$best_cpu
  awk -v c="$config" -v n="$unique" -v w="$best_wall" -v t="$best_cpu" -v b="$base_cpu" -v s="$sent" -v r="$raw" 'BEGIN{
    gsub(/^--/, "", c); gsub(/ --/, ",", c); gsub(/ /, "=", c);
    printf "bench cluster %s unique=%d wall_s=%.2f states_per_s=%.0f cpu_us_per_state=%.2f sent_bytes_per_state=%.1f uncompressed=%.1f cpu_over_jobs1=%.2f\n",
      c, n, w, n / w, 1e6 * t / n, s / n, r / n, t / b }'
done
