//! polars DataFrames of instructions, computations and collectives.
//!
//! Every function takes the modules to include and returns a frame with its full schema, also
//! when there is nothing to show (zero rows).

use polars::prelude::*;

use crate::error::{Error, ErrorKind, Location, Result};
use crate::module::Module;

fn frame(columns: Vec<Column>) -> Result<DataFrame> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns).map_err(|e| Error::new(ErrorKind::Frame(e.to_string()), Location::default()))
}

/// One row per instruction of every computation. Columns: `module`, `program_id`,
/// `computation`, `name`, `opcode`, `category`, `fusion_kind`, `shape`, `bytes` (logical),
/// `padded_bytes` (TPU tiling), `flops`, `transcendentals`, `bytes_accessed`, `op_name`,
/// `source_file`, `source_line`, `in_entry`.
///
/// ```
/// use xlens_hlo::{Module, frame, testing};
/// let module = Module::decode(testing::tiny_module_bytes().into())?;
/// let df = frame::instructions_frame(&[&module])?;
/// assert_eq!((df.height(), df.width()), (8, 17));
/// assert_eq!(frame::instructions_frame(&[])?.width(), 17);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn instructions_frame(modules: &[&Module]) -> Result<DataFrame> {
    let mut module = Vec::new();
    let mut program: Vec<Option<u64>> = Vec::new();
    let mut computation = Vec::new();
    let mut name = Vec::new();
    let mut opcode = Vec::new();
    let mut category = Vec::new();
    let mut fusion_kind: Vec<Option<&str>> = Vec::new();
    let mut shape = Vec::new();
    let mut bytes: Vec<u64> = Vec::new();
    let mut padded: Vec<u64> = Vec::new();
    let mut flops: Vec<u64> = Vec::new();
    let mut trans: Vec<u64> = Vec::new();
    let mut accessed: Vec<u64> = Vec::new();
    let mut op_name = Vec::new();
    let mut file: Vec<Option<String>> = Vec::new();
    let mut line: Vec<Option<u32>> = Vec::new();
    let mut in_entry = Vec::new();
    for m in modules {
        let display = m.display_name();
        for i in m.instructions() {
            let cost = m.cost(i.id());
            let src = m.source(i.id());
            module.push(display.clone());
            program.push(m.program_id());
            computation.push(m.computation(i.computation()).name());
            name.push(i.name());
            opcode.push(i.opcode_name());
            category.push(m.xla_category(i.id()));
            fusion_kind.push(i.fusion_kind().map(|k| k.as_str()));
            shape.push(i.shape().to_string());
            bytes.push(i.shape().logical_bytes());
            padded.push(i.shape().tpu_padded_bytes());
            flops.push(cost.flops);
            trans.push(cost.transcendentals);
            accessed.push(cost.bytes_accessed);
            op_name.push(i.op_name());
            file.push(src.map(|s| s.file.to_owned()));
            line.push(src.map(|s| s.line));
            in_entry.push(m.is_in_entry(i.id()));
        }
    }
    frame(vec![
        Column::new("module".into(), module),
        Column::new("program_id".into(), program),
        Column::new("computation".into(), computation),
        Column::new("name".into(), name),
        Column::new("opcode".into(), opcode),
        Column::new("category".into(), category),
        Column::new("fusion_kind".into(), fusion_kind),
        Column::new("shape".into(), shape),
        Column::new("bytes".into(), bytes),
        Column::new("padded_bytes".into(), padded),
        Column::new("flops".into(), flops),
        Column::new("transcendentals".into(), trans),
        Column::new("bytes_accessed".into(), accessed),
        Column::new("op_name".into(), op_name),
        Column::new("source_file".into(), file),
        Column::new("source_line".into(), line),
        Column::new("in_entry".into(), in_entry),
    ])
}

