//! The `hbm_plan` and `precision_audit` examples: argument parsing into typed requests, and
//! renderings of plans, fit tables and precision audits.

use std::fmt::Write as _;

use serde_json::{Value, json};
use xlens_budget::precision::{Accumulator, AuditSpec, DriftRow, MatmulAudit};
use xlens_budget::{
    Attention, Budget, DType, Error, ErrorKind, FitRow, KvShape, MAX_BATCH, Model, Optimizer, Plan, PlanRequest,
    Recipe, Remat, Result, Sharding, State, Transformer, Workload, parse,
};
use xlens_roofline::{Bytes, ChipSpec, chips::CATALOGUE};

/// `hbm_plan` usage.
pub const HBM_PLAN_USAGE: &str = "\
usage: hbm_plan (--params N | --model llama2-7b|llama2-70b|llama3-8b) [options] [--json]
  model:    --params N (7e9, 7B)  --layers L --hidden H --heads A --kv-heads K --head-dim D
            --ffn F --gated --vocab V
  workload: --mode train|serve (train)  --recipe fp32|mixed-bf16|bf16 (mixed-bf16)
            --optimizer adam|adafactor|lion|sgd-momentum|sgd (adam)  --seq S (2048)  --batch B (1)
            --remat none|full|dots-saveable (none)  --flash  --kv-dtype bf16|int8|fp8 (KV cache)
            --weights DTYPE (serve)
  chips:    --chip NAME | --chips a,b,c|all (v5e)  --budget 0.8|80% (0.8)
  layout:   --num-chips N | --data N --fsdp N --tensor N --pipeline N (fewest chips that fit)
  table:    hbm_plan --generations (Llama-2 7B/70B on every catalogue chip at 80%)";

/// Parsed `hbm_plan` arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct HbmPlanArgs {
    /// The model.
    pub model: Model,
    /// The workload.
    pub workload: Workload,
    /// Chips to plan for (one plan each).
    pub chips: Vec<&'static ChipSpec>,
    /// The budget fraction.
    pub budget: Budget,
    /// An explicit layout, if given.
    pub sharding: Option<Sharding>,
    /// `--json`.
    pub json: bool,
}

#[cold]
fn bad_flag(flag: &str) -> Error {
    unknown("flag", flag, "the flags listed by --help")
}

#[cold]
fn unknown(what: &'static str, value: &str, expected: &'static str) -> Error {
    Error::from(ErrorKind::Unknown { what, value: value.to_owned(), expected })
}

impl HbmPlanArgs {
    /// Parses the arguments after the program name. Bad values are typed errors: zero or
    /// negative sizes, unknown chips, recipes or flags, overflowing models.
    ///
    /// ```
    /// use xlens::render::budget::HbmPlanArgs;
    /// let args = HbmPlanArgs::parse(["--params", "7B", "--chip", "v5e"].map(String::from))?;
    /// assert_eq!(args.model.params, 7_000_000_000);
    /// assert!(HbmPlanArgs::parse(["--params", "-1"].map(String::from)).unwrap_err().is_non_positive());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<HbmPlanArgs> {
        let mut it = args.into_iter();
        fn count(what: &'static str, it: &mut impl Iterator<Item = String>) -> Result<u64> {
            let v = it.next().ok_or_else(|| missing(what))?;
            parse::count(what, &v)
        }
        let (mut params, mut preset) = (None, None);
        let (mut layers, mut hidden, mut heads, mut kv_heads, mut head_dim) = (None, None, None, None, None);
        let (mut ffn, mut gated, mut vocab) = (None, false, None);
        let (mut serve, mut recipe, mut optimizer) = (false, Recipe::MixedBf16, Optimizer::Adam);
        let (mut seq, mut batch, mut remat, mut flash) = (2048, 1, Remat::None, false);
        let (mut kv_dtype, mut weights) = (None::<DType>, None::<DType>);
        let (mut chips, mut budget, mut json) = (Vec::new(), Budget::default(), false);
        let (mut axes, mut num_chips) = ([None::<u64>; 4], None);
        while let Some(flag) = it.next() {
            let mut text = |what: &'static str| it.next().ok_or_else(|| missing(what));
            match flag.as_str() {
                "--params" => params = Some(count("params", &mut it)?),
                "--model" => {
                    let name = text("model")?;
                    preset = Some(match name.to_ascii_lowercase().as_str() {
                        "llama2-7b" | "llama-2-7b" => Transformer::llama2_7b(),
                        "llama2-70b" | "llama-2-70b" => Transformer::llama2_70b(),
                        "llama3-8b" | "llama-3-8b" => Transformer::llama3_8b(),
                        _ => return Err(unknown("model", &name, "llama2-7b, llama2-70b, llama3-8b")),
                    });
                }
                "--layers" => layers = Some(count("layers", &mut it)?),
                "--hidden" => hidden = Some(count("hidden", &mut it)?),
                "--heads" => heads = Some(count("heads", &mut it)?),
                "--kv-heads" => kv_heads = Some(count("kv_heads", &mut it)?),
                "--head-dim" => head_dim = Some(count("head_dim", &mut it)?),
                "--ffn" => ffn = Some(count("ffn", &mut it)?),
                "--gated" => gated = true,
                "--vocab" => vocab = Some(count("vocab", &mut it)?),
                "--mode" => {
                    let m = text("mode")?;
                    serve = match m.as_str() {
                        "train" => false,
                        "serve" => true,
                        _ => return Err(unknown("mode", &m, "train, serve")),
                    };
                }
                "--recipe" => recipe = text("recipe")?.parse()?,
                "--optimizer" => optimizer = text("optimizer")?.parse()?,
                "--seq" => seq = count("seq", &mut it)?,
                "--batch" => batch = count("batch", &mut it)?,
                "--remat" => remat = text("remat")?.parse()?,
                "--flash" => flash = true,
                "--kv-dtype" => kv_dtype = Some(text("kv-dtype")?.parse()?),
                "--weights" => weights = Some(text("weights")?.parse()?),
                "--chip" => chips.push(ChipSpec::by_name(&text("chip")?)?),
                "--chips" => {
                    let list = text("chips")?;
                    if list == "all" {
                        chips.extend(CATALOGUE.iter());
                    } else {
                        for name in list.split(',').filter(|s| !s.is_empty()) {
                            chips.push(ChipSpec::by_name(name)?);
                        }
                    }
                }
                "--budget" => budget = parse::budget(&text("budget")?)?,
                "--num-chips" => num_chips = Some(count("num-chips", &mut it)?),
                "--data" => axes[0] = Some(count("data", &mut it)?),
                "--fsdp" => axes[1] = Some(count("fsdp", &mut it)?),
                "--tensor" => axes[2] = Some(count("tensor", &mut it)?),
                "--pipeline" => axes[3] = Some(count("pipeline", &mut it)?),
                "--json" => json = true,
                other => return Err(bad_flag(other)),
            }
        }
        if chips.is_empty() {
            chips.push(ChipSpec::by_name("v5e")?);
        }

