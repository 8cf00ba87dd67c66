//! Synthetic TPU-shaped profiles, written with [`SpaceBuilder`], deterministic for a seed.
//!
//! The shape follows what libtpu writes (facts §2.3, §10): one plane per TensorCore
//! (`/device:TPU:N`) with `Steps`, `XLA Modules` and `XLA Ops` lines; op metadata named by the
//! HLO text (display name = instruction name) with metadata stats `program_id`, `symbol_id`,
//! `hlo_category`, `flops`, `bytes_accessed`, `memory_access_breakdown`; device capability plane
//! stats; host threads with `train` step markers linked to the device steps through
//! producer/consumer stats; `/host:metadata` with an optional serialized HLO proto; and
//! `Task Environment`.
//!
//! A [`Program`] is a list of [`Item`]s executed once per step on every core: plain ops, async
//! pairs with the ops they overlap, ops nested in a parent (a `while` body), and idle gaps.
//! Durations vary per step and per core with a seeded jitter, and one core can be made a
//! straggler.
//!
//! ```
//! use xlens_xplane::{Space, synth::{Program, SynthSpec, tpu_profile}};
//! let spec = SynthSpec { steps: 3, program: Program::random(50, 7), ..SynthSpec::default() };
//! let space = Space::parse(tpu_profile(&spec).into())?;
//! assert_eq!(space.tpu_tensor_cores().len(), 4);
//! let steps = space.tpu_tensor_cores()[0].line_by_name("Steps").unwrap().event_count();
//! assert_eq!(steps, 3);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::builder::{BuildValue, PlaneBuilder, SpaceBuilder, put_varint};
use crate::ids::{EventMetadataId, StatMetadataId};
use crate::names::{line, plane, stat};

/// One HLO op of a synthetic program.
#[derive(Clone, Debug, PartialEq)]
pub struct OpSpec {
    /// Instruction name (the event display name), e.g. `fusion.12`.
    pub name: String,
    /// Opcode written into the long name (HLO text).
    pub opcode: String,
    /// XProf category (`hlo_category` stat), e.g. `loop fusion`.
    pub category: String,
    /// FLOPs of one occurrence.
    pub flops: u64,
    /// HBM bytes read by one occurrence.
    pub hbm_read_bytes: u64,
    /// HBM bytes written by one occurrence.
    pub hbm_write_bytes: u64,
    /// On-chip (VMEM) bytes read by one occurrence.
    pub onchip_read_bytes: u64,
    /// Nominal duration of one occurrence.
    pub duration_ps: i64,
    /// `source` stat ("file:line"), if any.
    pub source: Option<String>,
    /// `tf_op` stat (framework op path), if any.
    pub tf_op: Option<String>,
}

impl OpSpec {
    /// An op with the given name, opcode, category, FLOPs, HBM bytes (split evenly between read
    /// and write) and duration.
    pub fn new(name: &str, opcode: &str, category: &str, flops: u64, hbm_bytes: u64, duration_ps: i64) -> OpSpec {
        OpSpec {
            name: name.to_owned(),
            opcode: opcode.to_owned(),
            category: category.to_owned(),
            flops,
            hbm_read_bytes: hbm_bytes / 2,
            hbm_write_bytes: hbm_bytes - hbm_bytes / 2,
            onchip_read_bytes: 0,
            duration_ps,
            source: None,
            tf_op: None,
        }
    }

    /// Total HBM bytes (read + write) of one occurrence.
    pub fn hbm_bytes(&self) -> u64 {
        self.hbm_read_bytes + self.hbm_write_bytes
    }

    fn long_name(&self) -> String {
        format!("%{} = bf16[1024,512]{{1,0}} {}(bf16[1024,512]{{1,0}} %param.0)", self.name, self.opcode)
    }
}

/// One step of a synthetic program.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An op on its own.
    Op(OpSpec),
    /// An async pair: `start`, then the `overlapped` ops, then `done` (which blocks for its duration).
    Async {
        /// The `*-start` op.
        start: OpSpec,
        /// Ops that run while the transfer is in flight.
        overlapped: Vec<OpSpec>,
        /// The `*-done` op.
        done: OpSpec,
    },
    /// A parent op (e.g. `while`) whose span contains its children, run back to back.
    Nested {
        /// The enclosing op; its duration is the children's total plus its own.
        parent: OpSpec,
        /// The ops inside.
        children: Vec<OpSpec>,
    },
    /// Nothing runs on the core for this long.
    Gap(i64),
}

