//! The `op_profile` example's output: steps, the category pie, per-op rows and the step anatomy.

use super::line;
use crate::text::{clip, column_width};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};
use xlens_roofline::{
    FrameworkOp, FrameworkOpStats, OpProfile, OpSide, OpStats, Step, StepAnatomy, Steps, TfDataPipeline,
    TfDataPipelines,
};
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
    /// The framework op profile of a host without HLO (TensorFlow without XLA), which the
    /// text and JSON give instead of the kernel-level op table; `None` for XLA captures
    /// ([`xlens_roofline::framework_op_analysis`]).
    pub framework: Option<FrameworkOpStats>,
    /// The `tf.data` pipelines of the host ([`TfDataPipelines`]); `None` without `tf.data`
    /// iterator events.
    pub tf_data: Option<TfDataPipelines>,
}

/// Builds the op profile, steps and anatomy of one decoded host, with the builders of the
/// detectors' `HostProfile` ([`xlens_roofline::op_analyses`]), so `ops` prints what a scan reads.
pub fn analyze(host: &str, space: &Space) -> Result<HostOpProfile, xlens_xplane::Error> {
    let (steps, profile, anatomy) = xlens_roofline::op_analyses(space)?;
    let framework = xlens_roofline::framework_op_analysis(space).transpose()?;
    let tf_data = match space.host_threads() {
        Some(plane) => TfDataPipelines::read(plane)?,
        None => None,
    };
    Ok(HostOpProfile { host: host.to_owned(), profile, steps, anatomy, framework, tf_data })
}

fn us(t: Picos) -> f64 {
    t.as_us_f64()
}

/// The `op_profile --json` document of a session: `{"hosts":[...]}`, one
/// [`op_profile_json`] entry per host, in host order.
pub fn op_profile_session_json(hosts: &[HostOpProfile]) -> Value {
    json!({ "hosts": OpProfileHostsJson(hosts) })
}

/// One host's entry of the `op_profile --json` document:
/// `{"host","device","steps":[{"name","step_time_ms"}],"step_time_ms_mean","categories_us":{..},
/// "ops":[{"program","name","category","occurrences","self_time_us","flops","xprof_flops","bytes_accessed","bound"}],
/// "anatomy":[{"step","matmul_us","collective_exposed_us","collective_hidden_us","vector_us",
/// "data_formatting_us","infeed_outfeed_us","host_us","idle_us"}]}`.
/// Categories and ops cover the whole profile (all cores, all steps), as XProf's op profile counts:
/// `categories_us` is each category's self time in µs over the capture. `flops` is per execution,
/// `xprof_flops` XProf's count (docs/metrics.md).
///
/// A host without HLO whose devices name each kernel's TensorFlow op (TensorFlow without XLA)
/// has one key more, `framework_ops` ([`framework_ops_json`]): XProf's framework-op
/// statistics. XLA captures do not have it.
pub fn op_profile_json(h: &HostOpProfile) -> Value {
    serde_json::to_value(OpProfileJson(h)).unwrap_or_default()
}

/// The hosts of the `op_profile --json` document, serialized as they are written: each host's
/// entry ([`op_profile_json`]) and each of its rows is written from the analysis, so a
/// serializer over a writer (`serde_json::to_writer_pretty`) holds no copy of the document,
/// whose steps and anatomy grow with the steps of the capture.
#[derive(Clone, Copy, Debug)]
pub struct OpProfileHostsJson<'a>(pub &'a [HostOpProfile]);

impl Serialize for OpProfileHostsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(OpProfileJson))
    }
}

/// One host's entry of the `op_profile --json` document ([`op_profile_json`]), serialized as it
/// is written.
#[derive(Clone, Copy, Debug)]
pub struct OpProfileJson<'a>(pub &'a HostOpProfile);

impl Serialize for OpProfileJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (h, p) = (self.0, &self.0.profile);
        let mut map =
            s.serialize_map(Some(7 + usize::from(h.framework.is_some()) + usize::from(h.tf_data.is_some())))?;
        map.serialize_entry("host", &h.host)?;
        map.serialize_entry("device", p.device_type.as_deref().unwrap_or("unknown"))?;
        map.serialize_entry("steps", &Rows(|| h.steps.steps.iter().map(StepJson)))?;
        map.serialize_entry("step_time_ms_mean", &h.steps.stats().map(|s| s.mean_ms))?;
        map.serialize_entry("categories_us", &CategoriesJson(p))?;
        map.serialize_entry("ops", &Rows(|| p.ops.iter().map(|o| OpJson(p, o))))?;
        map.serialize_entry("anatomy", &Rows(|| h.steps.steps.iter().zip(&h.anatomy).map(|(s, a)| AnatomyJson(s, a))))?;
        if let Some(fw) = &h.framework {
            map.serialize_entry("framework_ops", &framework_ops_json(fw))?;
        }
        if let Some(tf_data) = &h.tf_data {
            map.serialize_entry("tf_data", &tf_data_json(tf_data))?;
        }
        map.end()
    }
}

