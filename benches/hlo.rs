//! HLO decoding: `hlo_decode/<module>` decodes the largest committed module's `HloProto` and
//! builds its graph (instruction arena, users, topological and call-graph orders, costs,
//! collectives); `hlo_memory/<module>` replays its heap-simulator trace; `hlo_profile/<trace>`
//! extracts and builds every module of that profile. Throughput is proto MB/s.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xlens::hlo::{HloProtoEntry, Module, hlo_protos, modules_from_space};

/// The largest HLO proto among the committed profiles, with the trace it came from.
fn largest() -> (String, HloProtoEntry) {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut best: Option<(String, HloProtoEntry)> = None;
    for group in ["corpus", "real"] {
        for dir in std::fs::read_dir(testdata.join(group)).expect("testdata").flatten() {
            let path = dir.path();
            if !path.join("vm.xplane.pb").is_file() {
                continue;
            }
            let session = xlens_testkit::open_session(&path).expect("profile opens");
            let (entries, _) = hlo_protos(session.hosts()[0].space());
            for e in entries {
                if best.as_ref().is_none_or(|(_, b)| e.bytes.len() > b.bytes.len()) {
                    best = Some((format!("{group}/{}", path.file_name().unwrap().to_string_lossy()), e));
                }
            }
        }
    }
    best.expect("a committed module")
}

fn bench(c: &mut Criterion) {
    let (trace, entry) = largest();
    let name = format!("{}_{}", trace.replace('/', "_"), entry.name);
    let module = entry.decode().expect("decodes");
    eprintln!(
        "largest module: {} in {trace}: {} bytes, {} computations, {} instructions",
        entry.name,
        entry.bytes.len(),
        module.computations().len(),
        module.instructions().len()
    );

    let mut group = c.benchmark_group("hlo_decode");
    group.throughput(Throughput::Bytes(entry.bytes.len() as u64));
    group.bench_function(&name, |b| b.iter(|| black_box(Module::decode(entry.bytes.clone()).expect("decodes"))));
    group.finish();

    let mut group = c.benchmark_group("hlo_memory");
    group.bench_function(&name, |b| b.iter(|| black_box(module.hbm_memory_stats().expect("replays"))));
    group.finish();

    let session = xlens_testkit::open_session(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(&trace))
        .expect("opens");
    let space = session.hosts()[0].space();
    let mut group = c.benchmark_group("hlo_profile");
    group.sample_size(20);
    group.bench_function(trace.replace('/', "_"), |b| b.iter(|| black_box(modules_from_space(space))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
