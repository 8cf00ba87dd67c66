//! Which framework produced a profile: JAX, TensorFlow (its executor, with or without XLA),
//! PyTorch/XLA, or unknown, from what the capture holds.
//!
//! The question is one of the decoded profile, answered once per host
//! ([`HostProfile::framework`](crate::HostProfile::framework)) from names the capture records,
//! in this order (the first that matches decides):
//!
//! 1. **PyTorch/XLA**: programs named `SyncTensorsGraph.<n>` (PyTorch/XLA's name for the graph
//!    `xm.mark_step` cuts), its runtime's TraceMe names (`XLAGraphExecutor::…`,
//!    `PjRtComputationClient::…`, `IfrtComputationClient::…`, `SyncTensorsGraph…`) or any name
//!    holding `torch_xla`.
//! 2. **JAX**: programs named `jit_…`, `pjit_…`, `pmap_…` or `xmap_…` (the module names JAX
//!    lowers to, in the HLO protos and on TPU `XLA Modules` lines), or JAX's dispatch events
//!    (`PjitFunction(…)`, `PmapFunction(…)`, `np.asarray(jax.Array)`). JAX comes before
//!    TensorFlow because a JAX program that reads its input with `tf.data` records TensorFlow's
//!    executor and ops on the `tf.data` threads.
//! 3. **TensorFlow**: the TensorFlow executor and its threads (`ExecutorState::Process`,
//!    `tf_Compute` threads), `tf.function` graphs (`__inference_…`, XLA clusters
//!    `a_inference_…`/`cluster_…`), TensorFlow's own GPU kernels (`tensorflow::…`), the
//!    `TensorFlow Ops` / `TensorFlow Name Scope` lines of the device planes, and TensorFlow op
//!    events `name:Type`, read with XProf's rule (`tsl::profiler::ParseTfOpFullname`: a
//!    TensorFlow op name, a colon and a capitalised op type). `tf.data`'s own events
//!    (`Iterator::…`, `tf_data_…` threads) decide nothing: JAX and PyTorch programs use it too.
//!    It runs with XLA when the profile holds HLO programs or XLA launch ops (`XlaLaunch`,
//!    `_XlaRun`, `_XlaCompile`, `TPUExecute`…).
//! 4. **The HLO metadata**, as XProf's `ModelTracker::GetFramework` reads it when no name
//!    decided: an instruction whose `op_type` is a TensorFlow op type and whose `op_name` a
//!    TensorFlow op name makes it TensorFlow (with XLA); one whose `op_type` is a JAX primitive
//!    (lowercase, the last scope of its `op_name` containing it) makes it JAX.
//! 5. Else **unknown**.
//!
//! ```
//! use xlens_roofline::{Framework, Profile};
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/tf_v100_multiworker");
//! let profile = Profile::from_session(xlens_testkit::open_session(dir)?);
//! let f = profile.hosts()[0].framework();
//! assert_eq!(f.name, Framework::TensorFlow);
//! assert!(!f.xla);
//! assert!(f.evidence.contains("ExecutorState::Process"));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use xlens_hlo::Module;
use xlens_xplane::Space;

use crate::framework_ops::{is_jax_op_type, is_tf_op_name, is_tf_op_type};

/// The framework that produced a profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Framework {
    /// JAX (always through XLA).
    #[cfg_attr(feature = "serde", serde(rename = "jax"))]
    Jax,
    /// TensorFlow: its executor, with or without XLA ([`FrameworkInfo::xla`]).
    #[cfg_attr(feature = "serde", serde(rename = "tensorflow"))]
    TensorFlow,
    /// PyTorch/XLA (`torch_xla`).
    #[cfg_attr(feature = "serde", serde(rename = "pytorch_xla"))]
    PyTorchXla,
    /// Nothing in the profile says which.
    #[default]
    #[cfg_attr(feature = "serde", serde(rename = "unknown"))]
    Unknown,
}

/// Every framework, in a fixed order (the order of reports and tables).
pub const FRAMEWORKS: [Framework; 4] =
    [Framework::Jax, Framework::TensorFlow, Framework::PyTorchXla, Framework::Unknown];

