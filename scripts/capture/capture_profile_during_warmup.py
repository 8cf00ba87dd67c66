"""profile_during_warmup: NO warm-up before the trace. The first traced step traces,
lowers and compiles the jitted train step (backend compile inside step 0), so step 0 is
orders of magnitude longer than the rest. Only one program of jit_train_step exists
(no re-compilation later)."""
import models as M
from models import jax, np

FAULT = "profile_during_warmup"
DIMS = [128, 256, 128]
B = 32


def main():
    a = M.parse_args(default_steps=6)
    rng = np.random.default_rng(0)
    params = M.init_mlp(DIMS)
    data = {i: (jax.device_put(rng.standard_normal((B, DIMS[0])).astype(np.float32)),
                jax.device_put(rng.standard_normal((B, DIMS[-1])).astype(np.float32)))
            for i in range(a.steps)}
    train_step = M.make_mlp_train_step(donate=True, act=jax.numpy.tanh)
    state = {"params": params}
    example_params = M.init_mlp(DIMS)

    def step(i):
        p, loss = train_step(state["params"], data[i])
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        evs = M.decode_summary.last_events
        steps = dec["host_cpu"]["steps"]
        d = [s["dur_ms"] for s in steps]
        rest = sorted(d[1:])
        comp = M.per_step_counts(evs, M.COMPILE_EVENT_RE.pattern)
        cm = M.per_step_counts(evs, r"^\$pjit\.py:[0-9]+ cache_miss$")
        bc = M.per_step_counts(evs, r"^backend_compile_and_load$")
        py = M.per_step_counts(evs, r"^\$")
        mods = [m["name"] for m in dec["metadata_plane"]["modules"] if m["module_name"] == "jit_train_step"]
        lines = M.X.counter(e.line for e in evs if M.COMPILE_EVENT_RE.search(e.name))
        return {
            "step_dur_ms_profile": d,
            "first_step_over_median_rest": round(d[0] / rest[len(rest) // 2], 1),
            "compile_events_per_step": [r["count"] for r in comp],
            "compile_event_names": dec["host_cpu"]["compile_events"],
            "compile_event_lines": lines,
            "backend_compile_and_load_per_step": [r["count"] for r in bc],
            "backend_compile_and_load_ms": [r["total_ms"] for r in bc],
            "pjit_cache_miss_per_step": [r["count"] for r in cm],
            "python_tracer_events_per_step": [r["count"] for r in py],
            "jit_train_step_programs_in_metadata": mods,
            "thunk_events_per_step": [s["thunk_events"] for s in steps],
        }

    M.capture(
        "profile_during_warmup", step, out_dir=a.out, n_steps=a.steps, warmup=0,
        program=(f"MLP {DIMS} (tanh), batch {B}, MSE loss, jit SGD train step with donate_argnums=(0,). "
                 f"NO warm-up: the trace starts before the first call, so step 0 includes jaxpr tracing, "
                 f"lowering and XLA compilation. {a.steps} traced steps in StepTraceAnnotation('train', step_num=i)."),
        injected_fault=FAULT, expected_faults=[FAULT],
        evidence={
            "steps": "step 0 ('train', step_num=0) is ~2 orders of magnitude longer than steps 1..N-1, which are uniform",
            "compile": "exactly one compilation, inside step 0: 'backend_compile_and_load' and python-tracer '$pjit.py:<line> cache_miss' on the python line, 'PjRtCpuClient::Compile' / 'CpuCompiler::RunBackend' / 'JitCompiler::Compile' + HLO pass events on tf_PjRtCompilerThreadPool / tf_xla-cpu-codegen lines; thousands of '$...' python-tracer events in step 0 only",
            "modules": "a single jit_train_step program id in /host:metadata (no second program with the same module name), so this is warm-up in the window, NOT a recompilation (which needs the same module compiled again)",
            "not_recompilation": "no compile events in steps >= 1",
            "xprof": "get_step_trace lists all 6 steps (step 0 = the compile step); get_overview's steptime_ms_average (~0.3 ms) excludes the first and last step (XProf drops them when there are > 5 steps), so the overview hides the warm-up step",
        },
        extra_gt={"extra_event_regexes": [r"pjit_cache_miss=^\$pjit.py:[0-9]+ cache_miss$",
                                          "hlo_passes=^(simplification|spmd|algsimp|dce|cse)"]},
        hlo_fns=lambda: {"train_step": (train_step, (example_params, data[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
