"""Every TensorFlow op of XProf's framework-op statistics for the V100 capture, no 500-op cap.

    TF_CPP_MIN_LOG_LEVEL=2 /work/venv-xprof/bin/python scripts/capture/xprof_full_framework_ops.py

XProf's `framework_op_stats` tool lists at most 500 ops per side (host, device), `IDLE` among
them, so `tool_framework_op_stats__level0_as_tf_op.json` leaves most of the capture's ops out.
The tool's table is built from an `OpStats` proto, which XProf's converter also writes next to
the capture (`ALL_HOSTS.op_stats_v2.pb`) when saved results are on. This script:

1. writes the `level 0` -> `tf_op` copy of `testdata/field/tf_v100_multiworker/
   34.83.195.179_6003.xplane.pb` (`level0_as_tf_op.py`) into a fresh scratch directory;
2. runs XProf 2.24.2's converter (`framework_op_stats`) on it cold: fresh `TMPDIR`, nothing saved
   before, `use_saved_result` on so that the converter writes the `OpStats` beside the copy;
3. decodes that `OpStats` (`xprof.protobuf.op_stats_pb2`) and rebuilds the tool's rows for both
   sides with every op: the host rows are the host metrics rows; the device rows are the device
   metrics rows grouped by the TensorFlow op their provenance names (occurrences the most of one
   device op, times summed), as XProf's tf-stats conversion does;
4. checks every row of the converter's own table from this run, and of the stored tables
   (device rows: `tool_framework_op_stats__level0_as_tf_op.json`; host rows, the same host
   plane: `tool_framework_op_stats.json`), against the rebuilt rows, in XProf's order, to
   1e-6 us, and aborts on any difference;
5. writes `testdata/field/tf_v100_multiworker/xprof/framework_op_stats__level0_as_tf_op__all.json`
   (compact, sorted keys; times in ps; rows by side, self time descending, name).

Needs `/work/venv-xprof` (xprof 2.24.2); see `testdata/field/README.md`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CAPTURE_DIR = os.path.join(REPO, "testdata/field/tf_v100_multiworker")
CAPTURE = "34.83.195.179_6003.xplane.pb"
OUT = os.path.join(CAPTURE_DIR, "xprof/framework_op_stats__level0_as_tf_op__all.json")
STORED_DEVICE = os.path.join(CAPTURE_DIR, "xprof/tool_framework_op_stats__level0_as_tf_op.json")
STORED_HOST = os.path.join(CAPTURE_DIR, "xprof/tool_framework_op_stats.json")
COPY_SHA256 = "9fa21f3b091cda9af27771bcedc4104bd6823eb7806cab61f0792b3db8268cd2"
XPROF_VERSION = "2.24.2"
MAX_OPS = 500  # the tool's cap per side
TOLERANCE_US = 1e-6

# The naming rules of a TensorFlow op's full name "name:type" (as XProf parses provenance).
TF_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*")
TF_TYPE = re.compile(r"[A-Z_][a-zA-Z0-9_]*")
JAX_TYPE = re.compile(r"[a-z_][a-z0-9_]*(\[.*\])?")
INT = re.compile(r"[+-]?[0-9]+")
MEMCPY_TYPES = ["MemcpyHToD", "MemcpyDToH", "MemcpyDToD", "MemcpyHToH"]


def is_int64(s: str) -> bool:
    s = s.strip(" \t\n\v\f\r")
    return bool(INT.fullmatch(s)) and -(2**63) <= int(s) < 2**63


def op_type_from_name(name: str) -> str:
    """The last name scope's op name without a numeric `_N` suffix."""
    last = name.split("/")[-1]
    if "_" not in last:
        return last
    suffix = last.split("_")[-1]
    return last[: len(last) - len(suffix) - 1] if is_int64(suffix) else last


