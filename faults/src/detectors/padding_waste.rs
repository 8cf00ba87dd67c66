//! `padding_waste`: matmuls whose dimensions are not multiples of the hardware tile, so that a
//! large part of the work the matrix unit does (and of the memory their arrays occupy) is padding.

use std::collections::BTreeMap;

use xlens_hlo::{InstrId, Module, Opcode, Shape, TPU_LANES, Tile2D};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;
use xlens_hlo::layout::kernel_body;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct PaddingWaste;

const META: DetectorMeta = DetectorMeta {
    id: "padding_waste",
    title: "Matmul dimensions are not multiples of the hardware tile",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Matmuls (dots, and fusions containing one; convolutions by their bytes) whose dimensions are not \
                  multiples of the hardware tile: on a TPU the two minor dimensions of an array are stored in (8,128) \
                  tiles for 32-bit types, (16,128) for 16-bit and (32,128) for 8-bit, and the matrix unit works on \
                  128-wide tiles, so a dot of M x K by K x N does the work of M, K and N rounded up to the tile. Small \
                  or ragged dimensions (a batch of 8, widths of 129 or 130, head dims of 32) waste that padding.",
        why: "A dimension 1 past a multiple of 128 nearly doubles the tiles along it: the matmul runs at a fraction \
              of its FLOP rate and its arrays take more memory and bandwidth than their data. The waste is invisible \
              in the model code and in FLOP counts, which count only the useful work.",
        evidence: "Per padded matmul: its dimensions (batch, M, K, N), its MXU utilisation (useful / tiled FLOPs), the \
                   padded and logical bytes of its arrays (the HLO layout's tiles, else the default TPU tiles), its \
                   time per step, and the JAX op and source line; overall: the matmuls' time and share of the step, \
                   the share of their tiled FLOPs that is padding, and the estimated cost of the padding. On a CPU \
                   capture the figures are what these shapes would cost on TPU tiles (the CPU itself does not pad).",
        thresholds: "A matmul counts when at least `padding_waste.min_padding_fraction` (default 0.2) of its tiled work \
                     (FLOPs for a dot, bytes for a convolution) is padding. Reported when the padding of the counted \
                     matmuls costs at least `padding_waste.min_pct_of_step` (default 5) % of the step on a TPU \
                     capture (`padding_waste.min_pct_of_step_projected`, default 10, elsewhere), the cost being \
                     each matmul's time per step times its padding fraction (a d=128 transformer with 32-wide heads \
                     stays near 4 %); without an op timeline, when any matmul counts (severity P2). The impact is that \
                     cost; on a non-TPU capture it is a projection for TPU tiles and the severity stays at most P1.",
        fix: "Round the dimensions the model controls to tile multiples: hidden and feature widths to multiples of \
              128 (or 256 on MXUs of that size), batch per core to a multiple of 8 (16 for bf16), attention head \
              dims to 128 (fewer, wider heads), vocabulary and embedding tables padded to 128; pad once at the input \
              rather than letting every op pad. Dims just past a multiple (129, 130, 257) are the costliest.",
        fix_lines: FixLines {
            jax: "",
            tensorflow: "these are the `units`/`filters` of Keras layers, the batch size of `dataset.batch` (with \
                         `drop_remainder=True`), and the vocabulary size of `Embedding` layers.",
            pytorch_xla: "these are the widths of `nn.Linear`/`nn.Conv2d`/`nn.Embedding` and the `DataLoader` batch \
                          size (with `drop_last=True`).",
        },
    },
};

/// How much of one dot's tiled work is useful.
#[derive(Clone, Copy, Debug, PartialEq)]
struct DotTiles {
    batch: u64,
    m: u64,
    k: u64,
    n: u64,
    /// Useful FLOPs / FLOPs of the tiled dot.
    utilization: f64,
    useful_flops: f64,
}

fn round_up(v: u64, to: u64) -> u64 {
    if to <= 1 { v } else { v.div_ceil(to).saturating_mul(to) }
}

fn product(shape: &Shape, dims: impl Iterator<Item = usize>) -> u64 {
    dims.filter_map(|d| shape.dims().get(d).copied()).fold(1u64, |a, d| a.saturating_mul(d.max(0) as u64))
}

