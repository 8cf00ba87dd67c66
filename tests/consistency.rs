//! One truth per figure (issue 39, "Done when"): a dozen profiles (CPU, TPU, H200 with and
//! without CUDA graphs, AMD, TensorFlow on V100, a synthetic GPU) are scanned once each, and
//! every quantity a user reads (the step time's mean and median, busy, idle, host wait, infeed/outfeed,
//! exposed communication, FLOP and HBM utilisation, roofline efficiency, duty cycle, each
//! finding's impact in ms per step and % of the step, the slowest ops' times (a capture
//! without HLO: its framework device ops, their kernel counts and shares too), the categories'
//! times (a capture without HLO: each TensorFlow op type's, the framework op table's time of
//! that type), each HLO program's device memory, each GPU kernel's figures) must read the same in the
//! text report, the JSON, the HTML page (its memory section `memory --json`'s figures, its kernel
//! section `kernels --json`'s), the Parquet dataset,
//! the `ops` document and, against itself, in `diff A A` (both sides the scan's figure, a zero
//! change) and in `runs` (the run's step time is the scan's). Text and HTML are compared at the
//! precision they print (the JSON figure rounded as the renderer rounds it).
//!
//! A second test diffs runs with a repeated run on one side: the new side's mean step time must
//! be one figure on the step line, in the metrics table (JSON, text, Parquet) and its steps all
//! of its runs' steps.
//!
//! Mismatches known today are listed in [`KNOWN`] (and [`KNOWN_REPEATS`]), each with the issue-39
//! bullet it belongs to; the tests fail on a mismatch not listed, and on a listed one that no
//! longer occurs.

mod common;
mod outputs;

use std::collections::BTreeSet;

use outputs::{Outputs, TestProfile, frames_json, outputs, scratch, shared_dir, testdata};
use rayon::prelude::*;
use serde_json::Value;
use xlens::report::diff::Diff;
use xlens::report::runs::{RunSummary, compare_runs, runs_text};
use xlens::{DiffRequest, diff_paths};

/// The profiles compared: `testdata/<name>`, or the shared V100 TensorFlow capture where the
/// shared data is (else its copy in `testdata/field`).
const PROFILES: &[&str] = &[
    // CPU (XLA:CPU, real captures)
    "corpus/host_callback",
    "corpus/sharded_collectives_baseline",
    "real/barrier_in_loop",
    // TPU (synthetic sessions, one of two hosts; a real v6e capture)
    "tpu/tpu_basic",
    "tpu/tpu_straggler",
    "tpu/tpu_two_hosts_clean",
    "field/tpu_v6e_host_offload",
    // NVIDIA H200, with and without CUDA graphs
    "h200/h200_bf16_graphs",
    "h200/h200_bf16_no_graphs",
    // AMD MI300X / MI355
    "field/amd_conv3d_jax08",
    "field/amd_te_fused_attn",
    // TensorFlow on 8 V100s
    "field/tf_v100_multiworker",
    // A synthetic NVIDIA-shaped profile
    "gpu/gpu_healthy",
    // PyTorch/XLA on CPU (the shares of the loop's iteration)
    "field/ptxla_cpu_input_bound",
];

/// The mismatches known today, as (profile, quantity, output): each a figure issue 39 says
/// disagrees between outputs and that is being fixed; remove an entry with its fix (the test
/// fails while a listed one no longer occurs).
const KNOWN: &[(&str, &str, &str)] = &[];

/// The mismatches of [`diff_with_repeats_has_one_mean_per_side`] known today, as (quantity,
/// output).
const KNOWN_REPEATS: &[(&str, &str)] = &[];

/// One quantity that reads differently in two outputs.
#[derive(Debug)]
struct Mismatch {
    /// What (`step_time_ms_mean`, `finding[0] device_idle ms_per_step`, `op custom-call.57 ms`).
    quantity: String,
    /// Where it differs from the JSON (`text`, `html`, `parquet`, `ops`, `diff`, `diff_text`,
    /// `diff_parquet`, `runs`, `runs_text`).
    output: &'static str,
    /// The JSON's figure (rounded as `output` prints it).
    expected: String,
    /// What `output` says.
    got: String,
}

/// The mismatches of one profile.
#[derive(Default)]
struct Compare {
    found: Vec<Mismatch>,
    /// Comparisons made, so that a parser that finds nothing cannot pass unnoticed.
    checked: usize,
}

impl Compare {
    fn push(&mut self, quantity: &str, output: &'static str, expected: String, got: String) {
        self.found.push(Mismatch { quantity: quantity.to_owned(), output, expected, got });
    }

    /// Two numbers that are the same figure (equal within float noise); `None` on both sides
    /// agrees.
    fn same(&mut self, quantity: &str, output: &'static str, expected: Option<f64>, got: Option<f64>) {
        self.checked += 1;
        let equal = match (expected, got) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-6),
            (None, None) => true,
            _ => false,
        };
        if !equal {
            self.push(quantity, output, format!("{expected:?}"), format!("{got:?}"));
        }
    }

    /// A printed figure: `got` (the token the output printed, `None` when it printed none) is
    /// `expected` with `decimals` decimals, or `n/a` without a figure.
    fn printed(
        &mut self,
        quantity: &str,
        output: &'static str,
        expected: Option<f64>,
        decimals: usize,
        got: Option<&str>,
    ) {
        self.checked += 1;
        let want = expected.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"));
        // A printed -0.0 is 0.0.
        let normal = |s: &str| {
            if s.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
                s.trim_start_matches('-').to_owned()
            } else {
                s.to_owned()
            }
        };
        if got.map(normal) != Some(normal(&want)) {
            self.push(quantity, output, want, got.unwrap_or("(not printed)").to_owned());
        }
    }
}