def parse_provenance(full: str) -> tuple[str, str]:
    """(op name, op type) of a `tf_op` value; type "" where unknown."""
    parts = full.split(":", 1)
    if len(parts) != 2:
        for t in MEMCPY_TYPES:
            if parts[0].lower().startswith(t.lower()):
                return full, t
        return full, ""
    name, typ = parts
    if name == "Iterator":
        return full, "Dataset"
    if TF_NAME.fullmatch(name) and TF_TYPE.fullmatch(typ):
        return name, typ
    derived = typ or op_type_from_name(name)
    if JAX_TYPE.fullmatch(derived):
        return name, derived.split("[", 1)[0]
    if not typ:
        return name, derived
    return full, ""


def device_rows(db) -> list[dict]:
    """The device metrics rows grouped by TensorFlow op, in the order first seen."""
    by_name: dict[str, dict] = {}
    for m in db.metrics_db:
        if m.category == "IDLE":
            name, typ = "IDLE", "IDLE"
        elif not m.provenance:
            name, typ = m.name, ""
        else:
            name, typ = parse_provenance(m.provenance)
        row = by_name.get(name)
        if row is None:
            row = by_name[name] = {"name": name, "type": "", "occurrences": 0, "total_time_ps": 0, "self_time_ps": 0}
        if not row["type"]:
            row["type"] = typ or "Unknown"
        row["occurrences"] = max(row["occurrences"], m.occurrences)
        row["total_time_ps"] += m.time_ps
        row["self_time_ps"] += m.self_time_ps
    return list(by_name.values())


def host_rows(db) -> list[dict]:
    return [
        {"name": m.name, "type": m.category, "occurrences": m.occurrences, "total_time_ps": m.time_ps,
         "self_time_ps": m.self_time_ps}
        for m in db.metrics_db
    ]


def xprof_order(rows: list[dict]) -> list[dict]:
    """Self time descending, then name (the tool's order)."""
    return sorted(rows, key=lambda r: (-r["self_time_ps"], r["name"]))


def table_rows(table: dict) -> list[dict]:
    cols = [c["id"] for c in table["cols"]]
    return [{k: (c or {}).get("v") for k, c in zip(cols, r["c"])} for r in table["rows"]]


