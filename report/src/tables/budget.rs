//! What the `hbm_plan` and `precision_audit` examples print: plans, fit tables and precision
//! audits, as text and JSON (their arguments are the facade's `xlens::args`).

use std::fmt::Write as _;

use serde_json::{Value, json};
use xlens_budget::precision::{Accumulator, DriftRow, MatmulAudit};
use xlens_budget::{Attention, FitRow, MAX_BATCH, Plan, State, Workload};
use xlens_roofline::Bytes;

/// The `hbm_plan --json` document of one plan:
/// `{"bytes_per_param","state_bytes","activation_bytes","kv_cache_bytes","per_chip_bytes",
/// "min_chips","fits"}` (whole-job state, activations and KV cache; bytes per chip on the
/// evaluated layout; `min_chips` null when nothing fits), plus `mode`, `chip`, `chips`,
/// `sharding`, `budget`, `capacity_bytes`, `usable_bytes`, `per_chip` by part and `max_batch`
/// (the largest global batch on the layout; null when a batch of 1 does not fit, or when the
/// batch does not change the footprint because no shape was given).
pub fn hbm_plan_json(plan: &Plan) -> Value {
    let s = plan.sharding;
    json!({
        "bytes_per_param": plan.bytes_per_param.total(),
        "state_bytes": plan.total.state.as_u64(),
        "activation_bytes": plan.total.activations.as_u64(),
        "kv_cache_bytes": plan.total.kv_cache.as_u64(),
        "per_chip_bytes": plan.per_chip.total().as_u64(),
        "min_chips": plan.min_chips,
        "fits": plan.fits,
        "mode": plan.request.workload.mode(),
        "chip": plan.request.chip.id,
        "params": plan.request.model.params,
        "chips": plan.chips,
        "sharding": {"data": s.data, "fsdp": s.fsdp, "tensor": s.tensor, "pipeline": s.pipeline},
        "budget": plan.request.budget.fraction(),
        "capacity_bytes": plan.capacity.as_u64(),
        "usable_bytes": plan.usable.as_u64(),
        "per_chip": {
            "state_bytes": plan.per_chip.state.as_u64(),
            "activation_bytes": plan.per_chip.activations.as_u64(),
            "kv_cache_bytes": plan.per_chip.kv_cache.as_u64(),
        },
        "max_batch": plan.max_batch().ok().flatten().filter(|&b| b < MAX_BATCH),
    })
}

fn gib(b: Bytes) -> String {
    format!("{:.2} GiB", b.as_gib())
}

fn workload_line(w: &Workload) -> String {
    let mut line = match w.state {
        State::Training { recipe, optimizer } => format!(
            "train, {recipe}, {optimizer}, seq {}, batch {}, remat {}, {} attention",
            w.seq,
            w.batch,
            w.remat,
            if w.attention == Attention::Flash { "flash" } else { "materialized" }
        ),
        State::Serving { weights } => format!("serve, {weights} weights, seq {}, batch {}", w.seq, w.batch),
    };
    if let Some(kv) = w.kv_cache {
        let _ = write!(line, ", {kv} KV cache");
    }
    line
}

