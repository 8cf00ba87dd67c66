//! The tools of `xlens mcp`: one entry of [`TOOLS`] each, and nothing else to change to add one.
//!
//! A tool is a name, a paragraph for the model, its arguments (a struct that serde reads and
//! schemars describes: the JSON Schema the client sees is derived from the struct the call
//! reads) and a call: a thin call of the same library entry point as the CLI subcommand of the
//! same name, so that its result is that command's `--json` document for the same arguments.
//! To add a tool (`events`, `device`, ...): write its arguments struct and its call below, and
//! add its [`Tool`] to [`TOOLS`]. Paths go through [`State::profile`] (the `--root` guard and the
//! cache); `offset` and `limit` are added to every tool's schema and handled by [`call`], which
//! pages every result ([`super::page`]).

#[cfg(test)]
use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::cache::{Cache, Key, Profile};
use super::guard::{OutDir, Roots};
use super::one_line;
use super::page::{PageRequest, page};
use crate::events::{self as ev, EventsRequest, NamePattern};
use crate::faults::{Report, ScanConfig, StepRange};
use crate::report::diff::{DiffConfig, Repeats, diff_with_repeats};
use crate::roofline::events::GroupBy;
use crate::roofline::{ChipSpec, chips::CATALOGUE};
use crate::{ScanRequest, documents};

/// A tool: what the client lists and what runs when it is called.
#[derive(Debug)]
pub(crate) struct Tool {
    /// Its name.
    pub(crate) name: &'static str,
    /// One paragraph for the model: what it answers, when to call it, what comes back.
    pub(crate) description: &'static str,
    /// The JSON Schema of its arguments (without `offset` and `limit`, which [`schema`] adds).
    pub(crate) arguments: fn() -> schemars::Schema,
    /// The call: its arguments to its document.
    pub(crate) run: Call,
}

/// A tool's call: the server's state and the call's arguments to the tool's document, or why not.
pub(crate) type Call = fn(&State, Map<String, Value>) -> Result<Arc<Value>, String>;

