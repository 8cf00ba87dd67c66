//! Plans HBM for a model on one or more chips: state, activations, KV cache, bytes per chip,
//! the fewest chips that fit and the largest batch on the layout.
//!
//! `cargo run --example hbm_plan -- --params 7e9 --recipe mixed-bf16 --optimizer adam --chip v5e`
//! `cargo run --example hbm_plan -- --model llama2-70b --mode serve --seq 4096 --batch 8 --chips v5e,v5p,v6e`
//! `--json` prints `{"bytes_per_param","state_bytes","activation_bytes","kv_cache_bytes",
//! "per_chip_bytes","min_chips","fits",...}` (an array with several chips); `--help` lists the flags;
//! `--generations` prints the Llama-2 table across every catalogue chip at 80%.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::args::PlanFlags>("hbm_plan")
}
