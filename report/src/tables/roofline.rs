//! Renderings of the chip catalogue for the `roofline_table` example.

use std::fmt::Write as _;

use serde_json::{Value, json};
use xlens_roofline::{ChipSpec, ChipSpecRoofline, FlopsPerByte};

/// A ridge point rounded to 0.1 FLOP/byte, as printed.
fn ridge(c: &ChipSpec) -> f64 {
    (c.ridge_bf16().get() * 10.0).round() / 10.0
}

/// The `roofline_table --json` document, one object per chip, the documented keys first:
/// `[{"chip":"v5e","peak_bf16_flops":1.97e14,"hbm_bytes_per_s":8.19e11,
/// "hbm_capacity_bytes":17179869184,"ridge_bf16":240.5,"name":..,...}]`. Rates are per chip in FLOP/s
/// and bytes/s; capacities in bytes (binary GiB in the catalogue); absent figures are `null`.
pub fn roofline_table_json(chips: &[&ChipSpec]) -> Value {
    Value::Array(
        chips
            .iter()
            .map(|c| {
                json!({
                    "chip": c.id,
                    "peak_bf16_flops": c.peak_bf16.per_s(),
                    "hbm_bytes_per_s": c.hbm_bandwidth.bytes_per_s(),
                    "hbm_capacity_bytes": c.hbm_capacity.as_u64(),
                    "ridge_bf16": ridge(c),
                    "name": c.name,
                    "vendor": c.vendor.as_str(),
                    "cores_per_chip": c.cores_per_chip,
                    "peak_fp8_flops": c.peak_fp8.map(|f| f.per_s()),
                    "peak_int8_ops": c.peak_int8.map(|f| f.per_s()),
                    "peak_fp32_flops": c.peak_fp32.map(|f| f.per_s()),
                    "interconnect_bytes_per_s": c.interconnect_bandwidth.map(|b| b.bytes_per_s()),
                    "dcn_bytes_per_s": c.dcn_bandwidth.map(|b| b.bytes_per_s()),
                })
            })
            .collect(),
    )
}

fn opt_tf(v: Option<xlens_roofline::FlopsPerSec>) -> String {
    v.map_or_else(|| "-".to_owned(), |f| format!("{:.0}", f.tflops()))
}

fn opt_gbps(v: Option<xlens_roofline::BytesPerSec>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |b| format!("{:.decimals$}", b.gb_per_s()))
}

/// The catalogue as a text table: dense peaks in TFLOP/s, HBM in GB/s (decimal) and GiB
/// (binary), the bf16 ridge point, interconnect and DCN per chip in GB/s.
pub fn roofline_table_text(chips: &[&ChipSpec]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<7} {:<17} {:>5} {:>7} {:>6} {:>6} {:>5} {:>8} {:>7} {:>12} {:>8} {:>8}",
        "chip",
        "name",
        "cores",
        "bf16",
        "fp8",
        "int8",
        "fp32",
        "HBM GB/s",
        "HBM GiB",
        "ridge FLOP/B",
        "ICI GB/s",
        "DCN GB/s"
    );
    for c in chips {
        let _ = writeln!(
            out,
            "{:<7} {:<17} {:>5} {:>7.1} {:>6} {:>6} {:>5} {:>8.0} {:>7.0} {:>12.1} {:>8} {:>8}",
            c.id,
            c.name,
            c.cores_per_chip,
            c.peak_bf16.tflops(),
            opt_tf(c.peak_fp8),
            opt_tf(c.peak_int8),
            c.peak_fp32.map_or_else(|| "-".to_owned(), |f| format!("{:.1}", f.tflops())),
            c.hbm_bandwidth.gb_per_s(),
            c.hbm_capacity.as_gib(),
            ridge(c),
            opt_gbps(c.interconnect_bandwidth, 0),
            opt_gbps(c.dcn_bandwidth, 2),
        );
    }
    let _ = writeln!(out, "peaks: dense TFLOP/s (int8: TOP/s) per chip; ridge = bf16 peak / HBM bytes/s");
    out
}

/// Where an arithmetic intensity lands on each chip's bf16 roofline: bound, attainable
/// TFLOP/s and fraction of peak.
pub fn intensity_text(chips: &[&ChipSpec], intensity: FlopsPerByte) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "arithmetic intensity {:.1} FLOP/B", intensity.get());
    let _ =
        writeln!(out, "{:<7} {:>11} {:>8} {:>15} {:>8}", "chip", "ridge FLOP/B", "bound", "attain TFLOP/s", "of peak");
    for c in chips {
        let r = c.roofline();
        let _ = writeln!(
            out,
            "{:<7} {:>12.1} {:>8} {:>15.1} {:>7.1}%",
            c.id,
            ridge(c),
            r.bound_at(intensity).label(),
            r.attainable(intensity).tflops(),
            100.0 * r.attainable_fraction(intensity)
        );
    }
    out
}
