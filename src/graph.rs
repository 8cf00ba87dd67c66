//! `xlens graph` as a library call: the HLO graph around one instruction of a profile's programs
//! ([`op_graph`]), as XProf's `get_hlo_neighborhood` walks it, with what each instruction is
//! (opcode, shape, layout, fusion kind, sharding, the JAX op and source line it came from) and
//! what it measured (the op profile's time); and the HLO text of an instruction, a computation
//! or a whole program ([`hlo_text`], XProf's `get_hlo_text`).
//!
//! A name that matches nothing, a name found in several programs without a program to choose,
//! and a hop count over [`MAX_NEIGHBORHOOD_HOPS`] are [`GraphError::Usage`]: the command line's
//! exit 2, the MCP tool's one-line error.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::documents::{BoxError, OpenedRun, Partial, hlo_modules_in, host_op_profiles_in, open_readable};
use crate::hlo::limits::{MAX_NEIGHBORHOOD_HOPS, NEIGHBORHOOD_NODES};
use crate::hlo::{Module, Relation};
use crate::xplane::Picos;

/// What `xlens graph` is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphRequest {
    /// The instruction (or, for [`hlo_text`], the instruction or computation); a leading `%` is
    /// ignored. `None` for the text of a whole program.
    pub op: Option<String>,
    /// The program to look in: its name as listed (`jit_train_step(36)`), its name without the
    /// program id when that is unique (`jit_train_step`), or a prefix of one name. Every program
    /// when `None`.
    pub program: Option<String>,
    /// Hops walked from the instruction (operands and users), at most [`MAX_NEIGHBORHOOD_HOPS`].
    pub hops: usize,
    /// Instructions kept, nearest first.
    pub max_nodes: usize,
}

impl Default for GraphRequest {
    /// Two hops and 200 instructions, XProf's defaults.
    fn default() -> Self {
        GraphRequest { op: None, program: None, hops: 2, max_nodes: NEIGHBORHOOD_NODES }
    }
}

/// Why `xlens graph` has no answer.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The request names nothing that exists, or more than one thing (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The profile could not be read.
    #[error(transparent)]
    Read(BoxError),
}

impl From<BoxError> for GraphError {
    fn from(e: BoxError) -> Self {
        GraphError::Read(e)
    }
}

/// One instruction's measured time, summed over the hosts' op profiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// Executions over all cores, steps and hosts.
    pub occurrences: u64,
    /// Total time, children included.
    pub time: Picos,
    /// Time minus the children's.
    pub self_time: Picos,
}

/// Measured times by (program id, instruction name).
type Times = BTreeMap<(u64, String), Measured>;

/// The neighbourhood of an instruction: `xlens graph --op NAME`'s document, built by
/// [`op_graph`].
#[derive(Debug)]
pub struct OpGraph {
    /// The `graph --json` document (without `skipped_hosts` and `errors`).
    pub document: Value,
}

/// The HLO graph within `req.hops` hops of the instruction `req.op` (operands and users inside
/// its computation, as XProf's `get_hlo_neighborhood`), with each instruction's opcode, shape,
/// layout, fusion kind, sharding, JAX op name and source line, and its measured time where the
/// profile's op profile has it (`xlens graph PROFILE --op NAME`). `path` is a profile (file, run
/// directory, logdir) or one `*.hlo_proto.pb` (no times then).
///
/// ```
/// use std::path::Path;
/// use xlens::graph::{GraphRequest, graph_document, op_graph};
///
/// let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/clean");
/// let req = GraphRequest { op: Some("dot.32".into()), hops: 1, ..GraphRequest::default() };
/// let graph = op_graph(&profile, &req)?;
/// let doc = graph_document(&graph);
/// assert_eq!(doc["program"], "jit_train_step(36)");
/// assert_eq!(doc["nodes"][0]["name"], "dot.32");
/// assert_eq!(doc["nodes"][0]["relation"], "center");
/// // Its producers and consumers, one hop away.
/// assert!(doc["nodes"].as_array().unwrap()[1..].iter().all(|n| n["distance"] == 1));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn op_graph(path: &Path, req: &GraphRequest) -> Result<Partial<OpGraph>, GraphError> {
    check_hops(req.hops)?;
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        let modules = vec![Module::open(path).map_err(|e| GraphError::Read(e.into()))?];
        let document = neighborhood_document(&modules, &Times::new(), false, req)?;
        return Ok(Partial { hosts: OpGraph { document }, skipped_hosts: Vec::new(), errors: Vec::new() });
    }
    op_graph_in(&open_readable(path).map_err(|e| GraphError::Read(e.into()))?, req)
}

