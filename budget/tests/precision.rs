//! The precision audit's figures: bf16 matmul error against its bounds, int8 per-channel vs
//! per-tensor on outlier channels, and bf16 vs f32 accumulation drift.
//!
//! The 1024 x 1024 x 1024 product runs at full size here (two 1024³ products, row-parallel,
//! a few seconds unoptimised); `benches/precision.rs` times the same kernels.

use xlens_budget::precision::{
    Accumulator, AuditSpec, Distribution, Granularity, Matrix, Scheme, SplitMix64, accumulation_drift, audit_matmul,
    error_stats, matmul_f64, matmul_int8,
};

#[test]
fn bf16_1024_cubed_on_normal_data_is_within_the_bound() {
    let rows = audit_matmul(&AuditSpec::normal(1024, 1024, 1024, 1), &[Scheme::Bf16]).unwrap();
    let r = &rows[0];
    eprintln!("bf16 1024³ N(0,1): {:?}, bound {:.4}, estimate {:.6}", r.error, r.bound, r.estimate.unwrap());
    // Rigorous bound: (2u + u² + γ_1023(f32)(1+u)²) ‖A‖‖B‖/‖C‖ ≈ 0.0079 × 32 ≈ 0.25.
    assert!((0.24..0.27).contains(&r.bound), "bound {}", r.bound);
    assert!(r.error.rel_frobenius <= r.bound);
    // Measured 0.00235: within 5% of the independent-rounding estimate √2·2^-7·√(0.541/12) = 0.00235,
    // and two orders of magnitude under the worst case.
    let est = r.estimate.unwrap();
    assert!((est - 0.002346).abs() < 1e-6, "estimate {est}");
    assert!((r.error.rel_frobenius / est - 1.0).abs() < 0.05, "rel {}", r.error.rel_frobenius);
    assert!(r.error.rel_frobenius < r.bound / 50.0);
    // Half the outputs are within half a bf16 ULP: f32 accumulation keeps results near bf16 precision.
    assert!((0.3..0.6).contains(&r.error.median_ulps), "median ulps {}", r.error.median_ulps);
}

#[test]
fn int8_per_channel_beats_per_tensor_on_outlier_channels() {
    // Weights with every 64th output channel 100x larger: the per-tensor scale is set by the
    // outliers, so the other 63 of 64 channels keep ~1/100 of their resolution.
    let outliers = Distribution::OutlierColumns { std: 1.0, every: 64, scale: 100.0 };
    let spec = AuditSpec { m: 128, k: 1024, n: 256, a: Distribution::normal(), b: outliers, seed: 2 };
    let rows = audit_matmul(&spec, &Scheme::ALL).unwrap();
    let get = |s: Scheme| rows.iter().find(|r| r.scheme == s).unwrap();
    let (bf16, tensor, channel) = (get(Scheme::Bf16), get(Scheme::Int8PerTensor), get(Scheme::Int8PerChannel));
    for r in &rows {
        eprintln!(
            "{:>16}: rel {:.5} bound {:.4} median ulps {:.2}",
            r.scheme.as_str(),
            r.error.rel_frobenius,
            r.bound,
            r.error.median_ulps
        );
        assert!(r.error.rel_frobenius <= r.bound, "{:?}", r.scheme);
    }
    // Per-channel: about 0.011, the same as on outlier-free data; per-tensor: about 0.067.
    assert!((0.009..0.014).contains(&channel.error.rel_frobenius), "{}", channel.error.rel_frobenius);
    assert!(tensor.error.rel_frobenius > 4.0 * channel.error.rel_frobenius);
    assert!(tensor.error.median_ulps > 40.0 * channel.error.median_ulps);
    // bf16 is scale-free: outliers do not change it.
    assert!((bf16.error.rel_frobenius / bf16.estimate.unwrap() - 1.0).abs() < 0.1);
}

#[test]
fn int8_schemes_agree_without_outliers() {
    let rows =
        audit_matmul(&AuditSpec::normal(64, 512, 64, 3), &[Scheme::Int8PerTensor, Scheme::Int8PerChannel]).unwrap();
    let (t, c) = (rows[0].error.rel_frobenius, rows[1].error.rel_frobenius);
    // On N(0,1) data channel maxima are close to the tensor maximum: within 40%, both ~1-2%.
    assert!(c < t && t < 1.4 * c, "per-tensor {t}, per-channel {c}");
    assert!((0.005..0.025).contains(&t));
}

