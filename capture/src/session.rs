//! One on-demand capture: several targets at once, in one session, into one run directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::{ProfilerClient, TRACE_TOOL};
use crate::error::{Error, ErrorKind};
use crate::limits;
use crate::proto::{ProfileOptions, ProfileRequest};
use crate::target::Target;

/// The suffix of a host file in a run directory.
const HOST_FILE_SUFFIX: &str = ".xplane.pb";

/// The pause before another attempt at a target that was down or returned an empty trace.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// How a capture traces: its window, the tracers' levels, when it starts, how hard it tries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The capture window (the service traces this long, then answers).
    pub duration: Duration,
    /// Host (CPU) tracing: 0 off, 1 the user's annotations only, 2 also the high-level
    /// program execution (the default), 3 also the low-level (verbose) details.
    pub host_tracer_level: u32,
    /// Device tracing: 0 off, 1 on (the default).
    pub device_tracer_level: u32,
    /// Python function calls: 0 off (the default), 1 traced (costly).
    pub python_tracer_level: u32,
    /// A wait before the capture starts (the same for every target).
    pub delay: Duration,
    /// Attempts per target: a target that is down or returns an empty trace is tried again, up
    /// to this many times in all.
    pub attempts: u32,
    /// How long to wait for one attempt's answer, window included.
    pub timeout: Duration,
}

impl Default for Options {
    /// XProf's defaults: a 2 s window, host level 2, device level 1, no Python tracing, no
    /// delay, 3 attempts, a 60 s timeout.
    fn default() -> Options {
        Options {
            duration: Duration::from_secs(2),
            host_tracer_level: 2,
            device_tracer_level: 1,
            python_tracer_level: 0,
            delay: Duration::ZERO,
            attempts: 3,
            timeout: Duration::from_secs(60),
        }
    }
}

impl Options {
    /// Checks every option against its range ([`crate::limits`]) and the timeout against the
    /// window it must outlast.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what: String| Err(Error::new(None, ErrorKind::Options(what)));
        let ms = |d: Duration| format!("{} ms", d.as_millis());
        if self.duration < Duration::from_millis(1) || self.duration > limits::MAX_DURATION {
            return bad(format!(
                "the capture duration must be from 1 ms to {}, not {}",
                ms(limits::MAX_DURATION),
                ms(self.duration)
            ));
        }
        if self.delay > limits::MAX_DELAY {
            return bad(format!("the delay must be at most {}, not {}", ms(limits::MAX_DELAY), ms(self.delay)));
        }
        if self.timeout.is_zero() || self.timeout > limits::MAX_TIMEOUT {
            return bad(format!(
                "the timeout must be from 1 ms to {}, not {}",
                ms(limits::MAX_TIMEOUT),
                ms(self.timeout)
            ));
        }
        if self.timeout <= self.duration {
            return bad(format!(
                "the timeout ({}) must be longer than the capture duration ({}): a service answers only after \
                 its window",
                ms(self.timeout),
                ms(self.duration)
            ));
        }
        if self.attempts == 0 || self.attempts > limits::MAX_ATTEMPTS {
            return bad(format!("attempts must be from 1 to {}, not {}", limits::MAX_ATTEMPTS, self.attempts));
        }
        for (what, level, max) in [
            ("host tracer", self.host_tracer_level, limits::MAX_HOST_TRACER_LEVEL),
            ("device tracer", self.device_tracer_level, limits::MAX_DEVICE_TRACER_LEVEL),
            ("Python tracer", self.python_tracer_level, limits::MAX_PYTHON_TRACER_LEVEL),
        ] {
            if level > max {
                return bad(format!("the {what} level must be from 0 to {max}, not {level}"));
            }
        }
        Ok(())
    }

    /// The profiler options sent to every target (version 1, so that the levels count; HLO
    /// protos on, which the analyses need).
    pub fn profile_options(&self) -> ProfileOptions {
        ProfileOptions {
            version: 1,
            host_tracer_level: self.host_tracer_level,
            device_tracer_level: self.device_tracer_level,
            python_tracer_level: self.python_tracer_level,
            enable_hlo_proto: true,
            duration_ms: duration_ms(self.duration),
            ..ProfileOptions::default()
        }
    }
}