/// Every tool, in the order the client lists them.
pub(crate) static TOOLS: &[Tool] = &[
    Tool {
        name: "scan",
        description: "Scan an XProf profile (a *.xplane.pb file, a run directory of host files, or a logdir, whose newest run is taken) for performance faults, as `xlens scan --json`. Returns the report: status (OK, NEEDS_ATTENTION, INCOMPLETE), session metrics (step time, utilisation, duty cycle), per-host step table, and findings sorted by severity (P0 worst), each with its id, what is happening, the expected gain, evidence and a fix. Call it first on a profile; then call `findings` with a finding's id for its full evidence, `ops` for the op profile, `hlo` for the programs, `kernels` on GPU profiles. The profile is decoded once and kept, so follow-up calls on it are fast. With `html` (a file name, when the server was started with `--out DIR`) it also writes the report page a person can open into that directory, and adds its path as `html_page`.",
        arguments: arguments::<ScanArgs>,
        run: |s, a| scan(s, parse(a)?),
    },
    Tool {
        name: "findings",
        description: "The full evidence of one finding of a profile's scan, by its id (the `id` field of a finding in `scan`'s result, e.g. `exposed_collective`, `recompilation`, `host_bound_step`): every finding of that detector with its text, impact, per-host severities, evidence (metrics, ops, instructions, time ranges) and fix, exactly as in `xlens scan --json`'s `findings`. Use it after `scan` to dig into one problem without reading the whole report; an unknown id is an error that lists the ids the scan found.",
        arguments: arguments::<FindingsArgs>,
        run: |s, a| findings(s, parse(a)?).map(Arc::new),
    },
    Tool {
        name: "ops",
        description: "The op profile of every host of a profile, as `xlens ops --json`: per step its time and breakdown, per HLO op its occurrences, total and self time, FLOPs, bytes, arithmetic intensity and roofline bound (compute or memory), sorted by self time, and the step anatomy (matmul, collectives, vector, data formatting, idle). Call it to find which ops dominate the step and whether they are compute- or memory-bound; large profiles come back paged (see `page` in the result).",
        arguments: arguments::<PathArgs>,
        run: |s, a| ops(s, parse(a)?),
    },
    Tool {
        name: "hlo",
        description: "The compiled HLO programs of a profile (or of one *.hlo_proto.pb file), as `xlens hlo --json`: per module its instruction count, opcode histogram, FLOPs and bytes, memory, input/output aliasing, collectives with their replica groups, and which hosts ran it. Call it to see what a program computes and communicates, e.g. after a finding names a module or a collective.",
        arguments: arguments::<PathArgs>,
        run: |s, a| hlo(s, parse(a)?),
    },
    Tool {
        name: "inventory",
        description: "What a profile holds, as `xlens inventory --json`: per host its planes (devices, host threads), their lines and event counts. Call it when a result looks empty or odd, to check whether the capture has device traces, step markers or HLO metadata at all.",
        arguments: arguments::<PathArgs>,
        run: |s, a| inventory(s, parse(a)?),
    },
    Tool {
        name: "kernels",
        description: "GPU kernel statistics of a profile, as `xlens kernels --json`: per host and kernel its launches, total, mean, min and max duration, grid and block shape, registers, shared memory, occupancy and whether it uses tensor cores, sorted by total time. Call it on GPU profiles to see which kernels take the time and whether matmuls reach the tensor cores; `top` keeps the first N kernels per host.",
        arguments: arguments::<KernelsArgs>,
        run: |s, a| kernels(s, parse(a)?),
    },
    Tool {
        name: "events",
        description: "Timeline events of a profile chosen by name, plane and line patterns (regular expressions searched in the name, as XProf's) and a time window in ms from the host's first event, as `xlens events --json`: by default their duration statistics grouped by event name (or by line with `group_by: \"line\"`): count, total, mean, min, max, p50, p90, p99 and standard deviation, longest total first; `list: true` lists the events themselves (plane, line, name, start, duration); `lines: true` lists every plane's lines with their event counts instead. Call it to measure something the op profile does not name: host-side stalls, Python or runtime events, a kernel or marker by name, or what happens in one window of the trace. Equals XProf's `aggregate_xplane_events`, `list_xplane_events` and `list_xplane_lines`.",
        arguments: arguments::<EventsArgs>,
        run: |s, a| events(s, parse(a)?),
    },
    Tool {
        name: "device",
        description: "The hosts and devices of a profile and its key figures, as `xlens device --json`: the device type, chip and core count, per host its chip's peaks (FLOP/s, HBM bandwidth and capacity, ridge point), and the session's metrics as the scan computes them (step time, FLOP and HBM-bandwidth utilisation, duty cycle, memory peak) with XProf's own roofline efficiency beside them. Call it first on an unknown profile to learn what hardware ran and how busy it was, or to read the peaks an op's intensity should be judged against. Equals XProf's `get_hosts`, `get_device_information` and `get_kpi_metrics`.",
        arguments: arguments::<PathArgs>,
        run: |s, a| device(s, parse(a)?),
    },
    Tool {
        name: "memory",
        description: "Device memory of a profile, as `xlens memory --json`: per compiled HLO program the total of its buffer assignment and the buffers live at its peak, grouped as XProf groups them (parameters, outputs, temporaries; `top` keeps the largest N programs); and under `memory_profile`, per host the runtime memory profile from the allocator events (GPU and TPU captures): per allocator (memory id) its peak in use, stack and heap at the peak, free memory, capacity, utilisation and the fragmentation the allocator reported there, and which allocator has the largest peak. A host without allocator events has `peak_memory_id: null` and a `reason`, never zeros. Call it for out-of-memory questions, to see how close a program runs to the device's capacity, or which buffers to shrink. Equals XProf's `get_peak_allocations` and `get_memory_profile`.",
        arguments: arguments::<MemoryArgs>,
        run: |s, a| memory(s, parse(a)?),
    },
    Tool {
        name: "roofline",
        description: "The chip catalogue's rooflines, as `xlens roofline --json`: per chip its peak FLOP/s per data type, HBM bandwidth and capacity, and ridge point (the arithmetic intensity in FLOP/byte above which an op is compute-bound). Call it to judge an op's intensity from `ops` against a chip, or to compare chips; `chips` picks some by name (all by default).",
        arguments: arguments::<RooflineArgs>,
        run: |_, a| roofline(parse(a)?).map(Arc::new),
    },
    Tool {
        name: "diff",
        description: "Compare two runs (profiles, or saved `xlens scan --json` reports), as `xlens diff --json`: a verdict on the step time (IMPROVED, REGRESSED, NEUTRAL, INCOMPARABLE) from a bootstrap interval that respects step-to-step noise, the categories and ops whose time moved (matched across recompiled programs), and findings resolved, new and persisting. Call it to check whether a change helped; `steps` compares only some steps, `min_change` is the smallest change in % that counts.",
        arguments: arguments::<DiffArgs>,
        run: |s, a| diff(s, parse(a)?).map(Arc::new),
    },
    Tool {
        name: "graph",
        description: "The HLO graph around one instruction of a profile's programs, as `xlens graph --op NAME --json` (XProf's get_hlo_neighborhood): every instruction within `hops` hops (default 2) through operands and users, nearest first, each with its distance, relation to the centre (producer, consumer, sibling), opcode, shape, layout, fusion kind, called computations, sharding, JAX op name, source file:line, operands, users, HLO text line, and measured occurrences, time and self time from the op profile. With `text: true`, the HLO text of the instruction or computation `op` names, or of the whole program `program` names when `op` is omitted (XProf's get_hlo_text); with `summary: true`, the program's counts of computations, instructions, edges, fusions, custom calls and fusion blockers and its commonest kernel opcodes (XProf's query_hlo_graph summary). Call it after `ops` or a finding names a slow op, to see what feeds it and what reads it (a copy, bitcast or transpose next to it that blocks fusion, the source line to change). A name found in several programs needs `program`.",
        arguments: arguments::<GraphArgs>,
        run: |s, a| graph(s, parse(a)?),
    },
];

