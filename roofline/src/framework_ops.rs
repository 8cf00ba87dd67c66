//! The framework op profile: time per framework (TensorFlow) op on the device and on the host,
//! as XProf's framework-op statistics (`framework_op_stats`, the old "TF stats") compute it.
//!
//! It is the op table of captures without HLO: a TensorFlow program run by its executor (no
//! XLA) launches cuDNN, cuBLAS and Eigen kernels that belong to no HLO instruction, but the
//! tracer records the TensorFlow op that launched each of them. The rules are XProf's
//! (`xplane_to_op_metrics_db.cc`, `op_metrics_db_utils.cc`, `op_stats_to_tf_stats.cc`,
//! `tf_op_utils.cc`, xprof 2.24):
//!
//! - **Device.** Every event of a GPU plane's stream lines (the lines XProf derives, such as
//!   `TensorFlow Ops`, do not count) that names its TensorFlow op is one launch of that op:
//!   kernels and memory copies alike. Launches are summed per op and kernel (over every GPU of
//!   the host), and an op's occurrences are the most launches of any one of its kernels; its
//!   time (total and self: device events do not nest) is the sum of its launches. A GPU's total
//!   time is from its first event to the end of its last (all stream events, attributed or
//!   not, at least the attributed time); what no op covers is `IDLE`. The op is read from the
//!   event's `tf_op` stat; captures of TensorFlow 2.2–2.4 (2020) record it in the `level 0`
//!   stat instead, which XProf read then and reads no longer (2.24 shows no device op for
//!   them): xlens reads `level 0` when an event has no `tf_op`, and says so
//!   ([`DeviceAttribution::Level0`]).
//! - **Host.** On the host-thread plane (`/host:CPU`) an event is a framework op when its name
//!   parses as one (`name:Type`, `Iterator::…` for `tf.data`, a memory copy), or when it
//!   carries a `tf_op` stat, or an input-pipeline stage id. On each thread the ops nest by
//!   time; an op's self time is its time less its children's, and the thread's total time is
//!   from its first op's start to its last op's end; what no op covers is `IDLE`. Ops are
//!   summed over threads by (stage id, name).
//! - **Shares** are of the side's total self time, with `IDLE` ([`FrameworkOpStats::share`])
//!   or without it, as XProf's two tables.
//!
//! Nothing here is JAX-specific or TensorFlow-version-specific beyond the stat names above.

use std::collections::HashMap;

use xlens_xplane::{Event, Picos, Plane, PlaneKind, Space, StatMetadataId, names};

use crate::span::Span;

/// The most distinct ops kept per side; launches of further ops count in the totals only (a
/// capture has a few thousand).
pub const MAX_FRAMEWORK_OPS: usize = 1 << 20;

/// The name TensorFlow's executor gives its host threads (`tf_Compute/<tid>`): on a capture
/// without a device plane, the threads where its ops run.
pub const TF_EXECUTOR_THREAD: &str = "tf_Compute";

/// The type XProf gives a device op whose TensorFlow op has none.
pub const UNKNOWN_OP_TYPE: &str = "Unknown";

/// Where an op ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpSide {
    /// On the device (GPU kernels and copies).
    Device,
    /// On the host (executor threads, `tf.data`).
    Host,
}

impl OpSide {
    /// XProf's spelling: `Device` or `Host`.
    pub fn label(self) -> &'static str {
        match self {
            OpSide::Device => "Device",
            OpSide::Host => "Host",
        }
    }
}

/// Which stat named the TensorFlow op of the device's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceAttribution {
    /// No device event named an op.
    #[default]
    None,
    /// The `tf_op` stat (what XProf reads).
    TfOp,
    /// The `level 0` stat of TensorFlow 2.2–2.4, for some events at least (XProf 2.24 reads
    /// only `tf_op` and attributes nothing on such captures).
    Level0,
}

impl DeviceAttribution {
    /// A stable spelling: `none`, `tf_op` or `level_0`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceAttribution::None => "none",
            DeviceAttribution::TfOp => "tf_op",
            DeviceAttribution::Level0 => "level_0",
        }
    }
}