/// The tiled work of a dot: M (lhs free dims) is padded to the sublane tile of its element type,
/// K (contracting) and N (rhs free dims) to the 128 lanes.
fn dot_tiles(module: &Module, dot: InstrId) -> Option<DotTiles> {
    let instr = module.instruction(dot);
    let dn = instr.dot_dimension_numbers()?;
    let (&l, &r) = (instr.operands().first()?, instr.operands().get(1)?);
    let (lhs, rhs) = (module.instruction(l).shape(), module.instruction(r).shape());
    let idx = |v: &[i64]| -> Vec<usize> { v.iter().filter_map(|&d| usize::try_from(d).ok()).collect() };
    let (lb, lc, rb, rc) = (
        idx(&dn.lhs_batch_dimensions),
        idx(&dn.lhs_contracting_dimensions),
        idx(&dn.rhs_batch_dimensions),
        idx(&dn.rhs_contracting_dimensions),
    );
    let batch = product(lhs, lb.iter().copied());
    let k = product(lhs, lc.iter().copied());
    let m = product(lhs, (0..lhs.rank()).filter(|d| !lb.contains(d) && !lc.contains(d)));
    let n = product(rhs, (0..rhs.rank()).filter(|d| !rb.contains(d) && !rc.contains(d)));
    if batch == 0 || m == 0 || n == 0 || k == 0 {
        return None;
    }
    let sublanes = Tile2D::tpu_default(lhs.element_type()).sublanes;
    let useful = batch as f64 * m as f64 * n as f64 * k as f64;
    let tiled =
        batch as f64 * round_up(m, sublanes) as f64 * round_up(n, TPU_LANES) as f64 * round_up(k, TPU_LANES) as f64;
    Some(DotTiles { batch, m, k, n, utilization: useful / tiled, useful_flops: 2.0 * useful })
}

/// Logical and padded bytes of an instruction's operands and result.
fn array_bytes(module: &Module, id: InstrId) -> (u64, u64) {
    let instr = module.instruction(id);
    let shapes = std::iter::once(instr.shape()).chain(instr.operands().iter().map(|&o| module.instruction(o).shape()));
    shapes.fold((0u64, 0u64), |(l, p), s| (l.saturating_add(s.logical_bytes()), p.saturating_add(s.tpu_padded_bytes())))
}

/// One matmul kernel and what its padding costs.
#[derive(Debug)]
struct PaddedKernel<'m> {
    module: &'m Module,
    kernel: InstrId,
    /// The dots inside, with their tiles.
    dots: Vec<(InstrId, DotTiles)>,
    /// Fraction of the kernel's tiled work that is padding.
    waste: f64,
    logical_bytes: u64,
    padded_bytes: u64,
    ms: f64,
    count: f64,
}

fn matmul_kernels<'m>(module: &'m Module, times: Option<&BTreeMap<String, evidence::OpTime>>) -> Vec<PaddedKernel<'m>> {
    let mut out = Vec::new();
    for kernel in evidence::kernels(module) {
        let body = kernel_body(module, kernel);
        let matmuls: Vec<InstrId> = body
            .iter()
            .copied()
            .filter(|&i| matches!(module.instruction(i).opcode(), Opcode::Dot | Opcode::Convolution))
            .collect();
        if matmuls.is_empty() {
            continue;
        }
        let dots: Vec<(InstrId, DotTiles)> =
            matmuls.iter().filter_map(|&d| dot_tiles(module, d).map(|t| (d, t))).collect();
        let (logical_bytes, padded_bytes) =
            matmuls.iter().map(|&d| array_bytes(module, d)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        // FLOP-weighted over the dots; bytes for kernels whose matmuls are convolutions.
        let waste = if dots.len() == matmuls.len() {
            let useful: f64 = dots.iter().map(|(_, t)| t.useful_flops).fold(0.0, |a, b| a + b);
            let tiled: f64 = dots.iter().map(|(_, t)| t.useful_flops / t.utilization).fold(0.0, |a, b| a + b);
            if tiled > 0.0 { 1.0 - useful / tiled } else { 0.0 }
        } else if padded_bytes > 0 {
            1.0 - logical_bytes as f64 / padded_bytes as f64
        } else {
            0.0
        };
        let (ms, count) = match times {
            Some(t) => t.get(module.instruction(kernel).name()).map_or((0.0, 0.0), |o| (o.ms, o.count)),
            None => (0.0, 1.0),
        };
        if count <= 0.0 {
            continue;
        }
        out.push(PaddedKernel { module, kernel, dots, waste, logical_bytes, padded_bytes, ms, count });
    }
    out
}

