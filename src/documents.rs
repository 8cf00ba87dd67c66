//! The JSON documents of the examples and of `xlens --json`, built from a path: what the
//! command lines print and what bindings (the Python package) return, from one implementation.

use std::path::Path;

use serde_json::Value;

use crate::hlo::{Module, module_hosts, modules_from_session};
use crate::report::tables::hlo::{ModuleHosts, hlo_ops_json};
use crate::report::tables::kernel_stats::{HostKernelStats, kernel_stats_json};
use crate::report::tables::op_profile::{analyze, op_profile_session_json};
use crate::report::tables::{HostInventory, inventory_json};
use crate::roofline::KernelStats;
use crate::source::{Location, open_session};
use crate::xplane::inventory;

/// Steps, the op profile and the step anatomy of every host (`op_profile --json`).
pub fn op_profile(path: &Path) -> Result<Value, crate::xplane::Error> {
    let session = open_session(&Location::from(path))?;
    let analyses = session.hosts().iter().map(|h| analyze(h.name(), h.space())).collect::<Result<Vec<_>, _>>()?;
    Ok(op_profile_session_json(&analyses))
}

/// The HLO modules of a session, or of one `*.hlo_proto.pb` (`hlo_ops --json`), with the
/// warnings met reading them.
pub fn hlo_modules(path: &Path) -> Result<(Value, Vec<String>), Box<dyn std::error::Error + Send + Sync>> {
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        return Ok((hlo_ops_json(&[Module::open(path)?], &ModuleHosts::new()), Vec::new()));
    }
    let session = open_session(&Location::from(path))?;
    let (modules, warnings) = modules_from_session(&session);
    let warnings = warnings.iter().map(ToString::to_string).collect();
    Ok((hlo_ops_json(&modules, &module_hosts(&session)), warnings))
}

/// Planes, lines and event counts of every host (`inventory --json`).
pub fn planes(path: &Path) -> Result<Value, crate::xplane::Error> {
    let session = open_session(&Location::from(path))?;
    let hosts = session
        .hosts()
        .iter()
        .map(|h| Ok(HostInventory { host: h.name().to_owned(), planes: inventory(h.space())? }))
        .collect::<Result<Vec<_>, crate::xplane::Error>>()?;
    Ok(inventory_json(&hosts))
}

/// GPU kernels of every host (`kernel_stats --json`; `top` kernels, all when `None`).
pub fn kernels(path: &Path, top: Option<usize>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
    let session = open_session(&Location::from(path))?;
    let mut hosts = Vec::new();
    for host in session.hosts() {
        hosts.push(HostKernelStats { host: host.name().to_owned(), stats: KernelStats::read(host.space())? });
    }
    Ok(kernel_stats_json(&hosts, top))
}
