//! Physical and internal invariants of every figure xlens writes, checked on its JSON documents.
//!
//! A report can contradict physics (an op above its device's peak FLOP rate, a utilisation of
//! 150 %) or itself (busy and idle that do not add up, a mean step outside `[min, max]`, an
//! OPTIMAL verdict from no detector). The checks here walk the documents a user reads:
//!
//! - [`check_report`]: a scan report (`xlens scan --format json`);
//! - [`check_ops`]: the op profile (`xlens ops --json`);
//! - [`check_kernels`]: the GPU kernel statistics (`xlens kernels --json`);
//! - [`check_memory`]: the programs' device memory (`xlens memory --json`), which the HTML
//!   page's memory section shows;
//! - [`check_frames`]: the tables of the Parquet dataset (`xlens scan --out`), given as one JSON
//!   object of `table name → [row objects]` (a test turns the DataFrames into that shape, so this
//!   crate needs no polars).
//!
//! Each returns every [`Violation`] found, with the JSON path of the figure and the [`Rule`] it
//! breaks; an empty list means the document keeps every invariant. Each check applies the
//! generic rules ([`Rule::PercentRange`], [`Rule::Negative`]) to every number of the document,
//! then the rules specific to that document. The rules are documented on [`Rule`]'s variants.
//!
//! ```
//! use serde_json::json;
//! use xlens_testkit::invariants::{Context, Rule, check_report};
//! let report = json!({
//!     "status": "NEEDS_ATTENTION",
//!     "metrics": {"device_busy_pct": 80.0, "idle_pct": 25.0, "host_wait_pct": 0.0,
//!                 "flops_utilization_pct": 148.0},
//!     "findings": [], "skipped": [], "errors": [], "skipped_hosts": []
//! });
//! let v = check_report(&report, &Context::default());
//! assert!(v.iter().any(|v| v.rule == Rule::PercentRange && v.path == "$.metrics.flops_utilization_pct"));
//! assert!(v.iter().any(|v| v.rule == Rule::HealthSum));
//! ```

use std::fmt;

use serde_json::{Map, Value};

/// How far a share may stray outside `[0, 100]` before it is a violation: float noise only.
pub const PCT_EPSILON: f64 = 1e-6;

/// How far, in percentage points, shares that partition a whole may miss 100 %.
pub const SUM_TOLERANCE_PCT: f64 = 0.5;

/// How far an achieved rate may exceed a peak (relative): 2 %, for clock boost and rounding of
/// the published peaks.
pub const PEAK_TOLERANCE: f64 = 0.02;

/// How far, in percentage points, two figures of the same idle time may disagree.
pub const IDLE_TOLERANCE_PCT: f64 = 1.0;

/// Relative tolerance for two copies of one figure (a step time in two places).
pub const SAME_FIGURE_TOLERANCE: f64 = 1e-6;

/// An invariant a figure must keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A utilisation, efficiency, share or percentage lies in `[0, 100]` (± [`PCT_EPSILON`]).
    /// Applies to every number under a key that ends in `_pct`, is `pct`, or ends in
    /// `utilization`, `efficiency` or `share`, and to every evidence metric whose unit starts
    /// with `%`, except signed changes (keys containing `delta`, `change` or `ci95`), evidence
    /// that compares two quantities ([`RELATIVE_EVIDENCE`]), which may exceed 100 %, and XProf's
    /// own figures kept beside xlens' (keys starting with `xprof_`, evidence naming XProf), which
    /// issue 39 keeps as XProf computes them.
    PercentRange,
    /// Durations, times, counts, bytes and FLOPs are never negative. Applies to every number of
    /// a document except signed changes (keys containing `delta`, `change` or `ci95`).
    Negative,
    /// No op runs above its device's peak FLOP rate: an op's FLOPs over its time (per core, as
    /// the op profile counts) stay within [`PEAK_TOLERANCE`] of [`Peaks::flops_per_s`].
    AbovePeakFlops,
    /// No op moves HBM bytes faster than the device's HBM bandwidth: its HBM bytes over its time
    /// stay within [`PEAK_TOLERANCE`] of [`Peaks::hbm_bytes_per_s`].
    AbovePeakHbm,
    /// The health block partitions the step (docs/metrics.md): `device_busy_pct + idle_pct` is
    /// 100 ± [`SUM_TOLERANCE_PCT`], `host_wait_pct` is a part of idle and `input_bound_pct`
    /// (infeed/outfeed) a part of busy; the exposed communication, a part of the busy time, is
    /// no more than it.
    HealthSum,
    /// Step figures agree: `min ≤ median ≤ max`, `min ≤ mean ≤ max`, a non-negative stddev, a
    /// step count with a mean, and the comparison's step times (what a diff reads) with the same
    /// count and mean as the health block.
    StepOrder,
    /// One idle: the health block's `idle_pct`, the `IDLE` category's share of the step (per
    /// core) and the idle share a finding reports (`device_idle`'s impact, an evidence metric on
    /// device idle in % of the step) agree within [`IDLE_TOLERANCE_PCT`] points (a finding's idle
    /// may be a part of the idle time, never more).
    IdleAgrees,
    /// A verdict means something: OPTIMAL only with no errors, no skipped host files and at
    /// least one detector run.
    Verdict,
    /// No share of a whole exceeds the whole: a kernel's total time is within the device time
    /// of its host (`kernels --json`), an op's self time within its time, a category's time per
    /// step (per core) within the step.
    ShareOfWhole,
    /// The step anatomy partitions each step: its classes (matmul, exposed collective, vector,
    /// data formatting, infeed/outfeed, host, idle) add up to the step time within
    /// [`SUM_TOLERANCE_PCT`] % of it.
    AnatomySum,
    /// Two copies of one figure in one document are equal (within [`SAME_FIGURE_TOLERANCE`]):
    /// a table's value in µs and in ps.
    SameFigure,
}

