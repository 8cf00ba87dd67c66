//! `xlens graph`: the HLO graph around one instruction (XProf's `get_hlo_neighborhood`) and the
//! HLO text of an instruction, a computation or a program (`get_hlo_text`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use super::commands::{EXIT_CODES, Job};
use super::{emit, emit_json};
use crate::graph::{GraphError, GraphRequest, graph_document, graph_summary, hlo_text, op_graph};
use crate::hlo::limits::NEIGHBORHOOD_NODES;

/// The HLO graph around one instruction: its producers and consumers within some hops, each with
/// opcode, shape, layout, fusion kind, sharding, source line and measured time; or, with
/// `--text`, the HLO text of an instruction, a computation or a whole program.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct GraphCmd {
    /// A profile (file, session directory, logdir) or a `*.hlo_proto.pb`.
    path: PathBuf,
    /// The instruction (e.g. `fusion.12`; a leading `%` is ignored); with `--text`, also a
    /// computation. Required unless `--text`.
    #[arg(long, value_name = "NAME", required_unless_present_any = ["text", "summary"])]
    op: Option<String>,
    /// The program to look in (`jit_step(3)`, its name without the id when unique, or a prefix),
    /// needed when the name is in several programs.
    #[arg(long, value_name = "P")]
    program: Option<String>,
    /// Hops walked from the instruction, through operands and users (at most 32).
    #[arg(long, value_name = "N", default_value_t = 2)]
    hops: usize,
    /// Instructions listed at most, nearest first.
    #[arg(long, value_name = "N", default_value_t = NEIGHBORHOOD_NODES)]
    max_nodes: usize,
    /// Print the HLO text of the instruction or computation `--op` names (of the program
    /// `--program` names without `--op`) instead of the neighbourhood.
    #[arg(long, conflicts_with_all = ["hops", "max_nodes"])]
    text: bool,
    /// The program's graph in figures (XProf's `query_hlo_graph --mode=summary`): computations,
    /// instructions, edges, fusions, custom calls, fusion blockers, kernel opcodes.
    #[arg(long, conflicts_with_all = ["op", "hops", "max_nodes", "text"])]
    summary: bool,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

impl Job for GraphCmd {
    fn run(self) -> ExitCode {
        let mut usage = None;
        let code = super::run(|| match self.job() {
            Err(GraphError::Usage(why)) => {
                usage = Some(why);
                Ok(())
            }
            Err(GraphError::Read(e)) => Err(anyhow::anyhow!(e)),
            Ok(()) => Ok(()),
        });
        match usage {
            Some(why) => {
                eprintln!("error: {} (see xlens graph --help)", crate::report::render::printable(&why));
                ExitCode::from(2)
            }
            None => code,
        }
    }
}

impl GraphCmd {
    fn request(&self) -> GraphRequest {
        GraphRequest { op: self.op.clone(), program: self.program.clone(), hops: self.hops, max_nodes: self.max_nodes }
    }

    fn job(&self) -> Result<(), GraphError> {
        let req = self.request();
        let out = if self.summary {
            let doc = graph_summary(&self.path, &req)?;
            super::jobs::warn_skipped(&[], &strings(&doc["errors"]));
            if self.json { emit_json(&doc) } else { emit(&summary_text(&doc)) }
        } else if self.text {
            let doc = hlo_text(&self.path, &req)?;
            super::jobs::warn_skipped(&[], &strings(&doc["errors"]));
            if self.json { emit_json(&doc) } else { emit(&text_lines(&doc)) }
        } else {
            let g = op_graph(&self.path, &req)?;
            super::jobs::warn_skipped(&g.skipped_hosts, &g.errors);
            if self.json { emit_json(&graph_document(&g)) } else { emit(&graph_text(&g.hosts.document)) }
        };
        out.map_err(|e| GraphError::Read(e.into()))
    }
}

/// The text's lines, each ended by a newline.
fn text_lines(doc: &Value) -> String {
    strings(&doc["lines"]).iter().map(|l| format!("{l}\n")).collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

/// The summary: the counts, then the kernel opcodes.
fn summary_text(doc: &Value) -> String {
    let mut out = format!(
        "{} (entry {})\n",
        doc["program"].as_str().unwrap_or(""),
        doc["entry_computation"].as_str().unwrap_or("")
    );
    for key in [
        "computation_count",
        "instruction_count",
        "edge_count",
        "fusion_count",
        "custom_call_count",
        "fusion_blocker_count",
    ] {
        let _ = writeln!(out, "  {:<22} {}", key.trim_end_matches("_count"), doc[key]);
    }
    out.push_str("  kernel opcodes:\n");
    for row in doc["top_opcodes"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "    {:<24} {}", row["opcode"].as_str().unwrap_or(""), row["count"]);
    }
    out
}

/// The neighbourhood as a table: one line per instruction, nearest first.
fn graph_text(doc: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let mut out = format!(
        "{} / {}: {} within {} hops ({} producers, {} consumers, {} siblings{})\n",
        s(&doc["program"]),
        s(&doc["computation"]),
        s(&doc["op"]),
        doc["hops"],
        doc["producers"],
        doc["consumers"],
        doc["siblings"],
        if doc["truncated"] == Value::Bool(true) {
            format!("; {} of {} shown", doc["returned"], doc["found"])
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "{:>4}  {:<9} {:>11}  {:<20} {:<28} {:<8} source",
        "hops", "relation", "self time", "opcode", "name", "fusion"
    );
    for n in doc["nodes"].as_array().into_iter().flatten() {
        let time = match n["self_time_ps"].as_i64() {
            Some(ps) => format!("{:.3} ms", ps as f64 / 1e9),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:>4}  {:<9} {:>11}  {:<20} {:<28} {:<8} {}",
            n["distance"].as_u64().unwrap_or(0),
            s(&n["relation"]),
            time,
            s(&n["opcode"]),
            s(&n["name"]),
            n["fusion_kind"].as_str().unwrap_or("-"),
            n["source"].as_str().unwrap_or("-"),
        );
        let _ = writeln!(out, "      {}", s(&n["text"]));
    }
    out
}
