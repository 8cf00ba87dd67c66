//! Live JAX programs for the capture tests: `scripts/capture/train_server.py` (a jitted training
//! loop under `jax.profiler.StepTraceAnnotation` that serves `jax.profiler.start_server(port)`)
//! started on a free port and killed when dropped.
//!
//! The interpreter is `$XLENS_JAX_PYTHON`, else `python3` when it imports jax. Where there is
//! none, [`jax_python`] says so and a test skips, unless `XLENS_REQUIRE_JAX` is set (CI sets
//! it, having installed the pinned `jax[cpu]`): then the missing interpreter fails the test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The test program.
pub const TRAIN_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/capture/train_server.py");

/// How long a program may take to import jax, compile its step and start serving (a loaded
/// 2-core machine takes several seconds).
pub const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The Python interpreter that imports jax: `$XLENS_JAX_PYTHON` (which must import it), else
/// `python3` when it does; `None` (with the reason printed on stderr, so the skip shows in the
/// test's output) when there is none. Panics instead when `XLENS_REQUIRE_JAX` is set.
pub fn jax_python() -> Option<PathBuf> {
    let imports_jax = |python: &Path| {
        Command::new(python)
            .args(["-c", "import jax"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let required = std::env::var_os("XLENS_REQUIRE_JAX").is_some_and(|v| !v.is_empty());
    let (python, named) = match std::env::var_os("XLENS_JAX_PYTHON") {
        Some(p) if !p.is_empty() => (PathBuf::from(p), true),
        _ => (PathBuf::from("python3"), false),
    };
    if imports_jax(&python) {
        return Some(python);
    }
    let why = if named {
        format!("XLENS_JAX_PYTHON={} cannot import jax", python.display())
    } else {
        "no python with jax (python3 cannot import it; set XLENS_JAX_PYTHON to an interpreter that can)".to_owned()
    };
    assert!(!required, "XLENS_REQUIRE_JAX is set but {why}");
    eprintln!("skipped: {why}");
    None
}

/// A TCP port that was free on loopback a moment ago.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port on loopback");
    listener.local_addr().expect("the listener's address").port()
}

/// A running `train_server.py`, killed (and waited for) when dropped.
#[derive(Debug)]
pub struct TrainServer {
    child: Child,
    port: u16,
}

impl TrainServer {
    /// Starts the program with `python` on a free port and waits until it serves (its "ready"
    /// line). `trigger`: the file whose presence makes each step slower.
    pub fn start(python: &Path, trigger: Option<&Path>) -> std::io::Result<TrainServer> {
        let port = free_port();
        let mut command = Command::new(python);
        command.arg(TRAIN_SERVER).arg(port.to_string());
        if let Some(t) = trigger {
            command.arg(t);
        }
        // Single-threaded Eigen in XLA:CPU: the tests run several programs on a small machine.
        command
            .env("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        // The program's last words, for the error when it never gets ready.
        let stderr = child.stderr.take().expect("piped stderr");
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let said_by = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut said = said_by.lock().unwrap_or_else(|p| p.into_inner());
                if said.len() > 4096 {
                    let cut = said.len() - 2048;
                    let cut = (cut..said.len()).find(|&i| said.is_char_boundary(i)).unwrap_or(said.len());
                    said.drain(..cut);
                }
                said.push_str(&line);
                said.push('\n');
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim() == "ready" {
                    let _ = tx.send(());
                }
            }
        });
        let server = TrainServer { child, port };
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(()) => Ok(server),
            Err(_) => {
                let said = said.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Err(std::io::Error::other(format!(
                    "{TRAIN_SERVER} on port {port} did not print \"ready\" within {} s; its stderr:\n{said}",
                    READY_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its capture target, `localhost:PORT`.
    pub fn target(&self) -> String {
        format!("localhost:{}", self.port)
    }
}

impl Drop for TrainServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
