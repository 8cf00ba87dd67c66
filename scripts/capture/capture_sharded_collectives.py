"""sharded_collectives: 8 virtual CPU devices, Mesh(4x2, ('data','model')), the corpus
baseline's 3-layer MLP (B=64, D=256, F=512) but with a BAD sharding:
  * the weights are sharded along 'data' (the outer, slow mesh axis: device groups
    {0,2,4,6},{1,3,5,7}) instead of tensor-parallel along 'model' ({0,1},{2,3},...);
  * activations are replicated over 'model' (that axis does no work);
  * every layer all-gathers both weights in the forward AND all-gathers them again in the
    backward (a custom_vjp that keeps only the shards as residuals and re-gathers the
    transposed shard), so the same parameter is all-gathered twice per step.
"""
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models as M  # noqa: E402
from models import jax, jnp, np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402
import sharded_common as S  # noqa: E402

FAULTS = ["allgather_duplication", "wrong_mesh_mapping"]
AX = "data"   # the wrong axis for tensor-parallel weights


def ag(w, axis):
    return jax.lax.all_gather(w, AX, axis=axis, tiled=True)


@jax.custom_vjp
def layer(w1, w2, x):
    return x + jax.nn.relu(x @ ag(w1, 0)) @ ag(w2, 0)


def layer_fwd(w1, w2, x):
    a = x @ ag(w1, 0)                                   # all-gather W1 (forward)
    return x + jax.nn.relu(a) @ ag(w2, 0), (w1, w2, x, a)   # all-gather W2 (forward)


def layer_bwd(res, g):
    w1, w2, x, a = res
    w2t = ag(w2.T, 1)       # all-gather W2 AGAIN (backward, transposed shard)
    w1t = ag(w1.T, 1)       # all-gather W1 AGAIN (backward, transposed shard)
    h = jax.nn.relu(a)
    dw2 = jax.lax.psum_scatter(h.T @ g, AX, scatter_dimension=0, tiled=True)
    da = (g @ w2t) * (a > 0)
    dw1 = jax.lax.psum_scatter(x.T @ da, AX, scatter_dimension=0, tiled=True)
    return dw1, dw2, g + da @ w1t


layer.defvjp(layer_fwd, layer_bwd)


