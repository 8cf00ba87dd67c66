"""replicated_activations: 8 virtual CPU devices, Mesh(4x2, ('data','model')), the corpus
baseline's 3-layer tensor-parallel MLP (B=64, D=256, F=512) jitted with GSPMD (jax.jit +
NamedSharding in_shardings/out_shardings + jax.lax.with_sharding_constraint, NO shard_map).
Weights are sharded the correct tensor-parallel way: W1 [D,F] column-sharded P(None,'model'),
W2 [F,D] row-sharded P('model',None); x, y are P('data', None).

FAULT: the hidden activation h = x @ W1 of every layer is constrained to PartitionSpec(None)
(fully replicated) with with_sharding_constraint. The transpose of the constraint applies the
same spec to h's cotangent, so the backward is affected too.
--baseline (replicated_activations_baseline): h is constrained to the tensor-parallel spec
P('data','model') instead.
"""
import os
import re
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models as M  # noqa: E402
from models import jax, jnp, np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402
import hlo_text  # noqa: E402
import sharded_common as S  # noqa: E402

FAULT = "replicated_activations"
FAULT_SPEC = P(None)
BASE_SPEC = P("data", "model")
# copies / bitcasts that only move data: looked through when resolving what is gathered
MOVE_OPS = {"bitcast", "copy", "reshape", "transpose"}


# ---------------------------------------------------------------------------
# program


def build(mesh, L, hspec_fn):
    """hspec_fn(x, p) -> layer output; returns the jitted train step."""
    def loss_fn(ps, x, y):
        for p in ps:
            x = hspec_fn(x, p)
        return jnp.mean((x - y) ** 2)

    def train_step(ps, x, y):
        loss, g = jax.value_and_grad(loss_fn)(ps, x, y)
        return M.sgd(ps, g, 1e-3), loss

    pspec = [{"w1": P(None, "model"), "w2": P("model", None)}] * L
    shard = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), pspec)
    xs = NamedSharding(mesh, P("data", None))
    return jax.jit(train_step, in_shardings=(shard, xs, xs),
                   out_shardings=(shard, NamedSharding(mesh, P())), donate_argnums=(0,)), shard, xs


def layer_fn(mesh, spec):
    def f(x, p):
        h = x @ p["w1"]                                           # hidden activation [B, F]
        h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, spec))
        return x + jax.nn.relu(h) @ p["w2"]
    return f


def variant_fns(mesh):
    """Other ways of writing the fault, compiled ahead-of-time for the record only."""
    wsc = lambda h, s: jax.lax.with_sharding_constraint(h, NamedSharding(mesh, s))  # noqa: E731
    R, T = P(None), P("data", "model")
    return {
        "h_P()": ("wsc(x@W1, P()) (empty spec instead of P(None))",
                  lambda x, p: x + jax.nn.relu(wsc(x @ p["w1"], P())) @ p["w2"]),
        "relu_h_P(None)": ("constraint after the relu: wsc(relu(x@W1), P(None))",
                           lambda x, p: x + wsc(jax.nn.relu(x @ p["w1"]), R) @ p["w2"]),
        "h_tp_then_P(None)": ("h first constrained to P('data','model'), then to P(None)",
                              lambda x, p: x + jax.nn.relu(wsc(wsc(x @ p["w1"], T), R)) @ p["w2"]),
        "h_P(data,None)": ("h replicated over 'model' only: wsc(x@W1, P('data', None))",
                           lambda x, p: x + jax.nn.relu(wsc(x @ p["w1"], P("data", None))) @ p["w2"]),
    }


# ---------------------------------------------------------------------------
# HLO text analysis


def _opnames(ins):
    return re.findall(r"%([\w.\-]+)", ins["operands"])


def _op_name(ins):
    m = re.search(r'op_name="([^"]*)"', ins["attrs"])
    return m.group(1) if m else ""


