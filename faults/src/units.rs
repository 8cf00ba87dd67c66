//! How times and the per-step unit are worded: [`TimeUnit`] (ms or µs for a time figure) and
//! [`TimeBase`] (what a "per step" figure is per, chosen when the finding is built).

use std::fmt;

use xlens_roofline::StepSource;

use crate::finding::Evidence;
use crate::profile::HostProfile;

/// The unit a time figure is printed in, one vocabulary for the detectors and the renderers:
/// ms (3 decimals, as step times are printed) from a millisecond up, µs (1 decimal) below.
/// Figures set side by side ("8.118 vs 7.251 ms", a table column, a chart axis) share the unit
/// of the largest.
///
/// The microsecond has two spellings, both explicit: [`TimeUnit::label_ascii`] (`us`) in
/// finding text and evidence units, whose unit column stays ASCII (the Parquet frames, the
/// JSON report and the scripts that read them key on it), and [`TimeUnit::label`] (`µs`) on
/// the HTML page and in tables. Issue 39 settles one convention; until then each output keeps
/// the spelling it always had.
///
/// ```
/// use xlens_faults::TimeUnit;
/// let unit = TimeUnit::for_ms(0.35);
/// assert_eq!((unit.number(0.35), unit.label(), unit.label_ascii()), ("350.0".to_owned(), "µs", "us"));
/// let unit = TimeUnit::for_ms(81.963);
/// assert_eq!((unit.text(0.5), unit.label()), ("0.500 ms".to_owned(), "ms"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeUnit {
    us: bool,
}

impl TimeUnit {
    /// The unit for figures up to `largest_ms` (by magnitude): µs below a millisecond.
    pub fn for_ms(largest_ms: f64) -> TimeUnit {
        TimeUnit { us: largest_ms.abs() < 1.0 }
    }

    /// `ms` in this unit.
    pub fn value(self, ms: f64) -> f64 {
        if self.us { ms * 1000.0 } else { ms }
    }

    /// `ms` or `µs`: the spelling of the page and its tables.
    pub fn label(self) -> &'static str {
        if self.us { "µs" } else { "ms" }
    }

    /// `ms` or `us`: the ASCII spelling of finding text and evidence units.
    pub fn label_ascii(self) -> &'static str {
        if self.us { "us" } else { "ms" }
    }

    /// The number alone, `8.118` or `41.9`.
    pub fn number(self, ms: f64) -> String {
        if self.us { format!("{:.1}", ms * 1000.0) } else { format!("{ms:.3}") }
    }

    /// The number and the ASCII unit, `8.118 ms` or `41.9 us` (finding text).
    pub fn text(self, ms: f64) -> String {
        format!("{} {}", self.number(ms), self.label_ascii())
    }

    /// A metric of `ms` in this unit, its unit spelled in ASCII (`key` names the quantity,
    /// whichever unit it is shown in).
    pub fn metric(self, key: &'static str, name: impl Into<String>, ms: f64) -> Evidence {
        Evidence::metric(key, name, self.value(ms), self.label_ascii())
    }
}

/// What a host's "per step" figures are per: the step, or, on profiles without step markers,
/// the module execution or the device window ([`StepSource::unit`]). Detectors word their
/// finding text, evidence labels and notes through it when they build the finding, so that a
/// figure per module execution says so; metric keys do not change with it.
///
/// Only prose about the time base goes through it: titles, fixes and the detector catalogue
/// speak of the step in general.
///
/// ```
/// use xlens_faults::TimeBase;
/// use xlens_roofline::StepSource;
/// let tb = TimeBase::from_source(StepSource::ModuleExecutions);
/// assert_eq!(format!("idle time {}", tb.per()), "idle time per module execution");
/// assert_eq!(tb.of_the(), "of the module execution");
/// assert_eq!(TimeBase::STEP.possessive(), "the step's");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeBase {
    unit: &'static str,
}

impl TimeBase {
    /// Figures per step (profiles with step markers, and session-wide findings).
    pub const STEP: TimeBase = TimeBase { unit: "step" };

    /// The time base of `host`'s figures: its steps' source, the step when it has none.
    pub fn of(host: &HostProfile) -> TimeBase {
        host.steps().map_or(TimeBase::STEP, |s| TimeBase::from_source(s.source))
    }

    /// The time base of steps from `source`.
    pub fn from_source(source: StepSource) -> TimeBase {
        TimeBase { unit: source.unit() }
    }

    /// The unit noun: `step`, `module execution` or `device window`.
    pub fn unit(self) -> &'static str {
        self.unit
    }

    /// `per step`.
    pub fn per(self) -> Phrase {
        Phrase("per ", self.unit, "")
    }

    /// `of the step`.
    pub fn of_the(self) -> Phrase {
        Phrase("of the ", self.unit, "")
    }

    /// `each step`.
    pub fn each(self) -> Phrase {
        Phrase("each ", self.unit, "")
    }

    /// `every step`.
    pub fn every(self) -> Phrase {
        Phrase("every ", self.unit, "")
    }

    /// `the step's`.
    pub fn possessive(self) -> Phrase {
        Phrase("the ", self.unit, "'s")
    }
}

/// A phrase about the time base (`per module execution`), written out by its `Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phrase(&'static str, &'static str, &'static str);

impl fmt::Display for Phrase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.0, self.1, self.2)
    }
}

impl PartialEq<&str> for Phrase {
    fn eq(&self, other: &&str) -> bool {
        other.strip_prefix(self.0).and_then(|rest| rest.strip_suffix(self.2)) == Some(self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_side_by_side_share_the_unit_of_the_largest() {
        let unit = TimeUnit::for_ms(8.1184);
        assert_eq!(
            format!("{} vs {} {}", unit.number(8.1184), unit.number(0.5), unit.label_ascii()),
            "8.118 vs 0.500 ms"
        );
        assert_eq!(TimeUnit::for_ms(0.2).metric("x", "x", 0.2), Evidence::metric("x", "x", 200.0, "us"));
        let us = TimeUnit::for_ms(0.35);
        assert_eq!((us.label(), us.number(0.35), us.number(0.0123)), ("µs", "350.0".to_owned(), "12.3".to_owned()));
        let ms = TimeUnit::for_ms(81.963);
        assert_eq!((ms.label(), ms.number(81.963), ms.number(0.5)), ("ms", "81.963".to_owned(), "0.500".to_owned()));
    }

    #[test]
    fn phrases_name_the_time_base() {
        let tb = TimeBase::from_source(StepSource::DeviceWindow);
        let words = [tb.per(), tb.of_the(), tb.each(), tb.every(), tb.possessive()].map(|p| p.to_string());
        assert_eq!(
            words,
            [
                "per device window",
                "of the device window",
                "each device window",
                "every device window",
                "the device window's"
            ]
        );
        assert_eq!(TimeBase::from_source(StepSource::None), TimeBase::STEP);
        assert_eq!(TimeBase::STEP.per(), "per step");
    }
}
