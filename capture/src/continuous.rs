//! Continuous profiling: the calls XProf's `xprof.api.continuous_profiling_snapshot` makes
//! (`StartContinuousProfiling`, `GetSnapshot`, `StopContinuousProfiling`). A target keeps the
//! last window of its device traces in a circular buffer; a snapshot saves the buffer as a run,
//! exactly as an on-demand capture does.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::client::{ProfilerClient, TRACE_TOOL};
use crate::error::{Error, ErrorKind};
use crate::proto::ProfileRequest;
use crate::proto::profile_options::AdvancedConfigValue;
use crate::proto::profile_options::advanced_config_value::Value;
use crate::session::{Call, CaptureSpec, Captured, Options, capture_with, check_targets};
use crate::target::Target;

/// The window XProf's client names when it starts continuous profiling; the target keeps
/// tracing until it is stopped, whatever the window says.
const START_WINDOW: Duration = Duration::from_secs(2);

/// One target's answer to a start or a stop.
#[derive(Debug)]
pub struct Control {
    /// The target.
    pub target: Target,
    /// Why the call failed, when it did.
    pub error: Option<Error>,
}

/// Starts continuous profiling on every target (in parallel), with the tracer levels XProf's
/// client sends: host and Python tracing off, device tracing on, the TPU's circular buffer on.
/// Each target's answer in the targets' order; the error is the request's (no target, a target
/// twice, options out of range).
pub fn start_continuous(targets: &[Target], options: &Options) -> Result<Vec<Control>, Error> {
    check_targets(targets)?;
    options.validate()?;
    let timeout = options.timeout;
    let opts = Options { duration: START_WINDOW, host_tracer_level: 0, python_tracer_level: 0, ..options.clone() };
    let mut profile_options = opts.profile_options();
    profile_options.advanced_configuration = BTreeMap::from([(
        "tpu_circular_buffer_tracing".to_owned(),
        AdvancedConfigValue { value: Some(Value::BoolValue(true)) },
    )]);
    control(targets, timeout, move |mut client, target| {
        let request = ProfileRequest {
            duration_ms: START_WINDOW.as_millis() as u64,
            max_events: crate::limits::MAX_EVENTS,
            tools: vec![TRACE_TOOL.to_owned()],
            opts: Some(profile_options.clone()),
            host_name: target.host_name(),
            ..ProfileRequest::default()
        };
        async move { client.start_continuous(request, timeout).await }
    })
}

/// Stops continuous profiling on every target (in parallel).
pub fn stop_continuous(targets: &[Target], timeout: Duration) -> Result<Vec<Control>, Error> {
    check_targets(targets)?;
    if timeout.is_zero() || timeout > crate::limits::MAX_TIMEOUT {
        return Err(Error::new(
            None,
            ErrorKind::Options(format!(
                "the timeout must be from 1 ms to {} ms",
                crate::limits::MAX_TIMEOUT.as_millis()
            )),
        ));
    }
    control(targets, timeout, move |mut client, _| async move { client.stop_continuous(timeout).await })
}

/// Saves every target's continuous-profiling buffer as a run,
/// `<logdir>/plugins/profile/<session>/<host>.xplane.pb`, as [`crate::capture`] does (the
/// window and tracer levels of `spec.options` are not used; its timeout and attempts are). A
/// target that returns no trace is [`crate::Status::Empty`] with
/// [`ErrorKind::NoSnapshotData`], never an empty host file.
pub fn snapshot(spec: &CaptureSpec) -> Result<Captured, Error> {
    capture_with(spec, Call::Snapshot)
}

/// Connects to each target and makes one call, all in parallel on a current-thread runtime.
fn control<F, Fut>(targets: &[Target], timeout: Duration, call: F) -> Result<Vec<Control>, Error>
where
    F: Fn(ProfilerClient, Target) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io(None, "the capture's runtime", e))?;
    let answers = runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, target) in targets.iter().enumerate() {
            let (target, call) = (target.clone(), call.clone());
            tasks.spawn(async move {
                let answer = match ProfilerClient::connect(&target, timeout).await {
                    Ok(client) => call(client, target).await,
                    Err(e) => Err(e),
                };
                (i, answer)
            });
        }
        let mut answers: Vec<Option<Result<(), Error>>> = targets.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((i, answer)) = joined {
                answers[i] = Some(answer);
            }
        }
        answers
    });
    Ok(targets
        .iter()
        .zip(answers)
        .map(|(target, answer)| Control {
            target: target.clone(),
            error: match answer {
                Some(Ok(())) => None,
                Some(Err(e)) => Some(e),
                None => {
                    Some(Error::new(Some(&target.to_string()), ErrorKind::Options("the call's task failed".into())))
                }
            },
        })
        .collect())
}