/// One framework op on one side, over the whole capture.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameworkOp {
    /// Device or host.
    pub side: OpSide,
    /// The op's type (`MatMul`, `Conv2DBackpropFilter`, `Dataset`, ...; [`UNKNOWN_OP_TYPE`]
    /// for a device op without one).
    pub op_type: String,
    /// The op's name (`model/dense/MatMul`, `Iterator::Prefetch`, ...).
    pub name: String,
    /// Executions: on the host, op events; on the device, the most launches of any one of its
    /// kernels.
    pub occurrences: u64,
    /// Total time (children included).
    pub total: Picos,
    /// Self time (children excluded; equal to `total` on the device).
    pub self_time: Picos,
    /// Any execution was eager.
    pub eager: bool,
    /// Device ops: the kernels (and copies) it launched, by name, with launches and time,
    /// longest first. Empty on the host.
    pub kernels: Vec<(String, u64, Picos)>,
}

/// The framework op profile of one host: device and host ops, and each side's totals.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameworkOpStats {
    /// Device ops by self time (longest first, then by name), `IDLE` not among them.
    pub device: Vec<FrameworkOp>,
    /// Host ops, ordered likewise.
    pub host: Vec<FrameworkOp>,
    /// The device's total time, idle included (summed over the GPUs).
    pub device_total: Picos,
    /// The device's ops' summed self time.
    pub device_op_time: Picos,
    /// The host's total time, idle included (summed over the threads).
    pub host_total: Picos,
    /// The host's ops' summed self time.
    pub host_op_time: Picos,
    /// Which stat named the device's ops.
    pub attribution: DeviceAttribution,
    /// Launches (device) and executions (host) of ops first seen past [`MAX_FRAMEWORK_OPS`]
    /// distinct ops: counted in the side's totals, not listed.
    pub ops_dropped: usize,
}

/// The category of a parsed op name (XProf's `tsl::profiler::Category`, the cases used here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    Unknown,
    TensorFlow,
    Jax,
    TfData,
    Memcpy,
    InputPipeline,
}

/// A parsed op: XProf's `TfOp`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TfOp {
    category: Category,
    name: String,
    op_type: String,
    id: i64,
}

impl FrameworkOpStats {
    /// Whether a space is one for this table: no HLO op lines (`XLA Ops`) on any device plane,
    /// and either the TensorFlow op lines (`TensorFlow Ops`) present on one at least, or, in a
    /// capture with no device plane at all (TensorFlow on the CPU), the host's TensorFlow
    /// executor threads (`tf_Compute…` lines with events) on its host-thread plane: there every
    /// TensorFlow op runs on the host, and XProf's table has host rows alone.
    ///
    /// ```
    /// use xlens_roofline::FrameworkOpStats;
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/tf_v100_multiworker");
    /// let session = xlens_testkit::open_session(dir)?;
    /// assert!(FrameworkOpStats::applies(session.hosts()[0].space()));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn applies(space: &Space) -> bool {
        let devices = || space.planes().iter().filter(|p| p.kind().is_device());
        let has = |name: &str| devices().any(|p| p.lines().iter().any(|l| l.name() == name && l.event_count() > 0));
        if has(names::line::XLA_OPS) {
            return false;
        }
        if has(names::line::TENSORFLOW_OPS) {
            return true;
        }
        devices().next().is_none()
            && space
                .planes()
                .iter()
                .filter(|p| p.name() == names::plane::HOST_CPU)
                .any(|p| p.lines().iter().any(|l| l.name().starts_with(TF_EXECUTOR_THREAD) && l.event_count() > 0))
    }

    /// Reads the GPU planes and the host-thread plane of a space (empty sides without them).
    ///
    /// ```
    /// use xlens_roofline::FrameworkOpStats;
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/tf_v100_multiworker");
    /// let session = xlens_testkit::open_session(dir)?;
    /// let stats = FrameworkOpStats::read(session.hosts()[0].space())?;
    /// let prefetch = stats.host.iter().find(|o| o.name == "Iterator::Prefetch").unwrap();
    /// assert_eq!((prefetch.op_type.as_str(), prefetch.occurrences), ("Dataset", 2));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(space: &Space) -> xlens_xplane::Result<FrameworkOpStats> {
        let mut stats = FrameworkOpStats::default();
        read_device(space, &mut stats)?;
        if let Some(plane) = space.planes().iter().find(|p| p.name() == names::plane::HOST_CPU) {
            read_host(plane, &mut stats)?;
        }
        Ok(stats)
    }

    /// The device's idle time: its total less its ops' time.
    pub fn device_idle(&self) -> Picos {
        Picos(self.device_total.0.saturating_sub(self.device_op_time.0))
    }

    /// The host's idle time.
    pub fn host_idle(&self) -> Picos {
        Picos(self.host_total.0.saturating_sub(self.host_op_time.0))
    }

    /// An op's self time as a fraction (0–1) of its side's total, idle included (XProf's
    /// "Total self-time on Device/Host" of the table with idle); 0 when the side has no time.
    pub fn share(&self, op: &FrameworkOp) -> f64 {
        let total = match op.side {
            OpSide::Device => self.device_total,
            OpSide::Host => self.host_total,
        };
        if total.0 > 0 { op.self_time.0 as f64 / total.0 as f64 } else { 0.0 }
    }

    /// An op's self time as a fraction of its side's ops' time (idle excluded).
    pub fn share_of_ops(&self, op: &FrameworkOp) -> f64 {
        let total = match op.side {
            OpSide::Device => self.device_op_time,
            OpSide::Host => self.host_op_time,
        };
        if total.0 > 0 { op.self_time.0 as f64 / total.0 as f64 } else { 0.0 }
    }

    /// True when neither side has an op.
    pub fn is_empty(&self) -> bool {
        self.device.is_empty() && self.host.is_empty()
    }
}

