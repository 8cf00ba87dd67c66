#!/usr/bin/env bash
# The one command the device tool ran on its H200 machine to make testdata/h200 (see README.md
# there): environment facts, every scenario of capture_h200.py within a time budget, then the
# captures archived into $OUT in pieces the tool carries back (at most 8 files of 16 MiB).
#   OUT=/some/dir bash scripts/capture/h200/run_on_device.sh
set -uo pipefail
: "${OUT:?set OUT}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
{ date -u; nvidia-smi; nproc; command -v xz;
  python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())"
} > "$OUT/env.txt" 2>&1
cd /tmp
python3 "$HERE/capture_h200.py" --out /tmp/h200 --budget-s "${BUDGET_S:-330}" 2>&1 | tee "$OUT/log.txt"
python3 "$HERE/capture_h200.py" --out /tmp/h200 --pack "$OUT" 2>&1 | tee -a "$OUT/log.txt"