/// One plan as text: model, workload, chip and budget, the footprint by part, the layout, the
/// per-chip bytes, the fewest chips that fit and the largest batch on the layout.
pub fn hbm_plan_text(plan: &Plan) -> String {
    let mut out = String::new();
    let req = &plan.request;
    let bpp = plan.bytes_per_param;
    let model = &req.model;
    let shape = match (model.shape, model.kv) {
        (Some(t), _) => format!(
            " ({} layers, hidden {}, {} heads / {} kv, head {}, ffn {}{})",
            t.layers,
            t.hidden,
            t.heads,
            t.kv_heads,
            t.head_dim,
            t.ffn,
            if t.gated_mlp { " gated" } else { "" }
        ),
        (None, Some(kv)) => format!(" (KV: {} layers, {} kv heads, head {})", kv.layers, kv.kv_heads, kv.head_dim),
        (None, None) => String::new(),
    };
    let _ = writeln!(out, "model        {:.2}B params{shape}", model.params as f64 / 1e9);
    let _ = writeln!(out, "workload     {}", workload_line(&req.workload));
    let _ = writeln!(
        out,
        "chip         {}: {} HBM, budget {:.0}% = {} usable",
        req.chip.name,
        gib(plan.capacity),
        req.budget.fraction() * 100.0,
        gib(plan.usable)
    );
    let _ = writeln!(
        out,
        "state        {} B/param (weights {}, gradients {}, master {}, optimizer {}) = {}",
        bpp.total(),
        bpp.weights,
        bpp.gradients,
        bpp.master,
        bpp.optimizer,
        gib(plan.total.state)
    );
    let act_note = if req.workload.is_training() && model.shape.is_none() {
        " (not modelled: give --model or --layers/--hidden/--heads)"
    } else {
        ""
    };
    let _ = writeln!(out, "activations  {}{act_note}", gib(plan.total.activations));
    let kv_note = if req.workload.kv_cache.is_some() && model.kv.is_none() {
        " (not modelled: give --layers/--kv-heads/--head-dim)"
    } else {
        ""
    };
    let _ = writeln!(out, "KV cache     {}{kv_note}", gib(plan.total.kv_cache));
    let _ = writeln!(out, "layout       {} ({} chips)", plan.sharding, plan.chips);
    let _ = writeln!(
        out,
        "per chip     {} = state {} + activations {} + KV {}",
        gib(plan.per_chip.total()),
        gib(plan.per_chip.state),
        gib(plan.per_chip.activations),
        gib(plan.per_chip.kv_cache)
    );
    let headroom = plan.headroom() as f64 / (1u64 << 30) as f64;
    let _ =
        writeln!(out, "fits         {} (headroom {headroom:.2} GiB per chip)", if plan.fits { "yes" } else { "NO" });
    let min = plan.min_chips.map_or_else(|| "none (one sequence does not fit a chip)".to_owned(), |n| n.to_string());
    let _ = writeln!(out, "min chips    {min}");
    let max_batch = match plan.max_batch() {
        Ok(Some(MAX_BATCH)) => "unbounded (the footprint does not depend on the batch)".to_owned(),
        Ok(Some(b)) => b.to_string(),
        Ok(None) => "none".to_owned(),
        Err(e) => format!("error: {e}"),
    };
    let _ = writeln!(out, "max batch    {max_batch} (global, on this layout)");
    out
}

/// Plans as a table, one row per plan (the `--chips` view): chip, capacity, whole-job state,
/// activations and KV cache in GiB, the fewest chips that fit and bytes per chip there.
pub fn plans_table_text(plans: &[Plan]) -> String {
    let mut out = String::new();
    if let Some(p) = plans.first() {
        let _ =
            writeln!(out, "{:.2}B params, {}", p.request.model.params as f64 / 1e9, workload_line(&p.request.workload));
        let _ = writeln!(out, "budget {:.0}% of HBM", p.request.budget.fraction() * 100.0);
    }
    let _ = writeln!(
        out,
        "{:<7} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>13} {:>5}",
        "chip", "HBM GiB", "state GiB", "act GiB", "KV GiB", "B/param", "chips", "per-chip GiB", "fits"
    );
    for p in plans {
        let _ = writeln!(
            out,
            "{:<7} {:>8.0} {:>10.2} {:>10.2} {:>10.2} {:>10} {:>9} {:>13.2} {:>5}",
            p.request.chip.id,
            p.capacity.as_gib(),
            p.total.state.as_gib(),
            p.total.activations.as_gib(),
            p.total.kv_cache.as_gib(),
            p.bytes_per_param.total(),
            p.min_chips.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            p.per_chip.total().as_gib(),
            if p.fits { "yes" } else { "no" }
        );
    }
    out
}

