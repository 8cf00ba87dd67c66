"""Store XProf's raw tool data (full precision, picoseconds) for a profile directory.

    python scripts/capture/xprof_tool_data.py TRACE_DIR [--tools op_profile,roofline_model,...]

The XProf CLI rounds times to 0.1 us; the tool data it is built from carries the exact
picosecond values. This calls XProf's own converter (`xprof.convert.raw_to_tool_data`) on a
scratch copy of `TRACE_DIR/*.xplane.pb` with saved results disabled, and writes
`TRACE_DIR/xprof/tool_<tool>.json` (the converter's JSON, parsed and re-dumped with sorted keys).
Used for the TPU-shaped fixtures in testdata/tpu/ (see scripts/capture/tpu_fixtures.sh).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import tempfile

DEFAULT_TOOLS = ["op_profile", "roofline_model", "overview_page", "input_pipeline_analyzer", "pod_viewer"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace_dir")
    ap.add_argument("--tools", default=",".join(DEFAULT_TOOLS))
    args = ap.parse_args()
    from xprof.convert import raw_to_tool_data

    files = sorted(glob.glob(os.path.join(args.trace_dir, "*.xplane.pb")))
    if not files:
        raise SystemExit(f"no *.xplane.pb in {args.trace_dir}")
    out_dir = os.path.join(args.trace_dir, "xprof")
    os.makedirs(out_dir, exist_ok=True)
    for tool in args.tools.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            copies = []
            for f in files:
                dst = os.path.join(scratch, os.path.basename(f))
                shutil.copyfile(f, dst)
                copies.append(dst)
            data, _ = raw_to_tool_data.xspace_to_tool_data(copies, tool, {"use_saved_result": False})
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        try:
            parsed = json.loads(data) if data else None
        except json.JSONDecodeError:
            parsed = {"_text": data}
        with open(os.path.join(out_dir, f"tool_{tool}.json"), "w") as fh:
            json.dump(parsed, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"{tool}: {len(data or '')} bytes")


if __name__ == "__main__":
    main()
