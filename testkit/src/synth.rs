//! Synthetic TPU-shaped profiles, written with [`SpaceBuilder`], deterministic for a seed.
//!
//! The shape follows what libtpu writes (facts §2.3, §10): one plane per TensorCore
//! (`/device:TPU:N`) with `Steps`, `XLA Modules` and `XLA Ops` lines; op metadata named by the
//! HLO text (display name = instruction name) with metadata stats `program_id`, `symbol_id`,
//! `hlo_category`, `flops`, `bytes_accessed`, `memory_access_breakdown`; device capability plane
//! stats; host threads with `train` step markers linked to the device steps through
//! producer/consumer stats; `/host:metadata` with an optional serialized HLO proto (see
//! [`hlo_proto_with_buffers`] for one with a buffer assignment); and `Task Environment`.
//! Optionally, SparseCore planes (`/device:TPU:N SparseCore M` with `Sparse Core Steps` and
//! `Sparse Core Ops`, [`SparseCoreSpec`]) and DCN `MegaScale:` host events around one op
//! ([`MegaScaleSpec`]). Optionally, the host recompiles the step function between two steps and
//! the later steps run it under a second program id ([`RecompileSpec`]).
//!
//! A [`Program`] is a list of [`Item`]s executed once per step on every core: plain ops, async
//! pairs with the ops they overlap, ops nested in a parent (a `while` body), and idle gaps.
//! Durations vary per step and per core with a seeded jitter, and one core can be made a
//! straggler. [`fixture`] names the committed reference profiles of `testdata/tpu/`.
//!
//! ```
//! use xlens_testkit::synth::{Program, SynthSpec, tpu_profile};
//! use xlens_xplane::Space;
//! let spec = SynthSpec { steps: 3, program: Program::random(50, 7), ..SynthSpec::default() };
//! let space = Space::parse(tpu_profile(&spec).into())?;
//! assert_eq!(space.tpu_tensor_cores().len(), 4);
//! let steps = space.tpu_tensor_cores()[0].line_by_name("Steps").unwrap().event_count();
//! assert_eq!(steps, 3);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use xlens_hlo::raw as h;
use xlens_xplane::names::{line, plane, stat};
use xlens_xplane::{BuildValue, EventMetadataId, PlaneBuilder, SpaceBuilder, StatMetadataId};

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
    /// The HLO text written as the event metadata's long name (e.g.
    /// `%fusion.3 = bf16[500,1032]{1,0:T(8,128)(2,1)} fusion(...), kind=kOutput, calls=...`); `None`
    /// writes a generic `bf16[1024,512]` line for the op's name and opcode.
    pub hlo_text: Option<String>,
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
            hlo_text: None,
        }
    }

    /// Total HBM bytes (read + write) of one occurrence.
    pub fn hbm_bytes(&self) -> u64 {
        self.hbm_read_bytes + self.hbm_write_bytes
    }

    fn long_name(&self) -> String {
        if let Some(text) = &self.hlo_text {
            return text.clone();
        }
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

/// The one seeded generator of the tests (xorshift64*): synthetic profiles, fuzz smoke tests and
/// mutations draw from it, so the same seed gives the same input on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }

    /// A factor in `[1 - amount, 1 + amount]`.
    pub fn jitter(&mut self, amount: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
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
            let (opcode, category, intensity) = KINDS[(rng.next_u64() % KINDS.len() as u64) as usize];
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
    /// SparseCore planes under every TensorCore, if any.
    pub sparse_cores: Option<SparseCoreSpec>,
    /// DCN (MegaScale) host events around one op's executions, if any.
    pub megascale: Option<MegaScaleSpec>,
    /// Write a runtime memory profile (allocator events on `/host:CPU`) over this many bytes of
    /// resident weights, if any.
    pub memory_profile_bytes: Option<u64>,
    /// A recompilation of the step function between two steps, if any ([`RecompileSpec`]).
    pub recompile: Option<RecompileSpec>,
    /// The XSpace host name (`None`: `synth-host`).
    pub hostname: Option<String>,
    /// Write the host-thread plane (`/host:CPU`: step markers, launches, the memory profile);
    /// without it the profile is device-only, what a continuous-profiling snapshot keeps.
    pub host_threads: bool,
    /// Write each TensorCore's `Steps` line; without it the profile has no step markers and the
    /// time base is the program executions (`XLA Modules`), as in captures without steps.
    pub device_steps: bool,
}

/// JAX recompiling the step function between two steps (a retrace on a new shape), as JAX 0.10
/// and the PJRT C API client record it on a TPU host: before step `step`'s device work the
/// `python` thread spends `lowering_ps` in `lower_sharding_computation` and `compile_ps` in
/// `backend_compile_and_load`, around `PjRtCApiClient::CompileAndLoad(<module>)` (which starts
/// with `PjRtCApiClient::SerializeCompileOptions`), all inside that step's `train` marker and
/// its `PjitFunction(train_step)` dispatch; no device step covers that time. From `step` on,
/// every core runs the program as `program_id` (`XLA Modules` events `<module>(<program_id>)`,
/// op metadata `program_id`), and `/host:metadata` holds the module under both program ids.
#[derive(Clone, Debug, PartialEq)]
pub struct RecompileSpec {
    /// The first step that runs the recompiled program (0-based, as `step_num`).
    pub step: u32,
    /// The recompiled program's id.
    pub program_id: u64,
    /// A serialized `xla.HloProto` for the recompiled program, if any.
    pub hlo_proto: Option<Vec<u8>>,
    /// Duration of `lower_sharding_computation` (tracing and lowering to StableHLO).
    pub lowering_ps: i64,
    /// Duration of `backend_compile_and_load` (the XLA TPU compilation).
    pub compile_ps: i64,
}

impl RecompileSpec {
    /// Host time the recompilation adds before the step's device work.
    pub fn host_time_ps(&self) -> i64 {
        RECOMPILE_PAD_PS + self.lowering_ps.max(0) + RECOMPILE_PAD_PS + self.compile_ps.max(0) + RECOMPILE_PAD_PS
    }
}

/// Host time between the events of a recompilation (1 µs).
const RECOMPILE_PAD_PS: i64 = 1_000_000;

/// SparseCore planes (`/device:TPU:N SparseCore M`) with `Sparse Core Steps` and `Sparse Core Ops`
/// lines: every step, each SparseCore runs its ops back to back from the TensorCore step's start.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseCoreSpec {
    /// SparseCores per TensorCore.
    pub per_core: u32,
    /// The ops each SparseCore runs per step, in order; their `duration_ps` are relative weights.
    pub ops: Vec<OpSpec>,
    /// Share of the TensorCore step (`0..=1`) the ops fill, from the step's start.
    pub busy_fraction: f64,
    /// `dropped_traces` plane stat written on every SparseCore plane (none when 0).
    pub dropped_events: u64,
}