/// The ops one step runs, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// Items in execution order.
    pub items: Vec<Item>,
}

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }

    /// A factor in `[1 - amount, 1 + amount]`.
    fn jitter(&mut self, amount: f64) -> f64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + amount * (2.0 * unit - 1.0)
    }
}

impl Program {
    /// A program of `distinct_ops` ops of mixed kinds (fusions, convolutions, dots, copies,
    /// transposes, reduces, async all-gathers), deterministic for the seed.
    pub fn random(distinct_ops: u32, seed: u64) -> Program {
        const KINDS: &[(&str, &str, u64)] = &[
            ("fusion", "loop fusion", 2),
            ("convolution", "convolution fusion", 200),
            ("dot", "output fusion", 150),
            ("copy", "data formatting", 0),
            ("transpose", "data formatting", 0),
            ("all-gather", "all-gather", 0),
            ("reduce", "non-fusion elementwise", 1),
            ("fusion", "loop fusion", 4),
        ];
        let mut rng = Rng::new(seed);
        let mut items = Vec::new();
        let mut n = 0u32;
        let mut i = 0u32;
        while n < distinct_ops {
            let (opcode, category, intensity) = KINDS[(rng.next() % KINDS.len() as u64) as usize];
            let bytes = rng.range(1 << 16, 1 << 24);
            let duration_ps = rng.range(1_000_000, 40_000_000) as i64;
            if opcode == "all-gather" {
                let start =
                    OpSpec::new(&format!("all-gather-start.{i}"), "all-gather-start", category, 0, bytes, 500_000);
                let done =
                    OpSpec::new(&format!("all-gather-done.{i}"), "all-gather-done", category, 0, 0, duration_ps / 4);
                let overlapped =
                    vec![OpSpec::new(&format!("fusion.{i}"), "fusion", "loop fusion", bytes, bytes, duration_ps)];
                items.push(Item::Async { start, overlapped, done });
                n += 3;
            } else {
                items.push(Item::Op(OpSpec::new(
                    &format!("{opcode}.{i}"),
                    opcode,
                    category,
                    bytes * intensity,
                    bytes,
                    duration_ps,
                )));
                n += 1;
            }
            i += 1;
        }
        Program { items }
    }

    /// Every op of the program in execution order (parents before their children).
    pub fn ops(&self) -> Vec<&OpSpec> {
        let mut out = Vec::new();
        for item in &self.items {
            match item {
                Item::Op(op) => out.push(op),
                Item::Async { start, overlapped, done } => {
                    out.push(start);
                    out.extend(overlapped);
                    out.push(done);
                }
                Item::Nested { parent, children } => {
                    out.push(parent);
                    out.extend(children);
                }
                Item::Gap(_) => {}
            }
        }
        out
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    /// TensorCores (planes `/device:TPU:0..cores`).
    pub cores: u32,
    /// Steps per core.
    pub steps: u32,
    /// The ops of one step.
    pub program: Program,
    /// Seed of the per-step, per-core jitter.
    pub seed: u64,
    /// Relative jitter of op durations (0.1 = ±10 %).
    pub jitter: f64,
    /// A core whose ops run this many times slower: `(core, factor)`.
    pub straggler: Option<(u32, f64)>,
    /// `Time Scale Multiplier` (DVFS) stat on every op event, if any.
    pub time_scale_multiplier: Option<f64>,
    /// The device type string (`device_type_string` plane stat).
    pub device_type: String,
    /// Peak TFLOP/s per core (`peak_teraflops_per_second`).
    pub peak_teraflops_per_second: f64,
    /// Peak HBM GB/s per core (`peak_hbm_bw_gigabytes_per_second`).
    pub peak_hbm_bw_gigabytes_per_second: f64,
    /// Peak VMEM read/write GB/s per core, if the chip reports them.
    pub peak_vmem_gigabytes_per_second: Option<(f64, f64)>,
    /// The program id of the step program.
    pub program_id: u64,
    /// The module name of the step program.
    pub module_name: String,
    /// A serialized `xla.HloProto` to put in `/host:metadata`, if any.
    pub hlo_proto: Option<Vec<u8>>,
    /// Idle time between steps.
    pub step_gap_ps: i64,
    /// Host time before each step's device work starts (the device waits for the host).
    pub host_lead_ps: i64,
    /// Write `memory_access_breakdown` stats (XProf reads bytes only from them).
    pub memory_breakdown: bool,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            cores: 4,
            steps: 10,
            program: Program::random(200, 1),
            seed: 1,
            jitter: 0.05,
            straggler: None,
            time_scale_multiplier: None,
            device_type: "TPU v5 Lite".to_owned(),
            peak_teraflops_per_second: 197.0,
            peak_hbm_bw_gigabytes_per_second: 819.0,
            peak_vmem_gigabytes_per_second: None,
            program_id: 1,
            module_name: "jit_train_step".to_owned(),
            hlo_proto: None,
            step_gap_ps: 2_000_000,
            host_lead_ps: 500_000,
            memory_breakdown: true,
        }
    }
}

