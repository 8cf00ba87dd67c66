//! What a profile diff compares of a run, kept in the report (`"comparison"` in the JSON) so that
//! a saved `fault_scan --format json` report can be the baseline of a later diff.

use serde::{Deserialize, Serialize};
use xlens_xplane::Picos;

use crate::profile::HostProfile;

/// Ops kept per run: the rest, the shortest, are summed in [`Comparison::ops_cutoff_ms_per_step`].
pub const MAX_COMPARED_OPS: usize = 500;

/// A run's step times, time per category and time per op, per step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The step times in order (ms): per step, the slowest host's.
    pub step_times_ms: Vec<f64>,
    /// Self time per step by op category (ms), largest first, of the host the report's figures
    /// are of (the slowest).
    pub categories: Vec<CategoryTime>,
    /// Leaf ops by self time per step (ms), largest first, at most [`MAX_COMPARED_OPS`].
    pub ops: Vec<OpTime>,
    /// When ops were left out: the time per step of the shortest op kept (an op missing from
    /// the list took at most this long).
    pub ops_cutoff_ms_per_step: Option<f64>,
    /// The devices (TPU cores, GPUs) the category and op times per step are summed over: those
    /// that ran the profiled programs, which on a GPU host can be fewer than its GPUs (0 in a
    /// report written before this field).
    #[serde(default)]
    pub cores: u32,
}

/// Self time per step of one category.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CategoryTime {
    /// XProf's category (`convolution fusion`, `custom-call`, …).
    pub category: String,
    /// Self time per step (ms).
    pub ms_per_step: f64,
}

/// Self time per step of one op, with what identifies it across compilations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpTime {
    /// The program's name, without its program id (which changes with every compile).
    pub program: String,
    /// The instruction name.
    pub name: String,
    /// Its result shape and opcode (`f32[32,256]{1,0} fusion`), to pair renamed instructions.
    pub signature: String,
    /// XProf's category.
    pub category: String,
    /// Self time per step (ms).
    pub ms_per_step: f64,
}

/// `jit_train_step(36)` → `jit_train_step`.
pub fn program_name(display: &str) -> &str {
    match display.rfind('(') {
        Some(at)
            if display.ends_with(')') && display[at + 1..display.len() - 1].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &display[..at]
        }
        _ => display,
    }
}

/// The result shape and opcode of an instruction's HLO text: `%fusion.3 = f32[8]{0} fusion(...)`
/// → `f32[8]{0} fusion`; empty without text.
pub fn signature(long_name: &str) -> String {
    let Some((_, rhs)) = long_name.split_once(" = ") else { return String::new() };
    let head = rhs.split('(').next().unwrap_or_default();
    head.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The comparison data of one host (its step times and op profile).
pub(crate) fn of_host(host: &HostProfile) -> Comparison {
    let mut c = Comparison::default();
    let steps = match host.steps() {
        Ok(steps) => {
            c.step_times_ms = steps.steps.iter().map(|s| s.duration.as_ms_f64()).collect();
            steps.steps.len().max(1) as f64
        }
        Err(_) => 1.0,
    };
    let Ok(profile) = host.op_profile() else { return c };
    c.cores = profile.cores;
    let per_step = |t: Picos| t.as_ms_f64() / steps;
    let mut categories: Vec<CategoryTime> = profile
        .categories()
        .into_iter()
        .map(|(category, t)| CategoryTime { category, ms_per_step: per_step(t) })
        .collect();
    // IDLE per step is the device's idle inside the steps (the health's `idle_pct` of the step,
    // on every core), not the capture's idle over the step count: a capture that compiles for a
    // second between 7 ms steps idles 1,292 ms "per step" by the latter (docs/metrics.md).
    if let Ok(anatomy) = host.anatomy()
        && !anatomy.is_empty()
        && let Some(idle) = categories.iter_mut().find(|c| c.category == xlens_roofline::IDLE)
    {
        let within: Picos = anatomy.iter().map(|a| a.idle + a.host).sum();
        idle.ms_per_step = within.as_ms_f64() / anatomy.len() as f64 * f64::from(profile.cores.max(1));
    }
    categories.sort_by(|a, b| b.ms_per_step.total_cmp(&a.ms_per_step).then(a.category.cmp(&b.category)));
    c.categories = categories;
    let mut ops: Vec<OpTime> = profile
        .ops
        .iter()
        .filter(|o| !o.has_inner_ops() && o.self_time.0 > 0)
        .map(|o| OpTime {
            program: program_name(profile.programs.get(&o.program_id).map_or("", String::as_str)).to_owned(),
            name: o.name.clone(),
            signature: signature(&o.long_name),
            category: o.category.clone(),
            ms_per_step: per_step(o.self_time),
        })
        .collect();
    ops.sort_by(|a, b| {
        b.ms_per_step.total_cmp(&a.ms_per_step).then_with(|| (&a.program, &a.name).cmp(&(&b.program, &b.name)))
    });
    if ops.len() > MAX_COMPARED_OPS {
        ops.truncate(MAX_COMPARED_OPS);
        c.ops_cutoff_ms_per_step = ops.last().map(|o| o.ms_per_step);
    }
    c.ops = ops;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_names_lose_their_id_only() {
        assert_eq!(program_name("jit_train_step(36)"), "jit_train_step");
        assert_eq!(program_name("f(x)"), "f(x)");
        assert_eq!(program_name("main"), "main");
    }

    #[test]
    fn signatures_are_the_shape_and_opcode() {
        assert_eq!(signature("%fusion.3 = f32[8,16]{1,0} fusion(f32[8]{0} %p), kind=kLoop"), "f32[8,16]{1,0} fusion");
        assert_eq!(signature("fusion.3"), "");
    }
}
