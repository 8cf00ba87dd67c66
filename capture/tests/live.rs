//! Captures of a live JAX program (`scripts/capture/train_server.py`): skipped with a message
//! where no Python imports jax (see `xlens_testkit::jax`).

use std::time::Duration;

use xlens_capture::{CaptureSpec, Options, Status, Target, capture};
use xlens_testkit::jax::{TrainServer, jax_python};

fn temp_logdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-capture-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One second of a live program: one host file, named after the target, complete under its
/// final name, and nothing else left in the logdir but the run.
#[test]
fn a_live_program_gives_one_host_file() {
    let Some(python) = jax_python() else { return };
    let server = TrainServer::start(&python, None).unwrap();
    let logdir = temp_logdir("live");
    let spec = CaptureSpec {
        targets: vec![Target::parse(&server.target()).unwrap()],
        logdir: logdir.clone(),
        session: "live".to_owned(),
        options: Options { duration: Duration::from_secs(1), ..Options::default() },
        remote_logdir: None,
    };
    let captured = capture(&spec).unwrap();
    let t = &captured.targets[0];
    assert_eq!(t.status, Status::Ok, "{:?}", t.error);
    let file = t.file.as_ref().unwrap();
    assert_eq!(file, &logdir.join("plugins/profile/live").join(format!("localhost_{}.xplane.pb", server.port())));
    assert_eq!(std::fs::metadata(file).unwrap().len(), t.bytes);
    assert!(t.bytes > 1000, "{} bytes", t.bytes);
    let run: Vec<_> = std::fs::read_dir(&captured.run_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(run.len(), 1, "{run:?}");
    let top: Vec<_> = std::fs::read_dir(&logdir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(top, ["plugins"], "the staging directory is gone");
    // The same session again: the host file is never overwritten.
    let again = capture(&spec).unwrap();
    let error = again.targets[0].error.as_ref().map(ToString::to_string).unwrap_or_default();
    assert_eq!(again.targets[0].status, Status::Failed);
    assert!(error.contains("exists already"), "{error}");
    std::fs::remove_dir_all(&logdir).unwrap();
}