def expand_groups_text(attrs):
    """replica_groups in any of the text forms, including
    mesh['a'=1,'b'=2,'c'=4], device_ids=([4,2]T(1,0)) {'b'} (not handled by hlo_text)."""
    m = re.search(r"replica_groups=mesh\[([^\]]*)\](?:,\s*device_ids=\(([^)]*\)?)\))?\s*\{([^}]*)\}", attrs)
    if not m:
        rg = hlo_text._attr(attrs, "replica_groups")
        return rg, hlo_text.expand_replica_groups(rg)
    text = m.group(0)[len("replica_groups="):]
    axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))
    names, sizes = [a for a, _ in axes], [int(n) for _, n in axes]
    n = int(np.prod(sizes))
    ids = np.arange(n)
    if m.group(2):
        im = re.match(r"\[([0-9,]*)\](?:T\(([0-9,]*)\))?", m.group(2))
        dims = [int(x) for x in im.group(1).split(",") if x]
        a = np.arange(n).reshape(dims)
        if im.group(2):
            a = a.transpose([int(x) for x in im.group(2).split(",")])
        ids = a.reshape(-1)
    sel = re.findall(r"'([^']+)'", m.group(3))
    a = ids.reshape(sizes)
    rest = [i for i, nm in enumerate(names) if nm not in sel]
    chosen = [names.index(x) for x in sel]
    a = a.transpose(rest + chosen)
    per = int(np.prod([sizes[i] for i in chosen])) if chosen else 1
    return text, a.reshape(-1, per).tolist()


def mesh_axis_of(groups, mesh):
    g = sorted(sorted(x) for x in groups)
    ids = np.array([[d.id for d in row] for row in mesh.devices])
    cand = {"data": sorted(sorted(ids[:, j].tolist()) for j in range(ids.shape[1])),
            "model": sorted(sorted(ids[i, :].tolist()) for i in range(ids.shape[0])),
            "data+model": [sorted(ids.reshape(-1).tolist())]}
    for k, v in cand.items():
        if g == v:
            return k
    return "other"


