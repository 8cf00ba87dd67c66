#!/usr/bin/env python3
"""Real NVIDIA GPU captures for xlens (testdata/h200): JAX programs with known faults, traced
with jax.profiler on one GPU, one process per capture.

    python3 scripts/capture/h200/capture_h200.py --out DIR [--only a,b] [--budget-s 360]

Each scenario writes DIR/<name>/plugins/profile/<run>/<host>.xplane.pb (what jax.profiler.trace
writes) and DIR/<name>/meta.json: the program, the fault it carries, the JAX and device versions,
the XLA flags and the ground truth measured in-process without the profiler (step wall times with
time.perf_counter, XLA compilations through jax.monitoring). The driver runs each scenario in its
own process (fresh profiler, its own XLA_FLAGS), stops starting new ones when the time budget is
spent, and never lets one failure stop the others. Made for the device tool's H200 machine (JAX
0.11, CUDA 13); any CUDA GPU with jax[cuda] works.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)

# name -> (what it is, faults it should show, extra XLA flags, per-process timeout s)
SCENARIOS = {
    "train_bf16": (
        "4-layer decoder-only transformer (d=2048, 16 heads, ff=8192, vocab=32000, seq=1024, "
        "batch=8) in bf16, jit SGD train step with donated params; 3 warm-up steps, 10 traced "
        "steps in StepTraceAnnotation('train'). Large gemms: a compute-bound, healthy step.",
        [], "", 120),
    "train_bf16_no_graphs": (
        "The program of train_bf16 with CUDA graphs off (--xla_gpu_enable_command_buffer=): every "
        "kernel launched on its own and named by its instruction in the profile, so XProf's op profile "
        "sees it; the reference for how xlens attributes the CUDA graphs' kernels of train_bf16.",
        [], "--xla_gpu_enable_command_buffer=", 120),
    "small_launch_bound": (
        "4-layer transformer (d=128, 4 heads, ff=512, vocab=256, seq=32, batch=8) in f32 with "
        "CUDA graphs off (--xla_gpu_enable_command_buffer=): every kernel runs a few "
        "microseconds and is launched one by one, so the GPU idles between launches; 30 steps.",
        ["launch_bound"], "--xla_gpu_enable_command_buffer=", 90),
    "input_starvation": (
        "2-layer transformer (d=1024, 8 heads, ff=4096, vocab=8192, seq=512, batch=8) in bf16; each "
        "step first runs a host data loader inside the step (TraceAnnotation('data_loader'): numpy "
        "'tokenisation', time.sleep(8 ms), jax.device_put of the tokens and of a 64 MiB float32 "
        "side input the step reads): the GPU waits for the host every step; 12 steps.",
        ["input_starvation"], "", 90),
    "host_callback": (
        "The 2-layer bf16 transformer of input_starvation with a jax.debug.callback in the train step "
        "that sleeps 3 ms on the host (a logging hook): the GPU stream waits for the host callback "
        "inside every step; 10 steps.",
        ["host_callback_stall"], "", 90),
    "inference_stepless": (
        "The 2-layer bf16 transformer's forward pass (jit, no gradients) called 30 times, 1 ms of "
        "host time between calls, with no step annotations: a stepless inference capture.",
        [], "", 90),
    "recompile": (
        "The 2-layer bf16 transformer trained with the sequence length changing every other step "
        "(256, 384, 512, 640, ...): XLA compiles inside the traced window; 8 steps.",
        ["recompilation"], "", 120),
    "host_offload": (
        "The 2-layer bf16 transformer with each layer rematerialised under "
        "save_and_offload_only_these_names: the FFN input activations are offloaded to pinned host "
        "memory in the forward pass and brought back for the backward pass (device<->host copies "
        "inside the step); 10 steps. Falls back to keeping the params in pinned host memory "
        "between steps if the policy is refused.",
        ["exposed_async_copy"], "", 120),
    "small_command_buffer": (
        "The small 4-layer f32 transformer of small_launch_bound with XLA's defaults (CUDA graphs / "
        "command buffers on); 30 steps.",
        [], "", 90),
    "long_run": (
        "12-layer small transformer (d=128, vocab=256, seq=32, batch=8) in f32, XLA defaults, "
        "traced for many steps (about LONG_RUN_BYTES, default 120 MB): a large real GPU capture for throughput benchmarks.",
        ["launch_bound"], "", 240),
}

# ------------------------------------------------------------------------------------------
# driver


def driver(out, only, budget_s):
    os.makedirs(out, exist_ok=True)
    t0 = time.time()
    names = [n for n in SCENARIOS if not only or n in only]
    results = {}
    queue = list(names)
    while queue:
        name = queue.pop(0)
        left = budget_s - (time.time() - t0)
        timeout = SCENARIOS[name][3]
        if left < 25:
            results[name] = "skipped: budget spent"
            print(f"[{time.time() - t0:6.1f}s] {name}: skipped (budget)", flush=True)
            continue
        env = dict(os.environ)
        flags = SCENARIOS[name][2]
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        log = open(os.path.join(d, "worker.log"), "w")
        print(f"[{time.time() - t0:6.1f}s] {name}: start", flush=True)
        try:
            p = subprocess.run([sys.executable, HERE, "--scenario", name, "--out", d,
                                "--time-left", str(min(timeout, left) - 5)],
                               env=env, stdout=log, stderr=subprocess.STDOUT,
                               timeout=min(timeout, left))
            results[name] = f"rc={p.returncode}"
        except subprocess.TimeoutExpired:
            results[name] = "timeout"
        log.close()
        if name == "host_offload" and results[name] != "rc=0" and \
                not os.environ.get("HOST_OFFLOAD_FALLBACK"):
            # The offload policy was refused: the same program with the params kept in pinned
            # host memory between steps instead.
            os.environ["HOST_OFFLOAD_FALLBACK"] = "1"
            os.rename(d, d + "_failed_policy")
            queue.insert(0, name)
        tail = open(os.path.join(d, "worker.log")).read()[-600:]
        print(f"[{time.time() - t0:6.1f}s] {name}: {results[name]}\n{tail}", flush=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    return results


# ------------------------------------------------------------------------------------------
# the model (written for these captures)


class Cfg:
    def __init__(self, d, heads, ff, vocab, seq, batch, layers, dtype):
        self.d, self.heads, self.ff, self.vocab = d, heads, ff, vocab
        self.seq, self.batch, self.layers, self.dtype = seq, batch, layers, dtype

    def as_dict(self):
        return {"d": self.d, "heads": self.heads, "ff": self.ff, "vocab": self.vocab,
                "seq": self.seq, "batch": self.batch, "layers": self.layers,
                "dtype": str(self.dtype.__name__ if hasattr(self.dtype, "__name__") else self.dtype)}


def build(cfg, remat_policy=None):
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    def init(seed=0):
        key = jax.random.PRNGKey(seed)
        ks = iter(jax.random.split(key, 1 + 4 * cfg.layers))
        nrm = lambda k, s, sc: (jax.random.normal(k, s, jnp.float32) * sc).astype(cfg.dtype)
        d, ff = cfg.d, cfg.ff
        layers = []
        for _ in range(cfg.layers):
            layers.append({
                "wqkv": nrm(next(ks), (d, 3 * d), d ** -0.5), "wo": nrm(next(ks), (d, d), d ** -0.5),
                "w1": nrm(next(ks), (d, ff), d ** -0.5), "w2": nrm(next(ks), (ff, d), ff ** -0.5),
                "ln1": jnp.ones((d,), cfg.dtype), "ln2": jnp.ones((d,), cfg.dtype)})
        return {"emb": nrm(next(ks), (cfg.vocab, d), 0.02), "layers": layers,
                "lnf": jnp.ones((d,), cfg.dtype)}

    def ln(x, g):
        xf = x.astype(jnp.float32)
        m = xf.mean(-1, keepdims=True)
        v = ((xf - m) ** 2).mean(-1, keepdims=True)
        return ((xf - m) * jax.lax.rsqrt(v + 1e-5)).astype(x.dtype) * g

    def layer(lp, x):
        b, s, d = x.shape
        h = ln(x, lp["ln1"])
        q, k, v = jnp.split(h @ lp["wqkv"], 3, axis=-1)
        hd = d // cfg.heads
        q, k, v = (t.reshape(b, s, cfg.heads, hd) for t in (q, k, v))
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) * hd ** -0.5
        mask = jnp.tril(jnp.ones((s, s), bool))
        att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1).astype(x.dtype)
        o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
        x = x + o @ lp["wo"]
        h = checkpoint_name(ln(x, lp["ln2"]), "ffn_in")
        return x + jax.nn.gelu(h @ lp["w1"]) @ lp["w2"]

    if remat_policy is not None:
        layer = jax.checkpoint(layer, policy=remat_policy)

    def forward(p, toks):
        x = p["emb"][toks]
        for lp in p["layers"]:
            x = layer(lp, x)
        x = ln(x, p["lnf"])
        return x @ p["emb"].T

    def loss(p, toks, tgt):
        logits = forward(p, toks).astype(jnp.float32)
        lp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(lp, tgt[..., None], axis=-1).mean()

    def step(p, toks, tgt):
        l, g = jax.value_and_grad(loss)(p, toks, tgt)
        return jax.tree_util.tree_map(lambda a, b: a - (1e-3 * b).astype(a.dtype), p, g), l

    return init, forward, loss, step


def batch(cfg, i, seq=None):
    import numpy as np
    s = seq or cfg.seq
    rng = np.random.default_rng(1000 + i)
    t = rng.integers(0, cfg.vocab, size=(cfg.batch, s + 1), dtype=np.int32)
    return t[:, :-1], t[:, 1:]


# ------------------------------------------------------------------------------------------
# one scenario (in its own process)


def worker(name, out, time_left):
    t_start = time.time()
    import numpy as np
    import jax
    import jax.numpy as jnp

    compiles = []

    def on_duration(event, duration, *a, **k):
        if "backend_compile" in event:
            compiles.append({"t_s": round(time.time() - t_start, 4), "secs": round(duration, 4)})

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    dev = jax.devices()[0]
    BIG = Cfg(2048, 16, 8192, 32000, 1024, 8, 4, jnp.bfloat16)
    MED = Cfg(1024, 8, 4096, 8192, 512, 8, 2, jnp.bfloat16)
    SMALL = Cfg(128, 4, 512, 256, 32, 8, 4, jnp.float32)
    LONG = Cfg(128, 4, 512, 256, 32, 8, 12, jnp.float32)
    if os.environ.get("CAPTURE_TINY"):  # a quick check of the script itself, on any machine
        BIG = MED = Cfg(64, 2, 128, 128, 32, 2, 1, jnp.bfloat16)
    cfg = {"train_bf16": BIG, "train_bf16_no_graphs": BIG, "small_launch_bound": SMALL, "small_command_buffer": SMALL,
           "long_run": LONG}.get(name, MED)
    meta = {"scenario": name, "program": SCENARIOS[name][0], "expected_faults": SCENARIOS[name][1],
            "model": cfg.as_dict(), "jax": jax.__version__,
            "jaxlib": getattr(__import__("jaxlib"), "__version__", "?"),
            "device": str(dev), "device_kind": dev.device_kind, "platform": dev.platform,
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "notes": []}
    trace_dir = out
    policy = None
    if name == "host_offload" and not os.environ.get("HOST_OFFLOAD_FALLBACK"):
        try:
            policy = jax.checkpoint_policies.save_and_offload_only_these_names(
                names_which_can_be_saved=[], names_which_can_be_offloaded=["ffn_in"],
                offload_src="device", offload_dst="pinned_host")
        except Exception as e:  # noqa: BLE001
            meta["notes"].append(f"offload policy unavailable: {e!r}")
    init, forward, loss, step = build(cfg, policy)
    params = init()
    train = jax.jit(step, donate_argnums=(0,))
    state = {"p": params}
    steps_ms = []
    n_steps, warmup = 10, 3
    annotate = True
    side = None

    def run_train(i, seq=None):
        x, y = batch(cfg, i, seq)
        state["p"], l = train(state["p"], jnp.asarray(x), jnp.asarray(y))
        return l

    body = run_train
    if name in ("small_launch_bound", "small_command_buffer"):
        n_steps = 30
    elif name == "long_run":
        n_steps = 0  # chosen below from a probe
    elif name == "input_starvation":
        n_steps = 12
        side_np = np.random.default_rng(7).standard_normal((16, 1024, 1024), dtype=np.float32)

        def step2(p, toks, tgt, side):
            p, l = step(p, toks, tgt)
            return p, l + 1e-6 * side.mean()

        train2 = jax.jit(step2, donate_argnums=(0,))

        def body(i):
            with jax.profiler.TraceAnnotation("data_loader"):
                rng = np.random.default_rng(5000 + i)
                raw = rng.integers(0, 1 << 16, size=(cfg.batch * 64, cfg.seq + 1))
                raw = np.cumsum(np.sort(raw, axis=1), axis=1) % cfg.vocab
                toks = raw[: cfg.batch].astype(np.int32)
                time.sleep(0.008)
                x, y = jax.device_put(toks[:, :-1]), jax.device_put(toks[:, 1:])
                s = jax.device_put(side_np + i)
            state["p"], l = train2(state["p"], x, y, s)
            return l
    elif name == "host_callback":
        def step3(p, toks, tgt):
            p, l = step(p, toks, tgt)
            jax.debug.callback(lambda v: time.sleep(0.003), l)
            return p, l

        train3 = jax.jit(step3, donate_argnums=(0,))

        def body(i):
            x, y = batch(cfg, i)
            state["p"], l = train3(state["p"], jnp.asarray(x), jnp.asarray(y))
            return l
    elif name == "inference_stepless":
        n_steps, annotate = 30, False
        fwd = jax.jit(forward)

        def body(i):
            x, _ = batch(cfg, i)
            out_ = fwd(state["p"], jnp.asarray(x))
            time.sleep(0.001)
            return out_
    elif name == "recompile":
        n_steps = 8
        seqs = [256, 384, 512, 640]

        def body(i):
            return run_train(i, seq=seqs[(i // 2) % len(seqs)] if i >= 0 else 256)
    elif name == "host_offload" and policy is None:
        meta["notes"].append("fallback: params kept in pinned host memory between steps")
        from jax.sharding import SingleDeviceSharding
        host = SingleDeviceSharding(dev, memory_kind="pinned_host")
        devs = SingleDeviceSharding(dev, memory_kind="device")
        state["p"] = jax.device_put(state["p"], host)

        def body(i):
            x, y = batch(cfg, i)
            p = jax.device_put(state["p"], devs)
            p, l = train(p, jnp.asarray(x), jnp.asarray(y))
            state["p"] = jax.device_put(p, host)
            return l

    def one(i):
        t0 = time.perf_counter()
        if annotate:
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                r = body(i)
                jax.block_until_ready(r)
        else:
            r = body(i)
            jax.block_until_ready(r)
        return (time.perf_counter() - t0) * 1e3

    for i in range(-warmup, 0):
        x = body(i) if name != "recompile" else body(i)
        jax.block_until_ready(x)
    if name == "recompile":
        compiles_before = len(compiles)
    jax.block_until_ready(state["p"])

    if name == "long_run":
        # Probes of 10 and 30 steps size the real run: raw and compressed bytes per step, so
        # that the capture is about LONG_RUN_BYTES and its archive fits what can be carried.
        import glob
        import shutil
        sizes = []
        for k, n in enumerate((10, 30)):
            probe = os.path.join(out, f"probe{k}")
            with jax.profiler.trace(probe):
                for i in range(n):
                    one(i)
            pb = glob.glob(os.path.join(probe, "**", "*.xplane.pb"), recursive=True)
            raw = open(pb[0], "rb").read() if pb else b""
            sizes.append((len(raw), len(compress_bytes(raw))))
            shutil.rmtree(probe, ignore_errors=True)
        per_step = max(1.0, (sizes[1][0] - sizes[0][0]) / 20)
        cz_per_step = max(1.0, (sizes[1][1] - sizes[0][1]) / 20)
        target = float(os.environ.get("LONG_RUN_BYTES", 120e6))
        n_steps = int(max(100, min(6000, target / per_step, 40 * 2**20 / cz_per_step)))
        meta["probe_sizes_raw_xz"] = sizes
        meta["planned_steps"] = n_steps

    t_trace = time.time()
    with jax.profiler.trace(trace_dir):
        for i in range(n_steps):
            steps_ms.append(round(one(i), 4))
            if time.time() - t_start > time_left * 0.45:
                meta["notes"].append(f"stopped after {i + 1} steps (time)")
                break
    meta["trace_export_s"] = round(time.time() - t_trace, 3)
    meta["traced_steps"] = len(steps_ms)
    meta["step_ms"] = steps_ms
    meta["step_ms_median"] = sorted(steps_ms)[len(steps_ms) // 2] if steps_ms else None
    meta["compilations"] = compiles
    if name == "recompile":
        meta["compilations_in_trace"] = len(compiles) - compiles_before
    meta["step_annotations"] = annotate
    try:
        meta["memory_stats"] = {k: v for k, v in (dev.memory_stats() or {}).items()
                                if k in ("bytes_limit", "peak_bytes_in_use", "bytes_in_use")}
    except Exception:  # noqa: BLE001
        pass
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({k: meta[k] for k in ("traced_steps", "step_ms_median", "trace_export_s")}))


def compress_bytes(raw):
    """xz of `raw` (the xz tool, threaded, where there is one; else Python's lzma)."""
    import shutil
    if shutil.which("xz"):
        return subprocess.run(["xz", "-T0", "-6", "-c"], input=raw, stdout=subprocess.PIPE,
                              check=True).stdout
    # No xz tool: 8 MiB pieces compressed in parallel, one xz stream each (xz and Python's
    # lzma read concatenated streams as one).
    # lzma lets go of the GIL while it works, so threads run in parallel.
    import lzma
    from concurrent.futures import ThreadPoolExecutor
    pieces = [raw[k:k + 8 * 2**20] for k in range(0, len(raw), 8 * 2**20)] or [b""]
    with ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as pool:
        return b"".join(pool.map(lambda b: lzma.compress(b, preset=6), pieces))


def pack(src, dst, part_bytes=15 * 2**20, max_files=6, max_total=62 * 2**20):
    """Archives the captures in `src` into at most `max_files` files in `dst`, each at most
    `part_bytes` (what the device tool carries back): small.tar.xz for every scenario but
    long_run, long_run.tar.xz.partN for it, dropped with a note if it does not fit."""
    import io
    import tarfile

    def tar_xz(names):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for n in names:
                t.add(os.path.join(src, n), arcname=n)
        return compress_bytes(buf.getvalue())

    os.makedirs(dst, exist_ok=True)
    names = sorted(n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n)))
    small = [n for n in names if n != "long_run"]
    extra = [n for n in os.listdir(src) if os.path.isfile(os.path.join(src, n))]
    report = {}
    blobs = []
    data = tar_xz(small + extra)
    for k in range(0, len(data), part_bytes):
        blobs.append((f"small.tar.xz.part{k // part_bytes}", data[k:k + part_bytes]))
    if "long_run" in names:
        data = tar_xz(["long_run"])
        parts = [(f"long_run.tar.xz.part{k // part_bytes}", data[k:k + part_bytes])
                 for k in range(0, len(data), part_bytes)]
        if len(blobs) + len(parts) <= max_files and \
                sum(len(b) for _, b in blobs + parts) <= max_total:
            blobs += parts
        else:
            report["long_run"] = f"dropped: {len(data)} bytes compressed do not fit"
    for n, b in blobs:
        with open(os.path.join(dst, n), "wb") as f:
            f.write(b)
        report[n] = len(b)
    print(json.dumps(report, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--budget-s", type=float, default=360)
    ap.add_argument("--scenario")
    ap.add_argument("--pack", help="archive the captures in --out into this folder")
    ap.add_argument("--time-left", type=float, default=90)
    a = ap.parse_args()
    if a.pack:
        pack(a.out, a.pack)
    elif a.scenario:
        worker(a.scenario, a.out, a.time_left)
    else:
        driver(a.out, [s for s in a.only.split(",") if s], a.budget_s)


if __name__ == "__main__":
    main()
