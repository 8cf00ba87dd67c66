//! HBM plans: what a workload needs per chip, whether it fits, the fewest chips that fit it and
//! the largest batch that fits on a given slice.

use std::fmt;

use xlens_chips::{Bytes, ChipSpec};

use crate::dtype::{DType, Optimizer, Recipe, StateBytes};
use crate::error::{Error, ErrorKind, Result, add, mul, positive};
use crate::model::{ActivationConfig, Attention, KvShape, Remat, Transformer};

/// The largest chip count [`Plan::min_chips`] searches (2^20, beyond any pod).
pub const MAX_CHIPS: u64 = 1 << 20;
/// The largest global batch [`max_batch`] searches (2^40 sequences).
pub const MAX_BATCH: u64 = 1 << 40;

/// The fraction of HBM a plan may use (the rest is left for XLA temporaries, fragmentation and
/// the runtime). Default 0.8.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Budget(f64);

impl Budget {
    /// A fraction in (0, 1].
    pub fn new(fraction: f64) -> Result<Budget> {
        if fraction > 0.0 && fraction <= 1.0 {
            Ok(Budget(fraction))
        } else {
            Err(Error::new(ErrorKind::Budget(fraction)))
        }
    }

    /// The fraction.
    pub fn fraction(self) -> f64 {
        self.0
    }

    /// The usable bytes of a capacity: `floor(capacity × fraction)`.
    pub fn usable(self, capacity: Bytes) -> Bytes {
        Bytes((capacity.as_u64() as f64 * self.0).floor() as u64)
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget(0.8)
    }
}

/// How a job is laid out over chips: the product of the axes is the chip count.
///
/// Data-parallel replicas hold full copies of the state; FSDP shards the state and splits the
/// batch; tensor parallelism shards weights, heads and (with sequence parallelism) activations;
/// pipeline stages split the layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sharding {
    /// Data-parallel replicas.
    pub data: u64,
    /// Fully-sharded data-parallel (ZeRO-3) ways.
    pub fsdp: u64,
    /// Tensor-parallel ways.
    pub tensor: u64,
    /// Pipeline stages.
    pub pipeline: u64,
}

impl Default for Sharding {
    fn default() -> Self {
        Sharding { data: 1, fsdp: 1, tensor: 1, pipeline: 1 }
    }
}

impl Sharding {
    /// FSDP over `n` chips: the default layout for training.
    pub fn fsdp(n: u64) -> Sharding {
        Sharding { fsdp: n, ..Sharding::default() }
    }

    /// Tensor parallelism over `n` chips: the default layout for serving.
    pub fn tensor(n: u64) -> Sharding {
        Sharding { tensor: n, ..Sharding::default() }
    }

    /// Chips used: the product of the axes.
    pub fn chips(&self) -> Result<u64> {
        self.validate()?;
        crate::error::product("chip count", &[self.data, self.fsdp, self.tensor, self.pipeline])
    }

    /// Ways the state is sharded (FSDP × tensor × pipeline).
    fn state_ways(&self) -> u64 {
        self.fsdp.saturating_mul(self.tensor).saturating_mul(self.pipeline)
    }

    /// Ways the batch is split (data × FSDP).
    fn batch_ways(&self) -> u64 {
        self.data.saturating_mul(self.fsdp)
    }

    fn validate(&self) -> Result<()> {
        positive("data axis", self.data)?;
        positive("fsdp axis", self.fsdp)?;
        positive("tensor axis", self.tensor)?;
        positive("pipeline axis", self.pipeline)?;
        Ok(())
    }
}

impl fmt::Display for Sharding {
    /// `data=2 fsdp=4 tensor=1 pipeline=1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "data={} fsdp={} tensor={} pipeline={}", self.data, self.fsdp, self.tensor, self.pipeline)
    }
}

/// What the chips keep per parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Training: weights, gradients, master copy and optimizer moments.
    Training {
        /// Precision recipe.
        recipe: Recipe,
        /// Optimizer.
        optimizer: Optimizer,
    },
    /// Inference: the weights alone.
    Serving {
        /// Weight type.
        weights: DType,
    },
}

/// What runs on the chips: the resident state, the tokens in flight, and whether a KV cache is
/// held (serving, or sampling during RL training).
///
/// Activations are planned for training when the model's [`Transformer`] shape is known; the KV
/// cache when `kv_cache` is set and the model's [`KvShape`] is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Workload {
    /// Resident state.
    pub state: State,
    /// Sequence length (training) or cached context length (KV cache).
    pub seq: u64,
    /// Global batch, in sequences.
    pub batch: u64,
    /// Remat policy for training activations.
    pub remat: Remat,
    /// Attention implementation for training activations.
    pub attention: Attention,
    /// The KV cache element type, when a KV cache is held.
    pub kv_cache: Option<DType>,
}

