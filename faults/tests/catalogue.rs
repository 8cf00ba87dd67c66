//! `docs/detectors.md` is generated from the registry; this test keeps it current.

#[test]
fn detector_catalogue_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/detectors.md");
    let actual = xlens_faults::catalogue_markdown();
    if std::env::var_os("XLENS_BLESS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(expected == actual, "docs/detectors.md is stale: run with XLENS_BLESS=1");
    for id in REQUIRED_IDS {
        assert!(actual.contains(&format!("## `{id}`")), "{id} is not documented");
    }
}

/// Every detector id the catalogue must have (the list; users and tests key on them).
const REQUIRED_IDS: &[&str] = &[
    "exposed_collective",
    "wrong_mesh_mapping",
    "unintended_remat",
    "data_formatting_tax",
    "input_starvation",
    "recompilation",
    "vpu_bound",
    "padding_waste",
    "straggler_core",
    "dcn_exposed_reduce",
    "host_callback_stall",
    "donation_miss",
    "allgather_duplication",
    "profile_during_warmup",
    "barrier_in_loop",
    "sparsecore_overflow",
    "layout_mismatch_copy",
    "unfused_reshape",
    "unnecessary_convert_reduce",
    "hbm_pressure",
    "truncated_capture",
    // Real captures from the field (GPU streams, host offload, profiles without steps).
    "exposed_async_copy",
    "low_utilization",
    "device_idle",
    "launch_bound",
    // Multi-device sessions (issue 14).
    "replicated_activations",
];

#[test]
fn the_catalogue_is_complete() {
    let ids: std::collections::BTreeSet<&str> = xlens_faults::DETECTORS.iter().map(|d| d.id()).collect();
    let required: std::collections::BTreeSet<&str> = REQUIRED_IDS.iter().copied().collect();
    assert_eq!(ids, required);
}