impl Framework {
    /// The stable machine name: `jax`, `tensorflow`, `pytorch_xla` or `unknown` (the JSON's and
    /// the frames' spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::Jax => "jax",
            Framework::TensorFlow => "tensorflow",
            Framework::PyTorchXla => "pytorch_xla",
            Framework::Unknown => "unknown",
        }
    }

    /// The name users know it by: `JAX`, `TensorFlow`, `PyTorch/XLA`, `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            Framework::Jax => "JAX",
            Framework::TensorFlow => "TensorFlow",
            Framework::PyTorchXla => "PyTorch/XLA",
            Framework::Unknown => "unknown",
        }
    }

    /// Parses [`Framework::as_str`]'s spelling.
    ///
    /// ```
    /// use xlens_roofline::Framework;
    /// assert_eq!(Framework::parse("tensorflow"), Some(Framework::TensorFlow));
    /// assert_eq!(Framework::parse("TF"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Framework> {
        FRAMEWORKS.into_iter().find(|f| f.as_str() == s)
    }
}

impl std::fmt::Display for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The framework of a profile, whether it ran through XLA, and what in the capture says so.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FrameworkInfo {
    /// Which framework.
    pub name: Framework,
    /// Whether its programs ran through XLA: always for JAX and PyTorch/XLA; for TensorFlow
    /// when the profile holds HLO programs or XLA launch ops (`jit_compile=True`, TPUs); for an
    /// unknown framework when the profile holds HLO programs.
    pub xla: bool,
    /// What in the capture says so, in words (the names that decided, with an example and a
    /// count each); empty when nothing did.
    pub evidence: String,
}

impl FrameworkInfo {
    /// The framework in words: `JAX`, `TensorFlow without XLA`, `TensorFlow with XLA`,
    /// `PyTorch/XLA`, `unknown`.
    ///
    /// ```
    /// use xlens_roofline::{Framework, FrameworkInfo};
    /// let tf = FrameworkInfo { name: Framework::TensorFlow, xla: false, evidence: String::new() };
    /// assert_eq!(tf.describe(), "TensorFlow without XLA");
    /// ```
    pub fn describe(&self) -> String {
        match self.name {
            Framework::TensorFlow if self.xla => "TensorFlow with XLA".to_owned(),
            Framework::TensorFlow => "TensorFlow without XLA".to_owned(),
            other => other.label().to_owned(),
        }
    }

    /// The framework of several hosts: theirs when they agree (evidence of the first), else
    /// unknown, saying which host ran what. No host at all is unknown.
    pub fn of_hosts<'a>(hosts: impl IntoIterator<Item = (&'a str, &'a FrameworkInfo)>) -> FrameworkInfo {
        let hosts: Vec<(&str, &FrameworkInfo)> = hosts.into_iter().collect();
        let Some((_, first)) = hosts.first() else { return FrameworkInfo::default() };
        if hosts.iter().all(|(_, f)| f.name == first.name) {
            return FrameworkInfo {
                name: first.name,
                xla: hosts.iter().any(|(_, f)| f.xla),
                evidence: first.evidence.clone(),
            };
        }
        let listed: Vec<String> = hosts.iter().take(8).map(|(h, f)| format!("{h}: {}", f.name.as_str())).collect();
        FrameworkInfo {
            name: Framework::Unknown,
            xla: hosts.iter().any(|(_, f)| f.xla),
            evidence: format!("the hosts disagree ({})", listed.join(", ")),
        }
    }
}

/// Instructions read per module for the HLO-metadata rule: enough to meet a framework op in any
/// real program, and a bound on the work for a huge one.
const MAX_INSTRUCTIONS_PER_MODULE: usize = 4096;

/// Detects the framework of one host from its space and (when names do not decide) its HLO
/// modules, which `modules` gives on demand.
/// `hlo_programs` counts the HLO protos of the space's metadata plane.
pub(crate) fn detect<'m>(space: &Space, hlo_programs: usize, modules: impl FnOnce() -> &'m [Module]) -> FrameworkInfo {
    let mut signs = Signs::default();
    for plane in space.planes() {
        for line in plane.lines() {
            signs.line(line.name());
        }
        for m in plane.event_metadata() {
            signs.name(m.name());
        }
    }
    let has_programs = hlo_programs > 0;
    if let Some(found) = signs.decide(has_programs) {
        return found;
    }
    let modules = modules();
    let mut hlo = Signs::default();
    for module in modules {
        hlo.module(module);
    }
    hlo.decide_from_hlo().unwrap_or(FrameworkInfo {
        name: Framework::Unknown,
        xla: has_programs || !modules.is_empty(),
        evidence: String::new(),
    })
}