impl Workload {
    /// Training without remat, with materialised attention and no KV cache.
    pub fn train(recipe: Recipe, optimizer: Optimizer, seq: u64, batch: u64) -> Workload {
        Workload {
            state: State::Training { recipe, optimizer },
            seq,
            batch,
            remat: Remat::None,
            attention: Attention::Materialized,
            kv_cache: None,
        }
    }

    /// Serving: weights and a KV cache of `batch` sequences of `seq` tokens.
    pub fn serve(weights: DType, kv_cache: DType, seq: u64, batch: u64) -> Workload {
        Workload {
            state: State::Serving { weights },
            seq,
            batch,
            remat: Remat::None,
            attention: Attention::Materialized,
            kv_cache: Some(kv_cache),
        }
    }

    /// The same workload with a remat policy.
    pub fn with_remat(self, remat: Remat) -> Workload {
        Workload { remat, ..self }
    }

    /// The same workload with an attention implementation.
    pub fn with_attention(self, attention: Attention) -> Workload {
        Workload { attention, ..self }
    }

    /// The same workload holding (or not) a KV cache.
    pub fn with_kv_cache(self, kv_cache: Option<DType>) -> Workload {
        Workload { kv_cache, ..self }
    }

    /// The same workload with another global batch.
    pub fn with_batch(self, batch: u64) -> Workload {
        Workload { batch, ..self }
    }

    /// The same workload with another sequence length.
    pub fn with_seq(self, seq: u64) -> Workload {
        Workload { seq, ..self }
    }

    /// State bytes per parameter.
    pub fn state_bytes_per_param(&self) -> StateBytes {
        match self.state {
            State::Training { recipe, optimizer } => StateBytes::training(recipe, optimizer),
            State::Serving { weights } => StateBytes::serving(weights),
        }
    }

    /// True when training.
    pub fn is_training(&self) -> bool {
        matches!(self.state, State::Training { .. })
    }

    /// `"train"` or `"serve"`.
    pub fn mode(&self) -> &'static str {
        if self.is_training() { "train" } else { "serve" }
    }

    /// The default layout on `n` chips: FSDP for training, tensor parallelism for serving.
    pub fn default_sharding(&self, n: u64) -> Sharding {
        if self.is_training() { Sharding::fsdp(n) } else { Sharding::tensor(n) }
    }
}

/// The model being planned: a parameter count, and optionally its shape (needed for
/// activations) and its attention cache shape (needed for the KV cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Model {
    /// Parameters.
    pub params: u64,
    /// The transformer shape, when known.
    pub shape: Option<Transformer>,
    /// The KV cache shape, when known (implied by `shape`).
    pub kv: Option<KvShape>,
}

impl Model {
    /// A model known only by its parameter count (no activations or KV cache are planned).
    pub fn from_params(params: u64) -> Result<Model> {
        Ok(Model { params: positive("params", params)?, shape: None, kv: None })
    }

    /// A model from its shape, with the parameter count it implies.
    pub fn from_shape(shape: Transformer) -> Result<Model> {
        Ok(Model { params: shape.params()?, shape: Some(shape), kv: Some(shape.kv_shape()) })
    }

    /// The same model with a KV cache shape (for a model known by its parameter count).
    pub fn with_kv(self, kv: KvShape) -> Model {
        Model { kv: Some(kv), ..self }
    }
}

/// HBM needed, by part. Totals are for the whole job; per-chip values for one chip of a layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Footprint {
    /// Weights, gradients, master copy and optimizer moments (serving: weights).
    pub state: Bytes,
    /// Activations saved for the backward pass (training only).
    pub activations: Bytes,
    /// KV cache (serving only).
    pub kv_cache: Bytes,
}

impl Footprint {
    /// The sum of the parts (saturating).
    pub fn total(&self) -> Bytes {
        self.state + self.activations + self.kv_cache
    }
}

/// What to plan: a model, a workload, a chip, a budget and a layout (or `None` to use the
/// fewest chips that fit with the default layout).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanRequest {
    /// The model.
    pub model: Model,
    /// Training or serving.
    pub workload: Workload,
    /// The chip.
    pub chip: &'static ChipSpec,
    /// The budget fraction of HBM.
    pub budget: Budget,
    /// An explicit layout; `None` plans on [`Plan::min_chips`] chips with the default layout.
    pub sharding: Option<Sharding>,
}

