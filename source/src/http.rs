//! Profiles served over HTTP(S): a host file URL, or a run or logdir URL whose listing (the HTML
//! index static servers write, or the GCS/S3 public XML listing's keys) names the host files.
//! Files are read with ranged GETs ([`CHUNK_BYTES`] at a time, `ureq`), so memory grows with the
//! bytes received, never with a length a server claims; the size is checked against
//! [`MAX_REMOTE_FILE_BYTES`].

use std::io::Read;
use std::path::Path;

use bytes::Bytes;
use xlens_xplane::{Error, ErrorKind, Location as At, Result, XPLANE_SUFFIX};

use crate::{HostFile, Location, Run, Source, error::at};

/// HTTP(S) servers: a static file server's directory index, or a bucket's public XML listing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Http;

impl Source for Http {
    /// The host file, the run, or every run of the logdir (under `plugins/profile/`, else the
    /// directory itself) that holds host files, in name order.
    fn list(&self, location: &Location) -> crate::Result<Vec<Run>> {
        at(location, list_url(&location.to_string()))
    }

    /// The host file, the run, or the newest run of the logdir (the runs are listed newest
    /// first until one holds host files).
    fn discover(&self, location: &Location) -> crate::Result<Run> {
        at(location, discover_url(&location.to_string()))
    }

    /// The whole file, read in ranged GETs of [`CHUNK_BYTES`] ([`fetch_chunked`]).
    fn open(&self, location: &Location) -> crate::Result<Bytes> {
        at(location, fetch(&location.to_string()))
    }
}

/// Bytes one ranged GET asks for.
pub const CHUNK_BYTES: u64 = 8 << 20;

/// The largest host file read over HTTP (profiles past protobuf's 2 GB are 0-byte files).
pub const MAX_REMOTE_FILE_BYTES: u64 = 4 << 30;

/// The largest listing page read.
const MAX_LISTING_BYTES: u64 = 64 << 20;

fn url_error(url: &str, what: String) -> Error {
    Error::new(ErrorKind::Io(std::io::Error::other(what)), At::default().with_file(Path::new(url)))
}

fn http_error(url: &str, e: ureq::Error) -> Error {
    let kind = match &e {
        ureq::Error::StatusCode(404 | 410) => std::io::ErrorKind::NotFound,
        ureq::Error::StatusCode(401 | 403) => std::io::ErrorKind::PermissionDenied,
        _ => std::io::ErrorKind::Other,
    };
    let text = match &e {
        ureq::Error::StatusCode(404 | 410) => "no such object (HTTP 404)".to_owned(),
        ureq::Error::StatusCode(c @ (401 | 403)) => format!("access denied (HTTP {c}): check the credentials"),
        other => other.to_string(),
    };
    Error::new(ErrorKind::Io(std::io::Error::new(kind, text)), At::default().with_file(Path::new(url)))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(true).build().new_agent()
}

/// Reads at most `limit` bytes of a body into `out`; an error when there are more.
fn read_body(url: &str, body: impl Read, limit: u64, out: &mut Vec<u8>) -> Result<u64> {
    let n = body.take(limit + 1).read_to_end(out).map_err(|e| Error::io(e, Path::new(url)))? as u64;
    if n > limit {
        return Err(url_error(url, format!("more than {limit} bytes")));
    }
    Ok(n)
}

/// `bytes A-B/TOTAL` → TOTAL.
fn total_of(content_range: &str) -> Option<u64> {
    content_range.rsplit_once('/')?.1.trim().parse().ok()
}

/// The whole file at `url`, read in ranged GETs of `chunk` bytes (a server that ignores ranges
/// sends it in one response).
pub fn fetch_chunked(url: &str, chunk: u64) -> crate::Result<Bytes> {
    at(&Location::Http(url.to_owned()), fetch_ranged(url, chunk))
}

fn fetch_ranged(url: &str, chunk: u64) -> Result<Bytes> {
    let agent = agent();
    let mut out = Vec::new();
    let mut total: Option<u64> = None;
    loop {
        let start = out.len() as u64;
        let end = start + chunk.max(1) - 1;
        let response =
            agent.get(url).header("Range", &format!("bytes={start}-{end}")).call().map_err(|e| http_error(url, e))?;
        let partial = response.status().as_u16() == 206;
        let range_total = response.headers().get("content-range").and_then(|v| v.to_str().ok()).and_then(total_of);
        let body = response.into_body().into_reader();
        if !partial {
            // The whole object in one response.
            out.clear();
            read_body(url, body, MAX_REMOTE_FILE_BYTES, &mut out)?;
            break;
        }
        let Some(t) = range_total.or(total) else {
            return Err(url_error(url, "a partial response without its total size".to_owned()));
        };
        if t > MAX_REMOTE_FILE_BYTES {
            return Err(url_error(
                url,
                format!("{t} bytes, more than the {MAX_REMOTE_FILE_BYTES} a host file may have"),
            ));
        }
        total = Some(t);
        let got = read_body(url, body, chunk, &mut out)?;
        if out.len() as u64 >= t {
            out.truncate(t as usize);
            break;
        }
        if got == 0 {
            return Err(url_error(url, format!("the server stopped at byte {} of {t}", out.len())));
        }
    }
    if out.is_empty() {
        return Err(Error::new(ErrorKind::ZeroByteProfile, At::default().with_file(Path::new(url))));
    }
    Ok(Bytes::from(out))
}

/// The whole file at `url` ([`fetch_chunked`] by [`CHUNK_BYTES`]).
fn fetch(url: &str) -> Result<Bytes> {
    fetch_ranged(url, CHUNK_BYTES)
}