/// DCN traffic of a multi-slice run: `MegaScale:` host events on a `megascale` host thread that
/// span every execution of one op on core 0 (a cross-slice all-reduce, typically), with the
/// message stats XProf's DCN analysis reads (facts §9).
#[derive(Clone, Debug, PartialEq)]
pub struct MegaScaleSpec {
    /// Name of the op whose executions the transfers span (e.g. `all-reduce-done.20`).
    pub op: String,
    /// `payload_size_bytes` of each transfer.
    pub payload_bytes: u64,
    /// `dcn_source_slice_id` and `dcn_destination_slice_id`.
    pub slices: (i64, i64),
}

impl SparseCoreSpec {
    /// Two SparseCores per TensorCore running an embedding lookup and its gradient (3:1) for
    /// 60 % of each step, nothing dropped: an embedding model's SparseCores at a healthy load.
    pub fn embeddings() -> SparseCoreSpec {
        SparseCoreSpec {
            per_core: 2,
            ops: vec![
                OpSpec::new("embedding-lookup.1", "custom-call", "sparse core", 0, 1 << 20, 3),
                OpSpec::new("embedding-grad.2", "custom-call", "sparse core", 0, 1 << 20, 1),
            ],
            busy_fraction: 0.6,
            dropped_events: 0,
        }
    }
}

impl MegaScaleSpec {
    /// 1 MiB transfers from slice 0 to slice 1 over every execution of the program's first async
    /// all-gather; `None` when the program has none.
    pub fn on_first_all_gather(program: &Program) -> Option<MegaScaleSpec> {
        let op = program.ops().iter().find(|o| o.name.starts_with("all-gather-done"))?.name.clone();
        Some(MegaScaleSpec { op, payload_bytes: 1 << 20, slices: (0, 1) })
    }
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
            sparse_cores: None,
            megascale: None,
            memory_profile_bytes: None,
            recompile: None,
            hostname: None,
            host_threads: true,
            device_steps: true,
        }
    }
}

impl SynthSpec {
    /// The same spec with `steps` scaled so the output is about `target_bytes` long (within a
    /// few percent).
    ///
    /// A step's bytes grow slowly with its position (later timestamps take longer varints), so
    /// the size per step is measured twice: on 1 and 2 steps for a first estimate, then on an
    /// eighth and a quarter of that estimate, which costs well under the output itself.
    pub fn with_target_size(mut self, target_bytes: u64) -> SynthSpec {
        let hlo = self.hlo_proto.as_ref().map_or(0, |p| p.len() as u64);
        let probe = |steps: u64| {
            let steps = steps.clamp(1, u64::from(u32::MAX)) as u32;
            tpu_profile(&SynthSpec { steps, hlo_proto: None, ..self.clone() }).len() as u64
        };
        let estimate = |a: u64, b: u64| {
            let (size_a, size_b) = (probe(a), probe(b));
            let per_step = (size_b.saturating_sub(size_a) / (b - a)).max(1);
            let fixed = size_a.saturating_sub(per_step * a) + hlo;
            (target_bytes.saturating_sub(fixed) / per_step).max(1)
        };
        let first = estimate(1, 2);
        let steps = if first >= 16 { estimate(first / 8, first / 4) } else { first };
        self.steps = steps.clamp(1, u64::from(u32::MAX)) as u32;
        self
    }
}

