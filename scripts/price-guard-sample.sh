#!/usr/bin/env bash
# The price of the sampled second evaluation of guards (a guard that reads
# something outside the state, such as a static counter, is caught by a
# default check because a sample of states has its guards evaluated again
# after their transitions ran): time per state of the same breadth-first
# searches with the sample off, as it is by default, and on every state,
# in one run, interleaved (off, sampled, all; three rounds), on one worker.
#
#   bash scripts/price-guard-sample.sh
#
# Uses the `cargo cmc` on the PATH (`cargo install --locked --path
# cargo-cmc` first). `CMC_GUARD_SAMPLE` (off, sampled, all) is the
# runtime's knob for this bench. Prints, per model and setting, the median
# microseconds per state of the three rounds and its ratio to `off`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

runs=(
  "examples/two-phase-commit/Cargo.toml two_phase_commit::two_phase_commit_8"
  "examples/aodv/Cargo.toml aodv::model::aodv_3_nodes --max-states 600000"
)

# One search: prints "unique elapsed_s" from its JSON result.
search() {
  local sample=$1 manifest=$2 model=$3
  shift 3
  CMC_GUARD_SAMPLE=$sample cargo cmc check --manifest-path "$root/$manifest" \
    --model "$model" --jobs 1 --strategy bfs --message-format json "$@" 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    o = json.loads(line)
    if o.get("type") == "result":
        print(o["unique_states"], o["elapsed_s"])
'
}

echo "guard sample price on $(nproc) cores, $(date -u +%Y-%m-%d), one worker, median of 3 rounds"
for run in "${runs[@]}"; do
  read -r -a args <<<"$run"
  manifest=${args[0]} model=${args[1]}
  extra=("${args[@]:2}")
  # Built once before timing.
  search off "$manifest" "$model" --max-states 1 >/dev/null
  declare -A us=()
  for round in 1 2 3; do
    for sample in off sampled all; do
      read -r unique secs < <(search "$sample" "$manifest" "$model" "${extra[@]}")
      us[$sample]+="$(python3 -c "print($secs * 1e6 / $unique)") "
      states=$unique
    done
  done
  python3 - "$model" "$states" "${us[off]}" "${us[sampled]}" "${us[all]}" <<'EOF'
import statistics, sys
model, states = sys.argv[1], sys.argv[2]
med = [statistics.median(float(x) for x in a.split()) for a in sys.argv[3:6]]
for name, m in zip(["off", "sampled", "all"], med):
    print(f"bench guard_sample model={model} states={states} sample={name} "
          f"us_per_state={m:.3f} ratio_to_off={m / med[0]:.3f}")
EOF
  unset us
done
