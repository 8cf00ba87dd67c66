#!/usr/bin/env bash
# Before/after: runs two `xlens` binaries on the same profiles, alternating A and B so that the
# VM's drift hits both alike, and prints the median wall time, MB/s and peak RSS of each (a
# Markdown table for BENCHMARKS.md). Also checks that both give byte-identical JSON reports.
#
#   scripts/bench_ab.sh BEFORE_BIN AFTER_BIN NAME=PROFILE [NAME=PROFILE ...]
#
# Build BEFORE_BIN from the older commit (e.g. `git worktree add`, or `git stash` and
# `cargo build --release --features cli --bin xlens`, then copy target/release/xlens aside).
# RUNS (default 7) runs of each per row; THREADS=1 runs on one worker thread. A row where the
# after build is more than 10 % slower is marked REGRESSION and the script exits with 1.
# ALLOW_DIFF=1 times builds whose reports differ on purpose (by default that is an error).
set -euo pipefail
before=$1
after=$2
shift 2
RUNS=${RUNS:-7}
export RAYON_NUM_THREADS=${THREADS:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'; }

# run BIN PROFILE: "wall_s peak_kb" of one scan, the wall time to the microsecond (/usr/bin/time's
# own is in centiseconds: a 5 ms scan of a small real capture read as 0.00 or 0.01 s, and a
# regression there could not show).
run() {
  local t0 t1
  t0=$EPOCHREALTIME
  /usr/bin/time -o "$tmp/peak" -f '%M' "$1" scan "$2" --quiet >/dev/null
  t1=$EPOCHREALTIME
  tail -n 1 "$tmp/peak" | awk -v t0="$t0" -v t1="$t1" '{ printf "%.6f %s\n", t1 - t0, $1 }'
}

echo "| profile | size (MB) | threads | before (s) | after (s) | before MB/s | after MB/s | after / before | peak RSS after (MiB) | RSS / size |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for arg in "$@"; do
  name=${arg%%=*}
  path=${arg#*=}
  bytes=$(find "$path" -name '*.xplane.pb' -print0 | xargs -0 cat | wc -c)
  "$before" scan "$path" --quiet --format json >"$tmp/a.json"
  "$after" scan "$path" --quiet --format json >"$tmp/b.json"
  if ! cmp -s "$tmp/a.json" "$tmp/b.json"; then
    # ALLOW_DIFF=1: an A/B across a change that means to alter the report (new figures); the
    # timings still compare the same work.
    if [ -z "${ALLOW_DIFF:-}" ]; then
      echo "$name: the reports differ" >&2
      exit 1
    fi
    echo "$name: the reports differ (ALLOW_DIFF: an intended change)" >&2
  fi
  : >"$tmp/a"
  : >"$tmp/b"
  for _ in $(seq "$RUNS"); do
    run "$before" "$path" >>"$tmp/a"
    run "$after" "$path" >>"$tmp/b"
  done
  a=$(median <"$tmp/a")
  b=$(median <"$tmp/b")
  awk -v name="$name" -v bytes="$bytes" -v t="${THREADS:-$(nproc)}" -v a="$a" -v b="$b" 'BEGIN {
    split(a, x, " "); split(b, y, " "); mb = bytes / 1e6
    printf "| %s | %.1f | %s | %.4f | %.4f | %.0f | %.0f | %.2f%s | %d | %.2f |\n",
      name, mb, t, x[1], y[1], mb / x[1], mb / y[1], y[1] / x[1], (y[1] > 1.1 * x[1] ? " REGRESSION" : ""),
      y[2] / 1024, y[2] * 1024 / bytes
  }' | tee -a "$tmp/rows"
done
if grep -q REGRESSION "$tmp/rows" 2>/dev/null; then
  echo "a path is more than 10 % slower after" >&2
  exit 1
fi
