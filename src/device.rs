//! `xlens device` as a library call: the hosts of a profile, each host's device (type, peaks,
//! ridge points) and the session's key figures ([`device_info`]); XProf's `get_hosts`,
//! `get_device_information` and `get_kpi_metrics`.
//!
//! The key figures are the scan's own (`faults::scan` over the same decoded hosts): one value
//! per quantity, as `xlens scan` reports it (docs/metrics.md). Where XProf counts a quantity
//! its own way, the XProf figure sits beside ours under an `xprof_` name, as the scan does for
//! the FLOP utilisation.

use std::path::Path;

use crate::documents::{BoxError, Partial, open_readable};
use crate::faults::{Profile, ScanConfig, scan};
use crate::report::tables::device::{DeviceInfo, HostDevice};
use crate::roofline::ProgramWork;

/// The hosts, devices and key figures of the profile at `path` (`xlens device`).
pub fn device_info(path: &Path) -> Result<Partial<DeviceInfo>, BoxError> {
    let crate::documents::OpenedRun { session, skipped_hosts } = open_readable(path)?;
    let profile = Profile::from_session(session);
    let report = scan(&profile, &ScanConfig::default());
    let hosts = profile
        .hosts()
        .iter()
        .map(|h| HostDevice {
            host: h.name().to_owned(),
            chip: h.chip().cloned(),
            devices: h.space().analysis_devices().len(),
        })
        .collect();
    let works: Vec<ProgramWork> =
        profile.hosts().iter().filter_map(|h| h.op_profile().ok().and_then(|p| p.program_work())).collect();
    let xprof_roofline_efficiency_pct =
        ProgramWork::combine(&works).filter(ProgramWork::is_priced).map(|w| 100.0 * w.xprof_point().efficiency);
    let mut errors = report.errors.clone();
    errors.sort();
    errors.dedup();
    let mut skipped = skipped_hosts;
    skipped.extend(report.skipped_hosts.iter().cloned());
    Ok(Partial {
        hosts: DeviceInfo {
            device: report.profile.device.clone(),
            device_type: report.profile.device_type.clone(),
            cores: report.profile.cores,
            metrics: report.metrics,
            xprof_roofline_efficiency_pct,
            hosts,
        },
        skipped_hosts: skipped,
        errors,
    })
}

/// The `device --json` document of what [`device_info`] read.
pub fn device_document(d: &Partial<DeviceInfo>) -> serde_json::Value {
    d.document(crate::report::tables::device::device_json(&d.hosts))
}
