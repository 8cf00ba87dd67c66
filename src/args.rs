//! The `plan` (`hbm_plan`) and `precision_audit` (`audit`) command lines, declared with clap as
//! every other subcommand is (feature `args`): the flags ([`PlanFlags`], [`AuditFlags`]), their
//! checks and the typed requests they make ([`HbmPlanArgs`], [`PrecisionArgs`]), golden-tested
//! without a process. The `xlens` binary, the examples and the Python package parse with these
//! same declarations.

use clap::{Args, FromArgMatches, ValueEnum};
use xlens_budget::precision::AuditSpec;
use xlens_budget::{
    Attention, Budget, DType, Error, KvShape, Model, Optimizer, PlanRequest, Recipe, Remat, Result, Sharding,
    Transformer, Workload, parse,
};
use xlens_roofline::{ChipSpec, chips::CATALOGUE};

/// Why a command line of `plan` or `audit` was refused.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// A flag clap refused: unknown, missing its value, or a value that does not parse. The
    /// message is clap's first line, with the flag's name and what it expects.
    #[error("{0}")]
    Usage(String),
    /// Flags that parse but do not make a model or workload (a model with no size, zero layers).
    #[error(transparent)]
    Model(#[from] Error),
}

impl ArgsError {
    /// Whether a size was zero or negative (`--params -1`).
    pub fn is_non_positive(&self) -> bool {
        match self {
            ArgsError::Usage(text) => text.contains("must be positive") || text.contains("must be at least 1"),
            ArgsError::Model(e) => e.is_non_positive(),
        }
    }
}

/// The words of `name`'s command line parsed as `T`, a clap error as one line.
fn words<T: Args + FromArgMatches, I: IntoIterator<Item = String>>(
    name: &'static str,
    args: I,
) -> std::result::Result<T, ArgsError> {
    let command = T::augment_args(clap::Command::new(name));
    let matches = command.try_get_matches_from(std::iter::once(name.to_owned()).chain(args));
    matches.and_then(|m| T::from_arg_matches(&m)).map_err(|e| {
        let text = e.to_string();
        ArgsError::Usage(text.lines().next().unwrap_or("usage mistake").trim_start_matches("error: ").to_owned())
    })
}

