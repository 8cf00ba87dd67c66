//! The other commands as library calls, from a path: `ops`, `hlo`, `inventory` and `kernels`
//! give their analyses ([`host_op_profiles`], [`hlo_modules_of`], [`host_inventories`],
//! [`host_kernel_stats`]), and their JSON documents ([`op_profile`], [`hlo_modules`], [`planes`],
//! [`kernels`]) are built from those: what the command lines print, as text or JSON, and what
//! bindings (the Python package) return, from one implementation. Each analysis also reads a
//! run opened once ([`open_run`], then [`host_op_profiles_in`], [`hlo_modules_in`],
//! [`host_inventories_in`], [`host_kernel_stats_in`]): what `xlens mcp` keeps between calls.

use std::path::Path;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::faults::SkippedHost;
use crate::hlo::{Module, module_hosts, modules_from_session};
use crate::report::tables::hlo::{ModuleHosts, hlo_ops_json};
use crate::report::tables::kernel_stats::{HostKernelStats, kernel_stats_json};
use crate::report::tables::op_profile::{HostOpProfile, OpProfileHostsJson, analyze};
use crate::report::tables::{HostInventory, inventory_json};
use crate::roofline::KernelStats;
use crate::source::{Location, Run, discover};
use crate::xplane::{Host, HostInput, Session, inventory};

/// An error of a command that reads a profile.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a command read of a session: its figures for the hosts that could be read, and the
/// hosts that could not, each with its error (as `scan` lists them in `skipped_hosts`).
#[derive(Debug)]
pub struct Partial<T> {
    /// The figures of the hosts read.
    pub hosts: T,
    /// The host files that could not be read or analysed.
    pub skipped_hosts: Vec<SkippedHost>,
    /// The entries of the hosts read that did not decode (events, stats), one line each with
    /// its host and location (as `scan` lists them in `errors`): the figures leave them out.
    pub errors: Vec<String>,
}

impl<T> Partial<T> {
    /// `doc` with a `skipped_hosts` array when a host was skipped and an `errors` array when an
    /// entry did not decode (a complete session's document is unchanged).
    pub(crate) fn document(&self, mut doc: Value) -> Value {
        if let Value::Object(map) = &mut doc {
            if !self.skipped_hosts.is_empty() {
                map.insert("skipped_hosts".to_owned(), serde_json::to_value(&self.skipped_hosts).unwrap_or_default());
            }
            if !self.errors.is_empty() {
                map.insert("errors".to_owned(), serde_json::to_value(&self.errors).unwrap_or_default());
            }
        }
        doc
    }

    /// Writes the `skipped_hosts` and `errors` entries of [`Partial::document`] into a map being
    /// serialized, after its own entries.
    fn serialize_tail<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        if !self.skipped_hosts.is_empty() {
            map.serialize_entry("skipped_hosts", &self.skipped_hosts)?;
        }
        if !self.errors.is_empty() {
            map.serialize_entry("errors", &self.errors)?;
        }
        Ok(())
    }
}

/// The entries of `host` that did not decode in the walks so far, one line each, host-prefixed.
fn decode_errors(host: &Host) -> Vec<String> {
    host.space().decode_errors().lines().into_iter().map(|e| format!("{}: {e}", host.name())).collect()
}

/// Keeps the results that succeeded; each failure is a skipped host (its name, its file and the
/// error). When nothing succeeded, the first error is the caller's.
fn keep_readable<T, E: std::fmt::Display>(
    results: impl IntoIterator<Item = (String, String, Result<T, E>)>,
    skipped_hosts: &mut Vec<SkippedHost>,
) -> Result<Vec<T>, E> {
    let (mut kept, mut first) = (Vec::new(), None);
    for (host, file, result) in results {
        match result {
            Ok(v) => kept.push(v),
            Err(e) => {
                skipped_hosts.push(SkippedHost::new(&host, &file, &e));
                first.get_or_insert(e);
            }
        }
    }
    match first {
        Some(e) if kept.is_empty() => Err(e),
        _ => Ok(kept),
    }
}

