"""Store XProf's tf.data bottleneck analysis (`tf_data_bottleneck_analysis`) for a profile directory.

    TMPDIR=$(mktemp -d) /work/venv-tbprof/bin/python scripts/capture/xprof_tf_data_refs.py TRACE_DIR \
        [--also-input-pipeline]

XProf 2.24.2 (`xprof`) no longer ships the tool; `tensorboard-plugin-profile` 2.19.0 is the newest
wheel whose `raw_to_tool_data` still serves it (2.19.1 and later do not). Its C++ builder
(`CombinedTfDataStatsBuilder`, xplane_to_tf_data_stats.cc) is in the wheel's
`_pywrap_profiler_plugin.so`, so no TensorFlow is needed.

On a scratch copy of `TRACE_DIR/*.xplane.pb` (the converter writes `*.hlo_proto.pb` files beside
its input; 2.19.0 has no saved-result cache), one converter run gives the `CombinedTfDataStats`
proto; this writes:

- `TRACE_DIR/xprof/tool_tf_data_bottleneck_analysis.json`: the tool's output as the UI gets it,
  three gviz DataTables made from that proto by the plugin's own
  `tf_data_stats_proto_to_gviz.to_json` (what `raw_to_tool_data.xspace_to_tool_data(paths,
  "tf_data_bottleneck_analysis^", {})` returns), parsed and re-dumped with sorted keys. The
  tables round times DOWN to whole microseconds (`int(ps / 1e6)`).
- `TRACE_DIR/xprof/tool_tf_data_bottleneck_analysis__combined_tf_data_stats.json`: the proto
  itself, every field written, defaults included, times in picoseconds as JSON integers. Map
  keys (host, input pipeline id, iterator id) become JSON strings.

A second run, through `xspace_to_tool_data` on a fresh copy, must give the same tables up to the
pipeline names and row order: with several input pipelines on a host, XProf numbers them
("Device:0", "Device:1") in hash-map order, which changes from run to run.

`--also-input-pipeline` also writes `tool_input_pipeline_analyzer__tbprof_2_19_0.json`, the same
wheel's `input_pipeline_analyzer` output.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import tempfile

TOOL = "tf_data_bottleneck_analysis"


def scratch_copies(files: list[str], scratch: str) -> list[str]:
    copies = []
    for f in files:
        dst = os.path.join(scratch, os.path.basename(f))
        shutil.copyfile(f, dst)
        copies.append(dst)
    return copies


def proto_to_obj(msg):
    """Every field of a proto3 message (defaults included); int64 stays an integer."""
    from google.protobuf.descriptor import FieldDescriptor

    out = {}
    for fd in msg.DESCRIPTOR.fields:
        value = getattr(msg, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            conv = proto_to_obj if vfd.type == FieldDescriptor.TYPE_MESSAGE else scalar
            out[fd.name] = {str(k): conv(value[k]) for k in sorted(value)}
        elif fd.label == FieldDescriptor.LABEL_REPEATED:
            conv = proto_to_obj if fd.type == FieldDescriptor.TYPE_MESSAGE else scalar
            out[fd.name] = [conv(v) for v in value]
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            out[fd.name] = proto_to_obj(value)
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            out[fd.name] = fd.enum_type.values_by_number[value].name
        else:
            out[fd.name] = scalar(value)
    return out


def scalar(v):
    return v.decode("latin-1") if isinstance(v, bytes) else v


def normalized(tables):
    """Tables comparable across converter runs. The builder numbers a host's input pipelines
    ("Host:0", "Device:1", ...) in the order of a hash map, which changes from run to run when a
    host has several, and the tables follow the proto's maps, so the pipeline names and the
    row order are left out of the comparison."""
    out = []
    for t in tables:
        cols = [c.get("id") for c in t.get("cols", [])]
        k = cols.index("input_pipeline") if "input_pipeline" in cols else None
        rows = []
        for r in t.get("rows", []):
            cells = list(r.get("c", []))
            if k is not None:
                cells[k] = None
            rows.append(json.dumps(cells, sort_keys=True))
        out.append((cols, sorted(rows), t.get("p")))
    return out


def dump(obj, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)
        fh.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace_dir")
    ap.add_argument("--also-input-pipeline", action="store_true")
    args = ap.parse_args()
    from tensorboard_plugin_profile.convert import _pywrap_profiler_plugin
    from tensorboard_plugin_profile.convert import raw_to_tool_data
    from tensorboard_plugin_profile.convert import tf_data_stats_proto_to_gviz
    from tensorboard_plugin_profile.protobuf import tf_data_stats_pb2

    files = sorted(glob.glob(os.path.join(args.trace_dir, "*.xplane.pb")))
    if not files:
        raise SystemExit(f"no *.xplane.pb in {args.trace_dir}")
    out_dir = os.path.join(args.trace_dir, "xprof")
    os.makedirs(out_dir, exist_ok=True)

    with tempfile.TemporaryDirectory() as scratch:
        copies = scratch_copies(files, scratch)
        names = raw_to_tool_data.xspace_to_tool_names(copies)
    if TOOL + "^" not in names:
        raise SystemExit(f"{TOOL} is not among this converter's tools: {names}")

    # 1. One converter run: the CombinedTfDataStats proto, turned into the tool's tables by the
    # plugin's own code, as `xspace_to_tool_data` does for this tool.
    with tempfile.TemporaryDirectory() as scratch:
        copies = scratch_copies(files, scratch)
        raw, ok = _pywrap_profiler_plugin.xspace_to_tools_data(copies, TOOL)
    if not ok:
        raise SystemExit(f"{TOOL}: {raw!r}")
    stats = tf_data_stats_pb2.CombinedTfDataStats()
    stats.ParseFromString(raw)
    data = tf_data_stats_proto_to_gviz.to_json(raw)
    tables = json.loads(data)

    # 2. A second run through the plugin's entry point must give the same tables.
    with tempfile.TemporaryDirectory() as scratch:
        copies = scratch_copies(files, scratch)
        served, _ = raw_to_tool_data.xspace_to_tool_data(copies, TOOL + "^", {})
    if not served or normalized(json.loads(served)) != normalized(tables):
        raise SystemExit(f"{TOOL}: xspace_to_tool_data gives other tables than the proto")

    dump(tables, os.path.join(out_dir, f"tool_{TOOL}.json"))
    dump(proto_to_obj(stats), os.path.join(out_dir, f"tool_{TOOL}__combined_tf_data_stats.json"))
    print(f"{TOOL}: {len(data)} bytes of tables, {len(raw)} bytes of proto")

    if args.also_input_pipeline:
        with tempfile.TemporaryDirectory() as scratch:
            copies = scratch_copies(files, scratch)
            data, _ = raw_to_tool_data.xspace_to_tool_data(copies, "input_pipeline_analyzer^", {})
        dump(json.loads(data) if data else None,
             os.path.join(out_dir, "tool_input_pipeline_analyzer__tbprof_2_19_0.json"))
        print(f"input_pipeline_analyzer: {len(data or '')} bytes")


if __name__ == "__main__":
    main()