        // The model: a preset or explicit shape (flags override the preset), else a parameter
        // count with an optional KV cache shape.
        let shape = match (preset, layers, hidden, heads) {
            (Some(p), ..) => Some(Transformer {
                layers: layers.unwrap_or(p.layers),
                hidden: hidden.unwrap_or(p.hidden),
                heads: heads.unwrap_or(p.heads),
                kv_heads: kv_heads.unwrap_or(p.kv_heads),
                head_dim: head_dim.unwrap_or(p.head_dim),
                ffn: ffn.unwrap_or(p.ffn),
                gated_mlp: p.gated_mlp || gated,
                vocab: vocab.unwrap_or(p.vocab),
            }),
            (None, Some(l), Some(h), Some(a)) => {
                let mut t = Transformer::new(l, h, a)?;
                if let Some(d) = head_dim {
                    t = t.with_head_dim(d)?;
                }
                if let Some(k) = kv_heads {
                    t = t.with_kv_heads(k)?;
                }
                t = t.with_ffn(ffn.unwrap_or(t.ffn), gated)?;
                Some(t.with_vocab(vocab.unwrap_or(0)))
            }
            _ => None,
        };
        let model = match (shape, params) {
            (Some(t), None) => Model::from_shape(t)?,
            (Some(t), Some(p)) => Model { params: p, shape: Some(t), kv: Some(t.kv_shape()) },
            (None, Some(p)) => {
                let m = Model::from_params(p)?;
                match (layers, kv_heads, head_dim) {
                    (Some(l), Some(k), Some(d)) => m.with_kv(KvShape::new(l, k, d)?),
                    _ => m,
                }
            }
            (None, None) => return Err(missing("params (or --model, or --layers/--hidden/--heads)")),
        };
        let attention = if flash { Attention::Flash } else { Attention::Materialized };
        let workload = if serve {
            Workload::serve(weights.unwrap_or(recipe.weight_dtype()), kv_dtype.unwrap_or(DType::Bf16), seq, batch)
        } else {
            Workload::train(recipe, optimizer, seq, batch)
                .with_remat(remat)
                .with_attention(attention)
                .with_kv_cache(kv_dtype)
        };
        let sharding = if axes.iter().any(Option::is_some) {
            let [data, fsdp, tensor, pipeline] = axes.map(|a| a.unwrap_or(1));
            Some(Sharding { data, fsdp, tensor, pipeline })
        } else {
            num_chips.map(|n| workload.default_sharding(n))
        };
        Ok(HbmPlanArgs { model, workload, chips, budget, sharding, json })
    }

    /// One plan request per chip.
    pub fn requests(&self) -> Vec<PlanRequest> {
        self.chips
            .iter()
            .map(|&chip| PlanRequest {
                model: self.model,
                workload: self.workload,
                chip,
                budget: self.budget,
                sharding: self.sharding,
            })
            .collect()
    }
}

#[cold]
fn missing(what: &'static str) -> Error {
    Error::from(ErrorKind::Parse { what, value: String::new(), expected: "a value after the flag" })
}

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

