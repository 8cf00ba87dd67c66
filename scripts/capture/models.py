"""Shared models and the `capture()` helper for the xlens real-profile scenarios.

Conventions (same as shared/corpus):
  * one process per trace; warm-up before the trace unless the fault is about warm-up;
  * every traced step is wrapped in jax.profiler.StepTraceAnnotation("train", step_num=i)
    with block_until_ready *inside* the annotation;
  * ground truth is measured in-process, independently of the profiler: step wall times with
    time.perf_counter, compilations through jax.monitoring listeners, HLO facts from an
    ahead-of-time compile of the same jitted function (`f.lower(*args).compile()`).

Import this module *after* setting XLA_FLAGS if a scenario needs several CPU devices.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import sys
import time

import numpy as np

import jax
import jax.numpy as jnp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_text  # noqa: E402
import xspace as X  # noqa: E402

_SCRIPT_T0 = time.perf_counter()

# ---------------------------------------------------------------------------
# models


class TCfg:
    """Decoder-only transformer config (corpus models.TCFG: d=128, 4 heads, ff=512,
    vocab=256, seq=32; batch=8)."""

    def __init__(self, d=128, heads=4, ff=512, vocab=256, seq=32, batch=8, layers=1):
        self.d, self.heads, self.ff, self.vocab = d, heads, ff, vocab
        self.seq, self.batch, self.layers = seq, batch, layers

    def describe(self):
        return (f"{self.layers}-layer decoder-only transformer (d={self.d}, {self.heads} heads, "
                f"ff={self.ff}, vocab={self.vocab}, seq={self.seq}; batch={self.batch})")


TCFG = TCfg()


def _init(rng, shape, scale=None):
    scale = scale if scale is not None else 1.0 / math.sqrt(shape[0])
    return jnp.asarray(rng.standard_normal(shape).astype(np.float32) * scale)


def init_transformer(cfg: TCfg, seed=0):
    """Parameters built with numpy (so no jax RNG programs are compiled)."""
    rng = np.random.default_rng(seed)
    d, ff = cfg.d, cfg.ff
    layers = []
    for _ in range(cfg.layers):
        layers.append({
            "ln1": jnp.ones((d,), jnp.float32), "ln2": jnp.ones((d,), jnp.float32),
            "wq": _init(rng, (d, d)), "wk": _init(rng, (d, d)), "wv": _init(rng, (d, d)),
            "wo": _init(rng, (d, d)), "w1": _init(rng, (d, ff)), "w2": _init(rng, (ff, d)),
        })
    return {"embed": _init(rng, (cfg.vocab, d), 0.02), "pos": _init(rng, (cfg.seq, d), 0.02),
            "layers": layers, "out": _init(rng, (d, cfg.vocab))}


def make_batches(cfg: TCfg, n, warmup=3, batch=None):
    """Device-resident batches for steps -warmup..n-1, built before tracing so that no
    host->device staging programs run inside the steps."""
    return {i: jax.block_until_ready(make_batch(cfg, i, batch)) for i in range(-warmup, n)}


def make_batch(cfg: TCfg, step, batch=None):
    rng = np.random.default_rng(1000 + step)
    b = batch or cfg.batch
    toks = rng.integers(0, cfg.vocab, size=(b, cfg.seq + 1), dtype=np.int32)
    return jnp.asarray(toks[:, :-1]), jnp.asarray(toks[:, 1:])


def layer_norm(x, g):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g


def attention(p, x, heads):
    b, s, d = x.shape
    hd = d // heads
    q = (x @ p["wq"]).reshape(b, s, heads, hd)
    k = (x @ p["wk"]).reshape(b, s, heads, hd)
    v = (x @ p["wv"]).reshape(b, s, heads, hd)
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
    mask = jnp.tril(jnp.ones((s, s), bool))
    att = jnp.where(mask, att, -1e9)
    att = jax.nn.softmax(att, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
    return o @ p["wo"]


def block(p, x, heads):
    x = x + attention(p, layer_norm(x, p["ln1"]), heads)
    h = jax.nn.gelu(layer_norm(x, p["ln2"]) @ p["w1"])
    return x + h @ p["w2"]


def transformer_loss(params, batch, cfg: TCfg, layer_fn=None):
    toks, tgt = batch
    x = params["embed"][toks] + params["pos"][None, :, :]
    fn = layer_fn or (lambda p, h: block(p, h, cfg.heads))
    for p in params["layers"]:
        x = fn(p, x)
    logits = x @ params["out"]
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, tgt[..., None], axis=-1)
    return jnp.mean(nll)


def sgd(params, grads, lr=1e-3):
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


def make_transformer_train_step(cfg: TCfg, layer_fn=None, donate=True, lr=1e-3):
    def train_step(params, batch):
        loss, grads = jax.value_and_grad(transformer_loss)(params, batch, cfg, layer_fn)
        return sgd(params, grads, lr), loss
    return jax.jit(train_step, donate_argnums=(0,) if donate else ())


def init_mlp(dims, seed=0, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    return [{"w": _init(rng, (a, b)).astype(dtype), "b": jnp.zeros((b,), dtype)}
            for a, b in zip(dims[:-1], dims[1:])]


def mlp_apply(params, x, act=None):
    act = act or jax.nn.gelu
    for i, p in enumerate(params):
        x = x @ p["w"] + p["b"]
        if i < len(params) - 1:
            x = act(x)
    return x


def mlp_loss(params, batch, act=None):
    x, y = batch
    return jnp.mean((mlp_apply(params, x, act) - y) ** 2)


def make_mlp_train_step(donate=True, lr=1e-3, act=None):
    def train_step(params, batch):
        loss, grads = jax.value_and_grad(mlp_loss)(params, batch, act)
        return sgd(params, grads, lr), loss
    return jax.jit(train_step, donate_argnums=(0,) if donate else ())


# Tensor-parallel MLP for 8 virtual CPU devices (corpus sharded_collectives_baseline:
# Mesh(4x2, ('data','model')), 3 layers, B=64, D=256, F=512).
TP = {"mesh_shape": (4, 2), "axes": ("data", "model"), "layers": 3, "B": 64, "D": 256, "F": 512}


def make_mesh(shape=(4, 2), axes=("data", "model")):
    devs = np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape)
    return jax.sharding.Mesh(devs, axes)


def init_tp_mlp(layers=3, D=256, F=512, seed=0):
    rng = np.random.default_rng(seed)
    return [{"w1": _init(rng, (D, F)), "w2": _init(rng, (F, D))} for _ in range(layers)]


# ---------------------------------------------------------------------------
# capture helper


def parse_args(default_steps, extra=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="output directory for this scenario")
    ap.add_argument("--steps", type=int, default=default_steps)
    if extra:
        extra(ap)
    return ap.parse_args()


class CompileListener:
    """Records jax.monitoring compile-related time spans (wall clock)."""

    EVENTS = ("/jax/core/compile/backend_compile_duration",
              "/jax/core/compile/jaxpr_trace_duration",
              "/jax/core/compile/jaxpr_to_mlir_module_duration")

    def __init__(self):
        self.events = []
        jax.monitoring.register_event_time_span_listener(self._on_span)

    def _on_span(self, event, start, end, **kw):
        if event in self.EVENTS or event.startswith("/jax/core/compile"):
            self.events.append({"event": event, "fun_name": kw.get("fun_name"),
                                "start_wall_ns": int(start * 1e9), "end_wall_ns": int(end * 1e9),
                                "duration_ms": round((end - start) * 1e3, 3)})

    def between(self, lo_ns, hi_ns):
        evs = [e for e in self.events if e["start_wall_ns"] >= lo_ns and e["end_wall_ns"] <= hi_ns]
        bc = [e for e in evs if e["event"].endswith("backend_compile_duration")]
        return {
            "backend_compile_count": len(bc),
            "backend_compile_fun_names": [e["fun_name"] for e in bc],
            "backend_compile_ms": [e["duration_ms"] for e in bc],
            "backend_compile_total_ms": round(sum(e["duration_ms"] for e in bc), 3),
            "jaxpr_trace_count": sum(1 for e in evs if e["event"].endswith("jaxpr_trace_duration")),
            "events": evs,
        }


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _block(x):
    return jax.block_until_ready(x)


def _to_float(x):
    try:
        return float(np.asarray(x).reshape(-1)[0])
    except Exception:  # noqa: BLE001
        return None


def environment():
    return {"jax": jax.__version__, "jaxlib": jax.lib.__version__ if hasattr(jax, "lib") else None,
            "python": platform.python_version(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "num_devices": jax.device_count(), "devices": [str(d) for d in jax.devices()],
            "cpu_count": os.cpu_count(), "hostname": socket.gethostname()}


def hlo_facts(name, jitted, args, out_dir):
    """AOT-compile `jitted(*args)`, write hlo/<name>.optimized.hlo.txt and
    hlo/<name>.cost_analysis.json, return the ground-truth dict for it."""
    compiled = jitted.lower(*args).compile()
    text = compiled.as_text()
    hdir = os.path.join(out_dir, "hlo")
    os.makedirs(hdir, exist_ok=True)
    with open(os.path.join(hdir, f"{name}.optimized.hlo.txt"), "w") as fh:
        fh.write(text)
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    ca = dict(ca or {})
    cost = {k: float(ca[k]) for k in ("flops", "bytes accessed", "transcendentals") if k in ca}
    with open(os.path.join(hdir, f"{name}.cost_analysis.json"), "w") as fh:
        json.dump({"function": name, "cost_analysis": cost,
                   "cost_analysis_full": {k: float(v) for k, v in ca.items()}}, fh, indent=1,
                  sort_keys=True)
    ma = compiled.memory_analysis()
    mem = {}
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes"):
        mem[k] = int(getattr(ma, k, 0)) if ma is not None else None
    facts = hlo_text.summarize(text)
    facts["cost_analysis"] = cost
    facts["memory_analysis"] = mem
    return facts


def capture(name, step_fn, *, out_dir, n_steps, warmup=3, program, injected_fault,
            expected_faults, evidence, hlo_fns, baseline=None, evidence_fn=None,
            extra_gt=None, dispatches_per_step=1, profiler_options=None, keep_trace_json=False,
            decode=True):
    """Warm up, trace `n_steps` steps of `step_fn(i)` and write ground truth.

    step_fn(i) dispatches step i and returns something to block on (its first leaf that is
    a scalar is recorded as the loss). hlo_fns: {fn_name: (jitted, example_args)} (or a
    callable returning that dict, evaluated after the trace) for the HLO files.
    evidence_fn(space, decoded, gt) -> dict of observed evidence, merged into gt.

    The three phases are `warm_up`, `trace_steps` and `write_ground_truth`;
    capture_twice.py calls them itself to take two traces in one process.
    """
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    listener = CompileListener()
    warm_up(step_fn, warmup)
    window = trace_steps(step_fn, out_dir, range(n_steps), listener,
                         profiler_options=profiler_options, keep_trace_json=keep_trace_json)
    return write_ground_truth(
        name, window, out_dir=out_dir, program=program, injected_fault=injected_fault,
        expected_faults=expected_faults, evidence=evidence, hlo_fns=hlo_fns, baseline=baseline,
        evidence_fn=evidence_fn, extra_gt=extra_gt, dispatches_per_step=dispatches_per_step,
        decode=decode)


def warm_up(step_fn, warmup):
    """Run the warm-up steps -warmup..-1 (outside any trace)."""
    for k in range(warmup):
        _block(step_fn(-warmup + k))


def trace_steps(step_fn, out_dir, step_nums, listener, *, profiler_options=None,
                keep_trace_json=False):
    """One jax.profiler trace of the steps `step_nums`, flattened to <out_dir>/<host>.xplane.pb.
    Returns the measured window (profile path, steps, losses, trace_window, compilations)."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    losses = []
    raw = os.path.join(out_dir, "_raw_trace")
    shutil.rmtree(raw, ignore_errors=True)
    steps = []
    tw = {"loadavg_1m_before": _loadavg(), "start_wall_ns": time.time_ns()}
    t_start = time.perf_counter()
    jax.profiler.start_trace(raw, profiler_options=profiler_options)
    tw["trace_started_wall_ns"] = time.time_ns()
    t_started = time.perf_counter()
    for i in step_nums:
        w0 = time.time_ns()
        t0 = time.perf_counter()
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            r = step_fn(i)
            _block(r)
        t1 = time.perf_counter()
        w1 = time.time_ns()
        steps.append({"step_num": i, "name": "train", "wall_ms": round((t1 - t0) * 1e3, 4),
                      "start_wall_ns": w0, "end_wall_ns": w1})
        leaves = jax.tree_util.tree_leaves(r)
        scal = [l for l in leaves if getattr(l, "shape", None) == ()]
        losses.append(_to_float(scal[-1]) if scal else None)
    tw["body_end_wall_ns"] = time.time_ns()
    t_body = time.perf_counter()
    jax.profiler.stop_trace()
    tw["stop_done_wall_ns"] = time.time_ns()
    t_stop = time.perf_counter()
    tw["loadavg_1m_after"] = _loadavg()
    tw["start_trace_ms"] = round((t_started - t_start) * 1e3, 3)
    tw["body_ms"] = round((t_body - t_started) * 1e3, 3)
    tw["stop_trace_ms"] = round((t_stop - t_body) * 1e3, 3)
    compiles = listener.between(tw["trace_started_wall_ns"], tw["body_end_wall_ns"])

    # flatten the profile: <host>.xplane.pb directly in out_dir
    found = []
    for root, _, files in os.walk(raw):
        for f in files:
            if f.endswith(".xplane.pb"):
                found.append(os.path.join(root, f))
            if keep_trace_json and f.endswith(".trace.json.gz"):
                shutil.copy(os.path.join(root, f), os.path.join(out_dir, f))
    assert len(found) == 1, found
    for f in os.listdir(out_dir):
        if f.endswith(".xplane.pb"):
            os.remove(os.path.join(out_dir, f))
    pb = os.path.join(out_dir, os.path.basename(found[0]))
    shutil.move(found[0], pb)
    shutil.rmtree(raw, ignore_errors=True)
    return {"pb": pb, "steps": steps, "losses": losses, "trace_window": tw, "compiles": compiles}