/// A one-core TPU host with host threads whose step runs two ops, `steps` times: about 100
/// bytes of profile per step, so what grows with the steps (`ops --json`'s steps and anatomy,
/// per-step tables) outgrows the input many times. Scale and memory tests of per-step outputs
/// use it; `cargo run -p xlens-testkit --example many_steps` writes one.
pub fn many_steps(steps: u32) -> SynthSpec {
    let op = OpSpec::new;
    SynthSpec {
        cores: 1,
        steps,
        program: Program {
            items: vec![
                Item::Op(op("fusion.1", "fusion", "loop fusion", 1_000_000, 4_000_000, 2_000_000)),
                Item::Op(op("convolution.2", "convolution", "convolution fusion", 400_000_000, 2_000_000, 3_000_000)),
            ],
        },
        memory_breakdown: false,
        ..SynthSpec::default()
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
        let device_start = t + spec.host_lead_ps + recompile_lead(spec, s as usize);
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
    b.hostname(spec.hostname.as_deref().unwrap_or("synth-host"));
    write_metadata_plane(&mut b, spec);
    if spec.host_threads {
        write_host_plane(&mut b, spec, &step_starts, &step_ends, &layout);
    }
    for core in 0..spec.cores {
        write_core(&mut b, spec, core, &ops, &layout);
    }
    if let Some(sc) = &spec.sparse_cores {
        for core in 0..spec.cores {
            for index in 0..sc.per_core {
                write_sparse_core(&mut b, spec, sc, core, index, &layout);
            }
        }
    }
    write_task_environment(&mut b, total_ps);
    b.finish()
}

/// Host time a recompilation adds before step `s`'s device work (0 for every other step).
fn recompile_lead(spec: &SynthSpec, s: usize) -> i64 {
    spec.recompile.as_ref().filter(|r| r.step as usize == s).map_or(0, RecompileSpec::host_time_ps)
}

/// The program id step `s` runs under.
fn program_of_step(spec: &SynthSpec, s: usize) -> u64 {
    match &spec.recompile {
        Some(r) if s >= r.step as usize => r.program_id,
        _ => spec.program_id,
    }
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
    if let Some(r) = &spec.recompile {
        let module = meta.event_metadata(&format!("{}({})", spec.module_name, r.program_id));
        meta.metadata_stat(module, pid, r.program_id);
        if let Some(proto) = &r.hlo_proto {
            let hlo = meta.stat_metadata(stat::HLO_PROTO);
            meta.metadata_stat(module, hlo, proto.as_slice());
        }
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
    let compile = spec.recompile.as_ref().map(|r| {
        (
            r,
            host.event_metadata("lower_sharding_computation"),
            host.event_metadata("backend_compile_and_load"),
            host.event_metadata(&format!("PjRtCApiClient::CompileAndLoad({})", spec.module_name)),
            host.event_metadata("PjRtCApiClient::SerializeCompileOptions"),
        )
    });
    {
        let mut python = host.line(1, "python", 0);
        for (s, (&start, &end)) in starts.iter().zip(ends).enumerate() {
            let lead = recompile_lead(spec, s);
            python.event(train, start, end - start).stat(step_num, s as i64).stat(root, 1i64);
            python
                .event(launch, start + 1_000, spec.host_lead_ps / 2 + lead)
                .stat(pt, CONTEXT_LAUNCH)
                .stat(p, s as i64 + 1);
            if let Some((r, lower, backend, client, options)) = compile.filter(|_| lead > 0) {
                let at = start + 1_000 + RECOMPILE_PAD_PS;
                python.event(lower, at, r.lowering_ps.max(1));
                let at = at + r.lowering_ps.max(0) + RECOMPILE_PAD_PS;
                let d = r.compile_ps.max(1);
                python.event(backend, at, d);
                python.event(client, at + 2_000, (d - 4_000).max(1));
                python.event(options, at + 3_000, (d / 1000).clamp(1, 50_000_000));
            }
        }
    }
    {
        let mut runtime = host.line(2, "tpu_runtime", 0);
        for (s, per_core) in layout.iter().enumerate() {
            for (core, (device_start, _, _)) in per_core.iter().enumerate() {
                let id = (s as i64 + 1) * 1000 + core as i64;
                let at = starts[s] + spec.host_lead_ps / 2 + recompile_lead(spec, s) + core as i64 * 100;
                runtime
                    .event(execute, at, (device_start - at).max(1))
                    .stat(ct, CONTEXT_LAUNCH)
                    .stat(c, s as i64 + 1)
                    .stat(pt, CONTEXT_DEVICE_STEP)
                    .stat(p, id);
            }
        }
    }
    if let Some(dcn) = &spec.megascale {
        write_megascale_line(&mut host, spec, dcn, layout);
    }
    if let Some(bytes) = spec.memory_profile_bytes {
        write_allocator_line(&mut host, starts, ends, bytes);
    }
}

/// The allocator thread of a runtime memory profile (facts §6.1): per step, activations are
/// allocated at the step start and freed at its end, on top of `bytes` of resident weights.
fn write_allocator_line(host: &mut PlaneBuilder<'_>, starts: &[i64], ends: &[i64], bytes: u64) {
    let alloc = host.event_metadata(xlens_xplane::names::event::MEMORY_ALLOCATION);
    let free = host.event_metadata(xlens_xplane::names::event::MEMORY_DEALLOCATION);
    let name = host.stat_metadata(stat::ALLOCATOR_NAME);
    let allocated = host.stat_metadata(stat::BYTES_ALLOCATED);
    let reserved = host.stat_metadata(stat::BYTES_RESERVED);
    let available = host.stat_metadata(stat::BYTES_AVAILABLE);
    let peak = host.stat_metadata(stat::PEAK_BYTES_IN_USE);
    let requested = host.stat_metadata(stat::REQUESTED_BYTES);
    let capacity = bytes.saturating_mul(4);
    let activations = bytes / 2;
    let mut line = host.line(4, "allocator", 0);
    for (&start, &end) in starts.iter().zip(ends) {
        line.event(alloc, start, 1_000)
            .stat(name, "TPU_0_bfc")
            .stat(allocated, bytes + activations)
            .stat(reserved, 0u64)
            .stat(available, capacity - bytes - activations)
            .stat(peak, bytes + activations)
            .stat(requested, activations);
        line.event(free, end, 1_000)
            .stat(name, "TPU_0_bfc")
            .stat(allocated, bytes)
            .stat(reserved, 0u64)
            .stat(available, capacity - bytes)
            .stat(peak, bytes + activations)
            .stat(requested, activations);
    }
}

/// The `megascale` host thread: per step, a send, a receive and a reduction spanning the
/// executions of the DCN op on core 0.
fn write_megascale_line(host: &mut PlaneBuilder<'_>, spec: &SynthSpec, dcn: &MegaScaleSpec, layout: &Layout) {
    let Some(op) = spec.program.ops().iter().position(|o| o.name == dcn.op) else { return };
    let send = host.event_metadata("MegaScale: Communication Transport Send");
    let recv = host.event_metadata("MegaScale: Communication Transport Receive");
    let reduce = host.event_metadata("MegaScale: Reduction");
    let label = host.stat_metadata("dcn_label");
    let src = host.stat_metadata("dcn_source_slice_id");
    let dst = host.stat_metadata("dcn_destination_slice_id");
    let src_dev = host.stat_metadata("dcn_source_per_slice_device_id");
    let dst_dev = host.stat_metadata("dcn_destination_per_slice_device_id");
    let chunk = host.stat_metadata("dcn_chunk");
    let loop_index = host.stat_metadata("dcn_loop_index");
    let payload = host.stat_metadata("payload_size_bytes");
    let duration_us = host.stat_metadata("duration_us");
    let mut line = host.line(3, "megascale", 0);
    for (s, per_core) in layout.iter().enumerate() {
        let Some(core0) = per_core.first() else { continue };
        for exec in core0.2.iter().filter(|e| e.op == op) {
            let (start, d) = (exec.start_ps, exec.duration_ps);
            let wire = d * 9 / 10;
            let parts = [(send, start, wire), (recv, start + d / 20, wire), (reduce, start + wire, d - wire)];
            for (meta, at, dur) in parts {
                line.event(meta, at, dur.max(1))
                    .stat(label, dcn.op.as_str())
                    .stat(src, dcn.slices.0)
                    .stat(dst, dcn.slices.1)
                    .stat(src_dev, 0i64)
                    .stat(dst_dev, 0i64)
                    .stat(chunk, 0i64)
                    .stat(loop_index, s as i64)
                    .stat(payload, dcn.payload_bytes)
                    .stat(duration_us, dur as f64 / 1e6);
            }
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
        prost::encoding::encode_varint(kind, &mut entry);
        entry.push(0x10);
        prost::encoding::encode_varint(space, &mut entry);
        entry.push(0x18);
        prost::encoding::encode_varint(bytes, &mut entry);
        out.push(0x0a);
        prost::encoding::encode_varint(entry.len() as u64, &mut out);
        out.extend_from_slice(&entry);
    }
    out
}

fn capability(p: &mut PlaneBuilder<'_>, name: &str, v: BuildValue<'_>) {
    let id = p.stat_metadata(name);
    p.stat(id, v);
}

/// The metadata stats of op `i` of the program (symbol id `i + 1`) under `program_id`.
fn write_op_stats(
    p: &mut PlaneBuilder<'_>,
    spec: &SynthSpec,
    ids: &MetaIds,
    m: EventMetadataId,
    program_id: u64,
    i: usize,
    op: &OpSpec,
) {
    p.metadata_stat(m, ids.program_id, program_id);
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
}

fn write_core(b: &mut SpaceBuilder, spec: &SynthSpec, core: u32, ops: &[&OpSpec], layout: &Layout) {
    use xlens_xplane::names::stat::capability as cap;
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
            write_op_stats(&mut p, spec, &ids, m, spec.program_id, i, op);
            m
        })
        .collect();
    let module = p.event_metadata(&format!("{}({})", spec.module_name, spec.program_id));
    let ct = p.stat_metadata(stat::CONSUMER_TYPE);
    let c = p.stat_metadata(stat::CONSUMER_ID);
    let tsm = p.stat_metadata(stat::TIME_SCALE_MULTIPLIER);
    let step_meta: Vec<EventMetadataId> = (0..layout.len()).map(|s| p.event_metadata(&s.to_string())).collect();
    // The recompiled program: its own module and op metadata (same symbols, its program id).
    let recompiled = spec.recompile.as_ref().map(|r| {
        let ops: Vec<EventMetadataId> = ops
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let m = p.event_metadata_with_display(&op.long_name(), &op.name);
                write_op_stats(&mut p, spec, &ids, m, r.program_id, i, op);
                m
            })
            .collect();
        (ops, p.event_metadata(&format!("{}({})", spec.module_name, r.program_id)))
    });
    let module_of = |s: usize| match &recompiled {
        Some((_, m)) if program_of_step(spec, s) != spec.program_id => *m,
        _ => module,
    };
    let ops_of = |s: usize| match &recompiled {
        Some((m, _)) if program_of_step(spec, s) != spec.program_id => m,
        _ => &op_meta,
    };
    let core_ix = core as usize;
    if spec.device_steps {
        let mut steps = p.line(1, line::STEPS, 0);
        for (s, per_core) in layout.iter().enumerate() {
            let (start, end, _) = &per_core[core_ix];
            let id = (s as i64 + 1) * 1000 + i64::from(core);
            steps.event(step_meta[s], *start, end - start).stat(ct, CONTEXT_DEVICE_STEP).stat(c, id);
        }
    }
    {
        let mut modules = p.line(2, line::XLA_MODULES, 0);
        for (s, per_core) in layout.iter().enumerate() {
            let (start, end, _) = &per_core[core_ix];
            modules.event(module_of(s), *start, end - start);
        }
    }
    let mut xla_ops = p.line(3, line::XLA_OPS, 0);
    for (s, per_core) in layout.iter().enumerate() {
        let metas = ops_of(s);
        for exec in &per_core[core_ix].2 {
            let ev = xla_ops.event(metas[exec.op], exec.start_ps, exec.duration_ps);
            if let Some(f) = spec.time_scale_multiplier {
                ev.stat(tsm, f);
            }
        }
    }
}

