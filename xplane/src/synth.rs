//! Synthetic TPU-shaped profiles, written with [`SpaceBuilder`], deterministic for a seed.
//!
//! The shape follows what libtpu writes (facts §2.3, §10.4): one plane per TensorCore
//! (`/device:TPU:N`) with `Steps`, `XLA Modules` and `XLA Ops` lines; op metadata named by the
//! HLO instruction (long name = HLO text, display name = instruction name) with metadata stats
//! `program_id`, `symbol_id`, `hlo_category`, `flops`, `bytes_accessed`; device capability
//! plane stats; a host plane with `train` step markers; `/host:metadata` with an optional
//! serialized HLO proto; and `Task Environment`.
//!
//! Used by benches and tests; the scale harness builds bigger sessions on top of it.
//!
//! ```
//! use xlens_xplane::{Space, synth::{SynthSpec, tpu_profile}};
//! let spec = SynthSpec { steps: 3, ..SynthSpec::default() };
//! let space = Space::parse(tpu_profile(&spec).into())?;
//! assert_eq!(space.tpu_tensor_cores().len(), 4);
//! let steps = space.tpu_tensor_cores()[0].line_by_name("Steps").unwrap().event_count();
//! assert_eq!(steps, 3);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::builder::{BuildValue, SpaceBuilder};
use crate::ids::{EventMetadataId, StatMetadataId};
use crate::names::{line, plane, stat};

/// What to generate.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    /// TensorCores (planes `/device:TPU:0..cores`).
    pub cores: u32,
    /// Steps per core.
    pub steps: u32,
    /// Distinct HLO ops in the program (each runs once per step, in a fixed order).
    pub distinct_ops: u32,
    /// Seed of the deterministic generator.
    pub seed: u64,
    /// The device type string (`device_type_string` plane stat).
    pub device_type: String,
    /// Peak TFLOP/s per core (`peak_teraflops_per_second`).
    pub peak_teraflops_per_second: f64,
    /// Peak HBM GB/s per core (`peak_hbm_bw_gigabytes_per_second`).
    pub peak_hbm_bw_gigabytes_per_second: f64,
    /// The program id of the step program.
    pub program_id: u64,
    /// The module name of the step program.
    pub module_name: String,
    /// A serialized `xla.HloProto` to put in `/host:metadata`, if any.
    pub hlo_proto: Option<Vec<u8>>,
    /// Idle gap between steps, in picoseconds.
    pub step_gap_ps: i64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            cores: 4,
            steps: 10,
            distinct_ops: 200,
            seed: 1,
            device_type: "TPU v5 Lite".to_owned(),
            peak_teraflops_per_second: 197.0,
            peak_hbm_bw_gigabytes_per_second: 819.0,
            program_id: 1,
            module_name: "jit_train_step".to_owned(),
            hlo_proto: None,
            step_gap_ps: 2_000_000,
        }
    }
}

impl SynthSpec {
    /// A spec whose output is about `target_bytes` long (steps scaled to fit).
    pub fn with_target_size(mut self, target_bytes: u64) -> SynthSpec {
        // Measure one step, then scale.
        let probe = SynthSpec { steps: 2, hlo_proto: None, ..self.clone() };
        let one = tpu_profile(&SynthSpec { steps: 1, ..probe.clone() }).len() as u64;
        let two = tpu_profile(&probe).len() as u64;
        let per_step = two.saturating_sub(one).max(1);
        let fixed = one.saturating_sub(per_step);
        self.steps = (target_bytes.saturating_sub(fixed) / per_step).clamp(1, u64::from(u32::MAX)) as u32;
        self
    }
}

/// One op of the synthetic program.
#[derive(Clone, Debug)]
struct SynthOp {
    name: String,
    long_name: String,
    category: &'static str,
    flops: u64,
    bytes: u64,
    duration_ps: i64,
}