def write_ground_truth(name, window, *, out_dir, program, injected_fault, expected_faults,
                       evidence, hlo_fns, baseline=None, evidence_fn=None, extra_gt=None,
                       dispatches_per_step=1, decode=True):
    """Ground truth for one traced window of `trace_steps`: the HLO files of `hlo_fns` (AOT
    compile), the decoded profile and `evidence_fn`'s observations, written to
    <out_dir>/ground_truth.json. Returns (gt, space, decoded)."""
    out_dir = os.path.abspath(out_dir)
    pb, steps, losses = window["pb"], window["steps"], window["losses"]
    tw, compiles = window["trace_window"], window["compiles"]

    wall = [s["wall_ms"] for s in steps]
    gt = {
        "program": program,
        "injected_fault": injected_fault,
        "expected_faults": list(expected_faults),
        "baseline": baseline,
        "evidence": evidence,
        "profile_file": os.path.basename(pb),
        "environment": environment(),
        "compilations_in_trace": compiles,
        "losses": losses,
        "dispatches_per_step": dispatches_per_step,
        "steps": steps,
        "steps_summary": {"count": len(wall), "mean_ms": round(statistics.mean(wall), 4),
                          "min_ms": min(wall), "max_ms": max(wall),
                          "median_ms": round(statistics.median(wall), 4),
                          "total_ms": round(sum(wall), 4)},
        "trace_window": tw,
    }
    if extra_gt:
        gt.update(extra_gt)

    # HLO facts from an AOT compile of the same jitted functions (after the trace).
    if callable(hlo_fns):
        hlo_fns = hlo_fns()
    gt["optimized_hlo"] = {fn: hlo_facts(fn, j, a, out_dir) for fn, (j, a) in hlo_fns.items()}

    # Decode the profile we just wrote.
    if decode:
        space = X.XSpace(pb)
        decoded = decode_summary(space, gt)
        gt["main_hlo_module"] = decoded["main_hlo_module"]
        gt["decoded_xspace"] = decoded
        gt["aot_vs_profile_hlo"] = _aot_vs_profile(gt, decoded)
        if evidence_fn:
            gt["observed"] = evidence_fn(space, decoded, gt)
    else:  # big profiles: only the module list (metadata plane), no per-event objects
        space = X.XSpace(pb, with_events=False)
        mods = X.hlo_modules(space)
        want = {f["hlo_module_name"] for f in gt["optimized_hlo"].values()}
        cand = sorted((m for m in mods if m.rsplit("(", 1)[0] in want), key=lambda m: mods[m]["program_id"] or 0)
        gt["main_hlo_module"] = cand[-1] if cand else None
        decoded = None
    gt["process_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    gt["script_wall_s"] = round(time.perf_counter() - _SCRIPT_T0, 3)
    gt["profile_bytes"] = os.path.getsize(pb)
    with open(os.path.join(out_dir, "ground_truth.json"), "w") as fh:
        json.dump(gt, fh, indent=1)
    print(f"[{name}] wrote {pb} ({os.path.getsize(pb)/1024:.0f} KiB); steps ms: {wall}; "
          f"main module {gt['main_hlo_module']}; compiles in trace: {compiles['backend_compile_count']}")
    return gt, space, decoded


def _aot_vs_profile(gt, decoded):
    """Check that the AOT-compiled HLO text describes the module that ran in the trace."""
    parsed = decode_summary.last_parsed
    evs = decode_summary.last_events
    out = {}
    for fn, facts in gt["optimized_hlo"].items():
        cands = [m for m in parsed if m.rsplit("(", 1)[0] == facts["hlo_module_name"]]
        rows = []
        for m in cands:
            h = parsed[m]
            ops = {}
            for c in h["computations"]:
                for ins in c["instructions"]:
                    ops[ins["opcode"]] = ops.get(ins["opcode"], 0) + 1
            names = {i["name"] for i in facts["entry_instructions"]}
            th = {e.stats["hlo_op"] for e in evs if "hlo_op" in e.stats
                  and f"{e.stats.get('hlo_module')}({e.stats.get('program_id')})" == m}
            rows.append({"module": m,
                         "opcode_counts_equal": ops == facts["opcode_counts_total"],
                         "num_instructions_profile": sum(ops.values()),
                         "num_instructions_aot": facts["num_instructions_total"],
                         "thunk_ops_executed": len(th),
                         "thunk_ops_missing_from_aot_entry": sorted(th - names)[:20]})
        out[fn] = rows
    return out


# ---------------------------------------------------------------------------
# profile decoding (observed evidence)

COMPILE_EVENT_RE = re.compile(r"(backend_compile_and_load|PjRtCpuClient::Compile|"
                              r"CpuCompiler::RunBackend|JitCompiler::Compile)")


def decode_summary(space, gt=None):
    """Generic observed facts about the profile (the analogue of the corpus'
    decoded_xspace section)."""
    out = {"planes": []}
    for p in space.planes:
        out["planes"].append({"name": p.name, "num_lines": len(p.lines),
                              "num_events": sum(len(l.events) for l in p.lines),
                              "num_event_metadata": len(p.event_metadata),
                              "num_stat_metadata": len(p.stat_metadata)})
    te = space.plane("Task Environment")
    if te is not None:
        st = te.stats_dict(te.stats)
        out["task_environment"] = {k: (v if not isinstance(v, bytes) else f"<{len(v)} bytes>")
                                   for k, v in st.items()}
    md = space.plane("/host:metadata")
    mods = X.hlo_modules(space)
    modinfo = []
    parsed = {}
    for mname, m in sorted(mods.items(), key=lambda kv: kv[1]["program_id"] or 0):
        h = X.parse_hlo_proto(m["blob"])
        parsed[mname] = h
        ops = {}
        for c in h["computations"]:
            for ins in c["instructions"]:
                ops[ins["opcode"]] = ops.get(ins["opcode"], 0) + 1
        modinfo.append({"name": mname, "program_id": m["program_id"], "module_name": h["name"],
                        "entry_computation": h["entry_computation_name"],
                        "num_computations": len(h["computations"]),
                        "num_instructions": sum(len(c["instructions"]) for c in h["computations"]),
                        "hlo_proto_bytes": len(m["blob"]),
                        "input_output_alias_entries": len(h["input_output_alias"]),
                        "opcodes": dict(sorted(ops.items()))})
    out["metadata_plane"] = {"plane_stats": md.stats_dict(md.stats) if md else {},
                             "modules": modinfo}

    evs = X.host_events(space)
    cpu = space.plane("/host:CPU")
    lines = []
    for ln in (cpu.lines if cpu else []):
        nthunk = sum(1 for e in ln.events if "hlo_op" in cpu.stats_dict(e.stats))
        lines.append({"name": ln.name, "num_events": len(ln.events), "num_thunk_events": nthunk,
                      "timestamp_ns": ln.timestamp_ns})
    thunks = [e for e in evs if "hlo_op" in e.stats]
    # resolve opcode of each thunk through the HloProto of its module
    op_index = {}
    for mname, h in parsed.items():
        idx = {}
        entry = h["entry_computation_name"]
        for c in h["computations"]:
            for ins in c["instructions"]:
                idx[ins["name"]] = (ins["opcode"], c["name"] == entry)
        op_index[mname] = idx
    unmatched = {}
    thunk_opc = {}
    per_module = {}
    per_ord = {}
    for e in thunks:
        mod = f"{e.stats.get('hlo_module')}({e.stats.get('program_id')})"
        per_module[mod] = per_module.get(mod, 0) + 1
        o = str(e.stats.get("device_ordinal"))
        per_ord[o] = per_ord.get(o, 0) + 1
        hit = op_index.get(mod, {}).get(e.stats["hlo_op"])
        if hit is None:
            unmatched[e.name] = unmatched.get(e.name, 0) + 1
            continue
        thunk_opc[hit[0]] = thunk_opc.get(hit[0], 0) + 1
    main = max(per_module.items(), key=lambda kv: kv[1])[0] if per_module else None
    # steps from the python line
    step_evs = [e for e in evs if e.name == "train" and "step_num" in e.stats]
    step_rows = []
    for s in step_evs:
        inside = [t for t in thunks if s.start_ps <= t.start_ps < s.end_ps]
        busy = X.union_ps([(t.start_ps, t.end_ps) for t in inside])
        comp = [e for e in evs if s.start_ps <= e.start_ps < s.end_ps and COMPILE_EVENT_RE.search(e.name)]
        step_rows.append({"step_num": s.stats["step_num"], "line": s.line,
                          "start_ps": s.start_ps, "dur_ms": round(s.dur_ps / 1e9, 4),
                          "thunk_events": len(inside),
                          "thunk_events_by_module": X.counter(
                              f"{t.stats.get('hlo_module')}({t.stats.get('program_id')})" for t in inside),
                          "thunk_busy_union_ms": round(busy / 1e9, 4),
                          "thunk_busy_fraction": round(busy / s.dur_ps, 4) if s.dur_ps else None,
                          "compile_events": len(comp)})
    comp_all = [e for e in evs if COMPILE_EVENT_RE.search(e.name)]
    by_op = {}
    for t in thunks:
        k = f"{t.stats.get('hlo_module')}({t.stats.get('program_id')})::{t.stats['hlo_op']}"
        c = by_op.setdefault(k, [0, 0])
        c[0] += 1
        c[1] += t.dur_ps
    top_ops = sorted(by_op.items(), key=lambda kv: -kv[1][1])[:25]
    names = X.counter(e.name for e in evs)
    out["host_cpu"] = {
        "num_lines": len(lines),
        "line_name_families": X.counter(X.line_family(l["name"]) for l in lines),
        "lines": lines,
        "num_events": len(evs),
        "num_python_tracer_events": sum(1 for e in evs if e.name.startswith("$")),
        "num_thunk_events": len(thunks),
        "num_end_marker_events": sum(1 for e in evs if e.name.startswith("end: ")),
        "thunk_hlo_op_unmatched": unmatched,
        "thunk_events_per_module": per_module,
        "thunk_events_per_device_ordinal": per_ord,
        "thunk_opcode_histogram": dict(sorted(thunk_opc.items(), key=lambda kv: -kv[1])),
        "thunk_total_ms": round(sum(t.dur_ps for t in thunks) / 1e9, 4),
        "thunk_busy_union_ms": round(X.union_ps([(t.start_ps, t.end_ps) for t in thunks]) / 1e9, 4),
        "top_thunk_ops_by_total_us": [{"op": k, "count": v[0], "total_us": round(v[1] / 1e6, 2)}
                                      for k, v in top_ops],
        "compile_events": X.counter(e.name for e in comp_all),
        "compile_events_total_ms": round(sum(e.dur_ps for e in comp_all) / 1e9, 3),
        "steps": step_rows,
        "top_event_names": list(names.items())[:60],
    }
    out["main_hlo_module"] = main
    out["_parsed_modules"] = None  # (not serialised)
    out.pop("_parsed_modules")
    decode_summary.last_parsed = parsed
    decode_summary.last_events = evs
    return out


def find_step(evs, i):
    for e in evs:
        if e.name == "train" and e.stats.get("step_num") == i:
            return e
    return None


def events_in(evs, lo, hi, pred=None):
    return [e for e in evs if lo <= e.start_ps < hi and (pred is None or pred(e))]


def per_step_counts(evs, names_regex, line_family=None):
    """For each traced step: count and total ms of events whose name matches."""
    rx = re.compile(names_regex)
    rows = []
    for s in sorted((e for e in evs if e.name == "train" and "step_num" in e.stats),
                    key=lambda e: e.stats["step_num"]):
        m = [e for e in events_in(evs, s.start_ps, s.end_ps)
             if rx.search(e.name) and (line_family is None or X.line_family(e.line) == line_family)]
        rows.append({"step_num": s.stats["step_num"], "count": len(m),
                     "total_ms": round(sum(e.dur_ps for e in m) / 1e9, 4),
                     "lines": X.counter(e.line for e in m)})
    return rows
