#!/usr/bin/env bash
# Times XProf's CLI and xlens's fault_scan on the same profiles, one after the other, and prints
# wall time and peak RSS of each with the ratios (a Markdown table for BENCHMARKS.md).
#
#   scripts/bench_vs_xprof.sh NAME=PROFILE_DIR [NAME=PROFILE_DIR ...]
#
# PROFILE_DIR holds one or more *.xplane.pb (a session directory). XProf runs on a fresh scratch
# copy with a fresh TMPDIR each time, so neither its result cache nor the cache files it writes
# next to a trace are reused (the --bypass_cache equivalent, facts §10.11).
# fault_scan is run RUNS times (default 5) and its median run is reported; XProf runs once.
# Needs: /usr/bin/time, XProf (XPROF, default /work/.venv-jax/bin/xprof), a release build of the
# fault_scan example (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
XPROF=${XPROF:-/work/.venv-jax/bin/xprof}
SCAN=./target/release/examples/fault_scan
cargo build --release --example fault_scan >&2

# run LABEL CMD...: prints "wall_s peak_kb" of the command (output discarded).
measure() {
  local tmp
  tmp=$(mktemp)
  /usr/bin/time -o "$tmp" -f '%e %M' "$@" >/dev/null 2>&1 || true
  tail -n 1 "$tmp"
  rm -f "$tmp"
}

# median RUNS CMD...: "wall_s peak_kb" of the run with the median wall time (the VM's timing noise
# is large, so fault_scan, which takes about a second, is run several times).
median() {
  local runs=$1
  shift
  for _ in $(seq "$runs"); do measure "$@"; done | sort -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'
}

xprof_run() { # xprof_run COMMAND PROFILE_DIR
  local cmd=$1 dir=$2 scratch
  scratch=$(mktemp -d)
  mkdir -p "$scratch/session"
  cp "$dir"/*.xplane.pb "$scratch/session/"
  ( cd "$scratch" && TMPDIR="$scratch" measure "$XPROF" "$cmd" session )
  rm -rf "$scratch"
}

echo "| profile | size | tool | wall (s) | peak RSS (MiB) | fault_scan faster by | fault_scan RSS share |"
echo "|---|---|---|---|---|---|---|"
for arg in "$@"; do
  name=${arg%%=*}
  dir=${arg#*=}
  size=$(du -cm "$dir"/*.xplane.pb | tail -n 1 | cut -f1)
  read -r scan_s scan_kb < <(median "${RUNS:-5}" "$SCAN" "$dir" --quiet)
  for cmd in get_overview get_hlo_op_profile; do
    read -r x_s x_kb < <(xprof_run "$cmd" "$dir")
    ratio=$(awk -v a="$x_s" -v b="$scan_s" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }')
    share=$(awk -v a="$scan_kb" -v b="$x_kb" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    echo "| $name | ${size} MiB | xprof $cmd | $x_s | $((x_kb / 1024)) | $ratio | $share |"
  done
  echo "| $name | ${size} MiB | xlens fault_scan (all detectors) | $scan_s | $((scan_kb / 1024)) | | |"
done