impl Rule {
    /// The rule's stable id (`percent_range`, `above_peak_flops`, ...).
    pub fn id(self) -> &'static str {
        match self {
            Rule::PercentRange => "percent_range",
            Rule::Negative => "negative",
            Rule::AbovePeakFlops => "above_peak_flops",
            Rule::AbovePeakHbm => "above_peak_hbm",
            Rule::HealthSum => "health_sum",
            Rule::StepOrder => "step_order",
            Rule::IdleAgrees => "idle_agrees",
            Rule::Verdict => "verdict",
            Rule::ShareOfWhole => "share_of_whole",
            Rule::AnatomySum => "anatomy_sum",
            Rule::SameFigure => "same_figure",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A figure that breaks a [`Rule`].
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// Where: a JSON path (`$.metrics.idle_pct`, `$.hosts[0].ops[3](custom-call.57)`); array
    /// elements name their `id`, `name`, `category` or `host` in parentheses.
    pub path: String,
    /// What is wrong, with the values.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.rule, self.path, self.message)
    }
}

/// The peak rates of one device (a TPU TensorCore or a GPU: what an op's time is per), the
/// physical limits [`Rule::AbovePeakFlops`] and [`Rule::AbovePeakHbm`] check against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peaks {
    /// Peak FLOP/s (dense bf16: the matrix units' rate the utilisations divide by).
    pub flops_per_s: f64,
    /// HBM bandwidth in bytes/s.
    pub hbm_bytes_per_s: f64,
}

/// What a check knows beyond the document.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Context {
    /// The device's peaks; without them the peak rules do not run.
    pub peaks: Option<Peaks>,
    /// How many detectors the scan's configuration enables (every detector by default): a
    /// report that lists as many skipped ran none. Used when the report has no `detectors_run`.
    pub detectors: Option<usize>,
}

/// Evidence metrics in % that compare two quantities (a spread over the median, a change, a
/// ratio to a threshold) and may exceed 100 %: matched against the metric's `name` (or `key`),
/// as substrings.
pub const RELATIVE_EVIDENCE: &[&str] = &["spread", "over the median", "change", "growth"];

/// Checks a scan report (`xlens scan --format json`): the generic rules on every number, then
/// [`Rule::HealthSum`], [`Rule::StepOrder`], [`Rule::IdleAgrees`], [`Rule::Verdict`] and
/// [`Rule::ShareOfWhole`] (each category of the comparison within the step).
pub fn check_report(report: &Value, ctx: &Context) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(report, "$", None, &mut out);
    let m = &report["metrics"];
    health_sum(m, "$.metrics", &mut out);
    step_order(m, "$.metrics", &mut out);
    if let Some(hosts) = report["hosts"].as_array() {
        for (i, h) in hosts.iter().enumerate() {
            step_order(h, &element("$.hosts", i, h), &mut out);
        }
    }
    comparison_steps(report, &mut out);
    categories_within_step(report, &mut out);
    idle_agrees(report, &mut out);
    verdict(report, ctx, &mut out);
    out
}

