//! Decode throughput: `decode/<fixture>` parses (metadata tables and line headers, events
//! counted), `iterate/<fixture>` parses and walks every event, `events/<fixture>` walks every
//! event of an already parsed space (the event decoder alone), and `bare_runs/<fixture>` reads
//! the same events as the TPU timeline reads its op lines, in runs of bare events
//! (`ReleasingEvents::next_bare_run`) with the general read between: the floor under the walk's
//! cost per op. Throughput is input bytes/s.
//! `line_index/*` walks a 1 M-event Python-tracer-shaped thread: `indexing_walk` reads every
//! event and leaves the line's index (`Line::event_parts_indexing`, as the host steps do),
//! `events_where` finds its 1,000 compile events in the indexed line (reading the quarter of its
//! blocks that hold one), `filtered_walk` finds them by reading every event (what
//! `events_where` does on a line nobody indexed).
//!
//! Fixtures: a real JAX CPU trace from the corpus, and a synthetic ~200 MB TPU-shaped trace
//! written by the builder (`XLENS_BENCH_SYNTH_MB` overrides its size).

use std::hint::black_box;
use std::path::Path;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xlens::xplane::{BareEvent, Space};
use xlens_testkit::synth;

/// Folds the fields of an event that a walk uses into a checksum, so that none is left unread.
fn fold(acc: u64, start: i64, metadata_id: i64, duration: i64) -> u64 {
    acc.wrapping_add(start as u64 ^ metadata_id as u64 ^ duration as u64)
}

fn iterate_all(space: &Space) -> u64 {
    let mut acc = 0u64;
    for plane in space.planes() {
        for line in plane.lines() {
            for ev in line.events(plane) {
                let ev = ev.expect("event decodes");
                acc = fold(acc, ev.start().0, ev.metadata_id().0, ev.duration().0);
            }
        }
    }
    acc
}

/// Every event of every line, read in runs of bare events with the general read for the event
/// after a run, as the TPU walk reads its op lines.
fn read_bare_runs(space: &Space) -> u64 {
    let mut acc = 0u64;
    let mut run = [BareEvent::default(); 64];
    for plane in space.planes() {
        for line in plane.lines() {
            let mut events = line.events_releasing(plane);
            loop {
                let n = events.next_bare_run(&mut run);
                for op in &run[..n] {
                    acc = fold(acc, op.start.0, op.metadata_id.0, op.duration.0);
                }
                if n == run.len() {
                    continue;
                }
                let Some(ev) = events.next() else { break };
                let ev = ev.expect("event decodes");
                acc = fold(acc, ev.start().0, ev.metadata_id().0, ev.duration().0);
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

        assert_eq!(read_bare_runs(&space), iterate_all(&space), "both reads see the same events");
        let mut group = c.benchmark_group("bare_runs");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.sample_size(10);
        group.bench_function(&name, |b| b.iter(|| black_box(read_bare_runs(&space))));
        group.finish();
    }
}

/// One host-thread plane with a Python-tracer-shaped line: a million calls, every thousandth a
/// compile event.
fn python_thread() -> Bytes {
    let mut b = xlens::xplane::SpaceBuilder::default();
    {
        let mut plane = b.plane(1, "/host:CPU");
        let calls: Vec<_> = (0..64).map(|i| plane.event_metadata(&format!("$train.py:{i} call"))).collect();
        let compile = plane.event_metadata("backend_compile_and_load");
        let mut line = plane.line(1, "python3", 0);
        for i in 0..1_000_000i64 {
            let metadata = if i % 1_000 == 500 { compile } else { calls[(i % 64) as usize] };
            line.event(metadata, i * 1_000, 800);
        }
    }
    b.finish().into()
}

fn line_index(c: &mut Criterion) {
    let bytes = python_thread();
    let mut group = c.benchmark_group("line_index");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.sample_size(10);
    group.bench_function("indexing_walk", |b| {
        b.iter(|| {
            let space = Space::parse(bytes.clone()).expect("decodes");
            let plane = &space.planes()[0];
            let line = &plane.lines()[0];
            black_box(line.event_parts_indexing(plane, 2).into_iter().map(Iterator::count).sum::<usize>())
        })
    });
    let space = Space::parse(bytes.clone()).expect("decodes");
    let plane = &space.planes()[0];
    let line = &plane.lines()[0];
    let compile = plane.metadata_mask(|m| m.name() == "backend_compile_and_load");
    group.bench_function("filtered_walk", |b| {
        b.iter(|| black_box(line.events(plane).map_while(Result::ok).filter(|e| compile.contains(e)).count()))
    });
    line.event_parts_indexing(plane, 2).into_iter().for_each(|run| run.for_each(drop));
    group.bench_function("events_where", |b| {
        b.iter(|| black_box(line.events_where(plane, &compile).map_while(Result::ok).count()))
    });
    group.finish();
}

criterion_group!(benches, bench, line_index);
criterion_main!(benches);
