//! The strict check (`xlens_xplane::strict`) against prost on the campaign's mutations of real
//! captures: it accepts an XSpace exactly when prost decodes it, strings that are only not UTF-8
//! aside (xlens reads the XSpace's names lossily; the campaign's `utf8_only`).

use std::path::Path;

use xlens_fuzz::campaign::oracle::Validity;
use xlens_fuzz::campaign::{Capture, case_rng, mutate};
use xlens_xplane::strict::Schema;

/// Small captures of every family (as the CI campaign's).
const CAPTURES: [&str; 6] = [
    "tpu/tpu_basic/host0.xplane.pb",
    "tpu/tpu_sparsecore/host0.xplane.pb",
    "gpu/gpu_healthy/host0.xplane.pb",
    "real/padding_waste/vm.xplane.pb",
    "field/amd_jax08_gemm/tw003.xplane.pb",
    "real/barrier_in_loop_baseline/vm.xplane.pb",
];

#[test]
fn the_strict_check_judges_mutated_captures_as_prost_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let captures: Vec<Capture> =
        CAPTURES.iter().map(|name| Capture::load(&root.join(name), (*name).to_owned()).expect("capture")).collect();
    let schema = Schema::xspace();
    let space = schema.message("tensorflow.profiler.XSpace").expect("XSpace");
    let (mut invalid, mut disagreements) = (0, Vec::new());
    for index in 0..3000 {
        let mut rng = case_rng(4040, index);
        let c = &captures[rng.below(captures.len())];
        let mutant = mutate::mutate(&mut rng, &c.bytes, &c.structure);
        let strict = schema.check(&mutant.bytes, space);
        let prost = Validity::of(&mutant.bytes);
        let prost_ok = !matches!(prost, Validity::Invalid(_));
        invalid += usize::from(!prost_ok);
        if strict.is_ok() != prost_ok {
            disagreements
                .push(format!("case {index} ({}, {}): check {strict:?}, prost {prost:?}", c.name, mutant.detail));
        }
    }
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
    assert!(invalid > 600, "only {invalid} prost-invalid mutants");
}
