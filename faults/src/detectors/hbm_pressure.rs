//! `hbm_pressure`: a program's memory peak is close to the device's HBM capacity (OOM risk).

use xlens_hlo::{MemoryStats, Module};
use xlens_xplane::names;

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct HbmPressure;

const META: DetectorMeta = DetectorMeta {
    id: "hbm_pressure",
    title: "The memory peak is close to the HBM capacity",
    severity: Severity::P1,
    needs: &[Need::Memory],
    doc: DetectorDoc {
        detects: "A compiled program whose static HBM peak (XProf's memory viewer: the heap-simulator peak of the \
                  buffer assignment plus parameters, outputs and constants, `Module::hbm_memory_stats`) is close \
                  to the HBM capacity of the device it runs on: the device plane's `memory_size` stat when the \
                  profile reports it, else the chip catalogue's HBM per chip, the capacity the report's health \
                  snapshot uses (a JAX device is a whole chip on single-TensorCore and megacore chips: v5e, v6e, \
                  v4, v5p).",
        why: "A program near the HBM limit is one batch-size, sequence-length or XLA-version change away from a \
              RESOURCE_EXHAUSTED error, and XLA already trades speed for memory close to the limit (more \
              rematerialisation, less prefetching). OOM risk is critical whatever the step time: this detector \
              reports no time impact and its severity follows the fraction of capacity, not the step.",
        evidence: "The peak and the capacity per device (GiB) and their ratio; what the peak is made of \
                   (parameters, donated parameters, outputs, the temporary heap at its peak, constants); the largest \
                   buffers live at the peak with the HLO instruction that defines them and its JAX source line; \
                   padding at the peak; the program it concerns.",
        thresholds: "Report when the peak is at least `hbm_pressure.min_peak_fraction` (default 0.85) of the \
                     capacity; P0 at or above `hbm_pressure.p0_peak_fraction` (default 0.95), else P1 (critical by \
                     nature: not lowered for a small time impact). Every program with a buffer assignment is checked; \
                     the one closest to the limit is reported.",
        fix: "Free device memory: donate the buffers the step overwrites so inputs and outputs share memory; \
              rematerialise activations instead of keeping them for the backward pass; shard parameters and \
              optimizer state over the data axis (FSDP/ZeRO); keep parameters or optimizer moments in bf16; lower \
              the per-device batch and accumulate gradients over micro-batches; offload optimizer state to host \
              memory where supported. Check the largest buffers below first.",
        fix_lines: FixLines {
            jax: "`jax.jit(..., donate_argnums=...)` for params and optimizer state, `jax.checkpoint` with a policy \
                  such as `dots_with_no_batch_dims_saveable`, and the state sharded with a `NamedSharding` over the \
                  data axis.",
            tensorflow: "`tf.recompute_grad` around blocks to rematerialise them, a mixed-precision policy \
                         (`mixed_bfloat16`, or `mixed_float16` on GPUs), a smaller batch with gradient accumulation, \
                         and DTensor layouts that shard the variables over the devices.",
            pytorch_xla: "`torch_xla.utils.checkpoint.checkpoint` around blocks, `XlaFullyShardedDataParallel` to \
                          shard parameters and optimizer state, and bf16 through `torch_xla.amp.autocast`.",
        },
    },
};

const GIB: f64 = (1u64 << 30) as f64;

impl Detector for HbmPressure {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host)?;
        let Some(severity) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, severity, config));
        Ok(())
    }
}

/// A program's HBM peak: (fraction of capacity, is not main, module, stats).
type Candidate<'a> = (f64, bool, &'a Module, MemoryStats);

/// What the profile shows: the device's HBM capacity and each program's replayed peak.
struct Measured<'a> {
    capacity: u64,
    /// Where the capacity comes from.
    capacity_source: String,
    /// Highest fraction first, the main program on ties; never empty.
    candidates: Vec<Candidate<'a>>,
    /// Programs whose buffer assignment could not be replayed.
    problems: Vec<String>,
}

/// Reads the HBM capacity and replays every program's buffer assignment.
fn measure(host: &HostProfile) -> Result<Measured<'_>, Skip> {
    let (capacity, capacity_source) = device_capacity(host).ok_or_else(|| Skip::because(Need::Memory.missing()))?;
    if capacity == 0 {
        return Err(Skip::because("the device reports an HBM capacity of 0"));
    }
    let main = host.main_module().and_then(|m| m.program_id());
    let mut problems = Vec::new();
    // (fraction, is not main, module, stats); highest fraction first, the main program on ties.
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for module in host.modules() {
        match module.hbm_memory_stats() {
            Ok(Some(stats)) => {
                let fraction = stats.peak_bytes() as f64 / capacity as f64;
                candidates.push((fraction, module.program_id() != main, module, stats));
            }
            Ok(None) => {}
            Err(e) => problems.push(format!("{}: {e}", module.display_name())),
        }
    }
    if candidates.is_empty() {
        return Err(Skip::because(match problems.first() {
            Some(p) => format!("no buffer assignment could be replayed ({p})"),
            None => "no program carries a buffer assignment".to_owned(),
        }));
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.program_id().cmp(&b.2.program_id())));
    Ok(Measured { capacity, capacity_source, candidates, problems })
}