/// One SparseCore plane: every step, the ops fill `busy_fraction` of the TensorCore's step from
/// its start, back to back, sized by their relative `duration_ps`.
fn write_sparse_core(
    b: &mut SpaceBuilder,
    spec: &SynthSpec,
    sc: &SparseCoreSpec,
    core: u32,
    index: u32,
    layout: &Layout,
) {
    let id = 1000 + i64::from(core) * 16 + i64::from(index);
    let mut p = b.plane(id, &format!("{}{core} SparseCore {index}", plane::TPU_PREFIX));
    if sc.dropped_events > 0 {
        capability(&mut p, stat::DROPPED_TRACES, BuildValue::Uint(sc.dropped_events));
    }
    let program_id = p.stat_metadata(stat::PROGRAM_ID);
    let symbol_id = p.stat_metadata(stat::SYMBOL_ID);
    let category = p.stat_metadata(stat::HLO_CATEGORY);
    let bytes = p.stat_metadata(stat::BYTES_ACCESSED);
    let source = p.stat_metadata(stat::SOURCE);
    let first_symbol = spec.program.ops().len() as u64 + 1;
    let metas: Vec<EventMetadataId> = sc
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let m = p.event_metadata_with_display(&op.long_name(), &op.name);
            p.metadata_stat(m, program_id, spec.program_id);
            p.metadata_stat(m, symbol_id, first_symbol + i as u64);
            p.metadata_stat(m, category, op.category.as_str());
            if op.hbm_bytes() > 0 {
                p.metadata_stat(m, bytes, op.hbm_bytes());
            }
            if let Some(s) = &op.source {
                p.metadata_stat(m, source, s.as_str());
            }
            m
        })
        .collect();
    let step_meta: Vec<EventMetadataId> = (0..layout.len()).map(|s| p.event_metadata(&s.to_string())).collect();
    let weights: i64 = sc.ops.iter().map(|o| o.duration_ps.max(1)).sum::<i64>().max(1);
    let core_ix = core as usize;
    {
        let mut steps = p.line(1, line::SPARSE_CORE_STEPS, 0);
        for (s, per_core) in layout.iter().enumerate() {
            let (start, end, _) = &per_core[core_ix];
            steps.event(step_meta[s], *start, end - start);
        }
    }
    let mut ops = p.line(3, line::SPARSE_CORE_OPS, 0);
    for per_core in layout {
        let (start, end, _) = &per_core[core_ix];
        let busy = ((end - start) as f64 * sc.busy_fraction.clamp(0.0, 1.0)) as i64;
        let mut t = *start;
        for (op, meta) in sc.ops.iter().zip(&metas) {
            let d = (busy as i128 * i128::from(op.duration_ps.max(1)) / i128::from(weights)) as i64;
            if d > 0 {
                ops.event(*meta, t, d);
            }
            t += d;
        }
    }
}

