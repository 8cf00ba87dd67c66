"""convert_reduce: bf16 activations; in every layer a statistic is computed by upcasting to
f32, reducing (sum / mean over the feature axis) and immediately downcasting the result to
bf16 again: convert(bf16->f32) -> reduce -> convert(f32->bf16), repeated in a loop over
layers. Jitted forward ("eval") step."""
import re

import models as M
from models import jax, jnp, np

FAULT = "unnecessary_convert_reduce"
LAYERS = 6
B, T, D = 16, 64, 256


def layer(w, x):
    # x: bf16 [B, T, D]
    mean = jnp.mean(x.astype(jnp.float32), axis=-1, keepdims=True).astype(jnp.bfloat16)
    x = x - mean
    ss = jnp.sum(jnp.square(x.astype(jnp.float32)), axis=-1, keepdims=True).astype(jnp.bfloat16)
    x = x * jax.lax.rsqrt(ss / D + jnp.bfloat16(1e-3))
    return jnp.tanh(x @ w)


def eval_step(ws, x):
    for w in ws:
        x = layer(w, x)
    return jnp.sum(x.astype(jnp.float32))


def _opnames(ins):
    return re.findall(r"%([\w.\-]+)", ins["operands"]) or re.findall(r"([A-Za-z_][\w.\-]*)", ins["operands"])


def convert_reduce_chains(text):
    """Entry-level chains  U --(f32)--> R(reduce) --(f32)--> D  where R is a reduce (or a fusion
    whose fused computation contains a reduce), U's fused computation converts a bf16 input to
    f32 (the upcast) and D converts R's f32 result to bf16 (the downcast). Bitcasts are looked
    through. Returns one row per reduce with what was found on each side."""
    import hlo_text
    header, comps = hlo_text.parse_module(text)
    by_name = {c["name"]: c for c in comps}
    entry = next(c for c in comps if c["entry"])
    ins = {i["name"]: i for i in entry["instructions"]}
    users = {}
    for i in entry["instructions"]:
        for o in _opnames(i):
            users.setdefault(o, []).append(i["name"])

    def fused(i):
        return by_name.get((hlo_text._attr(i["attrs"], "calls") or "").lstrip("%")) if i["opcode"] == "fusion" else None

    def has_convert(i, src, dst):
        if i["opcode"] == "convert":
            return i["shape"].startswith(dst)
        fc = fused(i)
        if not fc:
            return False
        shapes = {x["name"]: x["shape"] for x in fc["instructions"]}
        for x in fc["instructions"]:
            if x["opcode"] == "convert" and x["shape"].startswith(dst):
                ops = _opnames(x)
                if ops and shapes.get(ops[0], "").startswith(src):
                    return True
        return False

    def is_reduce(i):
        if i["opcode"] == "reduce":
            return True
        fc = fused(i)
        return bool(fc) and any(x["opcode"] == "reduce" for x in fc["instructions"])

    def producer(name):
        i = ins.get(name)
        while i is not None and i["opcode"] == "bitcast":
            ops = _opnames(i)
            i = ins.get(ops[0]) if ops else None
        return i

    rows = []
    for r in entry["instructions"]:
        if not is_reduce(r) or not r["shape"].startswith("f32"):
            continue
        big = [producer(o) for o in _opnames(r)
               if o in ins and ins[o]["shape"].split("{")[0].count(",") > r["shape"].split("{")[0].count(",")]
        big = [p for p in big if p is not None]
        up = next((p for p in big if has_convert(p, "bf16", "f32")), None)
        downs = [ins[u] for u in users.get(r["name"], []) if has_convert(ins[u], "f32", "bf16")
                 and ins[u]["shape"].startswith("bf16")]
        fc = fused(r)
        red = next((x for x in fc["instructions"] if x["opcode"] == "reduce"), None) if fc else r
        rows.append({"reduce_instruction": r["name"], "reduce_opcode_inside": red["name"] if red else None,
                     "reduce_shape": r["shape"].split("{")[0],
                     "input_producer": big[0]["name"] if big else None,
                     "input_producer_shape": big[0]["shape"].split("{")[0] if big else None,
                     "upcast_bf16_to_f32_in": up["name"] if up else None,
                     "downcast_f32_to_bf16_in": downs[0]["name"] if downs else None,
                     "op_name": (re.search(r'op_name="([^"]*)"', r["attrs"]) or [None, None])[1]})
    return rows