/// The severity of the highest peak (P0 from `p0_peak_fraction`); `None` below `min_peak_fraction`.
fn score(m: &Measured<'_>, config: &ScanConfig) -> Option<Severity> {
    let t = &config.thresholds.hbm_pressure;
    let fraction = m.candidates[0].0;
    if fraction < t.min_peak_fraction {
        return None;
    }
    Some(if fraction >= t.p0_peak_fraction { Severity::P0 } else { META.severity })
}

/// The evidence: the peak against the capacity, what makes it, the largest buffers, the other programs.
fn evidence_of(m: &Measured<'_>, config: &ScanConfig) -> Vec<Evidence> {
    let t = &config.thresholds.hbm_pressure;
    let (capacity, capacity_source, candidates) = (m.capacity, &m.capacity_source, &m.candidates);
    let (fraction, _, module, stats) = &candidates[0];
    let peak = stats.peak_bytes();
    let gib = |b: u64| b as f64 / GIB;
    let mut evidence = vec![
        Evidence::metric("memory_peak", "HBM peak", peak as f64, "bytes"),
        Evidence::metric("hbm_capacity", "HBM capacity per device", capacity as f64, "bytes"),
        Evidence::metric("memory_peak_share", "peak share of capacity", 100.0 * fraction, "%"),
        Evidence::note(format!(
            "{} peaks at {:.2} GiB of {:.2} GiB ({capacity_source}): {:.2} GiB of headroom",
            module.display_name(),
            gib(peak),
            gib(capacity),
            (capacity as f64 - peak as f64) / GIB
        )),
        Evidence::note(format!(
            "the peak is parameters {:.2} GiB (donated {:.2} GiB), outputs {:.2} GiB, temporaries at the heap \
                 peak {:.2} GiB, constants {:.2} GiB",
            gib(stats.argument_bytes),
            gib(stats.alias_bytes),
            gib(stats.output_bytes),
            gib(stats.heap_peak_bytes),
            gib(stats.constant_bytes)
        )),
    ];
    if stats.heap_padding_bytes() > 0 {
        evidence.push(Evidence::metric(
            "heap_peak_padding_bytes",
            "layout padding at the heap peak",
            stats.heap_padding_bytes() as f64,
            "bytes",
        ));
    }
    buffer_evidence(module, stats, &mut evidence);
    let others: Vec<String> = candidates[1..]
        .iter()
        .filter(|c| c.0 >= t.min_peak_fraction)
        .map(|c| format!("{} ({:.0} %)", c.2.display_name(), 100.0 * c.0))
        .collect();
    if !others.is_empty() {
        evidence.push(Evidence::note(format!("also near the limit: {}", others.join(", "))));
    }
    for p in &m.problems {
        evidence.push(Evidence::note(format!("not checked: {p}")));
    }
    evidence
}

/// The largest buffers live at the peak, and the largest parameters, with their instructions.
fn buffer_evidence(module: &Module, stats: &MemoryStats, evidence: &mut Vec<Evidence>) {
    let gib = |b: u64| b as f64 / GIB;
    // The largest buffers live at the peak, and the largest parameters.
    let mut buffers: Vec<(u64, Option<xlens_hlo::InstrId>, &str)> =
        stats.peak_buffers.iter().map(|b| (b.size, b.instruction, "temporary live at the peak")).collect();
    for p in module.entry_parameters() {
        let size = p.shape().byte_size();
        if size > 0 {
            buffers.push((size, Some(p.id()), "parameter"));
        }
    }
    buffers.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (size, instr, kind) in buffers.iter().take(5) {
        let name = instr.map_or("?", |i| module.instruction(i).name());
        evidence.push(Evidence::note(format!("{kind} {name}: {:.2} GiB", gib(*size))));
        if let Some(i) = instr {
            evidence.push(evidence::instruction(module, *i));
        }
    }
}

/// The finding: the program's peak against the device's HBM.
fn describe(
    detector: &HbmPressure,
    host: &HostProfile,
    m: &Measured<'_>,
    severity: Severity,
    config: &ScanConfig,
) -> Finding {
    let (fraction, _, module, stats) = &m.candidates[0];
    let (peak, capacity) = (stats.peak_bytes(), m.capacity);
    let gib = |b: u64| b as f64 / GIB;
    Finding::new(
        detector,
        severity,
        format!(
            "{} needs {:.2} GiB of HBM at its peak, {:.1} % of the {:.2} GiB a device has: a larger batch or \
                     sequence will run out of memory.",
            module.display_name(),
            gib(peak),
            100.0 * fraction,
            gib(capacity)
        ),
        evidence_of(m, config),
        Impact::of(0.0, host.step_ms()),
    )
}

