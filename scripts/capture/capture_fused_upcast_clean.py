"""fused_upcast_clean: the clean twin of `convert_reduce`. A small bf16 decoder-only
transformer (models.TCFG: d=128, 4 heads, ff=512, vocab=256, seq=32, batch=8; 2 layers) with
the recommended numerics: every layer norm upcasts its bf16 input to f32, accumulates the
statistics (mean, variance) in f32, normalises in f32 and casts the result back to bf16;
attention softmax and the loss's log-softmax also run in f32. Jitted forward ('eval_step').

XLA:CPU (jaxlib 0.10.2) with default options never fuses a layer norm's bf16->f32 convert into
its reduction: every f32 reduce becomes a YNNPACK custom fusion ('ynn_fusion.N', kCustom) that
reads an f32 tensor written by another kernel, and YNN dot fusions absorb the residual add and
write the residual stream in f32 (the bf16 rounding is done with f32->bf16->f32 round trips).
Without YNN reductions the TreeReductionRewriter splits every reduction over more than 32
elements into reduce-window + reduce, again reading a materialised f32 input.
So eval_step is jitted with compiler_options
  xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT  (YNN for lone dots only)
  xla_disable_hlo_passes=tree_reduction_rewriter
and then every layer-norm reduce is a kLoop fusion that reads the bf16 activation and converts
inside. ground_truth.json["observed"]["variants_tried"] records the other programs / options
compiled (ahead-of-time, after the trace) and what XLA did with them;
["observed"]["convert_reduce_comparison"] applies the same classification to the existing
convert_reduce HLO.
"""
import math
import os
import re

import models as M
from models import jax, jnp, np
import hlo_text

CFG = M.TCfg(layers=2)
F32, BF16 = jnp.float32, jnp.bfloat16
OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
           "xla_disable_hlo_passes": "tree_reduction_rewriter"}
HERE = os.path.dirname(os.path.abspath(__file__))
CONVERT_REDUCE_HLO = os.path.join(HERE, "..", "..", "testdata", "real", "convert_reduce", "hlo",
                                  "eval_step.optimized.hlo.txt")


# ---------------------------------------------------------------------------
# program


def ln_f32(x, g):
    """Layer norm with f32 statistics: upcast, mean / variance in f32, cast back."""
    xf = x.astype(F32)
    mu = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mu), axis=-1, keepdims=True)
    return ((xf - mu) * jax.lax.rsqrt(var + 1e-5) * g.astype(F32)).astype(BF16)


def ln_dtype_kw(x, g):
    """Same statistics written with dtype= (jnp.mean / jnp.var accumulate in f32)."""
    mu = jnp.mean(x, axis=-1, keepdims=True, dtype=F32)
    var = jnp.var(x, axis=-1, keepdims=True, dtype=F32)
    return ((x.astype(F32) - mu) * jax.lax.rsqrt(var + 1e-5) * g.astype(F32)).astype(BF16)


def ln_fast_var(x, g):
    """flax-style 'fast variance': E[x^2] - E[x]^2, both in f32."""
    xf = x.astype(F32)
    mu = jnp.mean(xf, axis=-1, keepdims=True)
    m2 = jnp.mean(jnp.square(xf), axis=-1, keepdims=True)
    var = jnp.maximum(m2 - mu * mu, 0.0)
    return ((xf - mu) * jax.lax.rsqrt(var + 1e-5) * g.astype(F32)).astype(BF16)


def attention(p, x, heads):
    b, s, d = x.shape
    hd = d // heads
    q = (x @ p["wq"]).reshape(b, s, heads, hd)
    k = (x @ p["wk"]).reshape(b, s, heads, hd)
    v = (x @ p["wv"]).reshape(b, s, heads, hd)
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(F32) / math.sqrt(hd)
    mask = jnp.tril(jnp.ones((s, s), bool))
    att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1).astype(BF16)
    o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
    return o @ p["wo"]


def make_eval_step(ln, cfg=CFG, options=OPTIONS):
    def block(p, x):
        x = x + attention(p, ln(x, p["ln1"]), cfg.heads)
        h = jax.nn.gelu(ln(x, p["ln2"]) @ p["w1"])
        return x + h @ p["w2"]

    def eval_step(params, batch):
        toks, tgt = batch
        x = params["embed"][toks] + params["pos"][None, :, :]
        for p in params["layers"]:
            x = block(p, x)
        logits = (x @ params["out"]).astype(F32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, tgt[..., None], axis=-1))

    return jax.jit(eval_step, compiler_options=options) if options else jax.jit(eval_step)


