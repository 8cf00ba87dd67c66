//! `xlens snapshot` (continuous profiling): against a real JAX program, whose CPU runtime
//! accepts the calls but buffers nothing (a clear error, exit 1, no run left), and against a
//! test `ProfilerService` in Rust, built from the same messages, that serves a recorded XSpace
//! (the run written is the recording, and its scan is the recording's scan). The same service
//! answers `Profile` as a pod's host that can write to an object store does: it writes the
//! recording into the `s3://` repository root it is sent (moto's server, `xlens_testkit::s3`),
//! which is how `xlens capture --logdir s3://…` meets a target that writes the run itself.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use xlens::capture::proto::{
    ContinuousProfilingResponse, GetSnapshotRequest, ProfileRequest, ProfileResponse, StopContinuousProfilingRequest,
    StopContinuousProfilingResponse,
};
use xlens::{ScanRequest, scan_path};
use xlens_testkit::jax::{TrainServer, free_port, jax_python};
use xlens_testkit::s3::{S3Server, s3_python};

/// The recording the test service serves.
const RECORDED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/tpu/tpu_healthy/host0.xplane.pb");

fn xlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).output().unwrap()
}

fn logdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-snapshot-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The run directories of a logdir.
fn runs(logdir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(logdir.join("plugins/profile"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

/// A real program: start and stop are accepted, and take says that the target returned no
/// data, exits 1 and leaves no run.
#[test]
fn a_cpu_program_returns_no_snapshot_data() {
    let Some(python) = jax_python() else { return };
    let server = TrainServer::start(&python, None).unwrap();
    let target = server.target();
    let dir = logdir("cpu");
    let dir_arg = dir.display().to_string();
    let start = xlens(&["snapshot", "start", &target]);
    assert_eq!(start.status.code(), Some(0), "{}", String::from_utf8_lossy(&start.stderr));
    std::thread::sleep(Duration::from_millis(500));
    let take = xlens(&["snapshot", "take", &target, "--logdir", &dir_arg]);
    let stderr = String::from_utf8_lossy(&take.stderr);
    assert_eq!(take.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no continuous-profiling data"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(runs(&dir).is_empty(), "no run is left: {:?}", runs(&dir));
    let stop = xlens(&["snapshot", "stop", &target]);
    assert_eq!(stop.status.code(), Some(0), "{}", String::from_utf8_lossy(&stop.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A closed port: start fails with the connection's error, exit 1.
#[test]
fn a_closed_port_cannot_start() {
    let closed = format!("localhost:{}", free_port());
    let o = xlens(&["snapshot", "start", &closed, "--timeout", "5s"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

/// The test service: answers the three continuous-profiling calls; `GetSnapshot` returns the
/// recording as the response's XSpace once profiling was started. `Profile` with an `s3://`
/// repository root writes the recording to `<root>/<session>/<host>.xplane.pb` in the store
/// (with `store`: the Python that puts it with boto3, and the store's environment) and answers
/// with nothing returned, as a target that writes into a shared bucket does; any other root is
/// refused.
#[derive(Clone)]
struct Recorded {
    space: Bytes,
    started: Arc<AtomicBool>,
    store: Option<Arc<Store>>,
}

/// The Python that writes into the test store, and the store's environment.
type Store = (PathBuf, Vec<(&'static str, String)>);

type Answer<T> = Pin<Box<dyn Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send>>;

struct Start(Recorded);
struct Take(Recorded);
struct Stop(Recorded);
struct Write(Recorded);

impl tonic::server::UnaryService<ProfileRequest> for Write {
    type Response = ProfileResponse;
    type Future = Answer<Self::Response>;
    fn call(&mut self, request: tonic::Request<ProfileRequest>) -> Self::Future {
        let request = request.into_inner();
        let store = self.0.store.clone();
        Box::pin(async move {
            let (Some(store), Some(rest)) = (store, request.repository_root.strip_prefix("s3://")) else {
                return Err(tonic::Status::internal(format!("cannot write to {}", request.repository_root)));
            };
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let key = format!("{prefix}/{}/{}.xplane.pb", request.session_id, request.host_name);
            let (python, env) = (store.0.clone(), store.1.clone());
            let bucket = bucket.to_owned();
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                let put = "import os, sys, boto3; boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT'])\
                           .upload_file(sys.argv[1], sys.argv[2], sys.argv[3])";
                let mut command = Command::new(python);
                command.args(["-c", put, RECORDED, &bucket, &key]);
                for (k, v) in &env {
                    command.env(k, v);
                }
                let _ = tx.send(command.output());
            });
            match rx.await {
                Ok(Ok(o)) if o.status.success() => Ok(tonic::Response::new(ProfileResponse::default())),
                other => Err(tonic::Status::internal(format!("the test service could not write: {other:?}"))),
            }
        })
    }
}

impl tonic::server::UnaryService<ProfileRequest> for Start {
    type Response = ContinuousProfilingResponse;
    type Future = Answer<Self::Response>;
    fn call(&mut self, _: tonic::Request<ProfileRequest>) -> Self::Future {
        self.0.started.store(true, Ordering::SeqCst);
        Box::pin(async { Ok(tonic::Response::new(ContinuousProfilingResponse {})) })
    }
}

impl tonic::server::UnaryService<GetSnapshotRequest> for Take {
    type Response = ProfileResponse;
    type Future = Answer<Self::Response>;
    fn call(&mut self, _: tonic::Request<GetSnapshotRequest>) -> Self::Future {
        let xspace = if self.0.started.load(Ordering::SeqCst) { self.0.space.clone() } else { Bytes::new() };
        Box::pin(async move { Ok(tonic::Response::new(ProfileResponse { xspace, ..ProfileResponse::default() })) })
    }
}

impl tonic::server::UnaryService<StopContinuousProfilingRequest> for Stop {
    type Response = StopContinuousProfilingResponse;
    type Future = Answer<Self::Response>;
    fn call(&mut self, _: tonic::Request<StopContinuousProfilingRequest>) -> Self::Future {
        self.0.started.store(false, Ordering::SeqCst);
        Box::pin(async { Ok(tonic::Response::new(StopContinuousProfilingResponse {})) })
    }
}

impl Service<http::Request<Body>> for Recorded {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let me = self.clone();
        Box::pin(async move {
            Ok(match request.uri().path() {
                "/tensorflow.ProfilerService/StartContinuousProfiling" => {
                    tonic::server::Grpc::new(tonic_prost::ProstCodec::default()).unary(Start(me), request).await
                }
                "/tensorflow.ProfilerService/GetSnapshot" => {
                    tonic::server::Grpc::new(tonic_prost::ProstCodec::default()).unary(Take(me), request).await
                }
                "/tensorflow.ProfilerService/StopContinuousProfiling" => {
                    tonic::server::Grpc::new(tonic_prost::ProstCodec::default()).unary(Stop(me), request).await
                }
                "/tensorflow.ProfilerService/Profile" => {
                    tonic::server::Grpc::new(tonic_prost::ProstCodec::default()).unary(Write(me), request).await
                }
                _ => tonic::Status::unimplemented("not a call of this test service").into_http(),
            })
        })
    }
}

/// The test service on a free loopback port; dropped, it shuts down.
struct TestService {
    port: u16,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: tokio::runtime::Runtime,
}

impl TestService {
    fn start(space: Bytes) -> TestService {
        TestService::start_with(space, None)
    }

    /// [`TestService::start`], writing to the store the Python and environment of `store` reach.
    fn start_with(space: Bytes, store: Option<Store>) -> TestService {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let port = free_port();
        let (shutdown, signal) = tokio::sync::oneshot::channel::<()>();
        let service = Recorded { space, started: Arc::new(AtomicBool::new(false)), store: store.map(Arc::new) };
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        runtime.spawn(async move {
            let _ = tonic::transport::Server::builder()
                .serve_with_shutdown(addr, service, async move {
                    let _ = signal.await;
                })
                .await;
        });
        // Serving once the port accepts.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(std::time::Instant::now() < deadline, "the test service did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(20));
        }
        TestService { port, shutdown: Some(shutdown), runtime }
    }
}

impl Drop for TestService {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        let _ = &self.runtime;
    }
}

/// A service that returns data: take before start is a clear error (no data); after start,
/// take writes one run whose host file is the recording and whose scan equals scanning the
/// recording; stop is accepted.
#[test]
fn a_snapshot_is_saved_as_a_run_and_scanned() {
    let recorded = std::fs::read(RECORDED).unwrap();
    let service = TestService::start(Bytes::from(recorded.clone()));
    let target = format!("127.0.0.1:{}", service.port);
    let dir = logdir("served");
    let dir_arg = dir.display().to_string();

    let early = xlens(&["snapshot", "take", &target, "--logdir", &dir_arg, "--session", "early"]);
    assert_eq!(early.status.code(), Some(1), "{}", String::from_utf8_lossy(&early.stderr));
    assert!(runs(&dir).is_empty());

    assert_eq!(xlens(&["snapshot", "start", &target]).status.code(), Some(0));
    let take = xlens(&["snapshot", "take", &target, "--logdir", &dir_arg, "--session", "snap", "--json"]);
    assert_eq!(take.status.code(), Some(0), "{}", String::from_utf8_lossy(&take.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&take.stdout).unwrap();
    let run_dir = PathBuf::from(doc["run_dir"].as_str().unwrap());
    assert_eq!(run_dir, std::path::absolute(dir.join("plugins/profile/snap")).unwrap());
    let host = format!("127.0.0.1_{}", service.port);
    let file = run_dir.join(format!("{host}.xplane.pb"));
    assert_eq!(std::fs::read(&file).unwrap(), recorded, "the run holds the recording");
    let files: Vec<_> = std::fs::read_dir(&run_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(doc["targets"][0]["status"], "ok");

    // The report printed is the scan of the recording under the target's host name.
    let copy = logdir("served-copy");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(RECORDED, copy.join(format!("{host}.xplane.pb"))).unwrap();
    let mut expected = serde_json::to_value(scan_path(&ScanRequest::new(&copy)).unwrap().report).unwrap();
    let mut printed = doc["report"].clone();
    // The run's name is its directory's: "snap" and the copy's.
    for doc in [&mut expected, &mut printed] {
        doc["profile"]["run"] = serde_json::Value::Null;
    }
    assert_eq!(printed, expected);
    let rescanned = serde_json::to_value(scan_path(&ScanRequest::new(&run_dir)).unwrap().report).unwrap();
    assert_eq!(doc["report"], rescanned, "the printed report is the run's scan");

    assert_eq!(xlens(&["snapshot", "stop", &target]).status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&copy);
}

/// A target that writes the run into the object store itself (the test service, as a pod's host
/// sharing a bucket): `xlens capture --logdir s3://…` sends it `<url>/plugins/profile` as its
/// repository root, finds the host file there (its size read from the store), puts nothing
/// itself, and scans the run read from the store; `snapshot take` into the same store puts the
/// returned buffer there.
#[test]
fn a_target_that_writes_into_the_store_itself() {
    let Some(s3_python) = s3_python() else { return };
    let store = S3Server::start(&s3_python).unwrap();
    store.create_bucket("pod").unwrap();
    let env = store.env();
    let recorded = std::fs::read(RECORDED).unwrap();
    let service = TestService::start_with(Bytes::from(recorded.clone()), Some((s3_python, env.clone())));
    let target = format!("127.0.0.1:{}", service.port);
    let host = format!("127.0.0.1_{}", service.port);
    let xlens_env = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_xlens"));
        command.args(args);
        for (k, v) in &env {
            command.env(k, v);
        }
        command.output().unwrap()
    };

    let o = xlens_env(&[
        "capture",
        &target,
        "--duration",
        "100ms",
        "--logdir",
        "s3://pod/pod-logs",
        "--session",
        "written",
        "--scan",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let run_dir = "s3://pod/pod-logs/plugins/profile/written";
    assert_eq!(doc["run_dir"], run_dir);
    let row = &doc["targets"][0];
    assert_eq!(row["status"], "ok", "{row}");
    assert_eq!(row["file"].as_str(), Some(format!("{run_dir}/{host}.xplane.pb").as_str()));
    assert_eq!(row["bytes"].as_u64(), Some(recorded.len() as u64));
    let afterwards = xlens_env(&["scan", run_dir, "--format", "json"]);
    assert!(afterwards.status.success(), "{}", String::from_utf8_lossy(&afterwards.stderr));
    let afterwards: serde_json::Value = serde_json::from_slice(&afterwards.stdout).unwrap();
    assert_eq!(doc["report"], afterwards);
    assert_eq!(doc["report"]["profile"]["hosts"][0], host.as_str());

    assert_eq!(xlens_env(&["snapshot", "start", &target]).status.code(), Some(0));
    let take = xlens_env(&["snapshot", "take", &target, "--logdir", "s3://pod/snaps", "--session", "snap", "--json"]);
    assert_eq!(take.status.code(), Some(0), "{}", String::from_utf8_lossy(&take.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&take.stdout).unwrap();
    assert_eq!(doc["run_dir"], "s3://pod/snaps/plugins/profile/snap");
    assert_eq!(doc["targets"][0]["bytes"].as_u64(), Some(recorded.len() as u64));
    assert_eq!(doc["report"]["profile"]["hosts"][0], host.as_str());
}
