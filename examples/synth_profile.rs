//! Writes synthetic TPU-shaped sessions for benchmarks and scale tests.
//!
//! `cargo run --release --example synth_profile -- --size 300MB [--hosts N] [--seed S] [--multislice] --out DIR`
//! `cargo run --release --example synth_profile -- --fixture NAME --out DIR` (a reference fixture)
//! `cargo run --release --example synth_profile -- --gpu --size 300MB [--devices N] --out DIR`
//! (an NVIDIA-shaped XLA:GPU host, `xlens-testkit`'s healthy program on N GPUs, default 8)
//!
//! Writes `DIR/plugins/profile/synthetic/<host>.xplane.pb` for N hosts (default 1), each about
//! `--size` long (suffixes KB, MB, GB; powers of 1024), deterministic for the seed: 4 TensorCores
//! per host running a 2000-op program (fusions, convolutions, dots, copies, transposes, async
//! all-gathers) step after step, host threads with step markers linked to the device steps, an
//! HLO proto with a buffer assignment in `/host:metadata`, and a runtime memory profile.
//! `--multislice` adds what a multi-slice TPU v5p run (`TPU v5`) with embeddings records: two SparseCores
//! per TensorCore and `MegaScale:` DCN transfers on the host, so every device detector runs its
//! full path.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};
use xlens_testkit::synth::{
    self as fixtures, MegaScaleSpec, Program, SparseCoreSpec, SynthSpec, hlo_proto_with_buffers, tpu_profile,
};

fn parse_size(s: &str) -> anyhow::Result<u64> {
    let upper = s.to_ascii_uppercase();
    let (num, mul) = if let Some(n) = upper.strip_suffix("GB") {
        (n, 1u64 << 30)
    } else if let Some(n) = upper.strip_suffix("MB") {
        (n, 1 << 20)
    } else if let Some(n) = upper.strip_suffix("KB") {
        (n, 1 << 10)
    } else {
        (upper.as_str(), 1)
    };
    let n: f64 = num.trim().parse().with_context(|| format!("bad size {s:?}"))?;
    Ok((n * mul as f64) as u64)
}

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let mut size = 300u64 << 20;
    let mut hosts = 1u32;
    let mut seed = 1u64;
    let mut out: Option<PathBuf> = None;
    let mut fixture: Option<String> = None;
    let mut multislice = false;
    let mut gpu = false;
    let mut devices = 8u32;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--size" => size = parse_size(&value()?)?,
            "--hosts" => hosts = value()?.parse()?,
            "--seed" => seed = value()?.parse()?,
            "--gpu" => gpu = true,
            "--devices" => devices = value()?.parse()?,
            "--out" => out = Some(value()?.into()),
            "--fixture" => fixture = Some(value()?),
            "--multislice" => multislice = true,
            _ => {
                bail!(
                    "unexpected argument {arg:?}; usage: synth_profile --size 300MB [--hosts N] [--seed S] \
                     [--multislice] --out DIR"
                )
            }
        }
    }
    let out = out.context("--out DIR is required")?;
    if let Some(name) = fixture {
        // A named reference fixture: a single host file in DIR (a session directory).
        let spec = fixtures::fixture(&name)
            .with_context(|| format!("unknown fixture {name:?}; known: {:?}", fixtures::FIXTURES))?;
        std::fs::create_dir_all(&out)?;
        let path = out.join("host0.xplane.pb");
        let bytes = tpu_profile(&spec);
        std::fs::write(&path, &bytes)?;
        support::emit(&format!("{} {} bytes\n", path.display(), bytes.len()))?;
        return Ok(());
    }
    let run = out.join("plugins/profile/synthetic");
    std::fs::create_dir_all(&run)?;
    if gpu {
        for host in 0..hosts {
            let bytes = xlens_testkit::gpu::gpu_profile_of_size(size, devices, seed.wrapping_add(u64::from(host)));
            let path = run.join(format!("gpu{host:04}.xplane.pb"));
            std::fs::write(&path, &bytes)?;
            support::emit(&format!("{} {} bytes\n", path.display(), bytes.len()))?;
        }
        return Ok(());
    }
    for host in 0..hosts {
        let program = Program::random(2000, seed);
        // An HLO module for the program (one instruction per op, with a buffer assignment: 4 GiB
        // of parameters and a temporary per fusion), so HLO-based analyses run too.
        let names: Vec<String> = program.ops().iter().map(|o| o.name.clone()).collect();
        let temps: Vec<(&str, u64)> =
            names.iter().filter(|n| n.starts_with("fusion")).map(|n| (n.as_str(), 8u64 << 20)).collect();
        let hlo = hlo_proto_with_buffers("jit_train_step", &program, &[("params", 4u64 << 30)], &temps);
        let (sparse_cores, megascale) = if multislice {
            (Some(SparseCoreSpec::embeddings()), MegaScaleSpec::on_first_all_gather(&program))
        } else {
            (None, None)
        };
        let spec = SynthSpec {
            program,
            seed: seed.wrapping_add(u64::from(host)),
            hlo_proto: Some(hlo),
            memory_profile_bytes: Some(4u64 << 30),
            sparse_cores,
            megascale,
            device_type: if multislice { "TPU v5".to_owned() } else { SynthSpec::default().device_type },
            ..SynthSpec::default()
        }
        .with_target_size(size);
        let bytes = tpu_profile(&spec);
        let path = run.join(format!("host{host:04}.xplane.pb"));
        std::fs::write(&path, &bytes)?;
        support::emit(&format!("{} {} bytes\n", path.display(), bytes.len()))?;
    }
    Ok(())
}
