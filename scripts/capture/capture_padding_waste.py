"""padding_waste: the hot ops are matmuls whose dims are just past hardware-friendly sizes
(feature dims 129/130/257 instead of 128/256, batch 8): padded to (8, 128)-tiles they
waste up to ~50% of the MXU/vector work. MLP train step, tiny batch."""
import math

import models as M
from models import jax, jnp, np

FAULT = "padding_waste"
B = 8
DIMS = [130, 129, 257, 130]


def padded(n, m):
    return int(math.ceil(n / m) * m)


def dot_padding_table(text):
    """Every dot in the optimized HLO with operand/result dims and waste when the two minor
    dims are padded to multiples of (8, 128)."""
    import hlo_text
    header, comps = hlo_text.parse_module(text)
    rows = []
    for c in comps:
        shapes = {i["name"]: i["shape"] for i in c["instructions"]}
        for i in c["instructions"]:
            if i["opcode"] != "dot":
                continue
            dims = [int(x) for x in i["shape"].split("[", 1)[1].split("]", 1)[0].split(",") if x]
            ops = [o.strip().split(" ")[-1].lstrip("%") for o in i["operands"].split(",")]
            opd = []
            for o in ops:
                s = shapes.get(o, "")
                opd.append([int(x) for x in s.split("[", 1)[1].split("]", 1)[0].split(",") if x] if "[" in s else None)
            real = np.prod(dims) if dims else 1
            pad = (np.prod(dims[:-2]) if len(dims) > 2 else 1) * (
                padded(dims[-2], 8) * padded(dims[-1], 128) if len(dims) >= 2 else padded(dims[-1], 128))
            rows.append({"computation": c["name"], "name": i["name"], "shape": i["shape"].split("{")[0],
                         "operand_dims": opd,
                         "lhs_contracting": hlo_text._attr(i["attrs"], "lhs_contracting_dims"),
                         "rhs_contracting": hlo_text._attr(i["attrs"], "rhs_contracting_dims"),
                         "result_elems": int(real), "result_elems_padded_8x128": int(pad),
                         "result_waste_fraction": round(1 - real / pad, 4)})
    return rows


def main():
    a = M.parse_args(default_steps=10)
    rng = np.random.default_rng(0)
    params = M.init_mlp(DIMS)
    example = M.init_mlp(DIMS)
    data = {i: (jax.device_put(rng.standard_normal((B, DIMS[0])).astype(np.float32)),
                jax.device_put(rng.standard_normal((B, DIMS[-1])).astype(np.float32)))
            for i in range(-3, a.steps)}
    train_step = M.make_mlp_train_step(donate=True, act=jnp.tanh)
    state = {"params": params}

    def step(i):
        p, loss = train_step(state["params"], data[i])
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        with open(f"{a.out}/hlo/train_step.optimized.hlo.txt") as fh:
            table = dot_padding_table(fh.read())
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        comp_by_id = {c["id"]: c for c in parsed["computations"]}
        entry = next(c for c in parsed["computations"] if c["name"] == parsed["entry_computation_name"])

        def has_dot(ins):
            return ins["opcode"] == "dot" or any(
                has_dot(x) for cid in ins["called_computation_ids"]
                for x in comp_by_id.get(cid, {"instructions": []})["instructions"])
        dot_entry = {i["name"]: M.X.shape_str(i["shape"]) for i in entry["instructions"] if has_dot(i)}
        evs = M.decode_summary.last_events
        th = [e for e in evs if "hlo_op" in e.stats and e.stats.get("hlo_module") == "jit_train_step"]
        tot = sum(e.dur_ps for e in th)
        dt = sum(e.dur_ps for e in th if e.stats["hlo_op"] in dot_entry)
        by = {}
        for e in th:
            if e.stats["hlo_op"] in dot_entry:
                r = by.setdefault(e.stats["hlo_op"], [0, 0])
                r[0] += 1
                r[1] += e.dur_ps
        return {"dots": table,
                "dot_entry_instructions_hloproto": dot_entry,
                "dot_thunk_share_of_thunk_time": round(dt / tot, 4) if tot else None,
                "dot_thunks": {k: {"count": v[0], "total_us": round(v[1] / 1e6, 2),
                                   "shape": dot_entry[k]} for k, v in sorted(by.items())}}

    M.capture(
        "padding_waste", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(f"MLP {DIMS} (tanh), batch {B}, MSE, jit SGD train step with donate_argnums=(0,): "
                 f"x f32[{B},{DIMS[0]}] @ W1 f32[{DIMS[0]},{DIMS[1]}] -> @ W2 f32[{DIMS[1]},{DIMS[2]}] -> "
                 f"@ W3 f32[{DIMS[2]},{DIMS[3]}]; all feature dims are 1-2 past a multiple of 128. "
                 f"3 warm-up steps, {a.steps} traced steps."),
        injected_fault=FAULT, expected_faults=[FAULT],
        evidence={
            "hlo": "all dot instructions have a feature dim in {129, 130, 257} and/or the batch dim 8 (8 dots: 5 kCustom ynn_fusion wrapping dot_general for forward and dx, 3 plain dot for dW); padded to (8,128) tiles the waste is 24-50% per dot (observed.dots[].result_waste_fraction); e.g. f32[8,129] pads to f32[8,256] (49.6% waste), f32[130,129] pads to f32[136,256]",
            "thunks": "the dot / ynn_fusion thunks of jit_train_step are the hot ops of each step (observed.dot_thunk_share_of_thunk_time)",
        },
        extra_gt={"dims": DIMS, "batch": B},
        hlo_fns=lambda: {"train_step": (train_step, (example, data[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
