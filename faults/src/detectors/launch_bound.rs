//! `launch_bound`: on GPUs, the device idles between short kernels while the host launches the
//! next ones.

use xlens_roofline::{OpSource, Span, copy_kind};
use xlens_xplane::Picos;

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LaunchBound;

const META: DetectorMeta = DetectorMeta {
    id: "launch_bound",
    title: "The GPU waits for kernel launches",
    severity: Severity::P1,
    needs: &[Need::GpuStreams, Need::Steps],
    doc: DetectorDoc {
        detects: "Stretches of short GPU kernels separated by short idle gaps: each gap lies between two kernels of \
                  the same GPU, is shorter than `launch_bound.max_gap_us`, and is followed by a kernel shorter than \
                  `launch_bound.max_kernel_us`. The GPU is waiting for the host to launch the next kernel (each \
                  launch costs the host microseconds; a kernel that runs for fewer than that leaves the device \
                  idle). The host's launch calls (`cudaLaunchKernel`, `cuLaunchKernel`, `hipModuleLaunchKernel`, \
                  ...) are counted beside.",
        why: "A launch-bound step does not get faster with a faster GPU: its time is the host's launch rate times \
              the kernel count. It is the signature of many tiny ops (op-by-op execution, Python loops around small \
              jitted functions, unfused elementwise chains) and of small batches.",
        evidence: "Idle time in launch gaps per step and its share, kernels per step per GPU, the median kernel \
                   duration and median gap, the share of kernels shorter than the threshold, and the host's launch \
                   calls per step with their mean duration.",
        thresholds: "Report when launch gaps are at least `launch_bound.min_pct_of_step` (default 5) % of the step. \
                     A gap counts when it is under `launch_bound.max_gap_us` (default 100) µs and the kernel after it \
                     under `launch_bound.max_kernel_us` (default 20) µs. Severity P1, P0 from 20 % of the step, P2 \
                     under 2 %.",
        fix: "Launch fewer, larger kernels: compile the whole step as one program (not op by op), replace Python \
              loops over small arrays by loops the compiler sees or by batching, let the compiler fuse elementwise \
              chains, grow the per-device batch, and record the step as a CUDA graph so the host launches a graph, \
              not each kernel.",
        fix_lines: FixLines {
            jax: "jit the whole step, replace Python loops by `jax.lax.scan` / `vmap`, and keep XLA's command \
                  buffers on (`--xla_gpu_enable_command_buffer`, on by default in recent XLA for fusions and library \
                  calls).",
            tensorflow: "compile the step with `tf.function(jit_compile=True)` so XLA fuses its ops (without XLA, \
                         TensorFlow launches at least one kernel per op), use `tf.while_loop` or `tf.vectorized_map` \
                         instead of Python loops, and raise `steps_per_execution` in Keras's `model.compile`.",
            pytorch_xla: "cut one graph per step with `xm.mark_step()` (not per op), keep ops that fall back to the \
                          CPU out of the step (`torch_xla.debug.metrics.short_metrics_report()` counts them as \
                          `aten::` ops), and keep shapes fixed so graphs are reused.",
        },
    },
};

impl Detector for LaunchBound {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host, config)?;
        let Some(impact) = score(host, &measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, impact, config));
        Ok(())
    }
}

/// What the GPU streams show: the kernels inside the steps and the launch gaps between them.
struct Measured {
    /// The step unit (`step`, ...).
    unit: &'static str,
    /// Steps (at least one) and GPUs (at least one).
    n: f64,
    devices: f64,
    /// Idle in gaps shorter than a launch before kernels shorter than a launch.
    launch_idle: Picos,
    kernels: usize,
    /// Kernels shorter than `max_kernel_us`.
    short: usize,
    /// Kernel durations and gaps between kernels, each with its middle value in its sorted place
    /// (what [`median`] reads).
    durations: Vec<Picos>,
    gaps: Vec<Picos>,
}

/// Reads each GPU's kernels inside the steps and the gaps between them.
fn measure(host: &HostProfile, config: &ScanConfig) -> Result<Measured, Skip> {
    measure_reading(host, config, true)
}

