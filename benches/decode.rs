//! Decode throughput: `decode/<fixture>` parses (metadata tables and line headers, events
//! counted), `iterate/<fixture>` parses and walks every event, `events/<fixture>` walks every
//! event of an already parsed space (the event decoder alone). Throughput is input bytes/s.
//!
//! Fixtures: a real JAX CPU trace from the corpus, and a synthetic ~200 MB TPU-shaped trace
//! written by the builder (`XLENS_BENCH_SYNTH_MB` overrides its size).

use std::hint::black_box;
use std::path::Path;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xlens::xplane::Space;
use xlens_testkit::synth;

fn iterate_all(space: &Space) -> u64 {
    let mut acc = 0u64;
    for plane in space.planes() {
        for line in plane.lines() {
            for ev in line.events(plane) {
                let ev = ev.expect("event decodes");
                acc = acc.wrapping_add(ev.start().0 as u64 ^ ev.metadata_id().0 as u64);
            }
        }
    }
    acc
}

fn fixtures() -> Vec<(String, Bytes)> {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/recompilation/vm.xplane.pb");
    let mut out = vec![("real_cpu_recompilation".to_owned(), Bytes::from(std::fs::read(real).expect("corpus trace")))];
    let mb: u64 = std::env::var("XLENS_BENCH_SYNTH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let spec = synth::SynthSpec { program: synth::Program::random(2000, 1), ..synth::SynthSpec::default() }
        .with_target_size(mb << 20);
    out.push((format!("synth_tpu_{mb}mb"), Bytes::from(synth::tpu_profile(&spec))));
    out
}

fn bench(c: &mut Criterion) {
    for (name, bytes) in fixtures() {
        let mut group = c.benchmark_group("decode");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.sample_size(10);
        group.bench_function(&name, |b| b.iter(|| black_box(Space::parse(bytes.clone()).expect("decodes"))));
        group.finish();

        let mut group = c.benchmark_group("iterate");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.sample_size(10);
        group.bench_function(&name, |b| {
            b.iter(|| {
                let space = Space::parse(bytes.clone()).expect("decodes");
                black_box(iterate_all(&space))
            })
        });
        group.finish();

        let space = Space::parse(bytes.clone()).expect("decodes");
        let mut group = c.benchmark_group("events");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.sample_size(10);
        group.bench_function(&name, |b| b.iter(|| black_box(iterate_all(&space))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