/// A finished plan.
///
/// ```
/// use xlens_budget::{Budget, Model, Optimizer, Plan, PlanRequest, Recipe, Workload};
/// use xlens_chips::ChipSpec;
/// // 7B parameters, Adam, mixed bf16: 112 GB of state; v5e at 80% of 16 GiB holds 12.8 GiB.
/// let req = PlanRequest {
///     model: Model::from_params(7_000_000_000)?,
///     workload: Workload::train(Recipe::MixedBf16, Optimizer::Adam, 2048, 8),
///     chip: ChipSpec::by_name("v5e")?,
///     budget: Budget::default(),
///     sharding: None,
/// };
/// let plan = Plan::new(&req)?;
/// assert_eq!(plan.total.state.as_u64(), 112_000_000_000);
/// assert_eq!(plan.min_chips, Some(9)); // 112e9 / 9 = 12.4e9 <= 0.8 × 16 GiB = 13.7e9
/// assert!(plan.fits);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// The request.
    pub request: PlanRequest,
    /// State bytes per parameter, by part.
    pub bytes_per_param: StateBytes,
    /// Whole-job footprint.
    pub total: Footprint,
    /// The layout evaluated: the request's, else the default layout on `min_chips` chips (on
    /// [`MAX_CHIPS`] when nothing fits).
    pub sharding: Sharding,
    /// Chips in that layout.
    pub chips: u64,
    /// Footprint of one chip in that layout.
    pub per_chip: Footprint,
    /// HBM capacity of one chip.
    pub capacity: Bytes,
    /// `budget × capacity`.
    pub usable: Bytes,
    /// The fewest chips that fit with the default layout; `None` when even [`MAX_CHIPS`] do not.
    pub min_chips: Option<u64>,
    /// Whether the evaluated layout fits within the budget.
    pub fits: bool,
}

impl Plan {
    /// Plans a request.
    pub fn new(req: &PlanRequest) -> Result<Plan> {
        positive("params", req.model.params)?;
        positive("seq", req.workload.seq)?;
        positive("batch", req.workload.batch)?;
        let bytes_per_param = req.workload.state_bytes_per_param();
        let total = footprint(&req.model, &req.workload, &Sharding::default())?;
        let capacity = req.chip.hbm_capacity;
        let usable = req.budget.usable(capacity);
        let min_chips = min_chips(&req.model, &req.workload, usable)?;
        let sharding = match req.sharding {
            Some(s) => s,
            None => req.workload.default_sharding(min_chips.unwrap_or(MAX_CHIPS)),
        };
        let chips = sharding.chips()?;
        let per_chip = footprint(&req.model, &req.workload, &sharding)?;
        Ok(Plan {
            request: *req,
            bytes_per_param,
            total,
            sharding,
            chips,
            per_chip,
            capacity,
            usable,
            min_chips,
            fits: per_chip.total() <= usable,
        })
    }

    /// Free bytes per chip under the budget (negative when over).
    pub fn headroom(&self) -> i128 {
        i128::from(self.usable.as_u64()) - i128::from(self.per_chip.total().as_u64())
    }

    /// The largest global batch that fits on the evaluated layout; see [`max_batch`].
    pub fn max_batch(&self) -> Result<Option<u64>> {
        max_batch(&self.request.model, &self.request.workload, &self.sharding, self.usable)
    }
}

/// What one chip holds for a workload under a layout (with `Sharding::default()`: the whole
/// job on one chip).
///
/// State is divided over FSDP × tensor × pipeline (rounded up). Training activations are those
/// of the local batch `ceil(batch / (data × fsdp))` over `ceil(layers / pipeline)` layers,
/// divided by the tensor axis (sequence parallelism); one micro-batch in flight per stage. The
/// KV cache holds `ceil(kv_heads / tensor)` heads of `ceil(batch / (data × fsdp))` sequences
/// over `ceil(layers / pipeline)` layers.
pub fn footprint(model: &Model, workload: &Workload, sharding: &Sharding) -> Result<Footprint> {
    sharding.validate()?;
    let per_param = workload.state_bytes_per_param().total();
    let state = mul("state size", model.params, per_param)?.div_ceil(sharding.state_ways());
    let local_batch = workload.batch.div_ceil(sharding.batch_ways());
    let mut fp = Footprint { state: Bytes(state), ..Footprint::default() };
    if let (State::Training { recipe, .. }, Some(shape)) = (workload.state, model.shape) {
        let stage = Transformer { layers: shape.layers.div_ceil(sharding.pipeline), ..shape };
        let cfg = ActivationConfig {
            seq: workload.seq,
            batch: local_batch,
            dtype: recipe.activation_dtype(),
            remat: workload.remat,
            attention: workload.attention,
        };
        let bytes = stage.activation_bytes(&cfg, stage.layers)?;
        fp.activations = Bytes(bytes.div_ceil(sharding.tensor));
    }
    if let (Some(dtype), Some(kv)) = (workload.kv_cache, model.kv) {
        let local = KvShape {
            layers: kv.layers.div_ceil(sharding.pipeline),
            kv_heads: kv.kv_heads.div_ceil(sharding.tensor),
            head_dim: kv.head_dim,
        };
        fp.kv_cache = Bytes(local.bytes(workload.seq, local_batch, dtype)?);
    }
    // The parts fit in 64 bits; so must their sum.
    add("footprint", add("footprint", fp.state.as_u64(), fp.activations.as_u64())?, fp.kv_cache.as_u64())?;
    Ok(fp)
}