/// A positive count flag (`7e9`, `7B`, `32K`), its error the budget's.
fn count(what: &'static str) -> impl Fn(&str) -> Result<u64> + Clone + Send + Sync + 'static {
    move |s| parse::count(what, s)
}

/// A positive size flag that must also fit `usize`.
fn size(what: &'static str) -> impl Fn(&str) -> Result<usize> + Clone + Send + Sync + 'static {
    move |s| {
        usize::try_from(parse::count(what, s)?).map_err(|_| Error::from(xlens_budget::ErrorKind::Overflow { what }))
    }
}

fn chip(s: &str) -> std::result::Result<&'static ChipSpec, String> {
    ChipSpec::by_name(s).map_err(|e| e.to_string())
}

/// The chips of one `--chips` flag.
#[derive(Clone, Debug, PartialEq)]
pub struct ChipList(pub Vec<&'static ChipSpec>);

/// `--chips a,b,c` or `all`.
fn chip_list(s: &str) -> std::result::Result<ChipList, String> {
    if s == "all" {
        return Ok(ChipList(CATALOGUE.iter().collect()));
    }
    s.split(',').filter(|s| !s.is_empty()).map(chip).collect::<std::result::Result<_, _>>().map(ChipList)
}

fn preset(s: &str) -> std::result::Result<Transformer, String> {
    match s.to_ascii_lowercase().as_str() {
        "llama2-7b" | "llama-2-7b" => Ok(Transformer::llama2_7b()),
        "llama2-70b" | "llama-2-70b" => Ok(Transformer::llama2_70b()),
        "llama3-8b" | "llama-3-8b" => Ok(Transformer::llama3_8b()),
        _ => Err(format!("unknown model {s:?} (expected llama2-7b, llama2-70b, llama3-8b)")),
    }
}

/// What is planned for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Training: weights, gradients, optimizer state and activations.
    #[default]
    Train,
    /// Serving: weights and the KV cache.
    Serve,
}

/// `xlens plan` / `hbm_plan`: HBM plans for a model on one or more chips.
#[derive(Clone, Debug, Args)]
#[command(
    about = "HBM plans: state, activations, KV cache, bytes per chip, fewest chips, largest batch",
    after_help = "The model is --params, --model or --layers/--hidden/--heads; with --model, shape flags override \
                  the preset's. `--generations` prints Llama-2 7B/70B on every catalogue chip at 80 %."
)]
pub struct PlanFlags {
    /// The parameter count (7000000000, 7e9, 7B).
    #[arg(long, value_name = "N", value_parser = count("params"), allow_hyphen_values = true, help_heading = "Model")]
    pub params: Option<u64>,
    /// A preset: llama2-7b, llama2-70b or llama3-8b.
    #[arg(long, value_name = "NAME", value_parser = preset, help_heading = "Model")]
    pub model: Option<Transformer>,
    /// Transformer layers.
    #[arg(long, value_name = "L", value_parser = count("layers"), allow_hyphen_values = true, help_heading = "Model")]
    pub layers: Option<u64>,
    /// Hidden size.
    #[arg(long, value_name = "H", value_parser = count("hidden"), allow_hyphen_values = true, help_heading = "Model")]
    pub hidden: Option<u64>,
    /// Attention heads.
    #[arg(long, value_name = "A", value_parser = count("heads"), allow_hyphen_values = true, help_heading = "Model")]
    pub heads: Option<u64>,
    /// Key/value heads (grouped-query attention).
    #[arg(long, value_name = "K", value_parser = count("kv_heads"), allow_hyphen_values = true, help_heading = "Model")]
    pub kv_heads: Option<u64>,
    /// Head dimension.
    #[arg(long, value_name = "D", value_parser = count("head_dim"), allow_hyphen_values = true, help_heading = "Model")]
    pub head_dim: Option<u64>,
    /// MLP width.
    #[arg(long, value_name = "F", value_parser = count("ffn"), allow_hyphen_values = true, help_heading = "Model")]
    pub ffn: Option<u64>,
    /// A gated MLP (SwiGLU: three matrices).
    #[arg(long, help_heading = "Model")]
    pub gated: bool,
    /// Vocabulary size.
    #[arg(long, value_name = "V", value_parser = count("vocab"), allow_hyphen_values = true, help_heading = "Model")]
    pub vocab: Option<u64>,
    /// Training or serving.
    #[arg(long, value_enum, default_value_t = Mode::Train, help_heading = "Workload")]
    pub mode: Mode,
    /// Training precision: fp32, mixed-bf16 or bf16.
    #[arg(long, value_name = "RECIPE", default_value = "mixed-bf16", value_parser = |s: &str| s.parse::<Recipe>(), help_heading = "Workload")]
    pub recipe: Recipe,
    /// Optimizer: adam, adafactor, lion, sgd-momentum or sgd.
    #[arg(long, value_name = "OPT", default_value = "adam", value_parser = |s: &str| s.parse::<Optimizer>(), help_heading = "Workload")]
    pub optimizer: Optimizer,
    /// Sequence length.
    #[arg(long, value_name = "S", default_value = "2048", value_parser = count("seq"), allow_hyphen_values = true, help_heading = "Workload")]
    pub seq: u64,
    /// Batch size.
    #[arg(long, value_name = "B", default_value = "1", value_parser = count("batch"), allow_hyphen_values = true, help_heading = "Workload")]
    pub batch: u64,
    /// Rematerialisation: none, full or dots-saveable.
    #[arg(long, value_name = "REMAT", default_value = "none", value_parser = |s: &str| s.parse::<Remat>(), help_heading = "Workload")]
    pub remat: Remat,
    /// Flash attention (no materialised attention matrix).
    #[arg(long, help_heading = "Workload")]
    pub flash: bool,
    /// A KV cache of this dtype: bf16, int8 or fp8.
    #[arg(long, value_name = "DTYPE", value_parser = |s: &str| s.parse::<DType>(), help_heading = "Workload")]
    pub kv_dtype: Option<DType>,
    /// Weight dtype when serving [default: the recipe's].
    #[arg(long, value_name = "DTYPE", value_parser = |s: &str| s.parse::<DType>(), help_heading = "Workload")]
    pub weights: Option<DType>,
    /// A chip (repeatable; a catalogue name or alias) [default: v5e].
    #[arg(long = "chip", value_name = "CHIP", value_parser = chip, help_heading = "Chips")]
    pub chip: Vec<&'static ChipSpec>,
    /// Chips as a list (`v5e,v5p`) or `all`.
    #[arg(long, value_name = "LIST", value_parser = chip_list, help_heading = "Chips")]
    pub chips: Vec<ChipList>,
    /// The share of HBM a plan may use: 0.8 or 80%.
    #[arg(long, value_name = "FRACTION", default_value = "0.8", value_parser = parse::budget, help_heading = "Chips")]
    pub budget: Budget,
    /// Chips in the layout (the workload's default sharding over them).
    #[arg(long, value_name = "N", value_parser = count("num-chips"), allow_hyphen_values = true, help_heading = "Layout")]
    pub num_chips: Option<u64>,
    /// Data-parallel ways.
    #[arg(long, value_name = "N", value_parser = count("data"), allow_hyphen_values = true, help_heading = "Layout")]
    pub data: Option<u64>,
    /// FSDP ways.
    #[arg(long, value_name = "N", value_parser = count("fsdp"), allow_hyphen_values = true, help_heading = "Layout")]
    pub fsdp: Option<u64>,
    /// Tensor-parallel ways.
    #[arg(long, value_name = "N", value_parser = count("tensor"), allow_hyphen_values = true, help_heading = "Layout")]
    pub tensor: Option<u64>,
    /// Pipeline stages.
    #[arg(long, value_name = "N", value_parser = count("pipeline"), allow_hyphen_values = true, help_heading = "Layout")]
    pub pipeline: Option<u64>,
    /// The table of Llama-2 7B and 70B on every catalogue chip at 80 % (no other flag).
    #[arg(long, conflicts_with_all = ["params", "model", "layers", "chip", "chips", "json"])]
    pub generations: bool,
    /// One JSON document (an array with several chips).
    #[arg(long)]
    pub json: bool,
}

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