/// A JSON array of the rows an iterator yields, serialized one at a time.
struct Rows<F>(F);

impl<F, I> Serialize for Rows<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// `{"name","step_time_ms"}` of one step.
struct StepJson<'a>(&'a Step);

impl Serialize for StepJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("name", &self.0.name)?;
        map.serialize_entry("step_time_ms", &self.0.duration.as_ms_f64())?;
        map.end()
    }
}

/// The category pie in µs, in the categories' order.
struct CategoriesJson<'a>(&'a OpProfile);

impl Serialize for CategoriesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.categories().into_iter().map(|(name, t)| (name, us(t))))
    }
}

/// One op's row.
struct OpJson<'a>(&'a OpProfile, &'a OpStats);

impl Serialize for OpJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (p, o) = (self.0, self.1);
        let mut map = s.serialize_map(Some(9))?;
        match p.programs.get(&o.program_id) {
            Some(program) => map.serialize_entry("program", program)?,
            None => map.serialize_entry("program", &o.program_id.to_string())?,
        }
        map.serialize_entry("name", &o.name)?;
        map.serialize_entry("category", &o.category)?;
        map.serialize_entry("occurrences", &o.occurrences)?;
        map.serialize_entry("self_time_us", &us(o.self_time))?;
        map.serialize_entry("flops", &o.flops)?;
        map.serialize_entry("xprof_flops", &o.xprof_flops)?;
        map.serialize_entry("bytes_accessed", &o.bytes.total())?;
        map.serialize_entry("bound", &p.roofline(o).map(|r| r.bound_by.label()))?;
        map.end()
    }
}

/// The `framework_ops` entry of a host without HLO: XProf's framework-op statistics
/// (`framework_op_stats`, with idle time):
/// `{"attribution","device":{"total_us","idle_us","ops":[..]},"host":{"total_us","idle_us","ops":[..]}}`,
/// each op `{"type","name","occurrences","total_us","self_us","share_pct","eager"}` (`share_pct`:
/// of the side's total, idle included), device ops with `"kernels":[{"name","occurrences","total_us"}]`,
/// the kernels and copies they launched. Ops by self time, longest first. `attribution` is the
/// stat that named the kernels' ops: `tf_op`, `level_0` (TensorFlow 2.2–2.4, which XProf 2.24
/// no longer reads: its table has no device op there) or `none`.
pub fn framework_ops_json(fw: &FrameworkOpStats) -> Value {
    let op = |o: &FrameworkOp| {
        let mut v = json!({
            "type": o.op_type,
            "name": o.name,
            "occurrences": o.occurrences,
            "total_us": us(o.total),
            "self_us": us(o.self_time),
            "share_pct": 100.0 * fw.share(o),
            "eager": o.eager,
        });
        if o.side == OpSide::Device {
            v["kernels"] = o
                .kernels
                .iter()
                .map(|(name, n, t)| json!({"name": name, "occurrences": n, "total_us": us(*t)}))
                .collect();
        }
        v
    };
    json!({
        "attribution": fw.attribution.as_str(),
        "device": {
            "total_us": us(fw.device_total),
            "idle_us": us(fw.device_idle()),
            "ops": fw.device.iter().map(op).collect::<Vec<_>>(),
        },
        "host": {
            "total_us": us(fw.host_total),
            "idle_us": us(fw.host_idle()),
            "ops": fw.host.iter().map(op).collect::<Vec<_>>(),
        },
    })
}