def text_all_gathers(text, mesh):
    header, comps = hlo_text.parse_module(text)
    by_name = {c["name"]: c for c in comps}
    entry = next(c for c in comps if c["entry"])
    ins = {i["name"]: i for i in entry["instructions"]}

    def fused(i):
        return by_name.get((hlo_text._attr(i["attrs"], "calls") or "").lstrip("%")) if i["opcode"] == "fusion" else None

    def is_move(i):
        if i["opcode"] in MOVE_OPS:
            return True
        fc = fused(i)
        return bool(fc) and all(x["opcode"] in MOVE_OPS | {"parameter"} for x in fc["instructions"])

    def resolve(name):
        chain = []
        i = ins.get(name)
        while i is not None and is_move(i):
            chain.append(f"{i['name']} ({i['opcode']}{'/' + fused(i)['name'] if fused(i) else ''})")
            ops = _opnames(i)
            i = ins.get(ops[0]) if ops else None
        return i, chain

    def upstream_constraint(i, depth=0, seen=None):
        """sharding_constraint in op_name, or Sharding / SPMDFullToShardShape custom-calls,
        anywhere upstream of i in the entry computation (or inside its fusion)."""
        seen = seen if seen is not None else set()
        if i is None or i["name"] in seen or depth > 200:
            return []
        seen.add(i["name"])
        hits = []
        tgt = hlo_text._attr(i["attrs"], "custom_call_target") if i["opcode"] == "custom-call" else None
        if "sharding_constraint" in _op_name(i) or tgt in ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"):
            hits.append(i["name"])
        fc = fused(i)
        if fc:
            for x in fc["instructions"]:
                if "sharding_constraint" in _op_name(x):
                    hits.append(f"{i['name']}/{x['name']}")
        for o in _opnames(i):
            hits += upstream_constraint(ins.get(o), depth + 1, seen)
        return hits

    rows = []
    for i in entry["instructions"]:
        if i["opcode"] not in ("all-gather", "all-gather-start"):
            continue
        opnd = _opnames(i)[0]
        prod, chain = resolve(opnd)
        rg_text, groups = expand_groups_text(i["attrs"])
        pf = fused(prod) if prod else None
        if prod is None:
            kind = None
        elif prod["opcode"] == "parameter":
            kind = "entry parameter (weight or input)"
        elif prod["opcode"] in ("all-gather", "all-gather-start"):
            kind = "another all-gather (staged gather)"
        else:
            kind = "computed activation"
        rows.append({
            "name": i["name"], "shape": i["shape"].split("{")[0],
            "dimensions": hlo_text._attr(i["attrs"], "dimensions"),
            "channel_id": hlo_text._attr(i["attrs"], "channel_id"),
            "op_name": _op_name(i),
            "phase": "backward" if "transpose(" in _op_name(i) else "forward",
            "operand": opnd,
            "looked_through": chain,
            "producer": prod["name"] if prod else None,
            "producer_opcode": prod["opcode"] if prod else None,
            "producer_fused_computation": pf["name"] if pf else None,
            "producer_fused_opcodes": sorted({x["opcode"] for x in pf["instructions"]} - {"parameter"}) if pf else None,
            "producer_shape": prod["shape"].split("{")[0] if prod else None,
            "producer_op_name": _op_name(prod) if prod else None,
            "producer_kind": kind,
            "producer_op_name_has_sharding_constraint": "sharding_constraint" in _op_name(prod) if prod else False,
            "sharding_constraint_upstream": upstream_constraint(prod),
            "replica_groups_text": rg_text, "replica_groups": groups,
            "mesh_axis": mesh_axis_of(groups, mesh) if groups else None,
        })
    allins = [x for c in comps for x in c["instructions"]]
    return rows, {
        "instructions_with_sharding_constraint_in_op_name": sum(1 for x in allins if "sharding_constraint" in _op_name(x)),
        "custom_call_targets": M.X.counter(hlo_text._attr(x["attrs"], "custom_call_target") for x in allins
                                           if x["opcode"] == "custom-call"),
        "parameters_with_sharding": sum(1 for x in entry["instructions"]
                                        if x["opcode"] == "parameter" and "sharding=" in x["attrs"]),
        "dynamic_slice_total": sum(1 for x in allins if x["opcode"] == "dynamic-slice"),
        "partition_id_total": sum(1 for x in allins if x["opcode"] == "partition-id"),
    }


def lowered_constraints(jitted, args):
    """Where the constraint is visible before optimization: sdy.sharding_constraint in the
    StableHLO, custom-call Sharding in the pre-optimization HLO."""
    lo = jitted.lower(*args)
    sh = lo.as_text()
    hl = lo.as_text(dialect="hlo")
    specs = re.findall(r"sdy\.sharding_constraint %\S+ <@mesh, (\[[^>]*\])>", sh)
    return {"stablehlo_sdy_sharding_constraint_ops": len(specs),
            "stablehlo_sdy_sharding_constraint_specs": M.X.counter(specs),
            "pre_optimization_hlo_custom_call_Sharding": len(re.findall(r'custom_call_target="Sharding"', hl)),
            "pre_optimization_hlo_op_names_with_sharding_constraint": len(re.findall(r'op_name="[^"]*sharding_constraint', hl)),
            "pre_optimization_hlo_instruction_names_sharding_constraint": len(re.findall(r"\bsharding_constraint(\.\d+)? = ", hl))}


def compile_summary(jitted, args, mesh):
    text = jitted.lower(*args).compile().as_text()
    rows, extra = text_all_gathers(text, mesh)
    summ = hlo_text.summarize(text)
    return text, rows, extra, summ


