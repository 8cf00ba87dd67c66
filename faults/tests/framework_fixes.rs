//! Fixes in the user's own framework: every detector's fix is a framework-neutral core plus a
//! line per framework, so a TensorFlow or PyTorch/XLA profile never reads JAX's API (nor one
//! framework another's), and a profile of an unknown framework reads the neutral core alone.

use xlens_faults::{DETECTORS, Finding, Findings, Impact, Profile, ScanConfig, Severity, scan};
use xlens_roofline::Framework;

/// Names of JAX's API (and its libraries') that only a JAX user can act on.
const JAX_API: &[&str] = &[
    "jax",
    "jnp",
    "jit",
    "pjit",
    "pmap",
    "vmap",
    "lax",
    "flax",
    "optax",
    "grain",
    "donate_argnums",
    "donate_argnames",
    "device_put",
    "block_until_ready",
    "shard_map",
    "custom_vjp",
    "checkpoint_name",
    "save_only_these_names",
    "nothing_saveable",
    "dots_with_no_batch_dims_saveable",
    "make_mesh",
    "mesh_utils",
    "psum",
    "psum_scatter",
    "ppermute",
    "dot_general",
    "preferred_element_type",
    "with_sharding_constraint",
    "NamedSharding",
    "PartitionSpec",
    "io_callback",
    "pure_callback",
    "jax_log_compiles",
];

/// Names of TensorFlow's API.
const TF_API: &[&str] = &["tf", "keras", "Keras", "tensorflow", "TensorFlow", "dtensor", "DTensor", "jit_compile"];

/// Names of PyTorch/XLA's API.
const TORCH_API: &[&str] = &["torch", "torch_xla", "xm", "xs", "xp", "MpDeviceLoader", "mark_step", "DataLoader", "F"];

/// The identifiers of a text (runs of letters, digits and `_`), so that `jit_compile` is not
/// `jit` and `jax.jit` is both `jax` and `jit`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// The API names of `banned` that `text` uses.
fn uses(text: &str, banned: &[&str]) -> Vec<String> {
    words(text).filter(|w| banned.contains(w)).map(str::to_owned).collect()
}

/// Each detector's finding with its default fix, as a profile of `framework` gets it.
fn fixes_for(framework: Framework) -> Vec<(&'static str, String)> {
    let mut out = Findings::for_framework(framework);
    for d in DETECTORS {
        out.push(Finding::new(*d, Severity::P1, "what".to_owned(), Vec::new(), Impact::default()));
    }
    DETECTORS.iter().map(|d| d.id()).zip(out.into_vec().into_iter().map(|f| f.fix)).collect()
}

#[test]
fn the_neutral_core_names_no_frameworks_api() {
    for d in DETECTORS {
        let core = d.doc().fix;
        for banned in [JAX_API, TF_API, TORCH_API] {
            let found = uses(core, banned);
            assert!(found.is_empty(), "{}: the neutral fix names {found:?}: {core}", d.id());
        }
    }
}

#[test]
fn each_frameworks_line_names_no_other_frameworks_api() {
    for d in DETECTORS {
        let lines = d.doc().fix_lines;
        // JAX programs read their input with `tf.data` too: it is JAX users' API as well.
        let jax = lines.jax.replace("tf.data", "");
        for (line, others) in [
            (jax.as_str(), [TF_API, TORCH_API]),
            (lines.tensorflow, [JAX_API, TORCH_API]),
            (lines.pytorch_xla, [JAX_API, TF_API]),
        ] {
            for banned in others {
                let found = uses(line, banned);
                assert!(found.is_empty(), "{}: {found:?} in {line}", d.id());
            }
        }
    }
}

