//! Golden tests of what the examples print: the same library functions, checked against files in
//! `tests/golden/`. Set `XLENS_BLESS=1` to rewrite the files after an intended change.

mod common;

use common::*;

use std::path::Path;

use xlens::report::tables::{HostInventory, inventory_json, inventory_text, summary_text};
use xlens::xplane::{Session, inventory, summarize};

fn hosts(dir: &Path) -> (Session, Vec<HostInventory>) {
    let session = xlens_testkit::open_session(dir).unwrap();
    let hosts = session
        .hosts()
        .iter()
        .map(|h| HostInventory { host: h.name().to_owned(), planes: inventory(h.space()).unwrap() })
        .collect();
    (session, hosts)
}

#[test]
fn inventory_outputs() {
    let (_, inv) = hosts(&root().join("testdata/corpus/host_callback"));
    check("inventory_host_callback.json", &(serde_json::to_string_pretty(&inventory_json(&inv)).unwrap() + "\n"));
    check("inventory_host_callback.txt", &inventory_text(&inv));
}

#[test]
fn summary_output() {
    let (session, _) = hosts(&root().join("testdata/corpus/sharded_collectives_baseline"));
    let host = &session.hosts()[0];
    check("summary_sharded_collectives_baseline.txt", &summary_text(host.name(), &summarize(host.space())));
}

#[test]
fn output_is_identical_from_run_to_run() {
    let dir = root().join("testdata/corpus/clean");
    let a = inventory_json(&hosts(&dir).1);
    let b = inventory_json(&hosts(&dir).1);
    assert_eq!(a, b);
}

#[test]
fn kernel_stats_outputs() {
    use xlens::report::tables::kernel_stats::{HostKernelStats, kernel_stats_json, kernel_stats_text};
    let session = xlens_testkit::open_session(root().join("testdata/field/amd_te_fused_attn")).unwrap();
    let hosts: Vec<HostKernelStats> = session
        .hosts()
        .iter()
        .map(|h| HostKernelStats {
            host: h.name().to_owned(),
            stats: xlens::roofline::KernelStats::read(h.space()).unwrap(),
        })
        .collect();
    let json = kernel_stats_json(&hosts, Some(5));
    // The documented contract, key for key.
    let keys: Vec<&str> = json["kernels"][0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "kernel_name",
            "hlo_op",
            "occurrences",
            "total_duration_us",
            "avg_duration_us",
            "min_duration_us",
            "max_duration_us",
            "registers_per_thread",
            "static_shared_bytes",
            "dynamic_shared_bytes",
            "block",
            "grid",
            "occupancy_pct",
            "uses_tensor_cores",
            "host"
        ]
    );
    check("kernel_stats_amd_te_fused_attn.json", &(serde_json::to_string_pretty(&json).unwrap() + "\n"));
    check("kernel_stats_amd_te_fused_attn.txt", &kernel_stats_text(&hosts, 10));
}