/// The TensorFlow executor's work on a host with no device plane (TensorFlow on the CPU): the
/// host's executor threads are its device ([`FrameworkOpStats::executor_busy`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecutorBusy {
    /// Executor threads (`tf_Compute…` lines) that ran a TensorFlow op.
    pub threads: usize,
    /// Per window asked for: the time at least one executor thread ran a TensorFlow op in it.
    pub busy: Vec<Picos>,
}

impl FrameworkOpStats {
    /// The time TensorFlow's executor threads ran ops (events named `name:Type`, nested or on
    /// several threads at once counted once) in each of `windows` (start, end), and how many
    /// threads ran one: on a capture without a device plane these threads do the device's work,
    /// as the host's XLA ops do in a JAX CPU capture.
    ///
    /// ```
    /// use xlens_roofline::FrameworkOpStats;
    /// use xlens_xplane::Picos;
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/tf_cpu_keras_steady");
    /// let session = xlens_testkit::open_session(dir)?;
    /// let all = [(Picos(i64::MIN), Picos(i64::MAX))];
    /// let busy = FrameworkOpStats::executor_busy(session.hosts()[0].space(), &all)?;
    /// assert!(busy.threads > 0 && busy.busy[0] > Picos::ZERO);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn executor_busy(space: &Space, windows: &[(Picos, Picos)]) -> xlens_xplane::Result<ExecutorBusy> {
        let mut out = ExecutorBusy { threads: 0, busy: vec![Picos::ZERO; windows.len()] };
        let Some(plane) = space.planes().iter().find(|p| p.name() == names::plane::HOST_CPU) else {
            return Ok(out);
        };
        let is_op = plane.metadata_mask(|m| executor_op(m.name()).is_some());
        let mut spans: Vec<Span> = Vec::new();
        for line in plane.lines().iter().filter(|l| l.name().starts_with(TF_EXECUTOR_THREAD)) {
            let before = spans.len();
            for ev in line.events(plane) {
                let ev = ev?;
                if is_op.contains(&ev) {
                    spans.push(Span { start: ev.start(), end: ev.end() });
                }
            }
            out.threads += usize::from(spans.len() > before);
        }
        let union = crate::span::union(spans);
        for (busy, &(from, to)) in out.busy.iter_mut().zip(windows) {
            let window = Span { start: from, end: to };
            let first = union.partition_point(|s| s.end <= from);
            *busy = union[first..].iter().take_while(|s| s.start < to).map(|s| s.overlap(window)).sum();
        }
        Ok(out)
    }
}

/// The TensorFlow op (name and type) an executor thread's event runs, when its name is one
/// (`model/dense/MatMul:MatMul`, XProf's `TensorFlow` category): the ops of
/// [`FrameworkOpStats::executor_busy`] and of the op timeline of a CPU-only TensorFlow capture.
pub(crate) fn executor_op(full: &str) -> Option<(&str, &str)> {
    let (name, op_type) = full.split_once(':')?;
    let op = parse_tf_op(full);
    (op.category == Category::TensorFlow && op.name == name).then(|| {
        // A name without a type takes the one XProf derives from its last scope.
        if op_type.is_empty() { (name, derive_op_type(name)) } else { (name, op_type) }
    })
}

