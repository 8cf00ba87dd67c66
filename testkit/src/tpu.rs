//! TPU-shaped sessions that each show one signature, with clean twins (`testdata/tpu/`).
//!
//! Every session is written with [`crate::synth`] on TPU v5e (`device_type_string`
//! "TPU v5 Lite", 197 TFLOP/s and 819 GB/s per core, the VMEM peaks of `tpu_basic`), four
//! TensorCores per host, deterministic for its seeds:
//!
//! - `tpu_recompile_between_steps` (`recompilation`): ten steps of `jit_train_step`; between
//!   steps 4 and 5 the host retraces and recompiles for about 3.2 s (`lower_sharding_computation`,
//!   then `backend_compile_and_load` around `PjRtCApiClient::CompileAndLoad(jit_train_step)`,
//!   inside `train` 5 and its `PjitFunction(train_step)` dispatch) while no device step runs;
//!   steps 5–9 run the module as program 2 (`XLA Modules` `jit_train_step(2)`, op `program_id`
//!   2), and `/host:metadata` holds the module under program ids 1 and 2.
//!   Twin `tpu_recompile_clean`: the same ten steps, no compile, one program.
//! - `tpu_vpu_stretch` (`vpu_bound`): a transformer layer (512 tokens per core, d_model 8192,
//!   64 heads, FFN 32768) whose layer norms, softmax, exact GELU and unfused f32 `tanh` and
//!   `exponential` take 36 % of each step at 5–8 % of the HBM bandwidth (f32 math on the vector
//!   units, 2.5–10 FLOPs per HBM byte); the matmul fusions take the rest at 58–63 % of the FLOP
//!   peak. Twin `tpu_vpu_clean`: the same ops with bf16, approximate elementwise math at about
//!   68 % of the HBM bandwidth: 5 % of the step.
//! - `tpu_padding_waste` (`padding_waste`): a transformer layer with head_dim 129, d_model 1032,
//!   sequence 500 (batch 8), LoRA adapters of rank 200 on q, k, v, o and the MLP, and a router of
//!   width 127; its matmuls are `kind=kOutput` fusions (category "convolution fusion") whose
//!   fused computation holds the `dot`, every bf16 array laid out `{…:T(8,128)(2,1)}`, running
//!   at 21–53 % of the FLOP peak. Twin `tpu_padding_clean`: head_dim 128, d_model 1024,
//!   sequence 512, rank 256, router 128.
//! - `tpu_straggler_host` (a straggler host, `straggler_core` across hosts): two hosts
//!   (`host0.xplane.pb`, `host1.xplane.pb`) × 4 TensorCores running the healthy layer of
//!   `tpu_vpu_clean`, every op on host 1 12 % slower. Twin `tpu_two_hosts_clean`: both at the
//!   same speed.
//!
//! Every program's HLO is built with [`HloBuilder`] as XLA could load it (fused computations,
//! TPU-tiled layouts, a host program shape, outputs aliased to their donated parameters) and put
//! in `/host:metadata`; each device op's FLOPs are the useful FLOPs of its shapes and its HBM bytes
//! the tiled bytes of its operands and result.
//!
//! ```
//! use xlens_testkit::tpu::tpu_session;
//! use xlens_xplane::Space;
//! let hosts = tpu_session("tpu_straggler_host").unwrap();
//! assert_eq!(hosts.len(), 2);
//! let space = Space::parse(hosts[1].1.clone().into())?;
//! assert_eq!(space.tpu_tensor_cores().len(), 4);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::synth::{Item, OpSpec, Program, RecompileSpec, SynthSpec, tpu_profile};
use prost::Message;
use xlens_hlo::testing::{ComputationBuilder, HloBuilder, shape, tuple_shape};
use xlens_hlo::{PrimitiveType, raw};

/// Names of the sessions [`tpu_session`] writes: each signature, then its clean twin.
pub const TPU_SESSIONS: &[&str] = &[
    "tpu_recompile_between_steps",
    "tpu_recompile_clean",
    "tpu_vpu_stretch",
    "tpu_vpu_clean",
    "tpu_padding_waste",
    "tpu_padding_clean",
    "tpu_straggler_host",
    "tpu_two_hosts_clean",
];

/// The detector ids of the four signatures (every clean twin expects none of them).
const SIGNATURES: &[&str] = &["recompilation", "vpu_bound", "padding_waste", "straggler_core"];

/// TPU v5e per core: peak bf16 FLOP/s and HBM bytes/s (the synth defaults, as libtpu reports).
const PEAK_FLOPS: f64 = 197e12;
const PEAK_HBM: f64 = 819e9;
const MODULE: &str = "jit_train_step";
/// Picoseconds per microsecond.
const US: f64 = 1e6;

/// What a session is expected to show.
#[derive(Clone, Debug, PartialEq)]
pub struct GroundTruth {
    /// XProf's name of the main module (`jit_train_step(1)`).
    pub main_hlo_module: String,
    /// Detector ids expected to report on the session.
    pub expected_faults: Vec<&'static str>,
    /// Detector ids expected to stay silent.
    pub not_expected: Vec<&'static str>,
}

impl GroundTruth {
    /// `ground_truth.json`: `{"main_hlo_module", "expected_faults", "not_expected"}`.
    pub fn to_json(&self) -> String {
        let list = |v: &[&str]| v.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
        format!(
            "{{\"main_hlo_module\": \"{}\", \"expected_faults\": [{}], \"not_expected\": [{}]}}\n",
            self.main_hlo_module,
            list(&self.expected_faults),
            list(&self.not_expected)
        )
    }
}

/// The ground truth of session `name`; `None` for an unknown name.
pub fn tpu_session_ground_truth(name: &str) -> Option<GroundTruth> {
    let expected: &[&'static str] = match name {
        "tpu_recompile_between_steps" => &["recompilation"],
        "tpu_vpu_stretch" => &["vpu_bound"],
        "tpu_padding_waste" => &["padding_waste"],
        "tpu_straggler_host" => &["straggler_core"],
        "tpu_recompile_clean" | "tpu_vpu_clean" | "tpu_padding_clean" | "tpu_two_hosts_clean" => &[],
        _ => return None,
    };
    Some(GroundTruth {
        main_hlo_module: format!("{MODULE}(1)"),
        expected_faults: expected.to_vec(),
        not_expected: SIGNATURES.iter().copied().filter(|s| !expected.contains(s)).collect(),
    })
}

