//! `device_idle`: the device runs nothing for a large share of the step (or of each module
//! execution, on profiles without step markers).

use xlens_roofline::Span;
use xlens_xplane::{Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DeviceIdle;

const META: DetectorMeta = DetectorMeta {
    id: "device_idle",
    title: "The device idles during the step",
    severity: Severity::P1,
    needs: &[Need::OpTimeline, Need::Steps, Need::DevicePeaks],
    doc: DetectorDoc {
        detects: "Step time in which no op runs on the device and the host is not known to be working for it: the \
                  idle part of the step anatomy (TPU cores; GPU streams; XLA:CPU threads), averaged over cores. On \
                  profiles without step markers the time base is each module execution (or the whole device window). \
                  The finding lists the longest idle gaps of the first device inside the steps and XProf's duty \
                  cycle over the whole capture.",
        why: "Idle device time is pure loss: the step takes as long as the host needs to feed, dispatch or \
              synchronise it. It is the usual face of input pipelines that do not keep up, host-side \
              synchronisation inside the loop (`block_until_ready`, `.item()`, printing device values), dispatch of \
              many small programs, and launch overhead on GPUs.",
        evidence: "The idle share and idle time per step, the device duty cycle, the steps with the most idle time, \
                   and the longest idle gaps on the first device's timeline.",
        thresholds: "Report when idle time is above `status.max_idle_pct` (default 10) % of the step, the rule that \
                     makes the status NEEDS_ATTENTION. Severity P1, P0 from 20 % of the step.",
        fix: "Keep the device fed: prefetch the next batch while the step runs (a background data loader, double \
              buffering, the next batch copied to the device ahead of time), remove host synchronisation from the \
              training loop (no reads or prints of device values per step; log every N steps), run the whole step as \
              one compiled program instead of several small ones, and on GPUs reduce launch overhead (larger fused \
              kernels, CUDA graphs). The other findings of this report name the specific cause when they recognise \
              it (input_starvation, barrier_in_loop, host_callback_stall, launch_bound).",
        fix_lines: FixLines {
            jax: "`jax.device_put` the next batch ahead of time, no `block_until_ready`, `.item()`, `float(x)` or \
                  printing of device arrays per step, jit the whole step instead of several small functions, and on \
                  GPUs let XLA record command buffers.",
            tensorflow: "`dataset.prefetch(tf.data.AUTOTUNE)` (under `tf.distribute`, \
                         `experimental_distribute_dataset` prefetches to the devices), no `.numpy()` or printing of \
                         tensors per step, the whole step in one `tf.function` (`jit_compile=True` fuses its kernels \
                         with XLA), and `steps_per_execution` in Keras's `model.compile`.",
            pytorch_xla: "load batches through `torch_xla.distributed.parallel_loader.MpDeviceLoader`, which copies \
                          the next batch while the step runs and calls `xm.mark_step()`, and keep `.item()` and \
                          `.cpu()` out of the step.",
        },
    },
};

impl Detector for DeviceIdle {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let max_idle = config.thresholds.status.max_idle_pct;
        let anatomy = host.anatomy().map_err(Skip::because)?;
        let steps = host.steps().map_err(Skip::because)?;
        let total: Picos = anatomy.iter().map(|a| a.step_time).sum();
        let idle: Picos = anatomy.iter().map(|a| a.idle).sum();
        if total.0 <= 0 || anatomy.is_empty() {
            return Ok(());
        }
        let share = 100.0 * idle.0 as f64 / total.0 as f64;
        if share <= max_idle {
            return Ok(());
        }
        let unit = TimeBase::of(host).unit();
        let impact = Impact::of(idle.as_ms_f64() / anatomy.len() as f64, host.step_ms());
        let mut evidence = vec![
            Evidence::metric("idle_share", format!("share of the {unit} with no op and no host work"), share, "%"),
            Evidence::metric(
                "idle_time",
                format!("time with no op and no host work per {unit}"),
                impact.ms_per_step,
                "ms",
            ),
        ];
        if let Some(duty) = host.duty_cycle_pct() {
            evidence.push(Evidence::metric("duty_cycle", "device duty cycle over the capture", duty, "%"));
        }
        let mut worst: Vec<(usize, Picos)> = anatomy.iter().enumerate().map(|(i, a)| (i, a.idle)).collect();
        worst.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let names: Vec<String> = worst
            .iter()
            .take(3)
            .filter_map(|(i, t)| steps.steps.get(*i).map(|s| format!("{} ({:.3} ms idle)", s.name, t.as_ms_f64())))
            .collect();
        evidence.push(Evidence::note(format!("most idle {unit}s: {}", names.join(", "))));
        let windows: Vec<(Picos, Picos)> = steps.steps.iter().map(|s| (s.start, s.end())).collect();
        let (device, busy) = first_device_busy(host);
        for (start, duration) in longest_gaps(&busy, &windows, 3) {
            evidence.push(evidence::event_parts(host, &device, "idle", "no op running", start, duration));
        }
        // Above the idle threshold by construction: never P2.
        let severity = Severity::from_impact(impact.pct_of_step, META.severity).min(META.severity);
        let what = format!(
            "The device runs no op, and the host no work it could wait on, for {:.1} % of the {unit} ({:.3} ms per \
             {unit}; the health's idle also counts the host wait).",
            share, impact.ms_per_step
        );
        out.push(Finding::new(self, severity, what, evidence, impact));
        Ok(())
    }
}

/// The first device's name and the union of its op spans.
fn first_device_busy(host: &HostProfile) -> (String, Vec<Span>) {
    if let Some(plane) = host.space().tpu_tensor_cores().first() {
        return (plane.name().to_owned(), evidence::busy_union(plane, names::line::XLA_OPS));
    }
    let ops = host.host_ops();
    let Some(first) = ops.iter().map(|o| ops.context(o).core).min() else { return (String::new(), Vec::new()) };
    let spans = ops.iter().filter(|o| ops.context(o).core == first).map(|o| Span::new(o.start, o.end)).collect();
    let device = match ops.source {
        xlens_roofline::OpSource::GpuStreams => format!("/device:GPU:{first}"),
        xlens_roofline::OpSource::HostThreads => format!("device {first}"),
        xlens_roofline::OpSource::TfExecutor => "the TensorFlow executor threads".to_owned(),
    };
    (device, evidence::union(spans))
}

/// The `n` longest gaps between busy spans that lie inside the step windows (start, duration).
fn longest_gaps(busy: &[Span], windows: &[(Picos, Picos)], n: usize) -> Vec<(Picos, Picos)> {
    let mut gaps: Vec<(Picos, Picos)> = Vec::new();
    for &(lo, hi) in windows {
        let mut cursor = lo;
        let from = busy.partition_point(|b| b.end <= lo);
        for &Span { start: s, end: e } in busy[from..].iter().take_while(|b| b.start < hi) {
            if s > cursor {
                gaps.push((cursor, s - cursor));
            }
            cursor = cursor.max(e);
        }
        if cursor < hi {
            gaps.push((cursor, hi - cursor));
        }
    }
    gaps.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    gaps.truncate(n);
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_cut_to_the_windows() {
        let p = |a: i64, b: i64| (Picos(a), Picos(b));
        let busy = [p(10, 20), p(30, 40), p(70, 80)].map(Span::from);
        assert_eq!(longest_gaps(&busy, &[p(0, 50)], 5), vec![p(0, 10), p(20, 10), p(40, 10)]);
        assert_eq!(longest_gaps(&busy, &[p(35, 100)], 1), vec![p(40, 30)]);
    }
}
