#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# (headless Chromium for the HTML report test), then runs every test in
# release mode (model checking is slow in debug builds).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null && [ -z "${CMC_SKIP_BROWSER_TESTS:-}" ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq chromium >/dev/null
fi

# Each step's duration, for finding what makes the suite long.
step() {
  local t=$SECONDS
  "$@"
  echo "test.sh: $((SECONDS - t)) s: $*" >&2
}

step cargo test --workspace --release

# Every seeded bug of the AODV example, each with its feature: cmc must find
# it (the property and the shortest trace's length are asserted), and the
# scripted RERR race must close its loop exactly under its own feature.
for bug in rerr-seqno hopcount-compare reboot-null-route invalid-route-reply \
           hopcount-overflow gratuitous-self-route linkbreak-no-increment; do
  step cargo test --release -p aodv --test check --test rerr_race --features "bug-$bug"
done

# The deepest seeded bug, which breadth-first search does not reach in
# aodv_4_nodes (random walks do): its scripted sequence and a recorded
# walk trace, replayed.
step cargo test --release -p aodv --test check --test reverse_route_revive \
  --features bug-reverse-route-revive

# The membership example's seeded bug (ordinary std collections, a
# Debug-only message type): found, and its trace replays.
step cargo test --release -p membership --features bug-refute-without-adopting

# The tutorial's roles model with its seeded bug: found, with the trace
# the book shows, against the reference.
step cargo test --release -p tutorial --features bug-regrant
step cargo test --release -p cmc-tests --test roles --features tutorial/bug-regrant

# The second flagship: tikv's raft crate (from crates.io, unmodified) under
# a small key-value store. Its own workspace and target directory; the
# election model in full, a command committed, and each seeded bug found
# with its shortest trace, which replays.
step cargo test --release --manifest-path examples/raft/Cargo.toml
for bug in send-before-persist restart-without-hardstate apply-uncommitted \
           hardstate-with-entries-only; do
  step cargo test --release --manifest-path examples/raft/Cargo.toml --test check \
    --features "bug-$bug"
done

# The two-phase commit example's seeded bug.
step cargo test --release -p two-phase-commit --features bug-commit-without-all-prepared

# The third-party-style library checked from its check crate: with the
# seeded bug, cmc finds it in the shortest trace a plain search finds.
step cargo test --release -p stopwait-cmc --features bug-stale-ack

echo "test.sh: $SECONDS s in all" >&2
