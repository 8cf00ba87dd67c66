//! The `op_profile` example's output: steps, the category pie, per-op rows and the step anatomy.

use super::line;

use serde_json::{Value, json};
use xlens_roofline::{OpProfile, StepAnatomy, Steps};
use xlens_xplane::{Picos, Space};

/// The analyses of one host that `op_profile` prints.
#[derive(Debug)]
pub struct HostOpProfile {
    /// Host name.
    pub host: String,
    /// The op profile (TPU op lines, or host-thread ops joined with HLO).
    pub profile: OpProfile,
    /// The steps.
    pub steps: Steps,
    /// The anatomy of each step.
    pub anatomy: Vec<StepAnatomy>,
}

/// Builds the op profile, steps and anatomy of one decoded host, with the builders of the
/// detectors' `HostProfile` ([`xlens_roofline::op_analyses`]), so `ops` prints what a scan reads.
pub fn analyze(host: &str, space: &Space) -> Result<HostOpProfile, xlens_xplane::Error> {
    let (steps, profile, anatomy) = xlens_roofline::op_analyses(space)?;
    Ok(HostOpProfile { host: host.to_owned(), profile, steps, anatomy })
}

fn us(t: Picos) -> f64 {
    t.as_us_f64()
}

/// The `op_profile --json` document of a session: `{"hosts":[...]}`, one
/// [`op_profile_json`] entry per host, in host order.
pub fn op_profile_session_json(hosts: &[HostOpProfile]) -> Value {
    json!({ "hosts": hosts.iter().map(op_profile_json).collect::<Vec<_>>() })
}

/// One host's entry of the `op_profile --json` document:
/// `{"host","device","steps":[{"name","step_time_ms"}],"step_time_ms_mean","categories_us":{..},
/// "ops":[{"program","name","category","occurrences","self_time_us","flops","xprof_flops","bytes_accessed","bound"}],
/// "anatomy":[{"step","matmul_us","collective_exposed_us","collective_hidden_us","vector_us",
/// "data_formatting_us","infeed_outfeed_us","host_us","idle_us"}]}`.
/// Categories and ops cover the whole profile (all cores, all steps), as XProf's op profile counts:
/// `categories_us` is each category's self time in µs over the capture. `flops` is per execution,
/// `xprof_flops` XProf's count (docs/metrics.md).
pub fn op_profile_json(h: &HostOpProfile) -> Value {
    let p = &h.profile;
    let mut categories = serde_json::Map::new();
    for (name, t) in p.categories() {
        categories.insert(name, json!(us(t)));
    }
    let ops: Vec<Value> = p
        .ops
        .iter()
        .map(|o| {
            json!({
                "program": p.programs.get(&o.program_id).cloned().unwrap_or_else(|| o.program_id.to_string()),
                "name": o.name,
                "category": o.category,
                "occurrences": o.occurrences,
                "self_time_us": us(o.self_time),
                "flops": o.flops,
                "xprof_flops": o.xprof_flops,
                "bytes_accessed": o.bytes.total(),
                "bound": p.roofline(o).map(|r| r.bound_by.label()),
            })
        })
        .collect();
    let anatomy: Vec<Value> = h
        .steps
        .steps
        .iter()
        .zip(&h.anatomy)
        .map(|(s, a)| {
            json!({
                "step": s.name,
                "matmul_us": us(a.matmul),
                "collective_exposed_us": us(a.collective_exposed),
                "collective_hidden_us": us(a.collective_hidden),
                "vector_us": us(a.vector),
                "data_formatting_us": us(a.data_formatting),
                "infeed_outfeed_us": us(a.infeed_outfeed),
                "host_us": us(a.host),
                "idle_us": us(a.idle),
            })
        })
        .collect();
    json!({
        "host": h.host,
        "device": p.device_type.clone().unwrap_or_else(|| "unknown".to_owned()),
        "steps": h.steps.steps.iter().map(|s| json!({"name": s.name, "step_time_ms": s.duration.as_ms_f64()})).collect::<Vec<_>>(),
        "step_time_ms_mean": h.steps.stats().map(|s| s.mean_ms),
        "categories_us": categories,
        "ops": ops,
        "anatomy": anatomy,
    })
}

