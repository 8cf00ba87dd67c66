//! Renderings of HLO modules for the `hlo_ops` example: a JSON document and a text report.

use super::line;
use std::collections::BTreeMap;

use serde_json::{Value, json};
use xlens_hlo::Module;

fn opcodes(m: &Module) -> BTreeMap<&str, usize> {
    m.opcode_counts().into_iter().collect()
}

/// Which hosts each module was captured on, by [`Module::display_name`] (from
/// [`xlens_hlo::module_hosts`]; empty for a standalone `*.hlo_proto.pb`).
pub type ModuleHosts = BTreeMap<String, Vec<String>>;

/// The `hlo_ops --json` document for a session, one entry per module:
/// `{"modules":[{"name","hosts":[..],"program_id","computations","instructions",
/// "opcodes":{"dot":N,...},"entry_flops","entry_bytes_accessed","aliased_params":[..],
/// "collectives":N}]}`. `hosts` names the hosts the program was captured on. Counts cover every
/// computation, fusion bodies included; costs are the entry computation's.
pub fn hlo_ops_json(modules: &[Module], hosts: &ModuleHosts) -> Value {
    json!({
        "modules": modules.iter().map(|m| {
            let cost = m.entry_cost();
            let name = m.display_name();
            json!({
                "name": name.clone(),
                "hosts": hosts.get(&name).cloned().unwrap_or_default(),
                "program_id": m.program_id(),
                "computations": m.computations().len(),
                "instructions": m.instructions().len(),
                "opcodes": opcodes(m),
                "entry_flops": cost.flops,
                "entry_bytes_accessed": cost.bytes_accessed,
                "aliased_params": m.aliased_params(),
                "collectives": m.collectives().len(),
            })
        }).collect::<Vec<_>>(),
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// A text report per module: sizes, entry costs, static memory, donation, collectives, the
/// opcode histogram and the entry instructions with the most FLOPs, with their source lines.
pub fn hlo_ops_text(modules: &[Module], hosts: &ModuleHosts) -> String {
    let mut out = String::new();
    for m in modules {
        let cost = m.entry_cost();
        let name = m.display_name();
        match hosts.get(&name).map(Vec::as_slice) {
            Some([]) | None => {
                line(&mut out, format_args!("module {name}"));
            }
            Some([one]) => {
                line(&mut out, format_args!("module {name} (host {one})"));
            }
            Some(many) => {
                line(&mut out, format_args!("module {name} ({} hosts: {})", many.len(), many.join(", ")));
            }
        }
        line(
            &mut out,
            format_args!(
                "  {} computations, {} instructions ({} in entry {})",
                m.computations().len(),
                m.instructions().len(),
                m.entry().instructions().len(),
                m.entry().name()
            ),
        );
        line(
            &mut out,
            format_args!(
                "  entry cost      {} flops, {} transcendentals, {} bytes accessed",
                cost.flops, cost.transcendentals, cost.bytes_accessed
            ),
        );
        if let Ok(Some(mem)) = m.hbm_memory_stats() {
            line(
                &mut out,
                format_args!(
                    "  memory          {:.3} MiB allocated, heap peak {:.3} MiB, arguments {:.3} MiB, outputs {:.3} MiB, aliased {:.3} MiB",
                    mib(mem.total_allocation_bytes),
                    mib(mem.heap_peak_bytes),
                    mib(mem.argument_bytes),
                    mib(mem.output_bytes),
                    mib(mem.alias_bytes)
                ),
            );
        }
        let aliased: Vec<String> = m.aliased_params().iter().map(u64::to_string).collect();
        line(&mut out, format_args!("  donated params  [{}]", aliased.join(", ")));
        line(&mut out, format_args!("  collectives     {}", m.collectives().len()));
        for c in m.collectives() {
            let i = m.instruction(c.instruction);
            let channel = c.channel_id.map_or_else(|| "-".to_owned(), |c| c.to_string());
            let pattern = if c.source_target_pairs.is_empty() {
                format!("groups {}", c.groups_text())
            } else {
                format!("pairs {}", c.pairs_text())
            };
            line(
                &mut out,
                format_args!("    {:<24} {:<20} channel {:<3} {pattern}", i.name(), i.opcode_name(), channel),
            );
        }
        let ops: Vec<String> = opcodes(m).into_iter().map(|(op, n)| format!("{op}={n}")).collect();
        line(&mut out, format_args!("  opcodes         {}", ops.join(" ")));
        let mut top: Vec<_> =
            m.entry().instructions().iter().map(|&i| (m.cost(i).flops, i)).filter(|(f, _)| *f > 0).collect();
        top.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        if !top.is_empty() {
            line(&mut out, format_args!("  top entry ops by flops"));
        }
        for (flops, id) in top.into_iter().take(5) {
            let i = m.instruction(id);
            let source = m.source(id).map_or_else(String::new, |s| {
                let file = s.file.rsplit('/').next().unwrap_or(s.file);
                format!("  {file}:{}", s.line)
            });
            line(
                &mut out,
                format_args!(
                    "    {:>14} flops  {:<28} {:<22} {}{source}",
                    flops,
                    i.name(),
                    m.xla_category(id),
                    i.shape()
                ),
            );
        }
    }
    out
}