/// The TensorFlow op (name and type) of a GPU stream event that names the op that launched
/// it, read as [`FrameworkOpStats::read`] reads it (its `tf_op` stat, else the `level 0` stat
/// of TensorFlow 2.2–2.4; none when it carries an `hlo_op`): the name, and the type
/// ([`UNKNOWN_OP_TYPE`] for an op without one). `parsed` caches the parse per stat value.
pub(crate) fn device_event_op<'p>(
    ev: &Event<'_>,
    ids: DeviceOpStatIds,
    parsed: &'p mut HashMap<String, (String, String)>,
) -> Option<&'p (String, String)> {
    if !ev.has_stats() || stat_text(ev, ids.hlo_op).is_some() {
        return None;
    }
    let full = stat_text(ev, ids.tf_op).or_else(|| stat_text(ev, ids.level0))?;
    if !parsed.contains_key(full.as_ref()) {
        let op = parse_tf_op(&full);
        let op_type = if op.op_type.is_empty() { UNKNOWN_OP_TYPE.to_owned() } else { op.op_type };
        parsed.insert(full.to_string(), (op.name, op_type));
    }
    parsed.get(full.as_ref())
}

/// The stats of a GPU plane that name the TensorFlow op of its events ([`device_event_op`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceOpStatIds {
    tf_op: Option<StatMetadataId>,
    level0: Option<StatMetadataId>,
    hlo_op: Option<StatMetadataId>,
}

impl DeviceOpStatIds {
    /// The ids of a plane (`None` for those it does not define).
    pub(crate) fn of(plane: &Plane) -> DeviceOpStatIds {
        DeviceOpStatIds {
            tf_op: plane.stat_id(names::stat::TF_OP),
            level0: plane.stat_id(LEVEL0_STAT),
            hlo_op: plane.stat_id(names::stat::HLO_OP),
        }
    }
}

/// The stat TensorFlow 2.2–2.4 named a kernel's op by (XProf 2.24 reads `tf_op` only).
const LEVEL0_STAT: &str = "level 0";

/// Whether a TensorFlow op type multiplies matrices: matrix products and convolutions, their
/// gradients, and the fused and oneDNN (`_Mkl…`) forms of them (the step anatomy's matmul
/// class, as XLA's dots and convolutions are).
pub(crate) fn is_tf_matrix_op_type(t: &str) -> bool {
    is_tf_op_type(t)
        && (t.contains("MatMul")
            || t.contains("Conv1D")
            || t.contains("Conv2D")
            || t.contains("Conv3D")
            || t.contains("DepthwiseConv")
            || t.ends_with("Einsum"))
}

/// Sorts ops as XProf does: self time, longest first, then name.
fn sort_ops(ops: &mut [FrameworkOp]) {
    ops.sort_by(|a, b| b.self_time.cmp(&a.self_time).then_with(|| a.name.cmp(&b.name)));
}

/// Whether a name is a TensorFlow op name (XProf's `IsTfOpName`): `[A-Za-z0-9.][A-Za-z0-9_./>-]*`.
pub(crate) fn is_tf_op_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'.' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'>' | b'-'))
}