impl SynthSpec {
    /// The same spec with `steps` scaled so the output is about `target_bytes` long.
    pub fn with_target_size(mut self, target_bytes: u64) -> SynthSpec {
        let probe = |steps| tpu_profile(&SynthSpec { steps, hlo_proto: None, ..self.clone() }).len() as u64;
        let (one, two) = (probe(1), probe(2));
        let per_step = two.saturating_sub(one).max(1);
        let fixed = one.saturating_sub(per_step) + self.hlo_proto.as_ref().map_or(0, |p| p.len() as u64);
        self.steps = (target_bytes.saturating_sub(fixed) / per_step).clamp(1, u64::from(u32::MAX)) as u32;
        self
    }
}

/// One executed op: where and how long, per core and step.
#[derive(Clone, Copy, Debug)]
struct Exec {
    op: usize,
    start_ps: i64,
    duration_ps: i64,
}

/// Lays out one step of the program on one core, starting at `t`; returns the events and the end.
///
/// Ops are visited in the order of [`Program::ops`], so their index is a running counter.
fn schedule(program: &Program, t0: i64, scale: f64, rng: &mut Rng, jitter: f64) -> (Vec<Exec>, i64) {
    let mut next = 0usize;
    let mut index = |_: &OpSpec| {
        next += 1;
        next - 1
    };
    let dur =
        |op: &OpSpec, rng: &mut Rng| ((op.duration_ps as f64) * scale * rng.jitter(jitter)).round().max(1.0) as i64;
    let mut out = Vec::new();
    let mut t = t0;
    for item in &program.items {
        match item {
            Item::Op(op) => {
                let d = dur(op, rng);
                out.push(Exec { op: index(op), start_ps: t, duration_ps: d });
                t += d;
            }
            Item::Async { start, overlapped, done } => {
                for op in std::iter::once(start).chain(overlapped).chain(std::iter::once(done)) {
                    let d = dur(op, rng);
                    out.push(Exec { op: index(op), start_ps: t, duration_ps: d });
                    t += d;
                }
            }
            Item::Nested { parent, children } => {
                let own = dur(parent, rng);
                let at = out.len();
                out.push(Exec { op: index(parent), start_ps: t, duration_ps: 0 });
                let start = t;
                t += own / 2;
                for child in children {
                    let d = dur(child, rng);
                    out.push(Exec { op: index(child), start_ps: t, duration_ps: d });
                    t += d;
                }
                t += own - own / 2;
                out[at].duration_ps = t - start;
            }
            Item::Gap(g) => t += ((*g as f64) * scale).round() as i64,
        }
    }
    (out, t)
}

/// Writes a synthetic TPU profile for `spec`.
pub fn tpu_profile(spec: &SynthSpec) -> Vec<u8> {
    let ops = spec.program.ops();
    // Lay out every step on every core first, so host markers can span the device work.
    let mut rng = Rng::new(spec.seed);
    let mut layout: Vec<Vec<(i64, i64, Vec<Exec>)>> = Vec::new();
    let mut step_starts = Vec::new();
    let mut step_ends = Vec::new();
    let mut t = 0i64;
    for s in 0..spec.steps {
        let device_start = t + spec.host_lead_ps;
        let mut end = device_start;
        let mut per_core = Vec::new();
        for core in 0..spec.cores {
            let scale = match spec.straggler {
                Some((c, f)) if c == core => f,
                _ => 1.0,
            };
            let skew = i64::from(core) * 1_000;
            let (events, core_end) = schedule(&spec.program, device_start + skew, scale, &mut rng, spec.jitter);
            end = end.max(core_end);
            per_core.push((device_start + skew, core_end, events));
        }
        layout.push(per_core);
        step_starts.push(t);
        step_ends.push(end);
        let _ = s;
        t = end + spec.step_gap_ps;
    }
    let total_ps = t;

    let mut b = SpaceBuilder::default();
    b.hostname("synth-host");
    write_metadata_plane(&mut b, spec);
    write_host_plane(&mut b, spec, &step_starts, &step_ends, &layout);
    for core in 0..spec.cores {
        write_core(&mut b, spec, core, &ops, &layout);
    }
    write_task_environment(&mut b, total_ps);
    b.finish()
}

