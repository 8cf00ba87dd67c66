//! The `kernel_stats` example's output: per GPU kernel, its launches, durations and launch
//! parameters.

use super::line;

use serde_json::{Value, json};
use xlens_roofline::KernelStats;
use xlens_xplane::Picos;

/// The kernel statistics of one host.
#[derive(Debug)]
pub struct HostKernelStats {
    /// Host name.
    pub host: String,
    /// Its kernels.
    pub stats: KernelStats,
}

fn us(t: Picos) -> f64 {
    t.as_us_f64()
}

/// The `kernel_stats --json` document, one for the whole session:
/// `{"total_device_duration_us","kernel_time_us","kernels":[{"kernel_name","hlo_op","occurrences",
/// "total_duration_us","share_pct","avg_duration_us","min_duration_us","max_duration_us","registers_per_thread","static_shared_bytes",
/// "dynamic_shared_bytes","block":[x,y,z],"grid":[x,y,z],"occupancy_pct","uses_tensor_cores","host"}]}`.
/// Kernels are sorted by total duration over the session (longest first); `top` keeps the
/// first N (all when `None`). Launch fields are `null` for memory copies.
///
/// `total_device_duration_us` is XProf's: wall time any GPU of a host was busy, summed over
/// hosts. `kernel_time_us` is every launch's time added up (over all GPUs), the base of each
/// kernel's `share_pct`, so the shares add up to 100 % on a host of several GPUs too.
pub fn kernel_stats_json(hosts: &[HostKernelStats], top: Option<usize>) -> Value {
    let kernel_time: Picos = hosts.iter().map(|h| h.stats.kernel_time()).sum();
    kernel_stats_json_of(hosts, kernel_time, top)
}

/// [`kernel_stats_json`] of hosts whose kernels were cut to their longest (the HTML page keeps
/// those of each host), given the session's `kernel_time` before the cut: the rows and shares
/// of the kernels kept are those of the whole document.
pub fn kernel_stats_json_of(hosts: &[HostKernelStats], kernel_time: Picos, top: Option<usize>) -> Value {
    let total: Picos = hosts.iter().map(|h| h.stats.total_device_duration).sum();
    let share = |k: &xlens_roofline::KernelStat| {
        if kernel_time.0 > 0 { 100.0 * k.total.0 as f64 / kernel_time.0 as f64 } else { 0.0 }
    };
    let mut rows: Vec<(&str, &xlens_roofline::KernelStat)> =
        hosts.iter().flat_map(|h| h.stats.kernels.iter().map(move |k| (h.host.as_str(), k))).collect();
    rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)).then(a.1.kernel_name.cmp(&b.1.kernel_name)));
    let kernels: Vec<Value> = rows
        .iter()
        .take(top.unwrap_or(usize::MAX))
        .map(|(host, k)| {
            let d = k.details;
            json!({
                "kernel_name": k.kernel_name,
                "hlo_op": k.hlo_op,
                "occurrences": k.occurrences,
                "total_duration_us": us(k.total),
                "share_pct": share(k),
                "avg_duration_us": us(k.average()),
                "min_duration_us": us(k.min),
                "max_duration_us": us(k.max),
                "registers_per_thread": d.map(|d| d.registers_per_thread),
                "static_shared_bytes": d.map(|d| d.static_shared_bytes),
                "dynamic_shared_bytes": d.map(|d| d.dynamic_shared_bytes),
                "block": d.map(|d| d.block),
                "grid": d.map(|d| d.grid),
                "occupancy_pct": d.and_then(|d| d.occupancy_pct),
                "uses_tensor_cores": k.uses_tensor_cores,
                "host": host,
            })
        })
        .collect();
    json!({ "total_device_duration_us": us(total), "kernel_time_us": us(kernel_time), "kernels": kernels })
}

/// The kernel statistics as text: per host, the device time and the top kernels.
pub fn kernel_stats_text(hosts: &[HostKernelStats], top: usize) -> String {
    let mut out = String::new();
    for h in hosts {
        let s = &h.stats;
        line(&mut out, format_args!("host {}", h.host));
        if s.kernels.is_empty() {
            line(&mut out, format_args!("  no GPU kernels (the profile has no /device:GPU stream lines)"));
            continue;
        }
        line(
            &mut out,
            format_args!(
                "  device time {:.3} ms (any GPU busy, capture total) over {} kernel(s), {} launch(es); kernel \
                 time {:.3} ms (all launches on all GPUs added up)",
                s.total_device_duration.as_ms_f64(),
                s.kernels.len(),
                s.kernels.iter().map(|k| k.occurrences).sum::<u64>(),
                s.kernel_time().as_ms_f64()
            ),
        );
        line(
            &mut out,
            format_args!(
                "  {:>10} {:>7} {:>10} {:>6}  {:<14} {:<14} {:>4}  kernel (hlo op); totals over the capture, \
                 share of kernel time",
                "total ms", "calls", "avg us", "share", "grid", "block", "TC"
            ),
        );
        for k in s.kernels.iter().take(top) {
            let share = s.share_pct(k);
            let dims = |v: Option<[u32; 3]>| v.map_or("-".to_owned(), |[x, y, z]| format!("{x},{y},{z}"));
            line(
                &mut out,
                format_args!(
                    "  {:>10.3} {:>7} {:>10.3} {:>5.1}%  {:<14} {:<14} {:>4}  {}{}",
                    k.total.as_ms_f64(),
                    k.occurrences,
                    k.average().as_us_f64(),
                    share,
                    dims(k.details.map(|d| d.grid)),
                    dims(k.details.map(|d| d.block)),
                    if k.uses_tensor_cores { "yes" } else { "" },
                    crate::text::clip(&k.kernel_name, 80),
                    k.hlo_op.as_deref().map(|o| format!(" ({o})")).unwrap_or_default(),
                ),
            );
        }
        if s.kernels.len() > top {
            line(&mut out, format_args!("  ... {} more", s.kernels.len() - top));
        }
    }
    out
}
