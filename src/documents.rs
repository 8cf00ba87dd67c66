//! The other commands as library calls, from a path: `ops`, `hlo`, `inventory` and `kernels`
//! give their analyses ([`host_op_profiles`], [`hlo_modules_of`], [`host_inventories`],
//! [`host_kernel_stats`]), and their JSON documents ([`op_profile`], [`hlo_modules`], [`planes`],
//! [`kernels`]) are built from those: what the command lines print, as text or JSON, and what
//! bindings (the Python package) return, from one implementation.

use std::path::Path;

use serde_json::Value;

use crate::hlo::{Module, module_hosts, modules_from_session};
use crate::report::tables::hlo::{ModuleHosts, hlo_ops_json};
use crate::report::tables::kernel_stats::{HostKernelStats, kernel_stats_json};
use crate::report::tables::op_profile::{HostOpProfile, analyze, op_profile_session_json};
use crate::report::tables::{HostInventory, inventory_json};
use crate::roofline::KernelStats;
use crate::source::{Location, open_session};
use crate::xplane::inventory;

/// An error of a command that reads a profile.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Steps, the op profile and the step anatomy of every host (`xlens ops`).
pub fn host_op_profiles(path: &Path) -> Result<Vec<HostOpProfile>, crate::xplane::Error> {
    let session = open_session(&Location::from(path))?;
    session.hosts().iter().map(|h| analyze(h.name(), h.space())).collect()
}

/// [`host_op_profiles`] as `ops --json` prints it.
pub fn op_profile(path: &Path) -> Result<Value, crate::xplane::Error> {
    Ok(op_profile_session_json(&host_op_profiles(path)?))
}

/// The HLO modules of a profile, which hosts captured each, and the warnings met reading them.
#[derive(Debug)]
pub struct HloModules {
    /// The modules, one per program.
    pub modules: Vec<Module>,
    /// The hosts that captured each program (empty for a lone `*.hlo_proto.pb`).
    pub hosts: ModuleHosts,
    /// What could not be read, one line each.
    pub warnings: Vec<String>,
}

/// The HLO modules of a session, or of one `*.hlo_proto.pb` (`xlens hlo`).
pub fn hlo_modules_of(path: &Path) -> Result<HloModules, BoxError> {
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        return Ok(HloModules { modules: vec![Module::open(path)?], hosts: ModuleHosts::new(), warnings: Vec::new() });
    }
    let session = open_session(&Location::from(path))?;
    let (modules, warnings) = modules_from_session(&session);
    let warnings = warnings.iter().map(ToString::to_string).collect();
    Ok(HloModules { modules, hosts: module_hosts(&session), warnings })
}

/// [`hlo_modules_of`] as `hlo --json` prints it, with the warnings.
pub fn hlo_modules(path: &Path) -> Result<(Value, Vec<String>), BoxError> {
    let hlo = hlo_modules_of(path)?;
    Ok((hlo_ops_json(&hlo.modules, &hlo.hosts), hlo.warnings))
}

/// Planes, lines and event counts of every host (`xlens inventory`).
pub fn host_inventories(path: &Path) -> Result<Vec<HostInventory>, crate::xplane::Error> {
    let session = open_session(&Location::from(path))?;
    session
        .hosts()
        .iter()
        .map(|h| Ok(HostInventory { host: h.name().to_owned(), planes: inventory(h.space())? }))
        .collect()
}

/// [`host_inventories`] as `inventory --json` prints it.
pub fn planes(path: &Path) -> Result<Value, crate::xplane::Error> {
    Ok(inventory_json(&host_inventories(path)?))
}

/// GPU kernels of every host: launches, durations, launch shapes (`xlens kernels`).
pub fn host_kernel_stats(path: &Path) -> Result<Vec<HostKernelStats>, BoxError> {
    let session = open_session(&Location::from(path))?;
    let mut hosts = Vec::new();
    for host in session.hosts() {
        hosts.push(HostKernelStats { host: host.name().to_owned(), stats: KernelStats::read(host.space())? });
    }
    Ok(hosts)
}

/// [`host_kernel_stats`] as `kernels --json` prints it (`top` kernels per host, all when `None`).
pub fn kernels(path: &Path, top: Option<usize>) -> Result<Value, BoxError> {
    Ok(kernel_stats_json(&host_kernel_stats(path)?, top))
}