/// The number (or `n/a`) printed right after `label` in `line`: digits, sign and point, a unit
/// or `%` after it left out.
fn after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let at = line.find(label)? + label.len();
    let rest = line[at..].trim_start();
    if rest.starts_with("n/a") {
        return Some(&rest[..3]);
    }
    // A figure the profile cannot give (no cost model) reads "unknown": no figure, as n/a.
    if rest.starts_with("unknown") {
        return Some("n/a");
    }
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The first line of `text` that starts with `prefix`.
fn line_of<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

/// `s` as the HTML page escapes text.
fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The text between `start` and the next `end` after it.
fn between<'a>(hay: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let at = hay.find(start)? + start.len();
    let len = hay[at..].find(end)?;
    Some(&hay[at..at + len])
}

/// The health figures every output shows, with their precision in text and HTML.
const HEALTH: &[(&str, &str, &str)] = &[
    // (JSON key, text label, HTML tile)
    ("device_busy_pct", "device busy ", "Device busy"),
    ("idle_pct", "  idle ", "Idle"),
    ("host_wait_pct", "(waiting on the host ", "Waiting on the host (part of idle)"),
    ("input_bound_pct", "infeed/outfeed ", "Infeed / outfeed (part of busy)"),
    ("exposed_communication_pct", "exposed communication ", "Exposed communication"),
    ("flops_utilization_pct", "FLOP utilisation ", "FLOP utilisation"),
    ("hbm_utilization_pct", "HBM utilisation ", "HBM utilisation"),
    ("roofline_efficiency_pct", "roofline efficiency ", "Roofline efficiency"),
    ("device_duty_cycle_pct", "duty cycle over the capture ", "Device duty cycle"),
];

/// Evidence metrics (by the start of their name) that restate a health figure: one definition,
/// one value.
const EVIDENCE_OF_HEALTH: &[(&str, &str)] = &[
    ("FLOP utilisation as XProf counts it", "xprof_flops_utilization_pct"),
    ("FLOP utilisation", "flops_utilization_pct"),
    ("memory bandwidth utilisation", "hbm_utilization_pct"),
    ("HBM utilisation", "hbm_utilization_pct"),
    ("roofline efficiency", "roofline_efficiency_pct"),
    ("idle share of the step", "idle_pct"),
    ("device duty cycle", "device_duty_cycle_pct"),
];

