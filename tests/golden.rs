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

/// The kernel statistics of every host of the profile at `rel` (from the root).
fn kernel_hosts(rel: &str) -> Vec<xlens::report::tables::kernel_stats::HostKernelStats> {
    let session = xlens_testkit::open_session(root().join(rel)).unwrap();
    session
        .hosts()
        .iter()
        .map(|h| xlens::report::tables::kernel_stats::HostKernelStats {
            host: h.name().to_owned(),
            stats: xlens::roofline::KernelStats::read(h.space()).unwrap(),
        })
        .collect()
}

#[test]
fn kernel_stats_outputs() {
    use xlens::report::tables::kernel_stats::{kernel_stats_json, kernel_stats_text};
    let hosts = kernel_hosts("testdata/field/amd_te_fused_attn");
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
            "share_pct",
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

/// On a host of eight GPUs a kernel's summed time exceeds the wall time any GPU was busy
/// (XProf's `total_device_duration`): shares are of the kernels' summed time, so none is above
/// 100 % and they add up to 100 %.
#[test]
fn kernel_shares_add_up_on_a_host_of_several_gpus() {
    use xlens::report::tables::kernel_stats::{kernel_stats_json, kernel_stats_text};
    let hosts = kernel_hosts("testdata/field/amd_conv3d_jax08");
    let json = kernel_stats_json(&hosts, None);
    let shares: Vec<f64> =
        json["kernels"].as_array().unwrap().iter().map(|k| k["share_pct"].as_f64().unwrap()).collect();
    assert!(shares.iter().all(|s| (0.0..=100.0).contains(s)), "{shares:?}");
    assert!((shares.iter().sum::<f64>() - 100.0).abs() < 1e-6);
    let busy = json["total_device_duration_us"].as_f64().unwrap();
    let summed = json["kernel_time_us"].as_f64().unwrap();
    assert!(summed > busy, "eight GPUs: {summed} {busy}");
    let text = kernel_stats_text(&hosts, 20);
    for line in text.lines().skip(3) {
        let share: f64 = line.split_whitespace().nth(3).unwrap().trim_end_matches('%').parse().unwrap();
        assert!(share <= 100.0, "{line}");
    }
}
