#!/usr/bin/env bash
# Capture every xlens real-profile scenario into testdata/real/ and produce XProf references.
#
#   scripts/capture/capture_all.sh              # all small scenarios + xprof refs + manifest
#   scripts/capture/capture_all.sh --big        # additionally the ~145 MB long_run into $BIG_DIR
#   scripts/capture/capture_all.sh --only remat,remat_baseline
#   scripts/capture/capture_all.sh --no-refs    # skip the XProf CLI reference runs
#
# Env: PY (python with jax 0.10.2 + xprof 2.24.2; default /work/.venv-jax/bin/python),
#      XPROF_BIN (default: xprof next to $PY), CORPUS (shared/corpus, for baselines in
#      diff_sessions; default ../shared/corpus), BIG_DIR (default /work/big).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PY="${PY:-/work/.venv-jax/bin/python}"
export XPROF_BIN="${XPROF_BIN:-$(dirname "$PY")/xprof}"
CORPUS="${CORPUS:-$REPO/../shared/corpus}"
BIG_DIR="${BIG_DIR:-/work/big}"
OUT="$REPO/testdata/real"
BIG=0; REFS=1; ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --big) BIG=1 ;;
    --no-refs) REFS=0 ;;
    --only) ONLY="$2"; shift ;;
    *) echo "unknown arg $1" >&2; exit 2 ;;
  esac
  shift
done

# name | script | extra args | diff_sessions baseline (NAME=DIR or empty)
# <x>_rerun: the same program as <x>, same args, in a separate process (a pair with no change,
# for profile diffs); its diff_sessions baseline is <x>.
# <x>_twice_a / <x>_twice_b: two traces of the program of <x> taken one after the other in ONE
# process (capture_twice.py, run by the _a row after waiting for idle CPUs); the _b row's script
# is "-" (captured with the row before; --only needs both names). _b's diff_sessions baseline is _a.
SCENARIOS=(
  "barrier_in_loop|capture_barrier_in_loop.py||barrier_in_loop_baseline=$OUT/barrier_in_loop_baseline"
  "barrier_in_loop_baseline|capture_barrier_in_loop.py|--baseline|"
  "barrier_in_loop_baseline_rerun|capture_barrier_in_loop.py|--baseline|barrier_in_loop_baseline=$OUT/barrier_in_loop_baseline"
  "barrier_in_loop_baseline_twice_a|capture_twice.py|--scenario barrier_in_loop_baseline --out-b $OUT/barrier_in_loop_baseline_twice_b --wait-idle 85|"
  "barrier_in_loop_baseline_twice_b|-||barrier_in_loop_baseline_twice_a=$OUT/barrier_in_loop_baseline_twice_a"
  "profile_during_warmup|capture_profile_during_warmup.py||"
  "remat_baseline|capture_remat.py|--baseline|"
  "remat|capture_remat.py||remat_baseline=$OUT/remat_baseline"
  "input_starvation|capture_input_starvation.py||clean=$CORPUS/traces/clean"
  "donation_miss_baseline|capture_donation_miss.py|--baseline|"
  "donation_miss_baseline_twice_a|capture_twice.py|--scenario donation_miss_baseline --out-b $OUT/donation_miss_baseline_twice_b --wait-idle 85|"
  "donation_miss_baseline_twice_b|-||donation_miss_baseline_twice_a=$OUT/donation_miss_baseline_twice_a"
  "donation_miss|capture_donation_miss.py||donation_miss_baseline=$OUT/donation_miss_baseline"
  "donation_miss_rerun|capture_donation_miss.py||donation_miss=$OUT/donation_miss"
  "padding_waste|capture_padding_waste.py||"
  "sharded_collectives|capture_sharded_collectives.py||sharded_collectives_baseline=$CORPUS/traces/sharded_collectives_baseline"
  "sharded_donation|capture_sharded_donation.py||"
  "convert_reduce|capture_convert_reduce.py||"
  "debug_print|capture_debug_print.py||clean=$CORPUS/traces/clean"
  "replicated_activations_baseline|capture_replicated_activations.py|--baseline|"
  "replicated_activations|capture_replicated_activations.py||replicated_activations_baseline=$OUT/replicated_activations_baseline"
  "fused_upcast_clean|capture_fused_upcast_clean.py||"
  "recompile_between_steps|capture_recompile_between_steps.py||"
)

selected() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

for row in "${SCENARIOS[@]}"; do
  IFS='|' read -r name script args base <<< "$row"
  selected "$name" || continue
  if [ "$script" = "-" ]; then echo "=== $name: captured by the row before"; continue; fi
  echo "=== capture $name"
  rm -rf "$OUT/$name"
  # shellcheck disable=SC2086
  "$PY" "$HERE/$script" --out "$OUT/$name" $args
done

if [ "$REFS" = 1 ]; then
  for row in "${SCENARIOS[@]}"; do
    IFS='|' read -r name script args base <<< "$row"
    selected "$name" || continue
    echo "=== xprof refs $name"
    bargs=()
    if [ -n "$base" ] && [ -d "${base#*=}" ]; then bargs=(--baseline "$base"); fi
    "$PY" "$HERE/xprof_refs.py" "$OUT/$name" "${bargs[@]}" > "$OUT/.xprof_refs_$name.log" 2>&1 \
      || { echo "xprof_refs failed for $name (see $OUT/.xprof_refs_$name.log)"; exit 1; }
    rm -f "$OUT/.xprof_refs_$name.log"
  done
fi

"$PY" "$HERE/build_manifest.py" --root "$OUT"

if [ "$BIG" = 1 ]; then
  echo "=== capture long_run (big) into $BIG_DIR/long_run"
  rm -rf "$BIG_DIR/long_run"
  mkdir -p "$BIG_DIR"
  "$PY" "$HERE/capture_long_run.py" --out "$BIG_DIR/long_run"
  if [ "$REFS" = 1 ]; then
    "$PY" "$HERE/xprof_refs.py" "$BIG_DIR/long_run" --only list_xplane_lines,get_overview,get_step_trace --timeout 3600
  fi
fi