/// A serialized `xla.HloProto` for a program, with a buffer assignment.
///
/// The entry computation `main` has one `f32[n]` parameter per `params` entry (name, bytes) and
/// one instruction per op of the program (its opcode; the op's `source` as metadata
/// `source_file`/`source_line`, its `tf_op` as `op_name`), chained in program order. In the
/// buffer assignment the parameters are entry-parameter allocations (live for the whole
/// program) and every op named in `temps` (name, bytes) defines a temporary buffer; the
/// heap-simulator trace allocates the temporaries in order and frees them at the end, so the
/// memory viewer's peak is the parameters plus all temporaries.
///
/// ```
/// use xlens_testkit::synth::{OpSpec, Program, Item, hlo_proto_with_buffers};
/// let program = Program { items: vec![Item::Op(OpSpec::new("fusion.1", "fusion", "loop fusion", 0, 0, 1))] };
/// let proto = hlo_proto_with_buffers("jit_f", &program, &[("param.0", 1 << 20)], &[("fusion.1", 4096)]);
/// assert!(proto.len() > 100);
/// ```
pub fn hlo_proto_with_buffers(
    module_name: &str,
    program: &Program,
    params: &[(&str, u64)],
    temps: &[(&str, u64)],
) -> Vec<u8> {
    use prost::Message;
    const F32: i32 = 11;
    let shape = |bytes: u64| {
        Box::new(h::ShapeProto {
            element_type: F32,
            dimensions: vec![(bytes / 4).max(1) as i64],
            layout: Some(h::LayoutProto { minor_to_major: vec![0], ..Default::default() }),
            ..Default::default()
        })
    };
    let mut instructions = Vec::new();
    for (i, (name, bytes)) in params.iter().enumerate() {
        let id = instructions.len() as i64;
        instructions.push(h::HloInstructionProto {
            name: (*name).to_owned(),
            opcode: "parameter".to_owned(),
            shape: Some(shape(*bytes)),
            parameter_number: i as i64,
            id,
            ..Default::default()
        });
    }
    for op in program.ops() {
        let id = instructions.len() as i64;
        let bytes = temps.iter().find(|(n, _)| *n == op.name).map_or(4096, |(_, b)| *b);
        let (file, line) = match op.source.as_deref().and_then(|s| s.rsplit_once(':')) {
            Some((f, l)) => (f.to_owned(), l.parse().unwrap_or(0)),
            None => (String::new(), 0),
        };
        instructions.push(h::HloInstructionProto {
            name: op.name.clone(),
            opcode: op.opcode.clone(),
            shape: Some(shape(bytes)),
            metadata: Some(h::OpMetadata {
                op_type: op.opcode.clone(),
                op_name: op.tf_op.clone().unwrap_or_else(|| format!("jit(train_step)/{}", op.name)),
                source_file: file,
                source_line: line,
                ..Default::default()
            }),
            id,
            operand_ids: if id > 0 { vec![id - 1] } else { Vec::new() },
            ..Default::default()
        });
    }
    let root_id = instructions.len() as i64 - 1;
    let id_of = |name: &str| instructions.iter().find(|i| i.name == name).map(|i| i.id);
    let mut logical = Vec::new();
    let mut allocations = Vec::new();
    for (i, (name, bytes)) in params.iter().enumerate() {
        let buffer = logical.len() as i64;
        logical.push(h::LogicalBufferProto {
            id: buffer,
            size: *bytes as i64,
            defined_at: Some(h::logical_buffer_proto::Location {
                instruction_name: (*name).to_owned(),
                shape_index: Vec::new(),
                instruction_id: id_of(name).unwrap_or(0),
            }),
            color: 0,
        });
        allocations.push(h::BufferAllocationProto {
            index: allocations.len() as i64,
            size: *bytes as i64,
            is_entry_computation_parameter: true,
            parameter_number: i as i64,
            color: 0,
            assigned: vec![h::buffer_allocation_proto::Assigned {
                logical_buffer_id: buffer,
                offset: 0,
                size: *bytes as i64,
            }],
            ..Default::default()
        });
    }
    let mut events = Vec::new();
    let mut assigned = Vec::new();
    let mut offset = 0i64;
    for (name, bytes) in temps {
        let Some(instruction_id) = id_of(name) else { continue };
        let buffer = logical.len() as i64;
        logical.push(h::LogicalBufferProto {
            id: buffer,
            size: *bytes as i64,
            defined_at: Some(h::logical_buffer_proto::Location {
                instruction_name: (*name).to_owned(),
                shape_index: Vec::new(),
                instruction_id,
            }),
            color: 0,
        });
        assigned.push(h::buffer_allocation_proto::Assigned { logical_buffer_id: buffer, offset, size: *bytes as i64 });
        offset += *bytes as i64;
        let event = |kind| h::heap_simulator_trace::Event {
            kind,
            buffer_id: buffer,
            computation_name: "main".to_owned(),
            instruction_name: (*name).to_owned(),
            ..Default::default()
        };
        events.push(event(0));
    }
    let frees: Vec<h::heap_simulator_trace::Event> =
        events.iter().rev().map(|e| h::heap_simulator_trace::Event { kind: 1, ..e.clone() }).collect();
    events.extend(frees);
    if !assigned.is_empty() {
        allocations.push(h::BufferAllocationProto {
            index: allocations.len() as i64,
            size: offset,
            color: 0,
            assigned,
            ..Default::default()
        });
    }
    let proto = h::HloProto {
        hlo_module: Some(h::HloModuleProto {
            name: module_name.to_owned(),
            entry_computation_name: "main".to_owned(),
            computations: vec![h::HloComputationProto {
                name: "main".to_owned(),
                instructions,
                id: 0,
                root_id,
                ..Default::default()
            }],
            id: 1,
            entry_computation_id: 0,
            ..Default::default()
        }),
        buffer_assignment: Some(h::BufferAssignmentProto {
            logical_buffers: logical,
            buffer_allocations: allocations,
            heap_simulator_traces: vec![h::HeapSimulatorTrace {
                events,
                whole_module_simulation: true,
                ..Default::default()
            }],
        }),
    };
    proto.encode_to_vec()
}

