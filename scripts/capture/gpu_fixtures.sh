#!/usr/bin/env bash
# Regenerates the NVIDIA-shaped GPU reference fixtures in testdata/gpu/ and XProf's analysis of them.
#   scripts/capture/gpu_fixtures.sh [NAME ...]        (default: all six)
# Needs the venv with xprof 2.24.2 (XPROF_PY, default /work/.venv-jax/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${XPROF_PY:-/work/.venv-jax/bin/python}
export TF_CPP_MIN_LOG_LEVEL=2
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(gpu_healthy gpu_exposed_collective gpu_launch_bound gpu_memcpy_stall gpu_data_formatting gpu_stepless)
fi
cargo build --release -p xlens-testkit --example gpu_fixtures
for name in "${names[@]}"; do
  dir=testdata/gpu/$name
  rm -rf "$dir"
  ./target/release/examples/gpu_fixtures "$name" "$dir"
  module=jit_train_step
  if [ "$name" = gpu_stepless ]; then module=jit_forward; fi
  echo "{\"main_hlo_module\": \"$module(1)\"}" > "$dir/ground_truth.json"
  "$PY" scripts/capture/xprof_tool_data.py "$dir" --tools op_profile,roofline_model,overview_page,kernel_stats
  "$PY" scripts/capture/xprof_refs.py "$dir" --only list_xplane_lines,get_step_trace,get_overview,get_kernel_stats,get_hlo_op_profile,get_hlo_op_profile__flat,get_roofline_model,get_top_hlo_ops,get_device_information
done