/// HBM per device: the first device plane's `memory_size` stat, else the catalogue's per-chip
/// capacity (`Chip::hbm_capacity`, as the health snapshot). Returns the bytes and their source.
fn device_capacity(host: &HostProfile) -> Option<(u64, String)> {
    let plane = host.space().analysis_devices().first().copied();
    if let Some(bytes) = plane
        .and_then(|p| p.stat_by_name(names::stat::capability::MEMORY_SIZE))
        .and_then(|s| s.as_f64())
        .filter(|b| b.is_finite() && *b > 0.0)
    {
        return Some((bytes as u64, "the device's memory_size".to_owned()));
    }
    let chip = host.chip()?;
    Some((chip.hbm_capacity()?.0, format!("{} HBM per chip", chip.name())))
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;
    use xlens_testkit::synth::{fixture, hlo_proto_with_buffers, tpu_profile};
    use xlens_xplane::Space;

    use crate::testing::{report_of, run_on, testdata};
    use crate::{Profile, ScanConfig, Severity, scan};

    #[test]
    fn finds_a_program_that_fills_the_v5e_hbm() {
        let findings = run_on("hbm_pressure", &testdata("tpu/tpu_hbm_pressure"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // 12.25 GiB of parameters + 2.75 GiB of activations = 15 GiB of v5e's 16 GiB.
        assert_eq!(metric(f, "HBM peak"), (15u64 << 30) as f64);
        assert_eq!(metric(f, "HBM capacity per device"), (16u64 << 30) as f64);
        assert!((metric(f, "peak share of capacity") - 93.75).abs() < 1e-9);
        assert_eq!(f.severity, Severity::P1);
        let text: Vec<String> = f.evidence.iter().map(|e| e.to_string()).collect();
        let text = text.join("\n");
        assert!(text.contains("jit_train_step(1) peaks at 15.00 GiB of 16.00 GiB (TPU v5e HBM per chip)"), "{text}");
        assert!(
            text.contains(
                "parameters 12.25 GiB (donated 0.00 GiB), outputs 0.00 GiB, temporaries at the heap peak 2.75 GiB"
            ),
            "{text}"
        );
        // The largest buffers: the optimizer state parameter, then the convolution's activations.
        assert!(text.contains("parameter param.1: 8.00 GiB"), "{text}");
        assert!(text.contains("temporary live at the peak convolution.1: 1.50 GiB"), "{text}");
        assert!(
            text.contains("convolution.1 (convolution) from jit(train_step)/conv_general_dilated at model.py:41"),
            "{text}"
        );
        assert_eq!(f.impact.ms_per_step, 0.0);
    }

    #[test]
    fn a_peak_at_the_limit_is_p0() {
        let base = fixture("tpu_basic").unwrap();
        let hlo =
            hlo_proto_with_buffers("jit_train_step", &base.program, &[("param.0", 15 << 30)], &[("dot.2", 700 << 20)]);
        let spec = xlens_testkit::synth::SynthSpec { hlo_proto: Some(hlo), steps: 2, ..base };
        let space = Space::parse(tpu_profile(&spec).into()).unwrap();
        let report = scan(&Profile::from_space("h", space), &ScanConfig::only("hbm_pressure"));
        assert_eq!(report.findings.len(), 1, "{report:#?}");
        assert_eq!(report.findings[0].severity, Severity::P0);
        assert!(report.findings[0].what.contains("98.0 %"), "{}", report.findings[0].what);
    }

    #[test]
    fn programs_with_headroom_are_fine() {
        // tpu_healthy: 20 GiB of a v5p's 95 GiB; the others 3.5–11 GiB of a v5e's 16 GiB.
        for dir in [
            "tpu/tpu_healthy",
            "tpu/tpu_exposed_collective",
            "tpu/tpu_vector_bound",
            "tpu/tpu_dcn_tail",
            "tpu/tpu_sparsecore",
        ] {
            assert!(run_on("hbm_pressure", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    #[test]
    fn profiles_without_a_memory_view_are_skipped() {
        // tpu_basic carries no HLO; CPU captures have no device capacity.
        for dir in ["tpu/tpu_basic", "corpus/clean"] {
            let report = report_of("hbm_pressure", &testdata(dir));
            assert!(report.findings.is_empty(), "{dir}");
            assert!(report.skipped[0].reason.contains("no memory view"), "{dir}: {:?}", report.skipped);
        }
    }
}
