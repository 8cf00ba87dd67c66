//! The chip catalogue: ridge points, units, aliases, and profile capability stats winning over
//! the catalogue.

use xlens_roofline::chips::CATALOGUE;
use xlens_roofline::{
    Bound, Bytes, BytesPerSec, Chip, ChipSpec, ChipSpecRoofline, Flops, FlopsPerByte, FlopsPerSec, OnChip, PeakSource,
    Roofline, Vendor, Work,
};
use xlens_xplane::names::stat::{self, capability as cap};
use xlens_xplane::{BuildValue, Picos, Space, SpaceBuilder};

fn spec(name: &str) -> &'static ChipSpec {
    ChipSpec::by_name(name).unwrap()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn tpu_ridge_points() {
    // peak bf16 FLOP/s ÷ HBM bytes/s, per chip.
    let cases = [("v4", 229.17), ("v5e", 240.54), ("v5p", 166.00), ("v6e", 560.44), ("v7", 312.60)];
    for (id, ridge) in cases {
        let got = spec(id).ridge_bf16().get();
        assert!(close(got, ridge, 0.005), "{id}: ridge {got}, want {ridge}");
        assert!(close(spec(id).roofline().ridge_point().get(), got, 1e-9));
    }
    // The worked figure: 197e12 / 819e9 = 240.5 FLOP/B.
    assert_eq!(format!("{}", spec("v5e").ridge_bf16()), "240.5 FLOP/B");
}

#[test]
fn gpu_ridge_points() {
    let cases = [("h100", 295.22), ("h200", 206.04), ("b200", 281.25), ("a100", 153.02), ("mi300x", 246.68)];
    for (id, ridge) in cases {
        let got = spec(id).ridge_bf16().get();
        assert!(close(got, ridge, 0.005), "{id}: ridge {got}, want {ridge}");
    }
}

#[test]
fn seed_intensity_170_on_v5e_is_bandwidth_bound() {
    let v5e = spec("v5e").roofline();
    let oi = FlopsPerByte(170.0);
    assert_eq!(v5e.bound_at(oi), Bound::Hbm);
    assert_eq!(v5e.attainable(oi).per_s(), 170.0 * 819e9);
    assert!(close(v5e.attainable_fraction(oi), 0.7068, 1e-4));
    // The same op measured at the bandwidth roof: HBM utilisation 1, FLOP utilisation 0.707.
    let time_s = 1e-3;
    let bytes = 819e9 * time_s;
    let work = Work {
        flops: Flops(170.0 * bytes),
        hbm_bytes: Bytes(bytes as u64),
        time: Picos(1_000_000_000),
        ..Work::default()
    };
    let a = v5e.analyze(&work);
    assert_eq!(a.bound, Some(Bound::Hbm));
    assert!(close(a.hbm_utilization, 1.0, 1e-9));
    assert!(close(a.flop_utilization, 0.7068, 1e-4));
    assert!(close(a.efficiency, 1.0, 1e-9));
    // On v6e (ridge 560) it is also HBM-bound; at 600 FLOP/B compute-bound.
    assert_eq!(spec("v6e").roofline().bound_at(oi), Bound::Hbm);
    assert_eq!(spec("v6e").roofline().bound_at(FlopsPerByte(600.0)), Bound::Compute);
}

#[test]
fn gb_and_gib_conversions() {
    let v5e = spec("v5e");
    // Capacities are binary: 16 GiB.
    assert_eq!(v5e.hbm_capacity, Bytes(17_179_869_184));
    assert_eq!(v5e.hbm_capacity.as_gib(), 16.0);
    assert!(close(v5e.hbm_capacity.as_gb(), 17.18, 0.005));
    // Bandwidths are decimal: 819 GB/s = 762.75 GiB/s.
    assert_eq!(v5e.hbm_bandwidth.bytes_per_s(), 819e9);
    assert!(close(v5e.hbm_bandwidth.gib_per_s(), 762.75, 0.005));
    // XProf's v6e trace: 1525.5 GiB/s is the catalogue's 1638 GB/s.
    assert!(close(BytesPerSec::from_gib_per_s(1525.5).gb_per_s(), 1638.0, 0.01));
    // XProf's ridge from GFLOP/s and GiB/s (facts §8): 946700 GFLOP/s, 1525.5 GiB/s -> 577.963.
    let r = Roofline::new(FlopsPerSec::from_gflops(946_700.0), BytesPerSec::from_gib_per_s(1525.5)).unwrap();
    assert!(close(r.ridge_point().get(), 577.963, 0.001));
    let r = r.with_on_chip(OnChip::VmemRead, BytesPerSec::from_gib_per_s(21696.1)).unwrap();
    assert!(close(r.on_chip_ridge_point(OnChip::VmemRead).unwrap().get(), 40.6379, 0.0001));
    // DCN is quoted in Gbit/s.
    assert_eq!(spec("v5p").dcn_bandwidth.unwrap().bytes_per_s(), 6.25e9);
    assert_eq!(format!("{}", Bytes::from_gib(95)), "95.00 GiB");
    assert_eq!(format!("{}", Bytes(1000)), "1000 B");
}