/// What to capture, where to, under which session name.
#[derive(Clone, Debug)]
pub struct CaptureSpec {
    /// The targets, captured in parallel (one host file each).
    pub targets: Vec<Target>,
    /// The logdir; the run goes to `<logdir>/plugins/profile/<session>/`.
    pub logdir: PathBuf,
    /// The session (run directory) name, e.g. [`session_name`] of now.
    pub session: String,
    /// How to trace.
    pub options: Options,
    /// A logdir URL (`s3://bucket/prefix`, `gs://…`) the targets are asked to write the run into
    /// themselves, as XProf's client asks: the repository root sent is `<url>/plugins/profile`,
    /// so a target that can write there (a TPU pod's hosts sharing a bucket) leaves
    /// `<url>/plugins/profile/<session>/<host>.xplane.pb` behind it ([`TargetCapture::stored`]).
    /// A target that returns its trace instead, or answers with an error (one that cannot
    /// write to the URL: jax's CPU runtime answers `Internal`, "File system scheme 's3' not
    /// implemented", after its window), is captured into `logdir` as without a URL (a second
    /// window, for the latter), for the caller to upload. This crate never reads or writes the
    /// store itself. `None`: every target writes into, or is kept in, `logdir`.
    pub remote_logdir: Option<String>,
}

impl CaptureSpec {
    /// Checks the request before anything is sent: the options ([`Options::validate`]), the
    /// session name ([`validate_session_name`]), and the targets (at least one, at most
    /// [`limits::MAX_TARGETS`], no two that would be the same host of the run).
    pub fn validate(&self) -> Result<(), Error> {
        self.options.validate()?;
        validate_session_name(&self.session)?;
        check_targets(&self.targets)
    }
}

/// How one target's capture ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Its host file is in the run.
    Ok,
    /// Every attempt returned an empty trace.
    Empty,
    /// It could not be captured (down, timed out, refused, or its file could not be kept).
    Failed,
}

impl Status {
    /// `"ok"`, `"empty"` or `"failed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Empty => "empty",
            Status::Failed => "failed",
        }
    }
}

/// One target's capture.
#[derive(Debug)]
pub struct TargetCapture {
    /// The target.
    pub target: Target,
    /// Its host name in the run ([`Target::host_name`]).
    pub host: String,
    /// How it ended.
    pub status: Status,
    /// Its host file in the run, when it was captured (with [`TargetCapture::stored`], the
    /// URL the target wrote it to).
    pub file: Option<PathBuf>,
    /// The host file's size in bytes (0 when there is none).
    pub bytes: u64,
    /// Why it was not captured.
    pub error: Option<Error>,
    /// The attempts made.
    pub attempts: u32,
    /// True when the target wrote its host file into [`CaptureSpec::remote_logdir`] itself:
    /// `file` is then that URL and `bytes` is 0 (not known here).
    pub stored: bool,
}

/// A capture's run: where it is, and each target's outcome, in the order the targets were given.
#[derive(Debug)]
pub struct Captured {
    /// `<logdir>/plugins/profile/<session>` (absolute). Removed again when no target was
    /// captured, so that no empty run is left.
    pub run_dir: PathBuf,
    /// The session name.
    pub session: String,
    /// The capture window asked of every target.
    pub duration: Duration,
    /// Each target's outcome.
    pub targets: Vec<TargetCapture>,
}

