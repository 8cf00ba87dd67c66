"""donation_miss: the corpus 'clean' transformer train step, but jitted WITHOUT
donate_argnums, so every step allocates a fresh copy of the whole parameter pytree
(no input/output aliasing in the HLO).
--baseline: the same program WITH donate_argnums=(0,) (donation_miss_baseline), the clean
counterpart captured by this same script (the corpus trace `clean` is the same program too)."""
import models as M
from models import jax

FAULT = "donation_miss"


def main():
    a = M.parse_args(default_steps=5, extra=lambda ap: ap.add_argument(
        "--baseline", action="store_true", help="donate the params (clean counterpart)"))
    cfg = M.TCFG
    params = M.init_transformer(cfg)
    train_step = M.make_transformer_train_step(cfg, donate=a.baseline)
    state = {"params": params}
    batches = M.make_batches(cfg, a.steps)
    # With donation the warm-up deletes `params`; the AOT compile gets an identical fresh copy.
    example = (M.init_transformer(cfg) if a.baseline else params, batches[0])

    def step(i):
        p, loss = train_step(state["params"], batches[i])
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        h = gt["optimized_hlo"]["train_step"]
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        allocs = parsed["buffer_allocations"]
        n_params = sum(1 for x in allocs if x["is_entry_computation_parameter"])
        return {
            "hlo_input_output_alias_entries_text": len(h["input_output_alias"]),
            "hloproto_input_output_alias_entries": len(parsed["input_output_alias"]),
            "hloproto_param_allocations": n_params,
            "hloproto_param_allocations_aliased_with_output": sum(
                1 for x in allocs if x["is_parameter_aliased_with_output"]),
            "param_bytes": h["memory_analysis"]["argument_size_in_bytes"],
            "alias_bytes": h["memory_analysis"]["alias_size_in_bytes"],
            "output_bytes": h["memory_analysis"]["output_size_in_bytes"],
            "per_step_execute_events": M.per_step_counts(
                M.decode_summary.last_events, r"^CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice$"),
        }

    if a.baseline:
        name, fault = "donation_miss_baseline", None
        what = ("jit-compiled SGD train step WITH donate_argnums=(0,) (clean counterpart of "
                "donation_miss; the same program as the corpus 'clean' trace).")
        evidence_text = {
            "hlo": "module header of jit_train_step has input_output_alias entries for the 11 donated f32 parameter leaves; HloProto.hlo_module.input_output_alias is non-empty and parameter BufferAllocations have is_parameter_aliased_with_output; memory_analysis alias_size_in_bytes == argument bytes of the params (~1.07 MB)",
            "diff": "same program and step count as donation_miss; only the aliasing differs",
        }
    else:
        name, fault = "donation_miss", FAULT
        what = ("jit-compiled SGD train step WITHOUT donate_argnums (donation_miss_baseline and the "
                "corpus 'clean' trace are the same program with donate_argnums=(0,)).")
        evidence_text = {
            "hlo": "module header of jit_train_step has NO input_output_alias; HloProto.hlo_module.input_output_alias is empty and no BufferAllocation has is_parameter_aliased_with_output; memory_analysis alias_size_in_bytes == 0 while argument_size_in_bytes ~1.07 MB of f32 params is re-output every step",
            "baseline": "donation_miss_baseline / corpus 'clean' (same program, donated): 11 alias entries, alias_size_in_bytes=1065984",
        }
    M.capture(
        name, step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(cfg.describe() + ", " + what + " 3 warm-up steps, then "
                 f"{a.steps} traced steps in StepTraceAnnotation('train', step_num=i), block_until_ready inside."),
        injected_fault=fault, expected_faults=[fault] if fault else [],
        baseline=None if a.baseline else "donation_miss_baseline",
        evidence=evidence_text,
        hlo_fns={"train_step": (train_step, example)}, evidence_fn=evidence)


if __name__ == "__main__":
    main()