def proto_mesh_replica_groups(blob):
    """{instruction name: expanded replica groups} for collectives whose HloProto uses field 93
    (mesh axes). Unlike xspace.expand_mesh_axes this also reads the mesh's iota device list
    (mesh field 3 = {1: reshape dims, 2: transpose perm}, text form
    `device_ids=([4,2]T(1,0))`), which xspace.py ignores."""
    X = M.X
    buf = memoryview(blob)
    out = {}

    def mesh_groups(span):
        axes, ids, dims, perm, sel = [], [], [], [], []
        for f, wt, v in X.fields(buf, *span):
            if f == 1:
                for f2, wt2, v2 in X.fields(buf, *v):
                    if f2 == 1:
                        name, size = "", 0
                        for f3, wt3, v3 in X.fields(buf, *v2):
                            if f3 == 1:
                                name = X._str(buf, v3)
                            elif f3 == 2:
                                size = v3
                        axes.append((name, size))
                    elif f2 == 2:
                        ids.extend(X._packed_ints(buf, wt2, v2))
                    elif f2 == 3:
                        for f3, wt3, v3 in X.fields(buf, *v2):
                            if f3 == 1:
                                dims.extend(X._packed_ints(buf, wt3, v3))
                            elif f3 == 2:
                                perm.extend(X._packed_ints(buf, wt3, v3))
            elif f == 2:
                idx = 0
                for f2, wt2, v2 in X.fields(buf, *v):
                    if f2 == 1:
                        idx = v2
                sel.append(idx)
        sizes = [s for _, s in axes]
        n = int(np.prod(sizes))
        if len(ids) == n:
            a = np.array(ids)
        elif dims:
            a = np.arange(n).reshape(dims)
            if perm:
                a = a.transpose(perm)
            a = a.reshape(-1)
        else:
            a = np.arange(n)
        a = a.reshape(sizes)
        rest = [i for i in range(len(sizes)) if i not in sel]
        per = int(np.prod([sizes[i] for i in sel])) if sel else 1
        return a.transpose(rest + sel).reshape(-1, per).tolist(), {"axes": axes, "iota_dims": dims,
                                                                   "iota_perm": perm, "selected": sel}

    for f, wt, v in X.fields(buf):
        if f != 1:
            continue
        for f2, wt2, v2 in X.fields(buf, *v):
            if f2 != 3:
                continue
            for f3, wt3, v3 in X.fields(buf, *v2):
                if f3 != 2:
                    continue
                name, m93 = None, None
                for f4, wt4, v4 in X.fields(buf, *v3):
                    if f4 == 1:
                        name = X._str(buf, v4)
                    elif f4 == 93:
                        m93 = v4
                if m93 is not None:
                    out[name] = mesh_groups(m93)
    return out


# ---------------------------------------------------------------------------
# HloProto (profile) analysis


