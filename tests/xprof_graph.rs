//! `xlens graph` against XProf 2.24's `get_hlo_neighborhood` and `get_hlo_text` on every profile
//! of `testdata/` that has their reference output (`xprof/get_hlo_neighborhood__*.json`,
//! `xprof/get_hlo_text__*.json`, made by `scripts/capture/xprof_refs.py` with XProf run cold):
//! each reference's argv is replayed as the same request.
//!
//! `query_hlo_graph --mode=summary` is replayed as `graph --summary`: every count exactly, and
//! the kernel opcodes with their counts (in XProf's order up to ties, which SQLite leaves in
//! any order).
//!
//! A neighbourhood is compared exactly: the same instructions, at the same distances, in the
//! same computations, in XProf's order (distance, then name). Each instruction's line is
//! compared up to its operands (name, shape with layout, opcode, operands), with its fusion
//! kind and called computations: xlens's one-line text leaves out constants' values, backend
//! configs and metadata, which XProf prints, and the `/*index=N*/` comments XLA writes in tuple
//! shapes. A module's text is compared computation by
//! computation: the same computations, each with the same instructions in the same order and the
//! same heads.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::flag;
use serde_json::Value;
use xlens::graph::{GraphError, GraphRequest, graph_document, graph_summary, hlo_text, op_graph};

fn argv(doc: &Value) -> Vec<String> {
    doc["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect()
}

/// One line of HLO text cut into its head: name, shape, opcode and operands (the text between
/// the opcode's parentheses), the `ROOT ` prefix dropped.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Head {
    name: String,
    shape: String,
    opcode: String,
    operands: String,
    kind: Option<String>,
    calls: Option<String>,
}

/// The index of the delimiter that closes the one at `open` (nesting counted).
fn closing(s: &str, open: usize, a: u8, b: u8) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in s.as_bytes().iter().enumerate().skip(open) {
        if c == a {
            depth += 1;
        } else if c == b {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

fn head(line: &str) -> Head {
    let line = line.trim();
    let line = line.strip_prefix("ROOT ").unwrap_or(line);
    let (name, rhs) = line.split_once(" = ").unwrap_or_else(|| panic!("no ` = ` in {line:?}"));
    // The shape: a tuple in parentheses, or `type[dims]` with an optional `{layout}`.
    let shape_end = if rhs.starts_with('(') {
        closing(rhs, 0, b'(', b')').unwrap() + 1
    } else {
        let mut end = closing(rhs, rhs.find('[').unwrap(), b'[', b']').unwrap() + 1;
        if rhs[end..].starts_with('{') {
            end = closing(rhs, end, b'{', b'}').unwrap() + 1;
        }
        end
    };
    let shape = &rhs[..shape_end];
    let rest = rhs[shape_end..].trim_start();
    let open = rest.find('(').unwrap();
    let close = closing(rest, open, b'(', b')').unwrap();
    let attrs = &rest[close + 1..];
    let attr = |key: &str| {
        attrs.split(", ").find_map(|a| a.trim().strip_prefix(key)).map(|v| v.trim_end_matches(',').to_owned())
    };
    Head {
        name: name.trim().trim_start_matches('%').to_owned(),
        shape: shape.to_owned(),
        opcode: rest[..open].to_owned(),
        operands: rest[open + 1..close].to_owned(),
        kind: attr("kind="),
        calls: attr("calls="),
    }
}

/// `s` without XLA's `/*index=N*/` comments (which it writes before every fifth element of a
/// tuple shape).
fn without_index_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("/*index=") {
        out.push_str(&rest[..at]);
        rest = rest[at..].split_once("*/").map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}

/// Our head against XProf's: constants' values are not printed by xlens, nor XLA's
/// `/*index=N*/` comments in tuple shapes.
fn same_head(ours: &Head, theirs: &Head) -> bool {
    let mut theirs = theirs.clone();
    if theirs.opcode == "constant" {
        theirs.operands = ours.operands.clone();
    }
    theirs.shape = without_index_comments(&theirs.shape);
    ours == &theirs
}

/// XProf's neighbourhood text: `(distance, computation, line)` per instruction.
fn their_neighborhood(text: &str) -> Vec<(u64, String, String)> {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("Neighborhood of '"), "{first:?}");
    lines
        .map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("[dist=").unwrap_or_else(|| panic!("{l:?}"));
            let (d, rest) = rest.split_once("] [").unwrap();
            let (comp, line) = rest.split_once("] ").unwrap();
            (d.parse().unwrap(), comp.to_owned(), line.to_owned())
        })
        .collect()
}

