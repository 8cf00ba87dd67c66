//! Audits bf16 and int8 matmul error against an f64 reference, and bf16 vs f32 accumulation
//! drift, with the theoretical bounds beside the measured errors.
//!
//! `cargo run --release --example precision_audit -- [--m 1024 --k 1024 --n 1024] [--json]`

mod support;

use xlens::args::PRECISION_AUDIT_USAGE;

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{PRECISION_AUDIT_USAGE}");
        return Ok(());
    }
    support::jobs::audit(args)
}