impl HbmPlanArgs {
    /// Parses the words after the program name with [`PlanFlags`]' declarations. Bad values are
    /// errors: zero or negative sizes, unknown chips, recipes or flags, overflowing models.
    ///
    /// ```
    /// use xlens::args::HbmPlanArgs;
    /// let args = HbmPlanArgs::parse(["--params", "7B", "--chip", "v5e"].map(String::from))?;
    /// assert_eq!(args.model.params, 7_000_000_000);
    /// assert!(HbmPlanArgs::parse(["--params", "-1"].map(String::from)).unwrap_err().is_non_positive());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> std::result::Result<HbmPlanArgs, ArgsError> {
        HbmPlanArgs::from_flags(words::<PlanFlags, _>("hbm_plan", args)?)
    }

    /// The model, workload, chips and layout the flags describe.
    pub fn from_flags(f: PlanFlags) -> std::result::Result<HbmPlanArgs, ArgsError> {
        let PlanFlags { params, model: preset, layers, hidden, heads, kv_heads, head_dim, ffn, gated, vocab, .. } = f;
        let mut chips = f.chip;
        chips.extend(f.chips.into_iter().flat_map(|l| l.0));
        if chips.is_empty() {
            chips.push(ChipSpec::by_name("v5e").map_err(Error::from)?);
        }
        let (serve, recipe, optimizer, seq, batch, remat, flash) =
            (f.mode == Mode::Serve, f.recipe, f.optimizer, f.seq, f.batch, f.remat, f.flash);
        let (kv_dtype, weights, budget, json, num_chips) = (f.kv_dtype, f.weights, f.budget, f.json, f.num_chips);
        let axes = [f.data, f.fsdp, f.tensor, f.pipeline];

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
            (None, None) => {
                return Err(ArgsError::Usage(
                    "a model is needed: --params N, --model NAME or --layers, --hidden and --heads".to_owned(),
                ));
            }
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

/// The most elements one matrix of `audit` may have (`--m x --k`, `--k x --n`, `--m x --n`):
/// 2^26, 512 MiB of f64; the audit holds a few such matrices and their rounded copies.
pub const MAX_AUDIT_MATRIX_ELEMENTS: u64 = 1 << 26;
/// The longest dot product of `audit`'s drift table (`--ks`).
pub const MAX_DRIFT_LENGTH: usize = 1 << 24;
/// The most trials per length of `audit`'s drift table (`--trials`).
pub const MAX_TRIALS: usize = 10_000;

/// `xlens audit` / `precision_audit`: bf16 and int8 matmul error against an f64 reference, and
/// bf16 vs f32 accumulation drift.
#[derive(Clone, Debug, Args)]
#[command(
    about = "BF16 / INT8 errors of matmuls and accumulation drift",
    long_about = "Audits bf16 and int8 (per-tensor, per-channel) matmuls of N(0,1) operands (default 1024 x 1024 x \
                  1024), the same product with outlier output channels in the right operand, and bf16 vs f32 \
                  accumulation over dot products of U(0,1) operands."
)]
pub struct AuditFlags {
    /// Rows of the left operand.
    #[arg(long, value_name = "M", default_value = "1024", value_parser = size("m"), allow_hyphen_values = true)]
    pub m: usize,
    /// The inner dimension.
    #[arg(long, value_name = "K", default_value = "1024", value_parser = size("k"), allow_hyphen_values = true)]
    pub k: usize,
    /// Columns of the right operand.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = size("n"), allow_hyphen_values = true)]
    pub n: usize,
    /// The random seed.
    #[arg(long, value_name = "S", default_value = "1", value_parser = size("seed"), allow_hyphen_values = true)]
    pub seed: usize,
    /// Scale of the outlier columns of the second audit (0 skips it).
    #[arg(long, value_name = "X", default_value_t = 100.0)]
    pub outlier_scale: f64,
    /// Every how many columns an outlier column comes.
    #[arg(long, value_name = "E", default_value = "64", value_parser = size("outlier-every"), allow_hyphen_values = true)]
    pub outlier_every: usize,
    /// Dot-product lengths of the drift table.
    #[arg(long, value_name = "K,...", value_delimiter = ',', default_value = "64,256,1024,4096,16384,65536", value_parser = size("ks"), allow_hyphen_values = true)]
    pub ks: Vec<usize>,
    /// Trials per length.
    #[arg(long, value_name = "T", default_value = "4", value_parser = size("trials"), allow_hyphen_values = true)]
    pub trials: usize,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

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
        PrecisionArgs::from_flags(words::<AuditFlags, _>("precision_audit", []).expect("the defaults parse"))
            .expect("the defaults are within the limits")
    }
}

