//! Source mapping: from an instruction to the framework name scope and the user's file and line.
//!
//! Older producers write `source_file`/`source_line` into each instruction's metadata. Recent JAX
//! leaves them empty and sets `stack_frame_id`, an index into the module's
//! `StackFrameIndexProto` (all ids 1-based, 0 = none): frame → file location → file and
//! function names, with a parent frame for the caller (facts §1.2).

use crate::error::{Location, Warning, WarningKind};
use crate::ids::InstrId;
use crate::limits::MAX_STACK_DEPTH;
use crate::module::Module;
use crate::raw;

/// A position in the user's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceLocation<'m> {
    /// The file, as the producer recorded it (usually absolute).
    pub file: &'m str,
    /// 1-based line (0 when unknown).
    pub line: u32,
    /// Column (0 when unknown).
    pub column: u32,
    /// The function, when the stack-frame index names it.
    pub function: Option<&'m str>,
}

impl std::fmt::Display for SourceLocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(func) = self.function {
            write!(f, " ({func})")?;
        }
        Ok(())
    }
}

fn get<T>(v: &[T], one_based: i32) -> Option<&T> {
    usize::try_from(one_based).ok()?.checked_sub(1).and_then(|i| v.get(i))
}

fn frame_location<'m>(
    index: &'m raw::StackFrameIndexProto,
    frame: &raw::stack_frame_index_proto::StackFrame,
) -> Option<SourceLocation<'m>> {
    let loc = get(&index.file_locations, frame.file_location_id)?;
    let file = get(&index.file_names, loc.file_name_id)?;
    Some(SourceLocation {
        file,
        line: u32::try_from(loc.line).unwrap_or(0),
        column: u32::try_from(loc.column).unwrap_or(0),
        function: get(&index.function_names, loc.function_name_id).map(String::as_str),
    })
}

impl Module {
    /// Where in the user's program an instruction came from: the metadata's `source_file` and
    /// `source_line` when set, else the innermost frame of its `stack_frame_id`.
    ///
    /// ```
    /// use xlens_hlo::{Module, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// let dot = module.instruction_by_name("dot.1").unwrap();
    /// let src = module.source(dot.id()).unwrap();
    /// assert_eq!((src.file, src.line, src.function), ("/home/me/train.py", 12, Some("loss")));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn source(&self, id: InstrId) -> Option<SourceLocation<'_>> {
        // The metadata's file and line are read in place from the instruction's bytes (or from
        // the whole proto, decoded on demand, when the bytes hold something that reader leaves to
        // prost); when neither reads, the stack frame (always kept) still answers.
        let instr = self.instruction(id);
        let in_place = if instr.encoded.is_empty() { None } else { crate::wire::source(&instr.encoded) };
        let meta = match in_place {
            Some(meta) => Ok(meta),
            None => instr
                .raw()
                .map(|raw| raw.metadata.as_ref().map(|m| (m.source_file.as_str(), m.source_line, m.source_column))),
        };
        match meta {
            Ok(None) => return None,
            Ok(Some((file, line, column))) if !file.is_empty() => {
                return Some(SourceLocation {
                    file,
                    line: u32::try_from(line).unwrap_or(0),
                    column: u32::try_from(column).unwrap_or(0),
                    function: None,
                });
            }
            _ => {}
        }
        let frame = get(&self.stack_frames.stack_frames, instr.stack_frame_id())?;
        frame_location(&self.stack_frames, frame)
    }

    /// The instruction's call stack, innermost frame first, from its `stack_frame_id` (empty when
    /// it has none). Walks at most [`MAX_STACK_DEPTH`] frames and stops at a frame seen before.
    pub fn source_stack(&self, id: InstrId) -> Vec<SourceLocation<'_>> {
        let index = &self.stack_frames;
        let mut out = Vec::new();
        let mut next = self.instruction(id).stack_frame_id();
        let mut seen = std::collections::HashSet::new();
        while next > 0 && (out.len() as u64) < MAX_STACK_DEPTH && seen.insert(next) {
            let Some(frame) = get(&index.stack_frames, next) else { break };
            if let Some(loc) = frame_location(index, frame) {
                out.push(loc);
            }
            next = frame.parent_frame_id;
        }
        out
    }
}

/// Warnings for stack-frame ids that point outside the index.
pub(crate) fn check_stack_frames(module: &Module) -> Vec<Warning> {
    let index = &module.stack_frames;
    let mut bad = std::collections::BTreeSet::new();
    for instr in module.instructions() {
        let id = instr.stack_frame_id();
        if id > 0 && get(&index.stack_frames, id).and_then(|f| frame_location(index, f)).is_none() {
            bad.insert(i64::from(id));
        }
    }
    bad.into_iter()
        .take(crate::limits::MAX_WARNINGS_PER_MODULE)
        .map(|id| Warning { kind: WarningKind::DanglingStackFrame(id), location: Location::in_module(module.name()) })
        .collect()
}