/// One kind of sign: how many distinct names showed it (a name each plane's table repeats
/// counts once) and the first of them.
#[derive(Default, Debug)]
struct Sign {
    names: std::collections::HashSet<String>,
    example: Option<String>,
}

/// Distinct names counted per sign; more are still a sign, not counted.
const MAX_NAMES_COUNTED: usize = 100_000;

impl Sign {
    fn add(&mut self, name: &str) {
        if self.names.len() < MAX_NAMES_COUNTED && !self.names.contains(name) {
            self.names.insert(name.to_owned());
        }
        if self.example.is_none() {
            self.example = Some(clip(name));
        }
    }

    fn count(&self) -> usize {
        self.names.len()
    }

    fn found(&self) -> bool {
        !self.names.is_empty()
    }
}

/// The signs of each framework met in a profile's names.
#[derive(Default, Debug)]
struct Signs {
    torch_programs: Sign,
    torch_runtime: Sign,
    jax_programs: Sign,
    jax_dispatch: Sign,
    tf_executor: Sign,
    tf_threads: Sign,
    tf_functions: Sign,
    tf_kernels: Sign,
    tf_op_lines: Sign,
    tf_ops: Sign,
    tf_xla_ops: Sign,
    hlo_tf_ops: Sign,
    hlo_jax_ops: Sign,
}

impl Signs {
    /// A line (thread or device line) name.
    fn line(&mut self, name: &str) {
        if name == "TensorFlow Ops" || name == "TensorFlow Name Scope" {
            self.tf_op_lines.add(name);
        } else if name.starts_with("tf_Compute") {
            self.tf_threads.add(name);
        }
    }

    /// An event name (host events, device ops and kernels, program names).
    fn name(&mut self, name: &str) {
        let program = program_name(name);
        if program.starts_with("SyncTensorsGraph") || name.contains("torch_xla") {
            self.torch_programs.add(name);
        } else if ["XLAGraphExecutor::", "PjRtComputationClient::", "IfrtComputationClient::"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            self.torch_runtime.add(name);
        } else if ["jit_", "pjit_", "pmap_", "xmap_"].iter().any(|p| program.starts_with(p)) && is_module_name(program)
        {
            self.jax_programs.add(name);
        } else if ["PjitFunction(", "PmapFunction(", "np.asarray(jax.Array)"].iter().any(|p| name.starts_with(p)) {
            self.jax_dispatch.add(name);
        } else if name.starts_with("ExecutorState::") || name == "ExecutorDoneCallback" {
            self.tf_executor.add(name);
        } else if name.starts_with("__inference_")
            || name.starts_with("a_inference_")
            || (name.starts_with("cluster_") && is_module_name(program))
        {
            self.tf_functions.add(name);
        } else if name.contains("tensorflow::") {
            self.tf_kernels.add(name);
        } else if let Some(op_type) = tf_op_type(name) {
            self.tf_ops.add(name);
            if XLA_OP_TYPES.contains(&op_type) {
                self.tf_xla_ops.add(name);
            }
        }
    }

    /// An HLO module's name and its instructions' metadata (XProf's `ModelTracker`).
    fn module(&mut self, module: &Module) {
        self.name(module.name());
        for instr in module.instructions().iter().take(MAX_INSTRUCTIONS_PER_MODULE) {
            let (op_name, op_type) = (instr.op_name(), instr.op_type());
            if op_name.is_empty() {
                continue;
            }
            if is_tf_op_type(op_type) && is_tf_op_name(op_name) {
                self.hlo_tf_ops.add(&format!("{op_name}:{op_type}"));
            } else if is_jax_op_name_and_type(op_name, op_type) {
                self.hlo_jax_ops.add(&format!("{op_name} ({op_type})"));
            }
        }
    }

