//! Findings: what a detector reports, as data.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;
use xlens_roofline::Framework;

/// How urgent a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
pub enum Severity {
    /// Critical: the step is seriously slower (or at risk of failing) because of it.
    P0,
    /// Important: a clear, fixable loss.
    P1,
    /// Minor: worth knowing, small impact.
    P2,
}

impl Severity {
    /// `"P0"`, `"P1"` or `"P2"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::P0 => "P0",
            Severity::P1 => "P1",
            Severity::P2 => "P2",
        }
    }

    /// The severity a finding's impact earns: P0 from 20 % of the step, P2 under 2 %, else
    /// `usual` (the detector's default).
    ///
    /// ```
    /// use xlens_faults::Severity;
    /// assert_eq!(Severity::from_impact(25.0, Severity::P1), Severity::P0);
    /// assert_eq!(Severity::from_impact(1.0, Severity::P1), Severity::P2);
    /// assert_eq!(Severity::from_impact(8.0, Severity::P1), Severity::P1);
    /// ```
    pub fn from_impact(pct_of_step: f64, usual: Severity) -> Severity {
        if pct_of_step >= P0_IMPACT_PCT {
            Severity::P0
        } else if pct_of_step < P2_IMPACT_PCT {
            Severity::P2
        } else {
            usual
        }
    }

    /// Parses `P0`, `P1` or `P2` (case-insensitive).
    pub fn parse(s: &str) -> Option<Severity> {
        match s.to_ascii_uppercase().as_str() {
            "P0" => Some(Severity::P0),
            "P1" => Some(Severity::P1),
            "P2" => Some(Severity::P2),
            _ => None,
        }
    }
}

/// A finding costing at least this share of the step (%) is P0.
pub(crate) const P0_IMPACT_PCT: f64 = 20.0;
/// A finding costing less than this share of the step (%) is P2.
pub(crate) const P2_IMPACT_PCT: f64 = 2.0;

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of evidence behind a finding.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// A measured number.
    Metric {
        /// The stable machine name of the quantity (`exposed_collective_time`, `idle_share`):
        /// snake_case, chosen by the detector when it builds the finding, unique within the
        /// finding and the same across releases and time bases, while `name` is prose that may
        /// change (`per step` reads `per module execution` under that time base). Not part of
        /// the JSON for now; empty for a metric read back from a saved JSON report.
        #[serde(skip_serializing, default)]
        key: Cow<'static, str>,
        /// What was measured, in words (the label the reports print).
        name: String,
        /// The value.
        value: f64,
        /// Its unit (`ms`, `%`, `bytes`, `count`, ...).
        unit: String,
    },
    /// An event of the timeline.
    Event {
        /// Host the event is on.
        host: String,
        /// Plane name.
        plane: String,
        /// Line name.
        line: String,
        /// Event name.
        name: String,
        /// Absolute start in microseconds (profile clock).
        start_us: f64,
        /// Duration in microseconds.
        duration_us: f64,
    },
    /// An HLO instruction, with the JAX source line that produced it when known.
    Instruction {
        /// Module name (`name(program_id)`).
        module: String,
        /// Instruction name.
        name: String,
        /// Opcode.
        opcode: String,
        /// JAX name scope (`op_name` metadata).
        op_name: String,
        /// `file:line`, when known.
        source: Option<String>,
        /// A one-line text form of the instruction.
        text: String,
    },
    /// A free-form note.
    Note {
        /// The note.
        text: String,
    },
}

impl Evidence {
    /// A metric: its stable `key` (snake_case, naming the quantity rather than its display
    /// unit), the label the reports print, the value and its unit.
    ///
    /// ```
    /// use xlens_faults::Evidence;
    /// let e = Evidence::metric("idle_share", "idle share of the step", 12.5, "%");
    /// assert_eq!(e.key(), Some("idle_share"));
    /// assert_eq!(e.to_string(), "idle share of the step: 12.500 %");
    /// ```
    pub fn metric(key: &'static str, name: impl Into<String>, value: f64, unit: impl Into<String>) -> Evidence {
        debug_assert!(is_metric_key(key), "metric key {key:?} is not snake_case");
        Evidence::Metric { key: Cow::Borrowed(key), name: name.into(), value, unit: unit.into() }
    }

    /// A metric's stable key (empty when read back from a JSON report); `None` for other
    /// evidence.
    pub fn key(&self) -> Option<&str> {
        match self {
            Evidence::Metric { key, .. } => Some(key),
            _ => None,
        }
    }

