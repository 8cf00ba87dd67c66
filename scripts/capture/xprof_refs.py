"""Run XProf 2.24.2's own CLI on a captured trace and store its answers as reference output.

    python scripts/capture/xprof_refs.py TRACE_DIR [--only cmd1,cmd2,prefix*] [--xprof PATH]
        [--baseline NAME=DIR] [--timeout S]

TRACE_DIR holds `<host>.xplane.pb` (flattened) and `ground_truth.json`. For every command,
a *fresh* scratch directory `<scratch>/<trace name>/<host>.xplane.pb` is created and the CLI
is run from `<scratch>` with a fresh TMPDIR, so neither the CLI's global result cache
(`$TMPDIR/xprof_cli_cache_$USER`) nor the cache files it writes next to the trace are ever
reused: this is the `--bypass_cache` equivalent used for shared/corpus (facts 10.11).
The argv recorded is exactly what ran (same patterns as shared/corpus/xprof_refs).

Writes TRACE_DIR/xprof/<command>.json = {"argv","rc","wall_s","output","stderr_tail",
"nonempty"} (+ "stdout_text" when stdout was not JSON, + "result_rows" for query_events_db)
and TRACE_DIR/xprof/_index.json = {command: {rc, wall_s, nonempty, status}} plus
"_side_effect_files" (files the CLI wrote into the run directory).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_XPROF = os.environ.get("XPROF_BIN", "/work/.venv-jax/bin/xprof")

COLLECTIVE_RE = (r"^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|ppermute|"
                 r"reduce_scatter|all_gather|all_to_all|psum|psum_scatter)(-start|-done)?(\.[0-9]+)?$")

# (command name, argv after `xprof`); {T} = trace (session) name, {MODULE} = main module
BASE_COMMANDS = [
    ("get_hosts", ["get_hosts", "{T}"]),
    ("list_xplane_lines", ["list_xplane_lines", "{T}"]),
    ("get_overview", ["get_overview", "{T}"]),
    ("get_profile_summary", ["get_profile_summary", "{T}"]),
    ("get_step_trace", ["get_step_trace", "{T}", "--limit=0"]),
    ("get_kpi_metrics", ["get_kpi_metrics", "{T}"]),
    ("get_top_hlo_ops", ["get_top_hlo_ops", "{T}"]),
    ("get_hlo_op_profile", ["get_hlo_op_profile", "{T}"]),
    ("get_hlo_op_profile__category", ["get_hlo_op_profile", "{T}", "--view=category"]),
    ("get_hlo_op_profile__flat", ["get_hlo_op_profile", "{T}", "--view=flat", "--top_n=50"]),
    ("get_hlo_stats", ["get_hlo_stats", "{T}"]),
    ("list_hlo_modules", ["list_hlo_modules", "{T}"]),
    ("analyze_async_overlap", ["analyze_async_overlap", "{T}"]),
    ("check_host_boundness", ["check_host_boundness", "{T}"]),
    ("get_roofline_model", ["get_roofline_model", "{T}"]),
    ("get_memory_profile", ["get_memory_profile", "{T}"]),
    ("get_peak_allocations", ["get_peak_allocations", "{T}"]),
    ("get_device_information", ["get_device_information", "{T}"]),
    ("get_device_time_attribution", ["get_device_time_attribution", "{T}"]),
    ("get_kernel_stats", ["get_kernel_stats", "--session_id={T}", "--include_summary=True"]),
    ("get_kernel_stats__cpu0", ["get_kernel_stats", "--session_id={T}", "--include_summary=True",
                                "--device_to_use=CPU:0"]),
    ("get_utilization_viewer", ["get_utilization_viewer", "{T}"]),
    ("get_perf_counters", ["get_perf_counters", "{T}"]),
    ("get_kernel_utilization", ["get_kernel_utilization", "{T}"]),
    ("get_llo_analysis", ["get_llo_analysis", "{T}"]),
    ("get_hlo_text__main", ["get_hlo_text", "{T}", "--module_name={MODULE}", "--max_lines=-1"]),
    ("query_hlo_graph__summary", ["query_hlo_graph", "{T}", "--mode=summary", "--module_name={MODULE}"]),
    ("query_hlo_graph__opcode_stats", ["query_hlo_graph", "{T}", "--mode=opcode_stats",
                                       "--module_name={MODULE}"]),
    ("get_graph_viewer__main", ["get_graph_viewer", "--session_id={T}", "--module_name={MODULE}"]),
    ("aggregate_xplane_events__all_by_line", ["aggregate_xplane_events", "{T}", "--event_regex=.*",
                                              "--group_by=line"]),
    ("aggregate_xplane_events__steps_train", ["aggregate_xplane_events", "{T}", "--event_regex=^train$"]),
    ("aggregate_xplane_events__pjit_dispatch", ["aggregate_xplane_events", "{T}",
                                                r"--event_regex=^PjitFunction\(.*"]),
    ("aggregate_xplane_events__thunk_executor", ["aggregate_xplane_events", "{T}",
                                                 "--event_regex=^ThunkExecutor::Execute.*"]),
    ("aggregate_xplane_events__execute_helper", ["aggregate_xplane_events", "{T}",
                                                 "--event_regex=.*CommonPjRtLoadedExecutable::Execute.*"]),
    ("aggregate_xplane_events__compile", ["aggregate_xplane_events", "{T}",
                                          "--event_regex=(backend_compile_and_load|PjRtCpuClient::Compile|"
                                          "CpuCompiler::RunBackend|JitCompiler::Compile)"]),
    ("aggregate_xplane_events__hlo_thunks_fusion_dot", ["aggregate_xplane_events", "{T}",
                                                        r"--event_regex=^(?!end: )(.*fusion.*|dot(\.[0-9]+)?|convolution.*)$"]),
    ("aggregate_xplane_events__hlo_thunks_layout", ["aggregate_xplane_events", "{T}",
                                                    "--event_regex=^(?!end: )(?![$])(.*transpose.*|.*copy.*|.*convert.*)$"]),
    ("aggregate_xplane_events__thunk_end_markers", ["aggregate_xplane_events", "{T}", "--event_regex=^end: "]),
    ("aggregate_xplane_events__collectives", ["aggregate_xplane_events", "{T}",
                                              "--event_regex=" + COLLECTIVE_RE]),
    ("aggregate_xplane_events__host_callback", ["aggregate_xplane_events", "{T}",
                                                "--event_regex=^(?!end: )(?![$])(?!Wait for rendezvous).*(callback|debug_print)"]),
    ("aggregate_xplane_events__python_sleep", ["aggregate_xplane_events", "{T}", r"--event_regex=^\$time sleep$"]),
    ("aggregate_xplane_events__rendezvous", ["aggregate_xplane_events", "{T}",
                                             "--event_regex=(Rendezvous|Wait for rendezvous|Wait: pending_threads)"]),
    ("list_xplane_events__steps", ["list_xplane_events", "{T}", "--event_regex=^train$", "--max_events=-1"]),
    ("query_events_db__threads", ["query_events_db", "--session_id={T}",
                                  "--query=SELECT thread_name, category, COUNT(*) AS n, SUM(end_ns - start_ns) / 1e6 "
                                  "AS total_ms FROM Events GROUP BY thread_name, category ORDER BY n DESC"]),
    ("query_events_db__hlo_ops", ["query_events_db", "--session_id={T}",
                                  "--query=SELECT hlo_module, hlo_op, COUNT(*) AS n, SUM(end_ns - start_ns) / 1000.0 "
                                  "AS total_us, SUM(self_time_ns) / 1000.0 AS self_us FROM Events WHERE hlo_op IS NOT "
                                  "NULL GROUP BY hlo_module, hlo_op ORDER BY total_us DESC"]),
    ("query_events_db__steps", ["query_events_db", "--session_id={T}",
                                "--query=SELECT step, COUNT(*) AS n, (MAX(end_ns) - MIN(start_ns)) / 1e6 AS span_ms "
                                "FROM Events WHERE step IS NOT NULL GROUP BY step ORDER BY step"]),
]

# `nonempty` heuristic; reproduces the corpus _index.json values for all 293 corpus refs.
_SKIP = {"capture", "status", "reason", "error", "message", "session_id", "events_scanned",
         "returned", "total_matched", "truncated", "module_name", "mode", "op_name",
         "saved_to_path", "summary_markdown", "line_count", "byte_count", "returned_line_count",
         "info", "device_type", "path", "skipped", "remediation", "warnings", "hint", "hints"}
_EMPTY_STATUS = {"UNAVAILABLE", "ERROR", "NO_DATA", "NO_DEVICE_TIMELINE_EVENTS", "NO_PERF_COUNTERS"}


def _num(v):
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return v > 0
    if isinstance(v, str):
        m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)", v)
        return bool(m) and float(m.group(1)) > 0
    return False


def _ne(o):
    if isinstance(o, dict):
        return any(_ne(v) for k, v in o.items() if k not in _SKIP)
    if isinstance(o, list):
        return len(o) > 0
    return _num(o)


def nonempty(rc, output, stdout_text=None, result_rows=None):
    if result_rows is not None:
        return bool(result_rows)
    if output is None:
        return rc == 0 and bool(stdout_text)
    if rc != 0:
        return False
    if isinstance(output, dict):
        if output.get("status") in _EMPTY_STATUS:
            return False
        if isinstance(output.get("content"), str) and output["content"]:
            return True
    return _ne(output)


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _place(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def run_one(xprof, name, argv_tail, trace_name, pb_files, timeout, extra_sessions=None):
    """Run one CLI command in a fresh scratch dir. Returns (record, side_effect_files)."""
    scratch = tempfile.mkdtemp(prefix="xprof_ref_")
    try:
        run_dir = os.path.join(scratch, trace_name)
        os.makedirs(run_dir)
        for f in pb_files:
            _place(f, os.path.join(run_dir, os.path.basename(f)))
        for sname, sfiles in (extra_sessions or {}).items():
            d = os.path.join(scratch, sname)
            os.makedirs(d, exist_ok=True)
            for f in sfiles:
                _place(f, os.path.join(d, os.path.basename(f)))
        before = set(os.listdir(run_dir))
        tmp = os.path.join(scratch, "_tmp")
        os.makedirs(tmp)
        env = dict(os.environ, TMPDIR=tmp, PYTHONUNBUFFERED="1")
        argv = ["xprof"] + argv_tail
        t0 = time.perf_counter()
        try:
            p = subprocess.run([xprof] + argv_tail, cwd=scratch, env=env, capture_output=True,
                               text=True, timeout=timeout)
            rc, so, se = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as ex:
            rc, so, se = 124, ex.stdout or "", (ex.stderr or "") + f"\nTIMEOUT after {timeout}s"
            if isinstance(so, bytes):
                so = so.decode("utf-8", "replace")
            if isinstance(se, bytes):
                se = se.decode("utf-8", "replace")
        wall = round(time.perf_counter() - t0, 3)
        cache_root = os.path.join(tmp, f"xprof_cli_cache_{os.environ.get('USER') or _user()}")

        def scrub(s):
            s = s.replace(cache_root + "/", "xprof_cli_cache_root/").replace(cache_root, "xprof_cli_cache_root")
            return s.replace(scratch + "/", "").replace(scratch, ".")

        rec = {"argv": argv, "rc": rc, "wall_s": wall}
        output = None
        try:
            output = json.loads(so) if so.strip() else None
        except json.JSONDecodeError:
            rec["stdout_text"] = scrub(so)
        result_rows = None
        if isinstance(output, dict) and name.startswith("query_events_db") and output.get("path"):
            pth = output["path"]
            if not os.path.isabs(pth):
                pth = os.path.join(scratch, pth)
            try:
                with open(pth) as fh:
                    result_rows = json.load(fh)
                if isinstance(result_rows, dict) and "rows" in result_rows:
                    result_rows = result_rows["rows"]
            except (OSError, json.JSONDecodeError):
                result_rows = None
        if output is not None:
            output = json.loads(scrub(json.dumps(output)))
        rec["output"] = output
        rec["stderr_tail"] = [scrub(l) for l in se.strip().splitlines()[-20:]] if se.strip() else []
        if result_rows is not None or name.startswith("query_events_db"):
            rec["result_rows"] = result_rows if result_rows is not None else []
        rec["nonempty"] = nonempty(rc, output, rec.get("stdout_text"),
                                   rec.get("result_rows") if name.startswith("query_events_db") else None)
        side = {}
        for f in sorted(set(os.listdir(run_dir)) - before):
            fp = os.path.join(run_dir, f)
            if os.path.isfile(fp):
                side[f] = {"bytes": os.path.getsize(fp), "sha256": _sha(fp)}
        return rec, side
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _user():
    import getpass
    return getpass.getuser()


def _entry_and_bodies(text):
    """`(entry lines, {computation: lines})` of an HLO module's text (XProf's `get_hlo_text`)."""
    comps, name, lines, entry = {}, None, [], None
    for line in text.splitlines():
        s = line.strip()
        if name is None:
            m = re.match(r"^(ENTRY )?%?([^\s({]+) .*\{$", s)
            if m and not s.startswith("HloModule"):
                name, lines = m.group(2), []
                if m.group(1):
                    entry = name
        elif s == "}":
            comps[name] = lines
            name = None
        else:
            lines.append(s)
    return comps.get(entry, []), {k: v for k, v in comps.items() if k != entry}


def _opcode(line):
    m = re.match(r"^(?:ROOT )?%?(\S+) = .*? ([a-z][a-z0-9-]*)\(", line)
    return (m.group(1), m.group(2)) if m else (None, None)


def graph_focus(text):
    """The instructions whose neighbourhoods are asked for: the entry's first dot, convolution or
    custom call (else its first fusion), its last fusion, and the root of the body the first entry
    fusion calls. Chosen from XProf's own module text so that the references need nothing of
    xlens."""
    entry, bodies = _entry_and_bodies(text)
    ops = [_opcode(l) for l in entry]
    picks = {}
    heavy = [n for n, o in ops if o in ("dot", "convolution", "custom-call")]
    fusions = [n for n, o in ops if o == "fusion"]
    if heavy or fusions:
        picks["first"] = (heavy or fusions)[0]
    if fusions:
        picks["last_fusion"] = fusions[-1]
        first = next(l for l in entry if _opcode(l)[0] == fusions[0])
        m = re.search(r"calls=%?([^\s,})]+)", first)
        body = bodies.get(m.group(1)) if m else None
        root = next((l for l in body or [] if l.startswith("ROOT ")), None)
        if root:
            picks["fused_root"] = _opcode(root)[0]
    return picks


def graph_commands(trace_name, module, text):
    """XProf's HLO-graph commands on the instructions `graph_focus` picks."""
    cmds = []
    for key, op in graph_focus(text).items():
        radius = {"first": [], "last_fusion": ["--radius=3"], "fused_root": ["--radius=1"]}[key]
        cmds.append((f"get_hlo_neighborhood__{key}", ["get_hlo_neighborhood", trace_name,
                     f"--instruction_name={op}", f"--module_name={module}"] + radius))
        if key == "first":
            cmds.append((f"get_hlo_text__{key}", ["get_hlo_text", trace_name, f"--module_name={module}",
                         f"--op_name={op}"]))
    return cmds