def bf16_params(cfg, seed=0):
    return jax.tree_util.tree_map(lambda a: a.astype(BF16), M.init_transformer(cfg, seed))


# ---------------------------------------------------------------------------
# HLO classification: is the bf16->f32 upcast of each f32 reduce inside the reduce's fusion?


def _opnames(ins):
    return re.findall(r"%([\w.\-]+)", ins["operands"])


def _op_name(ins):
    m = re.search(r'op_name="([^"]*)"', ins["attrs"])
    return m.group(1) if m else ""


STOP = {"broadcast", "constant", "iota", "dot", "convolution", "reduce", "reduce-window", "rng",
        "custom-call", "partition-id", "replica-id"}
MOVE = {"bitcast", "copy", "reshape", "transpose"}


def _convert_kind(i, ins):
    """'upcast' for convert bf16->f32 of a bf16 value read from memory (a parameter of the
    computation or an entry value), 'roundtrip' for convert(convert(f32->bf16)) (XLA:CPU
    computes bf16 ops in f32 and rounds through bf16), None otherwise."""
    if i["opcode"] != "convert" or not i["shape"].startswith("f32"):
        return None
    ops = _opnames(i)
    src = ins.get(ops[0]) if ops else None
    if src is None or not src["shape"].startswith("bf16"):
        return None
    while src is not None and src["opcode"] in MOVE:
        o = _opnames(src)
        src = ins.get(o[0]) if o else None
    if src is not None and src["opcode"] == "convert":
        o = _opnames(src)
        if o and ins.get(o[0], {}).get("shape", "").startswith("f32"):
            return "roundtrip"
    return "upcast"


def _walk_converts(ins, starts):
    """Converts reached walking backwards from `starts` through elementwise / data-movement
    ops (broadcast operands, e.g. a broadcast mean, are not followed; dots, constants and other
    reductions stop the walk). Returns ({'upcast': [...], 'roundtrip': [...]}, parameters)."""
    found, params, seen, stack = {"upcast": [], "roundtrip": []}, [], set(), list(starts)
    while stack:
        n = stack.pop()
        if n in seen or n not in ins:
            continue
        seen.add(n)
        i = ins[n]
        k = _convert_kind(i, ins)
        if k:
            found[k].append(n)
            continue
        if i["opcode"] == "parameter":
            params.append(n)
            continue
        if i["opcode"] in STOP:
            continue
        stack.extend(_opnames(i))
    return found, params