/// The `tf.data` pipelines as JSON (XProf's `tf.data` bottleneck analysis): `slow_call_us` (the
/// threshold a slow call passes) and `pipelines`, slowest first, each with `name` (`Host:0`,
/// `Device:0`), `kind` (`host` or `device`), `root` (the root iterator's name), `calls`,
/// `mean_latency_us`, `min_latency_us`, `max_latency_us`, `slow_calls`, `bottleneck` (the name of
/// the slowest call's bottleneck iterator, or null) and `iterators`: the iterators of its
/// slowest call in the order it reached them, with `id` (a decimal string: ids run past 2^53),
/// `name`, `stage` (the dataset op), `kind` (its [`xlens_roofline::TfDataStageKind`] in snake
/// case), `async`, `calls`, `total_us`, `self_us` and `blocking`.
pub fn tf_data_json(tf_data: &TfDataPipelines) -> Value {
    let pipeline = |p: &TfDataPipeline| {
        json!({
            "name": p.name,
            "kind": p.kind.as_str(),
            "root": p.root_name,
            "calls": p.calls,
            "mean_latency_us": us(p.mean_latency),
            "min_latency_us": us(p.min_latency),
            "max_latency_us": us(p.max_latency),
            "slow_calls": p.slow_calls,
            "bottleneck": p.bottleneck().map(|b| b.name.as_str()),
            "iterators": p.iterators.iter().map(|it| json!({
                "id": it.id.to_string(),
                "name": it.name,
                "stage": it.short_name(),
                "kind": it.kind().as_str(),
                "async": it.is_async(),
                "calls": it.calls,
                "total_us": us(it.total),
                "self_us": us(it.self_time),
                "blocking": it.blocking,
            })).collect::<Vec<_>>(),
        })
    };
    json!({
        "slow_call_us": us(xlens_roofline::SLOW_TF_DATA_CALL),
        "pipelines": tf_data.pipelines.iter().map(pipeline).collect::<Vec<_>>(),
    })
}

/// The `tf.data` pipelines as text: a line per pipeline, then the iterators of its slowest call.
fn tf_data_text(s: &mut String, tf_data: &TfDataPipelines) {
    s.push('\n');
    line(
        s,
        format_args!(
            "tf.data pipelines (XProf's tf.data bottleneck analysis: the iterators of each pipeline's slowest call; \
             a call over {:.0} us is slow)",
            us(xlens_roofline::SLOW_TF_DATA_CALL)
        ),
    );
    for p in &tf_data.pipelines {
        line(
            s,
            format_args!(
                "  {} (`{}`): {} call(s), mean {:.3} us, min {:.3} us, max {:.3} us, {} slow; bottleneck {}",
                p.name,
                p.root_name,
                p.calls,
                us(p.mean_latency),
                us(p.min_latency),
                us(p.max_latency),
                p.slow_calls,
                p.bottleneck().map_or_else(|| "none".to_owned(), |b| format!("`{}`", b.short_name())),
            ),
        );
        let w = column_width(p.iterators.iter().map(|it| it.name.as_str()), 40, 100);
        line(s, format_args!("    {:<w$} {:>8} {:>14} {:>14}  blocking", "iterator", "calls", "total us", "self us"));
        for (i, it) in p.iterators.iter().enumerate() {
            line(
                s,
                format_args!(
                    "    {:<w$} {:>8} {:>14.3} {:>14.3}  {}{}",
                    clip(&it.name, w),
                    it.calls,
                    us(it.total),
                    us(it.self_time),
                    if it.blocking { "yes" } else { "no" },
                    if p.bottleneck == Some(i) { "  <- bottleneck" } else { "" },
                ),
            );
        }
    }
}

/// One step's anatomy row, in µs.
struct AnatomyJson<'a>(&'a Step, &'a StepAnatomy);

impl Serialize for AnatomyJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (st, a) = (self.0, self.1);
        let mut map = s.serialize_map(Some(9))?;
        map.serialize_entry("step", &st.name)?;
        map.serialize_entry("matmul_us", &us(a.matmul))?;
        map.serialize_entry("collective_exposed_us", &us(a.collective_exposed))?;
        map.serialize_entry("collective_hidden_us", &us(a.collective_hidden))?;
        map.serialize_entry("vector_us", &us(a.vector))?;
        map.serialize_entry("data_formatting_us", &us(a.data_formatting))?;
        map.serialize_entry("infeed_outfeed_us", &us(a.infeed_outfeed))?;
        map.serialize_entry("host_us", &us(a.host))?;
        map.serialize_entry("idle_us", &us(a.idle))?;
        map.end()
    }
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

/// The category pie of the op profile.
fn categories_text(s: &mut String, p: &OpProfile) {
    let total: Picos = p.categories().values().copied().sum();
    s.push('\n');
    line(
        s,
        format_args!(
            "categories (self time summed over all cores and the whole capture, us; IDLE includes time outside the steps)"
        ),
    );
    let mut cats: Vec<(String, Picos)> = p.categories().into_iter().collect();
    cats.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let w = column_width(cats.iter().map(|c| c.0.as_str()), 28, 48);
    for (name, t) in cats {
        let pct = if total.0 > 0 { 100.0 * t.0 as f64 / total.0 as f64 } else { 0.0 };
        line(s, format_args!("  {:<w$} {:>14.3} us {pct:>6.1}%", clip(&name, w), us(t)));
    }
}