#[test]
fn bf16_accumulation_drifts_while_f32_stays_bounded() {
    let ks = [64, 256, 1024, 4096, 16384, 65536];
    let rows = accumulation_drift(&ks, &Distribution::unit_uniform(), 4, 3).unwrap();
    let series = |acc: Accumulator| rows.iter().filter(|r| r.accumulator == acc).copied().collect::<Vec<_>>();
    let (bf16, f32) = (series(Accumulator::Bf16), series(Accumulator::F32));
    for (b, f) in bf16.iter().zip(&f32) {
        eprintln!(
            "K={:>6}: bf16 {:.4} (bound {:?}), f32 {:.2e} (bound {:.2e})",
            b.k,
            b.rel_error,
            b.bound,
            f.rel_error,
            f.bound.unwrap()
        );
    }
    // bf16: grows with K at every step; by 65536 the sum has stagnated (~98% lost).
    assert!(bf16.windows(2).all(|w| w[1].rel_error > w[0].rel_error));
    assert!(bf16[0].rel_error < 0.01 && bf16[2].rel_error > 0.1 && bf16[5].rel_error > 0.95);
    // Its classical bound is void from K = 257 on ((K−1)u ≥ 1).
    assert!(bf16[0].bound.is_some() && bf16[2..].iter().all(|r| r.bound.is_none()));
    // f32: below 1e-5 everywhere and under γ_{K−1}; 1000x under the bound at K = 65536.
    for r in &f32 {
        assert!(r.rel_error < 1e-5 && r.rel_error <= r.bound.unwrap(), "{r:?}");
    }
    assert!(f32[5].rel_error < f32[5].bound.unwrap() / 100.0);
    // Positive data: Σ|x| = |s|, so the first-order term is (K−1)u.
    assert!((f32[5].first_order - 65535.0 * 2f64.powi(-24)).abs() < 1e-12);
}

#[test]
fn audits_are_deterministic_for_a_seed() {
    let spec = AuditSpec::normal(32, 128, 32, 9);
    assert_eq!(audit_matmul(&spec, &Scheme::ALL).unwrap(), audit_matmul(&spec, &Scheme::ALL).unwrap());
    let other = audit_matmul(&AuditSpec { seed: 10, ..spec }, &Scheme::ALL).unwrap();
    assert_ne!(audit_matmul(&spec, &Scheme::ALL).unwrap(), other);
}

#[test]
fn int8_error_is_bounded_by_half_a_step_per_operand() {
    // One value per channel at the channel maximum: quantisation is exact there.
    let mut rng = SplitMix64::new(5);
    let a = Matrix::random(16, 64, &Distribution::normal(), &mut rng).unwrap();
    let b = Matrix::random(64, 16, &Distribution::Uniform { low: -1.0, high: 1.0 }, &mut rng).unwrap();
    let exact = matmul_f64(&a, &b).unwrap();
    let per_tensor = error_stats(&matmul_int8(&a, &b, Granularity::PerTensor).unwrap(), &exact);
    let per_channel = error_stats(&matmul_int8(&a, &b, Granularity::PerChannel).unwrap(), &exact);
    assert!(per_channel.rel_frobenius <= per_tensor.rel_frobenius * 1.05);
    assert!(per_tensor.rel_frobenius < 0.05 && per_tensor.max_abs < 1.0, "{per_tensor:?}");
}

#[test]
fn bad_inputs_are_typed_errors() {
    assert!(audit_matmul(&AuditSpec::normal(0, 4, 4, 1), &Scheme::ALL).unwrap_err().is_non_positive());
    assert!(accumulation_drift(&[0], &Distribution::normal(), 1, 1).unwrap_err().is_non_positive());
    assert!(accumulation_drift(&[8], &Distribution::normal(), 0, 1).is_err());
    let err = audit_matmul(&AuditSpec::normal(usize::MAX, 2, 2, 1), &Scheme::ALL).unwrap_err();
    assert!(err.is_overflow(), "{err}");
}
