#!/usr/bin/env bash
# Instructions per op event of the TPU timeline walk, counted by callgrind: a measure that the
# VM's noise does not move, for changes of a few percent that wall-clock runs cannot resolve.
#
#   scripts/instr_per_op.sh BIN [BIN ...]
#
# Each BIN is an `xlens` binary (build one per commit and copy it aside, as for bench_ab.sh). The
# profile is a 20 MB device-only snapshot (`xlens synth --device-only --size 20MB`, written to
# $SNAPSHOT, default target/instr_snapshot, when missing): four TensorCores of 286,000 ops each.
# The scan runs on one worker thread under valgrind (about 5 s a binary). Printed per binary: the
# whole scan's instructions and the timeline walk's (`walk_core`, with what it calls), each over
# the op events of the profile. The walk's figure includes a fixed part (the op metadata of 2000
# ops per core, about 75 instructions an op here) that a larger profile spreads thinner.
#
# Needs: valgrind (callgrind, callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/.."
SNAPSHOT=${SNAPSHOT:-target/instr_snapshot}
if [ $# -eq 0 ]; then
  echo "usage: scripts/instr_per_op.sh BIN [BIN ...]" >&2
  exit 2
fi
if [ ! -d "$SNAPSHOT" ]; then
  "$1" synth --device-only --size 20MB --out "$SNAPSHOT" >/dev/null
fi
ops=$("$1" inventory "$SNAPSHOT" | awk '$1 == "line" && $2 == "XLA" && $3 == "Ops" { n += $4 } END { print n }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '| binary | op events | scan (instructions / op) | timeline walk (instructions / op) |\n|---|---|---|---|\n'
for bin in "$@"; do
  RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$bin" scan "$SNAPSHOT" --json --quiet \
    >/dev/null 2>"$tmp/log"
  callgrind_annotate --inclusive=yes "$tmp/cg" >"$tmp/ann" 2>/dev/null
  total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$tmp/ann")
  walk=$(awk '/timeline::walk_core \[/ { gsub(",", "", $1); print $1; exit }' "$tmp/ann")
  awk -v b="$bin" -v n="$ops" -v t="$total" -v w="${walk:-0}" \
    'BEGIN { printf "| %s | %d | %.1f | %.1f |\n", b, n, t / n, w / n }'
done
