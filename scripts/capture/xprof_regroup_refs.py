"""XProf's own grouping of a capture without `group_id` stats, as reference data.

    python scripts/capture/xprof_regroup_refs.py CAPTURE.xplane.pb OUT_DIR SUFFIX

Runs XProf's converter (`xprof.convert.raw_to_tool_data`, saved results off, on a scratch copy)
for two tools and writes, under OUT_DIR:

- `tool_input_pipeline_analyzer__SUFFIX.json`: the input-pipeline tool data (per-step table),
  with sorted keys, as `xprof_tool_data.py` writes it;
- `trace_viewer__SUFFIX_device_groups.json`: from XProf's trace viewer events, per GPU plane
  and per line, how many events carry each `group_id` (`"none"` for none), and the `Steps`
  events XProf derived (start and duration in ps).

XProf groups a capture itself only when no plane carries `group_id` (`PreprocessSingleHostXSpace`:
`GroupTfEvents`, then `GenerateDerivedTimeLines`), so this shows what its grouping gives the
device events. Used for `testdata/field/tf_v100_multiworker` stripped of its grouping (see that
folder's README).
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import sys
import tempfile


def tool(path: str, name: str) -> str:
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as d:
        dst = os.path.join(d, os.path.basename(path))
        shutil.copyfile(path, dst)
        data, _ = raw_to_tool_data.xspace_to_tool_data([dst], name, {"use_saved_result": False})
    return data.decode("utf-8") if isinstance(data, bytes) else data


def main() -> None:
    path, out_dir, suffix = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    ip = json.loads(tool(path, "input_pipeline_analyzer"))
    with open(os.path.join(out_dir, f"tool_input_pipeline_analyzer__{suffix}.json"), "w") as fh:
        json.dump(ip, fh, indent=1, sort_keys=True)
        fh.write("\n")
    trace = json.loads(tool(path, "trace_viewer"))
    planes, lines = {}, {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "process_name":
            planes[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e["name"] == "thread_name":
            lines[(e["pid"], e["tid"])] = e["args"]["name"]
    counts = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    steps = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        plane = planes.get(e.get("pid"), "")
        if e.get("ph") != "X" or not plane.startswith("/device:GPU:"):
            continue
        line = lines.get((e["pid"], e.get("tid")), "")
        group = e.get("args", {}).get("group_id", "none")
        counts[plane][line][str(group)] += 1
        if line == "Steps":
            steps[plane].append(
                {"group": str(group), "start_ps": round(e["ts"] * 1e6), "duration_ps": round(e["dur"] * 1e6)}
            )
    out = {
        "planes": {p: {l: dict(c) for l, c in ls.items()} for p, ls in counts.items()},
        "steps": dict(steps),
    }
    with open(os.path.join(out_dir, f"trace_viewer__{suffix}_device_groups.json"), "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main()
