//! `docs/detectors.md` is generated from the registry; this test keeps it current.

#[test]
fn detector_catalogue_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/detectors.md");
    let actual = xlens_faults::registry::catalogue_markdown();
    if std::env::var_os("XLENS_BLESS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(expected == actual, "docs/detectors.md is stale: run with XLENS_BLESS=1");
    for id in xlens_faults::registry::REQUIRED_IDS {
        assert!(actual.contains(&format!("## `{id}`")), "{id} is not documented");
    }
}