/// The spec of every host of session `name`, by host file name (`host0.xplane.pb`, …);
/// `None` for an unknown name.
pub fn tpu_session_specs(name: &str) -> Option<Vec<(String, SynthSpec)>> {
    let one = |spec: SynthSpec| Some(vec![("host0.xplane.pb".to_owned(), spec)]);
    match name {
        "tpu_recompile_between_steps" => one(recompile_spec(true)),
        "tpu_recompile_clean" => one(recompile_spec(false)),
        "tpu_vpu_stretch" => one(vpu_spec(Vector::Stretch)),
        "tpu_vpu_clean" => one(vpu_spec(Vector::Clean)),
        "tpu_padding_waste" => one(padding_spec(&PaddingDims::ragged())),
        "tpu_padding_clean" => one(padding_spec(&PaddingDims::aligned())),
        "tpu_straggler_host" => Some(two_hosts(1.12)),
        "tpu_two_hosts_clean" => Some(two_hosts(1.0)),
        _ => None,
    }
}

/// Session `name` as `(host file name, serialized XSpace)` pairs; `None` for an unknown name.
pub fn tpu_session(name: &str) -> Option<Vec<(String, Vec<u8>)>> {
    Some(tpu_session_specs(name)?.into_iter().map(|(file, spec)| (file, tpu_profile(&spec))).collect())
}

/// Writes session `name` into `dir` (created): its host files and `ground_truth.json`; returns
/// the host files' paths. An unknown name is an `InvalidInput` error.
pub fn write_tpu_session(name: &str, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let unknown = || {
        io::Error::new(io::ErrorKind::InvalidInput, format!("unknown TPU fixture {name:?}; known: {TPU_SESSIONS:?}"))
    };
    let hosts = tpu_session(name).ok_or_else(unknown)?;
    let truth = tpu_session_ground_truth(name).ok_or_else(unknown)?;
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (file, bytes) in hosts {
        let path = dir.join(file);
        std::fs::write(&path, bytes)?;
        paths.push(path);
    }
    std::fs::write(dir.join("ground_truth.json"), truth.to_json())?;
    Ok(paths)
}

/// The v5e host every session starts from: 4 cores, 30 µs between steps, op times within
/// ±0.3 % (TPU op times barely vary from step to step).
fn v5e(program: Program, seed: u64, steps: u32) -> SynthSpec {
    SynthSpec {
        cores: 4,
        steps,
        program,
        seed,
        jitter: 0.003,
        peak_vmem_gigabytes_per_second: Some((21_696.1 * 1.073_741_824, 15_020.4 * 1.073_741_824)),
        step_gap_ps: 30_000_000,
        host_lead_ps: 5_000_000,
        module_name: MODULE.to_owned(),
        ..SynthSpec::default()
    }
}

fn us(t: f64) -> i64 {
    (t * US).round() as i64
}

// ---------------------------------------------------------------------------------------------
// Kernels, their HLO module and their device ops.

/// What one kernel of a layer computes. Every array is laid out for the TPU (bf16
/// `{…:T(8,128)(2,1)}`, f32 `{…:T(8,128)}`).
#[derive(Clone, Debug, PartialEq)]
enum Kernel {
    /// A `kOutput` fusion around a bf16 `dot` of `lhs` by `rhs` (the first `batch` dimensions
    /// batched, `lhs_k` contracted with `rhs_k`) with an elementwise epilogue; the MXU reaches
    /// `eff` of its peak on the tiled work.
    Matmul { lhs: Vec<i64>, rhs: Vec<i64>, batch: usize, lhs_k: i64, rhs_k: i64, epilogue: Epilogue, eff: f64 },
    /// A `kLoop` fusion normalising bf16[dims] over its last dimension in f32 (layer norm, or a
    /// softmax when `softmax`).
    Normalize { dims: Vec<i64>, softmax: bool },
    /// A `kLoop` fusion applying the exact (erf) GELU to bf16[dims] in f32.
    Gelu { dims: Vec<i64> },
    /// A bare (unfused) f32 elementwise instruction `opcode` over f32[dims].
    Unary { opcode: &'static str, dims: Vec<i64> },
    /// An `all-gather-start` of bf16[shard] from `shards` devices along dimension 0 (an FSDP
    /// prefetch of the next layer's weights); the ops up to the next [`Kernel::AllGatherDone`]
    /// run while it is in flight.
    AllGatherStart { shard: Vec<i64>, shards: i64 },
    /// The `all-gather-done` of the latest `all-gather-start`.
    AllGatherDone,
}

/// The elementwise tail of a matmul fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Epilogue {
    /// `add(dot, broadcast(bias))`.
    Bias,
    /// `add(dot, residual)` (a LoRA update added to the base projection).
    Residual,
    /// `multiply(dot, broadcast(scale))`.
    Scale,
}

/// One kernel of a layer: its instruction name (= the device op's name), XProf category and
/// JAX origin.
#[derive(Clone, Debug, PartialEq)]
struct KernelOp {
    name: String,
    kernel: Kernel,
    category: &'static str,
    source: &'static str,
    tf_op: String,
}

fn kernel_op(name: &str, kernel: Kernel, category: &'static str, source: &'static str, tf_op: &str) -> KernelOp {
    KernelOp { name: name.to_owned(), kernel, category, source, tf_op: tf_op.to_owned() }
}

/// A TPU-tiled array shape: bf16 `{…:T(8,128)(2,1)}`, f32 `{…:T(8,128)}` (XLA's TPU layouts).
fn tiled(ty: PrimitiveType, dims: &[i64]) -> raw::ShapeProto {
    let mut s = shape(ty, dims);
    if dims.len() >= 2
        && let Some(layout) = s.layout.as_mut()
    {
        layout.tiles = vec![raw::TileProto { dimensions: vec![8, 128] }];
        if ty == PrimitiveType::Bf16 {
            layout.tiles.push(raw::TileProto { dimensions: vec![2, 1] });
        }
    }
    s
}

fn bf16(dims: &[i64]) -> raw::ShapeProto {
    tiled(PrimitiveType::Bf16, dims)
}

fn f32s(dims: &[i64]) -> raw::ShapeProto {
    tiled(PrimitiveType::F32, dims)
}

