//! The `synth` job (`xlens synth`, the `synth_profile` example): synthetic TPU- and GPU-shaped
//! sessions written with `xlens-testkit`, deterministic for the seed.

use std::path::PathBuf;

use anyhow::Context;
use xlens_testkit::synth::{
    self as fixtures, MegaScaleSpec, Program, SparseCoreSpec, SynthSpec, hlo_proto_with_buffers, tpu_profile,
};

use super::emit;

/// The largest `--size` accepted: 64 GiB a host.
const MAX_SIZE_BYTES: u64 = 64 << 30;

/// What to write.
pub(crate) struct Synth {
    /// The logdir (or, for a fixture, the session directory).
    pub(crate) out: PathBuf,
    /// About this many bytes a host.
    pub(crate) size: u64,
    /// Hosts to write.
    pub(crate) hosts: u32,
    /// The seed of host 0 (host i uses seed + i).
    pub(crate) seed: u64,
    /// SparseCores and DCN transfers of a multi-slice TPU v5p run.
    pub(crate) multislice: bool,
    /// TPU hosts without their host-thread plane.
    pub(crate) device_only: bool,
    /// TPU hosts without `Steps` lines.
    pub(crate) no_steps: bool,
    /// GPU hosts with this many GPUs each, instead of TPU hosts.
    pub(crate) gpu: Option<u32>,
    /// A named reference fixture instead.
    pub(crate) fixture: Option<String>,
}

/// `300MB`, `1.5GB`, `64KB` or a plain byte count (powers of 1024), at most 64 GiB.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let upper = s.trim().to_ascii_uppercase();
    let (num, mul) = [("GB", 1u64 << 30), ("MB", 1 << 20), ("KB", 1 << 10), ("B", 1)]
        .iter()
        .find_map(|(suffix, mul)| upper.strip_suffix(suffix).map(|n| (n, *mul)))
        .unwrap_or((upper.as_str(), 1));
    match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n * mul as f64 <= MAX_SIZE_BYTES as f64 => Ok((n * mul as f64) as u64),
        Ok(_) => Err(format!("{s:?} is not a size between 1 byte and 64GB")),
        Err(_) => Err(format!("{s:?} is not a size (e.g. 300MB, 1.5GB)")),
    }
}

/// A fixture name of `xlens_testkit::synth::FIXTURES`.
pub(crate) fn parse_fixture(s: &str) -> Result<String, String> {
    if fixtures::FIXTURES.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not a fixture; known: {}", fixtures::FIXTURES.join(", ")))
    }
}

/// Writes the profiles and prints each file's path and size.
pub(crate) fn write(spec: &Synth) -> anyhow::Result<()> {
    if let Some(name) = &spec.fixture {
        // A named reference fixture: a single host file in DIR (a session directory).
        let fixture = fixtures::fixture(name).with_context(|| format!("unknown fixture {name:?}"))?;
        std::fs::create_dir_all(&spec.out).with_context(|| format!("creating {}", spec.out.display()))?;
        return write_host(&spec.out.join("host0.xplane.pb"), &tpu_profile(&fixture));
    }
    let run = spec.out.join("plugins/profile/synthetic");
    std::fs::create_dir_all(&run).with_context(|| format!("creating {}", run.display()))?;
    for host in 0..spec.hosts {
        let seed = spec.seed.wrapping_add(u64::from(host));
        match spec.gpu {
            Some(devices) => {
                let bytes = xlens_testkit::gpu::gpu_profile_of_size(spec.size, devices, seed);
                write_host(&run.join(format!("gpu{host:04}.xplane.pb")), &bytes)?;
            }
            None => write_host(&run.join(format!("host{host:04}.xplane.pb")), &tpu_host(spec, seed))?,
        }
    }
    Ok(())
}

fn write_host(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    emit(&format!("{} {} bytes\n", path.display(), bytes.len()))
}

/// One TPU host: 4 TensorCores running a 2000-op program, with its HLO module (one instruction
/// per op and a buffer assignment: 4 GiB of parameters and a temporary per fusion) so HLO-based
/// analyses run too.
fn tpu_host(spec: &Synth, seed: u64) -> Vec<u8> {
    let program = Program::random(2000, spec.seed);
    let names: Vec<String> = program.ops().iter().map(|o| o.name.clone()).collect();
    let temps: Vec<(&str, u64)> =
        names.iter().filter(|n| n.starts_with("fusion")).map(|n| (n.as_str(), 8u64 << 20)).collect();
    let hlo = hlo_proto_with_buffers("jit_train_step", &program, &[("params", 4u64 << 30)], &temps);
    let (sparse_cores, megascale) = if spec.multislice {
        (Some(SparseCoreSpec::embeddings()), MegaScaleSpec::on_first_all_gather(&program))
    } else {
        (None, None)
    };
    let synth = SynthSpec {
        program,
        seed,
        hlo_proto: Some(hlo),
        sparse_cores,
        megascale,
        device_type: if spec.multislice { "TPU v5".to_owned() } else { SynthSpec::default().device_type },
        host_threads: !spec.device_only,
        device_steps: !spec.no_steps,
        memory_profile_bytes: (!spec.device_only).then_some(4u64 << 30),
        ..SynthSpec::default()
    }
    .with_target_size(spec.size);
    tpu_profile(&synth)
}