/// [`op_graph`] of a run already opened.
pub fn op_graph_in(opened: &OpenedRun, req: &GraphRequest) -> Result<Partial<OpGraph>, GraphError> {
    check_hops(req.hops)?;
    let hlo = hlo_modules_in(opened);
    let mut errors = hlo.warnings.clone();
    // Resolve the names before the op profile is built, so that a mistake costs no analysis.
    find_op(&hlo.modules, req)?;
    let ops = host_op_profiles_in(opened)?;
    errors.extend(ops.errors.iter().cloned());
    let mut times = Times::new();
    for host in &ops.hosts {
        for op in &host.profile.ops {
            let m = times.entry((op.program_id, op.name.clone())).or_default();
            m.occurrences += op.occurrences;
            m.time += op.time;
            m.self_time += op.self_time;
        }
    }
    let document = neighborhood_document(&hlo.modules, &times, true, req)?;
    Ok(Partial { hosts: OpGraph { document }, skipped_hosts: opened.skipped_hosts.clone(), errors })
}

/// The `graph --json` document of what [`op_graph`] found.
pub fn graph_document(g: &Partial<OpGraph>) -> Value {
    g.document(g.hosts.document.clone())
}

/// The HLO text of the instruction or computation `req.op`, or of the whole program when `op` is
/// `None` (`xlens graph PROFILE --text`; XProf's `get_hlo_text`): a document with the program,
/// what was printed (`instruction`, `computation`, `module`), its line and byte counts and its
/// `lines`.
///
/// ```
/// use std::path::Path;
/// use xlens::graph::{GraphRequest, hlo_text};
///
/// let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/clean");
/// let req = GraphRequest { op: Some("%dot.32".into()), ..GraphRequest::default() };
/// let doc = hlo_text(&profile, &req)?;
/// assert_eq!(doc["kind"], "instruction");
/// assert!(doc["lines"][0].as_str().unwrap().starts_with("dot.32 = f32["));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn hlo_text(path: &Path, req: &GraphRequest) -> Result<Value, GraphError> {
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        let modules = vec![Module::open(path).map_err(|e| GraphError::Read(e.into()))?];
        return text_document(&modules, req);
    }
    hlo_text_in(&open_readable(path).map_err(|e| GraphError::Read(e.into()))?, req)
}

/// [`hlo_text`] of a run already opened.
pub fn hlo_text_in(opened: &OpenedRun, req: &GraphRequest) -> Result<Value, GraphError> {
    let hlo = hlo_modules_in(opened);
    let partial = Partial { hosts: (), skipped_hosts: opened.skipped_hosts.clone(), errors: hlo.warnings.clone() };
    Ok(partial.document(text_document(&hlo.modules, req)?))
}

/// Kernel-level opcodes listed by [`graph_summary`], most frequent first (XProf lists 15).
pub const SUMMARY_OPCODES: usize = 15;

/// The program `req.program` names (the only one when the profile has one) in figures, as
/// XProf's `query_hlo_graph --mode=summary` counts them (`xlens graph PROFILE --summary`): its
/// entry computation, counts of computations, instructions, operand edges, fusions, custom calls
/// and fusion blockers, and its kernel-level opcodes by count ([`SUMMARY_OPCODES`] of them).
///
/// ```
/// use std::path::Path;
/// use xlens::graph::{GraphRequest, graph_summary};
///
/// let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/clean");
/// let req = GraphRequest { program: Some("jit_train_step".into()), ..GraphRequest::default() };
/// let doc = graph_summary(&profile, &req)?;
/// assert_eq!(doc["program"], "jit_train_step(36)");
/// assert_eq!(doc["entry_computation"], "main.40");
/// assert_eq!(doc["top_opcodes"][0]["opcode"], "fusion");
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn graph_summary(path: &Path, req: &GraphRequest) -> Result<Value, GraphError> {
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        let modules = vec![Module::open(path).map_err(|e| GraphError::Read(e.into()))?];
        return summary_document(&modules, req);
    }
    graph_summary_in(&open_readable(path).map_err(|e| GraphError::Read(e.into()))?, req)
}