/// The top ops of the HLO (or kernel-level) op profile.
fn ops_text(s: &mut String, p: &OpProfile, top: usize) {
    s.push('\n');
    line(s, format_args!("top {top} ops by self time (summed over the capture)"));
    let shown = || p.ops.iter().take(top);
    let (wn, wc) = (
        column_width(shown().map(|o| o.name.as_str()), 36, 64),
        column_width(shown().map(|o| o.category.as_str()), 24, 40),
    );
    line(
        s,
        format_args!(
            "  {:<wn$} {:<wc$} {:>8} {:>14} {:>12} {:>12}  bound",
            "op", "category", "count", "self us", "GFLOP/s", "GB/s"
        ),
    );
    for o in shown() {
        let bound = p.roofline(o).map_or("-", |r| r.bound_by.label());
        // No rate for an async start or an op above the peaks (see `OpProfile::rates`).
        let (flops, hbm) = match p.rates(o) {
            Some((f, b)) => (format!("{:.1}", f / 1e9), format!("{:.1}", b / 1e9)),
            None => ("-".to_owned(), "-".to_owned()),
        };
        line(
            s,
            format_args!(
                "  {:<wn$} {:<wc$} {:>8} {:>14.3} {flops:>12} {hbm:>12}  {bound}",
                clip(&o.name, wn),
                clip(&o.category, wc),
                o.occurrences,
                us(o.self_time)
            ),
        );
    }
}

/// The framework op table of a host without HLO: each side's total and idle time, and its top
/// ops by self time with their share of the side's total (XProf's framework-op statistics).
fn framework_text(s: &mut String, fw: &FrameworkOpStats, top: usize) {
    s.push('\n');
    line(
        s,
        format_args!(
            "framework ops (no HLO: XProf's framework op statistics; each kernel attributed to the TensorFlow op that launched it)"
        ),
    );
    if fw.attribution == xlens_roofline::DeviceAttribution::Level0 {
        line(
            s,
            format_args!(
                "  kernels named by their `level 0` stat (TensorFlow 2.2-2.4), which XProf 2.24 no longer reads"
            ),
        );
    }
    for (side, ops, total, idle) in [
        (OpSide::Device, &fw.device, fw.device_total, fw.device_idle()),
        (OpSide::Host, &fw.host, fw.host_total, fw.host_idle()),
    ] {
        if ops.is_empty() && total.0 == 0 {
            continue;
        }
        s.push('\n');
        let idle_pct = if total.0 > 0 { 100.0 * idle.0 as f64 / total.0 as f64 } else { 0.0 };
        line(
            s,
            format_args!(
                "{} ops: {}  total {:.3} us  IDLE {:.3} us ({idle_pct:.1}%)",
                side.label().to_lowercase(),
                ops.len(),
                us(total),
                us(idle)
            ),
        );
        let (wt, wn) = (
            column_width(ops.iter().take(top).map(|o| o.op_type.as_str()), 28, 40),
            column_width(ops.iter().take(top).map(|o| o.name.as_str()), 52, 100),
        );
        line(
            s,
            format_args!(
                "  {:<wt$} {:<wn$} {:>8} {:>14} {:>14} {:>7}",
                "type", "op", "count", "total us", "self us", "share"
            ),
        );
        for o in ops.iter().take(top) {
            line(
                s,
                format_args!(
                    "  {:<wt$} {:<wn$} {:>8} {:>14.3} {:>14.3} {:>6.1}%",
                    clip(&o.op_type, wt),
                    clip(&o.name, wn),
                    o.occurrences,
                    us(o.total),
                    us(o.self_time),
                    100.0 * fw.share(o)
                ),
            );
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
    categories_text(&mut s, p);
    match &h.framework {
        Some(fw) => framework_text(&mut s, fw, top),
        None => ops_text(&mut s, p, top),
    }
    if let Some(tf_data) = &h.tf_data {
        tf_data_text(&mut s, tf_data);
    }
    s.push('\n');
    // On PyTorch/XLA the anatomy partitions the loop's iterations, not the markers alone.
    if h.steps.steps.iter().zip(&h.anatomy).any(|(st, a)| a.step_time != st.duration) {
        line(&mut s, format_args!("step anatomy (us; each step runs to the next step's marker: the loop's iteration)"));
    } else {
        line(&mut s, format_args!("step anatomy (us)"));
    }
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
