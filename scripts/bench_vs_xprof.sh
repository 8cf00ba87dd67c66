#!/usr/bin/env bash
# Times XProf's CLI and xlens's fault_scan on the same profiles, one after the other, and prints
# wall time, throughput and peak RSS of each with the ratios (a Markdown table for BENCHMARKS.md).
#
#   scripts/bench_vs_xprof.sh NAME=PROFILE_DIR [NAME=PROFILE_DIR ...]
#
# PROFILE_DIR holds one or more *.xplane.pb (a session directory). XProf runs on a fresh scratch
# copy with a fresh TMPDIR each time, so neither its result cache nor the cache files it writes
# next to a trace are reused (the --bypass_cache equivalent, facts §10.11).
# fault_scan is run RUNS times (default 5) on both cores and on one (RAYON_NUM_THREADS=1), and
# its median run is reported; XProf runs once per command.
#
# Environment:
#   RUNS            fault_scan runs per row (default 5)
#   XPROF_COMMANDS  XProf tools to time (default "get_overview"; add get_hlo_op_profile, ...)
#   XPROF_TIMEOUT   seconds before an XProf run is stopped and reported as "> N" (default 900;
#                   XProf needs about 75x a profile's size in memory, so large ones may also fail)
#   XPROF           the XProf CLI (default /work/.venv-jax/bin/xprof)
# Needs: /usr/bin/time, timeout, XProf, a release build of the fault_scan example (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
XPROF=${XPROF:-/work/.venv-jax/bin/xprof}
XPROF_COMMANDS=${XPROF_COMMANDS:-get_overview}
XPROF_TIMEOUT=${XPROF_TIMEOUT:-900}
SCAN=${CARGO_TARGET_DIR:-./target}/release/examples/fault_scan
cargo build --release --example fault_scan >&2

# measure CMD...: prints "wall_s peak_kb exit" of the command (output discarded). The wall time
# is taken to the microsecond (/usr/bin/time's own is in centiseconds, too coarse for the small
# real captures, which scan in milliseconds).
measure() {
  local tmp rc=0 t0 t1
  tmp=$(mktemp)
  t0=$EPOCHREALTIME
  /usr/bin/time -o "$tmp" -f '%e %M %x' "$@" >/dev/null 2>&1 || rc=$?
  t1=$EPOCHREALTIME
  # /usr/bin/time writes "Command exited with non-zero status N" before its own line.
  tail -n 1 "$tmp" | awk -v rc="$rc" -v t0="$t0" -v t1="$t1" '{ printf "%.3f %s %s\n", t1 - t0, $2, (NF >= 3 ? $3 : rc) }'
  rm -f "$tmp"
}

# median RUNS CMD...: "wall_s peak_kb exit" of the run with the median wall time (the VM's timing
# noise is large, so fault_scan, which takes about a second, is run several times).
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
  ( cd "$scratch" && TMPDIR="$scratch" measure timeout "$XPROF_TIMEOUT" "$XPROF" "$cmd" session )
  rm -rf "$scratch"
}

echo "| profile | size (MB) | tool | wall (s) | MB/s | peak RSS (MiB) | RSS / file | fault_scan (2 cores) faster by |"
echo "|---|---|---|---|---|---|---|---|"
for arg in "$@"; do
  name=${arg%%=*}
  dir=${arg#*=}
  bytes=$(cat "$dir"/*.xplane.pb | wc -c)
  mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
  read -r scan_s scan_kb _ < <(median "${RUNS:-5}" "$SCAN" "$dir" --quiet)
  read -r one_s one_kb _ < <(RAYON_NUM_THREADS=1 median "${RUNS:-5}" "$SCAN" "$dir" --quiet)
  row() { # row TOOL WALL_S PEAK_KB [RATIO]
    local rate share
    # A stopped run's "> N" gives a rate "< R".
    rate=$(awk -v b="$bytes" -v s="$2" 'BEGIN { lt = sub(/^> /, "", s); printf "%s%.0f", (lt ? "< " : ""), (s > 0 ? b / 1e6 / s : 0) }')
    share=$(awk -v k="$3" -v b="$bytes" 'BEGIN { printf "%.2f", k * 1024 / b }')
    echo "| $name | $mb | $1 | $2 | $rate | $(($3 / 1024)) | $share | ${4:-} |"
  }
  for cmd in $XPROF_COMMANDS; do
    read -r x_s x_kb x_rc < <(xprof_run "$cmd" "$dir")
    if [ "$x_rc" = 124 ]; then
      ratio=$(awk -v a="$XPROF_TIMEOUT" -v b="$scan_s" 'BEGIN { printf "> %.0fx", a / b }')
      row "xprof $cmd (stopped at ${XPROF_TIMEOUT} s)" "> $XPROF_TIMEOUT" "$x_kb" "$ratio"
    elif [ "$x_rc" != 0 ]; then
      row "xprof $cmd (failed, exit $x_rc)" "$x_s" "$x_kb" "n/a"
    else
      ratio=$(awk -v a="$x_s" -v b="$scan_s" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }')
      row "xprof $cmd" "$x_s" "$x_kb" "$ratio"
    fi
  done
  row "xlens fault_scan, 2 cores" "$scan_s" "$scan_kb"
  row "xlens fault_scan, 1 core" "$one_s" "$one_kb"
done
