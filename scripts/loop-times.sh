#!/usr/bin/env bash
# The everyday loop, timed: how long `cargo cmc check` takes from the
# command to the first explored state after each thing a user does between
# two checks, on a copy of the AODV flagship and on a scratch crate made by
# `cargo cmc init`, each with a target directory of its own (as a user's
# project has). Prints one line per step and the size of each target
# directory.
#
#   bash scripts/loop-times.sh [WORK_DIR]
#
# WORK_DIR (default: a fresh temporary directory, removed at the end) holds
# the two projects; give one to keep them. Nothing in the checkout is
# modified. Each step runs
#
#   cargo cmc check --model M --max-states 1
#
# which builds what changed, starts the harness and stops at the first
# state: the wall time is what the user waits before the search runs.
# Steps: the first build (cold: the runtime and every dependency), a check
# with nothing changed, a one-line edit of the code under check, a switch
# to a feature not built before, and a switch back to the feature set
# built just before. The issue's targets (edit and switch at most 20 s,
# switch back at most 5 s) are printed next to them; the script does not
# fail on timings (they depend on the machine and its load), only when a
# check fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -gt 1 ]; then
  echo "usage: bash scripts/loop-times.sh [WORK_DIR]" >&2
  exit 2
fi
if [ $# -eq 1 ]; then
  work=$1
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

echo "loop-times: building cargo-cmc" >&2
cargo build --release --locked -q -p cargo-cmc --manifest-path "$root/Cargo.toml"
cmc_bin="$root/target/release/cargo-cmc"
# `cargo cmc ...` as cargo runs it: `cargo-cmc cmc ...`, with this build.
cmc() { "$cmc_bin" cmc "$@"; }

log=$work/loop-times.log
: >"$log"
now() { date +%s.%N; }

# step PROJECT STEP LIMIT MANIFEST MODEL [FLAGS...]: times one check.
step() {
  local project=$1 name=$2 limit=$3 manifest=$4 model=$5
  shift 5
  local start end
  echo "== $project: $name" >>"$log"
  start=$(now)
  if ! cmc check --manifest-path "$manifest" --model "$model" --max-states 1 "$@" >>"$log" 2>&1; then
    echo "loop-times: the check of $project ($name) failed; its output:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  end=$(now)
  awk -v p="$project" -v s="$name" -v a="$start" -v b="$end" -v l="$limit" \
    'BEGIN { t = b - a; m = "";
             if (l != "") m = sprintf("(target <= %s s: %s)", l, t <= l ? "met" : "NOT met");
             printf "%-9s %-34s %7.1f s  %s\n", p, s, t, m }'
}

size() {
  local project=$1 dir=$2
  printf "%-9s %-34s %7s\n" "$project" "target directory" "$(du -sh "$dir" | cut -f1)"
}

echo "cmc loop times on $(nproc) cores, $(date -u +%Y-%m-%d), $(rustc -V)"
echo "each: cargo cmc check --model M --max-states 1 (build, start, first state)"

# --- The AODV flagship, copied out of the workspace with its own target.
aodv=$work/aodv
rm -rf "$aodv"
mkdir -p "$aodv"
cp -r "$root/examples/aodv/src" "$aodv/"
cat >"$aodv/Cargo.toml" <<EOF
[package]
name = "aodv"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
cmc = { package = "cmc-runtime", path = "$root/cmc-runtime" }

[features]
$(sed -n '/^\[features\]/,/^\[/{/^bug-/p}' "$root/examples/aodv/Cargo.toml")

[workspace]
EOF
cp "$root/Cargo.lock" "$aodv/Cargo.lock"
m=aodv::model::aodv_2_nodes
step aodv "first build" "" "$aodv/Cargo.toml" $m
step aodv "nothing changed" "" "$aodv/Cargo.toml" $m
grep -q 'pub const HELLO_INTERVAL: u32 = 1000;' "$aodv/src/lib.rs" \
  || { echo "loop-times: HELLO_INTERVAL is no longer 1000 in examples/aodv/src/lib.rs" >&2; exit 1; }
sed -i 's/pub const HELLO_INTERVAL: u32 = 1000;/pub const HELLO_INTERVAL: u32 = 1001;/' "$aodv/src/lib.rs"
step aodv "one-line edit" 20 "$aodv/Cargo.toml" $m
step aodv "feature switch" 20 "$aodv/Cargo.toml" $m --features bug-rerr-seqno
step aodv "switch back" 5 "$aodv/Cargo.toml" $m
size aodv "$aodv/target"

# --- A scratch crate and the check crate `cargo cmc init` makes for it.
scratch=$work/scratch
rm -rf "$scratch"
(cd "$work" && cargo new --lib --vcs none -q scratch)
printf '\n[features]\nprobe = []\n' >>"$scratch/Cargo.toml"
(cd "$scratch" && cmc init >>"$log" 2>&1)
m=scratch_cmc::sample
step scratch "first build" "" "$scratch/cmc/Cargo.toml" $m
step scratch "nothing changed" "" "$scratch/cmc/Cargo.toml" $m
echo 'pub const PROBE: u32 = 1;' >>"$scratch/src/lib.rs"
step scratch "one-line edit" 20 "$scratch/cmc/Cargo.toml" $m
step scratch "feature switch (of the library)" 20 "$scratch/cmc/Cargo.toml" $m --features probe
step scratch "switch back" 5 "$scratch/cmc/Cargo.toml" $m
size scratch "$scratch/cmc/target"
