"""debug_print: transformer train step that calls jax.debug.print in every layer (no
io_callback). Each print is a host callback (custom-call xla_ffi_python_cpu_callback) that
the XLA runtime must wait on inside the step."""
import contextlib
import io
import os

import models as M
from models import jax, jnp

FAULT = "host_callback_stall"
CFG = M.TCfg(layers=2)


def main():
    a = M.parse_args(default_steps=5)
    cfg = CFG

    def layer_fn(p, h):
        h = M.block(p, h, cfg.heads)
        jax.debug.print("layer act mean={m:.4f} max={x:.4f}", m=jnp.mean(h), x=jnp.max(h))
        return h

    params = M.init_transformer(cfg)
    example = M.init_transformer(cfg)
    train_step = M.make_transformer_train_step(cfg, layer_fn=layer_fn, donate=True)
    batches = M.make_batches(cfg, a.steps)
    state = {"params": params}
    sink = io.StringIO()

    def step(i):
        with contextlib.redirect_stdout(sink):
            p, loss = train_step(state["params"], batches[i])
            jax.block_until_ready(loss)
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        h = gt["optimized_hlo"]["train_step"]
        evs = M.decode_summary.last_events
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        cc = [i for c in parsed["computations"] for i in c["instructions"] if i["opcode"] == "custom-call"]
        names = {i["name"] for i in cc}
        rows = []
        for st in sorted((e for e in evs if e.name == "train"), key=lambda e: e.stats["step_num"]):
            th = [e for e in evs if "hlo_op" in e.stats and st.start_ps <= e.start_ps < st.end_ps
                  and e.stats["hlo_op"] in names]
            rows.append({"step_num": st.stats["step_num"], "callback_thunks": len(th),
                         "names": sorted(e.name for e in th), "lines": M.X.counter(e.line for e in th),
                         "durations_us": [round(e.dur_ps / 1e6, 1) for e in sorted(th, key=lambda e: e.start_ps)],
                         "total_ms": round(sum(e.dur_ps for e in th) / 1e9, 4),
                         "step_ms": round(st.dur_ps / 1e9, 4)})
        cb = M.per_step_counts(evs, r"^\$debugging\.py:[0-9]+ debug_callback_impl$")
        wc = M.per_step_counts(evs, r"^\$callback\.py:[0-9]+ _wrapped_callback$")
        cm = M.per_step_counts(evs, r"^\$pjit\.py:[0-9]+ cache_miss$")
        er = M.per_step_counts(evs, r"^ExecuteReplicated\.__call__$")
        te = M.per_step_counts(evs, r"^ThunkExecutor::Execute$")
        return {"debug_callback_impl_python_events_per_step": [r["count"] for r in cb],
                "wrapped_callback_python_events_per_step": [r["count"] for r in wc],
                "wrapped_callback_ms_per_step": [r["total_ms"] for r in wc],
                "pjit_cache_miss_python_path_per_step": [r["count"] for r in cm],
                "execute_replicated_call_per_step": [r["count"] for r in er],
                "thunk_executor_execute_lines_step0": te[0]["lines"] if te else {},
                "custom_calls_hloproto": [{"name": i["name"], "target": i["custom_call_target"],
                                           "op_name": i["op_name"]} for i in cc],
                "custom_call_targets_text": h["custom_call_targets"],
                "per_step": rows,
                "printed_lines": sink.getvalue().count("\n")}

    M.capture(
        "debug_print", step, out_dir=a.out, n_steps=a.steps, warmup=2,
        program=(cfg.describe() + ", jit SGD train step with donate_argnums=(0,); every layer calls "
                 "jax.debug.print('layer act mean=.. max=..') on its output (no io_callback). stdout of the "
                 f"prints is captured in-process. 2 warm-up steps, {a.steps} traced steps."),
        injected_fault=FAULT, expected_faults=[FAULT], baseline="corpus:clean",
        evidence={
            "hlo": f"{cfg.layers} custom-call instructions with custom_call_target='xla_ffi_python_cpu_callback' (one per layer, op_name '.../debug_print'), named debug_print.N in the optimized HLO / HloProto",
            "thunks": f"per step {cfg.layers} thunk events named debug_print.N (hlo_op stat = the custom-call name), each ~0.4-1.6 ms; with a host callback in the program the executable runs INLINE on the calling thread (ThunkExecutor::Execute on the 'python' line) and on tf_XLAEigen worker lines: thunks, including debug_print.N, are spread over the 'python' line and the tf_XLAEigen lines (observed.per_step[].lines); unlike callback-free traces there is NO tf_XLAPjRtCpuClient line at all",
            "python": "a debug_print.N thunk that runs on the python line encloses python-tracer events '$callback.py:<n> _wrapped_callback' > '$debugging.py:<n> _callback' > '$debugging.py:<n> debug_callback_impl' (device_put + np.asarray(jax.Array) of the printed values); one that runs on a tf_XLAEigen line has no '$' children (that thread is not instrumented; see observed.per_step[].lines and observed.debug_callback_impl_python_events_per_step); dispatch takes the slow python path every step ('$pjit.py:<n> cache_miss' > '$pjit.py:<n> _run_python_pjit' > 'ExecuteReplicated.__call__'), so each step has thousands of '$' python-tracer events (the C++ fast path is disabled for effectful jits)",
        },
        extra_gt={"layers": cfg.layers, "host_callbacks": {"debug_print_per_step": cfg.layers},
                  "extra_event_regexes": ["debug_print_thunk=^debug_print"]},
        hlo_fns=lambda: {"train_step": (train_step, (example, batches[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