/// Checks an op profile (`xlens ops --json`): the generic rules; per host, each op's FLOPs over
/// its self time against [`Context::peaks`] ([`Rule::AbovePeakFlops`]; the document gives no
/// HBM bytes apart from all memories', so [`Rule::AbovePeakHbm`] is [`check_frames`]'s) and the
/// mean step time within the steps' range ([`Rule::StepOrder`]).
///
/// An op's self time is at most its time, so FLOPs over self time is at least the op's rate:
/// an op with inner ops (a `while`, `call` or `conditional`, whose FLOPs are its body's) is
/// left out, as its self time is not the time its FLOPs took.
pub fn check_ops(ops: &Value, ctx: &Context) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(ops, "$", None, &mut out);
    let Some(hosts) = ops["hosts"].as_array() else { return out };
    for (h, host) in hosts.iter().enumerate() {
        let at = element("$.hosts", h, host);
        if let Some(peaks) = ctx.peaks
            && let Some(list) = host["ops"].as_array()
        {
            for (i, op) in list.iter().enumerate() {
                if is_control_flow(op["category"].as_str().unwrap_or("")) {
                    continue;
                }
                let (Some(flops), Some(us)) = (op["flops"].as_f64(), op["self_time_us"].as_f64()) else { continue };
                if us > 0.0 {
                    above_peak(
                        Rule::AbovePeakFlops,
                        &element(&format!("{at}.ops"), i, op),
                        flops / (us * 1e-6),
                        peaks.flops_per_s,
                        "FLOP/s",
                        &mut out,
                    );
                }
            }
        }
        let steps: Vec<f64> = host["steps"]
            .as_array()
            .map(|s| s.iter().filter_map(|s| s["step_time_ms"].as_f64()).collect())
            .unwrap_or_default();
        if let Some(mean) = host["step_time_ms_mean"].as_f64()
            && !steps.is_empty()
        {
            let (lo, hi) = min_max(&steps);
            if !within(mean, lo, hi) {
                out.push(Violation {
                    rule: Rule::StepOrder,
                    path: format!("{at}.step_time_ms_mean"),
                    message: format!("mean {mean} ms outside the steps' range [{lo}, {hi}] ms"),
                });
            }
        }
    }
    out
}

/// Checks GPU kernel statistics (`xlens kernels --json`, all kernels): the generic rules, each
/// kernel's `min ≤ avg ≤ max` ([`Rule::StepOrder`]) and its total time within the kernels'
/// summed time of the document, `kernel_time_us` ([`Rule::ShareOfWhole`]: a share over 100 % is
/// a kernel summed over more devices than the total counts); `share_pct` is in range through
/// the generic rules.
pub fn check_kernels(kernels: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(kernels, "$", None, &mut out);
    // A kernel's time is summed over every GPU of its host: the whole it is a share of is the
    // kernels' summed time (`kernel_time_us`), not the wall time any GPU was busy
    // (`total_device_duration_us`, XProf's), which eight GPUs exceed together.
    let total = kernels["kernel_time_us"].as_f64();
    let Some(list) = kernels["kernels"].as_array() else { return out };
    for (i, k) in list.iter().enumerate() {
        let at = format!("$.kernels[{i}]({})", clip(k["hlo_op"].as_str().or(k["kernel_name"].as_str()).unwrap_or("")));
        let get = |key: &str| k[key].as_f64();
        if let (Some(min), Some(avg), Some(max)) =
            (get("min_duration_us"), get("avg_duration_us"), get("max_duration_us"))
            && !(within(avg, min, max) && min <= max)
        {
            out.push(Violation {
                rule: Rule::StepOrder,
                path: at.clone(),
                message: format!("min {min} / avg {avg} / max {max} us out of order"),
            });
        }
        if let (Some(t), Some(total)) = (get("total_duration_us"), total)
            && total > 0.0
            && t > total * (1.0 + SAME_FIGURE_TOLERANCE)
        {
            out.push(Violation {
                rule: Rule::ShareOfWhole,
                path: format!("{at}.total_duration_us"),
                message: format!("{t} us is {:.1} % of the kernel time ({total} us)", 100.0 * t / total),
            });
        }
    }
    out
}

/// Checks the programs' device memory (`xlens memory --json`): the generic rules, each buffer
/// row within its program's total ([`Rule::ShareOfWhole`]: no row holds more than every
/// allocation of the program), and the summary's totals those of the modules it names
/// ([`Rule::SameFigure`]).
///
/// ```
/// use serde_json::json;
/// use xlens_testkit::invariants::{Rule, check_memory};
/// let doc = json!({
///     "summary": {"total_modules": 1, "top_modules": [{"module_name": "a(1)", "total_hbm_bytes": 10}]},
///     "modules": [{"module_name": "a(1)", "total_hbm_bytes": 10,
///                  "top_buffers": [{"instruction": "fusion", "size_bytes": 12}]}]
/// });
/// let v = check_memory(&doc);
/// assert!(v.iter().any(|v| v.rule == Rule::ShareOfWhole));
/// ```
pub fn check_memory(memory: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(memory, "$", None, &mut out);
    let Some(modules) = memory["modules"].as_array() else { return out };
    for (i, m) in modules.iter().enumerate() {
        let at = format!("$.modules[{i}]({})", clip(m["module_name"].as_str().unwrap_or("")));
        let total = m["total_hbm_bytes"].as_u64();
        for (k, b) in m["top_buffers"].as_array().map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
            if let (Some(size), Some(total)) = (b["size_bytes"].as_u64(), total)
                && size > total
            {
                out.push(Violation {
                    rule: Rule::ShareOfWhole,
                    path: format!("{at}.top_buffers[{k}]"),
                    message: format!("{size} bytes in one row, more than the program's {total}"),
                });
            }
        }
        let listed = memory["summary"]["top_modules"].get(i);
        if let Some(listed) = listed
            && (listed["module_name"] != m["module_name"] || listed["total_hbm_bytes"] != m["total_hbm_bytes"])
        {
            out.push(Violation {
                rule: Rule::SameFigure,
                path: format!("$.summary.top_modules[{i}]"),
                message: format!(
                    "{} / {} against the module's {}",
                    listed["module_name"], listed["total_hbm_bytes"], m["total_hbm_bytes"]
                ),
            });
        }
    }
    out
}

