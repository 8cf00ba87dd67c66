"""input_starvation: a slow host data loader runs inside every step, before the dispatch:
numpy preprocessing + a few ms of time.sleep (simulated I/O), wrapped in
jax.profiler.TraceAnnotation("data_loader"), then jax.device_put and the train step.
The device (XLA CPU worker threads) is idle for the whole loader phase of each step."""
import time

import models as M
from models import jax, np

FAULT = "input_starvation"
LOADER_NAME = "data_loader"
SLEEP_S = 0.006


def load_batch(cfg, i):
    """Slow loader: 'tokenise' random text with numpy, then wait on simulated I/O."""
    rng = np.random.default_rng(5000 + i)
    raw = rng.integers(0, 1 << 16, size=(cfg.batch * 64, cfg.seq + 1))
    raw = np.sort(raw, axis=1)                     # some real numpy work
    raw = np.cumsum(raw, axis=1) % cfg.vocab
    toks = raw[: cfg.batch].astype(np.int32)
    time.sleep(SLEEP_S)                           # simulated storage / network latency
    return toks[:, :-1], toks[:, 1:]


def main():
    a = M.parse_args(default_steps=8)
    cfg = M.TCFG
    params = M.init_transformer(cfg)
    example = M.init_transformer(cfg)
    train_step = M.make_transformer_train_step(cfg, donate=True)
    state = {"params": params}
    loader_ms = []

    def step(i):
        t0 = time.perf_counter()
        with jax.profiler.TraceAnnotation(LOADER_NAME):
            x, y = load_batch(cfg, i)
            batch = (jax.device_put(x), jax.device_put(y))
        if i >= 0:
            loader_ms.append(round((time.perf_counter() - t0) * 1e3, 4))
        p, loss = train_step(state["params"], batch)
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        evs = M.decode_summary.last_events
        thunks = [e for e in evs if "hlo_op" in e.stats]
        rows = []
        for st in sorted((e for e in evs if e.name == "train"), key=lambda e: e.stats["step_num"]):
            dl = [e for e in evs if e.name == LOADER_NAME and st.start_ps <= e.start_ps < st.end_ps]
            th = [t for t in thunks if st.start_ps <= t.start_ps < st.end_ps]
            first = min((t.start_ps for t in th), default=None)
            sl = [e for e in evs if e.name == "$time sleep" and st.start_ps <= e.start_ps < st.end_ps]
            busy = M.X.union_ps([(t.start_ps, t.end_ps) for t in th])
            rows.append({
                "step_num": st.stats["step_num"], "step_ms": round(st.dur_ps / 1e9, 4),
                "data_loader_events": len(dl), "data_loader_line": dl[0].line if dl else None,
                "data_loader_ms": round(sum(e.dur_ps for e in dl) / 1e9, 4),
                "data_loader_offset_in_step_us": round((dl[0].start_ps - st.start_ps) / 1e6, 2) if dl else None,
                "time_sleep_events": len(sl), "time_sleep_ms": round(sum(e.dur_ps for e in sl) / 1e9, 4),
                "first_thunk_after_data_loader_end": bool(dl and first and first >= dl[0].end_ps),
                "device_idle_before_first_thunk_ms": round((first - st.start_ps) / 1e9, 4) if first else None,
                "thunk_busy_fraction": round(busy / st.dur_ps, 4),
                "loader_fraction_of_step": round(sum(e.dur_ps for e in dl) / st.dur_ps, 4),
            })
        return {"per_step": rows,
                "mean_loader_fraction_of_step": round(float(np.mean([r["loader_fraction_of_step"] for r in rows])), 4),
                "mean_thunk_busy_fraction": round(float(np.mean([r["thunk_busy_fraction"] for r in rows])), 4),
                "data_loader_events_total": sum(r["data_loader_events"] for r in rows)}

    M.capture(
        "input_starvation", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(M.TCFG.describe() + ", jit SGD train step with donate_argnums=(0,) (the corpus 'clean' "
                 "program), but every step first runs a slow host data loader INSIDE the step annotation: "
                 f"`with jax.profiler.TraceAnnotation('{LOADER_NAME}')`: numpy sort/cumsum 'tokenisation' of a "
                 f"{cfg.batch*64}x{cfg.seq+1} int array + time.sleep({SLEEP_S}) + jax.device_put of the batch; "
                 f"then dispatch + block_until_ready. 3 warm-up steps, {a.steps} traced steps."),
        injected_fault=FAULT, expected_faults=[FAULT], baseline="corpus:clean",
        evidence={
            "loader": f"per 'train' step exactly one host event named '{LOADER_NAME}' (TraceMe from jax.profiler.TraceAnnotation) on the python line, starting at the beginning of the step and lasting >= {SLEEP_S*1e3:.0f} ms; it contains the python-tracer events '$capture_input_starvation.py:<n> load_batch' > '$fromnumeric.py:<n> sort' / '$<unknown> sort', '$fromnumeric.py:<n> cumsum' / '$<unknown> cumsum', '$time sleep' (~{SLEEP_S*1e3:.0f} ms), then '$api.py:<n> device_put' (x2) with 'DevicePutWithSharding' and 'Transpose::Execute' native events",
            "idle": "no thunk (hlo_op) event of jit_train_step starts before the data_loader event ends: XLA worker threads (tf_XLAPjRtCpuClient / tf_XLAEigen lines) are idle for the loader phase, a large share of every step (observed.per_step.loader_fraction_of_step, 0.3-0.6 depending on machine load)",
            "xprof": "XProf does not classify 'data_loader' as input (it only knows IteratorGetNext / tf.data names), so get_step_trace/overview report it as idle/other",
        },
        extra_gt={"data_loader_event_name": LOADER_NAME, "loader_sleep_ms": SLEEP_S * 1e3,
                  "loader_wall_ms_perf_counter": loader_ms,
                  "extra_event_regexes": [f"data_loader=^{LOADER_NAME}$"]},
        hlo_fns=lambda: {"train_step": (train_step, (example, M.make_batch(cfg, 0)))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