impl Captured {
    /// The targets not captured, each as `target: why`, joined with `; ` (empty when every
    /// target was): what an error line says when nothing was captured.
    pub fn failures(&self) -> String {
        let why = |t: &TargetCapture| t.error.as_ref().map_or_else(String::new, |e| e.reason());
        self.targets
            .iter()
            .filter(|t| t.status != Status::Ok)
            .map(|t| format!("{}: {}", t.target, why(t)))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The targets whose host file is in the run.
    pub fn captured(&self) -> usize {
        self.targets.iter().filter(|t| t.status == Status::Ok).count()
    }
}

/// A session name as XProf gives one: the UTC time `YYYY_MM_DD_HH_MM_SS`, so that a logdir's
/// runs sort by capture time.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let at = UNIX_EPOCH + Duration::from_secs(1_764_934_055);
/// assert_eq!(xlens_capture::session_name(at), "2025_12_05_11_27_35");
/// ```
pub fn session_name(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}_{m:02}_{d:02}_{:02}_{:02}_{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Checks that `name` can name a run directory: one path component, not hidden, no control
/// characters, at most [`limits::MAX_SESSION_CHARS`] characters.
pub fn validate_session_name(name: &str) -> Result<(), Error> {
    let bad = |why: &str| Err(Error::new(None, ErrorKind::Options(format!("{name:?} cannot name a session: {why}"))));
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.chars().count() > limits::MAX_SESSION_CHARS {
        return bad(&format!("longer than {} characters", limits::MAX_SESSION_CHARS));
    }
    if name.contains(['/', '\\']) || name.chars().any(char::is_control) {
        return bad("it is one directory name, without slashes or control characters");
    }
    if name.starts_with('.') {
        return bad("a name starting with '.' is hidden (or the directory itself, or its parent)");
    }
    Ok(())
}

/// Captures every target of `spec` in parallel, in one session, into
/// `<logdir>/plugins/profile/<session>/<host>.xplane.pb`.
///
/// The error is the request's ([`CaptureSpec::validate`], or a run directory that cannot be
/// made); each target's own failure is in its [`TargetCapture`], and
/// the others are kept. Each target's service writes its trace into a staging directory beside
/// the run (`<logdir>/.xlens-capture-<session>-<pid>/`), or returns it in its answer (written
/// under a temporary name); the file is then linked into the run under its final name, which
/// fails rather than overwrites, and the staging directory is removed.
pub fn capture(spec: &CaptureSpec) -> Result<Captured, Error> {
    capture_with(spec, Call::Profile)
}

/// Which call brings each target's trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// `Profile`: an on-demand capture of the window.
    Profile,
    /// `GetSnapshot`: the continuous-profiling buffer as it is now.
    Snapshot,
}

/// [`capture`] with each target's trace brought by `call`.
pub(crate) fn capture_with(spec: &CaptureSpec, call: Call) -> Result<Captured, Error> {
    spec.validate()?;
    let logdir = std::path::absolute(&spec.logdir).map_err(|e| Error::io(None, &spec.logdir, e))?;
    let run_dir = logdir.join("plugins").join("profile").join(&spec.session);
    std::fs::create_dir_all(&run_dir).map_err(|e| Error::io(None, &run_dir, e))?;
    let staging = logdir.join(format!(".xlens-capture-{}-{}", spec.session, std::process::id()));
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(None, &staging, e))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io(None, "the capture's runtime", e))?;
    let context = Arc::new(Context {
        run_dir: run_dir.clone(),
        staging: staging.clone(),
        session: spec.session.clone(),
        options: spec.options.clone(),
        call,
        remote_root: spec.remote_logdir.as_ref().map(|url| format!("{}/plugins/profile", url.trim_end_matches('/'))),
    });
    let targets = runtime.block_on(capture_all(&spec.targets, context));
    // Best effort: what is left there is no part of the run.
    let _ = std::fs::remove_dir_all(&staging);
    if targets.iter().all(|t| t.status != Status::Ok) {
        // Nothing captured: no empty run is left behind (a run that held files is kept).
        let _ = std::fs::remove_dir(&run_dir);
    }
    Ok(Captured { run_dir, session: spec.session.clone(), duration: spec.options.duration, targets })
}

/// At least one target, at most [`limits::MAX_TARGETS`], no two with the same host name.
pub(crate) fn check_targets(targets: &[Target]) -> Result<(), Error> {
    let bad = |what: String| Err(Error::new(None, ErrorKind::Options(what)));
    if targets.is_empty() {
        return bad("no target to capture".to_owned());
    }
    if targets.len() > limits::MAX_TARGETS {
        return bad(format!("{} targets exceed the limit of {}", targets.len(), limits::MAX_TARGETS));
    }
    let mut hosts: Vec<(String, &Target)> = targets.iter().map(|t| (t.host_name(), t)).collect();
    hosts.sort();
    if let Some(pair) = hosts.windows(2).find(|w| w[0].0 == w[1].0) {
        return bad(format!("{} and {} would both be host {} of the run", pair[0].1, pair[1].1, pair[0].0));
    }
    Ok(())
}

/// What every target's capture shares.
#[derive(Debug)]
struct Context {
    run_dir: PathBuf,
    staging: PathBuf,
    session: String,
    options: Options,
    call: Call,
    /// The repository root sent to the targets when they are asked to write into a store.
    remote_root: Option<String>,
}