/// The names a listing page links to or lists as keys: `href="NAME"` and `<Key>NAME</Key>`,
/// relative to `base` (a trailing-slash URL), in order, without query or fragment.
fn listed(base: &str, page: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (open, close) in [("href=\"", "\""), ("<Key>", "</Key>")] {
        let mut rest = page;
        while let Some(at) = rest.find(open) {
            rest = &rest[at + open.len()..];
            let Some(end) = rest.find(close) else { break };
            let raw = rest[..end].split(['?', '#']).next().unwrap_or_default();
            rest = &rest[end..];
            let name = raw.strip_prefix(base).unwrap_or(raw);
            if !name.is_empty() && !name.starts_with(['/', '.']) && !name.contains("://") {
                names.push(name.to_owned());
            }
        }
    }
    names
}

fn listing(agent: &ureq::Agent, url: &str) -> Result<Vec<String>> {
    let response = agent.get(url).call().map_err(|e| http_error(url, e))?;
    let mut page = Vec::new();
    read_body(url, response.into_body().into_reader(), MAX_LISTING_BYTES, &mut page)?;
    Ok(listed(url, &String::from_utf8_lossy(&page)))
}

fn with_slash(url: &str) -> String {
    if url.ends_with('/') { url.to_owned() } else { format!("{url}/") }
}

fn last_segment(url: &str) -> Option<String> {
    url.trim_end_matches('/').rsplit('/').next().filter(|s| !s.is_empty() && !s.contains(':')).map(str::to_owned)
}

/// True for a URL that names a host file (`*.xplane.pb`, or `*.xplane.riegeli`, refused when opened).
fn is_host_file(url: &str) -> bool {
    url.ends_with(XPLANE_SUFFIX) || url.ends_with(crate::RIEGELI_SUFFIX)
}

fn is_riegeli(location: &Location) -> bool {
    location.to_string().ends_with(crate::RIEGELI_SUFFIX)
}

/// The hosts a run URL lists, sorted by host name.
fn run_hosts(agent: &ureq::Agent, run: &str) -> Result<Vec<HostFile>> {
    let mut hosts: Vec<HostFile> = listing(agent, run)?
        .into_iter()
        .filter(|n| !n.contains('/'))
        .filter_map(|n| {
            let host = crate::host_name(&n)?;
            Some(HostFile { host, location: Location::Http(format!("{run}{n}")) })
        })
        .collect();
    // By host, a host's `*.xplane.pb` before its `*.xplane.riegeli` (which the dedup drops).
    hosts.sort_by(|a, b| (&a.host, is_riegeli(&a.location)).cmp(&(&b.host, is_riegeli(&b.location))));
    hosts.dedup_by(|a, b| a.host == b.host);
    Ok(hosts)
}

/// Finds the host files behind a URL: a host file, a run directory, or a logdir (its newest run
/// under `plugins/profile/`), as [`crate::discover`] does on disk.
fn discover_url(url: &str) -> Result<Run> {
    if is_host_file(url) {
        let host = last_segment(url).and_then(|f| crate::host_name(&f)).unwrap_or_default();
        return Ok(Run { run: None, hosts: vec![HostFile { host, location: Location::Http(url.to_owned()) }] });
    }
    let agent = agent();
    let dir = with_slash(url);
    let hosts = run_hosts(&agent, &dir)?;
    if !hosts.is_empty() {
        return Ok(Run { run: last_segment(&dir), hosts });
    }
    let runs_dir = format!("{dir}plugins/profile/");
    let runs_url = if listing(&agent, &runs_dir).is_ok() { runs_dir } else { dir.clone() };
    let mut runs: Vec<String> =
        listing(&agent, &runs_url)?.into_iter().filter(|n| n.ends_with('/') && n.matches('/').count() == 1).collect();
    runs.sort();
    for run in runs.iter().rev() {
        let run_url = format!("{runs_url}{run}");
        let hosts = run_hosts(&agent, &run_url)?;
        if !hosts.is_empty() {
            return Ok(Run { run: last_segment(&run_url), hosts });
        }
    }
    Err(Error::new(ErrorKind::NoProfiles, At::default().with_file(Path::new(url))))
}

/// The host file, the run, or every run of the logdir that holds host files, in name order.
fn list_url(url: &str) -> Result<Vec<Run>> {
    if is_host_file(url) {
        return discover_url(url).map(|run| vec![run]);
    }
    let agent = agent();
    let dir = with_slash(url);
    let hosts = run_hosts(&agent, &dir)?;
    if !hosts.is_empty() {
        return Ok(vec![Run { run: last_segment(&dir), hosts }]);
    }
    let runs_dir = format!("{dir}plugins/profile/");
    let runs_url = if listing(&agent, &runs_dir).is_ok() { runs_dir } else { dir.clone() };
    let mut names: Vec<String> =
        listing(&agent, &runs_url)?.into_iter().filter(|n| n.ends_with('/') && n.matches('/').count() == 1).collect();
    names.sort();
    let mut runs = Vec::new();
    for name in names {
        let run_url = format!("{runs_url}{name}");
        let hosts = run_hosts(&agent, &run_url)?;
        if !hosts.is_empty() {
            runs.push(Run { run: last_segment(&run_url), hosts });
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_name_files_and_runs() {
        let page = r#"<a href="host0.xplane.pb">x</a> <a href="/abs">y</a> <a href="2026_01_01/">z</a>
            <a href="http://elsewhere/h.xplane.pb">w</a> <a href="../">up</a> <Key>host1.xplane.pb</Key>"#;
        assert_eq!(listed("http://s/run/", page), ["host0.xplane.pb", "2026_01_01/", "host1.xplane.pb"]);
        assert_eq!(total_of("bytes 0-99/1234"), Some(1234));
        assert_eq!(last_segment("http://s/a/run_1/"), Some("run_1".to_owned()));
    }
}