impl Detector for PaddingWaste {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host, config)? else { return Ok(()) };
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, &measured, &score));
        Ok(())
    }
}

/// What the step's modules show: the matmul time and FLOPs, and the kernels padded past the threshold.
struct Measured<'a> {
    /// The step time, when the matmuls are timed.
    step_ms: Option<f64>,
    matmul_ms: f64,
    /// Useful and tiled FLOPs of all matmuls.
    useful_flops: f64,
    tiled_flops: f64,
    /// The kernels with at least the minimum padding fraction.
    padded: Vec<PaddedKernel<'a>>,
    on_tpu: bool,
    /// What the per-step figures are per.
    tb: TimeBase,
}

/// Reads the matmul kernels of the step's modules; `None` when none is padded enough.
fn measure<'a>(host: &'a HostProfile, config: &ScanConfig) -> Result<Option<Measured<'a>>, Skip> {
    let th = &config.thresholds.padding_waste;
    let modules = evidence::step_modules(host);
    if modules.is_empty() {
        return Err(Skip::because("no HLO module could be decoded"));
    }
    let mut all: Vec<PaddedKernel<'_>> = Vec::new();
    let mut timed = false;
    for module in modules {
        let times = evidence::op_times(host, module);
        timed |= times.is_some();
        all.extend(matmul_kernels(module, times.as_ref()));
    }
    let step_ms = host.step_ms().filter(|_| timed);
    let matmul_ms = all.iter().map(|k| k.ms).fold(0.0, |a, b| a + b);
    let useful_flops: f64 =
        all.iter().flat_map(|k| k.dots.iter().map(move |(_, t)| t.useful_flops * k.count)).fold(0.0, |a, b| a + b);
    let tiled_flops: f64 = all
        .iter()
        .flat_map(|k| k.dots.iter().map(move |(_, t)| t.useful_flops / t.utilization * k.count))
        .fold(0.0, |a, b| a + b);
    let padded: Vec<PaddedKernel<'_>> = all.into_iter().filter(|k| k.waste >= th.min_padding_fraction).collect();
    if padded.is_empty() {
        return Ok(None);
    }
    let on_tpu = host.device_kind() == xlens_xplane::DeviceKind::Tpu;
    let tb = TimeBase::of(host);
    Ok(Some(Measured { step_ms, matmul_ms, useful_flops, tiled_flops, padded, on_tpu, tb }))
}

/// What the padding costs, and the padded kernels' totals.
struct Score {
    /// Estimated padding time per step.
    cost: f64,
    padded_ms: f64,
    impact: Impact,
    /// Padded kernels per step.
    count: f64,
    /// Logical and tiled bytes of their arrays.
    logical: u64,
    padded_bytes: u64,
}

/// Prices the padding; `None` when it costs less than the threshold share of the step.
fn score(m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let th = &config.thresholds.padding_waste;
    let (padded, step_ms, on_tpu) = (&m.padded, m.step_ms, m.on_tpu);
    let cost = padded.iter().map(|k| k.ms * k.waste).fold(0.0, |a, b| a + b);
    let padded_ms = padded.iter().map(|k| k.ms).fold(0.0, |a, b| a + b);
    let impact = Impact::of(cost, step_ms);
    let min_pct = if on_tpu { th.min_pct_of_step } else { th.min_pct_of_step_projected };
    if step_ms.is_some() && impact.pct_of_step < min_pct {
        return None;
    }
    let count = padded.iter().map(|k| k.count).fold(0.0, |a, b| a + b);
    let (logical, padded_bytes) =
        padded.iter().fold((0u64, 0u64), |a, k| (a.0 + k.logical_bytes, a.1 + k.padded_bytes));
    Some(Score { cost, padded_ms, impact, count, logical, padded_bytes })
}

