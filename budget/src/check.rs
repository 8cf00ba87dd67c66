//! Checking a plan against a profile's measured memory peak.

use std::fmt;

use xlens_chips::Bytes;

use crate::plan::Plan;

/// Where a measured peak came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemorySource {
    /// The runtime allocator's peak (XProf memory profile, `peak_bytes_in_use`).
    AllocatorPeak,
    /// The compiler's static buffer assignment (XProf memory viewer: peak heap of the program).
    BufferAssignment,
    /// Anything else, described.
    Other(String),
}

impl fmt::Display for MemorySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemorySource::AllocatorPeak => f.write_str("allocator peak"),
            MemorySource::BufferAssignment => f.write_str("buffer assignment"),
            MemorySource::Other(s) => f.write_str(s),
        }
    }
}

/// One device's measured memory peak, as decoded from a profile by another crate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProfileMemory {
    /// Peak bytes in use on one device.
    pub peak_bytes: Bytes,
    /// The device capacity the profile reports, if any.
    pub capacity: Option<Bytes>,
    /// Where the peak came from.
    pub source: MemorySource,
}

/// How a plan compares with a measured peak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Within the tolerance.
    Matches,
    /// The profile used more than planned: the plan misses something (temporaries, padding,
    /// unsharded state).
    Underestimated,
    /// The profile used less than planned: the plan counts something the program does not hold
    /// (or the profile missed part of the step).
    Overestimated,
}

impl Verdict {
    /// `"matches"`, `"underestimated"`, `"overestimated"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::Underestimated => "underestimated",
            Verdict::Overestimated => "overestimated",
        }
    }
}

/// A plan against a profile peak.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanCheck {
    /// Planned bytes per chip.
    pub planned: Bytes,
    /// Measured peak bytes per device.
    pub measured: Bytes,
    /// `measured − planned` in bytes (positive: the plan is short).
    pub gap_bytes: i128,
    /// `measured / planned − 1` (0.25: the profile used 25% more than planned).
    pub gap_fraction: f64,
    /// The verdict at the tolerance used.
    pub verdict: Verdict,
    /// Whether the measured peak is above the plan's usable budget.
    pub over_budget: bool,
    /// The capacity used for the budget: the profile's when it reports one, else the chip's.
    pub capacity: Bytes,
    /// Where the measured peak came from.
    pub source: MemorySource,
}

/// The default tolerance of [`check_plan`]: ±10%.
pub const DEFAULT_TOLERANCE: f64 = 0.10;

/// Compares a plan's per-chip bytes with a profile's peak, at ±10%.
///
/// ```
/// use xlens_budget::{Budget, MemorySource, Model, Optimizer, Plan, PlanRequest, ProfileMemory, Recipe, Verdict, Workload, check_plan};
/// use xlens_chips::{Bytes, ChipSpec};
/// let plan = Plan::new(&PlanRequest {
///     model: Model::from_params(1_000_000_000)?,
///     workload: Workload::train(Recipe::Fp32, Optimizer::Adam, 1024, 1),
///     chip: ChipSpec::by_name("v5p")?,
///     budget: Budget::default(),
///     sharding: None,
/// })?;
/// assert_eq!(plan.per_chip.total(), Bytes(16_000_000_000));
/// let peak = ProfileMemory { peak_bytes: Bytes(20_000_000_000), capacity: None, source: MemorySource::AllocatorPeak };
/// let check = check_plan(&plan, &peak);
/// assert_eq!((check.gap_bytes, check.verdict), (4_000_000_000, Verdict::Underestimated));
/// assert!((check.gap_fraction - 0.25).abs() < 1e-12);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_plan(plan: &Plan, memory: &ProfileMemory) -> PlanCheck {
    check_plan_with(plan, memory, DEFAULT_TOLERANCE)
}

/// [`check_plan`] with another tolerance (a fraction of the planned bytes).
pub fn check_plan_with(plan: &Plan, memory: &ProfileMemory, tolerance: f64) -> PlanCheck {
    let planned = plan.per_chip.total();
    let measured = memory.peak_bytes;
    let gap_bytes = i128::from(measured.as_u64()) - i128::from(planned.as_u64());
    let gap_fraction = if planned.as_u64() == 0 {
        if measured.as_u64() == 0 { 0.0 } else { f64::INFINITY }
    } else {
        measured.as_u64() as f64 / planned.as_u64() as f64 - 1.0
    };
    let verdict = if gap_fraction.abs() <= tolerance {
        Verdict::Matches
    } else if gap_fraction > 0.0 {
        Verdict::Underestimated
    } else {
        Verdict::Overestimated
    };
    let capacity = memory.capacity.unwrap_or(plan.capacity);
    PlanCheck {
        planned,
        measured,
        gap_bytes,
        gap_fraction,
        verdict,
        over_budget: measured > plan.request.budget.usable(capacity),
        capacity,
        source: memory.source.clone(),
    }
}