    /// The framework the names say, if they say one.
    fn decide(&self, has_programs: bool) -> Option<FrameworkInfo> {
        let torch = [
            (&self.torch_programs, "PyTorch/XLA programs or markers"),
            (&self.torch_runtime, "PyTorch/XLA runtime events"),
        ];
        if let Some(evidence) = evidence(&torch) {
            return Some(FrameworkInfo { name: Framework::PyTorchXla, xla: true, evidence });
        }
        let jax = [(&self.jax_programs, "JAX programs"), (&self.jax_dispatch, "JAX dispatch events")];
        if let Some(evidence) = evidence(&jax) {
            return Some(FrameworkInfo { name: Framework::Jax, xla: true, evidence });
        }
        let tf = [
            (&self.tf_executor, "TensorFlow executor events"),
            (&self.tf_threads, "TensorFlow executor threads"),
            (&self.tf_functions, "tf.function graphs"),
            (&self.tf_op_lines, "TensorFlow op lines on the device planes"),
            (&self.tf_kernels, "TensorFlow's own kernels"),
            (&self.tf_ops, "TensorFlow op events"),
        ];
        // TensorFlow op events alone (a `name:Type` TraceMe) are the weakest sign: they need
        // company, or a few of them.
        let strong = tf[..5].iter().any(|(s, _)| s.found());
        if strong || self.tf_ops.count() >= MIN_TF_OPS_ALONE {
            let mut evidence = evidence(&tf).unwrap_or_default();
            let xla = has_programs || self.tf_xla_ops.found();
            if let Some(example) = &self.tf_xla_ops.example {
                evidence.push_str(&format!("; XLA launch ops ({example})"));
            } else if has_programs {
                evidence.push_str("; HLO programs in the profile");
            }
            return Some(FrameworkInfo { name: Framework::TensorFlow, xla, evidence });
        }
        None
    }

    /// The framework the HLO metadata says, as XProf's `ModelTracker` reads it: TensorFlow ops
    /// first.
    fn decide_from_hlo(&self) -> Option<FrameworkInfo> {
        if let Some(evidence) = evidence(&[(&self.hlo_tf_ops, "HLO instructions from TensorFlow ops")]) {
            return Some(FrameworkInfo { name: Framework::TensorFlow, xla: true, evidence });
        }
        if let Some(evidence) = evidence(&[(&self.hlo_jax_ops, "HLO instructions from JAX primitives")]) {
            return Some(FrameworkInfo { name: Framework::Jax, xla: true, evidence });
        }
        None
    }
}

/// TensorFlow op events needed to call a profile TensorFlow when nothing else says so.
const MIN_TF_OPS_ALONE: usize = 3;

/// TensorFlow op types that run XLA programs.
const XLA_OP_TYPES: &[&str] = &[
    "XlaLaunch",
    "_XlaRun",
    "_XlaCompile",
    "XlaCompile",
    "TPUExecute",
    "TPUExecuteAndUpdateVariables",
    "TPUPartitionedCall",
    "TPUCompile",
];

/// Signs named in the evidence: the strongest few say enough.
const MAX_SIGNS_NAMED: usize = 3;