/// One row per computation. Columns: `module`, `program_id`, `computation`, `kind`,
/// `is_fusion`, `instructions`, `root`, `flops`, `transcendentals`, `bytes_accessed` (summed over
/// the computation's own instructions).
pub fn computations_frame(modules: &[&Module]) -> Result<DataFrame> {
    let mut module = Vec::new();
    let mut program: Vec<Option<u64>> = Vec::new();
    let mut name = Vec::new();
    let mut kind = Vec::new();
    let mut is_fusion = Vec::new();
    let mut count: Vec<u64> = Vec::new();
    let mut root: Vec<Option<&str>> = Vec::new();
    let mut flops: Vec<u64> = Vec::new();
    let mut trans: Vec<u64> = Vec::new();
    let mut accessed: Vec<u64> = Vec::new();
    for m in modules {
        let display = m.display_name();
        for c in m.computations() {
            let cost = m.computation_cost(c.id());
            module.push(display.clone());
            program.push(m.program_id());
            name.push(c.name());
            kind.push(c.kind().as_str());
            is_fusion.push(c.is_fusion());
            count.push(c.instructions().len() as u64);
            root.push(c.root().map(|r| m.instruction(r).name()));
            flops.push(cost.flops);
            trans.push(cost.transcendentals);
            accessed.push(cost.bytes_accessed);
        }
    }
    frame(vec![
        Column::new("module".into(), module),
        Column::new("program_id".into(), program),
        Column::new("computation".into(), name),
        Column::new("kind".into(), kind),
        Column::new("is_fusion".into(), is_fusion),
        Column::new("instructions".into(), count),
        Column::new("root".into(), root),
        Column::new("flops".into(), flops),
        Column::new("transcendentals".into(), trans),
        Column::new("bytes_accessed".into(), accessed),
    ])
}

/// One row per collective. Columns: `module`, `program_id`, `computation`, `name`, `opcode`,
/// `channel_id`, `encoding`, `groups`, `group_size`, `replica_groups` (as XLA prints them),
/// `source_target_pairs` (as XLA prints them, empty when none), `bytes` (result, logical), `op_name`.
pub fn collectives_frame(modules: &[&Module]) -> Result<DataFrame> {
    let mut module = Vec::new();
    let mut program: Vec<Option<u64>> = Vec::new();
    let mut computation = Vec::new();
    let mut name = Vec::new();
    let mut opcode = Vec::new();
    let mut channel: Vec<Option<i64>> = Vec::new();
    let mut encoding = Vec::new();
    let mut groups: Vec<u64> = Vec::new();
    let mut group_size: Vec<u64> = Vec::new();
    let mut text = Vec::new();
    let mut pairs = Vec::new();
    let mut bytes: Vec<u64> = Vec::new();
    let mut op_name = Vec::new();
    for m in modules {
        let display = m.display_name();
        for c in m.collectives() {
            let i = m.instruction(c.instruction);
            module.push(display.clone());
            program.push(m.program_id());
            computation.push(m.computation(i.computation()).name());
            name.push(i.name());
            opcode.push(i.opcode_name());
            channel.push(c.channel_id);
            encoding.push(c.encoding.as_str());
            groups.push(c.replica_groups.len() as u64);
            group_size.push(c.group_size() as u64);
            text.push(c.groups_text());
            pairs.push(if c.source_target_pairs.is_empty() { String::new() } else { c.pairs_text() });
            bytes.push(i.shape().logical_bytes());
            op_name.push(i.op_name());
        }
    }
    frame(vec![
        Column::new("module".into(), module),
        Column::new("program_id".into(), program),
        Column::new("computation".into(), computation),
        Column::new("name".into(), name),
        Column::new("opcode".into(), opcode),
        Column::new("channel_id".into(), channel),
        Column::new("encoding".into(), encoding),
        Column::new("groups".into(), groups),
        Column::new("group_size".into(), group_size),
        Column::new("replica_groups".into(), text),
        Column::new("source_target_pairs".into(), pairs),
        Column::new("bytes".into(), bytes),
        Column::new("op_name".into(), op_name),
    ])
}