/// The evidence: the padded kernels' totals and times, and the costliest of them.
fn evidence_of(m: &Measured<'_>, s: &Score) -> Vec<Evidence> {
    let (step_ms, matmul_ms, useful_flops, tiled_flops, on_tpu, tb) =
        (m.step_ms, m.matmul_ms, m.useful_flops, m.tiled_flops, m.on_tpu, m.tb);
    let (count, logical, padded_bytes, padded_ms, cost) = (s.count, s.logical, s.padded_bytes, s.padded_ms, s.cost);
    let mut ev = vec![
        Evidence::metric("padded_matmul_kernels", format!("padded matmul kernels {}", tb.per()), count, "count"),
        Evidence::metric("logical_bytes", "logical bytes of their arrays", logical as f64, "bytes"),
        Evidence::metric("tiled_bytes", "tiled bytes of their arrays", padded_bytes as f64, "bytes"),
    ];
    if tiled_flops > 0.0 {
        ev.push(Evidence::metric(
            "padding_flops_share",
            "padding share of all matmul FLOPs on tiles",
            100.0 * (1.0 - useful_flops / tiled_flops),
            "%",
        ));
    }
    if let Some(step) = step_ms {
        ev.push(Evidence::metric("padded_matmul_time", format!("padded matmul time {}", tb.per()), padded_ms, "ms"));
        ev.push(Evidence::metric("padded_matmul_share", "padded matmul share of step", 100.0 * padded_ms / step, "%"));
        ev.push(Evidence::metric("matmul_time", format!("all matmul time {}", tb.per()), matmul_ms, "ms"));
        ev.push(Evidence::metric("padding_cost_time", format!("estimated padding cost {}", tb.per()), cost, "ms"));
    } else {
        ev.push(Evidence::note("the profile has no op timeline or steps: the matmuls are counted once each"));
    }
    if !on_tpu {
        ev.push(Evidence::note(
            "not a TPU profile: the utilisation and bytes are what these shapes cost on TPU tiles; the capture's \
                 own device does not pad them",
        ));
    }
    let mut padded: Vec<&PaddedKernel<'_>> = m.padded.iter().collect();
    padded.sort_by(|a, b| {
        (b.ms * b.waste)
            .total_cmp(&(a.ms * a.waste))
            .then(b.waste.total_cmp(&a.waste))
            .then(a.module.program_id().cmp(&b.module.program_id()))
            .then(a.kernel.cmp(&b.kernel))
    });
    for k in padded.iter().take(8) {
        kernel_evidence(k, step_ms.is_some(), tb, &mut ev);
    }
    ev
}

/// One padded kernel: its dot's tiles and utilisation (or its bytes), and its instruction.
fn kernel_evidence(k: &PaddedKernel<'_>, timed: bool, tb: TimeBase, ev: &mut Vec<Evidence>) {
    let m = k.module;
    let name = m.instruction(k.kernel).name();
    let timing = if timed { format!(", {:.3} ms {}", k.ms, tb.per()) } else { String::new() };
    match k.dots.first() {
        Some(&(dot, t)) => ev.push(Evidence::note(format!(
            "{name}: {} = batch {} x M {} x K {} x N {}: {:.0}% of the tiled MXU work is useful; arrays {} B \
                     logical, {} B tiled{timing}",
            m.instruction(dot).shape(),
            t.batch,
            t.m,
            t.k,
            t.n,
            100.0 * t.utilization,
            k.logical_bytes,
            k.padded_bytes
        ))),
        None => ev.push(Evidence::note(format!(
            "{name}: arrays {} B logical, {} B tiled ({:.0}% padding){timing}",
            k.logical_bytes,
            k.padded_bytes,
            100.0 * k.waste
        ))),
    }
    ev.push(evidence::kernel_instruction(m, k.kernel));
}