/// Compares every output of `profile` with its JSON report.
fn compare(profile: &TestProfile) -> Vec<Mismatch> {
    let dir = scratch("consistency", &profile.name);
    let o = outputs(profile, &dir);
    let mut c = Compare::default();
    let j = &o.json;
    let m = &j["metrics"];
    let f = |k: &str| m[k].as_f64();
    let text = xlens::report::render::text(&o.report);
    let html = xlens::report::render::html(&o.report);
    let single_host = j["hosts"].as_array().is_none_or(|h| h.len() <= 1);
    let pace = m["step_time_host"].as_str().or(j["profile"]["hosts"][0].as_str()).unwrap_or("").to_owned();

    // Step times.
    let steps_line = line_of(&text, "Steps").unwrap_or("");
    let html_steps = between(&html, "<h2 id=\"steps\">Step times</h2><p>", "</p>").unwrap_or("");
    let device_window = m["time_base"].as_str() == Some("device_window");
    for (key, label) in [("step_time_ms_mean", "mean "), ("step_time_ms_median", "median ")] {
        if device_window {
            if key == "step_time_ms_mean" {
                c.printed(key, "text", f(key), 3, after(steps_line, "device window of "));
                c.printed(key, "html", f(key), 3, after(html_steps, "device window of "));
            }
        } else if f(key).is_some() {
            c.printed(key, "text", f(key), 3, after(steps_line, label));
            c.printed(key, "html", f(key), 3, after(html_steps, label));
        }
    }
    let tile = |k: &str| between(&html, &format!("<div class=\"k\">{k}</div><div class=\"v\">"), "</div>");
    let unit = o.report.metrics.step_unit();
    c.printed(
        "step_time_ms_mean",
        "html",
        f("step_time_ms_mean"),
        3,
        tile(&format!("Mean {unit} time")).and_then(|v| after(v, "")),
    );

    // The health figures.
    let health: String = text.lines().skip_while(|l| !l.starts_with("Health")).take(3).collect::<Vec<_>>().join("\n");
    // Their base, where it is the loop's iteration rather than the step (PyTorch/XLA).
    if let Some(ms) = f("loop_iteration_ms_mean") {
        c.printed("loop_iteration_ms_mean", "text", Some(ms), 3, after(&health, "per loop iteration ("));
        c.printed(
            "loop_iteration_ms_mean",
            "html",
            Some(ms),
            3,
            tile("Loop iteration (the shares' base)").and_then(|v| after(v, "")),
        );
    }
    for (key, label, tile_name) in HEALTH {
        c.printed(key, "text", f(key), 1, after(&health, label));
        c.printed(key, "html", f(key), 1, tile(tile_name).and_then(|v| after(v, "")));
    }
    // The page's anatomy table: its idle row is the part of the health's idle with no host
    // work either (the host row the rest: docs/metrics.md).
    if let Some(row) = between(&html, "></span>idle</td>", "</tr>") {
        let cells: Vec<&str> = row.split("<td class=\"n\">").skip(1).map(|c| c.trim_end_matches("</td>")).collect();
        let no_host = f("idle_pct").zip(f("host_wait_pct")).map(|(idle, host)| idle - host);
        c.printed("idle_pct - host_wait_pct", "html_anatomy", no_host, 1, cells.get(2).copied());
    }

    // The Parquet dataset: the pace host's metrics, each host's row.
    let frames = &o.frames;
    let rows = |t: &str| frames[t].as_array().cloned().unwrap_or_default();
    let of_host = |r: &Value, h: &str| r["host_name"].as_str() == Some(h);
    let metrics: Vec<Value> = rows("metrics").into_iter().filter(|r| of_host(r, &pace)).collect();
    let parquet_metric =
        |k: &str| metrics.iter().find(|r| r["metric"].as_str() == Some(k)).and_then(|r| r["value"].as_f64());
    // A session's own figures are its `session_metrics` table (the pace host's `metrics`
    // table holds that host's own).
    let session: Vec<Value> = rows("session_metrics");
    let session_metric =
        |k: &str| session.iter().find(|r| r["metric"].as_str() == Some(k)).and_then(|r| r["value"].as_f64());
    for (key, _) in o.report.metrics.figures() {
        if single_host {
            c.same(key, "parquet", f(key), parquet_metric(key));
        } else {
            c.same(key, "parquet", f(key), session_metric(key));
        }
    }
    for h in j["hosts"].as_array().into_iter().flatten() {
        let name = h["host"].as_str().unwrap_or("");
        let row = rows("hosts").into_iter().find(|r| of_host(r, name));
        for key in ["step_time_ms_mean", "step_time_ms_median", "idle_pct", "flops_utilization_pct"] {
            c.same(
                &format!("host {name} {key}"),
                "parquet",
                h[key].as_f64(),
                row.as_ref().and_then(|r| r[key].as_f64()),
            );
        }
    }
    if single_host
        && let Some(mean) = f("step_time_ms_mean")
        && m["time_base"].as_str() == Some("steps")
    {
        let steps: Vec<f64> = rows("steps").iter().filter_map(|r| r["step_time_ms"].as_f64()).collect();
        let parquet_mean = (!steps.is_empty()).then(|| steps.iter().sum::<f64>() / steps.len() as f64);
        c.same("step_time_ms_mean (steps table)", "parquet", Some(mean), parquet_mean);
    }

    // Findings: impact in text, HTML, Parquet.
    let impacts_text: Vec<&str> = text.lines().filter(|l| l.starts_with("     impact: ")).collect();
    let impacts_html: Vec<&str> = html.split("<p><b>Impact:</b> ").skip(1).collect();
    let findings = j["findings"].as_array().cloned().unwrap_or_default();
    for (i, fi) in findings.iter().enumerate() {
        let id = fi["id"].as_str().unwrap_or("");
        let ms = fi["impact"]["ms_per_step"].as_f64();
        let pct = fi["impact"]["pct_of_step"].as_f64();
        let q = |what: &str| format!("finding[{i}] {id} {what}");
        let fmt = ms.map(xlens::faults::fmt_value);
        let text_line = impacts_text.get(i).copied().unwrap_or("");
        if fmt.as_deref() != after(text_line, "impact: ") {
            c.push(
                &q("ms_per_step"),
                "text",
                format!("{fmt:?}"),
                after(text_line, "impact: ").unwrap_or("").to_owned(),
            );
        }
        c.printed(&q("pct_of_step"), "text", pct, 1, after(text_line, "("));
        let html_p = impacts_html.get(i).copied().unwrap_or("");
        if fmt.as_deref() != after(html_p, "") {
            c.push(&q("ms_per_step"), "html", format!("{fmt:?}"), after(html_p, "").unwrap_or("").to_owned());
        }
        c.printed(&q("pct_of_step"), "html", pct, 1, after(html_p, "("));
        // The Parquet row of the finding on the pace host (or the session's).
        let session = fi["scope"].as_str() == Some("session");
        let table = if session && !single_host { "session_findings" } else { "findings" };
        let host = fi["host"].as_str().unwrap_or("");
        let same_id: Vec<&Value> = findings.iter().filter(|g| g["id"] == fi["id"] && g["host"] == fi["host"]).collect();
        let nth = same_id.iter().position(|g| std::ptr::eq(*g, fi)).unwrap_or(0);
        let table_rows = rows(table);
        let row = table_rows
            .iter()
            .filter(|r| {
                r["id"].as_str() == Some(id)
                    && (session || r["host_name"].as_str().or(r["host"].as_str()) == Some(host))
            })
            .nth(nth);
        let per_host = fi["hosts"]
            .as_array()
            .and_then(|hs| hs.iter().find(|h| h["host"].as_str() == Some(host)))
            .map(|h| &h["impact"]);
        let (want_ms, want_pct) = match per_host {
            Some(imp) if !session => (imp["ms_per_step"].as_f64(), imp["pct_of_step"].as_f64()),
            _ => (ms, pct),
        };
        c.same(&q("ms_per_step"), "parquet", want_ms, row.and_then(|r| r["ms_per_step"].as_f64()));
        c.same(&q("pct_of_step"), "parquet", want_pct, row.and_then(|r| r["pct_of_step"].as_f64()));
    }

    // The health figures a finding restates as evidence (single host: a session's health
    // figures add every host up, a finding's are its host's).
    if single_host {
        for (i, fi) in findings.iter().enumerate() {
            for e in fi["evidence"].as_array().into_iter().flatten() {
                let name = e["name"].as_str().unwrap_or("");
                let key = EVIDENCE_OF_HEALTH.iter().find(|(prefix, _)| name.starts_with(prefix)).map(|(_, k)| *k);
                if let Some(key) = key
                    && e["kind"].as_str() == Some("metric")
                    && e["unit"].as_str().is_some_and(|u| u.starts_with('%'))
                {
                    let q = format!("{key} (finding[{i}] {} evidence {name:?})", fi["id"].as_str().unwrap_or(""));
                    c.printed(
                        &q,
                        "finding_evidence",
                        f(key),
                        1,
                        Some(&format!("{:.1}", e["value"].as_f64().unwrap_or(f64::NAN))),
                    );
                }
            }
        }
    }

    // The text's host table (a session): each host's mean, median, idle and FLOP utilisation.
    if !single_host {
        for h in j["hosts"].as_array().into_iter().flatten() {
            let name = h["host"].as_str().unwrap_or("");
            let row = text.lines().find(|l| l.split_whitespace().next() == Some(name) && l.starts_with("  "));
            let cells: Vec<&str> = row.map(|l| l.split_whitespace().collect()).unwrap_or_default();
            for (k, key, d) in [
                (2, "step_time_ms_mean", 3),
                (3, "step_time_ms_median", 3),
                (6, "idle_pct", 1),
                (7, "flops_utilization_pct", 1),
            ] {
                c.printed(&format!("host {name} {key}"), "text", h[key].as_f64(), d, cells.get(k).copied());
            }
        }
    }

    // The slowest ops: text, HTML, Parquet, ops --json.
    let slow_lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Slowest ops"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let ops_host = j_ops_host(&o, &pace);
    let op_unit_us = o.report.charts.top_ops.iter().map(|op| op.self_time_ms).fold(0.0, f64::max) < 1.0;
    for (i, op) in m["slowest_ops"].as_array().into_iter().flatten().enumerate() {
        let name = op["name"].as_str().unwrap_or("");
        let program = op["program"].as_str().unwrap_or("");
        let ms = op["self_time_ms"].as_f64();
        let q = format!("op {name} ({program}) self_time_ms");
        let tokens: Vec<&str> = slow_lines.get(i).map(|l| l.split_whitespace().collect()).unwrap_or_default();
        let at = tokens.iter().rposition(|t| *t == "ms");
        c.printed(&q, "text", ms, 3, at.and_then(|k| k.checked_sub(1)).map(|k| tokens[k]));
        c.printed(
            &format!("op {name} ({program}) pct"),
            "text",
            op["pct"].as_f64(),
            1,
            at.and_then(|k| tokens.get(k + 1)).map(|t| t.trim_end_matches('%')),
        );
        let cell =
            between(&html, &format!("<code title=\"{}\">{}</code>", html_escape(program), html_escape(name)), "</tr>")
                .and_then(|row| between(row, "data-label=\"Self time (", "</td>"))
                .and_then(|c| c.split("\">").nth(1));
        let (scaled, decimals) = if op_unit_us { (ms.map(|v| v * 1000.0), 1) } else { (ms, 3) };
        c.printed(&q, "html", scaled, decimals, cell);
        // A framework op (a capture without HLO, `kernels` set): the `framework_ops` table's and
        // `ops --json`'s framework device rows, with the kernel count and the share of op time.
        if let Some(kernels) = op["kernels"].as_u64() {
            let printed = tokens.iter().rev().nth(1).map(|t| t.trim_start_matches('('));
            c.printed(&format!("op {name} ({program}) kernels"), "text", Some(kernels as f64), 0, printed);
            let row = rows("framework_ops")
                .into_iter()
                .find(|r| of_host(r, &pace) && r["side"] == "Device" && r["name"].as_str() == Some(name));
            c.same(&q, "parquet", ms, row.as_ref().and_then(|r| r["self_time_ps"].as_f64()).map(|ps| ps / 1e9));
            c.same(
                &format!("op {name} ({program}) kernels"),
                "parquet",
                Some(kernels as f64),
                row.and_then(|r| r["kernels"].as_f64()),
            );
            let fw = ops_host.map(|h| &h["framework_ops"]["device"]);
            let ops_row = fw
                .and_then(|d| d["ops"].as_array())
                .and_then(|ops| ops.iter().find(|r| r["name"].as_str() == Some(name)));
            c.same(&q, "ops", ms, ops_row.and_then(|r| r["self_us"].as_f64()).map(|us| us / 1e3));
            c.same(
                &format!("op {name} ({program}) kernels"),
                "ops",
                Some(kernels as f64),
                ops_row.and_then(|r| r["kernels"].as_array()).map(|k| k.len() as f64),
            );
            let op_time: Option<f64> =
                fw.and_then(|d| d["ops"].as_array()).map(|ops| ops.iter().filter_map(|r| r["self_us"].as_f64()).sum());
            let share = ops_row.and_then(|r| r["self_us"].as_f64()).zip(op_time).map(|(t, all)| 100.0 * t / all);
            c.same(&format!("op {name} ({program}) pct"), "ops", op["pct"].as_f64(), share);
            continue;
        }
        let id = program.rsplit_once('(').and_then(|(_, id)| id.trim_end_matches(')').parse::<u64>().ok());
        let row = rows("op_profile").into_iter().find(|r| {
            of_host(r, &pace)
                && r["name"].as_str() == Some(name)
                && id.is_none_or(|id| r["program_id"].as_u64() == Some(id))
        });
        c.same(&q, "parquet", ms, row.and_then(|r| r["self_time_ps"].as_f64()).map(|ps| ps / 1e9));
        let ops_row = ops_host.and_then(|h| {
            h["ops"]
                .as_array()?
                .iter()
                .find(|r| r["name"].as_str() == Some(name) && r["program"].as_str() == Some(program))
                .cloned()
        });
        c.same(&q, "ops", ms, ops_row.and_then(|r| r["self_time_us"].as_f64()).map(|us| us / 1e3));
    }

    // Categories: the JSON's per step, every other output's totals over the capture.
    let steps = j["comparison"]["step_times_ms"].as_array().map_or(0, Vec::len).max(1) as f64;
    let cats = j["comparison"]["categories"].as_array().cloned().unwrap_or_default();
    let max_total = cats.iter().filter_map(|x| x["ms_per_step"].as_f64()).fold(0.0, f64::max) * steps;
    for cat in &cats {
        let name = cat["category"].as_str().unwrap_or("");
        // IDLE per step is the device's idle within the steps (the health's idle_pct), the
        // other outputs' IDLE the capture's (docs/metrics.md): two quantities, each named; the
        // invariant check holds the per-step one to the health figure (`idle_agrees`).
        if name == xlens::roofline::IDLE {
            continue;
        }
        let total = cat["ms_per_step"].as_f64().map(|v| v * steps);
        let q = format!("category {name} ms (total)");
        let row = rows("categories").into_iter().find(|r| of_host(r, &pace) && r["category"].as_str() == Some(name));
        c.same(&q, "parquet", total, row.and_then(|r| r["self_time_ps"].as_f64()).map(|ps| ps / 1e9));
        c.same(&q, "ops", total, ops_host.and_then(|h| h["categories_us"][name].as_f64()).map(|us| us / 1e3));
        let cell = between(&html, &format!("<span class=\"lab\">{}</span>", html_escape(name)), "</span></span>")
            .and_then(|_| {
                let at = html.find(&format!("<span class=\"lab\">{}</span>", html_escape(name)))?;
                between(&html[at..], "<span class=\"val\">", " ")
            });
        let (scaled, decimals) = if max_total < 1.0 { (total.map(|v| v * 1000.0), 1) } else { (total, 3) };
        c.printed(&q, "html", scaled, decimals, cell);
    }
    // A capture without HLO whose kernels name their TensorFlow op: each op type's category is
    // the framework op table's device time of that type, less the copies and collective kernels
    // its ops launched (they keep their own categories), in `ops --json` and the Parquet table.
    let fw_ops = ops_host.and_then(|h| h["framework_ops"]["device"]["ops"].as_array()).cloned().unwrap_or_default();
    let mut by_type: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for op in &fw_ops {
        let kept: f64 = op["kernels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|k| k["name"].as_str().is_some_and(xlens::roofline::keeps_kernel_category))
            .filter_map(|k| k["total_us"].as_f64())
            .sum();
        let self_us = op["self_us"].as_f64().unwrap_or(0.0);
        *by_type.entry(op["type"].as_str().unwrap_or("").to_owned()).or_default() += self_us - kept;
    }
    for (t, us) in by_type.iter().filter(|(_, us)| **us > 1e-6) {
        let q = format!("category {t} ms (framework op type)");
        let ms = Some(us / 1e3);
        c.same(&q, "ops", ms, ops_host.and_then(|h| h["categories_us"][t.as_str()].as_f64()).map(|us| us / 1e3));
        let row = rows("categories").into_iter().find(|r| of_host(r, &pace) && r["category"].as_str() == Some(t));
        c.same(&q, "parquet", ms, row.and_then(|r| r["self_time_ps"].as_f64()).map(|ps| ps / 1e9));
    }

    // The page's memory and kernel sections: `memory --json`'s and `kernels --json`'s figures,
    // and the main program's peak the health's memory peak.
    page_memory(&mut c, &html, &o.memory, j, single_host);
    page_kernels(&mut c, &html, &o.kernels, j);

    // diff A A, from the saved report.
    let saved = dir.join("report.json");
    std::fs::write(&saved, xlens::report::render::json(&o.report)).unwrap();
    let d = diff_paths(&DiffRequest { base: saved.clone(), new: saved.clone(), ..DiffRequest::default() })
        .unwrap_or_else(|e| panic!("{}: diff: {e}", profile.name));
    diff_against_itself(&mut c, j, &d, &o, &dir.join("diff"));

    // runs: the run's summary and its line.
    let mut runs =
        vec![RunSummary::of("a", "unknown".into(), 0, &o.report), RunSummary::of("b", "unknown".into(), 0, &o.report)];
    compare_runs(&mut runs);
    c.same("step_time_ms_mean", "runs", f("step_time_ms_mean"), runs[0].step_time_ms);
    if f("step_time_ms_mean").is_some() {
        c.same("step_time_change_pct (a run against itself)", "runs", Some(0.0), runs[1].step_time_change_pct);
    }
    let table = runs_text(&runs);
    let line = table.lines().nth(1).unwrap_or("");
    let step_cell = line.split_whitespace().nth(5);
    c.printed(
        "step_time_ms_mean",
        "runs_text",
        f("step_time_ms_mean"),
        3,
        step_cell.map(|s| if s == "-" { "n/a" } else { s }),
    );
    if let Some(first) = findings.first() {
        c.printed(
            "finding[0] pct_of_step",
            "runs",
            first["impact"]["pct_of_step"].as_f64(),
            1,
            runs[0].top_finding.as_deref().and_then(|t| after(t, "(")),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(c.checked >= 60, "{}: only {} comparisons made", profile.name, c.checked);
    println!("{}: {} comparisons, {} mismatches", profile.name, c.checked, c.found.len());
    c.found
}

/// The page's section under `<h2 id="{id}">`, up to the next `<h2`.
fn section<'a>(html: &'a str, id: &str) -> Option<&'a str> {
    let at = html.find(&format!("<h2 id=\"{id}\">"))?;
    let end = html[at + 3..].find("<h2").map_or(html.len(), |e| at + 3 + e);
    Some(&html[at..end])
}

/// One cell of a page table: its column's label (`data-label`, empty for the rank and the key)
/// and its inner HTML.
struct Cell<'a> {
    label: &'a str,
    inner: &'a str,
}