def proto_all_gathers(parsed, mesh, mesh_groups):
    comp_by_id = {c["id"]: c for c in parsed["computations"]}
    entry = next(c for c in parsed["computations"] if c["name"] == parsed["entry_computation_name"])
    by_id = {i["id"]: i for i in entry["instructions"]}

    def is_move(i):
        if i["opcode"] in MOVE_OPS:
            return True
        if i["opcode"] == "fusion":
            fcs = [comp_by_id.get(c) for c in i["called_computation_ids"]]
            return bool(fcs) and all(fc and all(x["opcode"] in MOVE_OPS | {"parameter"} for x in fc["instructions"])
                                     for fc in fcs)
        return False

    allins = [x for c in parsed["computations"] for x in c["instructions"]]
    rows = []
    for i in entry["instructions"]:
        if i["opcode"] not in ("all-gather", "all-gather-start"):
            continue
        chain = []
        p = by_id.get(i["operand_ids"][0]) if i["operand_ids"] else None
        while p is not None and is_move(p):
            chain.append(p["name"])
            p = by_id.get(p["operand_ids"][0]) if p["operand_ids"] else None
        groups = mesh_groups[i["name"]][0] if i["name"] in mesh_groups else M.X.effective_replica_groups(i)
        rows.append({"name": i["name"], "shape": M.X.shape_str(i["shape"]), "op_name": i["op_name"],
                     "dimensions": i["dimensions"],
                     "operand": by_id[i["operand_ids"][0]]["name"] if i["operand_ids"] and i["operand_ids"][0] in by_id else None,
                     "looked_through": chain,
                     "producer": p["name"] if p else None, "producer_opcode": p["opcode"] if p else None,
                     "producer_op_name": p["op_name"] if p else None,
                     "producer_op_name_has_sharding_constraint": bool(p) and "sharding_constraint" in p["op_name"],
                     "replica_groups_proto": groups,
                     "replica_groups_xspace_py": M.X.effective_replica_groups(i),
                     "mesh_axis": mesh_axis_of(groups, mesh) if groups else None})
    return rows, {
        "instructions_with_sharding_constraint_in_op_name": sum(1 for x in allins if "sharding_constraint" in x["op_name"]),
        "custom_call_targets": M.X.counter(x["custom_call_target"] for x in allins if x["opcode"] == "custom-call"),
    }


# ---------------------------------------------------------------------------