/// XLA's text for a shape: `bf16[500,1032]{1,0:T(8,128)(2,1)}`.
fn shape_text(s: &raw::ShapeProto) -> String {
    if s.element_type == PrimitiveType::Tuple.proto_value() {
        return format!("({})", s.tuple_shapes.iter().map(shape_text).collect::<Vec<_>>().join(", "));
    }
    let ty = match PrimitiveType::from_proto(s.element_type) {
        PrimitiveType::Bf16 => "bf16",
        PrimitiveType::F32 => "f32",
        _ => "u8",
    };
    let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let layout = s.layout.as_ref().map_or(String::new(), |l| {
        let tiles: String = l.tiles.iter().map(|t| format!("({})", list(&t.dimensions))).collect();
        if tiles.is_empty() {
            format!("{{{}}}", list(&l.minor_to_major))
        } else {
            format!("{{{}:T{tiles}}}", list(&l.minor_to_major))
        }
    });
    format!("{ty}[{}]{layout}", list(&s.dimensions))
}

/// The dot's result dimensions: batch dims, lhs free dims, rhs free dims.
fn dot_dims(lhs: &[i64], rhs: &[i64], batch: usize, lhs_k: i64, rhs_k: i64) -> Vec<i64> {
    let mut out: Vec<i64> = lhs[..batch].to_vec();
    out.extend(lhs.iter().enumerate().filter(|(i, _)| *i >= batch && *i as i64 != lhs_k).map(|(_, d)| *d));
    out.extend(rhs.iter().enumerate().filter(|(i, _)| *i >= batch && *i as i64 != rhs_k).map(|(_, d)| *d));
    out
}

/// One entry instruction of a built module: its operand and result shapes and its HLO text.
struct BuiltOp {
    operands: Vec<raw::ShapeProto>,
    result: raw::ShapeProto,
    text: String,
}