def check(label: str, side: str, theirs: list[dict], ours: list[dict], total_ps: int) -> int:
    """XProf's rows of `side` are our first rows, in order, equal to 1e-6 us."""
    theirs = [r for r in theirs if r["host_or_device"] == side]
    if not theirs:
        raise SystemExit(f"{label} {side}: no rows")
    if len(theirs) > MAX_OPS or len(ours) < len(theirs):
        raise SystemExit(f"{label} {side}: {len(theirs)} rows, ours {len(ours)}")
    share = "device_total_self_time_percent" if side == "Device" else "host_total_self_time_percent"
    for i, (t, o) in enumerate(zip(theirs, ours)):
        where = f"{label} {side} row {i + 1} {t['operation']!r}"
        if (t["operation"], t["type"]) != (o["name"], o["type"]) or t["occurrences"] != o["occurrences"]:
            raise SystemExit(f"{where}: {t} vs ours {o}")
        for k_us, k_ps in [("total_time", "total_time_ps"), ("total_self_time", "self_time_ps")]:
            if abs(t[k_us] - o[k_ps] / 1e6) > TOLERANCE_US:
                raise SystemExit(f"{where}: {k_us} {t[k_us]} us, ours {o[k_ps]} ps")
        if abs(t[share] - o["self_time_ps"] / total_ps) > 1e-12:
            raise SystemExit(f"{where}: {share} {t[share]}, ours {o['self_time_ps']} / {total_ps}")
    return len(theirs)


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="xprof_full_framework_ops.")
    tmp = os.path.join(scratch, "tmp")
    run = os.path.join(scratch, "run")
    os.makedirs(tmp)
    os.makedirs(run)
    # Cold: a fresh TMPDIR for the converter (and this process), an empty run directory.
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = None
    copy = os.path.join(run, CAPTURE)
    subprocess.run([sys.executable, os.path.join(HERE, "level0_as_tf_op.py"), os.path.join(CAPTURE_DIR, CAPTURE),
                    copy], check=True)
    with open(copy, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    if sha != COPY_SHA256:
        raise SystemExit(f"copy sha256 {sha}, expected {COPY_SHA256}")

    from xprof import version
    from xprof.convert import raw_to_tool_data
    from xprof.protobuf import op_stats_pb2

    if version.__version__ != XPROF_VERSION:
        raise SystemExit(f"xprof {version.__version__}, expected {XPROF_VERSION}")
    data, _ = raw_to_tool_data.xspace_to_tool_data([copy], "framework_op_stats", {"use_saved_result": True})
    if isinstance(data, bytes):
        data = data.decode()
    run_table = table_rows(json.loads(data)[0])  # the table with idle
    op_stats_path = os.path.join(run, "ALL_HOSTS.op_stats_v2.pb")
    op_stats = op_stats_pb2.OpStats()
    with open(op_stats_path, "rb") as fh:
        op_stats.ParseFromString(fh.read())

    sides = {}
    for side, db, rows in [
        ("Device", op_stats.device_op_metrics_db, device_rows(op_stats.device_op_metrics_db)),
        ("Host", op_stats.host_op_metrics_db, host_rows(op_stats.host_op_metrics_db)),
    ]:
        rows = xprof_order(rows)
        idle = [r for r in rows if r["type"] == "IDLE"]
        if len(idle) != 1:
            raise SystemExit(f"{side}: {len(idle)} IDLE rows")
        if idle[0]["self_time_ps"] != db.total_time_ps - db.total_op_time_ps:
            raise SystemExit(f"{side}: idle {idle[0]['self_time_ps']} ps, db {db.total_time_ps - db.total_op_time_ps}")
        sides[side] = {"rows": rows, "total_ps": db.total_time_ps, "idle_ps": idle[0]["self_time_ps"]}

    checked = {}
    with open(STORED_DEVICE) as fh:
        stored_device = table_rows(json.load(fh))
    with open(STORED_HOST) as fh:
        stored_host = table_rows(json.load(fh))
    for label, table, side in [
        ("this run's table", run_table, "Device"),
        ("this run's table", run_table, "Host"),
        ("tool_framework_op_stats__level0_as_tf_op.json", stored_device, "Device"),
        ("tool_framework_op_stats.json", stored_host, "Host"),
    ]:
        s = sides[side]
        n = check(label, side, table, s["rows"], s["total_ps"])
        checked.setdefault(side, {})[label] = n
        print(f"{label} {side}: {n} rows equal")

    out_rows = []
    for side in ["Device", "Host"]:
        out_rows += [dict(r, side=side) for r in sides[side]["rows"] if r["type"] != "IDLE"]
    doc = {
        "about": "XProf 2.24.2 framework_op_stats rows, every op (no 500-op cap), of the level0_as_tf_op "
        "copy of 34.83.195.179_6003.xplane.pb, rebuilt from the converter's OpStats by "
        "scripts/capture/xprof_full_framework_ops.py; times in ps; IDLE is not a row",
        "copy_sha256": COPY_SHA256,
        "xprof_version": XPROF_VERSION,
        "sides": {
            side: {"ops": sum(1 for r in s["rows"] if r["type"] != "IDLE"), "total_ps": s["total_ps"],
                   "idle_ps": s["idle_ps"]}
            for side, s in sides.items()
        },
        "self_check": {
            "passed": True,
            "tolerance_us": TOLERANCE_US,
            "rows_checked": checked,
            "what": "each side's rows of XProf's tables (this run's, and the stored ones) are the first "
            "rows here in XProf's order (IDLE included), with equal name, type, occurrences, "
            "total and self time and self-time share",
        },
        "rows": out_rows,
    }
    with open(OUT, "w") as fh:
        json.dump(doc, fh, sort_keys=True, separators=(",", ":"))
        fh.write("\n")
    for side, s in doc["sides"].items():
        print(f"{side}: {s['ops']} ops, total {s['total_ps']} ps, idle {s['idle_ps']} ps")
    shutil.rmtree(scratch)
    print(f"wrote {os.path.relpath(OUT, REPO)}")


if __name__ == "__main__":
    main()
