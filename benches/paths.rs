//! End-to-end throughput per path: `paths/<path>` parses a host file held in memory, runs every
//! detector (`scan`, shared analyses included) and renders the JSON report, in bytes per second
//! of profile, so a regression in any path's MB/s shows in criterion's comparison against a saved
//! baseline (`cargo bench --bench paths -- --save-baseline main`, then `--baseline main`).
//!
//! Paths: TPU op lines (`tpu`, synthetic, with host threads), a device-only snapshot without step
//! markers (`stepless_snapshot`: the program executions are the time base), GPU streams (`gpu`,
//! NVIDIA-shaped synthetic) and host threads (`cpu`, the real JAX CPU capture
//! `testdata/corpus/recompilation`). Synthetic hosts are `XLENS_BENCH_PATH_MB` MiB (default 20).

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xlens::faults::{Profile, ScanConfig, scan};
use xlens::report::render;
use xlens::xplane::Space;
use xlens_testkit::synth::{self, Program, SynthSpec};

/// Parses, scans and renders one host: what `xlens scan --json` does with a file.
fn scan_bytes(bytes: &bytes::Bytes) -> usize {
    let space = Space::parse(bytes.clone()).expect("the bench profile decodes");
    let report = scan(&Profile::from_space("bench", space), &ScanConfig::default());
    render::json(&report).len()
}

fn tpu(mb: u64, device_only: bool) -> Vec<u8> {
    let program = Program::random(2000, 1);
    let names: Vec<String> = program.ops().iter().map(|o| o.name.clone()).collect();
    let temps: Vec<(&str, u64)> =
        names.iter().filter(|n| n.starts_with("fusion")).map(|n| (n.as_str(), 8u64 << 20)).collect();
    let hlo = synth::hlo_proto_with_buffers("jit_train_step", &program, &[("params", 4u64 << 30)], &temps);
    let spec = SynthSpec {
        program,
        hlo_proto: Some(hlo),
        memory_profile_bytes: (!device_only).then_some(4u64 << 30),
        host_threads: !device_only,
        device_steps: !device_only,
        ..SynthSpec::default()
    }
    .with_target_size(mb << 20);
    synth::tpu_profile(&spec)
}

fn bench(c: &mut Criterion) {
    let mb: u64 = std::env::var("XLENS_BENCH_PATH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let cpu = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/corpus/recompilation")
            .read_dir()
            .expect("the corpus trace is there")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with(".xplane.pb"))
            .expect("a host file"),
    )
    .expect("the corpus trace reads");
    let paths: Vec<(&str, bytes::Bytes)> = vec![
        ("tpu", tpu(mb, false).into()),
        ("stepless_snapshot", tpu(mb, true).into()),
        ("gpu", xlens_testkit::gpu::gpu_profile_of_size(mb << 20, 8, 1).into()),
        ("cpu", cpu.into()),
    ];
    let mut group = c.benchmark_group("paths");
    group.sample_size(10);
    for (name, bytes) in &paths {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(*name, |b| b.iter(|| black_box(scan_bytes(bytes))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