/// The module `jit_train_step` (id `id`) running `ops` in order: fusions calling their fused
/// computations, bare elementwise instructions, entry parameters for the weights and for every
/// operand no earlier op produced, the results as a donated tuple (each output aliases the first
/// parameter of its shape), and the host program shape XLA needs to load it. Instruction names
/// are unique across the module.
fn build_module(ops: &[KernelOp], id: i64) -> (raw::HloProto, Vec<BuiltOp>) {
    let mut b = HloBuilder::new(MODULE);
    let add_f32 = {
        let mut c = b.computation("region_0.add");
        let x = c.param("x.region_0", 0, f32s(&[]));
        let y = c.param("y.region_0", 1, f32s(&[]));
        let sum = c.op("add.region_0", "add", f32s(&[]), &[x, y]);
        c.finish(sum)
    };
    // Fused computations first (callees before callers), with each kernel's operand shapes.
    let mut kernels = Vec::new();
    for op in ops {
        let k = op.name.rsplit('.').next().unwrap_or("0").to_owned();
        let meta = |op_type: &str| {
            Some(raw::OpMetadata {
                op_type: op_type.to_owned(),
                op_name: format!("jit(train_step)/{}", op.tf_op),
                source_file: op.source.split(':').next().unwrap_or("").to_owned(),
                source_line: op.source.rsplit(':').next().and_then(|l| l.parse().ok()).unwrap_or(0),
                ..Default::default()
            })
        };
        match &op.kernel {
            Kernel::Unary { dims, .. } => {
                kernels.push((None, vec![f32s(dims)], f32s(dims)));
                continue;
            }
            Kernel::AllGatherStart { shard, shards } => {
                let mut full = shard.clone();
                full[0] *= shards;
                kernels.push((None, vec![bf16(shard)], tuple_shape(vec![bf16(shard), bf16(&full)])));
                continue;
            }
            Kernel::AllGatherDone => {
                let started = kernels.iter().rev().find_map(|(_, _, r): &(Option<i64>, _, raw::ShapeProto)| {
                    (r.tuple_shapes.len() == 2).then(|| r.clone())
                });
                let started = started.unwrap_or_else(|| tuple_shape(vec![bf16(&[1]), bf16(&[1])]));
                let full = started.tuple_shapes[1].clone();
                kernels.push((None, vec![started], full));
                continue;
            }
            _ => {}
        }
        let mut c = b.computation(&format!("fused_computation.{k}"));
        let param = |c: &mut ComputationBuilder<'_>, n: usize, s: raw::ShapeProto| {
            c.param(&format!("param_{n}.{k}"), n as i64, s)
        };
        let (operands, result, root) = match &op.kernel {
            Kernel::Matmul { lhs, rhs, batch, lhs_k, rhs_k, epilogue, .. } => {
                let out = dot_dims(lhs, rhs, *batch, *lhs_k, *rhs_k);
                let l = param(&mut c, 0, bf16(lhs));
                let r = param(&mut c, 1, bf16(rhs));
                let dot = c.op(&format!("dot.{k}"), "dot", bf16(&out), &[l, r]);
                c.edit(dot, |d| {
                    d.dot_dimension_numbers = Some(Box::new(raw::DotDimensionNumbers {
                        lhs_contracting_dimensions: vec![*lhs_k],
                        rhs_contracting_dimensions: vec![*rhs_k],
                        lhs_batch_dimensions: (0..*batch as i64).collect(),
                        rhs_batch_dimensions: (0..*batch as i64).collect(),
                    }));
                    d.metadata = meta("dot_general");
                });
                let (third, root) = match epilogue {
                    Epilogue::Bias => {
                        let n = *out.last().unwrap_or(&1);
                        let bias = param(&mut c, 2, bf16(&[n]));
                        let bc = c.op(&format!("broadcast.{k}"), "broadcast", bf16(&out), &[bias]);
                        c.edit(bc, |x| x.dimensions = vec![out.len() as i64 - 1]);
                        (bf16(&[n]), c.op(&format!("add.{k}"), "add", bf16(&out), &[dot, bc]))
                    }
                    Epilogue::Residual => {
                        let res = param(&mut c, 2, bf16(&out));
                        (bf16(&out), c.op(&format!("add.{k}"), "add", bf16(&out), &[dot, res]))
                    }
                    Epilogue::Scale => {
                        let scale = param(&mut c, 2, bf16(&[]));
                        let bc = c.op(&format!("broadcast.{k}"), "broadcast", bf16(&out), &[scale]);
                        (bf16(&[]), c.op(&format!("multiply.{k}"), "multiply", bf16(&out), &[dot, bc]))
                    }
                };
                (vec![bf16(lhs), bf16(rhs), third], bf16(&out), root)
            }
            Kernel::Normalize { dims, softmax } => {
                let rank = dims.len();
                let x = param(&mut c, 0, bf16(dims));
                let init = param(&mut c, 1, f32s(&[]));
                let wide = c.op(&format!("convert.{k}"), "convert", f32s(dims), &[x]);
                let v =
                    if *softmax { c.op(&format!("exponential.{k}"), "exponential", f32s(dims), &[wide]) } else { wide };
                let sum = c.op(&format!("reduce.{k}"), "reduce", f32s(&dims[..rank - 1]), &[v, init]);
                c.edit(sum, |r| {
                    r.dimensions = vec![rank as i64 - 1];
                    r.called_computation_ids = vec![add_f32];
                    r.metadata = meta("reduce_sum");
                });
                let bc = c.op(&format!("broadcast.{k}"), "broadcast", f32s(dims), &[sum]);
                c.edit(bc, |x| x.dimensions = (0..rank as i64 - 1).collect());
                let opcode = if *softmax { "divide" } else { "subtract" };
                let norm = c.op(&format!("{opcode}.{k}"), opcode, f32s(dims), &[v, bc]);
                c.edit(norm, |n| n.metadata = meta(if *softmax { "div" } else { "sub" }));
                let out = c.op(&format!("convert.{k}.1"), "convert", bf16(dims), &[norm]);
                (vec![bf16(dims), f32s(&[])], bf16(dims), out)
            }
            Kernel::Gelu { dims } => {
                let x = param(&mut c, 0, bf16(dims));
                let wide = c.op(&format!("convert.{k}"), "convert", f32s(dims), &[x]);
                let erf = c.op(&format!("erf.{k}"), "erf", f32s(dims), &[wide]);
                c.edit(erf, |e| e.metadata = meta("erf"));
                let prod = c.op(&format!("multiply.{k}"), "multiply", f32s(dims), &[wide, erf]);
                let out = c.op(&format!("convert.{k}.1"), "convert", bf16(dims), &[prod]);
                (vec![bf16(dims)], bf16(dims), out)
            }
            Kernel::Unary { .. } | Kernel::AllGatherStart { .. } | Kernel::AllGatherDone => {
                unreachable!("no fused computation")
            }
        };
        kernels.push((Some(c.finish(root)), operands, result));
    }

    let mut main = b.computation("main.1");
    let mut params: Vec<raw::ShapeProto> = Vec::new();
    let mut param_names: Vec<String> = Vec::new();
    let mut latest: HashMap<(i32, Vec<i64>), (i64, String)> = HashMap::new();
    let mut outputs: Vec<(i64, raw::ShapeProto)> = Vec::new();
    let mut built = Vec::new();
    let mut started: Option<(i64, String)> = None;
    for (op, (called, operands, result)) in ops.iter().zip(kernels) {
        let mut args = Vec::new();
        let mut texts = Vec::new();
        if let (Kernel::AllGatherDone, Some((id, name))) = (&op.kernel, &started) {
            args.push(*id);
            texts.push(format!("{} %{name}", shape_text(&operands[0])));
        }
        for (j, s) in operands.iter().enumerate().filter(|_| op.kernel != Kernel::AllGatherDone) {
            // The first operand is the latest value of its shape (the layer's data flow);
            // weights, biases, scalars and anything not produced yet (the shard an all-gather
            // fetches) are entry parameters.
            let gather = matches!(op.kernel, Kernel::AllGatherStart { .. });
            match latest.get(&(s.element_type, s.dimensions.clone())).filter(|_| j == 0 && !gather) {
                Some((id, name)) => {
                    args.push(*id);
                    texts.push(format!("{} %{name}", shape_text(s)));
                }
                None => {
                    let n = params.len();
                    let name = format!("Arg_{n}.{}", n + 1);
                    args.push(main.param(&name, n as i64, s.clone()));
                    texts.push(format!("{} %{name}", shape_text(s)));
                    params.push(s.clone());
                    param_names.push(name);
                }
            }
        }
        let metadata = Some(raw::OpMetadata { op_name: format!("jit(train_step)/{}", op.tf_op), ..Default::default() });
        let (id, text) = match (&op.kernel, called) {
            (Kernel::Unary { opcode, .. }, _) => {
                let id = main.op(&op.name, opcode, result.clone(), &args);
                main.edit(id, |x| x.metadata = metadata);
                (id, format!("%{} = {} {opcode}({})", op.name, shape_text(&result), texts.join(", ")))
            }
            (Kernel::AllGatherStart { shards, .. }, _) => {
                let id = main.op(&op.name, "all-gather-start", result.clone(), &args);
                main.edit(id, |x| {
                    x.dimensions = vec![0];
                    x.replica_groups = vec![raw::ReplicaGroup { replica_ids: (0..*shards).collect() }];
                    x.channel_id = 1;
                    x.use_global_device_ids = true;
                    x.metadata = metadata;
                });
                started = Some((id, op.name.clone()));
                let group = (0..*shards).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
                let text = format!(
                    "%{} = {} all-gather-start({}), channel_id=1, replica_groups={{{{{group}}}}}, dimensions={{0}}, \
                     use_global_device_ids=true",
                    op.name,
                    shape_text(&result),
                    texts.join(", ")
                );
                (id, text)
            }
            (Kernel::AllGatherDone, _) => {
                let id = main.op(&op.name, "all-gather-done", result.clone(), &args);
                main.edit(id, |x| x.metadata = metadata);
                (id, format!("%{} = {} all-gather-done({})", op.name, shape_text(&result), texts.join(", ")))
            }
            (kernel, called) => {
                let kind = if matches!(kernel, Kernel::Matmul { .. }) { "kOutput" } else { "kLoop" };
                let id = main.op(&op.name, "fusion", result.clone(), &args);
                main.edit(id, |x| {
                    x.fusion_kind = kind.to_owned();
                    x.called_computation_ids = called.into_iter().collect();
                    x.metadata = metadata;
                });
                let k = op.name.rsplit('.').next().unwrap_or("0");
                let text = format!(
                    "%{} = {} fusion({}), kind={kind}, calls=%fused_computation.{k}",
                    op.name,
                    shape_text(&result),
                    texts.join(", ")
                );
                (id, text)
            }
        };
        latest.insert((result.element_type, result.dimensions.clone()), (id, op.name.clone()));
        if !matches!(op.kernel, Kernel::AllGatherStart { .. }) {
            outputs.push((id, result.clone()));
        }
        built.push(BuiltOp { operands, result, text });
    }
    let result = tuple_shape(outputs.iter().map(|(_, s)| s.clone()).collect());
    let ids: Vec<i64> = outputs.iter().map(|(id, _)| *id).collect();
    let root = main.op("tuple.root", "tuple", result.clone(), &ids);
    main.finish(root);
    // The step donates its state (`donate_argnums`).
    let aliases = crate::donated_aliases(&params, &outputs.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>());
    let module = b.module_mut();
    module.id = id;
    module.input_output_alias = Some(aliases);
    module.host_program_shape =
        Some(raw::ProgramShapeProto { parameters: params, result: Some(result), parameter_names: param_names });
    (b.finish("main.1"), built)
}

