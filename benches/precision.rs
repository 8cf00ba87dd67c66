//! Precision kernels: `precision/<kernel>/<size>` times the bf16 (f32-accumulated), int8
//! (per-channel, int32-accumulated) and f64 reference matmuls on N(0,1) operands, and the
//! bf16/f32 accumulation-drift table. Throughput is multiply-adds per second.
//!
//! Before timing, the full-size 1024 x 1024 x 1024 bf16 audit is checked against its bound and
//! the independent-rounding estimate (the unit test runs the same check).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use xlens::budget::precision::{
    AuditSpec, Distribution, Granularity, Matrix, Scheme, SplitMix64, accumulation_drift, audit_matmul, matmul_bf16,
    matmul_f64, matmul_int8,
};

fn full_size_check() {
    let rows = audit_matmul(&AuditSpec::normal(1024, 1024, 1024, 1), &[Scheme::Bf16]).expect("audit runs");
    let r = &rows[0];
    assert!(r.error.rel_frobenius <= r.bound, "bf16 1024³ error {} above bound {}", r.error.rel_frobenius, r.bound);
    let est = r.estimate.expect("bf16 has an estimate");
    assert!(
        (r.error.rel_frobenius / est - 1.0).abs() < 0.05,
        "bf16 1024³ error {} vs estimate {est}",
        r.error.rel_frobenius
    );
}

fn operands(n: usize) -> (Matrix, Matrix) {
    let mut rng = SplitMix64::new(1);
    let a = Matrix::random(n, n, &Distribution::normal(), &mut rng).expect("matrix");
    let b = Matrix::random(n, n, &Distribution::normal(), &mut rng).expect("matrix");
    (a, b)
}

fn bench(c: &mut Criterion) {
    full_size_check();
    let mut group = c.benchmark_group("precision");
    group.sample_size(10);
    for n in [256usize, 1024] {
        let (a, b) = operands(n);
        group.throughput(Throughput::Elements((n * n * n) as u64));
        group.bench_with_input(BenchmarkId::new("bf16_matmul", n), &n, |bench, _| {
            bench.iter(|| black_box(matmul_bf16(&a, &b).expect("product")))
        });
        group.bench_with_input(BenchmarkId::new("int8_per_channel_matmul", n), &n, |bench, _| {
            bench.iter(|| black_box(matmul_int8(&a, &b, Granularity::PerChannel).expect("product")))
        });
        group.bench_with_input(BenchmarkId::new("f64_reference_matmul", n), &n, |bench, _| {
            bench.iter(|| black_box(matmul_f64(&a, &b).expect("product")))
        });
    }
    let ks = [64, 256, 1024, 4096, 16384, 65536];
    group.throughput(Throughput::Elements(ks.iter().sum::<usize>() as u64 * 4));
    group.bench_function("accumulation_drift", |bench| {
        bench.iter(|| black_box(accumulation_drift(&ks, &Distribution::unit_uniform(), 4, 3).expect("drift")))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