/// The server's state: where it may read and write, and what it keeps.
#[derive(Debug)]
pub(crate) struct State {
    roots: Roots,
    out: OutDir,
    cache: Cache,
}

impl State {
    /// A server that reads under `roots`, writes only into `out` and keeps at most
    /// `cache_bytes` of profiles.
    pub(crate) fn new(roots: Roots, out: OutDir, cache_bytes: u64) -> State {
        State { roots, out, cache: Cache::new(cache_bytes) }
    }

    /// The profile at `path` (its run `run`, its hosts `hosts` when given), refused unless it and
    /// each of its files lie under the roots; kept or new.
    fn profile(&self, path: &str, run: Option<&str>, hosts: &[String]) -> Result<Arc<Profile>, String> {
        let canonical = self.roots.resolve(path)?;
        if canonical.is_file() && canonical.to_string_lossy().ends_with(".hlo_proto.pb") {
            let key = Key::new(canonical.clone(), std::slice::from_ref(&canonical))?;
            return Ok(self.cache.get(key, None));
        }
        let request = ScanRequest {
            path: canonical.clone(),
            run: run.map(str::to_owned),
            hosts: hosts.to_vec(),
            ..ScanRequest::default()
        };
        let found = request.discover().map_err(|e| one_line(&e))?;
        let mut files = Vec::with_capacity(found.hosts.len());
        for h in &found.hosts {
            let file = h.location.local_path().ok_or_else(|| format!("{} is not a local file", h.location))?;
            self.roots.check_file(file)?;
            files.push(file.to_path_buf());
        }
        Ok(self.cache.get(Key::new(canonical, &files)?, Some(found)))
    }

    /// The scan report of `profile` under `config` (kept per `key`).
    fn report(&self, profile: &Profile, key: &str, config: ScanConfig) -> Result<Arc<Report>, String> {
        profile.report(key, || {
            let run = profile.run.as_ref().ok_or_else(|| format!("{} is not a profile", profile.path.display()))?;
            let request = ScanRequest { path: profile.path.clone(), config, ..ScanRequest::default() };
            let scanned = crate::scan_run(run, &request, &Silent).map_err(|e| one_line(&e))?;
            Ok(scanned.report)
        })
    }
}

/// Lists the tools: name, description and the schema of the arguments.
pub(crate) fn list() -> impl Iterator<Item = (&'static str, &'static str, Map<String, Value>)> {
    TOOLS.iter().map(|t| (t.name, t.description, schema(t)))
}

/// The JSON Schema of `tool`'s arguments, with `offset` and `limit`.
pub(crate) fn schema(tool: &Tool) -> Map<String, Value> {
    let mut schema = match (tool.arguments)().to_value() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let properties = schema.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(properties) = properties {
        properties.insert(
            "offset".to_owned(),
            serde_json::json!({ "type": "integer", "minimum": 0, "description": "Rows to skip in every list that is paged (a result over 64 KiB is paged: ask again with the `page.next_offset` it gives)." }),
        );
        properties.insert(
            "limit".to_owned(),
            serde_json::json!({ "type": "integer", "minimum": 1, "description": "Rows per page in every list longer than this; by default as many as fit in 64 KiB." }),
        );
    }
    schema.insert("type".to_owned(), Value::String("object".to_owned()));
    schema
}

/// Calls the tool `name`: its result as JSON text of at most 64 KiB, or a one-line error.
pub(crate) fn call(state: &State, name: &str, mut arguments: Map<String, Value>) -> Result<String, String> {
    let tool = TOOLS.iter().find(|t| t.name == name).ok_or_else(|| {
        let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        format!("no tool {name:?} (tools: {})", names.join(", "))
    })?;
    let count = |key: &str, arguments: &mut Map<String, Value>| match arguments.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("invalid arguments for {name}: {key} must be a non-negative integer, not {v}")),
    };
    check_types(&schema(tool), &arguments).map_err(|e| format!("invalid arguments: {e}"))?;
    let offset = count("offset", &mut arguments)?.unwrap_or(0);
    let limit = count("limit", &mut arguments)?;
    let text = (tool.run)(state, arguments).and_then(|doc| page(&doc, PageRequest { offset, limit }));
    // A failed call may have opened a profile too (a scan that failed after the decode).
    state.cache.trim();
    text.map_err(|e| single_line(&e))
}

/// Checks each argument against its property's `type` and `minimum` in `schema`, so that a
/// mistyped argument is named (serde's own message says what it expected, not where).
fn check_types(schema: &Map<String, Value>, arguments: &Map<String, Value>) -> Result<(), String> {
    let Some(Value::Object(properties)) = schema.get("properties") else { return Ok(()) };
    for (key, value) in arguments {
        let Some(property) = properties.get(key) else { continue };
        let types: Vec<&str> = match property.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        let fits = |t: &str| match t {
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        };
        if !types.iter().any(|t| fits(t)) {
            return Err(format!("{key} must be of type {}, not {value}", types.join(" or ")));
        }
        if let (Some(min), Some(v)) = (property.get("minimum").and_then(Value::as_f64), value.as_f64())
            && v < min
        {
            return Err(format!("{key} must be at least {min}, not {value}"));
        }
    }
    Ok(())
}