    /// A note.
    pub fn note(text: impl Into<String>) -> Evidence {
        Evidence::Note { text: text.into() }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Metric { name, value, unit, .. } => write!(f, "{name}: {} {unit}", fmt_value(*value)),
            Evidence::Event { host, plane, line, name, start_us, duration_us } => {
                write!(f, "event {name} on {host} {plane} / {line} at {start_us:.1} us for {duration_us:.1} us")
            }
            Evidence::Instruction { module, name, opcode, op_name, source, .. } => {
                write!(f, "{module}: {name} ({opcode})")?;
                if !op_name.is_empty() {
                    write!(f, " from {op_name}")?;
                }
                if let Some(source) = source {
                    write!(f, " at {source}")?;
                }
                Ok(())
            }
            Evidence::Note { text } => f.write_str(text),
        }
    }
}

/// Whether `key` is a metric key: a lowercase letter, then lowercase letters, digits and `_`.
pub(crate) fn is_metric_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A number with a sensible amount of digits for text output: whole numbers without decimals,
/// one decimal from 100 on, else three. Finding text and [`Evidence`]'s `Display` use it, and so
/// do the renderers, so that a figure reads the same everywhere.
///
/// ```
/// use xlens_faults::fmt_value;
/// assert_eq!(fmt_value(42.0), "42");
/// assert_eq!(fmt_value(123.456), "123.5");
/// assert_eq!(fmt_value(1.23456), "1.235");
/// ```
pub fn fmt_value(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The expected gain from fixing a finding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Impact {
    /// Milliseconds per step.
    pub ms_per_step: f64,
    /// Percent of the step time.
    pub pct_of_step: f64,
}

impl Impact {
    /// The impact of `ms` per step on a step of `step_ms` (0 % without a step time).
    pub fn of(ms: f64, step_ms: Option<f64>) -> Impact {
        let pct = match step_ms {
            Some(step) if step > 0.0 => 100.0 * ms / step,
            _ => 0.0,
        };
        Impact { ms_per_step: ms, pct_of_step: pct }
    }
}

/// The framework-specific lines of a fix: what its framework-neutral core (the detector's
/// [`DetectorDoc::fix`](crate::DetectorDoc::fix)) means in each framework's own API. A finding's
/// fix is the core followed by the line of the profile's framework ([`FixLines::text`]); a
/// profile of an unknown framework gets the core alone, so no user reads another framework's
/// API. An empty line adds nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixLines {
    /// For JAX.
    pub jax: &'static str,
    /// For TensorFlow (Keras, `tf.function`, `tf.data`, `tf.distribute`).
    pub tensorflow: &'static str,
    /// For PyTorch/XLA (`torch_xla`).
    pub pytorch_xla: &'static str,
}

impl FixLines {
    /// No framework-specific line: the core alone for every framework.
    pub const NONE: FixLines = FixLines { jax: "", tensorflow: "", pytorch_xla: "" };

    /// The line for `framework` (empty for an unknown one).
    pub fn line(&self, framework: Framework) -> &'static str {
        match framework {
            Framework::Jax => self.jax,
            Framework::TensorFlow => self.tensorflow,
            Framework::PyTorchXla => self.pytorch_xla,
            Framework::Unknown => "",
        }
    }

    /// The fix a user of `framework` reads: `core`, then `In <framework>: <line>` when there is
    /// a line.
    ///
    /// ```
    /// use xlens_faults::FixLines;
    /// use xlens_roofline::Framework;
    /// let lines = FixLines { jax: "`jax.jit` it.", tensorflow: "`tf.function` it.", pytorch_xla: "" };
    /// assert_eq!(lines.text("Compile the step.", Framework::TensorFlow), "Compile the step. In TensorFlow: `tf.function` it.");
    /// assert_eq!(lines.text("Compile the step.", Framework::PyTorchXla), "Compile the step.");
    /// assert_eq!(lines.text("Compile the step.", Framework::Unknown), "Compile the step.");
    /// ```
    pub fn text(&self, core: &str, framework: Framework) -> String {
        match self.line(framework) {
            "" => core.to_owned(),
            line => format!("{core} In {}: {line}", framework.label()),
        }
    }
}

/// Whether a finding is about hosts (found on one or several) or about the whole session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Found on hosts, each scanned on its own.
    Host,
    /// Found by comparing the hosts of a session (a straggler host, ...).
    Session,
}

/// The host name session-wide findings carry, as their Parquet partition does (`host=_session`).
pub const SESSION_HOST: &str = "_session";

