//! One target's connection to its `ProfilerService`.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::error::{Error, ErrorKind};
use crate::proto::profiler_service_client::ProfilerServiceClient;
use crate::proto::{GetSnapshotRequest, ProfileRequest, ProfileResponse, StopContinuousProfilingRequest};
use crate::target::Target;

/// The tool a capture asks the service for: the XSpace (`<host>.xplane.pb`), which is what
/// XProf's own client asks for and what xlens reads.
pub const TRACE_TOOL: &str = "xplane.pb";

/// A connection to one target's `ProfilerService`. The on-demand capture is
/// [`ProfilerClient::profile`]; continuous profiling is
/// [`ProfilerClient::start_continuous`], [`ProfilerClient::snapshot`] and
/// [`ProfilerClient::stop_continuous`].
#[derive(Debug, Clone)]
pub struct ProfilerClient {
    target: Target,
    inner: ProfilerServiceClient<Channel>,
}

impl ProfilerClient {
    /// Connects to `target`, giving up after `timeout`. The connection is plain HTTP/2, as
    /// profiler servers listen; responses up to [`crate::limits::MAX_TRACE_BYTES`] are read.
    pub async fn connect(target: &Target, timeout: Duration) -> Result<ProfilerClient, Error> {
        let name = target.to_string();
        let endpoint = Endpoint::from_shared(target.uri())
            .map_err(|e| Error::new(Some(&name), ErrorKind::Connect(chain(&e))))?
            .connect_timeout(timeout);
        let channel = match tokio::time::timeout(timeout, endpoint.connect()).await {
            Err(_) => return Err(Error::new(Some(&name), ErrorKind::Timeout(timeout))),
            Ok(Err(e)) => return Err(Error::new(Some(&name), ErrorKind::Connect(chain(&e)))),
            Ok(Ok(channel)) => channel,
        };
        let limit = usize::try_from(crate::limits::MAX_TRACE_BYTES).unwrap_or(usize::MAX);
        let inner = ProfilerServiceClient::new(channel).max_decoding_message_size(limit);
        Ok(ProfilerClient { target: target.clone(), inner })
    }

    /// The target this client talks to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs `Profile`: the service traces for `request.duration_ms`, then answers (having
    /// written the trace under `request.repository_root`, or returning it in the response).
    /// No answer within `timeout` is [`ErrorKind::Timeout`]; the service's deadline is set to
    /// the same.
    pub async fn profile(&mut self, request: ProfileRequest, timeout: Duration) -> Result<ProfileResponse, Error> {
        let mut request = tonic::Request::new(request);
        request.set_timeout(timeout);
        let answer = tokio::time::timeout(timeout, self.inner.profile(request)).await;
        self.finish(answer, timeout)
    }

    /// Runs `StartContinuousProfiling`: the target starts keeping the last window of its
    /// traces in a circular buffer, until [`ProfilerClient::stop_continuous`].
    pub async fn start_continuous(&mut self, request: ProfileRequest, timeout: Duration) -> Result<(), Error> {
        let mut request = tonic::Request::new(request);
        request.set_timeout(timeout);
        let answer = tokio::time::timeout(timeout, self.inner.start_continuous_profiling(request)).await;
        self.finish(answer, timeout).map(drop)
    }

    /// Runs `GetSnapshot`: what the target's continuous-profiling buffer holds now.
    pub async fn snapshot(&mut self, session: &str, timeout: Duration) -> Result<ProfileResponse, Error> {
        let mut request = tonic::Request::new(GetSnapshotRequest { snapshot_session_id: session.to_owned() });
        request.set_timeout(timeout);
        let answer = tokio::time::timeout(timeout, self.inner.get_snapshot(request)).await;
        self.finish(answer, timeout)
    }

    /// Runs `StopContinuousProfiling`.
    pub async fn stop_continuous(&mut self, timeout: Duration) -> Result<(), Error> {
        let mut request = tonic::Request::new(StopContinuousProfilingRequest {});
        request.set_timeout(timeout);
        let answer = tokio::time::timeout(timeout, self.inner.stop_continuous_profiling(request)).await;
        self.finish(answer, timeout).map(drop)
    }

    /// A call's answer, or its failure as this crate's error.
    fn finish<T>(
        &self,
        answer: Result<Result<tonic::Response<T>, tonic::Status>, tokio::time::error::Elapsed>,
        timeout: Duration,
    ) -> Result<T, Error> {
        match answer {
            Err(_) => Err(self.error(ErrorKind::Timeout(timeout))),
            Ok(Err(status)) => Err(self.status_error(&status, timeout)),
            Ok(Ok(response)) => Ok(response.into_inner()),
        }
    }

    fn error(&self, kind: ErrorKind) -> Error {
        Error::new(Some(&self.target.to_string()), kind)
    }

    /// A failed call as this crate's error: a connection that could not be made (the channel
    /// connects lazily again after a drop) is [`ErrorKind::Connect`], a deadline is
    /// [`ErrorKind::Timeout`], anything else the service's status.
    fn status_error(&self, status: &tonic::Status, timeout: Duration) -> Error {
        use tonic::Code;
        match status.code() {
            // The deadline passed, said by the service or by tonic's own timer on the call.
            Code::DeadlineExceeded => self.error(ErrorKind::Timeout(timeout)),
            Code::Cancelled if status.message() == "Timeout expired" => self.error(ErrorKind::Timeout(timeout)),
            Code::Unavailable if is_transport(status) => self.error(ErrorKind::Connect(chain(status))),
            code => self.error(ErrorKind::Status {
                code: format!("{code:?}"),
                message: status.message().split_whitespace().collect::<Vec<_>>().join(" "),
            }),
        }
    }
}

/// True when the status came from the connection, not from the service.
fn is_transport(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_some()
}

/// An error and its sources on one line, each said once.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        if !text.is_empty() && !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}
