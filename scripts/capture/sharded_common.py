"""Helpers shared by the 8-virtual-device scenarios (import after XLA_FLAGS is set)."""
import models as M
from models import jax, np
import xspace as X

COLLECTIVE_OPCODES = {"all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute",
                      "all-gather-start", "all-reduce-start", "collective-permute-start"}


def collective_evidence(dec, gt, fn="train_step"):
    """Collectives as seen in the profile: HloProto replica groups (decoded from whichever
    encoding the proto uses) + per-step thunk events per device_ordinal."""
    parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
    text_coll = {c["name"]: c for c in gt["optimized_hlo"][fn]["collectives"]}
    proto = []
    for c in parsed["computations"]:
        for i in c["instructions"]:
            if i["opcode"] in COLLECTIVE_OPCODES:
                enc = ("replica_groups" if i["replica_groups"] else
                       "iota_collective_device_list" if i["iota_replica_groups"] else
                       "collective_device_list" if i["collective_device_list"] else
                       "mesh_axes_replica_group_list(93)" if i.get("mesh_axes_raw") else "none")
                groups = X.effective_replica_groups(i)
                t = text_coll.get(i["name"], {})
                proto.append({"name": i["name"], "opcode": i["opcode"], "shape": X.shape_str(i["shape"]),
                              "channel_id": i["channel_id"], "proto_encoding": enc,
                              "replica_groups_proto": groups,
                              "replica_groups_text": t.get("replica_groups_text"),
                              "replica_groups_text_expanded": t.get("replica_groups"),
                              "source_target_pairs": i["source_target_pairs"] or None,
                              "mesh_axes_proto": i.get("mesh_axes_raw"),
                              "op_name": i["op_name"]})
    evs = M.decode_summary.last_events
    coll_names = {p["name"]: p["opcode"] for p in proto}
    rows = []
    for st in sorted((e for e in evs if e.name == "train"), key=lambda e: e.stats["step_num"]):
        th = [e for e in evs if "hlo_op" in e.stats and st.start_ps <= e.start_ps < st.end_ps
              and e.stats["hlo_op"] in coll_names]
        rows.append({"step_num": st.stats["step_num"],
                     "collective_thunks": len(th),
                     "by_opcode": X.counter(coll_names[e.stats["hlo_op"]] for e in th),
                     "device_ordinals": sorted({e.stats.get("device_ordinal") for e in th}),
                     "total_ms": round(sum(e.dur_ps for e in th) / 1e9, 3)})
    rdv = X.counter(e.name.split(":")[0] if e.name.startswith("Wait:") else e.name for e in evs
                    if "Rendezvous" in e.name or e.name.startswith("Wait for rendezvous") or e.name.startswith("Wait: pending_threads"))
    return {"collectives_hloproto": proto, "per_step_collective_thunks": rows, "rendezvous_events": rdv}


def mesh_info(mesh):
    return {"shape": list(mesh.devices.shape), "axes": list(mesh.axis_names),
            "device_ids": [d.id for d in mesh.devices.flat],
            "device_id_grid": [[d.id for d in row] for row in mesh.devices]}