/// `tool`'s arguments read from the call's; a mistake (a missing or unknown field, a wrong
/// type) is one line that names it.
fn parse<A: DeserializeOwned>(arguments: Map<String, Value>) -> Result<A, String> {
    serde_json::from_value(Value::Object(arguments)).map_err(|e| format!("invalid arguments: {e}"))
}

fn arguments<A: JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(A)
}

fn single_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A scan that tells nobody how it goes.
struct Silent;

impl crate::faults::ScanObserver for Silent {}

/// `scan`'s arguments (those of `xlens scan` that change the report).
#[derive(Debug, Deserialize, JsonSchema, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct ScanArgs {
    /// The profile: a `*.xplane.pb`, a run directory or a logdir, under the server's root
    /// (relative paths are taken from the first root).
    path: String,
    /// This run of the logdir (`PATH/plugins/profile/RUN`) instead of the newest.
    #[serde(default)]
    run: Option<String>,
    /// Only these hosts of the run (host names; all by default).
    #[serde(default)]
    hosts: Vec<String>,
    /// Run only these detectors (ids as in the findings).
    #[serde(default)]
    only: Vec<String>,
    /// Do not run these detectors.
    #[serde(default)]
    disable: Vec<String>,
    /// Only these steps: `A..B` (both included), `A..`, `..B` or `N`.
    #[serde(default)]
    steps: Option<String>,
    /// Also write the HTML report page (`xlens scan --html`) to this file name under the
    /// server's `--out` directory (a relative path such as `report.html`); refused when the
    /// server was started without `--out`.
    #[serde(default)]
    html: Option<String>,
}

impl ScanArgs {
    /// The scan configuration, as `xlens scan` makes it of the same flags (no `xlens.toml`).
    fn config(&self) -> Result<ScanConfig, String> {
        let steps = self.steps.as_deref().map(StepRange::parse).transpose().map_err(|e| format!("steps: {e}"))?;
        let mut config = ScanConfig { steps, ..ScanConfig::default() };
        for id in self.only.iter().chain(&self.disable) {
            crate::cli::commands::parse_detector(id)?;
        }
        if !self.only.is_empty() {
            config.only = Some(self.only.clone());
            config.only_from = Some("--only".to_owned());
        }
        if !self.disable.is_empty() {
            config.disabled = self.disable.clone();
            config.disabled_from = Some("--disable".to_owned());
        }
        Ok(config)
    }

    /// What tells its reports apart on one profile.
    fn key(&self) -> String {
        serde_json::json!([self.only, self.disable, self.steps]).to_string()
    }
}

fn scan(state: &State, args: ScanArgs) -> Result<Arc<Value>, String> {
    let config = args.config()?;
    let profile = state.profile(&args.path, args.run.as_deref(), &args.hosts)?;
    let key = args.key();
    let doc = profile.document(&format!("scan {key}"), || {
        let report = state.report(&profile, &key, config.clone())?;
        serde_json::from_str(&crate::report::render::json(&report)).map_err(|e| e.to_string())
    })?;
    let Some(name) = &args.html else { return Ok(doc) };
    let report = state.report(&profile, &key, config)?;
    let written = state.out.write("the HTML page", name, crate::report::render::html(&report).as_bytes())?;
    let mut doc = (*doc).clone();
    if let Value::Object(map) = &mut doc {
        map.insert("html_page".to_owned(), Value::String(written.display().to_string()));
    }
    Ok(Arc::new(doc))
}

/// `findings`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FindingsArgs {
    /// The profile, as for `scan` (scanned with every detector on, if it was not yet).
    path: String,
    /// The finding's id (its detector's id, e.g. `exposed_collective`).
    id: String,
    /// This run of the logdir instead of the newest.
    #[serde(default)]
    run: Option<String>,
}

fn findings(state: &State, args: FindingsArgs) -> Result<Value, String> {
    let report = scan(
        state,
        ScanArgs {
            path: args.path,
            run: args.run,
            hosts: Vec::new(),
            only: Vec::new(),
            disable: Vec::new(),
            steps: None,
            html: None,
        },
    )?;
    let all = report["findings"].as_array().cloned().unwrap_or_default();
    let found: Vec<Value> = all.iter().filter(|f| f["id"] == args.id.as_str()).cloned().collect();
    if found.is_empty() {
        let mut ids: Vec<&str> = all.iter().filter_map(|f| f["id"].as_str()).collect();
        ids.dedup();
        let ids = if ids.is_empty() { "none".to_owned() } else { ids.join(", ") };
        return Err(format!("no finding {:?} in this profile's scan (findings: {ids})", args.id));
    }
    Ok(serde_json::json!({ "id": args.id, "findings": found }))
}

/// The arguments of the tools that read one profile.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    /// The profile: a `*.xplane.pb`, a run directory or a logdir, under the server's root.
    path: String,
}

fn ops(state: &State, args: PathArgs) -> Result<Arc<Value>, String> {
    let profile = state.profile(&args.path, None, &[])?;
    profile.document("ops", || {
        let ops = documents::host_op_profiles_in(&*profile.opened()?).map_err(|e| one_line(&*e))?;
        Ok(documents::op_profile_document(&ops))
    })
}

