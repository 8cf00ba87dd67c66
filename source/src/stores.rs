//! Profiles in object storage: `s3://`, `gs://` and `az://` (or `abfs://`) URLs, read with
//! `object_store` (credentials, region and endpoint from the usual environment:
//! `AWS_*`, `GOOGLE_*`, `AZURE_*`), listed like a logdir on disk and fetched in ranged reads of
//! [`crate::http::CHUNK_BYTES`], memory following the bytes received.
//!
//! It also writes, for the runs a capture saves into a store ([`Stores::put_new`]: one whole
//! object per put, which a store makes visible atomically, and never over an object that
//! exists), and checks a logdir URL before a capture writes there ([`Stores::check_logdir`]).
//! These calls give up after a few quick retries ([`WRITE_RETRIES`]), so that a store that
//! cannot be reached is an error in seconds, not minutes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig};
use xlens_xplane::{Error, ErrorKind, Location as At, Result, XPLANE_SUFFIX};

use crate::http::{CHUNK_BYTES, MAX_REMOTE_FILE_BYTES};
use crate::{HostFile, Location, Run, Source, error::at};

/// Object stores: S3, Google Cloud Storage and Azure, credentials from the environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stores;

impl Source for Stores {
    /// The host file, the run prefix, or every run of the logdir prefix (under
    /// `plugins/profile/`, else the prefix itself) that holds host files, in name order.
    fn list(&self, location: &Location) -> crate::Result<Vec<Run>> {
        at(location, list_store(&location.to_string()))
    }

    /// The host file, the run prefix, or the newest run of the logdir prefix.
    fn discover(&self, location: &Location) -> crate::Result<Run> {
        at(location, discover_store(&location.to_string()))
    }

    /// The whole object, read in ranged reads.
    fn open(&self, location: &Location) -> crate::Result<Bytes> {
        at(location, fetch_store(&location.to_string()))
    }
}

/// The retries of [`Stores::check_logdir`], [`Stores::put_new`] and [`Stores::size`]: a call
/// that fails to connect is tried this many times more, for at most [`WRITE_RETRY_TIMEOUT`].
pub const WRITE_RETRIES: usize = 3;

/// How long [`Stores::check_logdir`], [`Stores::put_new`] and [`Stores::size`] keep retrying.
pub const WRITE_RETRY_TIMEOUT: Duration = Duration::from_secs(20);

impl Stores {
    /// Checks that the store behind the logdir URL `location` can be reached and listed with
    /// the credentials of the environment (one listing of its prefix), before a capture writes
    /// a run there. Whether it may be written is known only when it is.
    pub fn check_logdir(&self, location: &Location) -> crate::Result<()> {
        at(location, check_store(&store_url(location)?))
    }

    /// Writes the local file `from` as the object at `location`, in one put (the store makes
    /// the object visible whole, or not at all), never over an object that exists there
    /// (a conditional put where the store has one, else a look first); returns its size.
    pub fn put_new(&self, from: &Path, location: &Location) -> crate::Result<u64> {
        at(location, put_store(from, &store_url(location)?))
    }

    /// The size in bytes of the object at `location`.
    pub fn size(&self, location: &Location) -> crate::Result<u64> {
        at(location, size_store(&store_url(location)?))
    }
}

/// The URL of an object-store location; any other location is an error naming it.
fn store_url(location: &Location) -> crate::Result<String> {
    match location {
        Location::Store(url) => Ok(url.as_str().to_owned()),
        other => {
            let text = other.to_string();
            Err(crate::Error::new(
                other,
                io(&text, std::io::ErrorKind::Unsupported, "not an object-store URL (s3://, gs://, az://)".to_owned()),
            ))
        }
    }
}

fn io(url: &str, kind: std::io::ErrorKind, what: String) -> Error {
    Error::new(ErrorKind::Io(std::io::Error::new(kind, what)), At::default().with_file(Path::new(url)))
}

fn store_error(url: &str, e: object_store::Error) -> Error {
    use std::io::ErrorKind as K;
    match e {
        object_store::Error::NotFound { .. } => io(url, K::NotFound, "no such object".to_owned()),
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            io(url, K::PermissionDenied, "access denied: check the credentials in the environment".to_owned())
        }
        other => io(url, K::Other, other.to_string().split_whitespace().collect::<Vec<_>>().join(" ")),
    }
}

/// The bucket's store (built from the environment) and the object path of `url`.
fn open_store(url: &str) -> Result<(Arc<dyn ObjectStore>, ObjectPath, String)> {
    open_store_with(url, None)
}

