#!/usr/bin/env bash
# The GPU path against the TPU path, per byte: fault_scan (decode + every detector + report) and
# inventory (decode of every event) on a ~300 MiB NVIDIA-shaped host and a ~300 MiB TPU-shaped
# host, on every core and on one, RUNS times each (default 5), the median run reported; then the
# instructions each path executes per byte on ~20 MiB hosts (callgrind: repeatable whatever the
# VM's load), when valgrind is installed.
#
#   scripts/bench_gpu.sh
#
# Writes the hosts once under BIG_DIR (default /work/big): gpu300/, tpu300/, gpu20/, tpu20/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=${BIG_DIR:-/work/big}
SCAN=./target/release/examples/fault_scan
INVENTORY=./target/release/examples/inventory
SYNTH=./target/release/examples/synth_profile
cargo build --release --example fault_scan --example inventory --example synth_profile >&2

gen() { # gen NAME ARGS...
  local name=$1
  shift
  if [ ! -d "$BIG/$name" ]; then "$SYNTH" "$@" --out "$BIG/$name" >&2; fi
}
gen gpu300 --gpu --size 300MB --devices 8
gen tpu300 --size 300MB
gen gpu20 --gpu --size 20MB --devices 8
gen tpu20 --size 20MB

measure() { # measure THREADS CMD...: "wall_s user_s peak_kb"
  local threads=$1 tmp
  shift
  tmp=$(mktemp)
  RAYON_NUM_THREADS=$threads /usr/bin/time -o "$tmp" -f '%e %U %M' "$@" >/dev/null 2>&1 || true
  tail -n 1 "$tmp"
  rm -f "$tmp"
}
median() { # median RUNS THREADS CMD...
  local runs=$1
  shift
  for _ in $(seq "$runs"); do measure "$@"; done | sort -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'
}

echo "| host | tool | size (MiB) | threads | wall (s) | user (s) | peak RSS (MiB) | MiB/s (wall) |"
echo "|---|---|---|---|---|---|---|---|"
for name in gpu300 tpu300; do
  file=$(find "$BIG/$name" -name '*.xplane.pb' | head -n 1)
  size=$(du -m "$file" | cut -f1)
  cat "$file" >/dev/null
  for tool in fault_scan inventory; do
    cmd=("$SCAN" "$file" --quiet)
    [ "$tool" = inventory ] && cmd=("$INVENTORY" "$file")
    for threads in "$(nproc)" 1; do
      read -r wall user kb < <(median "${RUNS:-5}" "$threads" "${cmd[@]}")
      awk -v n="$name" -v t="$tool" -v s="$size" -v th="$threads" -v w="$wall" -v u="$user" -v k="$kb" \
        'BEGIN { printf "| %s | %s | %d | %d | %.2f | %.2f | %d | %.0f |\n", n, t, s, th, w, u, k / 1024, s / w }'
    done
  done
done

if command -v valgrind >/dev/null; then
  echo
  echo "| host | bytes | instructions (fault_scan) | instructions per byte |"
  echo "|---|---|---|---|"
  for name in gpu20 tpu20; do
    file=$(find "$BIG/$name" -name '*.xplane.pb' | head -n 1)
    bytes=$(stat -c %s "$file")
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$SCAN" "$file" --quiet >/dev/null 2>"$out" || true
    ir=$(grep -o 'refs: *[0-9,]*' "$out" | tr -d ', ' | cut -d: -f2)
    rm -f "$out"
    awk -v n="$name" -v b="$bytes" -v i="$ir" 'BEGIN { printf "| %s | %d | %d | %.1f |\n", n, b, i, i / b }'
  done
fi
