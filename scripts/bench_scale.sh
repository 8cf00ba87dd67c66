#!/usr/bin/env bash
# Scale figures for BENCHMARKS.md: fault_scan (decode + every detector + report) on synthetic
# TPU-shaped sessions, with wall time, CPU time and peak RSS of each run.
#
#   scripts/bench_scale.sh [REAL_PROFILE_DIR ...]
#
# Writes (once; reused when present) under BIG_DIR (default /work/big):
#   synth300/  one host of ~300 MB        synth8/  8 hosts of ~300 MB each
#   synth2g/   one host of ~1.9 GB (an XSpace must stay under 2 GiB)
# and runs fault_scan on each, on every core and on one (RAYON_NUM_THREADS=1), plus on any
# real profile directories given; each configuration runs RUNS times (default 5) and the run with
# the median wall time is reported. Needs /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=${BIG_DIR:-/work/big}
SCAN=./target/release/examples/fault_scan
SYNTH=./target/release/examples/synth_profile
cargo build --release --example fault_scan --example synth_profile >&2

gen() { # gen NAME SIZE HOSTS
  if [ ! -d "$BIG/$1" ]; then
    "$SYNTH" --size "$2" --hosts "$3" --out "$BIG/$1" >&2
  fi
}

# measure THREADS CMD...: prints "wall_s user_s sys_s peak_kb"
measure() {
  local threads=$1 tmp
  shift
  tmp=$(mktemp)
  RAYON_NUM_THREADS=$threads /usr/bin/time -o "$tmp" -f '%e %U %S %M' "$@" >/dev/null 2>&1 || true
  tail -n 1 "$tmp"
  rm -f "$tmp"
}

# median RUNS THREADS CMD...: the measurement of the run with the median wall time.
median() {
  local runs=$1
  shift
  for _ in $(seq "$runs"); do measure "$@"; done | sort -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'
}

gen synth300 300MB 1
gen synth8 300MB 8
gen synth2g 1900MB 1

echo "| profile | size (MiB) | threads | wall (s) | user (s) | peak RSS (MiB) | RSS / largest host file | MiB/s (wall) |"
echo "|---|---|---|---|---|---|---|---|"
for dir in "$BIG/synth300" "$BIG/synth8" "$BIG/synth2g" "$@"; do
  files=$(find "$dir" -name '*.xplane.pb')
  size=$(du -cm $files | tail -n 1 | cut -f1)
  largest=$(du -m $files | sort -n | tail -n 1 | cut -f1)
  nproc_all=$(nproc)
  for threads in "$nproc_all" 1; do
    # Warm the page cache first so that runs compare decoding, not the disk.
    cat $files >/dev/null
    read -r wall user _sys kb < <(median "${RUNS:-5}" "$threads" "$SCAN" "$dir" --quiet)
    awk -v n="$(basename "$dir")" -v s="$size" -v t="$threads" -v w="$wall" -v u="$user" -v k="$kb" -v l="$largest" \
      'BEGIN { printf "| %s | %d | %d | %.2f | %.2f | %d | %.2f | %.0f |\n", n, s, t, w, u, k / 1024, (k / 1024) / l, s / w }'
  done
done
