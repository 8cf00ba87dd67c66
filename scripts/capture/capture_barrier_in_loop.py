"""barrier_in_loop: many tiny steps; inside each step the host dispatches several small
jitted sub-calls and calls block_until_ready after EACH of them, so the device idles
between small dispatches while the host waits / re-dispatches."""
import models as M
from models import jax, jnp, np

FAULT = "barrier_in_loop"
BASELINE_EVIDENCE = {
    "dispatch": "same 5 module runs per step (4 x jit_layer, 1 x jit_head_step) but the host enqueues them back to back: each PjitFunction/ExecuteHelperOnSingleDevice for run k+1 starts while run k is still executing or before it starts (observed.serialized_dispatch_fraction ~0)",
    "barriers": "exactly 1 '$api.py:<line> block_until_ready' per step (the step harness)",
}
LAYERS = 4
B, D = 32, 256


BARRIER = True


def main():
    global BARRIER
    a = M.parse_args(default_steps=30, extra=lambda ap: ap.add_argument(
        "--baseline", action="store_true", help="no per-sub-call barriers (clean counterpart)"))
    BARRIER = not a.baseline
    rng = np.random.default_rng(0)
    ws = [M._init(rng, (D, D)) for _ in range(LAYERS)]
    head = {"w": M._init(rng, (D, 16))}
    xs = {i: jax.device_put(rng.standard_normal((B, D)).astype(np.float32)) for i in range(-3, a.steps)}
    ys = {i: jax.device_put(rng.standard_normal((B, 16)).astype(np.float32)) for i in range(-3, a.steps)}

    @jax.jit
    def layer(w, x):
        return jax.nn.gelu(x @ w)

    def head_loss(hp, h, y):
        return jnp.mean((h @ hp["w"] - y) ** 2)

    @jax.jit
    def head_step(hp, h, y):
        loss, g = jax.value_and_grad(head_loss)(hp, h, y)
        return M.sgd(hp, g, 1e-2), loss

    state = {"head": head}

    def step(i):
        h = xs[i]
        for l in range(LAYERS):
            h = layer(ws[l], h)
            if BARRIER:
                jax.block_until_ready(h)   # <- the injected barrier, once per sub-call
        hp, loss = head_step(state["head"], h, ys[i])
        if BARRIER:
            jax.block_until_ready(loss)    # <- and once more for the head
        state["head"] = hp
        return loss

    def evidence(space, dec, gt):
        evs = M.decode_summary.last_events
        bur = M.per_step_counts(evs, r"^\$api\.py:[0-9]+ block_until_ready$")
        thunks = [e for e in evs if "hlo_op" in e.stats]
        helpers = [e for e in evs if e.name == "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"]
        rows = []
        for s_ in sorted((e for e in evs if e.name == "train"), key=lambda e: e.stats["step_num"]):
            ins = [t for t in thunks if s_.start_ps <= t.start_ps < s_.end_ps]
            runs = {}
            for t in ins:  # one run per module execution (run_id stat)
                r = runs.setdefault(t.stats.get("run_id"), [t.start_ps, t.end_ps, t.stats.get("hlo_module")])
                r[0] = min(r[0], t.start_ps)
                r[1] = max(r[1], t.end_ps)
            rr = sorted(runs.values())
            hh = sorted(e.start_ps for e in helpers if s_.start_ps <= e.start_ps < s_.end_ps)
            idle = [round((b[0] - a_[1]) / 1e6, 2) for a_, b in zip(rr, rr[1:])]
            # host dispatch k+1 begins only after run k's last thunk ended?
            serialized = [bool(hh[k + 1] > rr[k][1]) for k in range(min(len(hh), len(rr)) - 1)]
            busy = M.X.union_ps([(t.start_ps, t.end_ps) for t in ins])
            rows.append({"step_num": s_.stats["step_num"], "dur_ms": round(s_.dur_ps / 1e9, 4),
                         "module_runs": len(rr), "run_modules": [r[2] for r in rr],
                         "execute_helper_events": len(hh),
                         "device_idle_between_runs_us": idle,
                         "next_dispatch_after_previous_run_end": serialized,
                         "thunk_busy_fraction": round(busy / s_.dur_ps, 4)})
        allg = [g for r in rows for g in r["device_idle_between_runs_us"]]
        ser = [x for r in rows for x in r["next_dispatch_after_previous_run_end"]]
        return {
            "module_runs_per_step": [r["module_runs"] for r in rows],
            "execute_helper_per_step": [r["execute_helper_events"] for r in rows],
            "block_until_ready_python_events_per_step": [r["count"] for r in bur],
            "block_until_ready_lines": bur[0]["lines"] if bur else {},
            "pjit_function_names": M.X.counter(e.name for e in evs if e.name.startswith("PjitFunction(")),
            "serialized_dispatch_fraction": round(sum(ser) / len(ser), 4) if ser else None,
            "device_idle_between_runs_us": {"count": len(allg), "median": float(np.median(allg)) if allg else None,
                                            "min": min(allg) if allg else None, "max": max(allg) if allg else None},
            "mean_thunk_busy_fraction": round(float(np.mean([r["thunk_busy_fraction"] for r in rows])), 4),
            "per_step": rows,
        }

    name = "barrier_in_loop_baseline" if a.baseline else "barrier_in_loop"
    fault = None if a.baseline else FAULT
    M.capture(
        name, step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(f"{LAYERS} x jit(layer) (gelu(x @ W), x f32[{B},{D}], W f32[{D},{D}]) + jit(head_step) "
                 f"(MSE + SGD on a {D}x16 head) per step; " + (
                     "NO intermediate barriers: the 5 dispatches are queued back to back and only "
                     "the step harness blocks once at the end (clean counterpart of barrier_in_loop)."
                     if a.baseline else "host calls jax.block_until_ready() after EVERY sub-call "
                     "(5 barriers per step).") + f" 3 warm-up steps, then {a.steps} traced steps in "
                 "StepTraceAnnotation('train', step_num=i)."),
        injected_fault=fault, expected_faults=[fault] if fault else [],
        baseline=None if a.baseline else "barrier_in_loop_baseline",
        evidence=BASELINE_EVIDENCE if a.baseline else {
            "dispatch": "per 'train' step: 5 dispatches on the python line, each visible as a nested PAIR of 'PjitFunction(layer)' / 'PjitFunction(head_step)' events (10 PjitFunction events per step) and one 'CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice'; 5 module runs per step (4 x jit_layer, 1 x jit_head_step; thunks of a run share a run_id stat) on the tf_XLAPjRtCpuClient line. main_hlo_module is jit_layer (most thunk events), jit_head_step runs once per step",
            "barriers": "per step 5 python-tracer events '$api.py:<line> block_until_ready' on the python line, each following one dispatch; no other dispatch is in flight while the host waits",
            "idle": "device (thunk) activity is serialized into 5 short bursts per step: each dispatch (ExecuteHelperOnSingleDevice) starts only after the previous run's last thunk ended (observed.serialized_dispatch_fraction = 1.0 vs ~0.03 in barrier_in_loop_baseline) and the device idles between runs (observed.device_idle_between_runs_us median ~40-80 us vs ~4 us in the baseline); 'CommonPjRtBuffer::Await' events on the python line mark each wait",
        },
        extra_gt={"layers": LAYERS, "dispatches_per_step_detail": {"layer": LAYERS, "head_step": 1},
                  "block_until_ready_calls_per_step": LAYERS + 1,
                  "extra_event_regexes": [r"block_until_ready=^\$api\.py:[0-9]+ block_until_ready$"]},
        dispatches_per_step=LAYERS + 1,
        hlo_fns=lambda: {"layer": (layer, (ws[0], xs[0])), "head_step": (head_step, (state["head"], xs[0], ys[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
