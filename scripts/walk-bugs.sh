#!/usr/bin/env bash
# Guided random walks against plain walks and breadth-first search on every
# seeded bug of the AODV and raft examples: for each bug and each search,
# one run of `cargo cmc check` on one worker, and whether it found the bug,
# how long the search took (its own elapsed time, not the build) and how
# long its trace is.
#
#   bash scripts/walk-bugs.sh
#
# Environment: CMC_BUGS_TIME, the time limit per run in seconds (default
# 120); CMC_BUGS_SEED, the walks' seed (default 1); CMC_BUGS_SEARCHES, the
# searches, a comma-separated subset of `guided,plain,bfs` (default all);
# CMC_BUGS, a comma-separated subset of the rows' bug names (default all);
# CMC, the cargo-cmc binary (default: the one on PATH, as `cargo cmc`).
#
# Each row runs the model with its own bounds, except where the row says
# otherwise: `reverse-route-revive` is too deep for `aodv_4_nodes`'s depth
# bound (7), so that row runs with `--max-depth 60` (as the README's walks
# do) for all three searches. Prints one line per run as it goes, then the
# table in Markdown.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${CMC_BUGS_TIME:-120}
seed=${CMC_BUGS_SEED:-1}
searches=${CMC_BUGS_SEARCHES:-guided,plain,bfs}
only=${CMC_BUGS:-}
if [ -n "${CMC:-}" ]; then cmc=("$CMC" cmc); else cmc=(cargo cmc); fi

# example bug model extra-arguments
rows=(
  "aodv reboot-null-route aodv_3_nodes"
  "aodv invalid-route-reply aodv_3_nodes"
  "aodv linkbreak-no-increment aodv_3_nodes"
  "aodv hopcount-overflow aodv_3_nodes"
  "aodv rerr-seqno aodv_4_line"
  "aodv hopcount-compare aodv_4_ring"
  "aodv gratuitous-self-route aodv_4_ring"
  "aodv reverse-route-revive aodv_3_nodes"
  "aodv reverse-route-revive aodv_4_nodes --max-depth 60"
  "raft send-before-persist raft_3_crash"
  "raft restart-without-hardstate raft_3_crash"
  "raft apply-uncommitted raft_3_replication"
  "raft hardstate-with-entries-only raft_3_crash"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
table="$tmp/table"
echo "walk-bugs: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD), ${secs} s per run, one worker, seed $seed"
for row in "${rows[@]}"; do
  read -r example bug model extra <<<"$row"
  if [ -n "$only" ] && [[ ",$only," != *",$bug,"* ]]; then continue; fi
  line="| \`bug-$bug\` | \`$model\`${extra:+ ($extra)} |"
  for search in guided plain bfs; do
    if [[ ",$searches," != *",$search,"* ]]; then continue; fi
    args=(check --jobs 1 --time-limit "$secs" --features "bug-$bug" --model "$model"
      --manifest-path "$root/examples/$example/Cargo.toml" --message-format json)
    case $search in
      guided) args+=(--strategy walk --seed "$seed") ;;
      plain) args+=(--strategy walk --seed "$seed" --plain-walks) ;;
      bfs) args+=(--strategy bfs) ;;
    esac
    # shellcheck disable=SC2206
    args+=($extra)
    "${cmc[@]}" "${args[@]}" >"$tmp/out" 2>"$tmp/err" || true
    result=$(grep '"type":"result"' "$tmp/out" | head -1 || true)
    if [ -z "$result" ]; then
      echo "no result from ${cmc[*]} ${args[*]}:" >&2
      tail -5 "$tmp/err" >&2
      exit 2
    fi
    read -r found time steps property unique < <(jq -r '[
        (.violations | length > 0),
        (.elapsed_s * 100 | round / 100),
        (.violations[0].trace_len // 0),
        (.violations[0].property // "-"),
        .unique_states] | @tsv' <<<"$result")
    echo "bench walk_bug bug=$bug model=$model search=$search found=$found time_s=$time steps=$steps property=$property unique=$unique"
    if [ "$found" = true ]; then
      line="$line found, ${time} s, ${steps} steps |"
    else
      line="$line not in ${time} s |"
    fi
  done
  echo "$line" >>"$table"
done
echo
head="| bug | model |"
sep="|---|---|"
for search in guided plain bfs; do
  if [[ ",$searches," != *",$search,"* ]]; then continue; fi
  case $search in
    guided) head="$head guided walks |" ;;
    plain) head="$head plain walks |" ;;
    bfs) head="$head breadth-first |" ;;
  esac
  sep="$sep---|"
done
echo "$head"
echo "$sep"
cat "$table"
