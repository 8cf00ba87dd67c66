"""Summaries of optimized HLO *text* (`compiled.as_text()`), for ground truth.

Independent of the HloProto decoding in xspace.py on purpose: ground truth comes from XLA's
text printer, evidence from the profile's HloProto; the two are cross-checked.
"""
from __future__ import annotations

import re

import numpy as np

INTERESTING = ["transpose", "copy", "convert", "dot", "fusion", "all-reduce", "all-gather",
               "reduce-scatter", "all-to-all", "collective-permute", "custom-call", "tanh",
               "exponential", "while", "conditional", "bitcast", "opt-barrier",
               "dynamic-slice", "dynamic-update-slice", "all-reduce-start", "all-reduce-done",
               "all-gather-start", "all-gather-done", "collective-permute-start",
               "collective-permute-done", "reduce", "pad", "slice", "concatenate"]
COLLECTIVES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "all-reduce-start", "all-gather-start", "collective-permute-start",
               "collective-broadcast", "ragged-all-to-all"}
NO_THUNK = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
DATA_MOVEMENT = {"parameter", "copy", "transpose", "bitcast", "reshape"}

_COMP_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*)?\{\s*$")
_INS_HEAD_RE = re.compile(r"^\s+(ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def _skip_shape(s, i):
    """Index just past the shape that starts at s[i]."""
    if s[i] == "(":
        depth = 0
        while i < len(s):
            if s[i] == "(":
                depth += 1
            elif s[i] == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i
    j = i
    depth = 0
    while j < len(s):
        c = s[j]
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == " " and depth == 0:
            break
        j += 1
    return j


def parse_instruction(line):
    m = _INS_HEAD_RE.match(line)
    if not m:
        return None
    name = m.group(2)
    rest = line[m.end():]
    j = _skip_shape(rest, 0)
    shape = rest[:j]
    tail = rest[j:].lstrip()
    om = re.match(r"([a-z][a-z0-9\-]*)\(", tail)
    if not om:
        return None
    opcode = om.group(1)
    # operands: balanced parens after opcode
    k = om.end() - 1
    depth = 0
    e = k
    while e < len(tail):
        if tail[e] == "(":
            depth += 1
        elif tail[e] == ")":
            depth -= 1
            if depth == 0:
                break
        e += 1
    operands = tail[k + 1:e]
    attrs = tail[e + 1:]
    return {"name": name, "opcode": opcode, "shape": shape, "root": bool(m.group(1)),
            "operands": operands, "attrs": attrs}


def parse_module(text):
    lines = text.splitlines()
    header = lines[0] if lines else ""
    comps = []
    cur = None
    for ln in lines[1:]:
        if cur is None:
            m = _COMP_RE.match(ln)
            if m and not ln.startswith(" "):
                cur = {"name": m.group(2), "entry": bool(m.group(1)), "instructions": []}
            continue
        if ln.startswith("}"):
            comps.append(cur)
            cur = None
            continue
        ins = parse_instruction(ln)
        if ins:
            cur["instructions"].append(ins)
    return header, comps


def _attr(attrs, key):
    m = re.search(r"(?:^|[ ,])" + re.escape(key) + r"=", attrs)
    if not m:
        return None
    i = m.end()
    if i < len(attrs) and attrs[i] in "{[":
        # balanced braces; iota form "[2,4]<=[4,2]T(1,0)" handled by caller
        open_c = attrs[i]
        close_c = "}" if open_c == "{" else "]"
        depth = 0
        j = i
        while j < len(attrs):
            if attrs[j] == open_c:
                depth += 1
            elif attrs[j] == close_c:
                depth -= 1
                if depth == 0:
                    break
            j += 1
        val = attrs[i:j + 1]
        if open_c == "[":  # iota replica groups
            m2 = re.match(r"\[[0-9,]*\]<=\[[0-9,]*\](T\([0-9,]*\))?", attrs[i:])
            if m2:
                val = m2.group(0)
        return val
    m2 = re.match(r'"([^"]*)"|([^,\s]+)', attrs[i:])
    return m2.group(1) if m2.group(1) is not None else m2.group(2)


def expand_replica_groups(val):
    """'{{0,1},{2,3}}', '[2,4]<=[4,2]T(1,0)' or "mesh['axis_0'=4,'axis_1'=2] {'axis_1'}"
    -> list of lists of device ids."""
    if val is None:
        return None
    val = val.strip()
    if val.startswith("mesh["):
        return expand_mesh_axes(val)
    if val.startswith("{"):
        inner = val[1:-1].strip()
        if not inner:
            return []
        return [[int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([^{}]*)\}", inner)]
    m = re.match(r"\[([0-9,]*)\]<=\[([0-9,]*)\](?:T\(([0-9,]*)\))?", val)
    if not m:
        return None
    out_dims = [int(x) for x in m.group(1).split(",") if x]
    rdims = [int(x) for x in m.group(2).split(",") if x]
    perm = [int(x) for x in m.group(3).split(",")] if m.group(3) else None
    a = np.arange(int(np.prod(rdims))).reshape(rdims)
    if perm:
        a = a.transpose(perm)
    return a.reshape(out_dims).tolist()


def expand_mesh_axes(val):
    """Mesh-axes replica groups: devices iota-laid-out over the named mesh; one group per
    combination of the *unselected* axes, ordered along the selected axes."""
    m = re.match(r"mesh\[([^\]]*)\](?:\s*,\s*device_ids=\(\[([\d,]*)\](?:T\(([\d,]*)\))?\))?\s*\{([^}]*)\}", val)
    if not m:
        return None
    axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))
    names = [a for a, _ in axes]
    sizes = [int(n) for _, n in axes]
    sel = re.findall(r"'([^']+)'", m.group(4))
    if any(x not in names for x in sel) or ":" in m.group(4):
        return None  # sub-axis syntax not handled
    ids = np.arange(int(np.prod(sizes)))
    if m.group(2):
        # `device_ids=([4,2]T(1,0))`: the mesh's devices in a transposed iota order.
        dims = [int(d) for d in m.group(2).split(",")]
        perm = [int(p) for p in m.group(3).split(",")] if m.group(3) else list(range(len(dims)))
        ids = ids.reshape(dims).transpose(perm).reshape(-1)
    a = ids.reshape(sizes)
    rest = [i for i, n in enumerate(names) if n not in sel]
    chosen = [names.index(x) for x in sel]
    a = a.transpose(rest + chosen)
    per = int(np.prod([sizes[i] for i in chosen])) if chosen else 1
    return a.reshape(-1, per).tolist()


def parse_pairs(val):
    if val is None:
        return None
    return [[int(a), int(b)] for a, b in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", val)]


def parse_alias(header):
    m = re.search(r"input_output_alias=\{", header)
    if not m:
        return []
    i = m.end() - 1
    depth = 0
    j = i
    while j < len(header):
        if header[j] == "{":
            depth += 1
        elif header[j] == "}":
            depth -= 1
            if depth == 0:
                break
        j += 1
    body = header[i + 1:j]
    out = []
    for om, pn, pi, kind in re.findall(r"\{([0-9,\s]*)\}:\s*\((\d+),\s*\{([0-9,\s]*)\},\s*([\w\-]+)\)", body):
        out.append({"output_index": [int(x) for x in om.split(",") if x.strip()],
                    "parameter_number": int(pn),
                    "parameter_index": [int(x) for x in pi.split(",") if x.strip()],
                    "kind": kind})
    return out


def summarize(text):
    header, comps = parse_module(text)
    mname = re.match(r"HloModule\s+([\w.\-]+)", header)
    entry = next((c for c in comps if c["entry"]), None)
    by_name = {c["name"]: c for c in comps}
    total, ent, nested = {}, {}, {}
    for c in comps:
        for ins in c["instructions"]:
            total[ins["opcode"]] = total.get(ins["opcode"], 0) + 1
            tgt = ent if c["entry"] else nested
            tgt[ins["opcode"]] = tgt.get(ins["opcode"], 0) + 1
    entry_ins = entry["instructions"] if entry else []
    fusion_kinds = {}
    custom_targets = {}
    data_fmt = []
    collectives = []
    for c in comps:
        for ins in c["instructions"]:
            if ins["opcode"] == "custom-call":
                t = _attr(ins["attrs"], "custom_call_target")
                custom_targets[t] = custom_targets.get(t, 0) + 1
            if ins["opcode"] in COLLECTIVES:
                mm = re.search(r"replica_groups=(mesh\[[^\]]*\](?:\s*,\s*device_ids=\([^)]*\)?\))?\s*\{[^}]*\})", ins["attrs"])
                rg = mm.group(1) if mm else _attr(ins["attrs"], "replica_groups")
                collectives.append({
                    "name": ins["name"], "opcode": ins["opcode"], "computation": c["name"],
                    "in_entry": c["entry"], "shape": ins["shape"],
                    "channel_id": _attr(ins["attrs"], "channel_id"),
                    "replica_groups_text": rg,
                    "replica_groups": expand_replica_groups(rg),
                    "source_target_pairs": parse_pairs(_attr(ins["attrs"], "source_target_pairs")),
                    "dimensions": _attr(ins["attrs"], "dimensions"),
                    "use_global_device_ids": "use_global_device_ids=true" in ins["attrs"],
                    "op_name": (re.search(r'op_name="([^"]*)"', ins["attrs"]) or [None, None])[1],
                })
    for ins in entry_ins:
        if ins["opcode"] == "fusion":
            k = _attr(ins["attrs"], "kind") or "?"
            fusion_kinds[k] = fusion_kinds.get(k, 0) + 1
            called = _attr(ins["attrs"], "calls")
            fc = by_name.get((called or "").lstrip("%"))
            if fc and all(x["opcode"] in DATA_MOVEMENT for x in fc["instructions"]) and any(
                    x["opcode"] in ("copy", "transpose") for x in fc["instructions"]):
                data_fmt.append(ins["name"])
        elif ins["opcode"] in ("copy", "transpose"):
            data_fmt.append(ins["name"])
    num_partitions = 1
    m = re.search(r"num_partitions=(\d+)", header)
    if m:
        num_partitions = int(m.group(1))
    aliases = parse_alias(header)
    return {
        "hlo_module_name": mname.group(1) if mname else None,
        "module_header": header[:2000],
        "has_input_output_alias": bool(aliases),
        "input_output_alias": aliases,
        "num_partitions": num_partitions,
        "entry_computation": entry["name"] if entry else None,
        "num_computations": len(comps),
        "num_instructions_total": sum(len(c["instructions"]) for c in comps),
        "num_instructions_entry": len(entry_ins),
        "opcode_counts_total": dict(sorted(total.items())),
        "opcode_counts_entry": dict(sorted(ent.items())),
        "opcode_counts_nested": dict(sorted(nested.items())),
        "interesting_total": {k: total.get(k, 0) for k in INTERESTING},
        "interesting_entry": {k: ent.get(k, 0) for k in INTERESTING},
        "entry_fusion_kinds": fusion_kinds,
        "entry_data_formatting_ops": data_fmt,
        "entry_data_formatting_count": len(data_fmt),
        "custom_call_targets": custom_targets,
        "collectives": collectives,
        "collective_counts": _count(x["opcode"] for x in collectives),
        "collective_counts_entry": _count(x["opcode"] for x in collectives if x["in_entry"]),
        "entry_instructions": [{"name": i["name"], "opcode": i["opcode"], "shape": i["shape"]}
                               for i in entry_ins],
        "thunk_producing_entry_instructions": [i["name"] for i in entry_ins
                                               if i["opcode"] not in NO_THUNK],
        "num_thunk_producing_entry_instructions": sum(1 for i in entry_ins
                                                      if i["opcode"] not in NO_THUNK),
    }


def _count(it):
    d = {}
    for x in it:
        d[x] = d.get(x, 0) + 1
    return d


def fused_computations(text):
    """{fusion instruction name (entry): list of (opcode, shape) inside its computation}"""
    header, comps = parse_module(text)
    by_name = {c["name"]: c for c in comps}
    entry = next((c for c in comps if c["entry"]), None)
    out = {}
    for ins in (entry["instructions"] if entry else []):
        if ins["opcode"] == "fusion":
            fc = by_name.get((_attr(ins["attrs"], "calls") or "").lstrip("%"))
            if fc:
                out[ins["name"]] = [(x["opcode"], x["shape"]) for x in fc["instructions"]]
    return out