/// Whether a type is a TensorFlow op type (XProf's `IsTfOpType`): `[A-Z_][a-zA-Z0-9_]*`.
pub(crate) fn is_tf_op_type(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_uppercase() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether a type is a JAX op type (XProf's `IsJaxOpType`): `[a-z_][a-z0-9_]*(\[.*\])?`.
pub(crate) fn is_jax_op_type(s: &str) -> bool {
    let (head, rest) = match s.find('[') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let mut bytes = head.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_lowercase() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') && (rest.is_empty() || rest.ends_with(']'))
}

/// The op type of a name without one: its last scope less a numeric `_N` suffix.
fn derive_op_type(full: &str) -> &str {
    let op = full.rsplit('/').next().unwrap_or(full);
    match op.rsplit_once('_') {
        Some((head, suffix)) if !suffix.is_empty() && suffix.parse::<i64>().is_ok() => head,
        _ => op,
    }
}

/// XProf's `ParseTfOpFullname` (default category and type).
fn parse_tf_op(full: &str) -> TfOp {
    let unknown = TfOp { category: Category::Unknown, name: full.to_owned(), op_type: String::new(), id: 0 };
    let Some((name, op_type)) = full.split_once(':') else {
        let memcpy = ["MEMCPYHToD", "MEMCPYDToH", "MEMCPYDToD", "MEMCPYHToH"];
        for (prefix, ty) in memcpy.iter().zip(["MemcpyHToD", "MemcpyDToH", "MemcpyDToD", "MemcpyHToH"]) {
            if full.len() >= prefix.len() && full.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes()) {
                return TfOp { category: Category::Memcpy, name: full.to_owned(), op_type: ty.to_owned(), id: 0 };
            }
        }
        return unknown;
    };
    if name == "Iterator" {
        return TfOp { category: Category::TfData, name: full.to_owned(), op_type: "Dataset".to_owned(), id: 0 };
    }
    if is_tf_op_name(name) && is_tf_op_type(op_type) {
        return TfOp { category: Category::TensorFlow, name: name.to_owned(), op_type: op_type.to_owned(), id: 0 };
    }
    let derived = if op_type.is_empty() { derive_op_type(name) } else { op_type };
    if is_jax_op_type(derived) {
        let ty = derived.split('[').next().unwrap_or(derived);
        return TfOp { category: Category::Jax, name: name.to_owned(), op_type: ty.to_owned(), id: 0 };
    }
    if op_type.is_empty() {
        return TfOp { category: Category::TensorFlow, name: name.to_owned(), op_type: derived.to_owned(), id: 0 };
    }
    unknown
}

/// A stat's value as text (strings and references).
fn stat_text<'a>(ev: &Event<'a>, id: Option<StatMetadataId>) -> Option<std::borrow::Cow<'a, str>> {
    id.and_then(|id| ev.stat(id)).and_then(|s| s.as_str()).filter(|s| !s.is_empty())
}

/// Per (op name, kernel name): type, launches, time, eager, across every GPU of the host.
#[derive(Default)]
struct DeviceAcc {
    index: HashMap<(String, String), usize>,
    rows: Vec<(String, String, String, u64, Picos, bool)>,
}

fn read_device(space: &Space, stats: &mut FrameworkOpStats) -> xlens_xplane::Result<()> {
    let mut acc = DeviceAcc::default();
    let mut parsed: HashMap<String, TfOp> = HashMap::new();
    let (mut any_tf_op, mut any_level0) = (false, false);
    for plane in space.planes().iter().filter(|p| matches!(p.kind(), PlaneKind::Gpu { .. })) {
        let tf_op_id = plane.stat_id(names::stat::TF_OP);
        let level0_id = plane.stat_id(LEVEL0_STAT);
        let hlo_op_id = plane.stat_id(names::stat::HLO_OP);
        let eager_id = plane.stat_id("is_eager");
        let (mut first, mut last) = (i64::MAX, 0i64);
        let mut op_time = Picos::ZERO;
        for line in plane.lines().iter().filter(|l| !names::line::is_derived(l.id().0, l.name())) {
            for ev in line.events(plane) {
                let ev = ev?;
                let duration = ev.duration();
                first = first.min(ev.offset_ps());
                last = last.max(ev.offset_ps().saturating_add(duration.0));
                if !ev.has_stats() || stat_text(&ev, hlo_op_id).is_some() {
                    continue;
                }
                let (full, level0) = match stat_text(&ev, tf_op_id) {
                    Some(s) => (s, false),
                    None => match stat_text(&ev, level0_id) {
                        Some(s) => (s, true),
                        None => continue,
                    },
                };
                any_tf_op |= !level0;
                any_level0 |= level0;
                let op = match parsed.get(full.as_ref()) {
                    Some(op) => op.clone(),
                    None => {
                        let op = parse_tf_op(&full);
                        parsed.insert(full.into_owned(), op.clone());
                        op
                    }
                };
                let eager = eager_id.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()).unwrap_or(0) != 0;
                op_time += duration;
                let key = (op.name, ev.name().to_owned());
                let i = match acc.index.get(&key) {
                    Some(&i) => i,
                    None => {
                        if acc.rows.len() >= MAX_FRAMEWORK_OPS {
                            stats.ops_dropped += 1;
                            continue;
                        }
                        acc.rows.push((key.0.clone(), key.1.clone(), op.op_type, 0, Picos::ZERO, false));
                        acc.index.insert(key, acc.rows.len() - 1);
                        acc.rows.len() - 1
                    }
                };
                let row = &mut acc.rows[i];
                row.3 += 1;
                row.4 += duration;
                row.5 |= eager;
            }
        }
        let span = if last > 0 && first != i64::MAX { Picos(last.saturating_sub(first)) } else { Picos::ZERO };
        stats.device_total += span.max(op_time);
        stats.device_op_time += op_time;
    }
    stats.attribution = match (any_level0, any_tf_op) {
        (true, _) => DeviceAttribution::Level0,
        (false, true) => DeviceAttribution::TfOp,
        _ => DeviceAttribution::None,
    };
    // Kernels to their op: time summed, occurrences the most of any one kernel.
    let mut ops: Vec<FrameworkOp> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for (name, kernel, op_type, launches, time, eager) in acc.rows {
        let i = *by_name.entry(name.clone()).or_insert_with(|| {
            ops.push(FrameworkOp {
                side: OpSide::Device,
                op_type: if op_type.is_empty() { UNKNOWN_OP_TYPE.to_owned() } else { op_type },
                name,
                occurrences: 0,
                total: Picos::ZERO,
                self_time: Picos::ZERO,
                eager: false,
                kernels: Vec::new(),
            });
            ops.len() - 1
        });
        let op = &mut ops[i];
        op.occurrences = op.occurrences.max(launches);
        op.total += time;
        op.self_time += time;
        op.eager |= eager;
        op.kernels.push((kernel, launches, time));
    }
    for op in &mut ops {
        op.kernels.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    }
    sort_ops(&mut ops);
    stats.device = ops;
    Ok(())
}

