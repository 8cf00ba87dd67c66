//! `xlens device`: the hosts of a profile, each host's device (type, peaks, ridge points), and
//! the session's key figures, as text and JSON (XProf's `get_hosts`, `get_device_information`,
//! `get_kpi_metrics`).

use serde_json::{Value, json};
use xlens_faults::Metrics;
use xlens_roofline::{BytesPerSec, Chip, GIB};

use super::line;

/// One host and its device.
#[derive(Clone, Debug)]
pub struct HostDevice {
    /// Host name.
    pub host: String,
    /// The chip of its first analysis device (TPU TensorCore, else GPU); `None` for a host
    /// without one (a CPU-only capture) or whose device reports no peaks.
    pub chip: Option<Chip>,
    /// Its analysis devices (TPU TensorCores, GPUs).
    pub devices: usize,
}

/// A profile's hosts with their devices, and the key figures of the session.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// The device kind (`TPU`, `GPU`, `CPU`), as the scan names it.
    pub device: String,
    /// The device type string recorded, as the scan gives it.
    pub device_type: Option<String>,
    /// Analysed cores over all hosts, as the scan counts them.
    pub cores: usize,
    /// The scan's health figures (the same values `scan --json` prints).
    pub metrics: Metrics,
    /// The program's roofline efficiency as XProf computes it (%): its counts and its peaks;
    /// `None` where no op carries a cost.
    pub xprof_roofline_efficiency_pct: Option<f64>,
    /// The hosts, in the session's order.
    pub hosts: Vec<HostDevice>,
}

fn gib_per_s(b: Option<BytesPerSec>) -> Option<f64> {
    b.map(|b| b.bytes_per_s() / GIB as f64)
}

/// One host's device as JSON: XProf's `get_device_information` fields with their units in
/// the keys (`peak_flop_rate` in GFLOP/s, bandwidths in GiB/s per core), `null` where the
/// device has no such memory.
fn host_json(h: &HostDevice) -> Value {
    let Some(chip) = &h.chip else {
        return json!({"hostname": h.host, "device_type": null, "chip": null, "devices": h.devices});
    };
    let p = chip.peaks();
    json!({
        "hostname": h.host,
        "device_type": chip.device_type(),
        "chip": chip.name(),
        "devices": h.devices,
        "cores_per_chip": chip.cores_per_chip(),
        "peak_flop_rate_gflop_per_s": p.flops.per_s() / 1e9,
        "peak_flop_rate_source": chip.flops_source().as_str(),
        "peak_hbm_bw_gib_per_s": gib_per_s(Some(p.hbm)),
        "peak_hbm_bw_source": chip.hbm_source().as_str(),
        "reported_hbm_bw_gib_per_s": gib_per_s(chip.reported_hbm()),
        "hbm_ridge_point_flop_per_byte": chip.ridge_point().get(),
        "peak_vmem_read_bw_gib_per_s": gib_per_s(p.vmem_read),
        "peak_vmem_write_bw_gib_per_s": gib_per_s(p.vmem_write),
        "peak_cmem_read_bw_gib_per_s": gib_per_s(p.cmem_read),
        "peak_cmem_write_bw_gib_per_s": gib_per_s(p.cmem_write),
        "peak_sram_read_bw_gib_per_s": gib_per_s(p.sram_read),
        "peak_sram_write_bw_gib_per_s": gib_per_s(p.sram_write),
        "hbm_capacity_bytes": chip.hbm_capacity().map(|b| b.0),
    })
}