/// Checks the tables of a scan's Parquet dataset, given as `{table: [row, ...]}` (rows as JSON
/// objects, column name to value): the generic rules on every cell, then per table:
///
/// - `metrics` (long: `metric`, `value`, and `host_name` in the dataset): the health rules of
///   [`check_report`] ([`Rule::HealthSum`], [`Rule::StepOrder`]) on each host's values;
/// - `hosts`: [`Rule::StepOrder`] per row;
/// - `anatomy`: [`Rule::AnatomySum`] per step;
/// - `op_profile`: [`Rule::AbovePeakFlops`] (`flops / time_ps`) and [`Rule::AbovePeakHbm`]
///   (`hbm_bytes / time_ps`) against [`Context::peaks`], and `self_time_ps ≤ time_ps`
///   ([`Rule::ShareOfWhole`]);
/// - `categories`: `self_time_us` is `self_time_ps` in µs ([`Rule::SameFigure`]).
pub fn check_frames(tables: &Value, ctx: &Context) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(tables, "$", None, &mut out);
    let rows = |t: &str| tables[t].as_array().map(Vec::as_slice).unwrap_or(&[]);
    // The long metrics table, one health block per host (`host_name` in the dataset's files).
    let mut by_host: std::collections::BTreeMap<String, Map<String, Value>> = std::collections::BTreeMap::new();
    for r in rows("metrics") {
        let host = r["host_name"].as_str().or(r["host"].as_str()).unwrap_or("").to_owned();
        if let Some(name) = r["metric"].as_str() {
            by_host.entry(host).or_default().insert(name.to_owned(), r["value"].clone());
        }
    }
    for (host, metrics) in by_host {
        let at = if host.is_empty() { "$.metrics".to_owned() } else { format!("$.metrics({host})") };
        let m = Value::Object(metrics);
        health_sum(&m, &at, &mut out);
        step_order(&m, &at, &mut out);
    }
    for (i, r) in rows("hosts").iter().enumerate() {
        step_order(r, &element("$.hosts", i, r), &mut out);
    }
    for (i, r) in rows("anatomy").iter().enumerate() {
        let Some(step) = r["step_time_ps"].as_f64() else { continue };
        let classes = [
            "matmul_ps",
            "collective_exposed_ps",
            "vector_ps",
            "data_formatting_ps",
            "infeed_outfeed_ps",
            "host_ps",
            "idle_ps",
        ];
        let sum: f64 = classes.iter().filter_map(|c| r[*c].as_f64()).sum();
        if step > 0.0 && (sum - step).abs() > step * SUM_TOLERANCE_PCT / 100.0 {
            out.push(Violation {
                rule: Rule::AnatomySum,
                path: element("$.anatomy", i, r),
                message: format!("classes add up to {sum} ps, the step is {step} ps"),
            });
        }
    }
    for (i, r) in rows("op_profile").iter().enumerate() {
        let at = element("$.op_profile", i, r);
        let (Some(time), Some(self_time)) = (r["time_ps"].as_f64(), r["self_time_ps"].as_f64()) else { continue };
        if self_time > time {
            out.push(Violation {
                rule: Rule::ShareOfWhole,
                path: format!("{at}.self_time_ps"),
                message: format!("self time {self_time} ps above the op's time {time} ps"),
            });
        }
        let Some(peaks) = ctx.peaks else { continue };
        // The rates the dataset states (null where it says there is none: an async start, an
        // op whose counts exceed the peaks), else the counts over the time.
        let stated = |rate: &str, amount: &str| match r.get(rate) {
            Some(v) => v.as_f64(),
            None => r[amount].as_f64().filter(|_| time > 0.0).map(|a| a / (time * 1e-12)),
        };
        if let Some(rate) = stated("flop_per_s", "flops") {
            above_peak(Rule::AbovePeakFlops, &at, rate, peaks.flops_per_s, "FLOP/s", &mut out);
        }
        if let Some(rate) = stated("hbm_bytes_per_s", "hbm_bytes") {
            above_peak(Rule::AbovePeakHbm, &at, rate, peaks.hbm_bytes_per_s, "B/s", &mut out);
        }
    }
    for (i, r) in rows("categories").iter().enumerate() {
        if let (Some(ps), Some(us)) = (r["self_time_ps"].as_f64(), r["self_time_us"].as_f64())
            && !same(ps / 1e6, us)
        {
            out.push(Violation {
                rule: Rule::SameFigure,
                path: element("$.categories", i, r),
                message: format!("self_time_us {us} is not self_time_ps {ps} in us"),
            });
        }
    }
    out
}

/// Op categories whose ops hold inner ops (their FLOPs are their body's).
fn is_control_flow(category: &str) -> bool {
    matches!(category, "while" | "call" | "conditional")
}

