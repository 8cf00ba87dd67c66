//! Op profile, steps and step anatomy on a synthetic ~200 MB TPU-shaped profile
//! (`XLENS_BENCH_SYNTH_MB` overrides the size) and on a real CPU trace.

use std::hint::black_box;
use std::path::Path;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xlens::roofline::{OpProfile, Steps, host_anatomy, tpu_anatomy};
use xlens::xplane::Space;
use xlens_testkit::synth;

fn synthetic() -> (String, Space) {
    let mb: u64 = std::env::var("XLENS_BENCH_SYNTH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let spec = synth::SynthSpec { program: synth::Program::random(2000, 1), ..synth::SynthSpec::default() }
        .with_target_size(mb << 20);
    let space = Space::parse(Bytes::from(synth::tpu_profile(&spec))).expect("synthetic profile decodes");
    (format!("synth_tpu_{mb}mb"), space)
}

fn bench(c: &mut Criterion) {
    let (name, space) = synthetic();
    let bytes = space.encoded_len() as u64;
    let steps = Steps::from_space(&space).expect("steps");
    let mut group = c.benchmark_group("roofline");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function(format!("op_profile/{name}"), |b| b.iter(|| black_box(OpProfile::from_tpu(&space).unwrap())));
    group.bench_function(format!("steps/{name}"), |b| b.iter(|| black_box(Steps::from_space(&space).unwrap())));
    group.bench_function(format!("anatomy/{name}"), |b| b.iter(|| black_box(tpu_anatomy(&space, &steps).unwrap())));
    group.finish();

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/recompilation");
    let session = xlens_testkit::open_session(&dir).expect("corpus trace");
    let space = session.hosts()[0].space();
    let (modules, _) = xlens::hlo::modules_from_space(space);
    let steps = Steps::from_space(space).expect("steps");
    let profile = OpProfile::from_host_threads(space, &modules).expect("op profile");
    let mut group = c.benchmark_group("roofline");
    group.throughput(Throughput::Bytes(space.encoded_len() as u64));
    group.bench_function("op_profile/real_cpu_recompilation", |b| {
        b.iter(|| black_box(OpProfile::from_host_threads(space, &modules).unwrap()))
    });
    group.bench_function("anatomy/real_cpu_recompilation", |b| {
        b.iter(|| black_box(host_anatomy(space, &steps, &profile).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
