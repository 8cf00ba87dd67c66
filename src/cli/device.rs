//! `xlens device`: the hosts, each host's device (type, peaks, ridge points) and the key
//! figures of a profile (XProf's `get_hosts`, `get_device_information`, `get_kpi_metrics`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::commands::{EXIT_CODES, Job};
use super::{emit, emit_json};
use crate::device::{device_document, device_info};
use crate::report::tables::device::device_text;

/// Hosts, devices (type, peaks per core, ridge point, HBM capacity) and key figures (step
/// time, duty cycle, utilisations, roofline efficiency, memory peak).
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct DeviceCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir.
    path: PathBuf,
    /// One JSON document for the session.
    #[arg(long)]
    json: bool,
}

impl Job for DeviceCmd {
    fn run(self) -> ExitCode {
        super::run(|| {
            let d = device_info(&self.path).map_err(|e| anyhow::anyhow!(e))?;
            super::jobs::warn_skipped(&d.skipped_hosts, &d.errors);
            if self.json { emit_json(&device_document(&d)) } else { emit(&device_text(&d.hosts)) }
        })
    }
}