def upcast_reduce_table(text):
    """One row per f32 reduce / reduce-window in the entry computation or in a fused
    computation called from it. From the reduce's input(s), walk backwards inside the reduce's
    own computation (see _walk_converts):
      * 'fused': a convert bf16->f32 of a bf16 tensor read from memory is inside the same
        computation as the reduce (no f32 copy of the activation is written);
      * 'materialised': the walk reaches a parameter of the fused computation whose caller
        operand (looked through bitcast / copy) is a separate kernel whose output is such an
        upcast (an entry convert, a pure 'wrapped_convert' fusion or a fusion that converts and
        computes elementwise): the f32 intermediate is written to memory and read back;
      * 'materialised_roundtrip' / 'fused_roundtrip': only a bf16 rounding round trip
        convert(convert(f32->bf16)) is found (XLA:CPU runs bf16 elementwise ops in f32); the
        f32 input is computed, not an upcast copy of a bf16 tensor;
      * 'mixed' if both fused and materialised upcasts feed it; 'no_upcast' otherwise.
    """
    header, comps = hlo_text.parse_module(text)
    by_name = {c["name"]: c for c in comps}
    entry = next(c for c in comps if c["entry"])
    eins = {i["name"]: i for i in entry["instructions"]}
    callers = {}
    for i in entry["instructions"]:
        if i["opcode"] == "fusion":
            callers[(hlo_text._attr(i["attrs"], "calls") or "").lstrip("%")] = i
    users = {}
    for i in entry["instructions"]:
        for o in _opnames(i):
            users.setdefault(o, []).append(i["name"])

    def fused_comp(i):
        return by_name.get((hlo_text._attr(i["attrs"], "calls") or "").lstrip("%")) if i["opcode"] == "fusion" else None

    def producer_info(name):
        """What kernel writes entry value `name` (looked through bitcast / copy fusions), and
        whether its output is an upcast of bf16 data."""
        chain = []
        i = eins.get(name)
        while i is not None and (i["opcode"] in MOVE or (fused_comp(i) and all(
                x["opcode"] in MOVE | {"parameter"} for x in fused_comp(i)["instructions"]))):
            chain.append(i["name"])
            ops = _opnames(i)
            i = eins.get(ops[0]) if ops else None
        if i is None or not i["shape"].startswith("f32"):
            return None
        k = _convert_kind(i, eins)
        if k:
            return {"producer": i["name"], "producer_kind": "entry convert instruction", "convert_kind": k,
                    "producer_opcodes": ["convert"], "looked_through": chain}
        fc = fused_comp(i)
        if not fc:
            return None
        fins = {x["name"]: x for x in fc["instructions"]}
        root = next((x for x in fc["instructions"] if x["root"]), fc["instructions"][-1])
        found, _ = _walk_converts(fins, [root["name"]])
        if not (found["upcast"] or found["roundtrip"]):
            return None
        opcodes = sorted({x["opcode"] for x in fc["instructions"]} - {"parameter"})
        return {"producer": i["name"], "producer_fusion_kind": hlo_text._attr(i["attrs"], "kind"),
                "producer_backend": "__ynn_fusion" if "__ynn_fusion" in i["attrs"] else None,
                "producer_kind": ("pure convert fusion" if opcodes == ["convert"] else
                                  "fusion with a dot" if "dot" in opcodes else "elementwise fusion that converts"),
                "convert_kind": "upcast" if found["upcast"] else "roundtrip",
                "producer_converts": found, "producer_opcodes": opcodes,
                "producer_shape": i["shape"].split("{")[0], "looked_through": chain}

    rows = []
    for comp in comps:
        caller = None if comp["entry"] else callers.get(comp["name"])
        if not comp["entry"] and caller is None:
            continue  # reducer regions, nested computations
        ins = {i["name"]: i for i in comp["instructions"]}
        pidx = {i["name"]: int(re.search(r"\d+", i["operands"]).group())
                for i in comp["instructions"] if i["opcode"] == "parameter"}
        for r in comp["instructions"]:
            if r["opcode"] not in ("reduce", "reduce-window") or not r["shape"].lstrip("(").startswith("f32"):
                continue
            ops = _opnames(r)
            inputs = ops[: max(1, len(ops) // 2)]
            if comp["entry"]:  # unfused reduce: inputs are entry values written by other kernels
                own, ext = {"upcast": [], "roundtrip": []}, inputs
            else:
                own, reached = _walk_converts(ins, inputs)
                cops = _opnames(caller)
                ext = [cops[pidx[p]] for p in reached if p in pidx and pidx[p] < len(cops)]
            prods = [p for p in (producer_info(n) for n in ext) if p]
            mat_up = [p for p in prods if p["convert_kind"] == "upcast"]
            mat_rt = [p for p in prods if p["convert_kind"] == "roundtrip"]
            if own["upcast"] and mat_up:
                status = "mixed"
            elif own["upcast"]:
                status = "fused"
            elif mat_up:
                status = "materialised"
            elif own["roundtrip"]:
                status = "fused_roundtrip"
            elif mat_rt:
                status = "materialised_roundtrip"
            else:
                status = "no_upcast"
            where = caller["name"] if caller else r["name"]
            down = [u for u in users.get(where, []) if eins[u]["shape"].startswith("bf16") and (
                eins[u]["opcode"] == "convert" or (fused_comp(eins[u]) and any(
                    x["opcode"] == "convert" and x["shape"].startswith("bf16") for x in fused_comp(eins[u])["instructions"])))]
            rows.append({
                "reduce": r["name"], "opcode": r["opcode"], "computation": comp["name"],
                "entry_instruction": where,
                "entry_fusion_kind": hlo_text._attr(caller["attrs"], "kind") if caller else None,
                "entry_fusion_backend": "__ynn_fusion" if caller and "__ynn_fusion" in caller["attrs"] else None,
                "reduce_shape": r["shape"].split("{")[0],
                "input_shape": ins.get(inputs[0], {}).get("shape", "").split("{")[0] if inputs else None,
                "op_name": _op_name(r) or (_op_name(caller) if caller else ""),
                "status": status,
                "converts_in_reduce_computation": own,
                "input_producers": prods,
                "entry_users_with_f32_to_bf16_convert": down,
            })
    cnt = M.X.counter(r["status"] for r in rows)
    return {
        "f32_reduces": len(rows),
        "by_status": cnt,
        "reduces_on_bf16_upcast": sum(1 for r in rows if r["status"] in ("fused", "materialised", "mixed")),
        "upcast_fused_in_reduce_fusion": cnt.get("fused", 0),
        "upcast_materialised_by_separate_kernel": cnt.get("materialised", 0),
        "upcast_mixed": cnt.get("mixed", 0),
        "roundtrip_only_fused": cnt.get("fused_roundtrip", 0),
        "roundtrip_only_materialised": cnt.get("materialised_roundtrip", 0),
        "reduces_whose_result_is_downcast_to_bf16_by_a_user": sum(1 for r in rows if r["entry_users_with_f32_to_bf16_convert"]),
        "materialised_upcast_and_downcast_user": sum(1 for r in rows if r["status"] in ("materialised", "mixed")
                                                     and r["entry_users_with_f32_to_bf16_convert"]),
        "ynn_reduce_fusions": sum(1 for r in rows if r["entry_fusion_backend"] == "__ynn_fusion"),
        "reduce_windows": sum(1 for r in rows if r["opcode"] == "reduce-window"),
        "rows": rows,
    }


def _brief(t):
    return {k: v for k, v in t.items() if k != "rows"}


# ---------------------------------------------------------------------------


def _ln_rows(t, d):
    """Rows of the layer-norm reductions (reduce_sum over the model dimension d)."""
    return [r for r in t["rows"] if (r["op_name"].endswith("reduce_sum") or r["opcode"] == "reduce-window")
            and "softmax" not in r["op_name"] and (r["input_shape"] or "").endswith(f",{d}]")]


def _row_brief(r):
    return {"entry_instruction": r["entry_instruction"], "status": r["status"],
            "entry_fusion_kind": r["entry_fusion_kind"], "entry_fusion_backend": r["entry_fusion_backend"],
            "input_shape": r["input_shape"], "op_name": r["op_name"],
            "producers": [[m["producer"], m["producer_kind"], m["convert_kind"]] for m in r["input_producers"]],
            "downcast_users": r["entry_users_with_f32_to_bf16_convert"]}


def main():
    a = M.parse_args(default_steps=6)
    cfg = CFG
    params = bf16_params(cfg)
    example = bf16_params(cfg)
    batches = M.make_batches(cfg, a.steps)
    eval_step = make_eval_step(ln_f32)

    def step(i):
        return eval_step(params, batches[i])

    def variants():
        """Compiled ahead-of-time after the trace; nothing here runs in the profile."""
        out = {}
        ynn_dot = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
        cases = [
            ("astype_f32__default_options", ln_f32, None,
             "the obvious program (x.astype(f32), mean, mean of squared deviations), XLA:CPU default options"),
            ("dtype_kw__default_options", ln_dtype_kw, None,
             "jnp.mean(x, dtype=f32) / jnp.var(x, dtype=f32), default options"),
            ("fast_variance__default_options", ln_fast_var, None,
             "flax-style E[x^2]-E[x]^2 in f32, default options"),
            ("astype_f32__ynn_dot_fusions_only", ln_f32, ynn_dot,
             "YNN fusions for dots (with their elementwise neighbours) but not reductions; TreeReductionRewriter on: each layer-norm reduction becomes reduce-window (the rows counted here) + reduce"),
            ("astype_f32__ynn_dot_fusions_only__no_tree_rewriter", ln_f32,
             dict(ynn_dot, xla_disable_hlo_passes="tree_reduction_rewriter"),
             "YNN dot fusions absorb the residual add and write the residual stream in f32, so only the first "
             "layer norm reads a bf16 tensor"),
            ("astype_f32__individual_dot__tree_rewriter_on", ln_f32,
             {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"},
             "YNN for lone dots only, TreeReductionRewriter on: each layer-norm reduction becomes reduce-window (the rows counted here) + reduce"),
            ("astype_f32__captured_options", ln_f32, OPTIONS, "the captured program"),
            ("dtype_kw__captured_options", ln_dtype_kw, OPTIONS, "dtype= form, captured options"),
            ("fast_variance__captured_options", ln_fast_var, OPTIONS, "E[x^2]-E[x]^2, captured options"),
        ]
        for name, ln, opts, desc in cases:
            j = make_eval_step(ln, options=opts)
            t = upcast_reduce_table(j.lower(example, batches[0]).compile().as_text())
            lnr = _ln_rows(t, cfg.d)
            out[name] = dict(description=desc, compiler_options=opts, **_brief(t),
                             layer_norm_reduces=len(lnr),
                             layer_norm_by_status=M.X.counter(r["status"] for r in lnr),
                             layer_norm_rows=[_row_brief(r) for r in lnr])
        return out

    def evidence(space, dec, gt):
        with open(os.path.join(a.out, "hlo", "eval_step.optimized.hlo.txt")) as fh:
            table = upcast_reduce_table(fh.read())
        lnr = _ln_rows(table, cfg.d)
        fused_names = sorted({r["entry_instruction"] for r in table["rows"] if r["status"] == "fused"})
        evs = M.decode_summary.last_events
        rows = M.per_step_counts(evs, "^(" + "|".join(re.escape(n) for n in fused_names) + ")$") if fused_names else []
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        comp_by_id = {c["id"]: c for c in parsed["computations"]}
        entry = next(c for c in parsed["computations"] if c["name"] == parsed["entry_computation_name"])
        proto = []
        for i in entry["instructions"]:
            if i["name"] not in fused_names:
                continue
            inner = [x for c in i["called_computation_ids"] if c in comp_by_id for x in comp_by_id[c]["instructions"]]
            proto.append({"name": i["name"], "fusion_kind": i["fusion_kind"],
                          "has_reduce": any(x["opcode"] == "reduce" for x in inner),
                          "converts_to_f32": sum(1 for x in inner if x["opcode"] == "convert"
                                                 and x["shape"].get("type") == "f32"),
                          "bf16_parameters": sum(1 for x in inner if x["opcode"] == "parameter"
                                                 and x["shape"].get("type") == "bf16")})
        cr = None
        if os.path.exists(CONVERT_REDUCE_HLO):
            with open(CONVERT_REDUCE_HLO) as fh:
                crt = upcast_reduce_table(fh.read())
            cr = dict(hlo_file="testdata/real/convert_reduce/hlo/eval_step.optimized.hlo.txt", **_brief(crt),
                      rows=[_row_brief(r) for r in crt["rows"]])
        return {"upcast_reduces": table,
                "layer_norm_reduces": len(lnr),
                "layer_norm_by_status": M.X.counter(r["status"] for r in lnr),
                "layer_norm_entry_fusions": [r["entry_instruction"] for r in lnr],
                "fused_reduce_fusions_in_hloproto": proto,
                "fused_reduce_fusion_thunks_per_step": [r["count"] for r in rows],
                "convert_reduce_comparison": cr,
                "variants_tried": variants(),
                "convert_total_text": gt["optimized_hlo"]["eval_step"]["opcode_counts_total"].get("convert", 0),
                "reduce_total_text": gt["optimized_hlo"]["eval_step"]["opcode_counts_total"].get("reduce", 0)}

    M.capture(
        "fused_upcast_clean", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(cfg.describe() + " with bf16 parameters and activations; every layer norm computes "
                 "xf = x.astype(f32); mu = mean(xf); var = mean((xf-mu)^2); "
                 "y = ((xf-mu)*rsqrt(var+1e-5)*g).astype(bf16); attention softmax and the loss log-softmax in f32. "
                 f"jit forward ('eval_step') with compiler_options {OPTIONS} (YNNPACK only for lone dots, no "
                 "TreeReductionRewriter) so that XLA:CPU fuses each layer-norm upcast into its reduce fusion; "
                 f"with default options it does not (observed.variants_tried). 3 warm-up steps, {a.steps} traced steps."),
        injected_fault=None, expected_faults=[], baseline=None,
        evidence={
            "hlo": "all 8 layer-norm reductions (mean and variance of 4 layer norms) are entry-level kLoop fusions (add_reduce_fusion.N = mean, add_rsqrt_fusion.N = variance + rsqrt) whose fused computation takes the bf16 activation as a parameter and converts it to f32 itself (convert -> [add ->] [subtract -> multiply ->] reduce): observed.upcast_reduces status 'fused', no kernel writes an f32 copy of the activation. No reduce result is converted to bf16 by its user: the f32 statistics feed the f32 normalisation, whose output is cast to bf16. The softmax max and the log-softmax / loss reductions are fused the same way; the two softmax sums read exp(s - max), an f32 tensor a separate kLoop fusion writes because the P@V dot also reads it (status 'materialised', no downcast user). Contrast convert_reduce (observed.convert_reduce_comparison): 13 YNN reduce fusions 'ynn_fusion.N'; 12 read an f32 tensor written by a separate kernel (6 true bf16->f32 upcasts incl. a pure 'wrapped_convert', 6 f32->bf16->f32 round trips after the tanh), the final loss sum has its round trip inside; 11 have a user that immediately converts the f32 result to bf16",
            "not_a_fault": "must NOT be reported as unnecessary_convert_reduce: f32 layer-norm statistics are the recommended numerics and here cost no extra f32 tensor in memory",
            "xla_cpu": "with XLA:CPU default options the same program (and the dtype= and E[x^2]-E[x]^2 forms) compiles to YNN reduce fusions that read f32 tensors written by other kernels (observed.variants_tried); the residual stream is then held in f32 by YNN dot fusions that absorb the residual add",
        },
        extra_gt={"layers": cfg.layers, "compiler_options": OPTIONS},
        hlo_fns=lambda: {"eval_step": (eval_step, (example, batches[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