def main():
    a = M.parse_args(default_steps=5, extra=lambda ap: ap.add_argument("--baseline", action="store_true"))
    tp = M.TP
    L, B, D, F = tp["layers"], tp["B"], tp["D"], tp["F"]
    mesh = M.make_mesh(tp["mesh_shape"], tp["axes"])
    spec = BASE_SPEC if a.baseline else FAULT_SPEC
    train_step, shard, xs = build(mesh, L, layer_fn(mesh, spec))
    rng = np.random.default_rng(0)
    ps = jax.device_put(M.init_tp_mlp(L, D, F), shard)
    example = jax.device_put(M.init_tp_mlp(L, D, F), shard)
    data = {i: (jax.device_put(rng.standard_normal((B, D)).astype(np.float32), xs),
                jax.device_put(rng.standard_normal((B, D)).astype(np.float32), xs)) for i in range(-3, a.steps)}
    state = {"params": ps}

    def step(i):
        p, loss = train_step(state["params"], *data[i])
        state["params"] = p
        return loss

    name = "replicated_activations_baseline" if a.baseline else "replicated_activations"
    ex_args = (example, *data[0])

    def evidence(space, dec, gt):
        ev = S.collective_evidence(dec, gt)
        with open(os.path.join(a.out, "hlo", "train_step.optimized.hlo.txt")) as fh:
            text = fh.read()
        ag_text, hlo_extra = text_all_gathers(text, mesh)
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        mg = proto_mesh_replica_groups(M.X.hlo_modules(space)[dec["main_hlo_module"]]["blob"])
        ag_proto, proto_extra = proto_all_gathers(parsed, mesh, mg)
        # xspace.py / hlo_text.py do not read the mesh's iota device list
        # (`device_ids=([4,2]T(1,0))`): correct those groups in place and say so.
        fixes = []
        for c in ev["collectives_hloproto"]:
            if c["name"] in mg and mg[c["name"]][0] != c["replica_groups_proto"]:
                fixes.append({"name": c["name"], "xspace_py": c["replica_groups_proto"], "correct": mg[c["name"]][0],
                              "mesh": mg[c["name"]][1]})
                c["replica_groups_proto"] = mg[c["name"]][0]
        for c in gt["optimized_hlo"]["train_step"]["collectives"]:
            if c["opcode"] == "all-gather" or c["replica_groups"] is None:
                ins_attrs = next((ln for ln in text.splitlines() if re.match(r"\s+(ROOT\s+)?%" + re.escape(c["name"]) + r" = ", ln)), "")
                rg_text, groups = expand_groups_text(ins_attrs)
                if groups != c["replica_groups"]:
                    fixes.append({"name": c["name"], "hlo_text_py": c["replica_groups"], "correct": groups, "text": rg_text})
                    c["replica_groups_text"], c["replica_groups"] = rg_text, groups
        tp_ = {r["name"]: r for r in ag_proto}
        for r in ag_text:
            pr = tp_.get(r["name"])
            r["proto_producer"] = pr["producer"] if pr else None
            r["proto_producer_op_name"] = pr["producer_op_name"] if pr else None
            r["proto_replica_groups_equal_text"] = (pr is not None and pr["replica_groups_proto"] is not None
                                                    and sorted(map(sorted, pr["replica_groups_proto"])) == sorted(map(sorted, r["replica_groups"])))
        out = {
            "all_gather_count_text": len(ag_text),
            "all_gather_count_hloproto": len(ag_proto),
            "all_gathers": ag_text,
            "all_gathers_hloproto": ag_proto,
            "all_gather_by_phase": M.X.counter(r["phase"] for r in ag_text),
            "all_gather_by_producer_kind": M.X.counter(r["producer_kind"] for r in ag_text),
            "all_gather_by_mesh_axis": M.X.counter(r["mesh_axis"] for r in ag_text),
            "all_gather_distinct_producers": len({r["producer"] for r in ag_text}),
            "all_gathers_with_sharding_constraint_on_producer_op_name": sum(r["producer_op_name_has_sharding_constraint"] for r in ag_text),
            "all_gathers_with_sharding_constraint_upstream": sum(1 for r in ag_text if r["sharding_constraint_upstream"]),
            "replica_group_decoder_fixes": fixes,
            "optimized_hlo_text": hlo_extra,
            "hloproto": proto_extra,
            "lowered": lowered_constraints(train_step, ex_args),
            "collective_counts_text": gt["optimized_hlo"]["train_step"]["collective_counts"],
        }
        out.update(ev)
        # The other variant, compiled ahead-of-time (not run), for the fault-vs-baseline delta.
        other_spec = FAULT_SPEC if a.baseline else BASE_SPEC
        other_j, _, _ = build(mesh, L, layer_fn(mesh, other_spec))
        _, orows, _, osumm = compile_summary(other_j, ex_args, mesh)
        out["other_variant_aot"] = {
            "hidden_spec": str(other_spec), "all_gather_count": len(orows),
            "collective_counts": osumm["collective_counts"],
            "all_gather_delta_this_minus_other": len(ag_text) - len(orows)}
        if not a.baseline:
            vt = {}
            for vname, (desc, fn) in variant_fns(mesh).items():
                j, _, _ = build(mesh, L, fn)
                _, vrows, _, vsumm = compile_summary(j, ex_args, mesh)
                vt[vname] = {"description": desc, "collective_counts": vsumm["collective_counts"],
                             "all_gathers": [{"name": r["name"], "shape": r["shape"], "phase": r["phase"],
                                              "producer": r["producer"], "producer_kind": r["producer_kind"],
                                              "mesh_axis": r["mesh_axis"]} for r in vrows]}
            out["variants_tried_aot"] = vt
        return out

    prog = (f"8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8), Mesh(4x2, ('data','model')). "
            f"{L}-layer tensor-parallel MLP x = x + relu(h) @ W2, h = x @ W1 (B={B}, D={D}, F={F}), MSE loss, "
            f"jit (GSPMD, no shard_map) SGD step with in/out_shardings and donate_argnums=(0,). W1 P(None,'model'), "
            f"W2 P('model',None), x/y P('data',None). The hidden activation h of every layer is "
            f"with_sharding_constraint'ed to {'P(data, model) (correct tensor-parallel spec)' if a.baseline else 'PartitionSpec(None) (fully replicated): the FAULT'}"
            f"; the constraint's transpose applies the same spec to h's cotangent in the backward. "
            f"3 warm-up steps, {a.steps} traced steps.")
    if a.baseline:
        evidence_txt = {
            "hlo": "no all-gather at all: the tensor-parallel layer needs only one all-reduce over 'model' ({{0,1},{2,3},{4,5},{6,7}}) per layer in the forward and one per layer in the backward (except the first layer's input gradient, which is not needed: 5 such all-reduces), plus one combined tuple all-reduce of the weight gradients and the loss over 'data' ({{0,2,4,6},{1,3,5,7}}). Dots work on per-device shards: h is f32[16,256] per device",
            "constraint": "the 6 with_sharding_constraint ops (3 forward, 3 on the cotangents) exist only before optimization (sdy.sharding_constraint / custom-call 'Sharding'); the optimized HLO and the profile's HloProto keep no instruction with 'sharding_constraint' in op_name and no Sharding custom-call",
        }
    else:
        evidence_txt = {
            "replicated_activations": "optimized HLO (and the HloProto in /host:metadata) has 12 all-gathers; the baseline has 0 (observed.other_variant_aot). GSPMD does NOT all-gather h itself in the forward: it satisfies the replicated constraint by all-gathering the dot's operands and computing the full h f32[64,512] redundantly on every device (ynn_fusion f32[64,512] vs f32[16,256] per device in the baseline), then dynamic-slices it back to the [16,256] shard (partition-id driven *dynamic-slice* fusions after the relu). Forward, per layer: all-gather of the layer input x over 'data' (dimensions={0}, f32[64,256]; producer: entry parameter 'x' for layer 0, the residual-add fusions wrapped_add / wrapped_add.1 for layers 1 and 2: three DIFFERENT activations) and all-gather of W1 over 'model' (dimensions={1}, f32[256,512]; operand wrapped_copy.N = a layout copy of the W1 parameter). Backward, per layer: the cotangent of h (a different tensor per layer, produced by the ynn dot fusion computing dh) is gathered in two stages: over 'model' (f32[16,512], dims={1}, operand wrapped_copy.N of the dot output) and then over 'data' (f32[64,512], dims={0}, operand a layout copy of the first stage's result). Op names: forward gathers 'jit(train_step)/jvp()/dot_general', backward 'jit(train_step)/transpose(jvp())/select_n'",
            "constraint": "no instruction of the optimized HLO or the profile's HloProto has 'sharding_constraint' in its op_name and no custom-call Sharding / SPMDFullToShardShape survives: the 6 constraints (3 forward + 3 on cotangents, visible in the StableHLO as sdy.sharding_constraint <@mesh, [{}, {}]>) are consumed by the SPMD partitioner. A detector cannot key on the constraint; it has to see all-gathers of activations (not of entry parameters) and replicated, oversized per-device compute",
            "thunks": "per step 12 all-gather thunk events on each of the 8 device_ordinals (96 per step) plus 'Rendezvous' waits; event names are all-gather.N (the HLO names; resolve the opcode via the HloProto)",
        }
    M.capture(
        name, step, out_dir=a.out, n_steps=a.steps, warmup=3, program=prog,
        injected_fault=None if a.baseline else FAULT,
        expected_faults=[] if a.baseline else [FAULT],
        baseline=None if a.baseline else "replicated_activations_baseline",
        evidence=evidence_txt,
        extra_gt={"collectives": {"mesh": S.mesh_info(mesh), "num_devices": 8, "layers": L,
                                  "weight_sharding": "W1 [D,F] P(None,'model'), W2 [F,D] P('model',None)",
                                  "input_sharding": "P('data', None)",
                                  "hidden_activation_constraint": str(spec)},
                  "extra_event_regexes": ["all_gather=^(all-gather|all_gather)",
                                          "all_reduce=^(all-reduce|psum)",
                                          "reduce_scatter=^(reduce-scatter|reduce_scatter)"]},
        hlo_fns=lambda: {"train_step": (train_step, ex_args)},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
