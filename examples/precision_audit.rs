//! Audits bf16 and int8 matmul error against an f64 reference, and bf16 vs f32 accumulation
//! drift, with the theoretical bounds beside the measured errors.
//!
//! `cargo run --release --example precision_audit -- [--m 1024 --k 1024 --n 1024] [--json]`

mod support;

use xlens::args::{PRECISION_AUDIT_USAGE, PrecisionArgs};
use xlens::budget::precision::{Distribution, Scheme, accumulation_drift, audit_matmul};
use xlens::render::budget::{precision_json, precision_text};

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{PRECISION_AUDIT_USAGE}");
        return Ok(());
    }
    let cli = PrecisionArgs::parse(args)?;
    let mut audits = audit_matmul(&cli.spec, &Scheme::ALL)?;
    if let Some(outliers) = cli.outlier_spec() {
        audits.extend(audit_matmul(&outliers, &Scheme::ALL)?);
    }
    let drift = accumulation_drift(&cli.ks, &Distribution::unit_uniform(), cli.trials, cli.spec.seed)?;
    if cli.json {
        support::emit(&format!("{}\n", serde_json::to_string_pretty(&precision_json(&audits, &drift))?))?;
    } else {
        support::emit(&precision_text(&audits, &drift))?;
    }
    Ok(())
}
