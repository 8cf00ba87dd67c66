#!/usr/bin/env bash
# Where a scan's time goes, phase by phase: runs `xlens scan --timings` RUNS times (default 5) on
# each profile and prints, per phase, the median wall time in ms (a Markdown table for
# BENCHMARKS.md). Phases: `open` (mapping and parsing the file), the shared analyses
# (`timeline`, `modules`, `host_ops`, `op_profile`, `steps`, `anatomy`, `chip`), each detector
# by id, `scan` (the whole scan) and `render`. Phases of 1 ms or less in every profile are left out.
#
#   scripts/bench_phases.sh NAME=PROFILE [NAME=PROFILE ...]
#
# Set THREADS=1 for one worker thread (RAYON_NUM_THREADS). Needs a release build of the `xlens`
# binary (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --features cli --bin xlens >&2
XLENS=./target/release/xlens
RUNS=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
names=()
for arg in "$@"; do
  name=${arg%%=*}
  path=${arg#*=}
  names+=("$name")
  for run in $(seq "$RUNS"); do
    RAYON_NUM_THREADS=${THREADS:-0} "$XLENS" scan "$path" --quiet --timings 2>&1 >/dev/null |
      awk -v run="$run" '/^  / { print $1, $2, run }'
  done >"$tmp/$name"
done
# One row per phase (in the order first seen), one column per profile: the median over runs.
awk -v names="${names[*]}" -v dir="$tmp" '
  BEGIN {
    n = split(names, cols, " ")
    for (c = 1; c <= n; c++) {
      file = dir "/" cols[c]
      while ((getline line < file) > 0) {
        split(line, f, " ")
        if (!(f[1] in seen)) { seen[f[1]] = ++phases; order[phases] = f[1] }
        k = f[1] SUBSEP c
        vals[k] = vals[k] " " f[2]
      }
    }
    header = "| phase (ms, median) |"; rule = "|---|"
    for (c = 1; c <= n; c++) { header = header " " cols[c] " |"; rule = rule "---|" }
    print header; print rule
    for (p = 1; p <= phases; p++) {
      row = "| " order[p] " |"; keep = 0
      for (c = 1; c <= n; c++) {
        m = split(vals[order[p] SUBSEP c], v, " ")
        if (m == 0) { row = row " |"; continue }
        # insertion sort, then the middle value
        for (i = 2; i <= m; i++) { x = v[i] + 0; j = i - 1; while (j >= 1 && v[j] + 0 > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
        med = v[int((m + 1) / 2)]
        if (med + 0 > 1) keep = 1
        row = row " " sprintf("%.0f", med) " |"
      }
      if (keep) print row
    }
  }'