/// The hosts of a run that could be read, decoded (their files memory-mapped), and those that
/// could not: what the commands below read, opened once. A caller that keeps it (`xlens mcp`
/// keeps the profiles it was asked about) answers the next command without decoding again.
#[derive(Debug)]
pub struct OpenedRun {
    /// The hosts read.
    pub session: Session,
    /// The host files that could not be read, each with its error.
    pub skipped_hosts: Vec<SkippedHost>,
}

/// Opens every host of `run` that can be read (in parallel); the others are skipped with their
/// error. When none can be read, the first one's error is the command's.
pub fn open_run(run: &Run) -> Result<OpenedRun, crate::xplane::Error> {
    use rayon::prelude::*;
    let opened: Vec<_> =
        run.hosts.par_iter().map(|h| (h.host.clone(), h.display(), h.open().map(|s| Host::new(&h.host, s)))).collect();
    let mut skipped_hosts = Vec::new();
    let hosts = keep_readable(opened, &mut skipped_hosts)?;
    Ok(OpenedRun { session: Session::from_hosts(run.run.clone(), hosts), skipped_hosts })
}

/// [`open_run`] of the run at `path` (a file, a run directory, a logdir's newest run).
pub(crate) fn open_readable(path: &Path) -> Result<OpenedRun, crate::xplane::Error> {
    open_run(&discover(&Location::from(path))?)
}

/// `f` on every host of `opened`; a host whose analysis fails is skipped with its error, unless
/// every host fails (then the first error is the command's). A host whose file changed while it
/// was read (`Space::check_file_unchanged`) is skipped too: what was read of it may mix two
/// versions.
pub(crate) fn per_host_in<T, E>(
    opened: &OpenedRun,
    f: impl Fn(&Host) -> Result<T, E>,
) -> Result<Partial<Vec<T>>, BoxError>
where
    E: std::fmt::Display + Into<BoxError>,
{
    let (session, mut skipped_hosts) = (&opened.session, opened.skipped_hosts.clone());
    let mut errors = Vec::new();
    let results = session.hosts().iter().map(|h| {
        let result = f(h).map_err(Into::into).and_then(|v| match h.space().check_file_unchanged() {
            Ok(()) => Ok(v),
            Err(e) => Err(BoxError::from(e)),
        });
        if result.is_ok() {
            errors.extend(decode_errors(h));
        }
        (h.name().to_owned(), h.name().to_owned(), result)
    });
    let hosts = keep_readable(results, &mut skipped_hosts)?;
    Ok(Partial { hosts, skipped_hosts, errors })
}

/// Steps, the op profile and the step anatomy of every host (`xlens ops`).
pub fn host_op_profiles(path: &Path) -> Result<Partial<Vec<HostOpProfile>>, BoxError> {
    host_op_profiles_in(&open_readable(path)?)
}

/// [`host_op_profiles`] of a run already opened.
pub fn host_op_profiles_in(opened: &OpenedRun) -> Result<Partial<Vec<HostOpProfile>>, BoxError> {
    per_host_in(opened, |h| analyze(h.name(), h.space()))
}

/// [`host_op_profiles`] as `ops --json` prints it.
pub fn op_profile(path: &Path) -> Result<Value, BoxError> {
    Ok(op_profile_document(&host_op_profiles(path)?))
}

/// The `ops --json` document of what [`host_op_profiles`] read.
pub fn op_profile_document(ops: &Partial<Vec<HostOpProfile>>) -> Value {
    serde_json::to_value(OpProfileDocument(ops)).unwrap_or_default()
}

/// The `ops --json` document of what [`host_op_profiles`] read, as [`op_profile_document`]
/// gives it, serialized as it is written: a serializer over a writer
/// (`serde_json::to_writer_pretty`) writes each step and op from the analyses, holding no copy
/// of a document that grows with the steps of the capture (`xlens ops --json` prints it so).
#[derive(Clone, Copy, Debug)]
pub struct OpProfileDocument<'a>(pub &'a Partial<Vec<HostOpProfile>>);

impl Serialize for OpProfileDocument<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("hosts", &OpProfileHostsJson(&self.0.hosts))?;
        self.0.serialize_tail(&mut map)?;
        map.end()
    }
}

