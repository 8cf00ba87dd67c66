//! Detector cost: `detectors/<id>/<fixture>` runs one detector of `xlens::faults::DETECTORS` over a
//! profile whose shared analyses (HLO modules, steps, op profile, step anatomy, chip, main module)
//! were built once beforehand, as they are for every detector after the first in a scan: the
//! needs check and `run` on every host, then `run_session`. A detector whose inputs a fixture
//! lacks measures its (cheap) skip.
//!
//! Fixtures: a real JAX CPU trace (`testdata/corpus/recompilation`), and a synthetic ~200 MB
//! TPU-shaped profile (`XLENS_BENCH_SYNTH_MB` overrides its size) that also carries an HLO module
//! with a buffer assignment, SparseCore planes and DCN (MegaScale) host events, so every device
//! detector runs its full path.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use xlens::faults::{AnyDetector, DETECTORS, Findings, HostNeeds, HostSummary, Profile, ScanConfig};
use xlens::xplane::Space;
use xlens_testkit::synth::{self, MegaScaleSpec, Program, SparseCoreSpec, SynthSpec};

/// Builds every shared analysis once, outside the timed loop, and the hosts' summaries that
/// `run_session` reads.
fn warm(profile: &Profile) -> Vec<HostSummary> {
    profile
        .hosts()
        .iter()
        .map(|host| {
            host.prepare();
            HostSummary::of(host)
        })
        .collect()
}

/// What a scan does with one detector: the needs check and `run` per host, then `run_session`.
fn run_detector(
    detector: &dyn AnyDetector,
    profile: &Profile,
    summaries: &[HostSummary],
    config: &ScanConfig,
) -> usize {
    let mut out = Findings::default();
    for host in profile.hosts() {
        if detector.needs().iter().all(|n| host.has(*n)) {
            let _ = detector.run(host, config, &mut out);
        }
    }
    let _ = detector.run_session(summaries, config, &mut out);
    out.as_slice().len()
}

fn real() -> Profile {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/recompilation");
    Profile::from_session(xlens_testkit::open_session(&dir).expect("corpus trace opens"))
}

fn synthetic(mb: u64) -> Profile {
    let program = Program::random(2000, 1);
    let ops = program.ops();
    let temps: Vec<(String, u64)> = ops.iter().take(64).map(|o| (o.name.clone(), 64 << 20)).collect();
    let temps: Vec<(&str, u64)> = temps.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let hlo = synth::hlo_proto_with_buffers("jit_train_step", &program, &[("param.0", 4 << 30)], &temps);
    let megascale = MegaScaleSpec::on_first_all_gather(&program);
    let spec = SynthSpec {
        program,
        device_type: "TPU v5".to_owned(),
        hlo_proto: Some(hlo),
        megascale,
        sparse_cores: Some(SparseCoreSpec::embeddings()),
        ..SynthSpec::default()
    }
    .with_target_size(mb << 20);
    let bytes = synth::tpu_profile(&spec);
    eprintln!("synthetic profile: {} bytes, {} steps", bytes.len(), spec.steps);
    Profile::from_space("synth", Space::parse(bytes.into()).expect("synthetic profile decodes"))
}

fn bench(c: &mut Criterion) {
    let mb: u64 = std::env::var("XLENS_BENCH_SYNTH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let fixtures = [("real_cpu_recompilation".to_owned(), real()), (format!("synth_tpu_{mb}mb"), synthetic(mb))];
    let summaries: Vec<Vec<HostSummary>> = fixtures.iter().map(|(_, profile)| warm(profile)).collect();
    let mut group = c.benchmark_group("detectors");
    group.sample_size(10);
    for detector in DETECTORS {
        let config = ScanConfig::only(detector.id());
        for ((name, profile), summaries) in fixtures.iter().zip(&summaries) {
            group.bench_function(format!("{}/{name}", detector.id()), |b| {
                b.iter(|| black_box(run_detector(*detector, profile, summaries, &config)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