/// Compares our neighbourhood of XProf's request with XProf's answer; returns what differs.
fn compare_neighborhood(dir: &Path, what: &str, op: &str, module: &str, hops: usize, text: &str) -> Vec<String> {
    let req =
        GraphRequest { op: Some(op.to_owned()), program: Some(module.to_owned()), hops, ..GraphRequest::default() };
    if text.starts_with("Instruction '") && text.contains("not found") {
        return match op_graph(dir, &req) {
            Err(GraphError::Usage(_)) => Vec::new(),
            other => vec![format!("{what}: XProf finds no {op}, xlens: {:?}", other.map(|g| graph_document(&g)))],
        };
    }
    let ours = graph_document(&op_graph(dir, &req).unwrap_or_else(|e| panic!("{what}: {e}")));
    let theirs = their_neighborhood(text);
    let nodes = ours["nodes"].as_array().unwrap();
    let mut bad = Vec::new();
    let ours_keys: Vec<(u64, String, String)> = nodes
        .iter()
        .map(|n| {
            (
                n["distance"].as_u64().unwrap(),
                n["computation"].as_str().unwrap().to_owned(),
                n["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let their_keys: Vec<(u64, String, String)> = theirs.iter().map(|(d, c, l)| (*d, c.clone(), head(l).name)).collect();
    if ours_keys != their_keys {
        bad.push(format!("{what}: instructions\n  ours:   {ours_keys:?}\n  theirs: {their_keys:?}"));
        return bad;
    }
    for (n, (_, _, line)) in nodes.iter().zip(&theirs) {
        let (o, t) = (head(n["text"].as_str().unwrap()), head(line));
        if !same_head(&o, &t) {
            bad.push(format!("{what}: line\n  ours:   {o:?}\n  theirs: {t:?}"));
        }
        // The document's fields are the line's.
        assert_eq!(n["shape"], o.shape.as_str(), "{what}");
        assert_eq!(n["opcode"], o.opcode.as_str(), "{what}");
        assert_eq!(n["fusion_kind"].as_str(), t.kind.as_deref(), "{what}: {}", o.name);
    }
    bad
}

#[test]
fn neighborhoods_match_xprof() {
    let refs = common::xprof_runs("get_hlo_neighborhood__");
    assert!(refs.len() >= 100, "expected XProf's neighbourhoods of the corpus and real captures: {}", refs.len());
    let mut bad = Vec::new();
    for (dir, file, doc) in &refs {
        let argv = argv(doc);
        let what = format!("{} ({})", file.display(), argv.join(" "));
        assert_eq!(doc["rc"], 0, "{what}");
        let known = ["--instruction_name=", "--module_name=", "--radius="];
        for a in argv.iter().skip(3) {
            assert!(known.iter().any(|k| a.starts_with(k)), "an XProf flag this test does not translate: {a}");
        }
        let op = flag(&argv, "instruction_name").unwrap();
        let module = flag(&argv, "module_name").unwrap();
        let hops = flag(&argv, "radius").map_or(2, |r| r.parse().unwrap());
        let text = doc["stdout_text"].as_str().unwrap_or_else(|| panic!("{what}: XProf printed no text"));
        bad.extend(compare_neighborhood(dir, &what, op, module, hops, text));
    }
    assert!(bad.is_empty(), "{} neighbourhoods differ from XProf's:\n{}", bad.len(), bad.join("\n"));
}

/// `get_hlo_text --op_name=X` is XProf's neighbourhood of X at radius 2, in a JSON envelope.
#[test]
fn op_text_matches_xprof() {
    let refs = common::xprof_runs("get_hlo_text__first");
    assert!(refs.len() >= 30, "expected XProf's op texts: {}", refs.len());
    let mut bad = Vec::new();
    for (dir, file, doc) in &refs {
        let argv = argv(doc);
        let what = format!("{} ({})", file.display(), argv.join(" "));
        let op = flag(&argv, "op_name").unwrap();
        let module = flag(&argv, "module_name").unwrap();
        let output = &doc["output"];
        assert_eq!(output["module_name"], module, "{what}");
        bad.extend(compare_neighborhood(dir, &what, op, module, 2, output["content"].as_str().unwrap()));
        // `--text --op X` prints X's own line.
        let req = GraphRequest { op: Some(op.to_owned()), program: Some(module.to_owned()), ..GraphRequest::default() };
        let ours = hlo_text(dir, &req).unwrap();
        assert_eq!(ours["kind"], "instruction", "{what}");
        let their_line = output["content"].as_str().unwrap().lines().nth(1).unwrap();
        let their_line = their_line.split_once("] ").unwrap().1.split_once("] ").unwrap().1;
        assert!(same_head(&head(ours["lines"][0].as_str().unwrap()), &head(their_line)), "{what}");
    }
    assert!(bad.is_empty(), "{} texts differ from XProf's:\n{}", bad.len(), bad.join("\n"));
}

/// XProf's module text: computation name → its instruction lines, and the computations' order.
fn computations(text: &str) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
    let mut order = Vec::new();
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let s = line.trim();
        match &mut current {
            None if s.ends_with('{') && !s.starts_with("HloModule") => {
                let name = s.trim_start_matches("ENTRY ").split([' ', '{']).next().unwrap().trim_start_matches('%');
                current = Some((name.to_owned(), Vec::new()));
            }
            None => {}
            Some((name, lines)) if s == "}" => {
                order.push(name.clone());
                out.insert(std::mem::take(name), std::mem::take(lines));
                current = None;
            }
            Some((_, lines)) => lines.push(s.to_owned()),
        }
    }
    (order, out)
}

#[test]
fn module_text_matches_xprof() {
    let refs = common::xprof_runs("get_hlo_text__main");
    assert!(refs.len() >= 30, "expected XProf's module texts: {}", refs.len());
    let mut bad = Vec::new();
    for (dir, file, doc) in &refs {
        let argv = argv(doc);
        let what = format!("{} ({})", file.display(), argv.join(" "));
        assert_eq!(flag(&argv, "max_lines"), Some("-1"), "{what}");
        let module = flag(&argv, "module_name").unwrap();
        let req = GraphRequest { program: Some(module.to_owned()), ..GraphRequest::default() };
        let ours = hlo_text(dir, &req).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(ours["program"], doc["output"]["module_name"], "{what}");
        let (their_order, theirs) = computations(doc["output"]["content"].as_str().unwrap());
        let our_text: Vec<&str> = ours["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        let (our_order, ours) = computations(&our_text.join("\n"));
        if their_order != our_order {
            bad.push(format!("{what}: computations\n  ours:   {our_order:?}\n  theirs: {their_order:?}"));
            continue;
        }
        for (name, their_lines) in &theirs {
            let our_lines = &ours[name];
            if our_lines.len() != their_lines.len() {
                bad.push(format!("{what}: {name}: {} lines, XProf {}", our_lines.len(), their_lines.len()));
                continue;
            }
            for (o, t) in our_lines.iter().zip(their_lines) {
                let (o, t) = (head(o), head(t));
                if !same_head(&o, &t) {
                    bad.push(format!("{what}: {name}\n  ours:   {o:?}\n  theirs: {t:?}"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{} module texts differ from XProf's:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn summaries_match_xprof() {
    let refs = common::xprof_runs("query_hlo_graph__summary");
    assert!(refs.len() >= 29, "expected XProf's graph summaries: {}", refs.len());
    let mut bad = Vec::new();
    for (dir, file, doc) in &refs {
        let argv = argv(doc);
        let what = format!("{} ({})", file.display(), argv.join(" "));
        assert_eq!(flag(&argv, "mode"), Some("summary"), "{what}");
        let theirs = &doc["output"];
        let req = GraphRequest { program: flag(&argv, "module_name").map(str::to_owned), ..GraphRequest::default() };
        let ours = graph_summary(dir, &req).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(ours["program"], theirs["module_name"], "{what}");
        for key in [
            "entry_computation",
            "computation_count",
            "instruction_count",
            "edge_count",
            "fusion_count",
            "custom_call_count",
            "fusion_blocker_count",
        ] {
            if ours[key] != theirs[key] {
                bad.push(format!("{what}: {key}: {} vs {}", ours[key], theirs[key]));
            }
        }
        let rows = |v: &Value| -> Vec<(String, u64)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|r| (r["opcode"].as_str().unwrap().to_owned(), r["count"].as_u64().unwrap()))
                .collect()
        };
        let (o, t) = (rows(&ours["top_opcodes"]), rows(&theirs["top_opcodes"]));
        let counts = |r: &[(String, u64)]| r.iter().map(|x| x.1).collect::<Vec<_>>();
        // The same counts in the same order; each opcode XProf lists with the same count (the
        // last count's ties may be cut at another opcode).
        let last = t.last().map_or(0, |x| x.1);
        let by_opcode: BTreeMap<&str, u64> = o.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        if counts(&o) != counts(&t) || t.iter().any(|(k, n)| *n != last && by_opcode.get(k.as_str()) != Some(n)) {
            bad.push(format!("{what}: top_opcodes\n  ours:   {o:?}\n  theirs: {t:?}"));
        }
    }
    assert!(bad.is_empty(), "{} summaries differ from XProf's:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn mistakes_are_usage_errors_that_say_why() {
    let clean = common::root().join("testdata/corpus/clean");
    let req = |op: &str, program: Option<&str>, hops: usize| GraphRequest {
        op: Some(op.to_owned()),
        program: program.map(str::to_owned),
        hops,
        ..GraphRequest::default()
    };
    let usage = |r: Result<_, GraphError>| match r {
        Err(GraphError::Usage(why)) => why,
        Err(e) => panic!("not a usage error: {e}"),
        Ok(_) => panic!("no error"),
    };
    let mut whys = Vec::new();
    let why = usage(op_graph(&clean, &req("nope.1", None, 2)).map(|_| ()));
    assert!(why.contains("no instruction or computation \"nope.1\""), "{why}");
    whys.push(why);
    let why = usage(op_graph(&clean, &req("dot.32", None, 33)).map(|_| ()));
    assert!(why.contains("--hops 33") && why.contains("32"), "{why}");
    whys.push(why);
    let why = usage(op_graph(&clean, &req("dot.32", Some("nope"), 2)).map(|_| ()));
    assert!(why.contains("no program \"nope\"") && why.contains("jit_train_step(36)"), "{why}");
    whys.push(why);
    let why = usage(op_graph(&clean, &req("main.40", None, 2)).map(|_| ()));
    assert!(why.contains("is a computation"), "{why}");
    whys.push(why);
    // A name in two programs: recompilation compiles the train step twice.
    let recompiled = common::root().join("testdata/corpus/recompilation");
    let hlo = xlens::documents::hlo_modules_of(&recompiled).unwrap();
    let names: Vec<Vec<&str>> =
        hlo.modules.iter().map(|m| m.instructions().iter().map(|i| i.name()).collect()).collect();
    let shared = names[0].iter().find(|n| names[1..].iter().any(|o| o.contains(n))).unwrap();
    let why = usage(op_graph(&recompiled, &req(shared, None, 1)).map(|_| ()));
    assert!(why.contains("pick one with --program"), "{why}");
    whys.push(why);
    let why = usage(hlo_text(&recompiled, &GraphRequest::default()).map(|_| ()));
    assert!(why.contains("pick one with --program"), "{why}");
    whys.push(why);
    for why in whys {
        assert!(!why.contains('\n'), "{why}");
    }
}

#[test]
fn measured_times_are_the_op_profiles() {
    let clean = common::root().join("testdata/corpus/clean");
    let req = GraphRequest { op: Some("dot.32".into()), hops: 1, ..GraphRequest::default() };
    let doc = graph_document(&op_graph(&clean, &req).unwrap());
    let ops = xlens::documents::op_profile(&clean).unwrap();
    let row = ops["hosts"][0]["ops"].as_array().unwrap().iter().find(|o| o["name"] == "dot.32").unwrap().clone();
    let node = &doc["nodes"][0];
    assert_eq!(node["occurrences"], row["occurrences"]);
    assert!(node["self_time_ps"].as_i64().unwrap() > 0);
    assert_eq!(node["source"].as_str().map(|s| s.ends_with("models.py:65")), Some(true));
    // Deterministic: the same document twice.
    assert_eq!(doc, graph_document(&op_graph(&clean, &req).unwrap()));
}