/// Producer/consumer context types linking host steps to device steps (facts §10.2).
const CONTEXT_LAUNCH: i64 = 7;
const CONTEXT_DEVICE_STEP: i64 = 12;

fn write_metadata_plane(b: &mut SpaceBuilder, spec: &SynthSpec) {
    let mut meta = b.plane(0, plane::HOST_METADATA);
    let module = meta.event_metadata(&format!("{}({})", spec.module_name, spec.program_id));
    let pid = meta.stat_metadata(stat::PROGRAM_ID);
    meta.metadata_stat(module, pid, spec.program_id);
    if let Some(proto) = &spec.hlo_proto {
        let hlo = meta.stat_metadata(stat::HLO_PROTO);
        meta.metadata_stat(module, hlo, proto.as_slice());
    }
}

type Layout = [Vec<(i64, i64, Vec<Exec>)>];

fn write_host_plane(b: &mut SpaceBuilder, spec: &SynthSpec, starts: &[i64], ends: &[i64], layout: &Layout) {
    let mut host = b.plane(1, plane::HOST_CPU);
    let train = host.event_metadata("train");
    let launch = host.event_metadata("PjitFunction(train_step)");
    let execute = host.event_metadata("tpu::System::Execute");
    let step_num = host.stat_metadata(stat::STEP_NUM);
    let root = host.stat_metadata(stat::IS_ROOT);
    let pt = host.stat_metadata(stat::PRODUCER_TYPE);
    let p = host.stat_metadata(stat::PRODUCER_ID);
    let ct = host.stat_metadata(stat::CONSUMER_TYPE);
    let c = host.stat_metadata(stat::CONSUMER_ID);
    {
        let mut python = host.line(1, "python", 0);
        for (s, (&start, &end)) in starts.iter().zip(ends).enumerate() {
            python.event(train, start, end - start).stat(step_num, s as i64).stat(root, 1i64);
            python.event(launch, start + 1_000, spec.host_lead_ps / 2).stat(pt, CONTEXT_LAUNCH).stat(p, s as i64 + 1);
        }
    }
    let mut runtime = host.line(2, "tpu_runtime", 0);
    for (s, per_core) in layout.iter().enumerate() {
        for (core, (device_start, _, _)) in per_core.iter().enumerate() {
            let id = (s as i64 + 1) * 1000 + core as i64;
            let at = starts[s] + spec.host_lead_ps / 2 + core as i64 * 100;
            runtime
                .event(execute, at, (device_start - at).max(1))
                .stat(ct, CONTEXT_LAUNCH)
                .stat(c, s as i64 + 1)
                .stat(pt, CONTEXT_DEVICE_STEP)
                .stat(p, id);
        }
    }
}

fn write_task_environment(b: &mut SpaceBuilder, total_ps: i64) {
    let mut env = b.plane(2, plane::TASK_ENVIRONMENT);
    let start = env.stat_metadata(stat::PROFILE_START_TIME);
    let stop = env.stat_metadata(stat::PROFILE_STOP_TIME);
    let t0 = 1_700_000_000_000_000_000u64;
    env.stat(start, t0);
    env.stat(stop, t0 + (total_ps / 1000) as u64);
}

struct MetaIds {
    program_id: StatMetadataId,
    symbol_id: StatMetadataId,
    category: StatMetadataId,
    flops: StatMetadataId,
    bytes: StatMetadataId,
    breakdown: StatMetadataId,
    source: StatMetadataId,
    tf_op: StatMetadataId,
}