/// The finding: how many kernels are off the tile, how much they pad, and what it costs.
fn describe(detector: &PaddingWaste, m: &Measured<'_>, s: &Score) -> Finding {
    let (step_ms, useful_flops, tiled_flops, on_tpu, tb) = (m.step_ms, m.useful_flops, m.tiled_flops, m.on_tpu, m.tb);
    let (count, logical, padded_bytes, padded_ms, cost, impact) =
        (s.count, s.logical, s.padded_bytes, s.padded_ms, s.cost, s.impact);
    // Untimed matmuls are minor; a projection (not a TPU capture) is never P0.
    let severity = match step_ms {
        None => Severity::P2,
        Some(_) => match Severity::from_impact(impact.pct_of_step, META.severity) {
            Severity::P0 if !on_tpu => META.severity,
            severity => severity,
        },
    };
    let what = format!(
        "{count:.0} matmul kernel(s) {} have dimensions off the hardware tile: on (8,128)-style tiles{} \
             their arrays take {:.1}x their data and {:.0}% of the tiled matrix work is padding{}.",
        tb.per(),
        if on_tpu { "" } else { " (projected: this is not a TPU capture)" },
        if logical > 0 { padded_bytes as f64 / logical as f64 } else { 1.0 },
        if tiled_flops > 0.0 { 100.0 * (1.0 - useful_flops / tiled_flops) } else { 0.0 },
        match step_ms {
            Some(step) => format!(
                "; they take {padded_ms:.3} ms {} ({:.1}% {}), of which about {cost:.3} ms \
                     ({:.1}%) is padding",
                tb.per(),
                100.0 * padded_ms / step,
                tb.of_the(),
                impact.pct_of_step
            ),
            None => String::new(),
        }
    );
    Finding::new(detector, severity, what, evidence_of(m, s), impact)
}

#[cfg(test)]
mod tests {
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_dots_of_the_129_130_257_mlp() {
        let findings = run_on("padding_waste", &testdata("real/padding_waste"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("8 matmul kernel(s) per step"), "{}", f.what);
        let all: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let all = all.join("\n");
        // dot_general.0 = [8,257] x [129,257]^T: M 8, K 257, N 129 -> 8*129*257 / (8*256*384).
        assert!(
            all.contains("f32[8,129]{1,0} = batch 1 x M 8 x K 257 x N 129: 34% of the tiled MXU work is useful"),
            "{all}"
        );
        // dW: [8,130]^T x [8,129] contracts the batch of 8: K 8 pads to 128.
        assert!(
            all.contains("f32[130,129]{1,0} = batch 1 x M 130 x K 8 x N 129: 3% of the tiled MXU work is useful"),
            "{all}"
        );
        assert!(all.contains("jit(train_step)/") && all.contains("dot_general at "), "{all}");
        // On a CPU capture the cost is a projection: reported, but not raised to P0.
        assert!(f.impact.pct_of_step > 10.0, "{:?}", f.impact);
        assert_eq!(f.severity, crate::finding::Severity::P1);
        assert!(all.contains("not a TPU profile"), "{all}");
    }

    /// head_dim 129, d_model 1032, sequence 500, LoRA rank 200 and a router of 127 on a TPU:
    /// `kind=kOutput` fusions around the dots, bf16 arrays in (8,128)(2,1) tiles.
    #[test]
    fn finds_the_ragged_transformer_on_tpu_tiles() {
        let findings = run_on("padding_waste", &testdata("tpu/tpu_padding_waste"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.starts_with("fusion.9: bf16[8,8,500,500]") && t.contains("M 500 x K 129 x N 500: 48%")),
            "{text:#?}"
        );
        assert!(!f.what.contains("projected"), "a TPU capture: {}", f.what);
        assert!(f.impact.pct_of_step > 5.0, "{:?}", f.impact);
        assert!(run_on("padding_waste", &testdata("tpu/tpu_padding_clean")).is_empty());
    }

    #[test]
    fn tile_sized_models_have_no_padding_waste() {
        // clean and debug_print have 32-wide attention heads (about 4 % and 3 % of the step in padding
        // cost); the barrier baseline has [256,32] x [32,16] dots in a tiny step (about 6 %).
        for dir in [
            "corpus/clean",
            "corpus/data_formatting_baseline",
            "real/remat_baseline",
            "real/convert_reduce",
            "real/debug_print",
            "real/barrier_in_loop_baseline",
        ] {
            let findings = run_on("padding_waste", &testdata(dir));
            assert!(findings.is_empty(), "{dir}: {findings:#?}");
        }
    }
}