impl PrecisionArgs {
    /// Parses the words after the program name with [`AuditFlags`]' declarations.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> std::result::Result<PrecisionArgs, ArgsError> {
        PrecisionArgs::from_flags(words::<AuditFlags, _>("precision_audit", args)?)
    }

    /// The audits the flags describe; sizes past [`MAX_AUDIT_MATRIX_ELEMENTS`],
    /// [`MAX_DRIFT_LENGTH`] or [`MAX_TRIALS`] are refused before anything is allocated
    /// (`--n 7B` once asked for 28.7 TB and aborted).
    ///
    /// ```
    /// use xlens::args::PrecisionArgs;
    /// let err = PrecisionArgs::parse(["--n", "7B"].map(String::from)).unwrap_err();
    /// assert!(err.to_string().contains("--n"), "{err}");
    /// ```
    pub fn from_flags(f: AuditFlags) -> std::result::Result<PrecisionArgs, ArgsError> {
        let matrices = [("--m x --k", f.m, f.k), ("--k x --n", f.k, f.n), ("--m x --n", f.m, f.n)];
        for (what, a, b) in matrices {
            if (a as u64).saturating_mul(b as u64) > MAX_AUDIT_MATRIX_ELEMENTS {
                return Err(ArgsError::Usage(format!(
                    "{what} = {a} x {b} elements: past the {MAX_AUDIT_MATRIX_ELEMENTS} elements a matrix of the \
                     audit may have (--m, --k and --n size the matrices)"
                )));
            }
        }
        if let Some(k) = f.ks.iter().find(|&&k| k > MAX_DRIFT_LENGTH) {
            return Err(ArgsError::Usage(format!(
                "--ks {k}: past the longest dot product of the drift table, {MAX_DRIFT_LENGTH}"
            )));
        }
        if f.trials > MAX_TRIALS {
            return Err(ArgsError::Usage(format!("--trials {}: past the {MAX_TRIALS} trials allowed", f.trials)));
        }
        Ok(PrecisionArgs {
            spec: AuditSpec::normal(f.m, f.k, f.n, f.seed as u64),
            outlier_scale: f.outlier_scale,
            outlier_every: f.outlier_every,
            ks: f.ks,
            trials: f.trials,
            json: f.json,
        })
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
