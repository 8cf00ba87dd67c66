//! Graph algorithms over a module: topological order, the call graph, neighborhoods.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};

use crate::error::{Error, ErrorKind, Location, Result};
use crate::ids::{CompId, InstrId};
use crate::limits::{self, Limit};
use crate::module::{Computation, ComputationKind, Instruction, Module};
use crate::opcode::Opcode;

/// Kahn's algorithm over operand and control edges; ties go to the earlier proto position, so a
/// proto already in dependency order (as XLA writes it) keeps its order.
pub(crate) fn topological_order(instructions: &[Instruction], members: &[InstrId]) -> Result<Vec<InstrId>> {
    let n = members.len();
    let Some(&first) = members.first() else { return Ok(Vec::new()) };
    let base = first.index();
    let pos = |id: InstrId| id.index() - base;
    // XLA writes each computation in dependency order: when every edge points backwards, the
    // proto order is the answer (the smallest-position-first order Kahn's algorithm below
    // returns), found without building the graph.
    let in_order = members.iter().enumerate().all(|(i, &m)| {
        let instr = &instructions[m.index()];
        instr.operands.iter().chain(&instr.control_predecessors).all(|&p| pos(p) < i)
    });
    if in_order {
        return Ok(members.to_vec());
    }
    let mut indegree = vec![0usize; n];
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &m in members {
        let instr = &instructions[m.index()];
        for &p in instr.operands.iter().chain(&instr.control_predecessors) {
            successors[pos(p)].push(pos(m));
            indegree[pos(m)] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(members[i]);
        for &s in &successors[i] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    if order.len() != n {
        return Err(Error::new(ErrorKind::Cycle, Location::default()));
    }
    Ok(order)
}

fn callee_kind(caller: &Instruction, position: usize) -> ComputationKind {
    match caller.opcode {
        Opcode::Fusion => ComputationKind::Fusion,
        Opcode::While if position == 0 => ComputationKind::WhileBody,
        Opcode::While => ComputationKind::WhileCondition,
        Opcode::Conditional => ComputationKind::Branch,
        Opcode::Call => ComputationKind::Call,
        Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone => ComputationKind::Async,
        Opcode::Reduce
        | Opcode::ReduceWindow
        | Opcode::Map
        | Opcode::Sort
        | Opcode::Scatter
        | Opcode::SelectAndScatter
        | Opcode::AllReduce
        | Opcode::AllReduceStart
        | Opcode::ReduceScatter
        | Opcode::Scan => ComputationKind::Applied,
        _ => ComputationKind::Other,
    }
}

/// Fills callers, kinds and fusion flags, and returns the computations in post order (callees
/// first). Fails on recursion and on call chains deeper than [`limits::MAX_CALL_DEPTH`].
pub(crate) fn call_graph(
    instructions: &[Instruction],
    computations: &mut [Computation],
    entry: CompId,
) -> Result<Vec<CompId>> {
    let n = computations.len();
    let mut children: Vec<Vec<CompId>> = vec![Vec::new(); n];
    for instr in instructions {
        for (position, &callee) in instr.called.iter().enumerate() {
            let caller_comp = instr.computation.index();
            if !children[caller_comp].contains(&callee) {
                children[caller_comp].push(callee);
            }
            let comp = &mut computations[callee.index()];
            if comp.callers.last() != Some(&instr.id) {
                if comp.callers.is_empty() {
                    comp.kind = callee_kind(instr, position);
                }
                comp.callers.push(instr.id);
            }
            if instr.opcode == Opcode::Fusion {
                comp.is_fusion = true;
            }
        }
    }
    computations[entry.index()].kind = ComputationKind::Entry;

    // Iterative depth-first search: 0 = unvisited, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; n];
    let mut post = Vec::with_capacity(n);
    let roots = std::iter::once(entry).chain((0..n as u32).map(CompId));
    for root in roots {
        if state[root.index()] != 0 {
            continue;
        }
        let mut stack: Vec<(CompId, usize)> = vec![(root, 0)];
        state[root.index()] = 1;
        while let Some(&mut (comp, ref mut next)) = stack.last_mut() {
            if let Some(&child) = children[comp.index()].get(*next) {
                *next += 1;
                match state[child.index()] {
                    0 => {
                        limits::check(Limit::CallDepth, stack.len() as u64 + 1, || {
                            Location::default().with_computation(&computations[child.index()].name)
                        })?;
                        state[child.index()] = 1;
                        stack.push((child, 0));
                    }
                    1 => {
                        return Err(Error::new(
                            ErrorKind::CallCycle,
                            Location::default().with_computation(&computations[child.index()].name),
                        ));
                    }
                    _ => {}
                }
            } else {
                state[comp.index()] = 2;
                post.push(comp);
                stack.pop();
            }
        }
    }
    Ok(post)
}

/// XLA's `IsElementwise` per instruction; fusions are elementwise when their bodies are.
pub(crate) fn elementwise(module: &Module) -> Vec<bool> {
    let mut result = vec![false; module.instructions.len()];
    let mut comp_elementwise = vec![false; module.computations.len()];
    for &c in &module.post_order {
        let comp = &module.computations[c.index()];
        let mut all = true;
        for &i in &comp.instructions {
            let instr = &module.instructions[i.index()];
            let e = match instr.opcode {
                Opcode::Fusion => instr.called.first().is_some_and(|b| comp_elementwise[b.index()]),
                Opcode::BitcastConvert => instr.operands.first().is_some_and(|&o| {
                    module.instructions[o.index()].shape.element_type().bit_width()
                        == instr.shape.element_type().bit_width()
                }),
                op => op.is_elementwise(),
            };
            result[i.index()] = e;
            if instr.opcode != Opcode::Parameter && !e {
                all = false;
            }
        }
        comp_elementwise[c.index()] = all && !comp.instructions.is_empty();
    }
    result
}

impl Module {
    /// Operands and users of an instruction within `hops` steps (both directions, inside its
    /// computation), like XProf's `get_hlo_neighborhood`: `(instruction, distance)` sorted by
    /// distance, then module order. The instruction itself is at distance 0.
    pub fn neighborhood(&self, id: InstrId, hops: usize) -> Vec<(InstrId, usize)> {
        neighborhood(self, id, hops)
    }
}

/// Breadth-first search over operand and user edges.
pub(crate) fn neighborhood(module: &Module, start: InstrId, hops: usize) -> Vec<(InstrId, usize)> {
    let mut dist: std::collections::HashMap<InstrId, usize> = std::collections::HashMap::new();
    let mut queue = VecDeque::new();
    dist.insert(start, 0);
    queue.push_back(start);
    while let Some(id) = queue.pop_front() {
        let d = dist[&id];
        if d == hops {
            continue;
        }
        let instr = module.instruction(id);
        for &next in instr.operands().iter().chain(instr.users()) {
            if let std::collections::hash_map::Entry::Vacant(v) = dist.entry(next) {
                v.insert(d + 1);
                queue.push_back(next);
            }
        }
    }
    let mut out: Vec<(InstrId, usize)> = dist.into_iter().collect();
    out.sort_by_key(|&(id, d)| (d, id));
    out
}

/// How an instruction of a neighbourhood is reached from the instruction at its centre.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Relation {
    /// The instruction the neighbourhood is centred on.
    Center,
    /// It feeds the centre: reached through operands only.
    Producer,
    /// It reads the centre's result: reached through users only.
    Consumer,
    /// Neither: reached through operands and users both (another operand of a consumer, another
    /// user of a producer).
    Sibling,
}

impl Relation {
    /// The lower-case name used in documents: `center`, `producer`, `consumer`, `sibling`.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Center => "center",
            Relation::Producer => "producer",
            Relation::Consumer => "consumer",
            Relation::Sibling => "sibling",
        }
    }
}

