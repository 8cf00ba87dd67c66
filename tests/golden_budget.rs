//! Golden tests of what the `roofline_table`, `hbm_plan` and `precision_audit` examples print:
//! the same library functions, checked against files in `tests/golden/` (prefixes `roofline_`
//! and `budget_`). Set `XLENS_BLESS=1` to rewrite them after an intended change.

mod common;

use common::*;

use serde_json::Value;
use xlens::args::{HbmPlanArgs, PrecisionArgs};
use xlens::budget::precision::{Distribution, Scheme, accumulation_drift, audit_matmul};
use xlens::budget::{Budget, Plan, generations_table};
use xlens::report::tables::budget::{
    fit_pivot_text, hbm_plan_json, hbm_plan_text, plans_table_text, precision_json, precision_text,
};
use xlens::report::tables::roofline::{intensity_text, roofline_table_json, roofline_table_text};
use xlens::roofline::{ChipSpec, FlopsPerByte, chips::CATALOGUE};

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

fn plans(line: &str) -> Vec<Plan> {
    HbmPlanArgs::parse(args(line)).unwrap().requests().iter().map(|r| Plan::new(r).unwrap()).collect()
}

#[test]
fn roofline_table_outputs() {
    let all: Vec<&ChipSpec> = CATALOGUE.iter().collect();
    let json = roofline_table_json(&all);
    check("roofline_table.json", &pretty(&json));
    check("roofline_table.txt", &roofline_table_text(&all));
    let tpus: Vec<_> = ["v5e", "v5p", "v6e"].into_iter().map(|c| ChipSpec::by_name(c).unwrap()).collect();
    check("roofline_intensity_170.txt", &intensity_text(&tpus, FlopsPerByte(170.0)));
    // The contract scripts rely on.
    let v5e = &json[1];
    assert_eq!(v5e["chip"], "v5e");
    assert_eq!(v5e["peak_bf16_flops"].as_f64(), Some(1.97e14));
    assert_eq!(v5e["hbm_bytes_per_s"].as_f64(), Some(8.19e11));
    assert_eq!(v5e["hbm_capacity_bytes"].as_u64(), Some(16 << 30));
    assert_eq!(v5e["ridge_bf16"].as_f64(), Some(240.5));
}

#[test]
fn hbm_plan_outputs() {
    // The JSON contract's flags: state, KV cache, per chip, fewest chips, fits.
    let line = "--params 7e9 --recipe mixed-bf16 --optimizer adam --chip v5e --budget 0.8 \
                --layers 32 --kv-heads 32 --head-dim 128 --seq 4096 --batch 1 --kv-dtype bf16";
    let plan = &plans(line)[0];
    let json = hbm_plan_json(plan);
    check("budget_hbm_plan_7b_v5e.json", &pretty(&json));
    check("budget_hbm_plan_7b_v5e.txt", &hbm_plan_text(plan));
    for key in
        ["bytes_per_param", "state_bytes", "activation_bytes", "kv_cache_bytes", "per_chip_bytes", "min_chips", "fits"]
    {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["bytes_per_param"], 16);
    assert_eq!(json["state_bytes"], 112_000_000_000u64);
    assert_eq!(json["kv_cache_bytes"], 2u64 << 30);
    assert_eq!(json["min_chips"], 10);
    assert_eq!(json["fits"], true);

    let llama = plans("--model llama2-7b --seq 4096 --batch 16 --remat full --flash --chip v6e");
    check("budget_hbm_plan_llama2_7b_train_v6e.txt", &hbm_plan_text(&llama[0]));
    let serve = plans("--model llama2-70b --mode serve --seq 4096 --batch 8 --chips v5e,v5p,v6e,v7");
    check("budget_hbm_plan_llama2_70b_serve.txt", &plans_table_text(&serve));
    let fixed =
        plans("--model llama2-7b --seq 4096 --batch 16 --remat full --flash --chip v5e --data 2 --fsdp 4 --tensor 2");
    assert!(!fixed[0].fits);
    check("budget_hbm_plan_llama2_7b_fixed_v5e.json", &pretty(&hbm_plan_json(&fixed[0])));
}

#[test]
fn the_generations_table() {
    let rows = generations_table(Budget::default()).unwrap();
    check("budget_generations.txt", &fit_pivot_text(&rows));
}

#[test]
fn precision_audit_outputs() {
    // A small configuration (the example's default is 1024³); same seed, same figures.
    let cli = PrecisionArgs::parse(args("--m 64 --k 512 --n 64 --seed 7 --ks 64,1024,16384 --trials 2")).unwrap();
    let mut audits = audit_matmul(&cli.spec, &Scheme::ALL).unwrap();
    audits.extend(audit_matmul(&cli.outlier_spec().unwrap(), &Scheme::ALL).unwrap());
    let drift = accumulation_drift(&cli.ks, &Distribution::unit_uniform(), cli.trials, cli.spec.seed).unwrap();
    check("budget_precision_audit.txt", &precision_text(&audits, &drift));
    let json = precision_json(&audits, &drift);
    assert_eq!(json["matmul"].as_array().unwrap().len(), 6);
    assert_eq!(json["accumulation"].as_array().unwrap().len(), 6);
    let bf16 = &json["matmul"][0];
    assert_eq!(bf16["scheme"], "bf16");
    assert!(bf16["rel_frobenius"].as_f64().unwrap() < bf16["bound"].as_f64().unwrap());
    assert!(json["accumulation"][5]["bound"].as_f64().is_some()); // f32 at K=16384 keeps a bound
    assert!(json["accumulation"][4]["bound"].is_null()); // bf16 at K=16384: void
}

#[test]
fn bad_arguments_are_typed_errors() {
    for (line, needle) in [
        ("--params 0", "params must be at least 1"),
        ("--params -7B", "params must be positive"),
        ("--params 1e30", "overflows 64 bits"),
        ("--params 7B --chip tpu9", "unknown chip \"tpu9\""),
        ("--params 7B --recipe fp64", "unknown recipe"),
        ("--params 7B --budget 1.5", "budget fraction must be in (0, 1]"),
        ("--params 7B --frobnicate", "unexpected argument '--frobnicate'"),
        ("--model llama2-7b --layers 0", "layers must be at least 1"),
        ("--chip v5e", "params"),
    ] {
        let err = HbmPlanArgs::parse(args(line)).unwrap_err();
        assert!(err.to_string().contains(needle), "{line}: {err}");
    }
    // A model whose state overflows 64 bits fails at planning, not with a wrapped number.
    let req = HbmPlanArgs::parse(args("--params 2e18 --recipe fp32")).unwrap().requests()[0];
    assert!(Plan::new(&req).unwrap_err().is_overflow());
}