fn hlo(state: &State, args: PathArgs) -> Result<Arc<Value>, String> {
    let profile = state.profile(&args.path, None, &[])?;
    profile.document("hlo", || {
        let modules = match &profile.run {
            Some(_) => documents::hlo_modules_in(&*profile.opened()?),
            None => documents::hlo_modules_of(&profile.path).map_err(|e| one_line(&*e))?,
        };
        Ok(documents::hlo_document(&modules))
    })
}

fn inventory(state: &State, args: PathArgs) -> Result<Arc<Value>, String> {
    let profile = state.profile(&args.path, None, &[])?;
    profile.document("inventory", || {
        let inv = documents::host_inventories_in(&*profile.opened()?).map_err(|e| one_line(&*e))?;
        Ok(documents::planes_document(&inv))
    })
}

/// `kernels`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KernelsArgs {
    /// The profile (a GPU capture), under the server's root.
    path: String,
    /// Kernels kept per host, the longest first (all by default).
    #[serde(default)]
    top: Option<usize>,
}

fn kernels(state: &State, args: KernelsArgs) -> Result<Arc<Value>, String> {
    let profile = state.profile(&args.path, None, &[])?;
    profile.document(&format!("kernels {:?}", args.top), || {
        let k = documents::host_kernel_stats_in(&*profile.opened()?).map_err(|e| one_line(&*e))?;
        Ok(documents::kernels_document(&k, args.top))
    })
}

/// `graph`'s arguments (those of `xlens graph`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GraphArgs {
    /// The profile (or a `*.hlo_proto.pb`), under the server's root.
    path: String,
    /// The instruction (e.g. `fusion.12`); with `text`, also a computation. Required unless
    /// `text`.
    #[serde(default)]
    op: Option<String>,
    /// The program to look in (`jit_step(3)`, its name without the id when unique, or a prefix).
    #[serde(default)]
    program: Option<String>,
    /// Hops walked from the instruction (default 2, at most 32).
    #[serde(default)]
    #[schemars(range(min = 0))]
    hops: Option<usize>,
    /// Instructions listed at most, nearest first (default 200).
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_nodes: Option<usize>,
    /// The HLO text of `op` (or of the program) instead of the neighbourhood.
    #[serde(default)]
    text: bool,
    /// The program's graph in figures instead (XProf's `query_hlo_graph --mode=summary`): needs
    /// `program` when the profile has several, no `op`.
    #[serde(default)]
    summary: bool,
}

fn graph(state: &State, args: GraphArgs) -> Result<Arc<Value>, String> {
    use crate::graph::{
        GraphRequest, graph_document, graph_summary, graph_summary_in, hlo_text, hlo_text_in, op_graph, op_graph_in,
    };
    if args.op.is_none() && !args.text && !args.summary {
        return Err("invalid arguments: op is required unless text or summary is true".to_owned());
    }
    if (args.text || args.summary) && (args.hops.is_some() || args.max_nodes.is_some()) {
        return Err("invalid arguments: hops and max_nodes do not go with text or summary".to_owned());
    }
    if args.summary && (args.text || args.op.is_some()) {
        return Err("invalid arguments: summary goes with neither op nor text".to_owned());
    }
    let defaults = GraphRequest::default();
    let req = GraphRequest {
        op: args.op.clone(),
        program: args.program.clone(),
        hops: args.hops.unwrap_or(defaults.hops),
        max_nodes: args.max_nodes.unwrap_or(defaults.max_nodes),
    };
    let profile = state.profile(&args.path, None, &[])?;
    let key = serde_json::json!(["graph", args.op, args.program, req.hops, req.max_nodes, args.text, args.summary])
        .to_string();
    let why = |e: crate::graph::GraphError| one_line(&e);
    if args.summary {
        return profile.document(&key, || match &profile.run {
            Some(_) => graph_summary_in(&*profile.opened()?, &req).map_err(why),
            None => graph_summary(&profile.path, &req).map_err(why),
        });
    }
    profile.document(&key, || match (&profile.run, args.text) {
        (Some(_), true) => hlo_text_in(&*profile.opened()?, &req).map_err(why),
        (None, true) => hlo_text(&profile.path, &req).map_err(why),
        (Some(_), false) => op_graph_in(&*profile.opened()?, &req).map(|g| graph_document(&g)).map_err(why),
        (None, false) => op_graph(&profile.path, &req).map(|g| graph_document(&g)).map_err(why),
    })
}