/// The signs found (the first [`MAX_SIGNS_NAMED`]), in words: `what (example and N more)`,
/// joined; `None` when none.
fn evidence(signs: &[(&Sign, &str)]) -> Option<String> {
    let parts: Vec<String> = signs
        .iter()
        .filter(|(s, _)| s.found())
        .take(MAX_SIGNS_NAMED)
        .map(|(s, what)| match (&s.example, s.count()) {
            (Some(e), 1) => format!("{what} ({e})"),
            (Some(e), n) => format!("{what} ({e} and {} more)", n - 1),
            (None, _) => (*what).to_owned(),
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A name as evidence: at most 60 characters.
fn clip(name: &str) -> String {
    const MAX: usize = 60;
    if name.chars().count() <= MAX {
        name.to_owned()
    } else {
        let mut s: String = name.chars().take(MAX - 1).collect();
        s.push('…');
        s
    }
}

/// A program name without the ` (id)` / `(id)` suffix some lines give it (`jit_f(12)`).
fn program_name(name: &str) -> &str {
    match name.strip_suffix(')').and_then(|n| n.rfind('(').map(|i| (n, i))) {
        Some((n, i)) if n[i + 1..].bytes().all(|b| b.is_ascii_digit()) && i > 0 => n[..i].trim_end(),
        _ => name,
    }
}

/// Whether a name can be a module name: letters, digits, `_`, `.` and `-` only (not a Python
/// frame, a kernel signature or an HLO instruction's text).
fn is_module_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The op type of a TensorFlow op event `name:Type` by XProf's rule
/// (`tsl::profiler::ParseTfOpFullname`), if it is one.
fn tf_op_type(full: &str) -> Option<&str> {
    let (name, op_type) = full.split_once(':')?;
    (is_tf_op_name(name) && is_tf_op_type(op_type)).then_some(op_type)
}

/// XProf's `IsJaxOpNameAndType`: a JAX op type that the last scope of the op name contains.
fn is_jax_op_name_and_type(op_name: &str, op_type: &str) -> bool {
    !op_name.is_empty()
        && is_jax_op_type(op_type)
        && op_name.rsplit('/').next().is_some_and(|last| last.contains(op_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Option<FrameworkInfo> {
        let mut s = Signs::default();
        for n in list {
            s.name(n);
        }
        s.decide(false)
    }

    #[test]
    fn xprofs_op_name_rules() {
        assert_eq!(tf_op_type("model/dense/MatMul:MatMul"), Some("MatMul"));
        assert_eq!(tf_op_type("n/_1:_HostRecv"), Some("_HostRecv"));
        assert_eq!(tf_op_type("ExecutorState::Process"), None);
        assert_eq!(tf_op_type("$api.py:2479 block_until_ready"), None);
        assert_eq!(tf_op_type("Iterator::Prefetch"), None);
        assert!(is_jax_op_type("dot_general"));
        assert!(is_jax_op_type("transpose[permutation=(0, 1)]"));
        assert!(!is_jax_op_type("MatMul"));
        assert!(is_jax_op_name_and_type("jit(f)/jit(main)/dot_general", "dot_general"));
        assert!(!is_jax_op_name_and_type("jit(f)/add", "dot_general"));
    }

    #[test]
    fn program_names_lose_their_id() {
        assert_eq!(program_name("jit_train_step(1)"), "jit_train_step");
        assert_eq!(program_name("SyncTensorsGraph.123(4)"), "SyncTensorsGraph.123");
        assert_eq!(program_name("PjitFunction(f)"), "PjitFunction(f)");
    }

    #[test]
    fn each_framework_from_its_names() {
        let jax = names(&["jit_train_step(1)", "ExecutorState::Process"]).unwrap();
        assert_eq!(jax.name, Framework::Jax, "a JAX program feeding itself with tf.data is JAX");
        assert!(jax.evidence.contains("jit_train_step"));
        let tf = names(&["ExecutorState::Process", "dense/MatMul:MatMul"]).unwrap();
        assert_eq!((tf.name, tf.xla), (Framework::TensorFlow, false));
        let tf_xla = names(&["cluster_0/XlaLaunch:XlaLaunch", "__inference_train_step_123"]).unwrap();
        assert_eq!((tf_xla.name, tf_xla.xla), (Framework::TensorFlow, true));
        let torch = names(&["SyncTensorsGraph.42", "PjRtComputationClient::ExecuteComputation"]).unwrap();
        assert_eq!(torch.name, Framework::PyTorchXla);
        assert_eq!(names(&["Iterator::Prefetch", "main", "$api.py:10 f"]), None);
        // One `name:Type` TraceMe alone decides nothing.
        assert_eq!(names(&["Startup:Init"]), None);
    }

    #[test]
    fn hosts_that_disagree_are_unknown() {
        let jax = FrameworkInfo { name: Framework::Jax, xla: true, evidence: "e".into() };
        let tf = FrameworkInfo { name: Framework::TensorFlow, xla: false, evidence: String::new() };
        assert_eq!(FrameworkInfo::of_hosts([("a", &jax), ("b", &jax)]), jax);
        let mixed = FrameworkInfo::of_hosts([("a", &jax), ("b", &tf)]);
        assert_eq!(mixed.name, Framework::Unknown);
        assert!(mixed.evidence.contains("a: jax, b: tensorflow"));
    }
}