/// Captures the targets concurrently; the outcomes in the targets' order.
async fn capture_all(targets: &[Target], context: Arc<Context>) -> Vec<TargetCapture> {
    if !context.options.delay.is_zero() {
        tokio::time::sleep(context.options.delay).await;
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (i, target) in targets.iter().enumerate() {
        let (target, context) = (target.clone(), Arc::clone(&context));
        tasks.spawn(async move { (i, capture_target(target, &context).await) });
    }
    let mut done: Vec<Option<TargetCapture>> = targets.iter().map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        if let Ok((i, outcome)) = joined {
            done[i] = Some(outcome);
        }
    }
    done.into_iter()
        .zip(targets)
        .map(|(outcome, target)| {
            // A task that panicked: the target is failed, not lost.
            outcome.unwrap_or_else(|| TargetCapture {
                target: target.clone(),
                host: target.host_name(),
                status: Status::Failed,
                file: None,
                bytes: 0,
                error: Some(Error::new(
                    Some(&target.to_string()),
                    ErrorKind::Options("the capture task failed".into()),
                )),
                attempts: 0,
                stored: false,
            })
        })
        .collect()
}

/// What one attempt gave.
enum Attempt {
    /// The host file, in the run, and its size.
    Kept(PathBuf, u64),
    /// The URL the target wrote its host file to itself.
    Stored(String),
    /// An empty trace.
    Empty,
}

