#!/usr/bin/env bash
# Regenerates the TPU-shaped reference fixtures in testdata/tpu/ and XProf's analysis of them.
#   scripts/capture/tpu_fixtures.sh [NAME ...]
# Needs the venv with xprof (XPROF_PY, default /work/.venv-jax/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${XPROF_PY:-/work/.venv-jax/bin/python}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then names=(tpu_basic tpu_straggler); fi
cargo build --release --example synth_profile
for name in "${names[@]}"; do
  dir=testdata/tpu/$name
  rm -rf "$dir"
  ./target/release/examples/synth_profile --fixture "$name" --out "$dir"
  echo "{\"main_hlo_module\": \"jit_train_step(1)\"}" > "$dir/ground_truth.json"
  "$PY" scripts/capture/xprof_tool_data.py "$dir"
  "$PY" scripts/capture/xprof_refs.py "$dir" --only list_xplane_lines,get_step_trace,get_overview,get_hlo_op_profile,get_hlo_op_profile__flat,get_roofline_model,analyze_async_overlap,get_top_hlo_ops
done