/// A serialized `MemoryAccessBreakdown`: `{1: repeated {1 operation_type, 2 memory_space, 3 bytes}}`.
fn memory_breakdown(op: &OpSpec) -> Vec<u8> {
    // operation_type: READ = 1, WRITE = 2; memory_space: HBM = 1, VMEM = 3.
    let entries = [(1u64, 1u64, op.hbm_read_bytes), (2, 1, op.hbm_write_bytes), (1, 3, op.onchip_read_bytes)];
    let mut out = Vec::new();
    for (kind, space, bytes) in entries {
        if bytes == 0 {
            continue;
        }
        let mut entry = Vec::new();
        entry.push(0x08);
        put_varint(&mut entry, kind);
        entry.push(0x10);
        put_varint(&mut entry, space);
        entry.push(0x18);
        put_varint(&mut entry, bytes);
        out.push(0x0a);
        put_varint(&mut out, entry.len() as u64);
        out.extend_from_slice(&entry);
    }
    out
}

fn capability(p: &mut PlaneBuilder<'_>, name: &str, v: BuildValue<'_>) {
    let id = p.stat_metadata(name);
    p.stat(id, v);
}

fn write_core(b: &mut SpaceBuilder, spec: &SynthSpec, core: u32, ops: &[&OpSpec], layout: &Layout) {
    use crate::names::stat::capability as cap;
    let mut p = b.plane(i64::from(core) + 100, &format!("{}{core}", plane::TPU_PREFIX));
    capability(&mut p, stat::DEVICE_TYPE_STRING, BuildValue::Str(&spec.device_type));
    capability(&mut p, cap::PEAK_TERAFLOPS_PER_SECOND, BuildValue::Double(spec.peak_teraflops_per_second));
    capability(
        &mut p,
        cap::PEAK_HBM_BW_GIGABYTES_PER_SECOND,
        BuildValue::Double(spec.peak_hbm_bw_gigabytes_per_second),
    );
    if let Some((rd, wr)) = spec.peak_vmem_gigabytes_per_second {
        capability(&mut p, cap::PEAK_VMEM_RD_BW_GIGABYTES_PER_SECOND, BuildValue::Double(rd));
        capability(&mut p, cap::PEAK_VMEM_WR_BW_GIGABYTES_PER_SECOND, BuildValue::Double(wr));
        capability(&mut p, cap::HAS_MERGED_VMEM, BuildValue::Int(1));
    }
    let ids = MetaIds {
        program_id: p.stat_metadata(stat::PROGRAM_ID),
        symbol_id: p.stat_metadata(stat::SYMBOL_ID),
        category: p.stat_metadata(stat::HLO_CATEGORY),
        flops: p.stat_metadata(stat::FLOPS),
        bytes: p.stat_metadata(stat::BYTES_ACCESSED),
        breakdown: p.stat_metadata(stat::MEMORY_ACCESS_BREAKDOWN),
        source: p.stat_metadata(stat::SOURCE),
        tf_op: p.stat_metadata(stat::TF_OP),
    };
    let op_meta: Vec<EventMetadataId> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let m = p.event_metadata_with_display(&op.long_name(), &op.name);
            p.metadata_stat(m, ids.program_id, spec.program_id);
            p.metadata_stat(m, ids.symbol_id, i as u64 + 1);
            p.metadata_stat(m, ids.category, op.category.as_str());
            if op.flops > 0 {
                p.metadata_stat(m, ids.flops, op.flops);
            }
            if op.hbm_bytes() + op.onchip_read_bytes > 0 {
                p.metadata_stat(m, ids.bytes, op.hbm_bytes() + op.onchip_read_bytes);
                if spec.memory_breakdown {
                    p.metadata_stat(m, ids.breakdown, memory_breakdown(op).as_slice());
                }
            }
            if let Some(source) = &op.source {
                p.metadata_stat(m, ids.source, source.as_str());
            }
            if let Some(tf_op) = &op.tf_op {
                p.metadata_stat(m, ids.tf_op, tf_op.as_str());
            }
            m
        })
        .collect();
    let module = p.event_metadata(&format!("{}({})", spec.module_name, spec.program_id));
    let ct = p.stat_metadata(stat::CONSUMER_TYPE);
    let c = p.stat_metadata(stat::CONSUMER_ID);
    let tsm = p.stat_metadata(stat::TIME_SCALE_MULTIPLIER);
    let step_meta: Vec<EventMetadataId> = (0..layout.len()).map(|s| p.event_metadata(&s.to_string())).collect();
    let core_ix = core as usize;
    {
        let mut steps = p.line(1, line::STEPS, 0);
        for (s, per_core) in layout.iter().enumerate() {
            let (start, end, _) = &per_core[core_ix];
            let id = (s as i64 + 1) * 1000 + i64::from(core);
            steps.event(step_meta[s], *start, end - start).stat(ct, CONTEXT_DEVICE_STEP).stat(c, id);
        }
    }
    {
        let mut modules = p.line(2, line::XLA_MODULES, 0);
        for per_core in layout {
            let (start, end, _) = &per_core[core_ix];
            modules.event(module, *start, end - start);
        }
    }
    let mut xla_ops = p.line(3, line::XLA_OPS, 0);
    for per_core in layout {
        for exec in &per_core[core_ix].2 {
            let ev = xla_ops.event(op_meta[exec.op], exec.start_ps, exec.duration_ps);
            if let Some(f) = spec.time_scale_multiplier {
                ev.stat(tsm, f);
            }
        }
    }
}