/// [`open_store`] with the retries of the writing calls.
fn open_store_for_writes(url: &str) -> Result<(Arc<dyn ObjectStore>, ObjectPath, String)> {
    let retry =
        RetryConfig { max_retries: WRITE_RETRIES, retry_timeout: WRITE_RETRY_TIMEOUT, ..RetryConfig::default() };
    open_store_with(url, Some(retry))
}

/// [`open_store`] with `retry` instead of the store's default retries, when given.
fn open_store_with(url: &str, retry: Option<RetryConfig>) -> Result<(Arc<dyn ObjectStore>, ObjectPath, String)> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let root = format!("{scheme}://{bucket}");
    let built: std::result::Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme {
        "s3" => {
            let b = object_store::aws::AmazonS3Builder::from_env().with_url(&root);
            let b = match retry {
                Some(r) => b.with_retry(r),
                None => b,
            };
            b.build().map(|s| Arc::new(s) as _)
        }
        "gs" => {
            let b = object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(&root);
            let b = match retry {
                Some(r) => b.with_retry(r),
                None => b,
            };
            b.build().map(|s| Arc::new(s) as _)
        }
        _ => {
            let b = object_store::azure::MicrosoftAzureBuilder::from_env().with_url(&root);
            let b = match retry {
                Some(r) => b.with_retry(r),
                None => b,
            };
            b.build().map(|s| Arc::new(s) as _)
        }
    };
    let store = built.map_err(|e| store_error(url, e))?;
    Ok((store, ObjectPath::from(key.trim_end_matches('/')), root))
}

fn runtime(url: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Error::io(e, Path::new(url)))
}

/// The whole object at `url`, read in ranged reads.
fn fetch_store(url: &str) -> Result<Bytes> {
    let (store, path, _) = open_store(url)?;
    runtime(url)?.block_on(async {
        let size = store.head(&path).await.map_err(|e| store_error(url, e))?.size;
        if size == 0 {
            return Err(Error::new(ErrorKind::ZeroByteProfile, At::default().with_file(Path::new(url))));
        }
        if size > MAX_REMOTE_FILE_BYTES {
            return Err(io(url, std::io::ErrorKind::Other, format!("{size} bytes, more than a host file may have")));
        }
        let mut out = Vec::new();
        while (out.len() as u64) < size {
            let start = out.len() as u64;
            let end = (start + CHUNK_BYTES).min(size);
            let part = store.get_range(&path, start..end).await.map_err(|e| store_error(url, e))?;
            if part.is_empty() {
                return Err(io(
                    url,
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the store stopped at byte {start} of {size}"),
                ));
            }
            out.extend_from_slice(&part);
        }
        Ok(Bytes::from(out))
    })
}

/// Lists the prefix of the logdir URL `url` once (see [`Stores::check_logdir`]).
fn check_store(url: &str) -> Result<()> {
    let (store, path, _) = open_store_for_writes(url)?;
    runtime(url)?.block_on(async {
        store.list_with_delimiter(Some(&path)).await.map_err(|e| store_error(url, e))?;
        Ok(())
    })
}

/// Puts the file `from` as the new object `url` (see [`Stores::put_new`]).
fn put_store(from: &Path, url: &str) -> Result<u64> {
    let data = std::fs::read(from).map_err(|e| Error::io(e, from))?;
    let size = data.len() as u64;
    if size > MAX_REMOTE_FILE_BYTES {
        return Err(io(url, std::io::ErrorKind::Other, format!("{size} bytes, more than a host file may have")));
    }
    let (store, path, _) = open_store_for_writes(url)?;
    let exists = || {
        io(url, std::io::ErrorKind::AlreadyExists, "exists already: a capture never overwrites a host file".to_owned())
    };
    runtime(url)?.block_on(async {
        let payload = PutPayload::from(Bytes::from(data));
        let create = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match store.put_opts(&path, payload.clone(), create).await {
            Ok(_) => Ok(size),
            Err(object_store::Error::AlreadyExists { .. }) => Err(exists()),
            // A store without conditional puts: look first, then put (one whole object still).
            Err(object_store::Error::NotImplemented { .. }) => {
                match store.head(&path).await {
                    Ok(_) => return Err(exists()),
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(store_error(url, e)),
                }
                store.put(&path, payload).await.map_err(|e| store_error(url, e))?;
                Ok(size)
            }
            Err(e) => Err(store_error(url, e)),
        }
    })
}