/// [`measure`]; `streams_alone`: a GPU whose kernels all come from one stream in order is read
/// straight from it (else every GPU's kernels are gathered and sorted; the tests compare both).
fn measure_reading(host: &HostProfile, config: &ScanConfig, streams_alone: bool) -> Result<Measured, Skip> {
    let t = &config.thresholds.launch_bound;
    let ops = host.host_ops();
    if ops.source != OpSource::GpuStreams {
        return Err(Skip::because(Need::GpuStreams.missing()));
    }
    let steps = host.steps().map_err(Skip::because)?;
    let unit = TimeBase::of(host).unit();
    let windows = evidence::union(steps.steps.iter().map(|s| Span::new(s.start, s.end())).collect());
    let max_gap = Picos((t.max_gap_us * 1e6) as i64);
    let max_kernel = Picos((t.max_kernel_us * 1e6) as i64);
    // Copies or kernels, decided once per interned name.
    let is_copy: Vec<bool> = ops.names.iter().map(|n| copy_kind(n).is_some()).collect();
    let kernels_of = |line_ops| kernels_in(line_ops, &is_copy, &windows);
    // Which GPU each line's kernels run on and whether they come in (start, end) order: a GPU
    // whose kernels are those of one such line (a stream) is read straight from it; the others'
    // are gathered and sorted. Each line is walked once on the guess that it is such a stream,
    // its GPU's only one (gpu300's eight: a second walk of 1.9 million kernels took a fifth of
    // the detector); a profile where the guess fails is gathered again below.
    let lines: Vec<&[xlens_roofline::HostOp]> = ops.by_line().map(|(_, line_ops)| line_ops).collect();
    let mut lines_of: std::collections::BTreeMap<i64, Vec<(usize, bool)>> = std::collections::BTreeMap::new();
    // (Room for every op reserved, not touched: pages are taken as kernels are pushed.)
    let mut guessed = Gather::new(max_gap, max_kernel, ops.len());
    let mut total = 0usize;
    for (at, line_ops) in lines.iter().enumerate() {
        let (mut devices, mut in_order, mut last) = (Vec::<i64>::new(), true, None);
        // Consecutive kernels mostly share a context: its device is looked up when it changes.
        let mut last_context = None;
        let mut stream = guessed.stream(&windows);
        for op in kernels_of(line_ops) {
            total += 1;
            if last_context != Some(op.context) {
                last_context = Some(op.context);
                let device = ops.context(op).core;
                if !devices.contains(&device) {
                    devices.push(device);
                }
            }
            in_order &= last.is_none_or(|l| l <= (op.start, op.end));
            last = Some((op.start, op.end));
            stream.span(op.start, op.end);
        }
        // A line of several GPUs is gathered for each of them.
        let alone = devices.len() == 1 && in_order;
        for device in devices {
            lines_of.entry(device).or_default().push((at, alone));
        }
    }
    let guess_held = streams_alone && lines_of.values().all(|of| matches!(of.as_slice(), [(_, true)]));
    let gathered = if guess_held {
        guessed
    } else {
        let mut all = Gather::new(max_gap, max_kernel, total);
        for (&device, of_device) in &lines_of {
            let mut stream = all.stream(&windows);
            match of_device.as_slice() {
                &[(at, true)] if streams_alone => kernels_of(lines[at]).for_each(|op| stream.span(op.start, op.end)),
                _ => {
                    let mut spans: Vec<(Picos, Picos)> = of_device
                        .iter()
                        .flat_map(|&(at, _)| kernels_of(lines[at]).filter(|op| ops.context(op).core == device))
                        .map(|op| (op.start, op.end))
                        .collect();
                    // A GPU's streams come one after the other, each in start order: a stable
                    // sort merges those runs instead of sorting from scratch (equal spans are
                    // indistinguishable).
                    spans.sort();
                    spans.into_iter().for_each(|(s, e)| stream.span(s, e));
                }
            }
        }
        all
    };
    let Gather { launch_idle, kernels, short, mut durations, mut gaps, .. } = gathered;
    let devices = lines_of.len().max(1) as f64;
    let n = steps.steps.len().max(1) as f64;
    for v in [&mut durations, &mut gaps] {
        if !v.is_empty() {
            let middle = v.len() / 2;
            v.select_nth_unstable(middle);
        }
    }
    Ok(Measured { unit, n, devices, launch_idle, kernels, short, durations, gaps })
}

