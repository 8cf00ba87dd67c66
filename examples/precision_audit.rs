//! Audits bf16 and int8 matmul error against an f64 reference, and bf16 vs f32 accumulation
//! drift, with the theoretical bounds beside the measured errors.
//!
//! `cargo run --release --example precision_audit -- [--m 1024 --k 1024 --n 1024] [--json]`

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::args::AuditFlags>("precision_audit")
}