/// Categories with their share of ops, flops per byte, and whether they form async pairs.
const OP_KINDS: &[(&str, &str, u64)] = &[
    ("fusion", "loop fusion", 2),
    ("convolution", "convolution fusion", 200),
    ("dot", "output fusion", 150),
    ("copy", "data formatting", 0),
    ("transpose", "data formatting", 0),
    ("all-gather-start", "all-gather", 0),
    ("reduce", "non-fusion elementwise", 1),
    ("fusion", "loop fusion", 4),
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

fn program(spec: &SynthSpec) -> Vec<SynthOp> {
    let mut rng = Rng(spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut ops = Vec::new();
    let mut i = 0u32;
    while ops.len() < spec.distinct_ops as usize {
        let (opcode, category, intensity) = OP_KINDS[(rng.next() % OP_KINDS.len() as u64) as usize];
        let bytes = rng.range(1 << 16, 1 << 24);
        let duration_ps = rng.range(1_000_000, 40_000_000) as i64;
        if opcode == "all-gather-start" {
            let name = format!("all-gather-start.{i}");
            ops.push(SynthOp {
                long_name: format!(
                    "%{name} = (bf16[1024,512], bf16[4096,512]) all-gather-start(bf16[1024,512] %p.{i})"
                ),
                name,
                category: "all-gather",
                flops: 0,
                bytes,
                duration_ps: 500_000,
            });
            let done = format!("all-gather-done.{i}");
            ops.push(SynthOp {
                long_name: format!("%{done} = bf16[4096,512] all-gather-done(%all-gather-start.{i})"),
                name: done,
                category: "all-gather",
                flops: 0,
                bytes,
                duration_ps,
            });
        } else {
            let name = format!("{opcode}.{i}");
            ops.push(SynthOp {
                long_name: format!("%{name} = bf16[1024,512]{{1,0}} {opcode}(bf16[1024,512] %p.{i})"),
                name,
                category,
                flops: bytes * intensity,
                bytes,
                duration_ps,
            });
        }
        i += 1;
    }
    ops
}

/// Writes a synthetic TPU profile for `spec`.
pub fn tpu_profile(spec: &SynthSpec) -> Vec<u8> {
    let ops = program(spec);
    let step_len_ps: i64 = ops.iter().map(|o| o.duration_ps).sum();
    let mut b = SpaceBuilder::default();
    b.hostname("synth-host");
    write_host_planes(&mut b, spec, step_len_ps);
    for core in 0..spec.cores {
        write_core(&mut b, spec, core, &ops, step_len_ps);
    }
    b.finish()
}

fn write_host_planes(b: &mut SpaceBuilder, spec: &SynthSpec, step_len_ps: i64) {
    {
        let mut meta = b.plane(0, plane::HOST_METADATA);
        let module = meta.event_metadata(&format!("{}({})", spec.module_name, spec.program_id));
        let pid = meta.stat_metadata(stat::PROGRAM_ID);
        meta.metadata_stat(module, pid, spec.program_id);
        if let Some(proto) = &spec.hlo_proto {
            let hlo = meta.stat_metadata(stat::HLO_PROTO);
            meta.metadata_stat(module, hlo, proto.as_slice());
        }
    }
    {
        let mut host = b.plane(1, plane::HOST_CPU);
        let train = host.event_metadata("train");
        let step_num = host.stat_metadata(stat::STEP_NUM);
        let root = host.stat_metadata(stat::IS_ROOT);
        let mut python = host.line(1, "python", 0);
        for s in 0..spec.steps {
            let start = i64::from(s) * (step_len_ps + spec.step_gap_ps);
            python
                .event(train, start, step_len_ps + spec.step_gap_ps / 2)
                .stat(step_num, i64::from(s))
                .stat(root, 1i64);
        }
    }
    {
        let mut env = b.plane(2, plane::TASK_ENVIRONMENT);
        let start = env.stat_metadata(stat::PROFILE_START_TIME);
        let stop = env.stat_metadata(stat::PROFILE_STOP_TIME);
        let total_ns = (i64::from(spec.steps) * (step_len_ps + spec.step_gap_ps)) / 1000;
        env.stat(start, 1_700_000_000_000_000_000u64);
        env.stat(stop, 1_700_000_000_000_000_000u64 + total_ns as u64);
    }
}

fn write_core(b: &mut SpaceBuilder, spec: &SynthSpec, core: u32, ops: &[SynthOp], step_len_ps: i64) {
    let mut p = b.plane(i64::from(core) + 100, &format!("{}{core}", plane::TPU_PREFIX));
    let cap = |p: &mut crate::builder::PlaneBuilder<'_>, name: &str, v: BuildValue<'_>| {
        let id = p.stat_metadata(name);
        p.stat(id, v);
    };
    cap(&mut p, stat::DEVICE_TYPE_STRING, BuildValue::Str(&spec.device_type));
    cap(&mut p, stat::capability::PEAK_TERAFLOPS_PER_SECOND, BuildValue::Double(spec.peak_teraflops_per_second));
    cap(
        &mut p,
        stat::capability::PEAK_HBM_BW_GIGABYTES_PER_SECOND,
        BuildValue::Double(spec.peak_hbm_bw_gigabytes_per_second),
    );
    let ids = MetaIds {
        program_id: p.stat_metadata(stat::PROGRAM_ID),
        symbol_id: p.stat_metadata(stat::SYMBOL_ID),
        category: p.stat_metadata(stat::HLO_CATEGORY),
        flops: p.stat_metadata(stat::FLOPS),
        bytes: p.stat_metadata(stat::BYTES_ACCESSED),
    };
    let op_meta: Vec<EventMetadataId> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let m = p.event_metadata_with_display(&op.long_name, &op.name);
            p.metadata_stat(m, ids.program_id, spec.program_id);
            p.metadata_stat(m, ids.symbol_id, i as u64 + 1);
            p.metadata_stat(m, ids.category, op.category);
            if op.flops > 0 {
                p.metadata_stat(m, ids.flops, op.flops);
            }
            p.metadata_stat(m, ids.bytes, op.bytes);
            m
        })
        .collect();
    let module = p.event_metadata(&format!("{}({})", spec.module_name, spec.program_id));
    let step_meta: Vec<EventMetadataId> = (0..spec.steps).map(|s| p.event_metadata(&s.to_string())).collect();
    let period = step_len_ps + spec.step_gap_ps;
    // Cores start a little apart, like real pods.
    let skew = i64::from(core) * 1_000;
    {
        let mut steps = p.line(1, line::STEPS, 0);
        for (s, &m) in step_meta.iter().enumerate() {
            steps.event(m, s as i64 * period + skew, step_len_ps);
        }
    }
    {
        let mut modules = p.line(2, line::XLA_MODULES, 0);
        for s in 0..spec.steps {
            modules.event(module, i64::from(s) * period + skew, step_len_ps);
        }
    }
    let mut xla_ops = p.line(3, line::XLA_OPS, 0);
    for s in 0..spec.steps {
        let mut t = i64::from(s) * period + skew;
        for (op, &m) in ops.iter().zip(&op_meta) {
            xla_ops.event(m, t, op.duration_ps);
            t += op.duration_ps;
        }
    }
}

struct MetaIds {
    program_id: StatMetadataId,
    symbol_id: StatMetadataId,
    category: StatMetadataId,
    flops: StatMetadataId,
    bytes: StatMetadataId,
}