/// One target's capture, with its retries: a target that is down or returns an empty trace is
/// tried again after [`RETRY_PAUSE`], up to `options.attempts` times in all.
async fn capture_target(target: Target, context: &Context) -> TargetCapture {
    let host = target.host_name();
    let name = target.to_string();
    let mut attempts = 0;
    // Whether the target is asked to write into the store: until it answers with an error.
    let mut remote = context.remote_root.is_some();
    loop {
        attempts += 1;
        let tried = attempt(&target, &host, context, remote).await;
        let (status, error) = match tried {
            Ok(Attempt::Kept(file, bytes)) => {
                return TargetCapture {
                    target,
                    host,
                    status: Status::Ok,
                    file: Some(file),
                    bytes,
                    error: None,
                    attempts,
                    stored: false,
                };
            }
            Ok(Attempt::Stored(url)) => {
                return TargetCapture {
                    target,
                    host,
                    status: Status::Ok,
                    file: Some(PathBuf::from(url)),
                    bytes: 0,
                    error: None,
                    attempts,
                    stored: true,
                };
            }
            // The service could not write into the store: captured again into the local
            // staging logdir, at once, as one more attempt (not counted against `attempts`).
            Err(e) if remote && matches!(e.kind(), ErrorKind::Status { .. }) => {
                remote = false;
                attempts -= 1;
                continue;
            }
            Ok(Attempt::Empty) => (Status::Empty, Error::new(Some(&name), ErrorKind::EmptyTrace { attempts })),
            Err(e) if matches!(e.kind(), ErrorKind::NoSnapshotData) => {
                return TargetCapture {
                    target,
                    host,
                    status: Status::Empty,
                    file: None,
                    bytes: 0,
                    error: Some(e),
                    attempts,
                    stored: false,
                };
            }
            Err(e) => {
                let retry = matches!(e.kind(), ErrorKind::Connect(_));
                if !retry {
                    return TargetCapture {
                        target,
                        host,
                        status: Status::Failed,
                        file: None,
                        bytes: 0,
                        error: Some(e),
                        attempts,
                        stored: false,
                    };
                }
                (Status::Failed, e)
            }
        };
        if attempts >= context.options.attempts {
            return TargetCapture {
                target,
                host,
                status,
                file: None,
                bytes: 0,
                error: Some(error),
                attempts,
                stored: false,
            };
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// One `Profile` call and keeping what it gave; `remote`: the target is asked to write into
/// the store (`context.remote_root`).
async fn attempt(target: &Target, host: &str, context: &Context, remote: bool) -> Result<Attempt, Error> {
    let name = target.to_string();
    let options = &context.options;
    let mut client = ProfilerClient::connect(target, options.timeout).await?;
    let request = ProfileRequest {
        duration_ms: duration_ms(options.duration),
        max_events: limits::MAX_EVENTS,
        tools: vec![TRACE_TOOL.to_owned()],
        opts: Some(options.profile_options()),
        repository_root: match (&context.remote_root, remote) {
            (Some(root), true) => root.clone(),
            _ => context.staging.to_string_lossy().into_owned(),
        },
        session_id: context.session.clone(),
        host_name: host.to_owned(),
        ..ProfileRequest::default()
    };
    let response = match context.call {
        Call::Profile => client.profile(request, options.timeout).await?,
        Call::Snapshot => client.snapshot(&context.session, options.timeout).await?,
    };
    let file_name = format!("{host}{HOST_FILE_SUFFIX}");
    let final_path = context.run_dir.join(&file_name);
    // A service that returns the trace in its answer (as an XSpace, or as the tool's data):
    // written under a temporary name (which no reader takes for a host file), then linked in.
    let returned = Some(&response.xspace).filter(|x| !x.is_empty()).or_else(|| {
        response.tool_data.iter().find(|t| t.name.ends_with(TRACE_TOOL) && !t.data.is_empty()).map(|t| &t.data)
    });
    if let Some(data) = returned {
        if context.call == Call::Snapshot && !crate::space::has_events(data) {
            // Metadata planes without a single event: the runtime buffered nothing.
            return Err(Error::new(Some(&name), ErrorKind::NoSnapshotData));
        }
        let bytes = data.len() as u64;
        if bytes > limits::MAX_TRACE_BYTES {
            return Err(Error::new(Some(&name), ErrorKind::TooLarge { bytes }));
        }
        let temporary = context.run_dir.join(format!(".{file_name}.partial-{}", std::process::id()));
        std::fs::write(&temporary, data).map_err(|e| Error::io(Some(&name), &temporary, e))?;
        let kept = keep(&temporary, &final_path, &name);
        let _ = std::fs::remove_file(&temporary);
        kept?;
        return Ok(Attempt::Kept(final_path, bytes));
    }
    if context.call == Call::Snapshot {
        // A snapshot is returned, never written by the service: nothing returned is no data.
        return Err(Error::new(Some(&name), ErrorKind::NoSnapshotData));
    }
    if response.empty_trace {
        return Ok(Attempt::Empty);
    }
    if let (Some(root), true) = (&context.remote_root, remote) {
        // The service wrote `<repository_root>/<session>/<host>.xplane.pb` into the store.
        return Ok(Attempt::Stored(format!("{root}/{}/{file_name}", context.session)));
    }
    // The service wrote `<repository_root>/<session>/<host>.xplane.pb` itself.
    let written = context.staging.join(&context.session).join(&file_name);
    let bytes = match std::fs::metadata(&written) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::new(Some(&name), ErrorKind::NotWritten(written)));
        }
        Err(e) => return Err(Error::io(Some(&name), &written, e)),
    };
    if bytes == 0 {
        let _ = std::fs::remove_file(&written);
        return Ok(Attempt::Empty);
    }
    if bytes > limits::MAX_TRACE_BYTES {
        let _ = std::fs::remove_file(&written);
        return Err(Error::new(Some(&name), ErrorKind::TooLarge { bytes }));
    }
    keep(&written, &final_path, &name)?;
    let _ = std::fs::remove_file(&written);
    Ok(Attempt::Kept(final_path, bytes))
}

/// Gives the complete file `from` its final name `to`, never overwriting: a hard link (which
/// fails when `to` exists), else, where the file system has none, a rename after a check.
fn keep(from: &Path, to: &Path, target: &str) -> Result<(), Error> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(Error::new(Some(target), ErrorKind::Exists(to.to_path_buf())))
        }
        Err(_) if to.exists() => Err(Error::new(Some(target), ErrorKind::Exists(to.to_path_buf()))),
        Err(_) => std::fs::rename(from, to).map_err(|e| Error::io(Some(target), to, e)),
    }
}