/// Names of the committed TPU-shaped reference fixtures (see [`fixture`]).
pub const FIXTURES: &[&str] = &[
    "tpu_basic",
    "tpu_straggler",
    "tpu_exposed_collective",
    "tpu_vector_bound",
    "tpu_dcn_tail",
    "tpu_sparsecore",
    "tpu_hbm_pressure",
    "tpu_healthy",
];

/// The spec of a named reference fixture: small TPU-shaped profiles that cover every op category,
/// nesting, async pairs, gaps, DVFS and stragglers, committed under `testdata/tpu/<name>/` with
/// XProf's own analysis of them.
///
/// - `tpu_basic`: the reference layer on 4 v5e cores (a partly overlapped all-gather, a
///   synchronous all-reduce, a gap, a `while`, infeed).
/// - `tpu_straggler`: the same on v6e with DVFS factors, core 2 running every op 1.3× slower.
/// - `tpu_exposed_collective`: FSDP-style layers that wait on their all-gather and reduce-scatter.
/// - `tpu_vector_bound`: loop fusions and reductions dominate, one small matmul.
/// - `tpu_dcn_tail`: the reference layer ending in a cross-slice all-reduce after the last
///   compute op, spanned by `MegaScale:` host events.
/// - `tpu_sparsecore`: v5p with saturated SparseCores (dropped trace events), the TensorCore
///   waiting on them, and a dense gather fallback.
/// - `tpu_hbm_pressure`: the reference layer with an HLO buffer assignment peaking at 15 GiB of a
///   v5e's 16 GiB.
/// - `tpu_healthy`: v5p, matmul-bound, its all-gather hidden, SparseCores moderately busy, 20 GiB
///   of HBM: nothing to report.
///
/// Every fixture has an op `fusion.6` that is the only op inside its async windows, and at least
/// ten ops (the roofline crate's XProf comparison tests rely on both).
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
        "tpu_exposed_collective" => Some(exposed_collective_fixture(base)),
        "tpu_vector_bound" => Some(vector_bound_fixture(base)),
        "tpu_dcn_tail" => Some(dcn_tail_fixture(base)),
        "tpu_sparsecore" => Some(sparsecore_fixture(base)),
        "tpu_hbm_pressure" => Some(hbm_pressure_fixture(base)),
        "tpu_healthy" => Some(healthy_fixture(base)),
        _ => None,
    }
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn fixture_op(name: &str, opcode: &str, category: &str, flops: u64, bytes: u64, us: i64) -> OpSpec {
    OpSpec::new(name, opcode, category, flops, bytes, us * 1_000_000)
}

fn with_source(mut op: OpSpec, source: &str, tf_op: &str) -> OpSpec {
    op.source = Some(source.to_owned());
    op.tf_op = Some(tf_op.to_owned());
    op
}

