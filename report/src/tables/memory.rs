//! `xlens memory`: each HLO program's device memory as XProf's `get_peak_allocations` gives it
//! (the total of its buffer assignment, the buffers live at its peak), as text and JSON.

use serde_json::{Value, json};
use xlens_hlo::{AllocationRowKind, PeakAllocations};

use super::line;

/// One program's memory.
#[derive(Clone, Debug)]
pub struct ProgramMemory {
    /// The program, `name(program_id)` as XProf names it.
    pub module_name: String,
    /// Its allocations.
    pub allocations: PeakAllocations,
}

const MIB: f64 = (1u64 << 20) as f64;

/// A row's label as XProf writes it: the instruction with its shape index (`copy-start{0}`),
/// `stem.* (N occurrences of size S MiB)`, or `Others (< 1.0 MiB)`.
pub fn row_label(kind: &AllocationRowKind) -> String {
    match kind {
        AllocationRowKind::Buffer { instruction, shape_index } if shape_index.is_empty() => instruction.clone(),
        AllocationRowKind::Buffer { instruction, shape_index } => {
            let index: Vec<String> = shape_index.iter().map(ToString::to_string).collect();
            format!("{instruction}{{{}}}", index.join(","))
        }
        AllocationRowKind::Numbered { stem, count, each_bytes } => {
            format!("{stem}.* ({count} occurrences of size {} MiB)", *each_bytes as f64 / MIB)
        }
        AllocationRowKind::Others { under_bytes } => format!("Others (< {:.1} MiB)", *under_bytes as f64 / MIB),
    }
}

/// The programs by total, largest first (ties in the given order).
fn by_total(programs: &[ProgramMemory]) -> Vec<&ProgramMemory> {
    let mut sorted: Vec<&ProgramMemory> = programs.iter().collect();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.allocations.total_bytes));
    sorted
}

/// The `memory --json` document: `{"summary":{"total_modules","top_modules":[{"module_name",
/// "total_hbm_bytes"}]},"modules":[{"module_name","total_hbm_bytes","top_buffers":[{"instruction",
/// "size_bytes"}]}]}`: XProf's `get_peak_allocations` fields with bytes for its MiB. Programs by
/// total, largest first, the first `top` (all when `None`).
pub fn memory_json(programs: &[ProgramMemory], top: Option<usize>) -> Value {
    let sorted = by_total(programs);
    let kept = &sorted[..sorted.len().min(top.unwrap_or(usize::MAX))];
    json!({
        "summary": {
            "total_modules": programs.len(),
            "top_modules": kept.iter().map(|p| json!({
                "module_name": p.module_name,
                "total_hbm_bytes": p.allocations.total_bytes,
            })).collect::<Vec<_>>(),
        },
        "modules": kept.iter().map(|p| json!({
            "module_name": p.module_name,
            "total_hbm_bytes": p.allocations.total_bytes,
            "top_buffers": p.allocations.rows.iter().map(|r| json!({
                "instruction": row_label(&r.kind),
                "size_bytes": r.bytes,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The programs' memory as text: per program its total and its rows, in MiB.
pub fn memory_text(programs: &[ProgramMemory], top: usize) -> String {
    let mut out = String::new();
    let sorted = by_total(programs);
    line(&mut out, format_args!("{} programs with a buffer assignment", programs.len()));
    for p in sorted.iter().take(top) {
        line(&mut out, format_args!("{:>12.3} MiB  {}", p.allocations.total_bytes as f64 / MIB, p.module_name));
        for r in &p.allocations.rows {
            line(&mut out, format_args!("  {:>12.3} MiB  {}", r.bytes as f64 / MIB, row_label(&r.kind)));
        }
    }
    out
}
