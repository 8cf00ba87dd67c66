"""remat: transformer train step where every layer is wrapped in
jax.checkpoint(policy=nothing_saveable) although there is no memory pressure (a few MB of
activations), so the backward pass recomputes each layer's forward.
--baseline: the same model without checkpointing (remat_baseline)."""
import models as M
from models import jax

FAULT = "unintended_remat"
CFG = M.TCfg(layers=2)


def main():
    a = M.parse_args(default_steps=5, extra=lambda ap: ap.add_argument("--baseline", action="store_true"))
    cfg = CFG
    params = M.init_transformer(cfg)
    example = M.init_transformer(cfg)
    if a.baseline:
        layer_fn = None
    else:
        layer_fn = jax.checkpoint(lambda p, h: M.block(p, h, cfg.heads),
                                  policy=jax.checkpoint_policies.nothing_saveable)
    train_step = M.make_transformer_train_step(cfg, layer_fn=layer_fn, donate=True)
    batches = M.make_batches(cfg, a.steps)
    state = {"params": params}

    def step(i):
        p, loss = train_step(state["params"], batches[i])
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        h = gt["optimized_hlo"]["train_step"]
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        comp_by_id = {c["id"]: c for c in parsed["computations"]}
        entry = next(c for c in parsed["computations"] if c["name"] == parsed["entry_computation_name"])
        allins = [i for c in parsed["computations"] for i in c["instructions"]]
        rem = [i for i in allins if "rematted_computation" in i["op_name"]]
        ckpt = [i for i in allins if "/checkpoint/" in i["op_name"]]

        def touches_remat(ins):
            if "rematted_computation" in ins["op_name"]:
                return True
            return any(touches_remat(x) for cid in ins["called_computation_ids"]
                       for x in comp_by_id.get(cid, {"instructions": []})["instructions"])
        remat_entry = {i["name"] for i in entry["instructions"] if touches_remat(i)}
        evs = M.decode_summary.last_events
        rows = []
        for st in sorted((e for e in evs if e.name == "train"), key=lambda e: e.stats["step_num"]):
            th = [e for e in evs if "hlo_op" in e.stats and st.start_ps <= e.start_ps < st.end_ps]
            rt = [e for e in th if e.stats["hlo_op"] in remat_entry]
            rows.append({"step_num": st.stats["step_num"], "thunks": len(th), "remat_thunks": len(rt),
                         "remat_thunk_ms": round(sum(e.dur_ps for e in rt) / 1e9, 4),
                         "all_thunk_ms": round(sum(e.dur_ps for e in th) / 1e9, 4)})
        return {
            "dot_total_text": h["opcode_counts_total"].get("dot", 0),
            "opt_barrier_total_text": h["opcode_counts_total"].get("opt-barrier", 0),
            "instructions_with_rematted_computation_in_op_name": len(rem),
            "rematted_instructions_by_opcode": M.X.counter(i["opcode"] for i in rem),
            "instructions_with_checkpoint_scope_in_op_name": len(ckpt),
            "example_rematted_op_names": sorted({i["op_name"] for i in rem if i["opcode"] == "dot"})[:6],
            "entry_instructions_touching_rematted_ops": len(remat_entry),
            "cost_analysis_flops": h["cost_analysis"].get("flops"),
            "temp_size_in_bytes": h["memory_analysis"]["temp_size_in_bytes"],
            "per_step": rows,
        }

    name = "remat_baseline" if a.baseline else "remat"
    M.capture(
        name, step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(cfg.describe() + ", jit SGD train step with donate_argnums=(0,); " +
                 ("NO checkpointing (baseline for 'remat')." if a.baseline else
                  "each layer wrapped in jax.checkpoint(policy=jax.checkpoint_policies.nothing_saveable), "
                  "so the backward recomputes every layer's forward; activations are only a few MB, "
                  "so no memory pressure justifies it.") +
                 f" 3 warm-up steps, {a.steps} traced steps in StepTraceAnnotation('train', step_num=i)."),
        injected_fault=None if a.baseline else FAULT,
        expected_faults=[] if a.baseline else [FAULT],
        baseline=None if a.baseline else "remat_baseline",
        evidence=({"hlo": "no rematerialisation: no op_name contains '/checkpoint/' or 'rematted_computation'; 51 dots; fewer thunks per step than 'remat'"}
                  if a.baseline else {
            "hlo": "optimized HLO has 65 dots vs 51 in remat_baseline and ~21% more cost_analysis flops: the forward of each layer is recomputed inside the backward. The recomputed instructions carry OpMetadata.op_name 'jit(train_step)/transpose(jvp(jvp()))/checkpoint/rematted_computation/...' (14 dots = 7 per layer); all backward ops of a checkpointed layer have '/checkpoint/' in op_name. No opt-barrier survives in the optimized CPU HLO.",
            "thunks": "per step more thunk events than remat_baseline (278 vs 227 at capture time); entry instructions whose (fused) computation contains 'rematted_computation' ops execute every step (observed.per_step.remat_thunks); temp_size_in_bytes is only ~5% lower than the baseline's, i.e. no memory pressure justified the remat",
        }),
        hlo_fns=lambda: {"train_step": (train_step, (example, batches[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