/// Names of the committed TPU-shaped reference fixtures (see [`fixture`]).
pub const FIXTURES: &[&str] = &["tpu_basic", "tpu_straggler"];

/// The spec of a named reference fixture: small TPU-shaped profiles that cover every op category,
/// nesting, async pairs, gaps, DVFS and stragglers, committed under `testdata/tpu/<name>/` with
/// XProf's own analysis of them.
pub fn fixture(name: &str) -> Option<SynthSpec> {
    let op = |name: &str, opcode: &str, category: &str, flops: u64, bytes: u64, us: i64| {
        OpSpec::new(name, opcode, category, flops, bytes, us * 1_000_000)
    };
    let mut conv = op("convolution.1", "convolution", "convolution fusion", 9_000_000_000_000 / 1000, 40_000_000, 90);
    conv.onchip_read_bytes = 300_000_000;
    conv.source = Some("model.py:41".to_owned());
    conv.tf_op = Some("jit(train_step)/conv_general_dilated".to_owned());
    let layer = vec![
        Item::Op(op("fusion.1", "fusion", "loop fusion", 4_000_000, 20_000_000, 30)),
        Item::Op(conv),
        Item::Op(op("dot.2", "dot", "output fusion", 6_000_000_000, 25_000_000, 50)),
        Item::Op(op("copy.3", "copy", "data formatting", 0, 16_000_000, 12)),
        Item::Op(op("transpose.4", "transpose", "data formatting", 0, 16_000_000, 9)),
        Item::Async {
            start: op("all-gather-start.5", "all-gather-start", "all-gather", 0, 8_000_000, 1),
            overlapped: vec![op("fusion.6", "fusion", "loop fusion", 2_000_000, 12_000_000, 20)],
            done: op("all-gather-done.5", "all-gather-done", "all-gather", 0, 0, 15),
        },
        Item::Op(op("all-reduce.7", "all-reduce", "all-reduce", 1_000_000, 8_000_000, 25)),
        Item::Gap(7_000_000),
        Item::Nested {
            parent: op("while.8", "while", "while", 0, 0, 4),
            children: vec![
                op("fusion.9", "fusion", "loop fusion", 1_000_000, 4_000_000, 6),
                op("reduce.10", "reduce", "non-fusion elementwise", 500_000, 2_000_000, 5),
            ],
        },
        Item::Op(op("infeed.11", "infeed", "infeed", 0, 1_000_000, 8)),
        Item::Op(op("custom-call.12", "custom-call", "custom-call", 0, 0, 3)),
    ];
    let base = SynthSpec {
        cores: 4,
        steps: 6,
        program: Program { items: layer },
        seed: 11,
        jitter: 0.05,
        peak_vmem_gigabytes_per_second: Some((21_696.1 * 1.073_741_824, 15_020.4 * 1.073_741_824)),
        step_gap_ps: 30_000_000,
        host_lead_ps: 5_000_000,
        ..SynthSpec::default()
    };
    match name {
        "tpu_basic" => Some(base),
        "tpu_straggler" => Some(SynthSpec {
            seed: 12,
            straggler: Some((2, 1.3)),
            time_scale_multiplier: Some(1.25),
            device_type: "TPU v6 Lite".to_owned(),
            peak_teraflops_per_second: 918.0,
            peak_hbm_bw_gigabytes_per_second: 1638.0,
            steps: 8,
            ..base
        }),
        _ => None,
    }
}