/// `events`' arguments (those of `xlens events`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EventsArgs {
    /// The profile: a `*.xplane.pb`, a run directory or a logdir, under the server's root.
    path: String,
    /// Event names: a regular expression searched in the name (`^train$`, `^(?!end: ).*fusion`).
    #[serde(default)]
    pattern: Option<String>,
    /// Plane names (e.g. `^/device:GPU:0$`, `/host:CPU`).
    #[serde(default)]
    plane: Option<String>,
    /// Line names (e.g. `XLA Ops`, `python`).
    #[serde(default)]
    line: Option<String>,
    /// Only events starting at or after this many ms from the host's first event.
    #[serde(default)]
    from_ms: Option<f64>,
    /// Only events starting before this many ms from the host's first event.
    #[serde(default)]
    to_ms: Option<f64>,
    /// Group the statistics by event `name` (default) or by `line`.
    #[serde(default)]
    group_by: Option<EventsGroup>,
    /// Rows kept per host: groups, or listed events (all by default).
    #[serde(default)]
    top: Option<usize>,
    /// List the events themselves instead of their statistics.
    #[serde(default)]
    list: bool,
    /// List every plane's lines with their event counts instead (no other filter applies).
    #[serde(default)]
    lines: bool,
}

/// How `events` groups its statistics.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum EventsGroup {
    /// By event name.
    Name,
    /// By line name.
    Line,
}

impl EventsArgs {
    /// The request `xlens events --json` makes of the same flags; the combinations it refuses
    /// are refused alike.
    fn request(&self) -> Result<EventsRequest, String> {
        if self.lines
            && (self.list
                || self.pattern.is_some()
                || self.plane.is_some()
                || self.line.is_some()
                || self.from_ms.is_some()
                || self.to_ms.is_some()
                || self.group_by.is_some()
                || self.top.is_some())
        {
            return Err(
                "lines lists every line: it takes no list, pattern, plane, line, from_ms, to_ms, group_by or top"
                    .to_owned(),
            );
        }
        if self.list && self.group_by.is_some() {
            return Err("list lists events: it takes no group_by".to_owned());
        }
        for (key, ms) in [("from_ms", self.from_ms), ("to_ms", self.to_ms)] {
            if ms.is_some_and(|v| !v.is_finite()) {
                return Err(format!("{key} must be a finite time in ms"));
            }
        }
        let pattern = |key: &str, p: &Option<String>| {
            p.as_deref().map(NamePattern::new).transpose().map_err(|e| format!("{key}: {e}"))
        };
        Ok(EventsRequest {
            name: pattern("pattern", &self.pattern)?,
            plane: pattern("plane", &self.plane)?,
            line: pattern("line", &self.line)?,
            from_ms: self.from_ms,
            to_ms: self.to_ms,
            group_by: match self.group_by {
                Some(EventsGroup::Line) => GroupBy::Line,
                Some(EventsGroup::Name) | None => GroupBy::Name,
            },
            top: self.top,
        })
    }
}

fn events(state: &State, args: EventsArgs) -> Result<Arc<Value>, String> {
    let req = args.request()?;
    let profile = state.profile(&args.path, None, &[])?;
    profile.document(&format!("events {args:?}"), || {
        let opened = profile.opened()?;
        if args.lines {
            let inv = documents::host_inventories_in(&opened).map_err(|e| one_line(&*e))?;
            return Ok(ev::lines_document(&inv));
        }
        if args.list {
            let list = ev::event_list_in(&opened, &req).map_err(|e| one_line(&*e))?;
            return Ok(ev::list_document(&list));
        }
        let agg = ev::event_aggregates_in(&opened, &req).map_err(|e| one_line(&*e))?;
        Ok(ev::aggregates_document(&agg, req.top))
    })
}

fn device(state: &State, args: PathArgs) -> Result<Arc<Value>, String> {
    let profile = state.profile(&args.path, None, &[])?;
    if profile.run.is_none() {
        return Err(format!("{} is not a profile of hosts (a lone HLO proto has no device)", args.path));
    }
    profile.document("device", || {
        // The key figures are a scan's over hosts it owns: the profile's files, read again once
        // (the document is kept).
        let d = crate::device::device_info(&profile.path).map_err(|e| one_line(&*e))?;
        Ok(crate::device::device_document(&d))
    })
}

/// `memory`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MemoryArgs {
    /// The profile (or one `*.hlo_proto.pb`), under the server's root.
    path: String,
    /// Programs kept, the largest first (all by default).
    #[serde(default)]
    top: Option<usize>,
}

fn memory(state: &State, args: MemoryArgs) -> Result<Arc<Value>, String> {
    let profile = state.profile(&args.path, None, &[])?;
    profile.document(&format!("memory {:?}", args.top), || {
        let report = match &profile.run {
            Some(_) => crate::memory::memory_report_in(&*profile.opened()?),
            None => crate::memory::memory_report(&profile.path),
        }
        .map_err(|e| one_line(&*e))?;
        Ok(crate::memory::memory_report_document(&report, args.top))
    })
}

/// `roofline`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RooflineArgs {
    /// Only these chips (names as in the catalogue, e.g. `TPU v5e`, `H100 SXM`, or a device type);
    /// every chip by default.
    #[serde(default)]
    chips: Vec<String>,
}

fn roofline(args: RooflineArgs) -> Result<Value, String> {
    let chips: Vec<&'static ChipSpec> = if args.chips.is_empty() {
        CATALOGUE.iter().collect()
    } else {
        args.chips.iter().map(|c| ChipSpec::by_name(c).map_err(|e| e.to_string())).collect::<Result<_, _>>()?
    };
    Ok(crate::report::tables::roofline::roofline_table_json(&chips))
}