/// FSDP-style layers whose weight all-gather and gradient reduce-scatter are waited on right
/// away: the all-gather window holds one short fusion, the reduce-scatter window none.
fn exposed_collective_fixture(base: SynthSpec) -> SynthSpec {
    let op = fixture_op;
    let items = vec![
        Item::Async {
            start: with_source(
                op("all-gather-start.1", "all-gather-start", "all-gather", 0, 8 * MIB, 1),
                "model.py:33",
                "jit(train_step)/layer0/all_gather",
            ),
            overlapped: vec![op("fusion.6", "fusion", "loop fusion", 2_000_000, 8_000_000, 5)],
            done: op("all-gather-done.1", "all-gather-done", "all-gather", 0, 0, 22),
        },
        Item::Op(with_source(
            op("convolution.3", "convolution", "convolution fusion", 9_000_000_000, 40_000_000, 70),
            "model.py:41",
            "jit(train_step)/layer0/conv_general_dilated",
        )),
        Item::Async {
            start: with_source(
                op("reduce-scatter-start.4", "reduce-scatter-start", "reduce-scatter", 0, 8 * MIB, 1),
                "model.py:58",
                "jit(train_step)/transpose(layer0)/reduce_scatter",
            ),
            overlapped: vec![],
            done: op("reduce-scatter-done.4", "reduce-scatter-done", "reduce-scatter", 0, 0, 18),
        },
        Item::Op(op("dot.5", "dot", "output fusion", 6_000_000_000, 25_000_000, 50)),
        Item::Op(op("fusion.8", "fusion", "loop fusion", 4_000_000, 20_000_000, 25)),
        Item::Op(op("copy.9", "copy", "data formatting", 0, 8_000_000, 6)),
        Item::Op(op("reduce.10", "reduce", "non-fusion elementwise", 500_000, 2_000_000, 4)),
        Item::Op(op("dot.7", "dot", "output fusion", 7_000_000_000, 28_000_000, 60)),
        Item::Op(op("fusion.12", "fusion", "loop fusion", 1_000_000, 6_000_000, 8)),
    ];
    let program = Program { items };
    let hlo = hlo_proto_with_buffers(
        "jit_train_step",
        &program,
        &[("param.0", 2 * GIB), ("param.1", 2 * GIB)],
        &[("convolution.3", 512 * MIB), ("dot.7", 512 * MIB)],
    );
    SynthSpec { seed: 21, program, hlo_proto: Some(hlo), ..base }
}

/// A step dominated by elementwise loop fusions and reductions (activation functions, norms)
/// with a single small matmul: the vector units are the bottleneck and the MXU idles.
fn vector_bound_fixture(base: SynthSpec) -> SynthSpec {
    let op = fixture_op;
    let items = vec![
        Item::Op(with_source(
            op("fusion.1", "fusion", "loop fusion", 2_000_000_000, 8_000_000, 80),
            "model.py:61",
            "jit(train_step)/gelu",
        )),
        Item::Op(with_source(
            op("fusion.2", "fusion", "loop fusion", 1_000_000_000, 6_000_000, 60),
            "model.py:64",
            "jit(train_step)/layer_norm",
        )),
        Item::Op(with_source(
            op("reduce.3", "reduce", "non-fusion elementwise", 500_000_000, 4_000_000, 40),
            "model.py:66",
            "jit(train_step)/reduce_sum",
        )),
        Item::Op(op("dot.4", "dot", "output fusion", 3_000_000_000, 12_000_000, 20)),
        Item::Op(op("copy.5", "copy", "data formatting", 0, 8_000_000, 10)),
        Item::Async {
            start: op("all-gather-start.7", "all-gather-start", "all-gather", 0, 2 * MIB, 1),
            overlapped: vec![with_source(
                op("fusion.6", "fusion", "loop fusion", 1_000_000, 24_000_000, 30),
                "model.py:70",
                "jit(train_step)/add",
            )],
            done: op("all-gather-done.7", "all-gather-done", "all-gather", 0, 0, 1),
        },
        Item::Op(with_source(
            op("fusion.8", "fusion", "loop fusion", 600_000_000, 5_000_000, 20),
            "model.py:73",
            "jit(train_step)/softmax",
        )),
        Item::Op(op("transpose.9", "transpose", "data formatting", 0, 4_000_000, 5)),
        Item::Op(op("select.10", "select", "non-fusion elementwise", 100_000_000, 3_000_000, 6)),
    ];
    let program = Program { items };
    let hlo = hlo_proto_with_buffers(
        "jit_train_step",
        &program,
        &[("param.0", GIB)],
        &[("fusion.1", 256 * MIB), ("fusion.2", 256 * MIB)],
    );
    SynthSpec { seed: 31, program, hlo_proto: Some(hlo), ..base }
}

/// A multi-slice data-parallel step: the backward pass ends, then the gradients are all-reduced
/// across slices over DCN with no compute left to hide it (`MegaScale:` host events span it).
fn dcn_tail_fixture(base: SynthSpec) -> SynthSpec {
    let op = fixture_op;
    let mut items: Vec<Item> = base
        .program
        .items
        .iter()
        .filter(|item| match item {
            Item::Op(o) => !matches!(o.name.as_str(), "all-reduce.7" | "custom-call.12"),
            _ => true,
        })
        .cloned()
        .collect();
    items.push(Item::Async {
        start: with_source(
            op("all-reduce-start.20", "all-reduce-start", "all-reduce", 0, 256 * 1024, 1),
            "train.py:118",
            "jit(train_step)/pmean",
        ),
        overlapped: vec![],
        done: op("all-reduce-done.20", "all-reduce-done", "all-reduce", 0, 0, 45),
    });
    let program = Program { items };
    let hlo = hlo_proto_with_buffers(
        "jit_train_step",
        &program,
        &[("param.0", 3 * GIB)],
        &[("convolution.1", GIB), ("all-reduce-start.20", 512 * MIB)],
    );
    SynthSpec {
        seed: 23,
        program,
        hlo_proto: Some(hlo),
        megascale: Some(MegaScaleSpec {
            op: "all-reduce-done.20".to_owned(),
            payload_bytes: 96 * 1024,
            slices: (0, 1),
        }),
        ..base
    }
}