/// The path of element `i` of the array at `at`, naming it when it has a name.
fn element(at: &str, i: usize, v: &Value) -> String {
    let name = ["id", "name", "metric", "category", "host", "step", "kernel_name"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str));
    match name {
        Some(n) => format!("{at}[{i}]({})", clip(n)),
        None => format!("{at}[{i}]"),
    }
}

/// A name cut to 60 characters for a path (kernel names run to thousands).
fn clip(name: &str) -> String {
    if name.chars().count() <= 60 { name.to_owned() } else { name.chars().take(59).chain(['…']).collect() }
}

/// Whether `key` names a signed change, which may be negative or above 100.
fn is_signed(key: &str) -> bool {
    key.contains("delta") || key.contains("change") || key.contains("ci95")
}

/// Whether `key` (or an evidence metric's `name`) is XProf's figure kept beside xlens' own
/// (`xprof_flops_utilization_pct`): where XProf's figure breaks an invariant xlens reports the
/// correct one and keeps XProf's under a name that says so, so that figure is not checked.
fn is_xprof(key: &str) -> bool {
    key.starts_with("xprof_") || key.contains("XProf")
}

/// Whether `key` names a share in percent.
fn is_percent_key(key: &str) -> bool {
    key.ends_with("_pct")
        || key == "pct"
        || key.ends_with("utilization")
        || key.ends_with("efficiency")
        || key.ends_with("share")
}

