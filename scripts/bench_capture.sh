#!/usr/bin/env bash
# The capture benchmark of BENCHMARKS.md: from the end of the capture window to the printed
# report, for a 2 s capture of scripts/capture/train_server.py.
#
# Usage: scripts/bench_capture.sh XLENS_BIN PYTHON_WITH_JAX [RUNS]
#
# Starts the test program, then runs `xlens capture localhost:PORT --duration 2s --scan --json`
# RUNS times (7 by default) and prints each run's wall time minus the 2 s window: an upper bound
# of "end of window to printed report" (it also holds the connection and the service starting
# its trace before the window), then the median. The scan alone of each captured run follows,
# for the share of the scan in it.
set -euo pipefail
bin=${1:?usage: $0 XLENS_BIN PYTHON_WITH_JAX [RUNS]}
python=${2:?usage: $0 XLENS_BIN PYTHON_WITH_JAX [RUNS]}
runs=${3:-7}
here="$(cd "$(dirname "$0")" && pwd)"
logdir="$(mktemp -d)"
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
XLA_FLAGS=--xla_cpu_multi_thread_eigen=false "$python" "$here/capture/train_server.py" "$port" > "$logdir/server.out" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$logdir"' EXIT
for _ in $(seq 1 180); do
  grep -q ready "$logdir/server.out" && break
  sleep 1
done
grep -q ready "$logdir/server.out" || { echo "the test program did not start" >&2; exit 1; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
over=()
for i in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  "$bin" capture "localhost:$port" --duration 2s --logdir "$logdir" --session "run$i" --scan --json > /dev/null
  end=$(date +%s%N)
  over+=($(( (end - start) / 1000000 - 2000 )))
done
scans=()
for i in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  "$bin" scan "$logdir/plugins/profile/run$i" --json > /dev/null
  end=$(date +%s%N)
  scans+=($(( (end - start) / 1000000 )))
done
echo "capture 2 s --scan, ms past the window: ${over[*]} (median $(printf '%s\n' "${over[@]}" | median))"
echo "scan of the run alone, ms:             ${scans[*]} (median $(printf '%s\n' "${scans[@]}" | median))"
echo "host file: $(stat -c %s "$logdir/plugins/profile/run1/"*.xplane.pb) bytes"