/// TPU bytes of an array shape (its tiles), as `xlens_hlo` computes them.
fn padded_bytes(s: &raw::ShapeProto) -> f64 {
    xlens_hlo::Shape::from_proto(s).map_or(0.0, |s| s.tpu_padded_bytes() as f64)
}

fn round_up(v: i64, to: i64) -> i64 {
    (v + to - 1) / to * to
}

/// Useful FLOPs of a matmul kernel and the time its MXU work takes: `eff` of the peak on the
/// work of M rounded to 16 rows and K, N to 128 lanes (the tiles a bf16 dot runs on), or the
/// HBM time of its bytes at 85 % of the bandwidth, whichever is longer.
fn matmul_cost(kernel: &Kernel, bytes: f64) -> (f64, f64) {
    let Kernel::Matmul { lhs, rhs, batch, lhs_k, rhs_k, eff, .. } = kernel else { return (0.0, 0.0) };
    let b: i64 = lhs[..*batch].iter().product();
    let k = lhs[*lhs_k as usize];
    let free = |dims: &[i64], skip: i64| -> i64 {
        dims.iter().enumerate().filter(|(i, _)| *i >= *batch && *i as i64 != skip).map(|(_, v)| v).product()
    };
    let (m, n) = (free(lhs, *lhs_k), free(rhs, *rhs_k));
    let useful = 2.0 * (b * m * n * k) as f64;
    let tiled = 2.0 * (b * round_up(m, 16) * round_up(n, 128) * round_up(k, 128)) as f64;
    let compute = tiled / (eff * PEAK_FLOPS);
    let memory = bytes / (0.85 * PEAK_HBM);
    (useful, compute.max(memory) * 1e6)
}

/// The device ops of `ops` (HBM bytes are the tiled bytes of each instruction's operands and
/// result, none for an all-gather's start and done, whose transfer runs in the background; `cost`
/// gives FLOPs, time in µs and on-chip bytes from the op and its HBM bytes); an all-gather and
/// the ops up to its done form an async window.
fn device_ops(ops: &[KernelOp], built: &[BuiltOp], cost: impl Fn(&KernelOp, f64) -> (f64, f64, f64)) -> Program {
    let specs: Vec<OpSpec> = ops
        .iter()
        .zip(built)
        .map(|(op, b)| {
            let (read, write) = match &op.kernel {
                Kernel::AllGatherStart { .. } | Kernel::AllGatherDone => (0.0, 0.0),
                _ => (b.operands.iter().map(padded_bytes).sum(), padded_bytes(&b.result)),
            };
            let (flops, t_us, onchip) = cost(op, read + write);
            let opcode = match &op.kernel {
                Kernel::Unary { opcode, .. } => opcode,
                Kernel::AllGatherStart { .. } => "all-gather-start",
                Kernel::AllGatherDone => "all-gather-done",
                _ => "fusion",
            };
            let mut o = OpSpec::new(&op.name, opcode, op.category, flops.round() as u64, 0, us(t_us));
            o.hbm_read_bytes = read.round() as u64;
            o.hbm_write_bytes = write.round() as u64;
            o.onchip_read_bytes = onchip.round() as u64;
            o.source = Some(op.source.to_owned());
            o.tf_op = Some(format!("jit(train_step)/{}", op.tf_op));
            o.hlo_text = Some(b.text.clone());
            o
        })
        .collect();
    let mut items = Vec::new();
    let mut window: Option<(OpSpec, Vec<OpSpec>)> = None;
    for (op, spec) in ops.iter().zip(specs) {
        match (&op.kernel, window.take()) {
            (Kernel::AllGatherStart { .. }, _) => window = Some((spec, Vec::new())),
            (Kernel::AllGatherDone, Some((start, overlapped))) => {
                items.push(Item::Async { start, overlapped, done: spec })
            }
            (_, Some((start, mut overlapped))) => {
                overlapped.push(spec);
                window = Some((start, overlapped));
            }
            (_, None) => items.push(Item::Op(spec)),
        }
    }
    Program { items }
}

fn elements(kernel: &Kernel) -> f64 {
    match kernel {
        Kernel::Normalize { dims, .. } | Kernel::Gelu { dims } | Kernel::Unary { dims, .. } => {
            dims.iter().product::<i64>() as f64
        }
        Kernel::Matmul { .. } | Kernel::AllGatherStart { .. } | Kernel::AllGatherDone => 0.0,
    }
}

// ---------------------------------------------------------------------------------------------
// The transformer layer of the vector-unit sessions (also the healthy layer of the others).

/// How the layer does its elementwise work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vector {
    /// f32 math with exact transcendentals on the vector units: 36 % of the step.
    Stretch,
    /// bf16, approximate: near the HBM floor, 5 % of the step.
    Clean,
}