/// `diff`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffArgs {
    /// The base run: a profile, or a saved `xlens scan --json` report (`*.json`), under the root.
    base: String,
    /// The new run (the same kinds of input).
    new: String,
    /// More runs of the base side (run-to-run noise joins the interval).
    #[serde(default)]
    base_repeat: Vec<String>,
    /// More runs of the new side.
    #[serde(default)]
    new_repeat: Vec<String>,
    /// Compare only these steps of each run: `A..B`, `A..`, `..B` or `N`.
    #[serde(default)]
    steps: Option<String>,
    /// The smallest change of the step time, in %, that counts as IMPROVED or REGRESSED
    /// (default 2).
    #[serde(default)]
    min_change: Option<f64>,
}

fn diff(state: &State, args: DiffArgs) -> Result<Value, String> {
    let min_change_pct = args.min_change.unwrap_or(2.0);
    if !(min_change_pct.is_finite() && min_change_pct >= 0.0) {
        return Err(format!("min_change must be a non-negative percentage, not {min_change_pct}"));
    }
    let scan_args = |path: &str| ScanArgs {
        path: path.to_owned(),
        run: None,
        hosts: Vec::new(),
        only: Vec::new(),
        disable: Vec::new(),
        steps: args.steps.clone(),
        html: None,
    };
    let report = |path: &str| -> Result<Report, String> {
        let given = scan_args(path);
        let config = given.config()?;
        let canonical = state.roots.resolve(path)?;
        if canonical.is_file() && canonical.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            return crate::report_of(&canonical, config.steps).map_err(|e| one_line(&e));
        }
        let profile = state.profile(path, None, &[])?;
        Ok((*state.report(&profile, &given.key(), config)?).clone())
    };
    let base = report(&args.base)?;
    let new = report(&args.new)?;
    let base_more = args.base_repeat.iter().map(|p| report(p)).collect::<Result<Vec<_>, _>>()?;
    let new_more = args.new_repeat.iter().map(|p| report(p)).collect::<Result<Vec<_>, _>>()?;
    let d =
        diff_with_repeats(&base, &new, Repeats { base: &base_more, new: &new_more }, &DiffConfig { min_change_pct });
    serde_json::to_value(&d).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> State {
        let testdata = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata"));
        State::new(Roots::new(&[testdata]).unwrap(), OutDir::default(), 1 << 30)
    }

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => map,
            _ => unreachable!("arguments are an object"),
        }
    }

    #[test]
    fn a_tool_is_its_documents_function_paged() {
        let s = state();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/recompilation");
        let whole: Value = serde_json::from_str(&call(&s, "ops", args(json!({ "path": path }))).unwrap()).unwrap();
        let expected = documents::op_profile(std::path::Path::new(path)).unwrap();
        assert_eq!(whole, expected);
        // The same document, a row a list, from the kept profile.
        let paged: Value = serde_json::from_str(
            &call(&s, "ops", args(json!({ "path": "corpus/recompilation", "limit": 1 }))).unwrap(),
        )
        .unwrap();
        assert_eq!(paged["truncated"], json!(true));
        assert_eq!(paged["page"]["next_offset"], json!(1));
        assert!(paged["page"]["lists"].as_array().is_some_and(|l| !l.is_empty()));
        assert_eq!(paged["hosts"][0]["ops"][0], expected["hosts"][0]["ops"][0]);
    }

    #[test]
    fn graph_is_xlens_graph_json() {
        let s = state();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/clean");
        let got: Value =
            serde_json::from_str(&call(&s, "graph", args(json!({ "path": path, "op": "dot.32", "hops": 1 }))).unwrap())
                .unwrap();
        let req = crate::graph::GraphRequest { op: Some("dot.32".into()), hops: 1, ..Default::default() };
        let expected = crate::graph::graph_document(&crate::graph::op_graph(std::path::Path::new(path), &req).unwrap());
        assert_eq!(got, expected);
        let text: Value = serde_json::from_str(
            &call(&s, "graph", args(json!({ "path": "corpus/clean", "op": "main.40", "text": true }))).unwrap(),
        )
        .unwrap();
        assert_eq!(text["kind"], "computation");
    }

    #[test]
    fn refusals_and_mistakes_are_one_line_errors() {
        let s = state();
        let cases = [
            ("ops", json!({ "path": "../Cargo.toml" }), "outside the server's --root"),
            ("ops", json!({ "path": "/etc" }), "outside the server's --root"),
            ("scan", json!({ "path": "https://example.com/x.xplane.pb" }), "is a URL"),
            ("scan", json!({}), "missing field `path`"),
            ("scan", json!({ "path": "corpus/clean", "nope": 1 }), "unknown field `nope`"),
            ("ops", json!({ "path": "corpus/clean", "offset": "x" }), "offset must be of type integer"),
            ("ops", json!({ "path": "corpus/clean", "offset": -1 }), "offset must be at least 0"),
            ("kernels", json!({ "path": "corpus/clean", "top": "ten" }), "top must be of type integer"),
            ("ops", json!({ "path": "corpus/clean", "limit": 0 }), "limit must be at least 1"),
            ("diff", json!({ "base": "corpus/clean", "new": "corpus/clean", "min_change": -1 }), "min_change"),
            ("scan", json!({ "path": "corpus/clean", "only": ["nope"] }), "not a detector id"),
            ("roofline", json!({ "chips": ["nope"] }), "nope"),
            ("events", json!({ "path": "corpus/clean", "lines": true, "top": 3 }), "lines lists every line"),
            ("events", json!({ "path": "corpus/clean", "list": true, "group_by": "line" }), "takes no group_by"),
            ("events", json!({ "path": "corpus/clean", "pattern": "(" }), "pattern: bad pattern"),
            ("events", json!({ "path": "corpus/clean", "group_by": "plane" }), "unknown variant"),
            ("memory", json!({ "path": "corpus/clean", "top": -2 }), "top must be at least 0"),
            ("device", json!({ "path": "../README.md" }), "outside the server's --root"),
            ("nope", json!({}), "no tool \"nope\""),
            ("graph", json!({ "path": "corpus/clean", "op": "nope.1" }), "no instruction or computation \"nope.1\""),
            ("graph", json!({ "path": "corpus/clean", "op": "dot.32", "hops": 99 }), "over the limit of 32"),
            ("graph", json!({ "path": "corpus/clean" }), "op is required"),
        ];
        for (tool, a, why) in cases {
            let e = call(&s, tool, args(a.clone())).unwrap_err();
            assert!(e.contains(why), "{tool} {a}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn events_device_and_memory_are_their_commands_documents() {
        let s = state();
        let dir = |rel: &str| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata")).join(rel);
        let called =
            |tool: &str, a: Value| -> Value { serde_json::from_str(&call(&s, tool, args(a)).unwrap()).unwrap() };
        let clean = dir("corpus/clean");
        let req = EventsRequest { name: Some(NamePattern::new("^train$").unwrap()), ..EventsRequest::default() };
        assert_eq!(
            called("events", json!({ "path": "corpus/clean", "pattern": "^train$" })),
            ev::aggregates_document(&ev::event_aggregates(&clean, &req).unwrap(), None)
        );
        let listed = EventsRequest { top: Some(2), ..req };
        assert_eq!(
            called("events", json!({ "path": "corpus/clean", "pattern": "^train$", "list": true, "top": 2 })),
            ev::list_document(&ev::event_list(&clean, &listed).unwrap())
        );
        assert_eq!(
            called("events", json!({ "path": "corpus/clean", "lines": true })),
            ev::lines_document(&ev::event_lines(&clean).unwrap())
        );
        assert_eq!(
            called("device", json!({ "path": "corpus/clean" })),
            crate::device::device_document(&crate::device::device_info(&clean).unwrap())
        );
        let attn = dir("field/amd_te_fused_attn");
        let memory = called("memory", json!({ "path": "field/amd_te_fused_attn", "top": 1 }));
        assert_eq!(
            memory,
            crate::memory::memory_report_document(&crate::memory::memory_report(&attn).unwrap(), Some(1))
        );
        assert_eq!(memory["memory_profile"]["hosts"][0]["peak_memory_id"], "GPU_0_bfc");
    }

    #[test]
    fn scan_writes_its_page_into_out_only() {
        let e = call(&state(), "scan", args(json!({ "path": "corpus/clean", "html": "page.html" }))).unwrap_err();
        assert!(e.contains("start it with --out"), "{e}");
        let out = std::env::temp_dir().join(format!("xlens-mcp-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let testdata = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata"));
        let s = State::new(Roots::new(&[testdata]).unwrap(), OutDir::new(Some(&out)).unwrap(), 1 << 30);
        let plain: Value =
            serde_json::from_str(&call(&s, "scan", args(json!({ "path": "corpus/clean" }))).unwrap()).unwrap();
        let with: Value = serde_json::from_str(
            &call(&s, "scan", args(json!({ "path": "corpus/clean", "html": "pages/clean.html" }))).unwrap(),
        )
        .unwrap();
        let page = out.canonicalize().unwrap().join("pages/clean.html");
        assert_eq!(with["html_page"], page.display().to_string());
        let mut without = with.clone();
        without.as_object_mut().unwrap().remove("html_page");
        assert_eq!(without, plain);
        assert!(std::fs::read_to_string(&page).unwrap().starts_with("<!DOCTYPE html>"));
        for bad in ["../escape.html", "/tmp/escape.html", "a/../../escape.html"] {
            let e = call(&s, "scan", args(json!({ "path": "corpus/clean", "html": bad }))).unwrap_err();
            assert!(e.contains("--out") && !e.contains('\n'), "{bad}: {e}");
        }
        assert!(!out.parent().unwrap().join("escape.html").exists());
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn every_schema_is_an_object_with_paging() {
        for (name, description, schema) in list() {
            assert_eq!(schema["type"], "object", "{name}");
            assert!(schema["properties"]["offset"].is_object() && schema["properties"]["limit"].is_object(), "{name}");
            assert!(description.len() > 80, "{name}");
        }
    }
}