/// The generic rules over every number below `v` (`key` is the key `v` sits under).
fn walk(v: &Value, path: &str, key: Option<&str>, out: &mut Vec<Violation>) {
    match v {
        Value::Object(map) => {
            if map.get("kind").and_then(Value::as_str) == Some("metric") {
                evidence_metric(map, path, out);
            }
            for (k, x) in map {
                if is_signed(k) {
                    continue;
                }
                walk(x, &format!("{path}.{k}"), Some(k), out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                walk(x, &element(path, i, x), key, out);
            }
        }
        Value::Number(n) => {
            let Some(x) = n.as_f64() else { return };
            let key = key.unwrap_or("");
            if x < 0.0 {
                out.push(Violation {
                    rule: Rule::Negative,
                    path: path.to_owned(),
                    message: format!("{x} is negative"),
                });
            } else if is_percent_key(key) && !is_xprof(key) && x > 100.0 + PCT_EPSILON {
                out.push(Violation {
                    rule: Rule::PercentRange,
                    path: path.to_owned(),
                    message: format!("{x} % is above 100 %"),
                });
            }
        }
        _ => {}
    }
}

/// [`Rule::PercentRange`] on an evidence metric in % (`{"kind":"metric","name","value","unit"}`).
fn evidence_metric(map: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let unit = map.get("unit").and_then(Value::as_str).unwrap_or("");
    let name = map.get("name").and_then(Value::as_str).unwrap_or("");
    let key = map.get("key").and_then(Value::as_str).unwrap_or("");
    let Some(x) = map.get("value").and_then(Value::as_f64) else { return };
    let relative =
        RELATIVE_EVIDENCE.iter().any(|r| name.contains(r) || key.contains(r)) || is_xprof(name) || is_xprof(key);
    if unit.starts_with('%') && !relative && x > 100.0 + PCT_EPSILON {
        out.push(Violation {
            rule: Rule::PercentRange,
            path: format!("{path}({})", clip(name)),
            message: format!("{x} {unit} is above 100 %"),
        });
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// `lo ≤ x ≤ hi`, with a relative tolerance for float noise.
fn within(x: f64, lo: f64, hi: f64) -> bool {
    let eps = SAME_FIGURE_TOLERANCE * x.abs().max(lo.abs()).max(hi.abs()).max(1e-12);
    x >= lo - eps && x <= hi + eps
}

/// Two copies of one figure.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= SAME_FIGURE_TOLERANCE * a.abs().max(b.abs()).max(1e-9)
}

fn above_peak(rule: Rule, at: &str, rate: f64, peak: f64, unit: &str, out: &mut Vec<Violation>) {
    if peak > 0.0 && rate > peak * (1.0 + PEAK_TOLERANCE) {
        out.push(Violation {
            rule,
            path: at.to_owned(),
            message: format!("{rate:.4e} {unit} is {:.1} % of the peak {peak:.4e} {unit}", 100.0 * rate / peak),
        });
    }
}

/// [`Rule::HealthSum`] on a health block (`metrics` of a report, or the metrics table).
fn health_sum(m: &Value, at: &str, out: &mut Vec<Violation>) {
    let get = |k: &str| m.get(k).and_then(Value::as_f64);
    if let (Some(busy), Some(idle)) = (get("device_busy_pct"), get("idle_pct")) {
        let sum = busy + idle;
        if (sum - 100.0).abs() > SUM_TOLERANCE_PCT {
            out.push(Violation {
                rule: Rule::HealthSum,
                path: at.to_owned(),
                message: format!("device busy {busy:.2} % + idle {idle:.2} % = {sum:.2} %, not 100 %"),
            });
        }
        // The host wait is a part of idle, infeed/outfeed a part of busy (docs/metrics.md).
        for (part, whole, name, of) in
            [("host_wait_pct", idle, "host wait", "idle"), ("input_bound_pct", busy, "infeed/outfeed", "busy")]
        {
            if let Some(p) = get(part)
                && p > whole + SUM_TOLERANCE_PCT
            {
                out.push(Violation {
                    rule: Rule::HealthSum,
                    path: format!("{at}.{part}"),
                    message: format!("{name} {p:.2} % is more than the {of} it is part of ({whole:.2} %)"),
                });
            }
        }
    }
    if let (Some(busy), Some(exposed)) = (get("device_busy_pct"), get("exposed_communication_pct"))
        && exposed > busy + SUM_TOLERANCE_PCT
    {
        out.push(Violation {
            rule: Rule::HealthSum,
            path: format!("{at}.exposed_communication_pct"),
            message: format!("exposed communication {exposed:.2} % above the device busy {busy:.2} %"),
        });
    }
}

/// [`Rule::StepOrder`] on an object with `step_time_ms_{min,median,mean,max,stddev}` and
/// `step_count`.
fn step_order(m: &Value, at: &str, out: &mut Vec<Violation>) {
    let get = |k: &str| m.get(k).and_then(Value::as_f64);
    let mut bad = |what: String| out.push(Violation { rule: Rule::StepOrder, path: at.to_owned(), message: what });
    let (min, median, mean, max) =
        (get("step_time_ms_min"), get("step_time_ms_median"), get("step_time_ms_mean"), get("step_time_ms_max"));
    if let (Some(min), Some(max)) = (min, max) {
        if min > max {
            bad(format!("min {min} ms above max {max} ms"));
        }
        if let Some(median) = median
            && !within(median, min, max)
        {
            bad(format!("median {median} ms outside [min {min}, max {max}] ms"));
        }
        if let Some(mean) = mean
            && !within(mean, min, max)
        {
            bad(format!("mean {mean} ms outside [min {min}, max {max}] ms"));
        }
    }
    if let Some(sd) = get("step_time_ms_stddev")
        && sd < 0.0
    {
        bad(format!("stddev {sd} ms is negative"));
    }
    if let Some(count) = get("step_count") {
        if count > 0.0 && mean.is_none() {
            bad(format!("{count} steps without a mean step time"));
        }
        if count == 0.0 && mean.is_some() {
            bad("a mean step time without steps".to_owned());
        }
    }
}

/// [`Rule::StepOrder`]: the comparison's step times (what a diff and `runs` read) are the health
/// block's steps.
fn comparison_steps(report: &Value, out: &mut Vec<Violation>) {
    let Some(times) = report["comparison"]["step_times_ms"].as_array() else { return };
    let times: Vec<f64> = times.iter().filter_map(Value::as_f64).collect();
    let m = &report["metrics"];
    let count = m["step_count"].as_f64().unwrap_or(0.0);
    if times.is_empty() {
        return;
    }
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    if times.len() as f64 != count {
        out.push(Violation {
            rule: Rule::StepOrder,
            path: "$.comparison.step_times_ms".to_owned(),
            message: format!("{} step times, the health block counts {count} steps", times.len()),
        });
    }
    if let Some(m_mean) = m["step_time_ms_mean"].as_f64()
        && (mean - m_mean).abs() > 1e-6 * m_mean.abs().max(1e-9) + 1e-9
    {
        out.push(Violation {
            rule: Rule::StepOrder,
            path: "$.comparison.step_times_ms".to_owned(),
            message: format!("their mean is {mean} ms, the health block's {m_mean} ms"),
        });
    }
}

/// What the health shares and the comparison's time per step are of: the loop's iteration where
/// the report gives one (PyTorch/XLA), else the mean step.
fn per_step_ms(m: &Value) -> Option<f64> {
    m["loop_iteration_ms_mean"].as_f64().or_else(|| m["step_time_ms_mean"].as_f64())
}

/// [`Rule::ShareOfWhole`]: no category of the comparison (ms per step, every core's time added
/// up) takes more than the step on each core (a single-host report; a session's categories are
/// one host's).
fn categories_within_step(report: &Value, out: &mut Vec<Violation>) {
    let m = &report["metrics"];
    let single_host = report["hosts"].as_array().is_none_or(|h| h.len() <= 1);
    let (Some(step), Some(cats)) = (per_step_ms(m), report["comparison"]["categories"].as_array()) else {
        return;
    };
    if !single_host || step <= 0.0 {
        return;
    }
    let cores = report["profile"]["cores"].as_f64().unwrap_or(1.0).max(1.0);
    for (i, c) in cats.iter().enumerate() {
        let Some(ms) = c["ms_per_step"].as_f64() else { continue };
        if ms / cores > step * (1.0 + SUM_TOLERANCE_PCT / 100.0) {
            out.push(Violation {
                rule: Rule::ShareOfWhole,
                path: element("$.comparison.categories", i, c),
                message: format!(
                    "{ms:.4} ms per step over {cores} core(s) is {:.1} % of the {step:.4} ms step",
                    100.0 * ms / cores / step
                ),
            });
        }
    }
}

/// [`Rule::IdleAgrees`] on a single-host report.
fn idle_agrees(report: &Value, out: &mut Vec<Violation>) {
    let m = &report["metrics"];
    let Some(idle) = m["idle_pct"].as_f64() else { return };
    let single_host = report["hosts"].as_array().is_none_or(|h| h.len() <= 1);
    let mut bad = |path: String, what: String| out.push(Violation { rule: Rule::IdleAgrees, path, message: what });
    if single_host
        && let (Some(step), Some(cats)) = (per_step_ms(m), report["comparison"]["categories"].as_array())
        && step > 0.0
    {
        // The devices the comparison sums over (those that ran ops), else the profile's.
        let cores = report["comparison"]["cores"]
            .as_f64()
            .filter(|c| *c > 0.0)
            .or(report["profile"]["cores"].as_f64())
            .unwrap_or(1.0)
            .max(1.0);
        for (i, c) in cats.iter().enumerate() {
            if c["category"].as_str() != Some("IDLE") {
                continue;
            }
            let Some(ms) = c["ms_per_step"].as_f64() else { continue };
            let share = 100.0 * ms / cores / step;
            if (share - idle).abs() > IDLE_TOLERANCE_PCT {
                bad(
                    element("$.comparison.categories", i, c),
                    format!(
                        "IDLE category {ms:.4} ms per step over {cores} core(s) is {share:.1} % of the {step:.4} ms step, the health idle {idle:.1} %"
                    ),
                );
            }
        }
    }
    let Some(findings) = report["findings"].as_array() else { return };
    for (i, f) in findings.iter().enumerate() {
        let at = element("$.findings", i, f);
        // device_idle measures the idle with no host work either: the health's idle less its
        // host wait (docs/metrics.md).
        let no_host = idle - m["host_wait_pct"].as_f64().unwrap_or(0.0);
        if f["id"].as_str() == Some("device_idle")
            && let Some(pct) = f["impact"]["pct_of_step"].as_f64()
            && (pct - no_host).abs() > IDLE_TOLERANCE_PCT
        {
            bad(
                format!("{at}.impact.pct_of_step"),
                format!("device_idle says {pct:.1} % idle with no host work, the health {no_host:.1} %"),
            );
        }
        let Some(evidence) = f["evidence"].as_array() else { continue };
        for (j, e) in evidence.iter().enumerate() {
            let name = e["name"].as_str().unwrap_or("");
            let unit = e["unit"].as_str().unwrap_or("");
            if e["kind"].as_str() != Some("metric") || !unit.starts_with('%') || !name.contains("idle") {
                continue;
            }
            let whole_capture = name.contains("capture") || name.contains("duty");
            if let Some(v) = e["value"].as_f64()
                && !whole_capture
                && v > idle + IDLE_TOLERANCE_PCT
            {
                bad(
                    format!("{at}.evidence[{j}]({})", clip(name)),
                    format!("{v:.1} {unit} of device idle, more than the health idle {idle:.1} %"),
                );
            }
        }
    }
}

/// [`Rule::Verdict`].
fn verdict(report: &Value, ctx: &Context, out: &mut Vec<Violation>) {
    if report["status"].as_str() != Some("OPTIMAL") {
        return;
    }
    let count = |k: &str| report[k].as_array().map_or(0, Vec::len);
    let mut bad =
        |what: String| out.push(Violation { rule: Rule::Verdict, path: "$.status".to_owned(), message: what });
    if count("errors") > 0 || count("skipped_hosts") > 0 {
        bad(format!("OPTIMAL with {} error(s) and {} skipped host file(s)", count("errors"), count("skipped_hosts")));
    }
    let run = match &report["detectors_run"] {
        Value::Array(a) => Some(a.len()),
        Value::Number(n) => n.as_u64().map(|n| n as usize),
        _ => ctx.detectors.map(|all| all.saturating_sub(count("skipped"))),
    };
    if run == Some(0) {
        bad("OPTIMAL with no detector run".to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: &[Violation]) -> Vec<Rule> {
        let mut r: Vec<Rule> = v.iter().map(|v| v.rule).collect();
        r.sort();
        r.dedup();
        r
    }

    #[test]
    fn a_consistent_report_passes() {
        let report = json!({
            "status": "NEEDS_ATTENTION",
            "profile": {"cores": 1},
            "metrics": {"step_count": 2, "step_time_ms_mean": 1.5, "step_time_ms_median": 1.5,
                        "step_time_ms_min": 1.0, "step_time_ms_max": 2.0, "step_time_ms_stddev": 0.5,
                        "device_busy_pct": 90.0, "idle_pct": 10.0, "input_bound_pct": 0.0,
                        "exposed_communication_pct": 5.0, "flops_utilization_pct": 40.0},
            "hosts": [{"host": "h", "step_count": 2, "step_time_ms_mean": 1.5, "step_time_ms_min": 1.0,
                       "step_time_ms_max": 2.0, "idle_pct": 10.0}],
            "findings": [{"id": "device_idle", "impact": {"ms_per_step": 0.15, "pct_of_step": 10.0},
                          "evidence": [{"kind": "metric", "name": "idle share of the step", "value": 10.0, "unit": "%"},
                                       {"kind": "metric", "name": "compute spread over the median core", "value": 130.0, "unit": "%"}]}],
            "skipped": [], "errors": [], "skipped_hosts": [],
            "comparison": {"step_times_ms": [1.0, 2.0], "categories": [{"category": "IDLE", "ms_per_step": 0.15}]}
        });
        assert_eq!(check_report(&report, &Context { detectors: Some(3), ..Context::default() }), []);
    }

    #[test]
    fn each_rule_catches_its_break() {
        let report = json!({
            "status": "OPTIMAL",
            "profile": {"cores": 1},
            "metrics": {"step_count": 2, "step_time_ms_mean": 2.5, "step_time_ms_median": 1.5,
                        "step_time_ms_min": 1.0, "step_time_ms_max": 2.0,
                        "device_busy_pct": 99.9, "idle_pct": 67.8, "host_wait_pct": 67.2,
                        "roofline_efficiency_pct": 154.0},
            "findings": [{"id": "barrier_in_loop", "impact": {"ms_per_step": 0.3, "pct_of_step": 46.5},
                          "evidence": [{"kind": "metric", "name": "device idle in serialised gaps", "value": 46.5, "unit": "% of step"}]}],
            "skipped": [{"id": "a"}, {"id": "b"}], "errors": [], "skipped_hosts": [],
            "comparison": {"step_times_ms": [1.0, 2.0, 3.0], "categories": [{"category": "IDLE", "ms_per_step": 0.3},
                                                               {"category": "loop fusion", "ms_per_step": 3.0}]}
        });
        let v = check_report(&report, &Context { detectors: Some(2), ..Context::default() });
        assert_eq!(
            rules(&v),
            [Rule::PercentRange, Rule::HealthSum, Rule::StepOrder, Rule::IdleAgrees, Rule::Verdict, Rule::ShareOfWhole]
        );
        let ops = json!({"hosts": [{"host": "vm", "steps": [{"name": "0", "step_time_ms": 1.0}], "step_time_ms_mean": 1.0,
            "ops": [{"name": "custom-call.57", "category": "custom-call gemm", "self_time_us": 1.0, "flops": 1.587e9},
                    {"name": "while.1", "category": "while", "self_time_us": 1.0, "flops": 1e12}]}]});
        let peaks = Peaks { flops_per_s: 989e12, hbm_bytes_per_s: 4.8e12 };
        let v = check_ops(&ops, &Context { peaks: Some(peaks), ..Context::default() });
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].rule, v[0].path.as_str()), (Rule::AbovePeakFlops, "$.hosts[0](vm).ops[0](custom-call.57)"));
        let kernels = json!({"total_device_duration_us": 100.0, "kernel_time_us": 100.0, "kernels": [
            {"kernel_name": "k", "total_duration_us": 116.7, "avg_duration_us": 3.0, "min_duration_us": 2.0, "max_duration_us": 4.0}]});
        assert_eq!(rules(&check_kernels(&kernels)), [Rule::ShareOfWhole]);
        let frames = json!({
            "anatomy": [{"step": "0", "step_time_ps": 100, "matmul_ps": 50, "idle_ps": 40}],
            "op_profile": [{"name": "x", "time_ps": 1_000_000, "self_time_ps": 1_000_000, "flops": 2e9, "hbm_bytes": 1e7,
                            "roofline_efficiency_pct": 148.0}],
            "categories": [{"category": "IDLE", "self_time_ps": 5_000_000, "self_time_us": 6.0}],
            "steps": [{"step": "0", "step_time_ms": -1.0}]
        });
        let v = check_frames(&frames, &Context { peaks: Some(peaks), ..Context::default() });
        assert_eq!(
            rules(&v),
            [
                Rule::PercentRange,
                Rule::Negative,
                Rule::AbovePeakFlops,
                Rule::AbovePeakHbm,
                Rule::AnatomySum,
                Rule::SameFigure
            ]
        );
    }

    #[test]
    fn xprof_figures_kept_beside_are_not_checked() {
        let report = json!({"metrics": {"flops_utilization_pct": 44.7, "xprof_flops_utilization_pct": 148.0}});
        assert_eq!(check_report(&report, &Context::default()), []);
    }

    #[test]
    fn signed_changes_may_be_negative_or_large() {
        let diff = json!({"metrics": {"idle_pct": {"base": 10.0, "new": 5.0, "delta": -5.0}},
                          "step_time_ms": {"delta_pct": -250.0, "ci95_pct": [-300.0, 200.0]}});
        assert_eq!(check_report(&diff, &Context::default()), []);
    }
}
