//! The framework of every capture in `testdata/` (and `../shared/real` when present): the
//! TensorFlow captures read as TensorFlow, with XLA only for `jit_compile=True`, the PyTorch/XLA
//! captures (`field/ptxla_*`, torch_xla 2.8 on CPU) as PyTorch/XLA, every other capture (JAX on
//! CPU, GPU and TPU, real or shaped by the testkit after JAX's captures) as JAX, each with the
//! names that say so. `XLENS_FRAMEWORK_DIRS` may name more capture folders, `dir=framework` separated by `;`,
//! to check captures that cannot be committed.

mod common;

use std::path::{Path, PathBuf};

use xlens_roofline::{Framework, Profile};

/// Every folder under `root/<group>/` holding a `*.xplane.pb`.
fn capture_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(groups) = std::fs::read_dir(root) else { return out };
    for group in groups.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        let mut dirs = vec![group.clone()];
        dirs.extend(std::fs::read_dir(&group).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        for dir in dirs {
            let has_capture = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .any(|f| f.file_name().to_string_lossy().ends_with(".xplane.pb"));
            if has_capture {
                out.push(dir);
            }
        }
    }
    out.sort();
    out
}

/// What each capture must read as: TensorFlow for the TensorFlow captures (named `tf_…`; with
/// XLA where the name ends in `_xla`, `jit_compile=True`), PyTorch/XLA for `ptxla_…`, JAX for
/// all others.
fn expected(dir: &Path) -> (Framework, bool) {
    let name = dir.file_name().unwrap().to_string_lossy();
    if name.starts_with("tf_") {
        (Framework::TensorFlow, name.ends_with("_xla"))
    } else if name.starts_with("ptxla_") {
        (Framework::PyTorchXla, true)
    } else {
        (Framework::Jax, true)
    }
}

fn check(dir: &Path, want: Framework, want_xla: Option<bool>) {
    let profile = Profile::from_session(xlens_testkit::open_session(dir).unwrap());
    for host in profile.hosts() {
        let f = host.framework();
        assert_eq!(f.name, want, "{}: {f:?}", dir.display());
        if let Some(xla) = want_xla {
            assert_eq!(f.xla, xla, "{}: {f:?}", dir.display());
        }
        assert!(!f.evidence.is_empty(), "{}: no evidence", dir.display());
    }
}

#[test]
fn every_capture_reads_as_its_framework() {
    let mut dirs = capture_dirs(&common::testdata());
    dirs.extend(capture_dirs(&common::testdata().join("../../shared/real")));
    assert!(dirs.len() >= 60, "{} captures", dirs.len());
    let (mut tensorflow, mut torch) = (0, 0);
    for dir in &dirs {
        let (want, xla) = expected(dir);
        tensorflow += usize::from(want == Framework::TensorFlow);
        torch += usize::from(want == Framework::PyTorchXla);
        check(dir, want, Some(xla));
    }
    assert!(tensorflow >= 5, "{tensorflow} TensorFlow captures");
    assert!(torch >= 3, "{torch} PyTorch/XLA captures");
}

/// The real PyTorch/XLA captures name what the synthetic rules assumed: the graphs
/// `xm.mark_step()` cuts (`SyncTensorsGraph.<n>`) and the runtime's `PjRtComputationClient::…`
/// TraceMes, on the training thread, with XLA:CPU's `tf_XLAEigen` threads running the ops (no
/// TensorFlow executor, so no TensorFlow sign may win).
#[test]
fn real_pytorch_xla_captures_name_their_graphs_and_runtime() {
    for variant in ["steady", "warmup", "input_bound"] {
        let dir = common::testdata().join(format!("field/ptxla_cpu_{variant}"));
        let profile = Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
        let f = profile.hosts()[0].framework();
        assert_eq!((f.name, f.xla), (Framework::PyTorchXla, true), "{variant}: {f:?}");
        assert!(f.evidence.contains("SyncTensorsGraph."), "{variant}: {}", f.evidence);
        assert!(f.evidence.contains("PjRtComputationClient::"), "{variant}: {}", f.evidence);
    }
}

/// Captures outside the repository (`XLENS_FRAMEWORK_DIRS="dir=tensorflow;dir2=jax"`).
#[test]
fn captures_named_in_the_environment_read_as_their_framework() {
    let Ok(list) = std::env::var("XLENS_FRAMEWORK_DIRS") else { return };
    for item in list.split(';').filter(|s| !s.is_empty()) {
        let (dir, name) = item.rsplit_once('=').expect("dir=framework");
        check(Path::new(dir), Framework::parse(name).expect("a framework name"), None);
    }
}