/// The size of the object `url` (see [`Stores::size`]).
fn size_store(url: &str) -> Result<u64> {
    let (store, path, _) = open_store_for_writes(url)?;
    runtime(url)?.block_on(async { Ok(store.head(&path).await.map_err(|e| store_error(url, e))?.size) })
}

/// True for a URL that names a host file (`*.xplane.pb`, or `*.xplane.riegeli`, refused when opened).
fn is_host_file(url: &str) -> bool {
    url.ends_with(XPLANE_SUFFIX) || url.ends_with(crate::RIEGELI_SUFFIX)
}

/// Host files directly under `prefix`, sorted by host name.
async fn hosts_under(store: &dyn ObjectStore, root: &str, prefix: &ObjectPath, url: &str) -> Result<Vec<HostFile>> {
    let listed = store.list_with_delimiter(Some(prefix)).await.map_err(|e| store_error(url, e))?;
    let mut hosts: Vec<HostFile> = listed
        .objects
        .iter()
        .filter_map(|o| {
            let host = crate::host_name(o.location.filename()?)?;
            Some(HostFile { host, location: Location::parse(&format!("{root}/{}", o.location)) })
        })
        .collect();
    // By host, a host's `*.xplane.pb` before its `*.xplane.riegeli`, which the dedup drops.
    let riegeli = |h: &HostFile| h.location.to_string().ends_with(crate::RIEGELI_SUFFIX);
    hosts.sort_by(|a, b| (&a.host, riegeli(a)).cmp(&(&b.host, riegeli(b))));
    hosts.dedup_by(|later, first| later.host == first.host);
    Ok(hosts)
}

/// Finds the host files behind an object-store URL: a host file, a run prefix, or a logdir
/// prefix (its newest run under `plugins/profile/`), as [`crate::discover`] does on disk.
fn discover_store(url: &str) -> Result<Run> {
    let (store, path, root) = open_store(url)?;
    if is_host_file(url) {
        let host = path.filename().and_then(crate::host_name).unwrap_or_default();
        return Ok(Run { run: None, hosts: vec![HostFile { host, location: Location::parse(url) }] });
    }
    runtime(url)?.block_on(async {
        let hosts = hosts_under(store.as_ref(), &root, &path, url).await?;
        if !hosts.is_empty() {
            return Ok(Run { run: path.filename().map(str::to_owned), hosts });
        }
        let runs_prefix = path.clone().join("plugins").join("profile");
        let mut runs =
            store.list_with_delimiter(Some(&runs_prefix)).await.map_err(|e| store_error(url, e))?.common_prefixes;
        if runs.is_empty() {
            runs = store.list_with_delimiter(Some(&path)).await.map_err(|e| store_error(url, e))?.common_prefixes;
        }
        runs.sort();
        for run in runs.iter().rev() {
            let hosts = hosts_under(store.as_ref(), &root, run, url).await?;
            if !hosts.is_empty() {
                return Ok(Run { run: run.filename().map(str::to_owned), hosts });
            }
        }
        Err(Error::new(ErrorKind::NoProfiles, At::default().with_file(Path::new(url))))
    })
}

/// The host file, the run prefix, or every run of the logdir prefix that holds host files, in
/// name order.
fn list_store(url: &str) -> Result<Vec<Run>> {
    if is_host_file(url) {
        return discover_store(url).map(|run| vec![run]);
    }
    let (store, path, root) = open_store(url)?;
    runtime(url)?.block_on(async {
        let hosts = hosts_under(store.as_ref(), &root, &path, url).await?;
        if !hosts.is_empty() {
            return Ok(vec![Run { run: path.filename().map(str::to_owned), hosts }]);
        }
        let runs_prefix = path.clone().join("plugins").join("profile");
        let mut prefixes =
            store.list_with_delimiter(Some(&runs_prefix)).await.map_err(|e| store_error(url, e))?.common_prefixes;
        if prefixes.is_empty() {
            prefixes = store.list_with_delimiter(Some(&path)).await.map_err(|e| store_error(url, e))?.common_prefixes;
        }
        prefixes.sort();
        let mut runs = Vec::new();
        for run in &prefixes {
            let hosts = hosts_under(store.as_ref(), &root, run, url).await?;
            if !hosts.is_empty() {
                runs.push(Run { run: run.filename().map(str::to_owned), hosts });
            }
        }
        Ok(runs)
    })
}