/// The layer: 512 tokens per core (2 sequences of 256), d_model 8192, 64 heads of 128, FFN 32768.
fn layer_ops() -> Vec<KernelOp> {
    let (t, d, h, hd, s, f) = (512, 8192, 64, 128, 256, 32768);
    let dense = |k: i64, n: i64, eff: f64| Kernel::Matmul {
        lhs: vec![t, k],
        rhs: vec![k, n],
        batch: 0,
        lhs_k: 1,
        rhs_k: 0,
        epilogue: Epilogue::Bias,
        eff,
    };
    let heads = [t / s, h, s, hd];
    let probs = [t / s, h, s, s];
    let attention = |lhs: &[i64], rhs_k: i64| Kernel::Matmul {
        lhs: lhs.to_vec(),
        rhs: heads.to_vec(),
        batch: 2,
        lhs_k: 3,
        rhs_k,
        epilogue: Epilogue::Scale,
        eff: 0.6,
    };
    let (conv, out, loop_, elementwise) =
        ("convolution fusion", "output fusion", "loop fusion", "non-fusion elementwise");
    let gather = |shard: &[i64]| Kernel::AllGatherStart { shard: shard.to_vec(), shards: 4 };
    vec![
        kernel_op(
            "fusion.1",
            Kernel::Normalize { dims: vec![t, d], softmax: false },
            loop_,
            "model.py:52",
            "layer_norm",
        ),
        kernel_op("fusion.2", dense(d, 3 * d, 0.62), conv, "model.py:58", "attention/qkv/dot_general"),
        kernel_op("fusion.3", attention(&heads, 3), out, "model.py:63", "attention/scores/dot_general"),
        kernel_op(
            "fusion.4",
            Kernel::Normalize { dims: probs.to_vec(), softmax: true },
            loop_,
            "model.py:64",
            "attention/softmax",
        ),
        kernel_op("fusion.5", attention(&probs, 2), out, "model.py:65", "attention/values/dot_general"),
        kernel_op("all-gather-start.13", gather(&[t, d]), "all-gather", "model.py:90", "layer_1/fsdp/all_gather"),
        kernel_op("fusion.6", dense(d, d, 0.58), conv, "model.py:67", "attention/out/dot_general"),
        kernel_op("all-gather-done.13", Kernel::AllGatherDone, "all-gather", "model.py:90", "layer_1/fsdp/all_gather"),
        kernel_op(
            "exponential.7",
            Kernel::Unary { opcode: "exponential", dims: vec![t, d] },
            elementwise,
            "model.py:70",
            "gate/exp",
        ),
        kernel_op(
            "fusion.8",
            Kernel::Normalize { dims: vec![t, d], softmax: false },
            loop_,
            "model.py:72",
            "layer_norm",
        ),
        kernel_op("fusion.9", dense(d, f, 0.63), conv, "model.py:75", "mlp/up/dot_general"),
        kernel_op("fusion.10", Kernel::Gelu { dims: vec![t, f] }, loop_, "model.py:76", "mlp/gelu"),
        kernel_op(
            "tanh.11",
            Kernel::Unary { opcode: "tanh", dims: vec![t, d] },
            elementwise,
            "model.py:78",
            "gate/tanh",
        ),
        kernel_op("fusion.12", dense(f, d, 0.61), conv, "model.py:80", "mlp/down/dot_general"),
    ]
}

/// The layer's vector work per op: FLOPs per element and time in µs, (stretch, clean). In the
/// stretch every op is f32 math with exact transcendentals, many times its HBM time; clean, the
/// same ops run bf16 and approximate, at about 68 % of the HBM bandwidth.
fn vector_cost(name: &str, mode: Vector) -> (f64, f64) {
    let ((per_stretch, per_clean), (t_stretch, t_clean)) = match name {
        "fusion.1" | "fusion.8" => ((16.0, 8.0), (300.0, 30.0)),
        "fusion.4" => ((24.0, 10.0), (700.0, 60.0)),
        "exponential.7" => ((20.0, 6.0), (550.0, 61.5)),
        "fusion.10" => ((40.0, 12.0), (1500.0, 120.0)),
        "tanh.11" => ((30.0, 8.0), (525.0, 61.0)),
        _ => ((1.0, 1.0), (1.0, 1.0)),
    };
    match mode {
        Vector::Stretch => (per_stretch, t_stretch),
        Vector::Clean => (per_clean, t_clean),
    }
}

/// One layer of the vector-unit sessions and its module (as program `id`).
fn layer(mode: Vector, id: i64) -> (Program, Vec<u8>) {
    let ops = layer_ops();
    let (proto, built) = build_module(&ops, id);
    let program = device_ops(&ops, &built, |op, bytes| match &op.kernel {
        Kernel::Matmul { .. } => {
            let (flops, t) = matmul_cost(&op.kernel, bytes);
            (flops, t, 4.0 * bytes)
        }
        Kernel::AllGatherStart { .. } => (0.0, 1.0, 0.0),
        Kernel::AllGatherDone => (0.0, 2.0, 0.0),
        kernel => {
            let (per, t) = vector_cost(&op.name, mode);
            let onchip = if mode == Vector::Stretch { 32.0 } else { 8.0 };
            (elements(kernel) * per, t, elements(kernel) * onchip)
        }
    });
    (program, proto.encode_to_vec())
}

fn vpu_spec(mode: Vector) -> SynthSpec {
    let (program, hlo) = layer(mode, 1);
    let seed = if mode == Vector::Stretch { 141 } else { 142 };
    SynthSpec { hlo_proto: Some(hlo), ..v5e(program, seed, 6) }
}

fn recompile_spec(recompile: bool) -> SynthSpec {
    let (program, hlo) = layer(Vector::Clean, 1);
    let recompile = recompile.then(|| RecompileSpec {
        step: 5,
        program_id: 2,
        hlo_proto: Some(layer(Vector::Clean, 2).1),
        lowering_ps: us(180_000.0),
        compile_ps: us(3_050_000.0),
    });
    SynthSpec { hlo_proto: Some(hlo), recompile, ..v5e(program, 131, 10) }
}

/// Two hosts running the healthy layer; every op (and gap) of host 1 `slowdown` times longer.
fn two_hosts(slowdown: f64) -> Vec<(String, SynthSpec)> {
    let (program, hlo) = layer(Vector::Clean, 1);
    (0..2u32)
        .map(|h| {
            let scale = if h == 1 { slowdown } else { 1.0 };
            let spec = SynthSpec {
                hlo_proto: Some(hlo.clone()),
                hostname: Some(format!("host{h}")),
                ..v5e(slower(&program, scale), 161 + u64::from(h), 8)
            };
            (format!("host{h}.xplane.pb"), spec)
        })
        .collect()
}

/// `program` with every op and gap `factor` times longer.
fn slower(program: &Program, factor: f64) -> Program {
    let op = |o: &OpSpec| OpSpec { duration_ps: (o.duration_ps as f64 * factor).round() as i64, ..o.clone() };
    let items = program
        .items
        .iter()
        .map(|item| match item {
            Item::Op(o) => Item::Op(op(o)),
            Item::Async { start, overlapped, done } => {
                Item::Async { start: op(start), overlapped: overlapped.iter().map(op).collect(), done: op(done) }
            }
            Item::Nested { parent, children } => {
                Item::Nested { parent: op(parent), children: children.iter().map(op).collect() }
            }
            Item::Gap(g) => Item::Gap((*g as f64 * factor).round() as i64),
        })
        .collect();
    Program { items }
}

// ---------------------------------------------------------------------------------------------
// The padding sessions.

/// The dimensions of the padding sessions' layer.
#[derive(Clone, Debug, PartialEq)]
struct PaddingDims {
    head_dim: i64,
    heads: i64,
    seq: i64,
    batch: i64,
    rank: i64,
    router: i64,
}