/// What [`measure`] adds up over the GPUs' kernels.
struct Gather {
    max_gap: Picos,
    max_kernel: Picos,
    launch_idle: Picos,
    kernels: usize,
    short: usize,
    durations: Vec<Picos>,
    gaps: Vec<Picos>,
}

impl Gather {
    fn new(max_gap: Picos, max_kernel: Picos, capacity: usize) -> Gather {
        Gather {
            max_gap,
            max_kernel,
            launch_idle: Picos::ZERO,
            kernels: 0,
            short: 0,
            durations: Vec::with_capacity(capacity),
            gaps: Vec::with_capacity(capacity),
        }
    }

    /// One GPU's kernels, to be given in start order.
    fn stream<'g>(&'g mut self, windows: &'g [Span]) -> Stream<'g> {
        Stream { gather: self, busy_until: None, in_steps: evidence::IntervalCursor::new(windows) }
    }
}

/// One GPU's kernels added to a [`Gather`] as they come, by start.
struct Stream<'g> {
    gather: &'g mut Gather,
    busy_until: Option<Picos>,
    /// The steps that hold each gap's start, found from the last gap's (a GPU's spans come by
    /// start, so `busy_until` only grows).
    in_steps: evidence::IntervalCursor<'g>,
}

impl Stream<'_> {
    fn span(&mut self, s: Picos, e: Picos) {
        let g = &mut *self.gather;
        g.kernels += 1;
        g.durations.push(e - s);
        if e - s <= g.max_kernel {
            g.short += 1;
        }
        if let Some(b) = self.busy_until
            && s > b
        {
            let gap = s - b;
            g.gaps.push(gap);
            // A gap shorter than a launch, before a kernel shorter than a launch: the host's pace.
            if gap <= g.max_gap && e - s <= g.max_kernel && self.in_steps.contains(b) {
                g.launch_idle += gap;
            }
        }
        self.busy_until = Some(self.busy_until.map_or(e, |b| b.max(e)));
    }
}

/// A line's kernels (not copies) inside the steps (`windows`), in its order.
fn kernels_in<'a>(
    line_ops: &'a [xlens_roofline::HostOp],
    is_copy: &'a [bool],
    windows: &'a [Span],
) -> impl Iterator<Item = &'a xlens_roofline::HostOp> + 'a {
    let mut in_steps = evidence::IntervalCursor::new(windows);
    line_ops
        .iter()
        .filter(move |op| !is_copy.get(op.name as usize).copied().unwrap_or(false) && in_steps.contains(op.start))
}

/// The idle in launch gaps per step; `None` when under the threshold share of the step.
fn score(host: &HostProfile, m: &Measured, config: &ScanConfig) -> Option<Impact> {
    let impact = Impact::of(m.launch_idle.as_ms_f64() / m.n / m.devices, host.step_ms());
    if m.kernels == 0 || impact.pct_of_step < config.thresholds.launch_bound.min_pct_of_step {
        return None;
    }
    Some(impact)
}