/// The `device --json` document: `{"hosts":[{"hostname","device_type","chip","devices",
/// "cores_per_chip","peak_flop_rate_gflop_per_s","peak_flop_rate_source","peak_hbm_bw_gib_per_s","peak_hbm_bw_source",
/// "reported_hbm_bw_gib_per_s","hbm_ridge_point_flop_per_byte","peak_{vmem,cmem,sram}_{read,write}_bw_gib_per_s",
/// "hbm_capacity_bytes"}],"kpis":{...}}`. The peaks are per core and are the ones every
/// utilisation divides by (docs/metrics.md); `reported_hbm_bw_gib_per_s` is the profile's own
/// figure where it is below the datasheet's (XProf divides by that one), else `null`; each
/// peak's `_source` says where it came from (`profile`, `derived`, `catalogue`). The
/// `kpis` are the scan's figures under the scan's names, plus `xprof_roofline_efficiency_pct`.
pub fn device_json(d: &DeviceInfo) -> Value {
    let m = &d.metrics;
    json!({
        "hosts": d.hosts.iter().map(host_json).collect::<Vec<_>>(),
        "kpis": {
            "device": d.device,
            "device_type": d.device_type,
            "cores": d.cores,
            "time_base": m.time_base,
            "step_count": m.step_count,
            "step_time_ms_mean": m.step_time_ms_mean,
            "device_duty_cycle_pct": m.device_duty_cycle_pct,
            "flops_utilization_pct": m.flops_utilization_pct,
            "xprof_flops_utilization_pct": m.xprof_flops_utilization_pct,
            "hbm_utilization_pct": m.hbm_utilization_pct,
            "roofline_efficiency_pct": m.roofline_efficiency_pct,
            "xprof_roofline_efficiency_pct": d.xprof_roofline_efficiency_pct,
            "bound_by": m.bound_by,
            "operational_intensity_flop_per_byte": m.operational_intensity_flop_per_byte,
            "memory_peak_bytes": m.memory_peak_bytes,
            "memory_capacity_bytes": m.memory_capacity_bytes,
            "memory_peak_pct": m.memory_peak_pct,
            "utilization_unknown": m.utilization_unknown,
        },
    })
}

/// The device and key figures as text.
pub fn device_text(d: &DeviceInfo) -> String {
    let mut out = String::new();
    let opt = |v: Option<f64>, unit: &str| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}{unit}"));
    for h in &d.hosts {
        let Some(chip) = &h.chip else {
            line(&mut out, format_args!("host {}: no accelerator", h.host));
            continue;
        };
        let p = chip.peaks();
        line(
            &mut out,
            format_args!(
                "host {}: {} ({}), {} device(s), {} core(s) per chip",
                h.host,
                chip.name(),
                chip.device_type().unwrap_or("no device type"),
                h.devices,
                chip.cores_per_chip()
            ),
        );
        line(
            &mut out,
            format_args!(
                "  peak {:.1} TFLOP/s, HBM {:.1} GiB/s{} per core, ridge {:.1} FLOP/byte",
                p.flops.per_s() / 1e12,
                p.hbm.bytes_per_s() / GIB as f64,
                gib_per_s(chip.reported_hbm()).map_or(String::new(), |r| format!(" (profile reports {r:.1})")),
                chip.ridge_point().get()
            ),
        );
        if let Some(c) = chip.hbm_capacity() {
            line(&mut out, format_args!("  HBM capacity {:.2} GiB", c.0 as f64 / GIB as f64));
        }
    }
    let m = &d.metrics;
    line(
        &mut out,
        format_args!(
            "session: {}{}, {} core(s), {} {} of {} ms mean",
            d.device,
            d.device_type.as_deref().map_or(String::new(), |t| format!(" ({t})")),
            d.cores,
            m.step_count,
            m.time_base,
            opt(m.step_time_ms_mean, "")
        ),
    );
    // Unknown, not zero, where no op carries a cost (`Metrics::utilization_unknown`).
    let unknown = m.utilization_unknown.is_some();
    let util = |v: Option<f64>| if unknown { "unknown".to_owned() } else { opt(v, " %") };
    line(
        &mut out,
        format_args!(
            "  duty cycle {}  FLOP utilisation {} (XProf {})  HBM {}  roofline efficiency {} (XProf {})  bound by {}",
            opt(m.device_duty_cycle_pct, " %"),
            util(m.flops_utilization_pct),
            util(m.xprof_flops_utilization_pct),
            util(m.hbm_utilization_pct),
            util(m.roofline_efficiency_pct),
            util(d.xprof_roofline_efficiency_pct),
            m.bound_by.as_deref().unwrap_or(if unknown { "unknown" } else { "-" })
        ),
    );
    if let Some(peak) = m.memory_peak_bytes {
        line(
            &mut out,
            format_args!(
                "  memory peak {:.2} GiB of {} ({})",
                peak as f64 / GIB as f64,
                m.memory_capacity_bytes.map_or("-".to_owned(), |c| format!("{:.2} GiB", c as f64 / GIB as f64)),
                opt(m.memory_peak_pct, " %")
            ),
        );
    }
    out
}