/// The step-time series' shape in words, with the rule behind it (no bare tag).
fn variance_text(v: &xlens_roofline::StepVariance) -> String {
    use xlens_roofline::{FLAT_CV, OUTLIER_FACTOR, StepVariance};
    match v {
        StepVariance::TooFewSteps => "too few steps to compare".to_owned(),
        StepVariance::Flat => format!("steady: stddev at most {:.0} % of the mean", 100.0 * FLAT_CV),
        StepVariance::Noisy => format!("noisy: stddev over {:.0} % of the mean, no clear outlier", 100.0 * FLAT_CV),
        StepVariance::Outliers(steps) => {
            let list: Vec<String> = steps.iter().map(i64::to_string).collect();
            format!("outlier steps {} at {OUTLIER_FACTOR}x the median or more", list.join(", "))
        }
    }
}

/// The op profile as text: steps, the category pie, the top ops, the anatomy.
pub fn op_profile_text(h: &HostOpProfile, top: usize) -> String {
    let p = &h.profile;
    let mut s = String::new();
    line(
        &mut s,
        format_args!("host {}  device {}  cores {}", h.host, p.device_type.as_deref().unwrap_or("unknown"), p.cores),
    );
    match h.steps.stats() {
        Some(st) => {
            line(
                &mut s,
                format_args!(
                    "steps {}  mean {:.3} ms  median {:.3} ms  stddev {:.3} ms  ({})",
                    st.count,
                    st.mean_ms,
                    st.median_ms,
                    st.stddev_ms,
                    variance_text(&h.steps.variance())
                ),
            );
        }
        None => {
            line(&mut s, format_args!("steps: none"));
        }
    }
    let total: Picos = p.categories().values().copied().sum();
    s.push('\n');
    line(
        &mut s,
        format_args!(
            "categories (self time summed over all cores and the whole capture, us; IDLE includes time outside the steps)"
        ),
    );
    let mut cats: Vec<(String, Picos)> = p.categories().into_iter().collect();
    cats.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, t) in cats {
        let pct = if total.0 > 0 { 100.0 * t.0 as f64 / total.0 as f64 } else { 0.0 };
        line(&mut s, format_args!("  {name:<28} {:>14.3} us {pct:>6.1}%", us(t)));
    }
    s.push('\n');
    line(&mut s, format_args!("top {top} ops by self time (summed over the capture)"));
    line(
        &mut s,
        format_args!(
            "  {:<36} {:<24} {:>8} {:>14} {:>12} {:>12}  bound",
            "op", "category", "count", "self us", "GFLOP/s", "GB/s"
        ),
    );
    for o in p.ops.iter().take(top) {
        let bound = p.roofline(o).map_or("-", |r| r.bound_by.label());
        // No rate for an async start or an op above the peaks (see `OpProfile::rates`).
        let (flops, hbm) = match p.rates(o) {
            Some((f, b)) => (format!("{:.1}", f / 1e9), format!("{:.1}", b / 1e9)),
            None => ("-".to_owned(), "-".to_owned()),
        };
        line(
            &mut s,
            format_args!(
                "  {:<36} {:<24} {:>8} {:>14.3} {flops:>12} {hbm:>12}  {bound}",
                o.name,
                o.category,
                o.occurrences,
                us(o.self_time)
            ),
        );
    }
    s.push('\n');
    line(&mut s, format_args!("step anatomy (us)"));
    line(
        &mut s,
        format_args!(
            "  {:<10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
            "step", "matmul", "coll.exp", "coll.hid", "vector", "formatting", "in/outfeed", "host", "idle"
        ),
    );
    for (st, a) in h.steps.steps.iter().zip(&h.anatomy) {
        line(
            &mut s,
            format_args!(
                "  {:<10} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>11.1}",
                st.name,
                us(a.matmul),
                us(a.collective_exposed),
                us(a.collective_hidden),
                us(a.vector),
                us(a.data_formatting),
                us(a.infeed_outfeed),
                us(a.host),
                us(a.idle)
            ),
        );
    }
    s
}
