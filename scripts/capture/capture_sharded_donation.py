"""sharded_donation (clean): 8 virtual CPU devices, Mesh(4x2, ('data','model')), FSDP-style
train step: weights sharded over 'data' and all-gathered per layer, gradients
reduce-scattered over 'data' and all-reduced over 'model' (batch is split over both axes),
jit with donate_argnums=(0,) so the HLO has input/output aliasing. A parameter-norm metric
computed outside the shard_map is partitioned by GSPMD and yields an all-reduce whose replica
groups are printed in the mesh-axes form. No injected fault: for testing HLO alias and
replica-group decoding."""
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models as M  # noqa: E402
from models import jax, jnp, np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402
import sharded_common as S  # noqa: E402


def main():
    a = M.parse_args(default_steps=5)
    tp = M.TP
    L, B, D, F = tp["layers"], tp["B"], tp["D"], tp["F"]
    mesh = M.make_mesh(tp["mesh_shape"], tp["axes"])
    rng = np.random.default_rng(0)
    pspec = [{"w1": P("data", None), "w2": P("data", None)}] * L
    xspec = P(("data", "model"), None)

    def local_loss(ps, x, y):
        for p in ps:
            w1 = jax.lax.all_gather(p["w1"], "data", axis=0, tiled=True)
            w2 = jax.lax.all_gather(p["w2"], "data", axis=0, tiled=True)
            x = x + jax.nn.relu(x @ w1) @ w2
        return jax.lax.pmean(jnp.mean((x - y) ** 2), ("data", "model"))

    def inner(ps, x, y):
        loss, g = jax.value_and_grad(local_loss)(ps, x, y)
        return M.sgd(ps, g, 1e-3), loss

    def train_step(ps, x, y):
        new, loss = jax.shard_map(inner, mesh=mesh, in_specs=(pspec, xspec, xspec),
                                  out_specs=(pspec, P()))(ps, x, y)
        pnorm = jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree_util.tree_leaves(new)))
        return new, loss, pnorm

    train_step = jax.jit(train_step, donate_argnums=(0,))
    shard = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), pspec)
    ps = jax.device_put(M.init_tp_mlp(L, D, F), shard)
    example = jax.device_put(M.init_tp_mlp(L, D, F), shard)
    xs = NamedSharding(mesh, xspec)
    data = {i: (jax.device_put(rng.standard_normal((B, D)).astype(np.float32), xs),
                jax.device_put(rng.standard_normal((B, D)).astype(np.float32), xs)) for i in range(-3, a.steps)}
    state = {"params": ps}

    def step(i):
        p, loss, pnorm = train_step(state["params"], *data[i])
        state["params"] = p
        return pnorm, loss

    def evidence(space, dec, gt):
        ev = S.collective_evidence(dec, gt)
        parsed = M.decode_summary.last_parsed[dec["main_hlo_module"]]
        ev["hloproto_input_output_alias"] = parsed["input_output_alias"]
        ev["hloproto_param_allocations_aliased_with_output"] = sum(
            1 for x in parsed["buffer_allocations"] if x["is_parameter_aliased_with_output"])
        ev["replica_group_patterns"] = M.X.counter(
            f"{c['opcode']} {c['replica_groups_proto']} [{c['proto_encoding']}]" for c in ev["collectives_hloproto"])
        return ev

    M.capture(
        "sharded_donation", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(f"8 CPU devices, Mesh(4x2, ('data','model')). FSDP-style {L}-layer MLP x + relu(x@W1)@W2 "
                 f"(B={B}, D={D}, F={F}): W1/W2 sharded P('data', None) and all_gather'ed over 'data' in each layer "
                 f"(shard_map), batch sharded P(('data','model'), None); autodiff turns the gathers into "
                 f"psum_scatter over 'data' and adds a psum over 'model'; loss pmean over both axes; plus a GSPMD "
                 f"parameter-norm metric outside the shard_map. jit with donate_argnums=(0,). "
                 f"3 warm-up steps, {a.steps} traced steps."),
        injected_fault=None, expected_faults=[],
        evidence={
            "alias": "HLO module header input_output_alias={ {0}: (0, {}, may-alias) ... {5}: (5, {}, may-alias) } (6 donated weight shards; output tuple index i aliases parameter i); HloProto.hlo_module.input_output_alias has 6 entries (kind MAY_ALIAS=1) and 6 BufferAllocations have is_parameter_aliased_with_output",
            "collectives": "6 all-gather (replica_groups {{0,2,4,6},{1,3,5,7}}: mesh axis 'data'), 6 reduce-scatter (same groups), 1 all-reduce over all 8 devices {{0..7}} (loss pmean), 1 tuple all-reduce over 'model' {{0,1},{2,3},{4,5},{6,7}} (grad psum), 1 GSPMD all-reduce for the norm printed as replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'} in the HLO text (= {{0,2,4,6},{1,3,5,7}}); see observed.collectives_hloproto for how each is encoded in the HloProto",
            "thunks": "per step collective thunk events on device_ordinals 0..7, names all_gather.N / reduce_scatter.N / psum_invariant.N / all-reduce.N (resolve opcodes via the HloProto)",
        },
        extra_gt={"collectives": {"mesh": S.mesh_info(mesh), "num_devices": 8, "layers": L,
                                  "weight_sharding": "P('data', None)", "batch_sharding": "P(('data','model'), None)"},
                  "extra_event_regexes": ["all_gather=^(all-gather|all_gather)",
                                          "all_reduce=^(all-reduce|psum)",
                                          "reduce_scatter=^(reduce-scatter|reduce_scatter)"]},
        hlo_fns=lambda: {"train_step": (train_step, (example, *data[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
