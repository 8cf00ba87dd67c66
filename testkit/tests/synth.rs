//! The scale harness behind `synth_profile`: deterministic for a seed, sized to a target, and
//! shaped like a TPU host (cores, steps, a program with async collectives, host threads).

use xlens_testkit::synth::{MegaScaleSpec, Program, SparseCoreSpec, SynthSpec, hlo_proto_with_buffers, tpu_profile};
use xlens_xplane::{PlaneKind, Space, names};

fn spec(seed: u64) -> SynthSpec {
    let program = Program::random(300, seed);
    let hlo = hlo_proto_with_buffers("jit_train_step", &program, &[("params", 1 << 30)], &[]);
    SynthSpec { program, seed, hlo_proto: Some(hlo), memory_profile_bytes: Some(1 << 30), ..SynthSpec::default() }
}

#[test]
fn the_same_seed_writes_the_same_bytes() {
    assert_eq!(tpu_profile(&spec(7)), tpu_profile(&spec(7)));
    assert_ne!(tpu_profile(&spec(7)), tpu_profile(&spec(8)));
}

#[test]
fn a_target_size_is_met_within_a_few_percent() {
    for target in [2u64 << 20, 8 << 20] {
        let bytes = tpu_profile(&spec(3).with_target_size(target));
        let ratio = bytes.len() as f64 / target as f64;
        assert!((0.95..1.05).contains(&ratio), "{target}: {} bytes", bytes.len());
    }
}

#[test]
fn a_host_is_tpu_shaped() {
    let mut s = spec(5).with_target_size(4 << 20);
    s.sparse_cores = Some(SparseCoreSpec::embeddings());
    s.megascale = MegaScaleSpec::on_first_all_gather(&s.program);
    assert!(s.megascale.is_some(), "the random program has an async all-gather");
    let space = Space::parse(tpu_profile(&s).into()).unwrap();
    assert_eq!(space.tpu_tensor_cores().len(), 4);
    let sparse = space.planes_where(|k| matches!(k, PlaneKind::TpuSparseCore { .. })).count();
    assert_eq!(sparse, 8, "two SparseCores per TensorCore");
    let core = space.tpu_tensor_cores()[0];
    let steps = core.line_by_name(names::line::STEPS).unwrap().event_count();
    assert_eq!(steps as u32, s.steps);
    let ops = core.line_by_name(names::line::XLA_OPS).unwrap();
    let async_starts = ops.events(core).map(|e| e.unwrap()).filter(|e| e.name().contains("-start")).count();
    assert!(async_starts >= s.steps as usize, "async collectives every step");
    let host = space.host_threads().unwrap();
    assert!(host.lines().iter().any(|l| l.name() == "megascale"));
    let metadata = space.metadata_plane().unwrap();
    assert!(
        metadata.event_metadata().iter().any(|m| metadata.metadata_stats(m).count() > 0),
        "the HLO proto rides in /host:metadata"
    );
}
