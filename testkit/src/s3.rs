//! An S3-compatible object store for the tests that write runs into one: moto's server mode
//! (`python -m moto.server`, the server `python/tests/test_stores.py` runs in-process) on a free
//! loopback port, killed when dropped. The tests talk to it through `object_store`'s usual
//! environment ([`S3Server::env`]), as a user's `s3://` URLs would.
//!
//! The interpreter is `$XLENS_S3_PYTHON`, else `python3` when it imports `moto.server`. Where
//! there is none, [`s3_python`] says so and a test skips, unless `XLENS_REQUIRE_S3` is set (CI
//! sets it, having installed `moto[server]`): then the missing server fails the test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::jax::free_port;

/// How long the server may take to start listening.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The Python interpreter that imports `moto.server`: `$XLENS_S3_PYTHON` (which must import
/// it), else `python3` when it does; `None` (with the reason on stderr, so the skip shows in the
/// test's output) when there is none. Panics instead when `XLENS_REQUIRE_S3` is set.
pub fn s3_python() -> Option<PathBuf> {
    let imports_moto = |python: &Path| {
        Command::new(python)
            .args(["-c", "import moto.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let required = std::env::var_os("XLENS_REQUIRE_S3").is_some_and(|v| !v.is_empty());
    let (python, named) = match std::env::var_os("XLENS_S3_PYTHON") {
        Some(p) if !p.is_empty() => (PathBuf::from(p), true),
        _ => (PathBuf::from("python3"), false),
    };
    if imports_moto(&python) {
        return Some(python);
    }
    let why = if named {
        format!("XLENS_S3_PYTHON={} cannot import moto.server", python.display())
    } else {
        "no python with moto's server (python3 cannot import moto.server; set XLENS_S3_PYTHON to an interpreter \
         that can)"
            .to_owned()
    };
    assert!(!required, "XLENS_REQUIRE_S3 is set but {why}");
    eprintln!("skipped: {why}");
    None
}

/// A running moto server, killed (and waited for) when dropped.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    port: u16,
}

impl S3Server {
    /// Starts moto's server with `python` on a free loopback port and waits until it accepts
    /// connections.
    pub fn start(python: &Path) -> std::io::Result<S3Server> {
        let port = free_port();
        let child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut server = S3Server { child, port };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait()? {
                return Err(std::io::Error::other(format!("moto's server on port {port} exited: {status}")));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(std::io::Error::other(format!(
                    "moto's server on port {port} did not listen within {} s",
                    READY_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// Its endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment that points `object_store`'s S3 client (and so xlens' `s3://` URLs) at
    /// this server, with moto's test credentials.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        env_for(&self.endpoint())
    }

    /// Creates the bucket `name` (an unsigned `PUT /name`, which moto accepts).
    pub fn create_bucket(&self, name: &str) -> std::io::Result<()> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        write!(
            stream,
            "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let status = answer.lines().next().unwrap_or_default();
        if status.split_whitespace().nth(1) == Some("200") {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("creating bucket {name}: {status}")))
        }
    }
}

/// The environment of an S3 endpoint at `endpoint` with moto's test credentials (also what a
/// test gives for a store that cannot be reached, with a closed port's endpoint).
pub fn env_for(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT", endpoint.to_owned()),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
    ]
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
