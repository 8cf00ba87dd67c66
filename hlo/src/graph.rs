//! Graph algorithms over a module: topological order, the call graph, neighborhoods.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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