/// Every detector's fix as a TensorFlow profile reads it: its TensorFlow line where it has one,
/// and no JAX API anywhere; PyTorch/XLA likewise; an unknown framework the core alone.
#[test]
fn every_detectors_fix_on_a_tensorflow_capture_names_no_jax_api() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/tf_v100_multiworker");
    let profile = Profile::from_session(xlens_testkit::open_session(dir).unwrap());
    let framework = profile.hosts()[0].framework().name;
    assert_eq!(framework, Framework::TensorFlow);
    for (id, fix) in fixes_for(framework) {
        let found = uses(&fix, JAX_API);
        assert!(found.is_empty(), "{id} tells a TensorFlow user {found:?}: {fix}");
        let line = xlens_faults::detector(id).unwrap().doc().fix_lines.tensorflow;
        assert!(line.is_empty() || fix.ends_with(&format!("In TensorFlow: {line}")), "{id}: {fix}");
    }
    for (id, fix) in fixes_for(Framework::PyTorchXla) {
        let found = uses(&fix, JAX_API);
        assert!(found.is_empty(), "{id} tells a PyTorch/XLA user {found:?}: {fix}");
    }
    for (id, fix) in fixes_for(Framework::Unknown) {
        assert_eq!(fix, xlens_faults::detector(id).unwrap().doc().fix, "{id}: the core alone");
    }
    // And the findings a scan of the capture makes (fixes chosen for what was found included).
    let report = scan(&profile, &ScanConfig::default());
    assert_eq!(report.framework.name, Framework::TensorFlow);
    for f in &report.findings {
        let found = uses(&f.fix, JAX_API);
        assert!(found.is_empty(), "{} tells a TensorFlow user {found:?}: {}", f.id, f.fix);
    }
}

/// A JAX profile keeps JAX's advice: every detector with a JAX line ends its fix with it.
#[test]
fn a_jax_capture_reads_the_jax_line() {
    for (id, fix) in fixes_for(Framework::Jax) {
        let line = xlens_faults::detector(id).unwrap().doc().fix_lines.jax;
        assert!(line.is_empty() || fix.ends_with(&format!("In JAX: {line}")), "{id}: {fix}");
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/corpus/recompilation");
    let report = scan(&Profile::from_session(xlens_testkit::open_session(dir).unwrap()), &ScanConfig::default());
    assert_eq!(report.framework.name, Framework::Jax);
    let f = report.findings.iter().find(|f| f.id == "recompilation").unwrap();
    assert!(f.fix.contains("In JAX: mark shape-determining arguments static in `jax.jit`"), "{}", f.fix);
}

/// The session directories named in an environment variable (`:`-separated): real captures that
/// may not be kept in the repository (no licence) are checked the same way as the committed ones.
fn extra_dirs(var: &str) -> Vec<std::path::PathBuf> {
    std::env::var(var).unwrap_or_default().split(':').filter(|s| !s.is_empty()).map(Into::into).collect()
}

/// Every TensorFlow capture of `testdata/field`, and those named in `XLENS_EXTRA_TF_DIRS`: read as
/// TensorFlow, every fix free of JAX's API, no finding on the FLOP figures a capture without HLO
/// does not have, and a capture of warm-up (those named in `XLENS_EXTRA_WARMUP_DIRS` must be)
/// leading its findings and the verdict. The variables name the public captures without a
/// licence that `testdata/field/README.md` lists (a Keras first step with cuDNN's autotuning
/// among them), which the repository may not hold.
#[test]
fn every_tf_capture_reads_tensorflow_advice_and_leads_with_its_warmup() {
    let field = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/field");
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(&field)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tf_")))
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 5, "{dirs:?}");
    let warmups: Vec<std::path::PathBuf> =
        std::iter::once(field.join("tf_cpu_keras_warmup")).chain(extra_dirs("XLENS_EXTRA_WARMUP_DIRS")).collect();
    dirs.extend(extra_dirs("XLENS_EXTRA_TF_DIRS"));
    dirs.extend(warmups.iter().skip(1).cloned());
    for dir in &dirs {
        let ctx = dir.display();
        let profile = Profile::from_session(xlens_testkit::open_session(dir).unwrap());
        let report = scan(&profile, &ScanConfig::default());
        assert_eq!(report.framework.name, Framework::TensorFlow, "{ctx}");
        for f in &report.findings {
            let found = uses(&f.fix, JAX_API);
            assert!(found.is_empty(), "{ctx}: {} tells a TensorFlow user {found:?}: {}", f.id, f.fix);
        }
        if report.profile.hlo_programs == 0 {
            assert!(report.findings.iter().all(|f| f.id != "low_utilization"), "{ctx}: FLOPs it does not have");
        }
        let warmup = report.findings.iter().position(|f| f.id == "profile_during_warmup");
        if warmups.contains(dir) {
            assert!(warmup.is_some(), "{ctx}: a warm-up capture: {:#?}", report.findings);
        }
        if let Some(at) = warmup {
            let severity = report.findings[at].severity;
            assert_eq!(
                report.findings.iter().position(|f| f.severity == severity),
                Some(at),
                "{ctx}: leads its severity"
            );
            assert!(
                report.summary.contains("Why: the capture holds warm-up (profile_during_warmup)"),
                "{ctx}: {}",
                report.summary
            );
        }
    }
}
