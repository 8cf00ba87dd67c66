//! A readable one-line text form of an instruction, close to XLA's HLO text.

use std::fmt::Write as _;

use crate::ids::{CompId, InstrId};
use crate::module::Module;
use crate::opcode::Opcode;

fn list(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

impl Module {
    /// One line of HLO-like text:
    /// `ROOT dot.3 = f32[8,512]{1,0} dot(param.1, param.2), lhs_contracting_dims={1}, ...`.
    ///
    /// Attributes shown: parameter numbers, tuple indices, dimensions, slices, dot and
    /// convolution dimension numbers, comparison directions, fusion kinds and called
    /// computations, channel ids, replica groups, source-target pairs and custom-call targets.
    /// Constants' values and backend configs are left out.
    ///
    /// ```
    /// use xlens_hlo::{Module, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// let dot = module.instruction_by_name("dot.1").unwrap();
    /// assert_eq!(
    ///     module.instruction_text(dot.id()),
    ///     "dot.1 = f32[8,16]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    /// );
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn instruction_text(&self, id: InstrId) -> String {
        let i = self.instruction(id);
        // Slices' bounds are in the part of the proto decoded on demand, which is decoded only
        // for an instruction that has them (and left out when it does not decode).
        const SLICE_DIMENSIONS: u64 = 17;
        const DYNAMIC_SLICE_SIZES: u64 = 20;
        let has_slices = i.encoded.is_empty()
            || crate::wire::has_any(&i.encoded, &[SLICE_DIMENSIONS, DYNAMIC_SLICE_SIZES]).unwrap_or(true);
        let raw = if has_slices { i.raw().ok() } else { None };
        let mut s = String::new();
        if self.is_root(id) {
            s.push_str("ROOT ");
        }
        let operands: Vec<&str> = i.operands().iter().map(|&o| self.instruction(o).name()).collect();
        let _ = write!(s, "{} = {} {}(", i.name(), i.shape(), i.opcode_name());
        if let Some(n) = i.parameter_number() {
            let _ = write!(s, "{n}");
        } else {
            s.push_str(&operands.join(", "));
        }
        s.push(')');
        match i.opcode() {
            Opcode::GetTupleElement => {
                let _ = write!(s, ", index={}", i.attrs.tuple_index);
            }
            Opcode::Fusion => {
                if let Some(k) = i.fusion_kind() {
                    let _ = write!(s, ", kind={k}");
                }
            }
            Opcode::Compare => {
                let _ = write!(s, ", direction={}", i.attrs.comparison_direction());
            }
            _ => {}
        }
        let dims_attr = matches!(
            i.opcode(),
            Opcode::Broadcast
                | Opcode::Transpose
                | Opcode::Reduce
                | Opcode::Reverse
                | Opcode::Concatenate
                | Opcode::AllGather
                | Opcode::AllGatherStart
                | Opcode::ReduceScatter
                | Opcode::AllToAll
                | Opcode::Sort
                | Opcode::Iota
        );
        if dims_attr && (!i.dimensions().is_empty() || i.opcode() == Opcode::Broadcast) {
            let _ = write!(s, ", dimensions={{{}}}", list(i.dimensions()));
        }
        if let Some(raw) = raw.filter(|raw| !raw.slice_dimensions.is_empty()) {
            let parts: Vec<String> = raw
                .slice_dimensions
                .iter()
                .map(|d| {
                    if d.stride == 1 {
                        format!("[{}:{}]", d.start, d.limit)
                    } else {
                        format!("[{}:{}:{}]", d.start, d.limit, d.stride)
                    }
                })
                .collect();
            let _ = write!(s, ", slice={{{}}}", parts.join(", "));
        }
        if let Some(raw) = raw.filter(|raw| !raw.dynamic_slice_sizes.is_empty()) {
            let _ = write!(s, ", dynamic_slice_sizes={{{}}}", list(&raw.dynamic_slice_sizes));
        }
        if let Some(d) = i.dot_dimension_numbers() {
            if !d.lhs_batch_dimensions.is_empty() {
                let _ = write!(s, ", lhs_batch_dims={{{}}}", list(&d.lhs_batch_dimensions));
            }
            let _ = write!(s, ", lhs_contracting_dims={{{}}}", list(&d.lhs_contracting_dimensions));
            if !d.rhs_batch_dimensions.is_empty() {
                let _ = write!(s, ", rhs_batch_dims={{{}}}", list(&d.rhs_batch_dimensions));
            }
            let _ = write!(s, ", rhs_contracting_dims={{{}}}", list(&d.rhs_contracting_dimensions));
        }
        if let Some(w) = i.window()
            && !w.dimensions.is_empty()
        {
            let sizes: Vec<String> = w.dimensions.iter().map(|d| d.size.to_string()).collect();
            let _ = write!(s, ", window={{size={}}}", sizes.join("x"));
        }
        if let Some(c) = i.channel_id() {
            let _ = write!(s, ", channel_id={c}");
        }
        if let Some(c) = self.collectives().iter().find(|c| c.instruction == id) {
            if !c.replica_groups.is_empty() {
                let _ = write!(s, ", replica_groups={}", c.groups_text());
            }
            if !c.source_target_pairs.is_empty() {
                let _ = write!(s, ", source_target_pairs={}", c.pairs_text());
            }
            if c.use_global_device_ids {
                s.push_str(", use_global_device_ids=true");
            }
        }
        let called: Vec<&str> = i.called_computations().iter().map(|&c| self.computation(c).name()).collect();
        match (i.opcode(), called.as_slice()) {
            (_, []) => {}
            (Opcode::Fusion | Opcode::Call | Opcode::AsyncStart, [c]) => {
                let _ = write!(s, ", calls={c}");
            }
            (Opcode::While, [body, cond]) => {
                let _ = write!(s, ", condition={cond}, body={body}");
            }
            (Opcode::Conditional, branches) => {
                let _ = write!(s, ", branch_computations={{{}}}", branches.join(", "));
            }
            (_, [c]) => {
                let _ = write!(s, ", to_apply={c}");
            }
            (_, many) => {
                let _ = write!(s, ", called_computations={{{}}}", many.join(", "));
            }
        }
        if let Some(t) = i.custom_call_target() {
            let _ = write!(s, ", custom_call_target=\"{t}\"");
        }
        s
    }

    /// A computation as HLO text: `name {` (`ENTRY name {` for the entry), one
    /// [`Module::instruction_text`] line per instruction, indented by two spaces, and `}`. The
    /// instructions come in XLA's order: the schedule's where the module schedules the
    /// computation ([`Module::schedule`]), else XLA's post order (`MakeInstructionPostOrder`:
    /// from each instruction without users, in the proto's order, operands first, the first
    /// operand's first).
    ///
    /// ```
    /// use xlens_hlo::{Module, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// let text = module.computation_text(module.entry().id());
    /// assert!(text.starts_with("ENTRY "));
    /// assert!(text.contains("\n  dot.1 = f32[8,16]{1,0} dot(p0, p1)"));
    /// assert!(text.ends_with("}"));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn computation_text(&self, id: CompId) -> String {
        let c = self.computation(id);
        let mut s = String::new();
        if id == self.entry().id() {
            s.push_str("ENTRY ");
        }
        let _ = writeln!(s, "{} {{", c.name());
        let scheduled = self.schedule(id);
        let post;
        let order = if scheduled.len() == c.instructions().len() {
            scheduled
        } else {
            post = self.post_order(id);
            &post
        };
        for &i in order {
            let _ = writeln!(s, "  {}", self.instruction_text(i));
        }
        s.push('}');
        s
    }

    /// The whole module as HLO text: `HloModule NAME`, then every computation
    /// ([`Module::computation_text`]) in post order (callees before callers, the entry last), as
    /// XLA prints a module, separated by blank lines.
    pub fn module_text(&self) -> String {
        let mut s = format!("HloModule {}\n", self.name());
        for &c in self.computation_post_order() {
            s.push('\n');
            s.push_str(&self.computation_text(c));
            s.push('\n');
        }
        s
    }

    /// The instruction's sharding as HLO text (`{devices=[2,1]0,1}`, `{replicated}`,
    /// `{maximal device=0}`, ...; [`crate::sharding::sharding_text`]), or `None` when it has
    /// none (or its proto does not decode).
    pub fn sharding_text(&self, id: InstrId) -> Option<String> {
        const SHARDING: u64 = 40;
        let i = self.instruction(id);
        if !i.encoded.is_empty() && !crate::wire::has_any(&i.encoded, &[SHARDING]).unwrap_or(true) {
            return None;
        }
        i.raw().ok()?.sharding.as_deref().map(crate::sharding::sharding_text)
    }

    /// XLA's `MakeInstructionPostOrder` of a computation: a depth-first walk from each
    /// instruction that has no users (in the proto's order) that lists an instruction after its
    /// operands (the first operand's subgraph first) and its control predecessors.
    fn post_order(&self, id: CompId) -> Vec<InstrId> {
        let members = self.computation(id).instructions();
        let mut state: std::collections::HashMap<InstrId, bool> = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(members.len());
        let mut stack = Vec::new();
        for &start in members {
            if !self.instruction(start).users().is_empty() || state.contains_key(&start) {
                continue;
            }
            stack.push(start);
            while let Some(&at) = stack.last() {
                match state.get(&at) {
                    Some(&done) => {
                        stack.pop();
                        if !done {
                            state.insert(at, true);
                            out.push(at);
                        }
                    }
                    None => {
                        state.insert(at, false);
                        let i = self.instruction(at);
                        for &p in i.control_predecessors().iter().rev() {
                            if !state.contains_key(&p) {
                                stack.push(p);
                            }
                        }
                        for &o in i.operands().iter().rev() {
                            if !state.contains_key(&o) {
                                stack.push(o);
                            }
                        }
                    }
                }
            }
        }
        // Instructions on a cycle, or otherwise never reached, keep the proto's order at the end.
        out.extend(members.iter().filter(|m| !state.get(m).copied().unwrap_or(false)));
        out
    }
}
