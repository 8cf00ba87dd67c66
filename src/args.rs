//! Command-line words into typed requests, for the `hbm_plan` and `precision_audit` examples:
//! every flag, its checks and its error (`xlens_budget::Error`), golden-tested without a process.

use xlens_budget::precision::AuditSpec;
use xlens_budget::{
    Attention, Budget, DType, Error, ErrorKind, KvShape, Model, Optimizer, PlanRequest, Recipe, Remat, Result,
    Sharding, Transformer, Workload, parse,
};
use xlens_roofline::{ChipSpec, chips::CATALOGUE};

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
    /// use xlens::args::HbmPlanArgs;
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