def main():
    a = M.parse_args(default_steps=6)
    rng = np.random.default_rng(0)
    ws = [jnp.asarray((rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)).astype(jnp.bfloat16)
          for _ in range(LAYERS)]
    xs = {i: jax.device_put(rng.standard_normal((B, T, D)).astype(np.float32).astype(jnp.bfloat16))
          for i in range(-3, a.steps)}
    eval_step_j = jax.jit(eval_step)

    def step(i):
        return eval_step_j(ws, xs[i])

    def evidence(space, dec, gt):
        with open(f"{a.out}/hlo/eval_step.optimized.hlo.txt") as fh:
            chains = convert_reduce_chains(fh.read())
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        comp_by_name = {c["name"]: c for c in parsed["computations"]}
        entry = comp_by_name[parsed["entry_computation_name"]]
        comp_by_id = {c["id"]: c for c in parsed["computations"]}
        fus_with_chain = {}
        for ch in chains:
            fus_with_chain[ch["reduce_instruction"]] = ch["downcast_f32_to_bf16_in"]
        evs = M.decode_summary.last_events
        rows = M.per_step_counts(evs, "^(" + "|".join(re.escape(n) for n in fus_with_chain) + ")$") if fus_with_chain else []
        return {"chains": chains, "num_f32_reduces": len(chains),
                "reduces_with_downcast": sum(1 for c in chains if c["downcast_f32_to_bf16_in"]),
                "reduces_with_upcast_and_downcast": sum(1 for c in chains if c["downcast_f32_to_bf16_in"]
                                                        and c["upcast_bf16_to_f32_in"]),
                "entry_fusions_containing_chain": fus_with_chain,
                "chain_fusion_thunks_per_step": [r["count"] for r in rows],
                "convert_total_text": gt["optimized_hlo"]["eval_step"]["opcode_counts_total"].get("convert", 0),
                "reduce_total_text": gt["optimized_hlo"]["eval_step"]["opcode_counts_total"].get("reduce", 0)}

    M.capture(
        "convert_reduce", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(f"{LAYERS}-layer bf16 network, x bf16[{B},{T},{D}], W bf16[{D},{D}]; per layer: "
                 "mean = mean(x.astype(f32), -1).astype(bf16); x -= mean; "
                 "ss = sum(square(x.astype(f32)), -1).astype(bf16); x *= rsqrt(ss/D + 1e-3); x = tanh(x @ W). "
                 f"jit forward ('eval_step'). 3 warm-up steps, {a.steps} traced steps."),
        injected_fault=FAULT, expected_faults=[FAULT],
        evidence={
            "hlo": f"per layer 2 f32 reductions (mean, sum of squares) = {2*LAYERS} (+1 final f32 loss sum). On XLA:CPU each reduce is an entry-level kCustom 'ynn_fusion.N' (fused computation: [multiply ->] reduce, f32 in / f32 out); its big f32 operand comes (directly or via bitcast) from a kLoop fusion containing a convert bf16 -> f32 (wrapped_convert, broadcast_subtract_fusion.N, convert_tanh_fusion.N), and its result is consumed by a kLoop fusion that converts f32 -> bf16 (multiply_convert_fusion.N, rsqrt_convert_fusion.N). 11 of the 13 reduces have both the upcast producer and the downcast consumer (the last layer's sum of squares and the final loss sum stay f32); observed.chains lists each; the optimized HLO has 124 convert instructions for 13 reduces",
            "thunks": "the fusions that contain these chains run once per step each (observed.chain_fusion_thunks_per_step)",
        },
        extra_gt={"layers": LAYERS},
        hlo_fns=lambda: {"eval_step": (eval_step_j, (ws, xs[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
