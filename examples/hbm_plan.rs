//! Plans HBM for a model on one or more chips: state, activations, KV cache, bytes per chip,
//! the fewest chips that fit and the largest batch on the layout.
//!
//! `cargo run --example hbm_plan -- --params 7e9 --recipe mixed-bf16 --optimizer adam --chip v5e`
//! `cargo run --example hbm_plan -- --model llama2-70b --mode serve --seq 4096 --batch 8 --chips v5e,v5p,v6e`
//! `--json` prints `{"bytes_per_param","state_bytes","activation_bytes","kv_cache_bytes",
//! "per_chip_bytes","min_chips","fits",...}` (an array with several chips); `--help` lists the flags;
//! `--generations` prints the Llama-2 table across every catalogue chip at 80%.

mod support;

use xlens::args::{HBM_PLAN_USAGE, HbmPlanArgs};
use xlens::budget::{Budget, Plan, generations_table};
use xlens::render::budget::{fit_pivot_text, hbm_plan_json, hbm_plan_text, plans_table_text};

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{HBM_PLAN_USAGE}");
        return Ok(());
    }
    if args == ["--generations"] {
        support::emit(&fit_pivot_text(&generations_table(Budget::default())?))?;
        return Ok(());
    }
    let cli = HbmPlanArgs::parse(args)?;
    let plans = cli.requests().iter().map(Plan::new).collect::<Result<Vec<_>, _>>()?;
    match (cli.json, plans.as_slice()) {
        (true, [one]) => support::emit(&format!("{}\n", serde_json::to_string_pretty(&hbm_plan_json(one))?))?,
        (true, many) => {
            let all: Vec<_> = many.iter().map(hbm_plan_json).collect();
            support::emit(&format!("{}\n", serde_json::to_string_pretty(&all)?))?;
        }
        (false, [one]) => support::emit(&hbm_plan_text(one))?,
        (false, many) => support::emit(&plans_table_text(many))?,
    }
    Ok(())
}