#[test]
fn catalogue_is_complete_and_consistent() {
    let ids: Vec<_> = CATALOGUE.iter().map(|c| c.id).collect();
    assert_eq!(ids, ["v4", "v5e", "v5p", "v6e", "v7", "a100", "h100", "h200", "b200", "mi300x", "mi355x"]);
    for c in CATALOGUE {
        assert!(c.peak_bf16.per_s() > 0.0 && c.hbm_bandwidth.bytes_per_s() > 0.0, "{}", c.id);
        assert!(c.hbm_capacity.as_gib() >= 16.0, "{}", c.id);
        assert!(!c.source.is_empty(), "{}", c.id);
        assert!(c.cores_per_chip >= 1);
        assert_eq!(c.vendor.is_tpu(), c.compute_units.is_none(), "{}", c.id);
        for alias in c.aliases.iter().chain([&c.id, &c.name]) {
            assert_eq!(ChipSpec::by_name(alias).unwrap().id, c.id, "alias {alias:?}");
        }
        // Lower precisions never have a lower peak than bf16.
        for p in [c.peak_fp8, c.peak_int8].into_iter().flatten() {
            assert!(p >= c.peak_bf16, "{}", c.id);
        }
    }
    let fig = |id: &str| {
        let c = spec(id);
        (c.peak_bf16.tflops(), c.hbm_bandwidth.gb_per_s(), c.hbm_capacity.as_gib(), c.cores_per_chip)
    };
    assert_eq!(fig("v4"), (275.0, 1200.0, 32.0, 2));
    assert_eq!(fig("v5e"), (197.0, 819.0, 16.0, 1));
    assert_eq!(fig("v5p"), (459.0, 2765.0, 95.0, 2));
    assert_eq!(fig("v6e"), (918.0, 1638.0, 32.0, 1));
    assert_eq!(fig("v7"), (2307.0, 7380.0, 192.0, 2));
    assert_eq!(fig("h100"), (989.0, 3350.0, 80.0, 1));
    assert_eq!(spec("v7").peak_fp8.unwrap().tflops(), 4614.0);
    assert_eq!(spec("v5e").interconnect_bandwidth.unwrap().gb_per_s(), 400.0);
    assert_eq!(spec("mi300x").vendor, Vendor::Amd);
}