/// One instruction of a [`Neighborhood`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbor {
    /// The instruction.
    pub id: InstrId,
    /// Hops from the centre (0 for the centre itself).
    pub distance: usize,
    /// How it is reached from the centre.
    pub relation: Relation,
}

/// The instructions within some hops of one instruction, over operand and user edges inside its
/// computation, as XProf's `get_hlo_neighborhood` walks them ([`Module::neighborhood_within`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighborhood {
    /// The instruction at the centre.
    pub center: InstrId,
    /// The hops walked.
    pub hops: usize,
    /// The instructions kept, nearest first, then by name (the centre first).
    pub nodes: Vec<Neighbor>,
    /// Every instruction found within `hops`, kept or not.
    pub found: usize,
    /// Whether instructions were found beyond the `max_nodes` kept.
    pub truncated: bool,
}

impl Module {
    /// The instructions within `hops` hops of `id` (operands and users, both directions, inside
    /// its computation), as XProf's `get_hlo_neighborhood`: a breadth-first walk that takes
    /// operands before users and keeps the first `max_nodes` instructions it meets (the centre
    /// included), listed by distance, then name. Each is labelled a producer (reached through
    /// operands only), a consumer (through users only) or a sibling.
    ///
    /// `hops` above [`limits::MAX_NEIGHBORHOOD_HOPS`] fails with [`ErrorKind::LimitExceeded`].
    ///
    /// ```
    /// use xlens_hlo::{Module, Relation, limits::NEIGHBORHOOD_NODES, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// let dot = module.instruction_by_name("dot.1").unwrap();
    /// let near = module.neighborhood_within(dot.id(), 1, NEIGHBORHOOD_NODES)?;
    /// let names: Vec<(&str, Relation)> =
    ///     near.nodes.iter().map(|n| (module.instruction(n.id).name(), n.relation)).collect();
    /// assert_eq!(names[0], ("dot.1", Relation::Center));
    /// assert!(names.contains(&("p0", Relation::Producer)));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn neighborhood_within(&self, id: InstrId, hops: usize, max_nodes: usize) -> Result<Neighborhood> {
        limits::check(Limit::NeighborhoodHops, hops as u64, || {
            Location::in_module(self.display_name()).with_instruction(self.instruction(id).name())
        })?;
        let mut seen: HashMap<InstrId, usize> = HashMap::new();
        let mut kept: Vec<(InstrId, usize)> = Vec::new();
        let mut queue = VecDeque::new();
        seen.insert(id, 0);
        kept.push((id, 0));
        queue.push_back((id, 0));
        let mut truncated = false;
        while let Some((at, d)) = queue.pop_front() {
            if d >= hops {
                continue;
            }
            let instr = self.instruction(at);
            for &next in instr.operands().iter().chain(instr.users()) {
                if let Entry::Vacant(v) = seen.entry(next) {
                    v.insert(d + 1);
                    queue.push_back((next, d + 1));
                    if kept.len() < max_nodes {
                        kept.push((next, d + 1));
                    } else {
                        truncated = true;
                    }
                }
            }
        }
        let producers = self.reach(id, hops, |i| i.operands());
        let consumers = self.reach(id, hops, |i| i.users());
        let mut nodes: Vec<Neighbor> = kept
            .into_iter()
            .map(|(n, distance)| {
                let relation = if n == id {
                    Relation::Center
                } else if producers.contains(&n) {
                    Relation::Producer
                } else if consumers.contains(&n) {
                    Relation::Consumer
                } else {
                    Relation::Sibling
                };
                Neighbor { id: n, distance, relation }
            })
            .collect();
        nodes.sort_by(|a, b| {
            (a.distance, self.instruction(a.id).name(), a.id).cmp(&(b.distance, self.instruction(b.id).name(), b.id))
        });
        Ok(Neighborhood { center: id, hops, nodes, found: seen.len(), truncated })
    }

    /// The instructions reached from `id` within `hops` steps along `edges` (not `id` itself).
    fn reach<'a>(
        &'a self,
        id: InstrId,
        hops: usize,
        edges: impl Fn(&'a Instruction) -> &'a [InstrId],
    ) -> HashSet<InstrId> {
        let mut seen = HashSet::new();
        let mut frontier = vec![id];
        for _ in 0..hops {
            let mut next = Vec::new();
            for at in frontier {
                for &n in edges(self.instruction(at)) {
                    if n != id && seen.insert(n) {
                        next.push(n);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        seen
    }
}

/// A module's graph in figures, as XProf's `query_hlo_graph --mode=summary` counts them
/// ([`Module::graph_summary`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphSummary {
    /// Computations, the entry and fused bodies included.
    pub computations: usize,
    /// Instructions of every computation.
    pub instructions: usize,
    /// Operand edges (an instruction that reads one value twice counts twice).
    pub edges: usize,
    /// `fusion` instructions.
    pub fusions: usize,
    /// `custom-call` instructions.
    pub custom_calls: usize,
    /// Instructions that break fusion (bitcasts, copies, reshapes, converts, transposes, and the
    /// `AnalyzeLayout` / `AllocateBuffer` custom calls) outside fused bodies and reducers.
    pub fusion_blockers: usize,
    /// Kernel-level instructions by opcode (those outside fused bodies and reducers, calls,
    /// loops, conditionals and async starts that wrap a computation left out): most first, then
    /// by opcode.
    pub kernel_opcodes: Vec<(String, usize)>,
}

impl Module {
    /// The module's graph in figures, as XProf's `query_hlo_graph --mode=summary` counts them:
    /// computations, instructions, operand edges, fusions, custom calls, fusion blockers and the
    /// kernel-level opcodes. Fused bodies are the computations fusions call (and, as XProf
    /// counts them, those named `fused_computation*`); reducers those reduce, scatter, sort,
    /// map and the reducing collectives apply.
    ///
    /// ```
    /// use xlens_hlo::{Module, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// let s = module.graph_summary();
    /// assert_eq!(s.instructions, module.instructions().len());
    /// assert!(s.kernel_opcodes.iter().any(|(op, _)| op == "dot"));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn graph_summary(&self) -> GraphSummary {
        let mut inner: HashSet<CompId> =
            self.computations.iter().filter(|c| c.name().starts_with("fused_computation")).map(|c| c.id()).collect();
        for i in &self.instructions {
            let reducer = matches!(
                i.opcode,
                Opcode::Reduce
                    | Opcode::ReduceWindow
                    | Opcode::Scatter
                    | Opcode::SelectAndScatter
                    | Opcode::Map
                    | Opcode::Sort
                    | Opcode::AllReduce
                    | Opcode::ReduceScatter
            );
            if i.opcode == Opcode::Fusion || reducer {
                inner.extend(i.called.iter().copied());
            }
        }
        let mut edges = 0;
        let (mut fusions, mut custom_calls, mut fusion_blockers) = (0, 0, 0);
        let mut kernel: BTreeMap<&str, usize> = BTreeMap::new();
        for i in &self.instructions {
            edges += i.operands.len();
            fusions += usize::from(i.opcode == Opcode::Fusion);
            custom_calls += usize::from(i.opcode == Opcode::CustomCall);
            if inner.contains(&i.computation()) {
                continue;
            }
            let pinned =
                i.custom_call_target().is_some_and(|t| t.contains("AnalyzeLayout") || t.contains("AllocateBuffer"));
            let blocker = matches!(
                i.opcode,
                Opcode::Bitcast | Opcode::Copy | Opcode::Reshape | Opcode::Convert | Opcode::Transpose
            ) || pinned;
            fusion_blockers += usize::from(blocker);
            let wrapper = matches!(i.opcode, Opcode::Call | Opcode::While | Opcode::Conditional | Opcode::AsyncStart)
                && !i.called.is_empty();
            if !wrapper {
                *kernel.entry(i.opcode_name()).or_default() += 1;
            }
        }
        let mut kernel_opcodes: Vec<(String, usize)> = kernel.into_iter().map(|(k, n)| (k.to_owned(), n)).collect();
        kernel_opcodes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        GraphSummary {
            computations: self.computations.len(),
            instructions: self.instructions.len(),
            edges,
            fusions,
            custom_calls,
            fusion_blockers,
            kernel_opcodes,
        }
    }
}