/// The fewest chips whose default layout fits within `usable` bytes per chip; `None` when even
/// [`MAX_CHIPS`] do not (one sequence's activations or KV cache can exceed a chip).
///
/// Per-chip bytes never grow with the chip count, so this is a binary search.
pub fn min_chips(model: &Model, workload: &Workload, usable: Bytes) -> Result<Option<u64>> {
    let fits =
        |n: u64| -> Result<bool> { Ok(footprint(model, workload, &workload.default_sharding(n))?.total() <= usable) };
    if !fits(MAX_CHIPS)? {
        return Ok(None);
    }
    let (mut lo, mut hi) = (1u64, MAX_CHIPS); // answer in [lo, hi]
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? { hi = mid } else { lo = mid + 1 }
    }
    Ok(Some(lo))
}

/// The largest global batch (sequences) that fits a layout within `usable` bytes per chip;
/// `None` when a batch of 1 does not fit. Searches up to [`MAX_BATCH`].
pub fn max_batch(model: &Model, workload: &Workload, sharding: &Sharding, usable: Bytes) -> Result<Option<u64>> {
    let fits = |b: u64| -> Result<bool> {
        match footprint(model, &workload.with_batch(b), sharding) {
            Ok(fp) => Ok(fp.total() <= usable),
            // A batch whose footprint overflows 64 bits does not fit; other errors are real.
            Err(e) if e.is_overflow() && b > 1 => Ok(false),
            Err(e) => Err(e),
        }
    };
    if !fits(1)? {
        return Ok(None);
    }
    if fits(MAX_BATCH)? {
        return Ok(Some(MAX_BATCH));
    }
    let (mut lo, mut hi) = (1u64, MAX_BATCH); // fits(lo), !fits(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? { lo = mid } else { hi = mid }
    }
    Ok(Some(lo))
}

/// One row of a fit table: a workload on a chip.
#[derive(Clone, Debug, PartialEq)]
pub struct FitRow {
    /// The chip id.
    pub chip: &'static str,
    /// The workload's label.
    pub label: String,
    /// The plan.
    pub plan: Plan,
}

/// Plans every workload on every chip: the table across generations.
///
/// ```
/// use xlens_budget::{Attention, Budget, Model, Optimizer, Recipe, Remat, Transformer, Workload, fit_table};
/// use xlens_chips::ChipSpec;
/// let model = Model::from_shape(Transformer::llama2_7b())?;
/// let chips = ["v5e", "v5p", "v6e"].map(|c| ChipSpec::by_name(c).unwrap());
/// let train = Workload::train(Recipe::MixedBf16, Optimizer::Adam, 4096, 16)
///     .with_remat(Remat::Full)
///     .with_attention(Attention::Flash);
/// let rows = fit_table(&model, &[("adam".to_owned(), train)], &chips, Budget::default())?;
/// let min: Vec<_> = rows.iter().map(|r| r.plan.min_chips.unwrap()).collect();
/// // State 107.8 GB, plus 0.52 MB of activations per token of local batch (full remat).
/// assert_eq!(min, [12, 2, 6]); // 16 GiB, 95 GiB, 32 GiB per chip
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn fit_table(
    model: &Model,
    workloads: &[(String, Workload)],
    chips: &[&'static ChipSpec],
    budget: Budget,
) -> Result<Vec<FitRow>> {
    let mut rows = Vec::with_capacity(workloads.len() * chips.len());
    for (label, workload) in workloads {
        for &chip in chips {
            let plan = Plan::new(&PlanRequest { model: *model, workload: *workload, chip, budget, sharding: None })?;
            rows.push(FitRow { chip: chip.id, label: label.clone(), plan });
        }
    }
    Ok(rows)
}