/// The body rows of each card table in `html`, in order: per table, per row, its cells.
fn card_tables(html: &str) -> Vec<Vec<Vec<Cell<'_>>>> {
    html.split("<table class=\"cards\">")
        .skip(1)
        .map(|t| {
            let t = t.split("</table>").next().unwrap_or("");
            // The first piece is empty, the second the head row.
            t.split("<tr")
                .skip(2)
                .map(|row| {
                    row.split("<td")
                        .skip(1)
                        .map(|td| {
                            let open = td.find('>').unwrap_or(0);
                            let label = between(&td[..open], "data-label=\"", "\"").unwrap_or("");
                            let inner = td[open + 1..].rsplit_once("</td>").map_or("", |(a, _)| a);
                            Cell { label, inner }
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// The text of a `<code>` cell.
fn code(cell: &str) -> &str {
    between(cell, "<code", "</code>").and_then(|c| c.split_once('>')).map_or(cell, |(_, t)| t)
}

/// The cell of `row` under the column whose label starts with `label`.
fn col<'a>(row: &'a [Cell<'a>], label: &str) -> Option<&'a Cell<'a>> {
    row.iter().find(|c| c.label.starts_with(label))
}

const MIB: f64 = (1u64 << 20) as f64;

/// The page's memory section against `memory --json` (`doc`): the program count, each listed
/// program's total and its buffer rows (labels and sizes); the main program's peak and share
/// against the health's memory peak (one host: a session's health is its pace host's).
fn page_memory(c: &mut Compare, html: &str, doc: &Value, j: &Value, single_host: bool) {
    let Some(sec) = section(html, "memory") else {
        c.push("memory section", "html_memory", "a section".to_owned(), "(none)".to_owned());
        return;
    };
    let modules = doc["modules"].as_array().cloned().unwrap_or_default();
    let count = doc["summary"]["total_modules"].as_u64();
    c.checked += 1;
    if modules.is_empty() {
        if sec.contains("<table") {
            c.push("memory programs", "html_memory", "no table (no program)".to_owned(), "a table".to_owned());
        }
        return;
    }
    let printed = between(sec, "throughout. ", " program(s)");
    c.printed("memory total_modules", "html_memory", count.map(|n| n as f64), 0, printed);
    let tables = card_tables(sec);
    let programs = tables.first().map_or(&[][..], Vec::as_slice);
    c.same("memory programs listed", "html_memory", Some(modules.len().min(8) as f64), Some(programs.len() as f64));
    let main = j["profile"]["main_program"].as_str();
    let m = &j["metrics"];
    for (i, row) in programs.iter().enumerate() {
        let Some(module) = modules.get(i) else { break };
        let name = module["module_name"].as_str().unwrap_or("");
        let q = format!("memory program[{i}] {name}");
        let shown = row.get(1).map(|cell| code(cell.inner)).unwrap_or("");
        if shown != html_escape(name) {
            c.push(&format!("{q} name"), "html_memory", html_escape(name), shown.to_owned());
        }
        let total = module["total_hbm_bytes"].as_u64().map(|b| b as f64 / MIB);
        c.printed(
            &format!("{q} total_hbm_bytes"),
            "html_memory",
            total,
            3,
            col(row, "Allocated").and_then(|x| after(x.inner, "")),
        );
        if single_host && main == Some(name) {
            let peak = m["memory_peak_bytes"].as_f64().map(|b| b / MIB);
            c.printed("memory_peak_bytes", "html_memory", peak, 3, col(row, "Peak (").and_then(|x| after(x.inner, "")));
            c.printed(
                "memory_peak_pct",
                "html_memory",
                m["memory_peak_pct"].as_f64(),
                1,
                col(row, "Peak %").and_then(|x| after(x.inner, "")),
            );
        }
        // The first three programs' buffers, in their own tables.
        let Some(buffers) = tables.get(1 + i).filter(|_| i < 3) else { continue };
        let rows = module["top_buffers"].as_array().cloned().unwrap_or_default();
        c.same(&format!("{q} buffer rows"), "html_memory", Some(rows.len().min(10) as f64), Some(buffers.len() as f64));
        for (k, (b, cells)) in rows.iter().zip(buffers).enumerate() {
            let label = b["instruction"].as_str().unwrap_or("");
            let shown = cells.get(1).map(|cell| code(cell.inner)).unwrap_or("");
            if shown != html_escape(label) {
                c.push(&format!("{q} buffer[{k}]"), "html_memory", html_escape(label), shown.to_owned());
            }
            let size = b["size_bytes"].as_u64().map(|v| v as f64 / MIB);
            c.printed(
                &format!("{q} buffer[{k}] {label} size_bytes"),
                "html_memory",
                size,
                3,
                col(cells, "Size").and_then(|x| after(x.inner, "")),
            );
        }
    }
}

/// The page's kernel section against `kernels --json` (`doc`): the kernel and device time, and
/// each listed kernel's name, op, launches, times, share, occupancy and registers.
fn page_kernels(c: &mut Compare, html: &str, doc: &Value, j: &Value) {
    let kernels = doc["kernels"].as_array().cloned().unwrap_or_default();
    let sec = section(html, "kernels");
    c.checked += 1;
    let gpu = j["profile"]["device"].as_str() == Some("GPU");
    if sec.is_some() != (gpu || !kernels.is_empty()) {
        c.push("kernels section", "html_kernels", format!("a section: {gpu}"), format!("{}", sec.is_some()));
        return;
    }
    let Some(sec) = sec else { return };
    if kernels.is_empty() {
        if sec.contains("<table") {
            c.push("kernels", "html_kernels", "no table (no kernel)".to_owned(), "a table".to_owned());
        }
        return;
    }
    let note = between(sec, "<p class=\"note\">", "</p>").unwrap_or("");
    let ms = |key: &str| doc[key].as_f64().map(|us| us / 1e3);
    c.printed("kernel_time_us", "html_kernels", ms("kernel_time_us"), 3, after(note, "kernel time "));
    c.printed(
        "total_device_duration_us",
        "html_kernels",
        ms("total_device_duration_us"),
        3,
        after(note, "a GPU busy "),
    );
    c.printed("kernels (count)", "html_kernels", Some(kernels.len() as f64), 0, after(note, "gives them: "));
    let launches: u64 = kernels.iter().filter_map(|k| k["occurrences"].as_u64()).sum();
    c.printed("kernels (launches)", "html_kernels", Some(launches as f64), 0, after(note, "kernel(s), "));
    let rows = card_tables(sec).into_iter().next().unwrap_or_default();
    c.same("kernels listed", "html_kernels", Some(kernels.len().min(15) as f64), Some(rows.len() as f64));
    for (i, (k, row)) in kernels.iter().zip(&rows).enumerate() {
        let name = k["kernel_name"].as_str().unwrap_or("");
        let q = format!("kernel[{i}] {}", k["hlo_op"].as_str().unwrap_or(name));
        let title = row.get(1).and_then(|cell| between(cell.inner, "title=\"", "\"")).unwrap_or("");
        if title != html_escape(name) {
            c.push(&format!("{q} kernel_name"), "html_kernels", html_escape(name), title.to_owned());
        }
        let op = row.get(1).and_then(|cell| between(cell.inner, "op <code>", "</code>")).unwrap_or("");
        let want_op = k["hlo_op"].as_str().map_or_else(String::new, html_escape);
        if op != want_op {
            c.push(&format!("{q} hlo_op"), "html_kernels", want_op, op.to_owned());
        }
        c.printed(
            &format!("{q} occurrences"),
            "html_kernels",
            k["occurrences"].as_f64(),
            0,
            col(row, "Launches").and_then(|x| after(x.inner, "")),
        );
        for (key, label) in [
            ("total_duration_us", "Total ("),
            ("avg_duration_us", "Mean ("),
            ("min_duration_us", "Min ("),
            ("max_duration_us", "Max ("),
        ] {
            let cell = col(row, label);
            // The column's unit: ms (3 decimals) or µs (1 decimal), as its label says.
            let (scale, decimals) = if cell.is_some_and(|x| x.label.contains("(µs)")) { (1.0, 1) } else { (1e-3, 3) };
            c.printed(
                &format!("{q} {key}"),
                "html_kernels",
                k[key].as_f64().map(|v| v * scale),
                decimals,
                cell.and_then(|x| after(x.inner, "")),
            );
        }
        for (key, label, decimals) in [
            ("share_pct", "% of kernel time", 1),
            ("occupancy_pct", "Occupancy", 1),
            ("registers_per_thread", "Registers", 0),
            ("static_shared_bytes", "Shared", 0),
        ] {
            c.printed(
                &format!("{q} {key}"),
                "html_kernels",
                k[key].as_f64(),
                decimals,
                col(row, label).and_then(|x| after(x.inner, "")),
            );
        }
    }
}

/// The `ops --json` entry of `host` (the first host when it is not named).
fn j_ops_host<'a>(o: &'a Outputs, host: &str) -> Option<&'a Value> {
    let hosts = o.ops["hosts"].as_array()?;
    hosts.iter().find(|h| h["host"].as_str() == Some(host)).or(hosts.first())
}

/// `diff A A`: both sides the report's figures, every change zero, in the diff's JSON, text and
/// Parquet tables.
fn diff_against_itself(c: &mut Compare, j: &Value, d: &Diff, o: &Outputs, dir: &std::path::Path) {
    let m = &j["metrics"];
    let mean = m["step_time_ms_mean"].as_f64();
    let st = &d.step_time_ms;
    c.same("step_time_ms_mean (base)", "diff", mean, st.base);
    c.same("step_time_ms_mean (new)", "diff", mean, st.new);
    if mean.is_some() {
        c.same("step time change (ms)", "diff", Some(0.0), st.delta_ms);
        c.same("step time change (%)", "diff", Some(0.0), st.delta_pct);
    }
    for (key, value) in o.report.metrics.figures() {
        if key == "step_count" {
            // The diff counts steps on its step line.
            c.same("step_count (base)", "diff", value, Some(st.base_steps as f64));
            c.same("step_count (new)", "diff", value, Some(st.new_steps as f64));
            continue;
        }
        match d.metrics.get(key) {
            Some(md) => {
                c.same(&format!("{key} (base)"), "diff", value, md.base);
                c.same(&format!("{key} (new)"), "diff", value, md.new);
                if value.is_some() {
                    c.same(&format!("{key} (change)"), "diff", Some(0.0), md.delta);
                }
            }
            None if value.is_some() => c.push(key, "diff", format!("{value:?}"), "(no such metric)".to_owned()),
            None => {}
        }
    }
    for cat in j["comparison"]["categories"].as_array().into_iter().flatten() {
        let name = cat["category"].as_str().unwrap_or("");
        let row = d.categories.iter().find(|x| x.category == name);
        let q = format!("category {name} ms_per_step");
        c.same(&format!("{q} (base)"), "diff", cat["ms_per_step"].as_f64(), row.map(|r| r.base_ms_per_step));
        c.same(&format!("{q} (new)"), "diff", cat["ms_per_step"].as_f64(), row.map(|r| r.new_ms_per_step));
    }
    for op in &d.ops {
        if op.delta_ms_per_step != 0.0 || op.status != "matched" {
            c.push(
                &format!("op {} ({})", op.name, op.program),
                "diff",
                "matched, no change".to_owned(),
                format!("{} {:+}", op.status, op.delta_ms_per_step),
            );
        }
    }
    let f = &d.findings;
    if !f.resolved.is_empty() || !f.new.is_empty() {
        c.push(
            "findings",
            "diff",
            "all persisting".to_owned(),
            format!("{} resolved, {} new", f.resolved.len(), f.new.len()),
        );
    }
    for (i, fi) in j["findings"].as_array().into_iter().flatten().enumerate() {
        let p = f.persisting.get(i);
        let q = format!("finding[{i}] {}", fi["id"].as_str().unwrap_or(""));
        c.same(
            &format!("{q} ms_per_step"),
            "diff",
            fi["impact"]["ms_per_step"].as_f64(),
            p.map(|p| p.impact.ms_per_step),
        );
        c.same(
            &format!("{q} pct_of_step"),
            "diff",
            fi["impact"]["pct_of_step"].as_f64(),
            p.map(|p| p.impact.pct_of_step),
        );
    }
    // The diff's text: the step line and the metrics table.
    let text = xlens::report::diff::text(d);
    let step = line_of(&text, "Step ").unwrap_or("");
    c.printed("step_time_ms_mean (base)", "diff_text", mean, 3, after(step, "Step"));
    c.printed("step_time_ms_mean (new)", "diff_text", mean, 3, after(step, "-> "));
    for (key, label) in [
        ("step_time_ms_mean", "  step_time mean (ms) "),
        ("idle_pct", "  idle (% of step) "),
        ("device_busy_pct", "  device_busy (% of step) "),
    ] {
        let row = line_of(&text, label).unwrap_or("");
        let cells: Vec<&str> = row.split_whitespace().collect();
        let n = cells.len();
        let d = if key.contains("_ms_") { 3 } else { 1 };
        c.printed(&format!("{key} (base)"), "diff_text", m[key].as_f64(), d, n.checked_sub(3).map(|k| cells[k]));
        c.printed(&format!("{key} (new)"), "diff_text", m[key].as_f64(), d, n.checked_sub(2).map(|k| cells[k]));
    }
    // The diff's Parquet tables.
    let dataset = xlens::report::frame::Dataset::new(dir);
    dataset.write_diff(d).unwrap();
    let tables = frames_json(dir);
    let steps = |run: &str| -> Vec<f64> {
        tables["diff_steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["run"].as_str() == Some(run))
            .filter_map(|r| r["step_time_ms"].as_f64())
            .collect()
    };
    let times: Vec<f64> =
        j["comparison"]["step_times_ms"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
    for run in ["base", "new"] {
        let got = steps(run);
        if got != times {
            c.push(
                &format!("step times ({run})"),
                "diff_parquet",
                format!("{} steps", times.len()),
                format!("{} steps", got.len()),
            );
        }
    }
    for r in tables["diff_metrics"].as_array().into_iter().flatten() {
        let key = r["metric"].as_str().unwrap_or("");
        let want = o.report.metrics.figures().into_iter().find(|(k, _)| *k == key).and_then(|(_, v)| v);
        c.same(&format!("{key} (base)"), "diff_parquet", want, r["base"].as_f64());
        c.same(&format!("{key} (new)"), "diff_parquet", want, r["new"].as_f64());
    }
}

/// The profile to compare for `name`: the shared V100 capture where the shared data is.
fn profile(name: &str) -> TestProfile {
    if name == "field/tf_v100_multiworker"
        && let Some(shared) = shared_dir()
    {
        let dir = shared.join("real/tf_v100_multiworker");
        if dir.is_dir() {
            return TestProfile { name: name.to_owned(), dir };
        }
    }
    testdata(name)
}

/// Fails on mismatches not in `known`, and on `known` entries that no longer occur.
fn verdict<K: Ord + std::fmt::Debug>(found: &[(K, String)], known: &[K], all: String) {
    let seen: BTreeSet<&K> = found.iter().map(|(k, _)| k).collect();
    let new: Vec<String> = seen.iter().filter(|k| !known.contains(k)).map(|k| format!("{k:?}")).collect();
    let stale: Vec<String> = known.iter().filter(|k| !seen.contains(k)).map(|k| format!("{k:?}")).collect();
    println!("{all}");
    assert!(
        new.is_empty() && stale.is_empty(),
        "mismatches not known:\n  {}\nknown mismatches that no longer occur (remove them):\n  {}\n\n{all}",
        new.join("\n  "),
        stale.join("\n  ")
    );
}

#[test]
fn each_quantity_reads_the_same_in_every_output() {
    let found: Vec<((String, String, String), String)> = PROFILES
        .par_iter()
        .flat_map(|name| {
            compare(&profile(name))
                .into_iter()
                .map(|x| {
                    let line =
                        format!("{name}: {} in {}: expected {}, got {}", x.quantity, x.output, x.expected, x.got);
                    (((*name).to_owned(), x.quantity, x.output.to_owned()), line)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let all = found.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n");
    let known: Vec<(String, String, String)> =
        KNOWN.iter().map(|(p, q, o)| ((*p).to_owned(), (*q).to_owned(), (*o).to_owned())).collect();
    verdict(&found, &known, all);
}

/// `diff` with repeated runs of the new side: one mean for that side on the step line, in the
/// metrics table (JSON, text, Parquet), and every run's steps in `diff_steps`.
#[test]
fn diff_with_repeats_has_one_mean_per_side() {
    let base = testdata("real/barrier_in_loop_baseline");
    let (a, b) = (testdata("real/barrier_in_loop_baseline_twice_a"), testdata("real/barrier_in_loop_baseline_twice_b"));
    let d = diff_paths(&DiffRequest { base: base.dir, new: a.dir, new_repeats: vec![b.dir], ..DiffRequest::default() })
        .unwrap();
    let mut c = Compare::default();
    let st = &d.step_time_ms;
    let table = d.metrics.get("step_time_ms_mean");
    c.same("new step_time_ms_mean (metrics table)", "diff", st.new, table.and_then(|m| m.new));
    c.same("base step_time_ms_mean (metrics table)", "diff", st.base, table.and_then(|m| m.base));
    c.same("new steps (step series)", "diff", Some(st.new_steps as f64), Some(d.step_series_ms.new.len() as f64));
    let text = xlens::report::diff::text(&d);
    let step = line_of(&text, "Step ").unwrap_or("");
    let row = line_of(&text, "  step_time mean (ms) ").unwrap_or("");
    let cells: Vec<&str> = row.split_whitespace().collect();
    c.printed(
        "new step_time_ms_mean (metrics table)",
        "diff_text",
        st.new,
        3,
        cells.len().checked_sub(2).map(|k| cells[k]),
    );
    c.printed("new step_time_ms_mean (step line)", "diff_text", st.new, 3, after(step, "-> "));
    let dir = scratch("consistency", "repeats");
    xlens::report::frame::Dataset::new(&dir).write_diff(&d).unwrap();
    let tables = frames_json(&dir);
    let new_steps =
        tables["diff_steps"].as_array().into_iter().flatten().filter(|r| r["run"].as_str() == Some("new")).count();
    c.same("new steps (diff_steps)", "diff_parquet", Some(st.new_steps as f64), Some(new_steps as f64));
    let parquet_mean = tables["diff_metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["metric"].as_str() == Some("step_time_ms_mean"))
        .and_then(|r| r["new"].as_f64());
    c.same("new step_time_ms_mean (metrics table)", "diff_parquet", st.new, parquet_mean);
    let _ = std::fs::remove_dir_all(&dir);
    let found: Vec<((String, String), String)> = c
        .found
        .into_iter()
        .map(|x| {
            let line = format!("{} in {}: expected {}, got {}", x.quantity, x.output, x.expected, x.got);
            ((x.quantity, x.output.to_owned()), line)
        })
        .collect();
    let all = found.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n");
    let known: Vec<(String, String)> = KNOWN_REPEATS.iter().map(|(q, o)| ((*q).to_owned(), (*o).to_owned())).collect();
    verdict(&found, &known, all);
}