def main():
    a = M.parse_args(default_steps=5)
    tp = M.TP
    L, B, D, F = tp["layers"], tp["B"], tp["D"], tp["F"]
    mesh = M.make_mesh(tp["mesh_shape"], tp["axes"])
    rng = np.random.default_rng(0)
    params = {"b_in": jnp.zeros((D,), jnp.float32), "layers": M.init_tp_mlp(L, D, F)}
    pspec = {"b_in": P(), "layers": [{"w1": P(AX, None), "w2": P(AX, None)}] * L}
    xspec = P(AX, None)     # batch over 'data' only: replicated over 'model'

    def local_loss(ps, x, y):
        x = x + ps["b_in"]
        for p in ps["layers"]:
            x = layer(p["w1"], p["w2"], x)
        return jax.lax.pmean(jnp.mean((x - y) ** 2), AX)

    def inner(ps, x, y):
        loss, g = jax.value_and_grad(local_loss)(ps, x, y)
        g = {"b_in": jax.lax.pmean(g["b_in"], AX), "layers": g["layers"]}
        return M.sgd(ps, g, 1e-3), loss

    def train_step(ps, x, y):
        return jax.shard_map(inner, mesh=mesh, in_specs=(pspec, xspec, xspec),
                             out_specs=(pspec, P()), check_vma=False)(ps, x, y)

    train_step = jax.jit(train_step, donate_argnums=(0,))
    shard = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), pspec)
    ps = jax.device_put(params, shard)
    example = jax.device_put({"b_in": jnp.zeros((D,), jnp.float32), "layers": M.init_tp_mlp(L, D, F)}, shard)
    xs = NamedSharding(mesh, xspec)
    data = {i: (jax.device_put(rng.standard_normal((B, D)).astype(np.float32), xs),
                jax.device_put(rng.standard_normal((B, D)).astype(np.float32), xs)) for i in range(-3, a.steps)}
    state = {"params": ps}

    def step(i):
        p, loss = train_step(state["params"], *data[i])
        state["params"] = p
        return loss

    def evidence(space, dec, gt):
        ev = S.collective_evidence(dec, gt)
        ag_ = [c for c in ev["collectives_hloproto"] if c["opcode"] == "all-gather"]
        ev["all_gather_count_hloproto"] = len(ag_)
        ev["all_gather_by_phase"] = M.X.counter(
            "backward" if "transpose(" in c["op_name"] else "forward" for c in ag_)
        ev["all_gather_replica_groups"] = sorted({str(c["replica_groups_proto"]) for c in ag_})
        return ev

    M.capture(
        "sharded_collectives", step, out_dir=a.out, n_steps=a.steps, warmup=3,
        program=(f"8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8), Mesh(4x2, ('data','model')). "
                 f"{L}-layer MLP x + relu(x@W1)@W2 (B={B}, D={D}, F={F}) + replicated input bias, jit SGD step with "
                 f"donate_argnums=(0,), body in shard_map(check_vma=False). BAD sharding: W1/W2 sharded along 'data' "
                 f"(rows, P('data', None)) instead of tensor-parallel along 'model'; activations P('data', None), i.e. "
                 f"replicated over 'model'; each layer is a custom_vjp that all_gathers W1 and W2 over 'data' in the "
                 f"forward and all_gathers the transposed shards AGAIN in the backward; grads psum_scatter over 'data'. "
                 f"3 warm-up steps, {a.steps} traced steps. Compare with corpus 'sharded_collectives_baseline'."),
        injected_fault="allgather_duplication", expected_faults=FAULTS,
        baseline="corpus:sharded_collectives_baseline",
        evidence={
            "allgather_duplication": "optimized HLO (and the HloProto in /host:metadata) has 12 all-gathers = 4 per layer. Forward (op_name '.../shard_map/jvp()/all_gather', dimensions={0}): all_gather.N = all-gather(copy.K) where copy.K = copy(param) is a weight shard f32[64,512] (W1) or f32[128,256] (W2). Backward (op_name '.../shard_map/transpose(jvp())/all_gather', dimensions={1}, result layout {0,1}): all-gather(bitcast.M) with bitcast.M = bitcast(copy.K) of the SAME copy.K. So each of the 6 weight shards reaches two all-gathers per step (look through bitcast/copy to the entry parameter). Per step 12 all-gather thunk events on each of the 8 device_ordinals (96 per step), plus 6 reduce-scatter (48) and 2 all-reduce (16)",
            "wrong_mesh_mapping": "ALL all-gathers / reduce-scatters use replica_groups {{0,2,4,6},{1,3,5,7}}: groups run over mesh axis 'data' (outer axis, stride-2 device ids, the slow axis), while the tensor-parallel collectives of the baseline use 'model' groups {{0,1},{2,3},{4,5},{6,7}}; the 'model' axis carries no collective at all (activations replicated over it)",
            "thunks": "collective thunk events named all_gather.N / reduce_scatter.N (JAX primitive names, NOT opcodes: resolve hlo_op via the HloProto) on the 8 tf_XLAPjRtCpuClient lines, device_ordinal 0..7, plus 'Rendezvous' waits",
        },
        extra_gt={"collectives": {"mesh": S.mesh_info(mesh), "num_devices": 8, "layers": L,
                                  "weight_sharding": "P('data', None) for W1 [D,F] and W2 [F,D]",
                                  "activation_sharding": "P('data', None)",
                                  "expected_all_gathers": 4 * L, "expected_reduce_scatters": 2 * L},
                  "extra_event_regexes": ["all_gather=^(all-gather|all_gather)",
                                          "all_reduce=^(all-reduce|psum)",
                                          "reduce_scatter=^(reduce-scatter|reduce_scatter)"]},
        hlo_fns=lambda: {"train_step": (train_step, (example, *data[0]))},
        evidence_fn=evidence)


if __name__ == "__main__":
    main()
