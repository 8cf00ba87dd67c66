#!/usr/bin/env bash
# Regenerates the TPU-shaped signature sessions of testdata/tpu/ (recompilation between steps,
# vector-unit-bound stretch, matmul padding, a straggler host, and their clean twins) and XProf
# 2.24.2's analysis of them.
#   scripts/capture/tpu_sessions.sh [NAME ...]        (default: all eight)
# Each session directory gets its host files (host0.xplane.pb, and host1.xplane.pb for the two-host
# sessions), ground_truth.json (written by xlens_testkit::tpu) and xprof/: the CLI's answers
# (xprof_refs.py, run on a scratch copy of the whole session, so both hosts of a two-host session
# are combined: every answer's capture.files_used must list them all, which this script checks) and,
# for sessions of one host and one program, XProf's raw tool data (xprof_tool_data.py).
# Needs the venv with xprof (XPROF_PY, default /work/.venv-jax/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${XPROF_PY:-/work/.venv-jax/bin/python}
export TF_CPP_MIN_LOG_LEVEL=2
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(tpu_recompile_between_steps tpu_recompile_clean tpu_vpu_stretch tpu_vpu_clean
         tpu_padding_waste tpu_padding_clean tpu_straggler_host tpu_two_hosts_clean)
fi
cargo build --release -p xlens-testkit --example tpu_fixtures
COMMANDS=list_xplane_lines,get_hosts,get_overview,get_step_trace,get_hlo_op_profile,get_hlo_op_profile__flat,get_roofline_model,get_top_hlo_ops,list_hlo_modules,get_hlo_text__main
for name in "${names[@]}"; do
  dir=testdata/tpu/$name
  rm -rf "$dir"
  ./target/release/examples/tpu_fixtures "$name" "$dir"
  "$PY" scripts/capture/xprof_refs.py "$dir" --only "$COMMANDS"
  # Raw tool data only for sessions of one host running one program: the roofline crate's tests
  # compare every testdata/tpu/*/xprof/tool_*.json with the first host alone, op by op by name.
  hosts=$(ls "$dir"/*.xplane.pb | wc -l)
  programs=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["output"]["count"])' \
    "$dir/xprof/list_hlo_modules.json")
  if [ "$hosts" -eq 1 ] && [ "$programs" -eq 1 ]; then
    "$PY" scripts/capture/xprof_tool_data.py "$dir"
  fi
  # The host compile events (XProf's CLI has no stock query for the TPU client's names).
  "$PY" - "$dir" <<'EOF'
import json, os, sys
sys.path.insert(0, "scripts/capture")
import xprof_refs as refs

tdir = os.path.abspath(sys.argv[1])
tname = os.path.basename(tdir)
pbs = sorted(os.path.join(tdir, f) for f in os.listdir(tdir) if f.endswith(".xplane.pb"))
hosts = [os.path.basename(p)[: -len(".xplane.pb")] for p in pbs]
out = os.path.join(tdir, "xprof")
extra = [("aggregate_xplane_events__compile_tpu",
          ["aggregate_xplane_events", tname,
           r"--event_regex=^(lower_sharding_computation|backend_compile_and_load|PjRtCApiClient::.*)$"])]
with open(os.path.join(out, "_index.json")) as fh:
    index = json.load(fh)
side_all = index.pop("_side_effect_files", {})
for cmd, argv in extra:
    rec, side = refs.run_one(refs.DEFAULT_XPROF, cmd, argv, tname, pbs, 600)
    side_all.update(side)
    with open(os.path.join(out, f"{cmd}.json"), "w") as fh:
        json.dump(rec, fh, indent=1)
    status = rec["output"].get("status") if isinstance(rec["output"], dict) else None
    index[cmd] = {"rc": rec["rc"], "wall_s": rec["wall_s"], "nonempty": rec["nonempty"], "status": status}
    print(f"  {tname}: {cmd:48s} rc={rec['rc']} {rec['wall_s']:7.2f}s nonempty={rec['nonempty']}")
index["_side_effect_files"] = side_all
with open(os.path.join(out, "_index.json"), "w") as fh:
    json.dump(index, fh, indent=1)

# Every answer must come from every host of the session (XProf's all-hosts view).
for f in sorted(os.listdir(out)):
    if not f.endswith(".json") or f.startswith(("_", "tool_")):
        continue
    with open(os.path.join(out, f)) as fh:
        rec = json.load(fh)
    o = rec.get("output")
    cap = o.get("capture") if isinstance(o, dict) else None
    if cap is None:
        continue
    if sorted(cap.get("files_used", [])) != hosts or (len(hosts) > 1 and not cap.get("combined")):
        sys.exit(f"{tname}/{f}: XProf used {cap.get('files_used')} (combined={cap.get('combined')}), not {hosts}")
print(f"  {tname}: capture.files_used = {hosts} in every answer")
EOF
done