/// A recommender step on a TPU v5p chip: the SparseCores are saturated by embedding lookups
/// (the TensorCore waits for them at the start of the step), part of the lookups falls back to a
/// dense gather on the TensorCore, and the SparseCore trace buffer dropped events.
fn sparsecore_fixture(base: SynthSpec) -> SynthSpec {
    let op = fixture_op;
    let items = vec![
        Item::Gap(30_000_000),
        Item::Op(with_source(
            op("gather.30", "gather", "gather fusion", 0, 16_000_000, 12),
            "embedding.py:57",
            "jit(train_step)/embed/gather",
        )),
        Item::Op(op("dot.31", "dot", "output fusion", 6_000_000_000, 25_000_000, 40)),
        Item::Op(op("convolution.32", "convolution", "convolution fusion", 9_000_000_000, 40_000_000, 90)),
        Item::Op(op("fusion.33", "fusion", "loop fusion", 4_000_000, 20_000_000, 30)),
        Item::Async {
            start: op("all-gather-start.35", "all-gather-start", "all-gather", 0, 2 * MIB, 1),
            overlapped: vec![op("fusion.6", "fusion", "loop fusion", 1_000_000, 6_000_000, 8)],
            done: op("all-gather-done.35", "all-gather-done", "all-gather", 0, 0, 1),
        },
        Item::Op(op("copy.36", "copy", "data formatting", 0, 4_000_000, 4)),
        Item::Op(op("reduce.37", "reduce", "non-fusion elementwise", 200_000, 1_000_000, 3)),
        Item::Op(op("dot.38", "dot", "output fusion", 3_000_000_000, 12_000_000, 20)),
        Item::Op(op("all-reduce.34", "all-reduce", "all-reduce", 1_000_000, 8_000_000, 10)),
    ];
    let program = Program { items };
    let sc_ops = vec![
        with_source(
            op("embedding-lookup.40", "custom-call", "sparse core", 0, 4_000_000, 6),
            "embedding.py:49",
            "jit(train_step)/embed/sparse_lookup",
        ),
        op("embedding-combine.41", "custom-call", "sparse core", 0, 2_000_000, 3),
        op("embedding-grad.42", "custom-call", "sparse core", 0, 4_000_000, 1),
    ];
    let hlo = hlo_proto_with_buffers(
        "jit_train_step",
        &program,
        &[("param.0", 8 * GIB)],
        &[("gather.30", 2 * GIB), ("convolution.32", GIB)],
    );
    SynthSpec {
        cores: 2,
        seed: 32,
        program,
        device_type: "TPU v5".to_owned(),
        peak_teraflops_per_second: 229.5,
        peak_hbm_bw_gigabytes_per_second: 1382.5,
        peak_vmem_gigabytes_per_second: None,
        hlo_proto: Some(hlo),
        sparse_cores: Some(SparseCoreSpec { per_core: 2, ops: sc_ops, busy_fraction: 0.97, dropped_events: 512 }),
        ..base
    }
}

/// The reference layer of `tpu_basic`, compiled for a batch that fills 15 of the v5e's 16 GiB of
/// HBM: weights and optimizer state as entry parameters plus the activations live at the peak.
fn hbm_pressure_fixture(base: SynthSpec) -> SynthSpec {
    let hlo = hlo_proto_with_buffers(
        "jit_train_step",
        &base.program,
        &[("param.0", 4 * GIB), ("param.1", 8 * GIB), ("param.2", 256 * MIB)],
        &[("convolution.1", 1536 * MIB), ("dot.2", GIB), ("fusion.1", 256 * MIB)],
    );
    SynthSpec { seed: 25, hlo_proto: Some(hlo), ..base }
}

/// A well-behaved step on a TPU v5p chip: matmuls dominate, the weight all-gather is hidden
/// behind a convolution fusion, the step ends with compute, the SparseCores are moderately busy
/// and the program uses well under half of the HBM.
fn healthy_fixture(base: SynthSpec) -> SynthSpec {
    let op = fixture_op;
    let items = vec![
        Item::Async {
            start: op("all-gather-start.1", "all-gather-start", "all-gather", 0, 8 * MIB, 1),
            overlapped: vec![with_source(
                op("fusion.6", "fusion", "convolution fusion", 18_000_000_000, 40_000_000, 90),
                "model.py:41",
                "jit(train_step)/conv_general_dilated",
            )],
            done: op("all-gather-done.1", "all-gather-done", "all-gather", 0, 0, 1),
        },
        Item::Op(op("fusion.3", "fusion", "loop fusion", 4_000_000, 20_000_000, 15)),
        Item::Op(op("dot.5", "dot", "output fusion", 14_000_000_000, 30_000_000, 70)),
        Item::Op(op("dot.6", "dot", "output fusion", 8_000_000_000, 25_000_000, 40)),
        Item::Op(op("fusion.7", "fusion", "loop fusion", 2_000_000, 10_000_000, 10)),
        Item::Op(op("copy.8", "copy", "data formatting", 0, 4_000_000, 4)),
        Item::Op(op("convolution.9", "convolution", "convolution fusion", 12_000_000_000, 30_000_000, 60)),
        Item::Op(op("reduce.10", "reduce", "non-fusion elementwise", 200_000, 1_000_000, 3)),
        Item::Op(op("fusion.11", "fusion", "loop fusion", 1_000_000, 4_000_000, 5)),
    ];
    let program = Program { items };
    let sc_ops = vec![
        op("embedding-lookup.40", "custom-call", "sparse core", 0, 4_000_000, 2),
        op("embedding-grad.42", "custom-call", "sparse core", 0, 4_000_000, 1),
    ];
    let hlo = hlo_proto_with_buffers(
        "jit_train_step",
        &program,
        &[("param.0", 12 * GIB)],
        &[("fusion.6", 4 * GIB), ("dot.5", 4 * GIB)],
    );
    SynthSpec {
        cores: 2,
        seed: 26,
        program,
        device_type: "TPU v5".to_owned(),
        peak_teraflops_per_second: 229.5,
        peak_hbm_bw_gigabytes_per_second: 1382.5,
        peak_vmem_gigabytes_per_second: None,
        hlo_proto: Some(hlo),
        sparse_cores: Some(SparseCoreSpec { per_core: 2, ops: sc_ops, busy_fraction: 0.35, dropped_events: 0 }),
        ..base
    }
}
