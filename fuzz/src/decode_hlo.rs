//! Fuzz body for the HLO decoder and graph builder.
//!
//! Invariants: decoding never panics; a module that builds has a topological order covering
//! every instruction once (operands and callees first), symmetric operand/user edges, name
//! lookups that find what they are given, an entry cost equal to the sum of its instructions,
//! padded sizes no smaller than logical ones, and every query answers without panicking.

use bytes::Bytes;
use xlens_hlo::{Cost, Module, limits};

/// Decodes `data` as an `HloProto`, builds the graph, walks everything and checks invariants.
pub fn run(data: &[u8]) {
    let Ok(module) = Module::decode(Bytes::copy_from_slice(data)) else {
        return;
    };
    check(&module);
}

/// The invariants, on a module that built.
pub fn check(module: &Module) {
    let n = module.instructions().len();
    let order: Vec<_> = module.topological_order().collect();
    assert_eq!(order.len(), n, "topological order covers every instruction");
    let mut position = vec![usize::MAX; n];
    for (k, id) in order.iter().enumerate() {
        assert_eq!(position[id.index()], usize::MAX, "instruction listed twice");
        position[id.index()] = k;
    }
    for instr in module.instructions() {
        let id = instr.id();
        for &o in instr.operands() {
            assert!(position[o.index()] < position[id.index()], "operand after its user");
            assert!(module.instruction(o).users().contains(&id), "user edge missing");
            assert_eq!(module.instruction(o).computation(), instr.computation(), "operand in another computation");
        }
        for &u in instr.users() {
            assert!(module.instruction(u).operands().contains(&id), "operand edge missing");
        }
        for &c in instr.called_computations() {
            for &x in module.computation(c).instructions() {
                assert!(position[x.index()] < position[id.index()], "callee after caller");
            }
        }
        let found = module.instruction_by_name(instr.name()).expect("name lookup");
        assert_eq!(found.name(), instr.name());
        let shape = instr.shape();
        assert!(shape.tpu_padded_bytes() >= shape.logical_bytes(), "padding shrinks data");
        let _ = (module.cost(id), module.instruction_text(id), module.xla_category(id), module.is_elementwise(id));
        let _ = (module.source(id), module.source_stack(id).len() as u64 <= limits::MAX_STACK_DEPTH);
        let near = module.neighborhood(id, 2);
        assert_eq!(near.first(), Some(&(id, 0)));
        let within = module.neighborhood_within(id, 2, 16).expect("2 hops is under the limit");
        assert_eq!(within.nodes.first().map(|n| (n.id, n.distance)), Some((id, 0)));
        assert!(within.nodes.len() <= 16 && within.found >= within.nodes.len());
        let _ = module.sharding_text(id);
    }
    let summary = module.graph_summary();
    assert_eq!(summary.instructions, module.instructions().len());
    let _ = module.module_text();
    for comp in module.computations() {
        if let Some(root) = comp.root() {
            assert_eq!(module.instruction(root).computation(), comp.id(), "root outside its computation");
        }
        assert_eq!(comp.topological_order().len(), comp.instructions().len());
    }
    let entry = module.entry();
    let sum = entry.instructions().iter().fold(Cost::default(), |acc, &i| acc + module.cost(i));
    assert_eq!(sum, module.entry_cost());
    for c in module.collectives() {
        let devices: usize = c.replica_groups.iter().map(Vec::len).sum();
        assert!(devices as u64 <= limits::MAX_REPLICA_GROUP_DEVICES);
        let _ = c.groups_text();
    }
    let _ =
        (module.fusions().len(), module.opcode_counts(), module.aliased_params(), module.entry_computation_layout());
    if let Ok(Some(stats)) = module.hbm_memory_stats() {
        assert!(stats.heap_peak_bytes >= stats.heap_padding_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rng, mutate};

    fn seeds() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
        let mut out = vec![xlens_hlo::testing::tiny_module_bytes()];
        for (trace, name) in [("real/sharded_donation", "jit_train_step(8)"), ("real/barrier_in_loop", "jit_layer(4)")]
        {
            let session = xlens_testkit::open_session(dir.join(trace)).expect("seed trace");
            let (entries, _) = xlens_hlo::hlo_protos(session.hosts()[0].space());
            let entry = entries.into_iter().find(|e| e.name == name).expect("seed module");
            out.push(entry.bytes.to_vec());
        }
        out
    }

    #[test]
    fn smoke_real_modules_build_and_hold_invariants() {
        for seed in seeds() {
            let module = Module::decode(seed.clone().into()).expect("seed decodes");
            check(&module);
            run(&seed);
        }
    }

    #[test]
    fn smoke_mutated_real_modules() {
        let seeds = seeds();
        let mut rng = Rng::new(0x41_0ced);
        let mut built = 0;
        for i in 0..400 {
            let mut input = seeds[i % seeds.len()].clone();
            mutate(&mut rng, &mut input);
            if Module::decode(input.clone().into()).is_ok() {
                built += 1;
            }
            run(&input);
        }
        // Most mutations break the protobuf; the seeded run builds 15 modules.
        assert!(built > 10, "only {built} mutants built a module");
    }

    #[test]
    fn smoke_random_bytes() {
        let mut rng = Rng::new(7);
        for _ in 0..2000 {
            let len = rng.below(256);
            let input: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            run(&input);
        }
    }
}