#[test]
fn device_type_strings_and_accelerator_types() {
    for (name, id) in [
        ("TPU v4", "v4"),
        ("TPU V4", "v4"),
        ("TPU v5 Lite", "v5e"),
        ("TPU V5", "v5p"),
        ("TPU v5", "v5p"),
        ("TPU v6 Lite", "v6e"),
        ("TPU v7x", "v7"),
        ("v5litepod-256", "v5e"),
        ("v5p-8", "v5p"),
        ("v6e-16", "v6e"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("  trillium ", "v6e"),
    ] {
        assert_eq!(ChipSpec::by_name(name).map(|c| c.id).ok(), Some(id), "{name:?}");
    }
    for unknown in ["", "TPU v3", "NVIDIA H100 PCIe", "v5e-x", "-8"] {
        let err = ChipSpec::by_name(unknown).unwrap_err();
        assert!(err.is_unknown_chip(), "{unknown:?}");
        assert!(err.to_string().contains("known chips: v4, v5e"), "{err}");
    }
}

#[test]
fn catalogue_chip_has_per_core_peaks() {
    let v5p = Chip::by_name("v5p").unwrap();
    assert_eq!(v5p.cores_per_chip(), 2);
    assert_eq!(v5p.peaks().flops.tflops(), 229.5);
    assert_eq!(v5p.peaks().hbm.gb_per_s(), 1382.5);
    assert_eq!(v5p.hbm_capacity(), Some(Bytes::from_gib(95)));
    // The per-core ridge equals the per-chip one.
    assert!(close(v5p.ridge_point().get(), spec("v5p").ridge_bf16().get(), 1e-9));
    // v6e's VMEM peaks from XProf's trace become on-chip roofline resources.
    let v6e = Chip::by_name("v6e").unwrap().roofline();
    assert!(close(v6e.on_chip_bandwidth(OnChip::VmemRead).unwrap().gib_per_s(), 21696.1, 1e-6));
    assert_eq!(v6e.on_chip().len(), 2);
}

/// One device plane with the given stats.
fn plane_with(name: &str, stats: &[(&str, BuildValue<'_>)]) -> Space {
    let mut b = SpaceBuilder::default();
    {
        let mut p = b.plane(1, name);
        for (k, v) in stats {
            let id = p.stat_metadata(k);
            p.stat(id, *v);
        }
    }
    Space::parse(b.finish().into()).unwrap()
}

#[test]
fn profile_capabilities_win_over_the_catalogue() {
    let space = plane_with(
        "/device:TPU:0",
        &[
            (stat::DEVICE_TYPE_STRING, BuildValue::Str("TPU v6 Lite")),
            (cap::PEAK_TERAFLOPS_PER_SECOND, BuildValue::Double(946.7)),
            (cap::PEAK_HBM_BW_GIGABYTES_PER_SECOND, BuildValue::Double(1637.99)),
            (cap::PEAK_VMEM_RD_BW_GIGABYTES_PER_SECOND, BuildValue::Double(23296.0)),
        ],
    );
    let chip = Chip::from_space(&space).unwrap();
    assert_eq!(chip.spec().unwrap().id, "v6e");
    assert_eq!(chip.device_type(), Some("TPU v6 Lite"));
    assert_eq!((chip.peaks().flops.tflops(), chip.flops_source()), (946.7, PeakSource::Profile));
    assert_eq!((chip.peaks().hbm.gb_per_s(), chip.hbm_source()), (1637.99, PeakSource::Profile));
    assert!(close(chip.ridge_point().get(), 577.96, 0.01));
    // VMEM read from the profile, VMEM write from the catalogue.
    let r = chip.roofline();
    assert_eq!(r.on_chip_bandwidth(OnChip::VmemRead).unwrap().gb_per_s(), 23296.0);
    assert!(close(r.on_chip_bandwidth(OnChip::VmemWrite).unwrap().gib_per_s(), 15020.4, 1e-6));
    assert_eq!(chip.hbm_capacity(), Some(Bytes::from_gib(32)));
}

#[test]
fn missing_stats_fall_back_to_the_catalogue() {
    let space = plane_with("/device:TPU:0", &[(stat::DEVICE_TYPE_STRING, BuildValue::Str("TPU v5 Lite"))]);
    let chip = Chip::from_space(&space).unwrap();
    assert_eq!((chip.peaks().flops.tflops(), chip.flops_source()), (197.0, PeakSource::Catalogue));
    assert_eq!(chip.peaks().hbm.gb_per_s(), 819.0);
    assert_eq!(chip.name(), "TPU v5e");
    // A zero peak stat is treated as absent.
    let space = plane_with(
        "/device:TPU:0",
        &[
            (stat::DEVICE_TYPE_STRING, BuildValue::Str("TPU v4")),
            (cap::PEAK_TERAFLOPS_PER_SECOND, BuildValue::Double(0.0)),
        ],
    );
    let chip = Chip::from_space(&space).unwrap();
    assert_eq!((chip.peaks().flops.tflops(), chip.flops_source()), (137.5, PeakSource::Catalogue));
}

#[test]
fn unknown_device_without_stats_is_an_error() {
    let space = plane_with("/device:TPU:0", &[(stat::DEVICE_TYPE_STRING, BuildValue::Str("TPU v9 Mega"))]);
    let err = Chip::from_space(&space).unwrap_err();
    assert!(err.to_string().contains("TPU v9 Mega"), "{err}");
    // With stats, an unknown device type still works, without a catalogue entry.
    let space = plane_with(
        "/device:TPU:0",
        &[
            (stat::DEVICE_TYPE_STRING, BuildValue::Str("TPU v9 Mega")),
            (cap::PEAK_TERAFLOPS_PER_SECOND, BuildValue::Double(5000.0)),
            (cap::PEAK_HBM_BW_GIGABYTES_PER_SECOND, BuildValue::Double(10_000.0)),
        ],
    );
    let chip = Chip::from_space(&space).unwrap();
    assert_eq!((chip.spec(), chip.name(), chip.ridge_point().get()), (None, "TPU v9 Mega", 500.0));
    let empty = Space::parse(SpaceBuilder::default().finish().into());
    if let Ok(space) = empty {
        assert!(Chip::from_space(&space).is_err());
    }
}

#[test]
fn gpu_peak_is_derived_from_sms_and_clock() {
    // H100 SXM: 132 SMs at 1.98 GHz, compute capability 9.0 -> 4096 FLOPs/cycle/SM = 1070.5 TF/s.
    let space = plane_with(
        "/device:GPU:0",
        &[
            (stat::DEVICE_TYPE_STRING, BuildValue::Str("NVIDIA H100 80GB HBM3")),
            (cap::CLOCK_RATE, BuildValue::Int(1_980_000)),
            (cap::CORE_COUNT, BuildValue::Int(132)),
            (cap::COMPUTE_CAP_MAJOR, BuildValue::Int(9)),
            (cap::COMPUTE_CAP_MINOR, BuildValue::Int(0)),
            (cap::MEMORY_BANDWIDTH, BuildValue::Uint(3_352_320_000_000)),
            (cap::MEMORY_SIZE, BuildValue::Uint(85_520_809_984)),
        ],
    );
    let chip = Chip::from_space(&space).unwrap();
    assert_eq!(chip.spec().unwrap().id, "h100");
    assert_eq!(chip.flops_source(), PeakSource::Derived);
    assert!(close(chip.peaks().flops.tflops(), 1070.53, 0.01));
    assert_eq!(chip.peaks().hbm.bytes_per_s(), 3.35232e12);
    assert_eq!(chip.hbm_capacity(), Some(Bytes(85_520_809_984)));
}