/// The HLO modules of a profile, which hosts captured each, and the warnings met reading them.
#[derive(Debug)]
pub struct HloModules {
    /// The modules, one per program.
    pub modules: Vec<Module>,
    /// The hosts that captured each program (empty for a lone `*.hlo_proto.pb`).
    pub hosts: ModuleHosts,
    /// What could not be read, one line each (the entries of the hosts that did not decode
    /// among them, host-prefixed).
    pub warnings: Vec<String>,
    /// The host files that could not be read.
    pub skipped_hosts: Vec<SkippedHost>,
}

/// The HLO modules of a session, or of one `*.hlo_proto.pb` (`xlens hlo`).
pub fn hlo_modules_of(path: &Path) -> Result<HloModules, BoxError> {
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        let modules = vec![Module::open(path)?];
        return Ok(HloModules { modules, hosts: ModuleHosts::new(), warnings: Vec::new(), skipped_hosts: Vec::new() });
    }
    Ok(hlo_modules_in(&open_readable(path)?))
}

/// The HLO modules of a run already opened.
pub fn hlo_modules_in(opened: &OpenedRun) -> HloModules {
    let session = &opened.session;
    let (modules, warnings) = modules_from_session(session);
    let mut warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    warnings.extend(session.hosts().iter().flat_map(decode_errors));
    HloModules { modules, hosts: module_hosts(session), warnings, skipped_hosts: opened.skipped_hosts.clone() }
}

/// [`hlo_modules_of`] as `hlo --json` prints it, with the warnings.
pub fn hlo_modules(path: &Path) -> Result<(Value, Vec<String>), BoxError> {
    let hlo = hlo_modules_of(path)?;
    Ok((hlo_document(&hlo), hlo.warnings))
}

/// The `hlo --json` document of what [`hlo_modules_of`] read.
pub fn hlo_document(hlo: &HloModules) -> Value {
    let partial = Partial { hosts: (), skipped_hosts: hlo.skipped_hosts.clone(), errors: Vec::new() };
    partial.document(hlo_ops_json(&hlo.modules, &hlo.hosts))
}

/// Planes, lines and event counts of every host (`xlens inventory`).
pub fn host_inventories(path: &Path) -> Result<Partial<Vec<HostInventory>>, BoxError> {
    host_inventories_in(&open_readable(path)?)
}

/// [`host_inventories`] of a run already opened.
pub fn host_inventories_in(opened: &OpenedRun) -> Result<Partial<Vec<HostInventory>>, BoxError> {
    per_host_in(opened, |h| inventory(h.space()).map(|planes| HostInventory { host: h.name().to_owned(), planes }))
}

/// [`host_inventories`] as `inventory --json` prints it.
pub fn planes(path: &Path) -> Result<Value, BoxError> {
    Ok(planes_document(&host_inventories(path)?))
}

/// The `inventory --json` document of what [`host_inventories`] read.
pub fn planes_document(inv: &Partial<Vec<HostInventory>>) -> Value {
    inv.document(inventory_json(&inv.hosts))
}

/// GPU kernels of every host: launches, durations, launch shapes (`xlens kernels`).
pub fn host_kernel_stats(path: &Path) -> Result<Partial<Vec<HostKernelStats>>, BoxError> {
    host_kernel_stats_in(&open_readable(path)?)
}

/// [`host_kernel_stats`] of a run already opened.
pub fn host_kernel_stats_in(opened: &OpenedRun) -> Result<Partial<Vec<HostKernelStats>>, BoxError> {
    per_host_in(opened, |h| {
        KernelStats::read(h.space()).map(|stats| HostKernelStats { host: h.name().to_owned(), stats })
    })
}

/// [`host_kernel_stats`] as `kernels --json` prints it (`top` kernels per host, all when `None`).
pub fn kernels(path: &Path, top: Option<usize>) -> Result<Value, BoxError> {
    Ok(kernels_document(&host_kernel_stats(path)?, top))
}

/// The `kernels --json` document of what [`host_kernel_stats`] read.
pub fn kernels_document(k: &Partial<Vec<HostKernelStats>>, top: Option<usize>) -> Value {
    k.document(kernel_stats_json(&k.hosts, top))
}