impl PaddingDims {
    /// head_dim 129 (d_model 1032), sequence 500, LoRA rank 200, router 127.
    fn ragged() -> PaddingDims {
        PaddingDims { head_dim: 129, heads: 8, seq: 500, batch: 8, rank: 200, router: 127 }
    }

    /// head_dim 128 (d_model 1024), sequence 512, LoRA rank 256, router 128.
    fn aligned() -> PaddingDims {
        PaddingDims { head_dim: 128, heads: 8, seq: 512, batch: 8, rank: 256, router: 128 }
    }
}

/// A LoRA-tuned transformer layer with a mixture-of-experts router: every matmul a `kOutput`
/// "convolution fusion" (projections at 60 % of the MXU peak on their tiles, attention 45 %,
/// LoRA 42 %, the narrow router 25 %), layer norms, softmaxes and GELU as loop fusions.
fn padding_ops(d: &PaddingDims) -> Vec<KernelOp> {
    let (b, h, s, hd, r) = (d.batch, d.heads, d.seq, d.head_dim, d.rank);
    let (t, dm) = (b * s, h * hd);
    let f = 4 * dm;
    let mut ops = Vec::new();
    let mut push = |kernel: Kernel, source: &'static str, tf: &str| {
        let category = if matches!(kernel, Kernel::Matmul { .. }) { "convolution fusion" } else { "loop fusion" };
        ops.push(kernel_op(&format!("fusion.{}", ops.len() + 1), kernel, category, source, tf));
    };
    let dense = |k: i64, n: i64, epilogue: Epilogue, eff: f64| Kernel::Matmul {
        lhs: vec![t, k],
        rhs: vec![k, n],
        batch: 0,
        lhs_k: 1,
        rhs_k: 0,
        epilogue,
        eff,
    };
    let lora = |push: &mut dyn FnMut(Kernel, &'static str, &str), k: i64, n: i64, what: &str| {
        push(dense(k, r, Epilogue::Scale, 0.42), "lora.py:31", &format!("{what}/lora_a/dot_general"));
        push(dense(r, n, Epilogue::Residual, 0.42), "lora.py:32", &format!("{what}/lora_b/dot_general"));
    };
    let attention = |lhs: Vec<i64>, rhs_k: i64| Kernel::Matmul {
        lhs,
        rhs: vec![b, h, s, hd],
        batch: 2,
        lhs_k: 3,
        rhs_k,
        epilogue: Epilogue::Scale,
        eff: 0.45,
    };
    push(Kernel::Normalize { dims: vec![t, dm], softmax: false }, "model.py:52", "layer_norm");
    push(dense(dm, 3 * dm, Epilogue::Bias, 0.60), "model.py:58", "attention/qkv/dot_general");
    for what in ["attention/q", "attention/k", "attention/v"] {
        lora(&mut push, dm, dm, what);
    }
    push(attention(vec![b, h, s, hd], 3), "model.py:63", "attention/scores/dot_general");
    push(Kernel::Normalize { dims: vec![b, h, s, s], softmax: true }, "model.py:64", "attention/softmax");
    push(attention(vec![b, h, s, s], 2), "model.py:65", "attention/values/dot_general");
    push(dense(dm, dm, Epilogue::Bias, 0.60), "model.py:67", "attention/out/dot_general");
    lora(&mut push, dm, dm, "attention/o");
    push(Kernel::Normalize { dims: vec![t, dm], softmax: false }, "model.py:72", "layer_norm");
    push(dense(dm, d.router, Epilogue::Bias, 0.25), "moe.py:40", "router/dot_general");
    push(Kernel::Normalize { dims: vec![t, d.router], softmax: true }, "moe.py:41", "router/softmax");
    push(dense(dm, f, Epilogue::Bias, 0.60), "model.py:75", "mlp/up/dot_general");
    lora(&mut push, dm, f, "mlp/up");
    push(Kernel::Gelu { dims: vec![t, f] }, "model.py:76", "mlp/gelu");
    push(dense(f, dm, Epilogue::Bias, 0.60), "model.py:80", "mlp/down/dot_general");
    lora(&mut push, f, dm, "mlp/down");
    // The next layer's LoRA weights, prefetched (FSDP) while `fusion.6` runs.
    let at = ops.iter().position(|o| o.name == "fusion.6").unwrap_or(0);
    let tf = "layer_1/attention/q/lora_a/all_gather";
    let gather = Kernel::AllGatherStart { shard: vec![dm / 4, r], shards: 4 };
    ops.insert(at + 1, kernel_op("all-gather-done.25", Kernel::AllGatherDone, "all-gather", "model.py:90", tf));
    ops.insert(at, kernel_op("all-gather-start.25", gather, "all-gather", "model.py:90", tf));
    ops
}

