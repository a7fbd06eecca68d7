#!/usr/bin/env bash
# The test suite, from a fresh machine: installs what the tests need
# (headless Chromium for the HTML report test), then runs the tests in
# release mode (model checking is slow in debug builds).
#
#   bash scripts/test.sh              every test but the long ones, and one
#                                     seeded bug of each of the workspace's
#                                     examples
#   bash scripts/test.sh --full       everything: the above, then the rest
#   bash scripts/test.sh --full-only  only what --full adds (CI runs the
#                                     default and then this: nothing twice)
#
# The tests run under cargo-nextest when it is installed (it is on the
# reference machine): every test in a process of its own, the two cores
# kept busy across test binaries, where `cargo test` runs one binary at a
# time. Without it, `cargo test` runs them (a few minutes longer).
#
# What --full adds: Open MPI (scripts/install-mpi.sh), the long tests of
# the workspace (each `#[ignore]`d with its reason, run here with
# `--ignored`; the searches across processes among them, two of which
# install an ssh server and Slurm and need root), the other seeded
# bugs of the AODV
# example, the roles test with the tutorial's seeded bug, and the raft
# example (its own workspace: the raft crate's and the runtime's builds,
# and each seeded bug a build of its own).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-default}
case $mode in
  default | --full | --full-only) ;;
  *)
    echo "usage: bash scripts/test.sh [--full | --full-only]" >&2
    exit 2
    ;;
esac

# Headless Chromium for the HTML report tests, installed in the background
# while the tests build; the tests wait for it (`browser`).
browser_log=$(mktemp)
browser_pid=
if [ "$mode" != --full-only ] && ! command -v chromium >/dev/null \
  && [ -z "${CMC_SKIP_BROWSER_TESTS:-}" ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  { $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium; } \
    >"$browser_log" 2>&1 &
  browser_pid=$!
fi
browser() {
  if [ -n "$browser_pid" ]; then
    wait "$browser_pid" || { cat "$browser_log" >&2; echo "test.sh: installing chromium failed" >&2; exit 1; }
    browser_pid=
  fi
}

# The toolchain's llvm-tools, for the coverage test (`cargo cmc check
# --coverage` installs them itself when missing; here they install while
# the tests build).
tools_log=$(mktemp)
tools_pid=
if [ "$mode" != --full-only ] && command -v rustup >/dev/null; then
  rustup component add llvm-tools >"$tools_log" 2>&1 &
  tools_pid=$!
fi
tools() {
  if [ -n "$tools_pid" ]; then
    wait "$tools_pid" || { cat "$tools_log" >&2; echo "test.sh: installing llvm-tools failed" >&2; exit 1; }
    tools_pid=
  fi
}

if cargo nextest --version >/dev/null 2>&1; then
  nextest=1
else
  nextest=
  echo "test.sh: cargo-nextest is not installed; running the tests with cargo test" >&2
fi

# Runs the tests cargo selects with "$@"; `--ignored` runs only the
# ignored ones.
run_tests() {
  local ignored=
  if [ "${1:-}" = --ignored ]; then
    ignored=1
    shift
  fi
  if [ -n "$nextest" ]; then
    step cargo nextest run --release --no-fail-fast \
      ${ignored:+--run-ignored only} "$@"
  else
    step cargo test --release "$@" ${ignored:+-- --ignored}
  fi
}

# Each step's duration, for finding what makes the suite long.
step() {
  local t=$SECONDS
  "$@"
  echo "test.sh: $((SECONDS - t)) s: $*" >&2
}

# A seeded bug is a build of its package with the bug's feature. Cargo
# resolves the dependencies' features for the packages it is given, and
# cargo-cmc's dependencies enable some that the examples' do not: naming
# cargo-cmc too (it has no test of these names) keeps the dependencies, and
# so the runtime, as the workspace's build made them instead of building
# them again.
seeded() {
  run_tests -p cargo-cmc "$@"
}

# The raft example is a workspace of its own (tikv's raft crate from
# crates.io, unmodified, under a small key-value store), built in the same
# target directory: what it shares with the workspace is built once.
raft=(--manifest-path examples/raft/Cargo.toml
      --target-dir "${CARGO_TARGET_DIR:-target}")

default_part() {
  # The build first (while Chromium installs), then the tests, then the
  # examples in the documentation, which nextest does not run.
  step cargo test --workspace --release --no-run
  browser
  tools
  run_tests --workspace
  [ -z "$nextest" ] || step cargo test --workspace --release --doc

  # One seeded bug of each example, in one build: cmc must find it (the
  # property and the shortest trace's length are asserted) and its trace
  # replays. AODV's invalid route reply, the README's flagship bug (with
  # and without symmetry reduction; the stale RERR, whose breadth-first
  # search alone takes a minute, runs in the full part); the membership
  # example's (ordinary std collections, a Debug-only
  # message type); the tutorial's roles model, with the trace the book
  # shows; the two-phase commit's; and the third-party-style library's,
  # checked from its check crate, found in the shortest trace a plain
  # search finds.
  seeded -p aodv -p membership -p tutorial -p two-phase-commit -p stopwait-cmc \
    --features aodv/bug-invalid-route-reply,membership/bug-refute-without-adopting \
    --features tutorial/bug-regrant,two-phase-commit/bug-commit-without-all-prepared \
    --features stopwait-cmc/bug-stale-ack \
    --test check --test rerr_race --test book
}

full_part() {
  # Open MPI, for the tests of a search across processes
  # (cargo-cmc/tests/cluster.rs, among the long tests).
  step bash scripts/install-mpi.sh

  # The long tests of the workspace, built by the default part.
  run_tests --ignored --workspace --tests

  # The other seeded bugs of the AODV example, each with its feature, and
  # the scripted RERR race, which must close its loop exactly under its own
  # feature.
  for bug in rerr-seqno hopcount-compare reboot-null-route \
             hopcount-overflow gratuitous-self-route linkbreak-no-increment; do
    seeded -p aodv --test check --test rerr_race --features "aodv/bug-$bug"
  done

  # The deepest seeded bug, which breadth-first search does not reach in
  # aodv_4_nodes (random walks do): its scripted sequence and a recorded
  # walk trace, replayed.
  seeded -p aodv --test check --test reverse_route_revive \
    --features aodv/bug-reverse-route-revive

  # The roles model of the tutorial with its seeded bug, against the
  # reference.
  seeded -p cmc-tests --test roles --features tutorial/bug-regrant

  # The second flagship: the election model in full, a command committed,
  # and each seeded bug found with its shortest trace, which replays.
  run_tests "${raft[@]}"
  for bug in send-before-persist restart-without-hardstate apply-uncommitted \
             hardstate-with-entries-only; do
    run_tests "${raft[@]}" --test check --features "bug-$bug"
  done
}

case $mode in
  default) default_part ;;
  --full)
    default_part
    full_part
    ;;
  --full-only) full_part ;;
esac

echo "test.sh: $SECONDS s in all" >&2