/// One begin or end of a host op on a thread.
struct Activity {
    at: i64,
    id: u32,
    begin: bool,
    op: usize,
    eager: bool,
}

fn read_host(plane: &Plane, stats: &mut FrameworkOpStats) -> xlens_xplane::Result<()> {
    let stage_id = plane.stat_id("input_pipeline_stage_id");
    let stage_category = plane.stat_id("input_pipeline_stage_category");
    let tf_op_id = plane.stat_id(names::stat::TF_OP);
    let eager_id = plane.stat_id("is_eager");
    // Parsed ops, interned; the ops of event-metadata ids (and input-pipeline stage ids) first,
    // over every line, first seen wins (XProf's `CollectTfOpsFromHostThreadsXPlane`).
    let mut ops: Vec<TfOp> = Vec::new();
    let mut by_id: HashMap<i64, usize> = HashMap::new();
    for meta in plane.event_metadata() {
        if meta.name().is_empty() {
            continue;
        }
        let op = parse_tf_op(meta.name());
        if op.category != Category::Unknown {
            ops.push(op);
            by_id.entry(meta.id().0).or_insert(ops.len() - 1);
        }
    }
    if let (Some(sid), Some(cid)) = (stage_id, stage_category) {
        for line in plane.lines() {
            for ev in line.events(plane) {
                let ev = ev?;
                let Some(id) = ev.stat_or_metadata_stat(sid).and_then(|s| s.as_i64()) else { continue };
                let Some(cat) = ev.stat_or_metadata_stat(cid).and_then(|s| s.as_str()) else { continue };
                if ev.name().is_empty() || by_id.contains_key(&id) {
                    continue;
                }
                ops.push(TfOp {
                    category: Category::InputPipeline,
                    name: ev.name().to_owned(),
                    op_type: cat.into_owned(),
                    id,
                });
                by_id.insert(id, ops.len() - 1);
            }
        }
    }
    let mut stat_ops: HashMap<String, usize> = HashMap::new();
    // Per (stage id, name): the row of the result.
    let mut rows: HashMap<(i64, String), usize> = HashMap::new();
    let mut out: Vec<FrameworkOp> = Vec::new();
    for line in plane.lines().iter().filter(|l| !names::line::is_derived(l.id().0, "")) {
        let mut activities: Vec<Activity> = Vec::new();
        let mut next_id: u32 = 0;
        for ev in line.events(plane) {
            let ev = ev?;
            let (start, end) = (ev.start().0, ev.end().0);
            let mut id = ev.metadata_id().0;
            if let Some(s) = stage_id.and_then(|sid| ev.stat_or_metadata_stat(sid)).and_then(|s| s.as_i64()) {
                id = s;
            }
            if let Some(&op) = by_id.get(&id) {
                next_id = next_id.wrapping_add(1);
                let eager =
                    eager_id.and_then(|e| ev.stat_or_metadata_stat(e)).and_then(|s| s.as_i64()).unwrap_or(0) != 0;
                activities.push(Activity { at: start, id: next_id, begin: true, op, eager });
                activities.push(Activity { at: end, id: next_id, begin: false, op, eager });
            }
            if let Some(full) = stat_text(&ev, tf_op_id) {
                let op = match stat_ops.get(full.as_ref()) {
                    Some(&op) => op,
                    None => {
                        ops.push(parse_tf_op(&full));
                        stat_ops.insert(full.into_owned(), ops.len() - 1);
                        ops.len() - 1
                    }
                };
                next_id = next_id.wrapping_add(1);
                activities.push(Activity { at: start, id: next_id, begin: true, op, eager: false });
                activities.push(Activity { at: end, id: next_id, begin: false, op, eager: false });
            }
        }
        if activities.is_empty() {
            continue;
        }
        activities.sort_by_key(|a| a.at);
        // The open ops: (activity id, start, children's time).
        let mut stack: Vec<(u32, i64, i64)> = Vec::new();
        let mut line_op_time: i64 = 0;
        for a in &activities {
            if a.begin {
                stack.push((a.id, a.at, 0));
                continue;
            }
            let mut found = None;
            while let Some(top) = stack.pop() {
                if top.0 == a.id {
                    found = Some(top);
                    break;
                }
            }
            let Some((_, start, children)) = found else { continue };
            let time = a.at.saturating_sub(start);
            let self_time = time.saturating_sub(children).max(0);
            if let Some(parent) = stack.last_mut() {
                parent.2 = parent.2.saturating_add(time);
            }
            line_op_time = line_op_time.saturating_add(self_time);
            let op = &ops[a.op];
            let key = (op.id, op.name.clone());
            let i = match rows.get(&key) {
                Some(&i) => i,
                None => {
                    if out.len() >= MAX_FRAMEWORK_OPS {
                        stats.ops_dropped += 1;
                        continue;
                    }
                    out.push(FrameworkOp {
                        side: OpSide::Host,
                        op_type: op.op_type.clone(),
                        name: op.name.clone(),
                        occurrences: 0,
                        total: Picos::ZERO,
                        self_time: Picos::ZERO,
                        eager: false,
                        kernels: Vec::new(),
                    });
                    rows.insert(key, out.len() - 1);
                    out.len() - 1
                }
            };
            let row = &mut out[i];
            // The first type that is not empty (a `tf_op` stat without one names the op too).
            if row.op_type.is_empty() {
                row.op_type.clone_from(&op.op_type);
            }
            row.occurrences += 1;
            row.total += Picos(time);
            row.self_time += Picos(self_time);
            row.eager |= a.eager;
        }
        let span = activities.last().map_or(0, |l| l.at).saturating_sub(activities[0].at);
        stats.host_total += Picos(span.max(line_op_time));
        stats.host_op_time += Picos(line_op_time);
    }
    sort_ops(&mut out);
    stats.host = out;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_as_xprof_parses_them() {
        let op = parse_tf_op("model/dense/MatMul:MatMul");
        assert_eq!(
            (op.category, op.name.as_str(), op.op_type.as_str()),
            (Category::TensorFlow, "model/dense/MatMul", "MatMul")
        );
        let op = parse_tf_op("Iterator::Prefetch::Generator");
        assert_eq!(
            (op.category, op.name.as_str(), op.op_type.as_str()),
            (Category::TfData, "Iterator::Prefetch::Generator", "Dataset")
        );
        assert_eq!(parse_tf_op("MemcpyHToD").op_type, "MemcpyHToD");
        assert_eq!(parse_tf_op("ExecutorState::Process").category, Category::Unknown);
        assert_eq!(parse_tf_op("some python function").category, Category::Unknown);
        let op = parse_tf_op("jit_f/transpose[permutation=(1, 0)]:");
        assert_eq!((op.category, op.op_type.as_str()), (Category::Jax, "transpose"));
        let op = parse_tf_op("a/b/dot_general:dot_general");
        assert_eq!((op.category, op.op_type.as_str()), (Category::Jax, "dot_general"));
        let op = parse_tf_op("a/b/Relu_3:");
        assert_eq!((op.category, op.op_type.as_str()), (Category::TensorFlow, "Relu"));
    }
}
