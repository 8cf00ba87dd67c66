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

/// Whether a serialized XSpace holds at least one trace event (`XSpace.planes[].lines[].events`,
/// fields 1, 3 and 4): a snapshot of a runtime that buffers nothing is a space of metadata
/// planes without one. Bytes that do not parse are taken to hold events (the scan reports them).
pub(crate) fn has_events(space: &[u8]) -> bool {
    let in_field = |message: &[u8], field: u64, found: &mut dyn FnMut(&[u8]) -> bool| -> Option<bool> {
        let mut at = message;
        while !at.is_empty() {
            let key = varint(&mut at)?;
            match key & 7 {
                0 => drop(varint(&mut at)?),
                1 => at = at.get(8..)?,
                5 => at = at.get(4..)?,
                2 => {
                    let len = usize::try_from(varint(&mut at)?).ok()?;
                    let (value, rest) = (at.get(..len)?, at.get(len..)?);
                    if key >> 3 == field && found(value) {
                        return Some(true);
                    }
                    at = rest;
                }
                _ => return None,
            }
        }
        Some(false)
    };
    let any_event = |line: &[u8]| in_field(line, 4, &mut |_| true).unwrap_or(true);
    let any_line = |plane: &[u8]| in_field(plane, 3, &mut |line| any_event(line)).unwrap_or(true);
    in_field(space, 1, &mut |plane| any_line(plane)).unwrap_or(true)
}

/// A protobuf varint from the front of `at`, which moves past it.
fn varint(at: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = at.split_first()?;
        *at = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field's key and length-delimited value.
    fn field(number: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(value.len()).unwrap()];
        out.extend_from_slice(value);
        out
    }

    #[test]
    fn a_space_without_events_has_none() {
        let line = [vec![0x08, 0x01], field(2, b"thread")].concat();
        let plane = [vec![0x08, 0x07], field(2, b"/host:CPU"), field(3, &line)].concat();
        assert!(!has_events(&field(1, &plane)));
        assert!(!has_events(&[]));
        let busy = [line.clone(), field(4, &[0x08, 0x02])].concat();
        let plane = [field(2, b"/host:CPU"), field(3, &busy)].concat();
        assert!(has_events(&[field(1, b""), field(1, &plane)].concat()));
        // Bytes that do not parse are left to the scan.
        assert!(has_events(&[0x0a, 0x7f]));
    }
}