/// `precision_audit` usage.
pub const PRECISION_AUDIT_USAGE: &str = "\
usage: precision_audit [--m M --k K --n N] [--seed S] [--outlier-scale X --outlier-every E]
                       [--ks 64,256,...] [--trials T] [--json]
  Audits bf16 and int8 (per-tensor, per-channel) matmuls of N(0,1) operands (default
  1024 x 1024 x 1024), the same product with outlier output channels in the right operand, and
  bf16 vs f32 accumulation over dot products of U(0,1) operands.";

/// Parsed `precision_audit` arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct PrecisionArgs {
    /// The clean product to audit.
    pub spec: AuditSpec,
    /// Outlier scale for the second audit (0 skips it).
    pub outlier_scale: f64,
    /// Outlier period in columns.
    pub outlier_every: usize,
    /// Dot-product lengths for the drift table.
    pub ks: Vec<usize>,
    /// Trials per length.
    pub trials: usize,
    /// `--json`.
    pub json: bool,
}

impl Default for PrecisionArgs {
    fn default() -> Self {
        PrecisionArgs {
            spec: AuditSpec::normal(1024, 1024, 1024, 1),
            outlier_scale: 100.0,
            outlier_every: 64,
            ks: vec![64, 256, 1024, 4096, 16384, 65536],
            trials: 4,
            json: false,
        }
    }
}

impl PrecisionArgs {
    /// Parses the arguments after the program name.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<PrecisionArgs> {
        let mut a = PrecisionArgs::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut size = |what: &'static str| -> Result<usize> {
                let v = it.next().ok_or_else(|| missing(what))?;
                usize::try_from(parse::count(what, &v)?).map_err(|_| Error::from(ErrorKind::Overflow { what }))
            };
            match flag.as_str() {
                "--m" => a.spec.m = size("m")?,
                "--k" => a.spec.k = size("k")?,
                "--n" => a.spec.n = size("n")?,
                "--seed" => a.spec.seed = size("seed")? as u64,
                "--outlier-every" => a.outlier_every = size("outlier-every")?,
                "--trials" => a.trials = size("trials")?,
                "--outlier-scale" => {
                    let v = it.next().ok_or_else(|| missing("outlier-scale"))?;
                    a.outlier_scale = v.parse().map_err(|_| {
                        Error::from(ErrorKind::Parse { what: "outlier-scale", value: v.clone(), expected: "a number" })
                    })?;
                }
                "--ks" => {
                    let v = it.next().ok_or_else(|| missing("ks"))?;
                    a.ks =
                        v.split(',').map(|k| parse::count("ks", k).map(|k| k as usize)).collect::<Result<Vec<_>>>()?;
                }
                "--json" => a.json = true,
                other => return Err(bad_flag(other)),
            }
        }
        Ok(a)
    }

    /// The outlier audit's spec: the clean spec with outlier columns in the right operand.
    pub fn outlier_spec(&self) -> Option<AuditSpec> {
        (self.outlier_scale > 0.0).then(|| AuditSpec {
            b: xlens_budget::precision::Distribution::OutlierColumns {
                std: 1.0,
                every: self.outlier_every,
                scale: self.outlier_scale,
            },
            seed: self.spec.seed + 1,
            ..self.spec
        })
    }
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

/// The seed table across generations: Llama-2-7B and Llama-2-70B, training state in f32, mixed
/// bf16 and pure bf16 with Adam (state only), mixed bf16 with activations (seq 4096, global batch 16,
/// full remat, flash attention), and bf16 serving with a bf16 KV cache of 8 × 4096 tokens; the
/// fewest chips of each catalogue chip at the budget. Printed by `hbm_plan --generations`.
pub fn generations_rows(budget: Budget) -> Result<Vec<FitRow>> {
    let chips: Vec<&'static ChipSpec> = CATALOGUE.iter().collect();
    let mut rows = Vec::new();
    for (name, shape) in [("llama2-7b", Transformer::llama2_7b()), ("llama2-70b", Transformer::llama2_70b())] {
        let shaped = Model::from_shape(shape)?;
        let state_only = Model::from_params(shaped.params)?;
        let train = |recipe| Workload::train(recipe, Optimizer::Adam, 4096, 16);
        let with_act = train(Recipe::MixedBf16).with_remat(Remat::Full).with_attention(Attention::Flash);
        let cases = [
            (state_only, format!("{name} fp32 adam state"), train(Recipe::Fp32)),
            (state_only, format!("{name} mixed-bf16 adam state"), train(Recipe::MixedBf16)),
            (state_only, format!("{name} pure-bf16 adam state"), train(Recipe::PureBf16)),
            (shaped, format!("{name} mixed-bf16 +act 16x4096"), with_act),
            (shaped, format!("{name} serve bf16 kv 8x4096"), Workload::serve(DType::Bf16, DType::Bf16, 4096, 8)),
        ];
        for (model, label, workload) in cases {
            rows.extend(xlens_budget::fit_table(&model, &[(label, workload)], &chips, budget)?);
        }
    }
    Ok(rows)
}