/// One host's own figures for a finding.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct HostImpact {
    /// The host.
    pub host: String,
    /// The severity on this host.
    pub severity: Severity,
    /// The impact on this host.
    pub impact: Impact,
}

/// One reported fault.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Finding {
    /// The detector id (e.g. `recompilation`).
    pub id: String,
    /// How urgent it is.
    pub severity: Severity,
    /// Short title.
    pub title: String,
    /// What is happening, in a sentence or two.
    pub what: String,
    /// The evidence.
    pub evidence: Vec<Evidence>,
    /// The expected gain from fixing it.
    pub impact: Impact,
    /// What to do about it: the detector's framework-neutral core, then the line for the
    /// profile's framework ([`FixLines::text`]; written when the finding is pushed to
    /// [`Findings`]).
    pub fix: String,
    /// The host whose figures `what`, `impact` and `evidence` give: the host it was found on, the
    /// worst of them when found on several, [`SESSION_HOST`] for session-wide findings.
    pub host: String,
    /// Host or session.
    pub scope: Scope,
    /// Every host it was found on, with its own severity and impact, in host order (for
    /// session-wide findings, the hosts it names).
    pub hosts: Vec<HostImpact>,
    /// Tells apart several findings one detector makes on one host (its pattern); findings of
    /// several hosts merge when their id and variant agree. Empty for most detectors; not part of
    /// the JSON (the text says which pattern it is).
    #[serde(skip)]
    pub variant: String,
    /// The framework-specific lines `fix` still waits for: [`Findings::push`] writes the line of
    /// the scanned profile's framework after the core and clears them. Not part of the JSON.
    #[serde(skip)]
    pub fix_lines: Option<FixLines>,
}

impl Finding {
    /// The same finding with another framework-neutral fix (one fitting what was found); the
    /// framework-specific lines stay those of the detector.
    pub fn with_fix(mut self, fix: String) -> Finding {
        self.fix = fix;
        self
    }

    /// The same finding with other framework-specific lines ([`FixLines::NONE`]: the core
    /// alone).
    pub fn with_fix_lines(mut self, lines: FixLines) -> Finding {
        self.fix_lines = Some(lines);
        self
    }

    /// The same finding marked as one of several patterns of its detector.
    pub fn with_variant(mut self, variant: &str) -> Finding {
        self.variant = variant.to_owned();
        self
    }

    /// The host names it was found on (or names, for session-wide findings).
    pub fn host_names(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.host.as_str())
    }
}

/// Where detectors put their findings, for a profile of one framework (unknown by default): a
/// finding's fix gets that framework's line as it comes in.
#[derive(Debug, Default)]
pub struct Findings {
    items: Vec<Finding>,
    framework: Framework,
}

impl Findings {
    /// A sink for the findings on a profile of `framework`.
    pub fn for_framework(framework: Framework) -> Findings {
        Findings { items: Vec::new(), framework }
    }

    /// The framework whose users read these findings.
    pub fn framework(&self) -> Framework {
        self.framework
    }

    /// Adds a finding, its fix completed with the line for the framework ([`FixLines::text`]).
    pub fn push(&mut self, mut finding: Finding) {
        if let Some(lines) = finding.fix_lines.take() {
            finding.fix = lines.text(&finding.fix, self.framework);
        }
        self.items.push(finding);
    }

    /// The findings so far.
    pub fn as_slice(&self) -> &[Finding] {
        &self.items
    }

    /// Takes the findings.
    pub fn into_vec(self) -> Vec<Finding> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key is not part of the JSON yet: a metric serializes as before and a saved one reads
    /// back with an empty key.
    #[test]
    fn metric_keys_stay_out_of_the_json_and_read_back_empty() {
        let e = Evidence::metric("idle_time", "idle time per step", 1.5, "ms");
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"kind":"metric","name":"idle time per step","value":1.5,"unit":"ms"}"#);
        let back: Evidence = serde_json::from_str(&json).unwrap();
        assert_eq!(back.key(), Some(""));
        assert_eq!(back.to_string(), e.to_string());
        assert_eq!(Evidence::note("n").key(), None);
    }

    #[test]
    fn metric_keys_are_snake_case() {
        for key in ["idle_time", "flops_over_6pt", "x"] {
            assert!(is_metric_key(key), "{key}");
        }
        for key in ["", "Idle", "idle time", "6pt", "_idle", "idle-time"] {
            assert!(!is_metric_key(key), "{key}");
        }
    }
}