/// [`graph_summary`] of a run already opened.
pub fn graph_summary_in(opened: &OpenedRun, req: &GraphRequest) -> Result<Value, GraphError> {
    let hlo = hlo_modules_in(opened);
    let partial = Partial { hosts: (), skipped_hosts: opened.skipped_hosts.clone(), errors: hlo.warnings.clone() };
    Ok(partial.document(summary_document(&hlo.modules, req)?))
}

/// The one program `req.program` names, or a usage error that lists them.
fn one_program<'m>(modules: &'m [Module], req: &GraphRequest, what: &str) -> Result<&'m Module, GraphError> {
    let found = programs(modules, req)?;
    match found.as_slice() {
        [m] => Ok(m),
        _ => {
            let list: Vec<String> = found.iter().map(|m| m.display_name()).collect();
            Err(GraphError::Usage(format!(
                "{what} is about one program: pick one with --program ({})",
                list.join(", ")
            )))
        }
    }
}

fn summary_document(modules: &[Module], req: &GraphRequest) -> Result<Value, GraphError> {
    let m = one_program(modules, req, "--summary")?;
    let s = m.graph_summary();
    let top: Vec<Value> = s
        .kernel_opcodes
        .iter()
        .take(SUMMARY_OPCODES)
        .map(|(opcode, count)| json!({ "opcode": opcode, "count": count }))
        .collect();
    Ok(json!({
        "program": m.display_name(),
        "program_id": m.program_id(),
        "entry_computation": m.entry().name(),
        "computation_count": s.computations,
        "instruction_count": s.instructions,
        "edge_count": s.edges,
        "fusion_count": s.fusions,
        "custom_call_count": s.custom_calls,
        "fusion_blocker_count": s.fusion_blockers,
        "top_opcodes": top,
    }))
}

fn check_hops(hops: usize) -> Result<(), GraphError> {
    if hops as u64 > MAX_NEIGHBORHOOD_HOPS {
        return Err(GraphError::Usage(format!(
            "--hops {hops} is over the limit of {MAX_NEIGHBORHOOD_HOPS} (MAX_NEIGHBORHOOD_HOPS)"
        )));
    }
    Ok(())
}

/// The programs `req.program` names (every program when it names none), as XProf resolves a
/// module name: the exact name, else the one whose name before `(` is it, else the one it is a
/// prefix of.
fn programs<'m>(modules: &'m [Module], req: &GraphRequest) -> Result<Vec<&'m Module>, GraphError> {
    if modules.is_empty() {
        return Err(GraphError::Read("the profile holds no HLO program".into()));
    }
    let Some(want) = req.program.as_deref() else { return Ok(modules.iter().collect()) };
    let names: Vec<String> = modules.iter().map(Module::display_name).collect();
    let pick = |keep: &dyn Fn(&str) -> bool| -> Vec<&'m Module> {
        modules.iter().zip(&names).filter(|(_, n)| keep(n)).map(|(m, _)| m).collect()
    };
    for (how, found) in [
        ("", pick(&|n| n == want)),
        ("base name", pick(&|n| n.split('(').next() == Some(want))),
        ("prefix", pick(&|n| n.starts_with(want))),
    ] {
        match found.len() {
            0 => continue,
            1 => return Ok(found),
            _ => {
                let list: Vec<String> = found.iter().map(|m| m.display_name()).collect();
                return Err(GraphError::Usage(format!(
                    "--program {want:?} is ambiguous ({how} of {}): name one",
                    list.join(", ")
                )));
            }
        }
    }
    Err(GraphError::Usage(format!("no program {want:?} in this profile (programs: {})", names.join(", "))))
}

/// What `req.op` names in one program.
enum Named {
    Instruction(crate::hlo::InstrId),
    Computation(crate::hlo::CompId),
}

/// The program and the instruction or computation `req.op` names: one, or a usage error that
/// says which programs hold it or that none does.
fn find<'m>(modules: &'m [Module], req: &GraphRequest) -> Result<(&'m Module, Named), GraphError> {
    let candidates = programs(modules, req)?;
    let Some(op) = req.op.as_deref() else {
        return Err(GraphError::Usage("--op NAME is required".to_owned()));
    };
    let name = op.strip_prefix('%').unwrap_or(op);
    let mut found: Vec<(&Module, Named)> = Vec::new();
    for m in candidates.iter().copied() {
        if let Some(i) = m.instruction_by_name(name) {
            found.push((m, Named::Instruction(i.id())));
        } else if let Some(c) = m.computation_by_name(name) {
            found.push((m, Named::Computation(c.id())));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            let scope = match (&req.program, candidates.as_slice()) {
                (Some(_), [m]) => format!("program {}", m.display_name()),
                _ => format!("any of the {} programs", candidates.len()),
            };
            Err(GraphError::Usage(format!("no instruction or computation {name:?} in {scope}")))
        }
        _ => {
            let list: Vec<String> = found.iter().map(|(m, _)| m.display_name()).collect();
            Err(GraphError::Usage(format!(
                "{name:?} is in {} programs ({}): pick one with --program",
                found.len(),
                list.join(", ")
            )))
        }
    }
}