fn padding_spec(d: &PaddingDims) -> SynthSpec {
    let ops = padding_ops(d);
    let (proto, built) = build_module(&ops, 1);
    let program = device_ops(&ops, &built, |op, bytes| match &op.kernel {
        Kernel::Matmul { .. } => {
            let (flops, t) = matmul_cost(&op.kernel, bytes);
            (flops, t, 2.0 * bytes)
        }
        Kernel::AllGatherStart { .. } | Kernel::AllGatherDone => (0.0, 1.0, 0.0),
        kernel => {
            let per = if matches!(kernel, Kernel::Normalize { softmax: false, .. }) { 8.0 } else { 12.0 };
            (elements(kernel) * per, bytes / (0.8 * PEAK_HBM) * 1e6, elements(kernel) * 8.0)
        }
    });
    let seed = if d.head_dim == 129 { 151 } else { 152 };
    SynthSpec { hlo_proto: Some(proto.encode_to_vec()), ..v5e(program, seed, 6) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::Space;

    #[test]
    fn every_fixture_parses_is_small_and_deterministic() {
        for &name in TPU_SESSIONS {
            let hosts = tpu_session(name).expect("known fixture");
            assert_eq!(hosts, tpu_session(name).expect("known fixture"), "{name}: deterministic");
            let specs = tpu_session_specs(name).expect("known fixture");
            assert_eq!(hosts.len(), specs.len());
            for ((file, bytes), (_, spec)) in hosts.iter().zip(&specs) {
                assert!(bytes.len() < 1 << 20, "{name}/{file}: {} bytes", bytes.len());
                let space = Space::parse(bytes.clone().into()).expect("parses");
                let cores = space.tpu_tensor_cores();
                assert_eq!(cores.len(), 4, "{name}/{file}");
                for core in &cores {
                    let steps = core.line_by_name("Steps").expect("Steps line").event_count();
                    assert_eq!(steps, spec.steps as usize, "{name}/{file}");
                    let ops = core.line_by_name("XLA Ops").expect("XLA Ops line").event_count();
                    assert_eq!(ops, spec.program.ops().len() * spec.steps as usize, "{name}/{file}");
                }
                let (modules, _) = xlens_hlo::modules_from_space(&space);
                let expected = if spec.recompile.is_some() { 2 } else { 1 };
                assert_eq!(modules.len(), expected, "{name}/{file}");
                for m in &modules {
                    assert_eq!(m.name(), MODULE);
                    for op in spec.program.ops() {
                        assert!(m.instruction_by_name(&op.name).is_some(), "{name}: {} not in the HLO", op.name);
                    }
                }
            }
            let truth = tpu_session_ground_truth(name).expect("ground truth");
            assert_eq!(truth.expected_faults.len() + truth.not_expected.len(), SIGNATURES.len());
        }
        assert!(tpu_session("nope").is_none() && tpu_session_ground_truth("nope").is_none());
    }

    #[test]
    fn the_committed_sessions_are_what_the_generator_writes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tpu");
        for &name in TPU_SESSIONS {
            for (file, bytes) in tpu_session(name).expect("known fixture") {
                let committed = std::fs::read(root.join(name).join(&file)).expect("committed host file");
                assert!(committed == bytes, "{name}/{file} differs: rerun scripts/capture/tpu_sessions.sh {name}");
            }
            let truth = std::fs::read_to_string(root.join(name).join("ground_truth.json")).expect("ground truth");
            assert_eq!(truth, tpu_session_ground_truth(name).expect("known fixture").to_json(), "{name}");
        }
    }

    /// Share of each step's ops (core 0's program, nominal durations) that `pred` selects.
    fn share(spec: &SynthSpec, pred: impl Fn(&OpSpec) -> bool) -> f64 {
        let ops = spec.program.ops();
        let total: i64 = ops.iter().map(|o| o.duration_ps).sum();
        ops.iter().filter(|o| pred(o)).map(|o| o.duration_ps).sum::<i64>() as f64 / total as f64
    }

    fn is_vector(o: &OpSpec) -> bool {
        o.category == "loop fusion" || o.category == "non-fusion elementwise"
    }

    #[test]
    fn vector_work_is_a_third_of_the_stretch_and_a_twentieth_of_the_clean_step() {
        let stretch = vpu_spec(Vector::Stretch);
        let clean = vpu_spec(Vector::Clean);
        assert!((0.34..0.38).contains(&share(&stretch, is_vector)), "{}", share(&stretch, is_vector));
        assert!((0.04..0.06).contains(&share(&clean, is_vector)), "{}", share(&clean, is_vector));
        for o in stretch.program.ops().into_iter().filter(|o| is_vector(o)) {
            // Vector-unit bound: well under half the HBM bandwidth, several FLOPs per byte.
            let hbm = o.hbm_bytes() as f64 / (o.duration_ps as f64 / 1e12) / PEAK_HBM;
            assert!(hbm < 0.1, "{}: HBM {hbm}", o.name);
            assert!(o.flops as f64 / o.hbm_bytes() as f64 >= 2.5, "{}", o.name);
        }
        for o in clean.program.ops() {
            let hbm = o.hbm_bytes() as f64 / (o.duration_ps as f64 / 1e12) / PEAK_HBM;
            assert!(hbm < 0.9, "{}: HBM {hbm}", o.name);
        }
    }

    #[test]
    fn padded_matmuls_run_at_a_fifth_to_a_half_of_the_flop_peak() {
        let spec = padding_spec(&PaddingDims::ragged());
        for o in spec.program.ops().into_iter().filter(|o| o.category == "convolution fusion") {
            let util = o.flops as f64 / (o.duration_ps as f64 / 1e12) / PEAK_FLOPS;
            assert!((0.20..0.54).contains(&util), "{}: {util}", o.name);
            let text = o.hlo_text.as_deref().unwrap_or("");
            assert!(text.contains("kind=kOutput") && text.contains(":T(8,128)(2,1)}"), "{text}");
        }
        let proto = spec.hlo_proto.expect("hlo");
        let module = xlens_hlo::Module::decode(proto.into()).expect("decodes");
        let fusion = module.instruction_by_name("fusion.9").expect("scores");
        let body = module.fused_computation(fusion.id()).expect("fused computation");
        assert!(body.instructions().iter().any(|&i| module.instruction(i).opcode() == xlens_hlo::Opcode::Dot));
        // [8,8,500,129] bf16 pads 129 to 256 lanes.
        assert!(fusion.shape().tpu_padded_bytes() > fusion.shape().logical_bytes());
    }

    #[test]
    fn the_straggler_host_runs_every_op_twelve_percent_slower() {
        let hosts = tpu_session_specs("tpu_straggler_host").expect("fixture");
        let (a, b) = (hosts[0].1.program.ops(), hosts[1].1.program.ops());
        for (x, y) in a.iter().zip(&b) {
            let ratio = y.duration_ps as f64 / x.duration_ps as f64;
            assert!((ratio - 1.12).abs() < 1e-6, "{}: {ratio}", x.name);
        }
        let clean = tpu_session_specs("tpu_two_hosts_clean").expect("fixture");
        assert_eq!(clean[0].1.program, clean[1].1.program);
    }

    #[test]
    fn the_recompile_leaves_the_device_idle_between_steps_four_and_five() {
        let space = Space::parse(tpu_session("tpu_recompile_between_steps").unwrap()[0].1.clone().into()).unwrap();
        let core = space.tpu_tensor_cores()[0];
        let steps = core.line_by_name("Steps").unwrap();
        let spans: Vec<(i64, i64)> = steps.events(core).map(|e| e.unwrap()).map(|e| (e.start().0, e.end().0)).collect();
        let gap = spans[5].0 - spans[4].1;
        assert!(gap > 3_000_000_000_000, "{gap}");
        let host = space.host_threads().unwrap();
        let names: Vec<String> = host.event_metadata().iter().map(|m| m.name().to_owned()).collect();
        for n in ["backend_compile_and_load", "PjRtCApiClient::CompileAndLoad(jit_train_step)"] {
            assert!(names.iter().any(|x| x == n), "{n}: {names:?}");
        }
        let modules = core.line_by_name("XLA Modules").unwrap();
        let names: Vec<String> = modules.events(core).map(|e| e.unwrap().name().to_owned()).collect();
        assert_eq!(names[4], "jit_train_step(1)");
        assert_eq!(names[5], "jit_train_step(2)");
    }
}