/// A fit table pivoted: one row per workload label (state, activations and KV cache in GiB),
/// one column per chip with the fewest chips that fit (`-` when none do).
pub fn fit_pivot_text(rows: &[FitRow]) -> String {
    let mut labels: Vec<&str> = Vec::new();
    let mut chips: Vec<&str> = Vec::new();
    for r in rows {
        if !labels.contains(&r.label.as_str()) {
            labels.push(&r.label);
        }
        if !chips.contains(&r.chip) {
            chips.push(r.chip);
        }
    }
    let mut out = String::new();
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0).max(8);
    let _ = write!(out, "{:<width$} {:>10} {:>8} {:>7}", "workload", "state GiB", "act GiB", "KV GiB");
    for c in &chips {
        let _ = write!(out, " {c:>7}");
    }
    out.push('\n');
    for label in &labels {
        let Some(first) = rows.iter().find(|r| r.label == *label) else { continue };
        let t = first.plan.total;
        let _ = write!(
            out,
            "{label:<width$} {:>10.1} {:>8.1} {:>7.1}",
            t.state.as_gib(),
            t.activations.as_gib(),
            t.kv_cache.as_gib()
        );
        for c in &chips {
            let cell = rows
                .iter()
                .find(|r| r.label == *label && r.chip == *c)
                .and_then(|r| r.plan.min_chips)
                .map_or_else(|| "-".to_owned(), |n| n.to_string());
            let _ = write!(out, " {cell:>7}");
        }
        out.push('\n');
    }
    out
}

/// The `precision_audit --json` error table:
/// `{"matmul":[{"scheme","m","k","n","a","b","max_abs","rel_frobenius","median_ulps",
/// "max_ulps","bound","estimate"}],"accumulation":[{"k","accumulator","rel_error","bound",
/// "first_order"}]}`.
pub fn precision_json(audits: &[MatmulAudit], drift: &[DriftRow]) -> Value {
    json!({
        "matmul": audits.iter().map(|r| json!({
            "scheme": r.scheme.as_str(),
            "m": r.m, "k": r.k, "n": r.n,
            "a": r.a.to_string(), "b": r.b.to_string(),
            "max_abs": r.error.max_abs,
            "rel_frobenius": r.error.rel_frobenius,
            "median_ulps": r.error.median_ulps,
            "max_ulps": r.error.max_ulps,
            "bound": r.bound,
            "estimate": r.estimate,
        })).collect::<Vec<_>>(),
        "accumulation": drift.iter().map(|r| json!({
            "k": r.k,
            "accumulator": r.accumulator.as_str(),
            "rel_error": r.rel_error,
            "bound": r.bound,
            "first_order": r.first_order,
        })).collect::<Vec<_>>(),
    })
}

/// The precision audit as text: the matmul error table, then bf16 vs f32 accumulation by K.
pub fn precision_text(audits: &[MatmulAudit], drift: &[DriftRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<17} {:<16} {:<36} {:>10} {:>10} {:>10} {:>9} {:>10}",
        "scheme", "m x k x n", "b (a = N(0,1))", "max abs", "rel frob", "bound", "estimate", "median ulp"
    );
    for r in audits {
        let shape = format!("{}x{}x{}", r.m, r.k, r.n);
        let _ = writeln!(
            out,
            "{:<17} {:<16} {:<36} {:>10.3e} {:>10.3e} {:>10.3e} {:>9} {:>10.2}",
            r.scheme.as_str(),
            shape,
            r.b.to_string(),
            r.error.max_abs,
            r.error.rel_frobenius,
            r.bound,
            r.estimate.map_or_else(|| "-".to_owned(), |e| format!("{e:.2e}")),
            r.error.median_ulps
        );
    }
    let _ = writeln!(out, "rel frob = |C^ - C|_F / |C|_F against an f64 product; ulp = bf16 ULPs of the exact value");
    out.push('\n');
    let _ = writeln!(out, "accumulation of K products of U(0,1) bf16 operands (relative error of the sum)");
    let _ = writeln!(out, "{:>7} {:>12} {:>12} {:>12} {:>12}", "K", "bf16 acc", "bf16 bound", "f32 acc", "f32 bound");
    let mut ks: Vec<usize> = drift.iter().map(|r| r.k).collect();
    ks.dedup();
    for k in ks {
        let row = |acc| drift.iter().find(|r| r.k == k && r.accumulator == acc);
        let (Some(b), Some(f)) = (row(Accumulator::Bf16), row(Accumulator::F32)) else { continue };
        let bound = |r: &DriftRow| r.bound.map_or_else(|| "void".to_owned(), |v| format!("{v:.3e}"));
        let _ = writeln!(out, "{k:>7} {:>12.3e} {:>12} {:>12.3e} {:>12}", b.rel_error, bound(b), f.rel_error, bound(f));
    }
    let _ = writeln!(out, "bound = gamma_(K-1) * sum|x| / |sum x|, void once (K-1)u >= 1 (u = 2^-8 for bf16)");
    out
}
