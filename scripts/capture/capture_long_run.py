"""long_run (BIG, never committed): the corpus transformer with 12 layers, ~900 traced
steps, so the profile is >= 100 MB. Used to test xlens on large files. Written to
/work/big/long_run by capture_all.sh --big. Evidence is summarised with a streaming decoder
(no per-event Python objects) to keep memory bounded."""
import os
import time

import models as M
from models import jax
import xspace as X

CFG = M.TCfg(layers=12)


def light_summary(path):
    """Streaming pass over the XSpace: per-plane/line event counts, 'train' steps, thunk
    events (events with an hlo_op stat) and their modules."""
    with open(path, "rb") as fh:
        buf = memoryview(fh.read())
    out = {"planes": [], "steps": []}
    for f, wt, v in X.fields(buf):
        if f != 1:
            continue
        name = ""
        ev_md = {}
        st_md = {}
        line_spans = []
        for f2, wt2, v2 in X.fields(buf, *v):
            if f2 == 2:
                name = X._str(buf, v2)
            elif f2 == 3:
                line_spans.append(v2)
            elif f2 == 4:
                key = None
                nm = ""
                for f3, wt3, v3 in X.fields(buf, *v2):
                    if f3 == 1:
                        key = v3
                    elif f3 == 2:
                        for f4, wt4, v4 in X.fields(buf, *v3):
                            if f4 == 2:
                                nm = X._str(buf, v4)
                ev_md[key] = nm
            elif f2 == 5:
                key = None
                nm = ""
                for f3, wt3, v3 in X.fields(buf, *v2):
                    if f3 == 1:
                        key = v3
                    elif f3 == 2:
                        for f4, wt4, v4 in X.fields(buf, *v3):
                            if f4 == 2:
                                nm = X._str(buf, v4)
                st_md[key] = nm
        hlo_op_id = next((k for k, n in st_md.items() if n == "hlo_op"), None)
        step_id = next((k for k, n in st_md.items() if n == "step_num"), None)
        lines = []
        thunks = 0
        total = 0
        for span in line_spans:
            lname = ""
            ts = 0
            n = 0
            nth = 0
            for f3, wt3, v3 in X.fields(buf, *span):
                if f3 == 2:
                    lname = X._str(buf, v3)
                elif f3 == 3:
                    ts = v3
                elif f3 == 4:
                    n += 1
                    mid = 0
                    off = dur = 0
                    is_thunk = False
                    stepn = None
                    want = False
                    for f4, wt4, v4 in X.fields(buf, *v3):
                        if f4 == 1:
                            mid = v4
                        elif f4 == 2:
                            off = v4
                        elif f4 == 3:
                            dur = v4
                        elif f4 == 4:
                            for f5, wt5, v5 in X.fields(buf, *v4):
                                if f5 == 1:
                                    if v5 == hlo_op_id:
                                        is_thunk = True
                                    elif v5 == step_id:
                                        want = True
                                elif want and f5 in (3, 4):
                                    stepn = v5
                                    want = False
                    if is_thunk:
                        nth += 1
                    if ev_md.get(mid) == "train" and stepn is not None:
                        out["steps"].append({"step_num": stepn, "start_ps": ts * 1000 + off, "dur_ms": round(dur / 1e9, 4)})
            lines.append({"name": lname, "num_events": n, "num_thunk_events": nth})
            thunks += nth
            total += n
        out["planes"].append({"name": name, "num_lines": len(lines), "num_events": total,
                              "num_thunk_events": thunks, "num_event_metadata": len(ev_md),
                              "lines": lines if len(lines) < 64 else lines[:64]})
    out["steps"].sort(key=lambda s: s["step_num"])
    d = [s["dur_ms"] for s in out["steps"]]
    out["steps_summary_profile"] = {"count": len(d), "mean_ms": round(sum(d) / len(d), 4) if d else None,
                                    "min_ms": min(d) if d else None, "max_ms": max(d) if d else None}
    out["steps_first_last"] = out["steps"][:3] + out["steps"][-3:]
    out.pop("steps")
    return out


def main():
    # ~4280 events (~1227 thunks) = ~200 KB per step plus ~3.5 MB of HloProto metadata:
    # 700 steps give ~145 MB (900 steps would be ~185 MB).
    a = M.parse_args(default_steps=700)
    cfg = CFG
    params = M.init_transformer(cfg)
    example = M.init_transformer(cfg)
    train_step = M.make_transformer_train_step(cfg, donate=True)
    batches = M.make_batches(cfg, min(a.steps, 16))
    state = {"params": params}

    def step(i):
        p, loss = train_step(state["params"], batches[i % 16 if i >= 0 else i])
        state["params"] = p
        return loss

    gt, _, _ = M.capture(
        "long_run", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(cfg.describe() + ", jit SGD train step with donate_argnums=(0,) (the corpus 'clean' program "
                 f"with 12 layers); 3 warm-up steps, {a.steps} traced steps in StepTraceAnnotation('train', "
                 "step_num=i), 16 distinct pre-built batches cycled."),
        injected_fault=None, expected_faults=[],
        evidence={"size": "large profile (>= 100 MB) for performance / streaming tests; no injected fault",
                  "steps": f"{a.steps} 'train' step events on the python line, uniform durations"},
        hlo_fns=lambda: {"train_step": (train_step, (example, batches[0]))},
        decode=False)
    pb = os.path.join(a.out, gt["profile_file"])
    t0 = time.perf_counter()
    light = light_summary(pb)
    light["decode_seconds_python"] = round(time.perf_counter() - t0, 1)
    gt["decoded_xspace_light"] = light
    import json
    with open(os.path.join(a.out, "ground_truth.json"), "w") as fh:
        json.dump(gt, fh, indent=1)
    print(f"[long_run] light decode {light['decode_seconds_python']} s; profile steps {light['steps_summary_profile']}")


if __name__ == "__main__":
    main()