/// The instruction `req.op` names, or a usage error.
fn find_op<'m>(modules: &'m [Module], req: &GraphRequest) -> Result<(&'m Module, crate::hlo::InstrId), GraphError> {
    match find(modules, req)? {
        (m, Named::Instruction(i)) => Ok((m, i)),
        (m, Named::Computation(c)) => Err(GraphError::Usage(format!(
            "{:?} is a computation of {}, not an instruction: --text prints it",
            m.computation(c).name(),
            m.display_name()
        ))),
    }
}

fn neighborhood_document(
    modules: &[Module],
    times: &Times,
    measured: bool,
    req: &GraphRequest,
) -> Result<Value, GraphError> {
    let (m, id) = find_op(modules, req)?;
    let near =
        m.neighborhood_within(id, req.hops, req.max_nodes.max(1)).map_err(|e| GraphError::Usage(e.to_string()))?;
    let names = |ids: &[crate::hlo::InstrId]| -> Vec<&str> { ids.iter().map(|&o| m.instruction(o).name()).collect() };
    let nodes: Vec<Value> = near
        .nodes
        .iter()
        .map(|n| {
            let i = m.instruction(n.id);
            let shape = i.shape().to_string();
            let layout = if i.shape().is_array() { shape.find('{').map(|at| shape[at..].to_owned()) } else { None };
            let time = m.program_id().and_then(|p| times.get(&(p, i.name().to_owned())));
            let source = m.source(n.id).filter(|s| !s.file.is_empty()).map(|s| format!("{}:{}", s.file, s.line));
            let called: Vec<&str> = i.called_computations().iter().map(|&c| m.computation(c).name()).collect();
            json!({
                "name": i.name(),
                "distance": n.distance,
                "relation": n.relation.as_str(),
                "computation": m.computation(i.computation()).name(),
                "opcode": i.opcode_name(),
                "shape": shape,
                "layout": layout,
                "fusion_kind": i.fusion_kind().map(|k| k.to_string()),
                "called_computations": called,
                "sharding": m.sharding_text(n.id),
                "op_name": Some(i.op_name()).filter(|s| !s.is_empty()),
                "source": source,
                "operands": names(i.operands()),
                "users": names(i.users()),
                "occurrences": time.map(|t| t.occurrences),
                "time_ps": time.map(|t| t.time.0),
                "self_time_ps": time.map(|t| t.self_time.0),
                "text": m.instruction_text(n.id),
            })
        })
        .collect();
    let count = |r: Relation| near.nodes.iter().filter(|n| n.relation == r).count();
    Ok(json!({
        "program": m.display_name(),
        "program_id": m.program_id(),
        "op": m.instruction(id).name(),
        "computation": m.computation(m.instruction(id).computation()).name(),
        "hops": near.hops,
        "measured": measured,
        "producers": count(Relation::Producer),
        "consumers": count(Relation::Consumer),
        "siblings": count(Relation::Sibling),
        "found": near.found,
        "returned": near.nodes.len(),
        "truncated": near.truncated,
        "nodes": nodes,
    }))
}

fn text_document(modules: &[Module], req: &GraphRequest) -> Result<Value, GraphError> {
    let (m, kind, name, content) = match req.op {
        Some(_) => match find(modules, req)? {
            (m, Named::Instruction(i)) => (m, "instruction", Some(m.instruction(i).name()), m.instruction_text(i)),
            (m, Named::Computation(c)) => (m, "computation", Some(m.computation(c).name()), m.computation_text(c)),
        },
        None => {
            let m = one_program(modules, req, "--text without --op")?;
            (m, "module", None, m.module_text())
        }
    };
    let lines: Vec<&str> = content.lines().collect();
    Ok(json!({
        "program": m.display_name(),
        "program_id": m.program_id(),
        "op": name,
        "kind": kind,
        "line_count": lines.len(),
        "byte_count": content.len(),
        "lines": lines,
    }))
}