def commands_for(trace_name, module, gt, baseline_name=None):
    cmds = []
    for name, tail in BASE_COMMANDS:
        if "{MODULE}" in " ".join(tail) and not module:
            continue
        cmds.append((name, [a.replace("{T}", trace_name).replace("{MODULE}", module or "") for a in tail]))
    for spec in (gt or {}).get("extra_event_regexes", []):
        key, rx = spec.split("=", 1)
        cmds.append((f"aggregate_xplane_events__{key}",
                     ["aggregate_xplane_events", trace_name, f"--event_regex={rx}"]))
    if baseline_name:
        cmds.append(("diff_sessions__vs_baseline",
                     ["diff_sessions", f"--baseline_session_id={baseline_name}",
                      f"--optimized_session_id={trace_name}"]))
    return cmds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace_dir")
    ap.add_argument("--name", help="session name (default: basename of trace_dir)")
    ap.add_argument("--only", help="comma-separated command names")
    ap.add_argument("--xprof", default=DEFAULT_XPROF)
    ap.add_argument("--baseline", help="NAME=DIR of a baseline trace for diff_sessions")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", help="output dir (default TRACE_DIR/xprof)")
    a = ap.parse_args()

    tdir = os.path.abspath(a.trace_dir)
    tname = a.name or os.path.basename(tdir.rstrip("/"))
    pbs = sorted(os.path.join(tdir, f) for f in os.listdir(tdir) if f.endswith(".xplane.pb"))
    if not pbs:
        sys.exit(f"no *.xplane.pb in {tdir}")
    gt = {}
    gpath = os.path.join(tdir, "ground_truth.json")
    if os.path.exists(gpath):
        with open(gpath) as fh:
            gt = json.load(fh)
    module = gt.get("main_hlo_module")
    extra = {}
    bname = None
    if a.baseline:
        bname, bdir = a.baseline.split("=", 1)
        extra[bname] = sorted(os.path.join(bdir, f) for f in os.listdir(bdir) if f.endswith(".xplane.pb"))
    cmds = commands_for(tname, module, gt, bname)
    out = a.out or os.path.join(tdir, "xprof")
    text_ref = os.path.join(out, "get_hlo_text__main.json")
    if os.path.exists(text_ref):
        # The module and its text as XProf printed them (the corpus's ground truth names no
        # module: its references were made with the module in the argv).
        with open(text_ref) as fh:
            ref = json.load(fh)
        text = (ref.get("output") or {}).get("content") or ""
        named = next((a.split("=", 1)[1] for a in ref["argv"] if a.startswith("--module_name=")), None)
        if named and text:
            cmds += graph_commands(tname, named, text)
    if a.only:
        keep = set(a.only.split(","))
        cmds = [c for c in cmds if c[0] in keep or any(c[0].startswith(k.rstrip("*")) for k in keep
                                                        if k.endswith("*"))]
    os.makedirs(out, exist_ok=True)
    ipath = os.path.join(out, "_index.json")
    index = {}
    if os.path.exists(ipath) and a.only:
        with open(ipath) as fh:
            index = json.load(fh)
    side_all = dict(index.get("_side_effect_files", {}))
    for name, tail in cmds:
        rec, side = run_one(a.xprof, name, tail, tname, pbs, a.timeout,
                            extra if name.startswith("diff_sessions") else None)
        side_all.update(side)
        with open(os.path.join(out, f"{name}.json"), "w") as fh:
            json.dump(rec, fh, indent=1)
        status = rec["output"].get("status") if isinstance(rec["output"], dict) else None
        index[name] = {"rc": rec["rc"], "wall_s": rec["wall_s"], "nonempty": rec["nonempty"],
                       "status": status}
        print(f"  {tname}: {name:48s} rc={rec['rc']} {rec['wall_s']:7.2f}s nonempty={rec['nonempty']}",
              flush=True)
    index.pop("_side_effect_files", None)
    index["_side_effect_files"] = side_all
    with open(ipath, "w") as fh:
        json.dump(index, fh, indent=1)


if __name__ == "__main__":
    main()