/// The middle value of durations (sorted, or with the middle one in its sorted place).
fn median(v: &[Picos]) -> Picos {
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The finding: the idle in launch gaps, the kernels per step and their durations, the launch calls.
fn describe(detector: &LaunchBound, host: &HostProfile, m: &Measured, impact: Impact, config: &ScanConfig) -> Finding {
    let t = &config.thresholds.launch_bound;
    let (unit, n, devices, kernels, short, durations) = (m.unit, m.n, m.devices, m.kernels, m.short, &m.durations);
    let mut evidence = vec![
        Evidence::metric("launch_gap_time", format!("idle in launch gaps per {unit}"), impact.ms_per_step, "ms"),
        Evidence::metric("launch_gap_share", format!("launch gap share of the {unit}"), impact.pct_of_step, "%"),
        Evidence::metric(
            "kernels_per_gpu",
            format!("kernels per {unit} per GPU"),
            kernels as f64 / n / devices,
            "count",
        ),
        Evidence::metric("kernel_duration_median", "median kernel duration", median(durations).as_us_f64(), "us"),
        Evidence::metric("kernel_gap_median", "median gap between kernels", median(&m.gaps).as_us_f64(), "us"),
        Evidence::metric(
            "short_kernel_share",
            format!("kernels shorter than {} us", t.max_kernel_us),
            100.0 * short as f64 / kernels as f64,
            "%",
        ),
    ];
    if let Some((count, mean)) = launch_calls(host) {
        evidence.push(Evidence::note(format!(
            "the host made {:.0} kernel launch calls per {unit}, {:.2} us each on average",
            count as f64 / n,
            mean.as_us_f64()
        )));
    }
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    let what = format!(
        "Each GPU idles {:.3} ms per {unit} ({:.1} % of the {unit}) in gaps between short kernels: {:.0} kernels \
             per {unit}, half of them under {:.1} us, launched faster than the host can issue them.",
        impact.ms_per_step,
        impact.pct_of_step,
        kernels as f64 / n / devices,
        durations.get(durations.len() / 2).copied().unwrap_or_default().as_us_f64()
    );
    Finding::new(detector, severity, what, evidence, impact)
}

/// Host kernel-launch API calls (on the host threads, or on the `/host:CUPTI` plane where XLA's
/// CUPTI collector writes them): their count and mean duration.
fn launch_calls(host: &HostProfile) -> Option<(usize, Picos)> {
    let (mut count, mut total) = (0usize, Picos::ZERO);
    let space = host.space();
    let planes = [space.host_threads(), space.plane_by_name(xlens_xplane::names::plane::CUPTI)];
    for plane in planes.into_iter().flatten() {
        let mask =
            plane.metadata_mask(|m| m.name().contains("LaunchKernel") || m.name().contains("LaunchCooperativeKernel"));
        if mask.is_empty() {
            continue;
        }
        for line in plane.lines() {
            for ev in line.events_where(plane, &mask).map_while(|e| e.ok()) {
                count += 1;
                total += ev.duration();
            }
        }
    }
    (count > 0).then(|| (count, Picos(total.0 / count as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU read straight from its one stream measures what its kernels gathered and sorted
    /// measure: the fixtures, and the launch-bound one with its kernels spread over two streams
    /// of each of two GPUs (gathered then, from two lines each).
    #[test]
    fn streams_read_alone_measure_what_gathered_kernels_measure() {
        use xlens_testkit::gpu::{GpuSpec, gpu_fixture, gpu_profile};
        let mut two_streams = gpu_fixture("gpu_launch_bound").unwrap();
        two_streams.devices = 2;
        for (i, k) in two_streams.program.kernels.iter_mut().enumerate() {
            k.stream += (i % 2) as i64;
        }
        let specs: Vec<GpuSpec> = ["gpu_healthy", "gpu_launch_bound", "gpu_exposed_collective", "gpu_memcpy_stall"]
            .into_iter()
            .filter_map(gpu_fixture)
            .chain([two_streams])
            .collect();
        let config = ScanConfig::default();
        for spec in specs {
            let space = xlens_xplane::Space::parse(gpu_profile(&spec).into()).unwrap();
            let host = HostProfile::new("gpu", space);
            let (Ok(alone), Ok(gathered)) =
                (measure_reading(&host, &config, true), measure_reading(&host, &config, false))
            else {
                panic!("no measure for seed {}", spec.seed);
            };
            let key = |m: &Measured| {
                (m.kernels, m.short, m.launch_idle, m.devices, median(&m.durations), median(&m.gaps), m.gaps.len())
            };
            assert!(alone.kernels > 0);
            assert_eq!(key(&alone), key(&gathered), "seed {}", spec.seed);
        }
    }
}
