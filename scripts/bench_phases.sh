#!/usr/bin/env bash
# Where a scan's time goes, phase by phase: runs `xlens scan --timings` RUNS times (default 5) on
# each profile and prints, per phase, the median wall time in ms (a Markdown table for
# BENCHMARKS.md). Phases: `open` (mapping and parsing the file), the shared analyses
# (`timeline`, `modules`, `host_ops`, `graph_kernels`, `gpu_costs`, `op_profile`, `steps`, `duty_cycle`, `anatomy`,
# `step_medians`, `chip`), each detector by id, `summary` (the health snapshot), `scan` (the
# whole scan) and `render`. Phases of 1 ms or less everywhere are left out.
#
#   scripts/bench_phases.sh NAME=PROFILE [NAME=PROFILE ...]
#
# BUILDS="before=/path/to/old/xlens after=target/release/xlens" compares builds: every run goes
# through the builds in turn (the VM's speed drifts by tens of percent within minutes, so runs
# are interleaved), and each profile gets one column per build. Without BUILDS, the release
# build of the `xlens` binary is built and used. THREADS=1 runs on one worker thread.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BUILDS:-}" ]; then
  cargo build --release --features cli --bin xlens >&2
  BUILDS="xlens=./target/release/xlens"
fi
RUNS=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cols=()
for arg in "$@"; do
  for build in $BUILDS; do
    if [ "$(echo "$BUILDS" | wc -w)" -gt 1 ]; then cols+=("${arg%%=*}/${build%%=*}"); else cols+=("${arg%%=*}"); fi
  done
done
for run in $(seq "$RUNS"); do
  c=0
  for arg in "$@"; do
    for build in $BUILDS; do
      RAYON_NUM_THREADS=${THREADS:-0} "${build#*=}" scan "${arg#*=}" --quiet --timings 2>&1 >/dev/null |
        awk '/^  / { print $1, $2 }' >>"$tmp/$c"
      c=$((c + 1))
    done
  done
done
# One row per phase (in the order first seen), one column per profile and build: the median.
awk -v names="${cols[*]}" -v dir="$tmp" '
  BEGIN {
    n = split(names, cols, " ")
    for (c = 1; c <= n; c++) {
      file = dir "/" (c - 1)
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
        for (i = 2; i <= m; i++) { x = v[i] + 0; j = i - 1; while (j >= 1 && v[j] + 0 > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
        med = v[int((m + 1) / 2)]
        if (med + 0 > 1) keep = 1
        row = row " " sprintf("%.0f", med) " |"
      }
      if (keep) print row
    }
  }'