/// Whole milliseconds (the service's unit).
fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_sort_by_time() {
        let at = |s| session_name(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970_01_01_00_00_00");
        assert_eq!(at(951_782_400), "2000_02_29_00_00_00");
        assert_eq!(at(1_798_761_599), "2026_12_31_23_59_59");
        assert!(at(1_798_761_599) < at(1_798_761_600));
    }

    #[test]
    fn session_names_are_one_visible_directory() {
        for good in ["2026_12_05_22_18_14", "run-1", "bench two"] {
            validate_session_name(good).unwrap();
        }
        for bad in ["", ".", "..", ".hidden", "a/b", "a\\b", "a\nb"] {
            assert!(validate_session_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_session_name(&"x".repeat(201)).is_err());
    }

    #[test]
    fn options_out_of_range_are_refused() {
        Options::default().validate().unwrap();
        let with = |f: fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            o.validate().unwrap_err().to_string()
        };
        assert!(with(|o| o.duration = Duration::ZERO).contains("duration"));
        assert!(with(|o| o.duration = Duration::from_secs(3600)).contains("duration"));
        assert!(with(|o| o.timeout = Duration::from_secs(1)).contains("longer than the capture duration"));
        assert!(with(|o| o.attempts = 0).contains("attempts"));
        assert!(with(|o| o.host_tracer_level = 4).contains("host tracer level"));
        assert!(with(|o| o.device_tracer_level = 2).contains("device tracer level"));
        assert!(with(|o| o.python_tracer_level = 2).contains("Python tracer level"));
        assert!(with(|o| o.delay = Duration::from_secs(7200)).contains("delay"));
    }

    #[test]
    fn targets_are_checked_as_a_whole() {
        let t = |s| Target::parse(s).unwrap();
        assert!(check_targets(&[]).is_err());
        let twice = check_targets(&[t("localhost:1"), t("localhost:1")]).unwrap_err().to_string();
        assert!(twice.contains("both be host localhost_1"), "{twice}");
        check_targets(&[t("localhost:1"), t("localhost:2")]).unwrap();
    }

    #[test]
    fn profile_options_carry_the_levels() {
        let o = Options { host_tracer_level: 3, python_tracer_level: 1, ..Options::default() }.profile_options();
        assert_eq!((o.version, o.host_tracer_level, o.device_tracer_level, o.python_tracer_level), (1, 3, 1, 1));
        assert!(o.enable_hlo_proto);
        assert_eq!(o.duration_ms, 2000);
    }

    /// A port that accepts connections but never answers: the attempt ends at the timeout, is
    /// not tried again (a slow target would only be slower), and the target is failed with it.
    #[test]
    fn a_silent_target_times_out() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Holds every connection open without a word, until the test ends.
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().take(8) {
                held.push(stream);
            }
            std::thread::sleep(Duration::from_secs(30));
        });
        let logdir = std::env::temp_dir().join(format!("xlens-capture-silent-{}", std::process::id()));
        let spec = CaptureSpec {
            targets: vec![Target::parse(&format!("127.0.0.1:{port}")).unwrap()],
            logdir: logdir.clone(),
            session: "silent".to_owned(),
            remote_logdir: None,
            options: Options {
                duration: Duration::from_millis(100),
                timeout: Duration::from_millis(600),
                ..Options::default()
            },
        };
        let started = std::time::Instant::now();
        let captured = capture(&spec).unwrap();
        let t = &captured.targets[0];
        assert_eq!((t.status, t.attempts), (Status::Failed, 1));
        let error = t.error.as_ref().unwrap();
        assert!(matches!(error.kind(), ErrorKind::Timeout(_)), "{error}");
        assert!(error.to_string().contains("no answer within 600 ms"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&logdir);
    }

    /// A closed port: every attempt fails to connect, the target is listed as failed with its
    /// error, and no empty run directory is left.
    #[test]
    fn a_closed_port_fails_without_leaving_a_run() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let logdir = std::env::temp_dir().join(format!("xlens-capture-closed-{}", std::process::id()));
        let spec = CaptureSpec {
            targets: vec![Target::parse(&format!("127.0.0.1:{port}")).unwrap()],
            logdir: logdir.clone(),
            session: "closed".to_owned(),
            remote_logdir: None,
            options: Options { duration: Duration::from_millis(100), attempts: 2, ..Options::default() },
        };
        let captured = capture(&spec).unwrap();
        let t = &captured.targets[0];
        assert_eq!((t.status, t.attempts, t.bytes), (Status::Failed, 2, 0));
        let error = t.error.as_ref().unwrap().to_string();
        assert!(error.contains("cannot connect"), "{error}");
        assert!(!captured.run_dir.exists());
        assert_eq!(std::fs::read_dir(&logdir).unwrap().count(), 1, "only plugins/profile is left");
        std::fs::remove_dir_all(&logdir).unwrap();
    }
}
