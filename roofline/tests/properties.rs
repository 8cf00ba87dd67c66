//! Properties of the roofline math: monotone, never above the roof, continuous at the ridge,
//! and the utilisation view agreeing with the ridge test.

use proptest::prelude::*;
use xlens_roofline::chips::CATALOGUE;
use xlens_roofline::{
    Bound, Bytes, BytesPerSec, ChipSpecRoofline, Flops, FlopsPerByte, FlopsPerSec, Roofline, Work, arithmetic_intensity,
};
use xlens_xplane::Picos;

fn roofline() -> impl Strategy<Value = Roofline> {
    // 1 TFLOP/s .. 10 PFLOP/s, 10 GB/s .. 20 TB/s: ridges from 0.05 to 1e6 FLOP/B.
    (1e12..1e16f64, 1e10..2e13f64)
        .prop_map(|(f, b)| Roofline::new(FlopsPerSec(f), BytesPerSec(b)).expect("positive peaks"))
}

fn intensity() -> impl Strategy<Value = f64> {
    prop_oneof![0.0..1.0f64, 0.0..1e3f64, 0.0..1e7f64]
}

proptest! {
    #[test]
    fn attainable_is_monotone_in_intensity(r in roofline(), a in intensity(), b in intensity()) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        prop_assert!(r.attainable(FlopsPerByte(lo)) <= r.attainable(FlopsPerByte(hi)));
    }

    #[test]
    fn attainable_never_exceeds_the_roof(r in roofline(), oi in intensity()) {
        let att = r.attainable(FlopsPerByte(oi)).per_s();
        prop_assert!(att <= r.peak_flops().per_s());
        prop_assert!(att <= oi * r.hbm_bandwidth().bytes_per_s());
        // And it is on the roof: one of the two limits.
        prop_assert!(att == r.peak_flops().per_s() || att == oi * r.hbm_bandwidth().bytes_per_s());
        prop_assert!((0.0..=1.0).contains(&r.attainable_fraction(FlopsPerByte(oi))));
    }

    #[test]
    fn attainable_is_continuous_at_the_ridge(r in roofline(), eps in 1e-12..1e-3f64) {
        let ridge = r.ridge_point().get();
        let peak = r.peak_flops().per_s();
        let below = r.attainable(FlopsPerByte(ridge * (1.0 - eps))).per_s();
        let above = r.attainable(FlopsPerByte(ridge * (1.0 + eps))).per_s();
        prop_assert!((above - peak).abs() <= peak * 1e-12);
        // Off the roof by eps, give or take the few roundings of ridge * (1 - eps) * bandwidth
        // (an absolute error of some ulps of the peak, larger than eps * 1e-9 for small eps).
        prop_assert!((peak - below) <= peak * (eps + 4.0 * f64::EPSILON));
        prop_assert_eq!(r.bound_at(FlopsPerByte(ridge * (1.0 - eps))), Bound::Hbm);
        prop_assert_eq!(r.bound_at(FlopsPerByte(ridge * (1.0 + eps))), Bound::Compute);
    }

    #[test]
    fn utilisation_view_agrees_with_ridge_test(
        r in roofline(),
        flops in 1e3..1e15f64,
        bytes in 1u64..1_000_000_000_000,
        time_ps in 1i64..1_000_000_000_000,
    ) {
        let work = Work { flops: Flops(flops), hbm_bytes: Bytes(bytes), time: Picos(time_ps), ..Work::default() };
        let a = r.analyze(&work);
        let oi = arithmetic_intensity(work.flops, work.hbm_bytes).unwrap();
        prop_assert_eq!(a.intensity, Some(oi));
        prop_assert_eq!(a.efficiency, a.flop_utilization.max(a.hbm_utilization));
        // Away from exact ties the largest utilisation and the ridge test name the same bound.
        let ratio = oi.get() / r.ridge_point().get();
        if (ratio - 1.0).abs() > 1e-9 {
            prop_assert_eq!(a.bound, Some(r.bound_at(oi)));
        }
        prop_assert_eq!(a.attainable, r.attainable(oi));
        // Within the peaks, the measured rate never exceeds the roof at its intensity.
        if a.efficiency <= 1.0 {
            prop_assert!(a.flop_rate.per_s() <= a.attainable.per_s() * (1.0 + 1e-9));
        }
        // Efficiency is what fraction of the roof the work reached, whichever resource binds.
        let roof_fraction = a.flop_rate.per_s() / a.attainable.per_s();
        prop_assert!((roof_fraction - a.efficiency).abs() <= a.efficiency * 1e-9);
    }

    #[test]
    fn scaling_work_keeps_intensity_and_bound(
        r in roofline(),
        flops in 1e6..1e12f64,
        bytes in 1_000u64..1_000_000_000,
        k in 2u64..1000,
    ) {
        let w1 = Work { flops: Flops(flops), hbm_bytes: Bytes(bytes), time: Picos(1_000_000), ..Work::default() };
        let w2 = Work { flops: Flops(flops * k as f64), hbm_bytes: Bytes(bytes * k), time: Picos(1_000_000 * k as i64), ..Work::default() };
        let (a1, a2) = (r.analyze(&w1), r.analyze(&w2));
        prop_assert_eq!(a1.bound, a2.bound);
        let (i1, i2) = (a1.intensity.unwrap().get(), a2.intensity.unwrap().get());
        prop_assert!((i1 - i2).abs() <= i1 * 1e-12);
        prop_assert!((a1.efficiency - a2.efficiency).abs() <= a1.efficiency * 1e-9);
    }

    #[test]
    fn more_time_never_raises_utilisation(r in roofline(), flops in 1e6..1e12f64, bytes in 1u64..1_000_000_000, t in 1i64..1_000_000_000, extra in 0i64..1_000_000_000) {
        let w = |time| Work { flops: Flops(flops), hbm_bytes: Bytes(bytes), time: Picos(time), ..Work::default() };
        prop_assert!(r.analyze(&w(t + extra)).efficiency <= r.analyze(&w(t)).efficiency);
    }

    #[test]
    fn unit_conversions_round_trip(gib in 0u64..1 << 30, gbps in 0.0..1e6f64) {
        prop_assert_eq!(Bytes::from_gib(gib).as_gib(), gib as f64);
        prop_assert_eq!(Bytes::from_gib(gib).as_u64(), gib << 30);
        let bw = BytesPerSec::from_gb_per_s(gbps);
        prop_assert!((bw.gb_per_s() - gbps).abs() <= gbps * 1e-15);
        prop_assert!((bw.gib_per_s() * 1.073741824 - gbps).abs() <= gbps * 1e-12 + 1e-12);
        prop_assert!((BytesPerSec::from_gib_per_s(gbps).gib_per_s() - gbps).abs() <= gbps * 1e-15);
    }
}

#[test]
fn every_catalogue_roofline_meets_its_ridge() {
    for c in CATALOGUE {
        let r = c.roofline();
        let ridge = r.ridge_point();
        let peak = c.peak_bf16.per_s();
        assert!((r.attainable(ridge).per_s() - peak).abs() <= peak * 1e-15, "{}", c.id);
        assert_eq!(r.bound_at(ridge), Bound::Compute, "{}", c.id);
    }
}
