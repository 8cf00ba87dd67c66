//! What did not decode after the parse: the events and stats that iterators met malformed
//! ([`DecodeErrors`], from [`Space::decode_errors`](crate::Space::decode_errors)).
//!
//! The parse reads the framing of the planes, lines and metadata tables and fails on any error
//! there; events and stats are decoded lazily, and an iterator that meets malformed bytes yields
//! one `Err` and stops. Callers that only want the good entries drop that error (a stat read by
//! id, [`Event::stat`](crate::Event::stat), reads a malformed one as absent). So that no such
//! error goes unnoticed, the iterators note each one here as they yield it, on the error path
//! alone: a walk of intact bytes pays nothing. A space shares one log with its planes, which are
//! read from several threads. The strict check ([`crate::strict`],
//! [`Space::check_structure`](crate::Space::check_structure)) notes here what no walk reads:
//! each fault with the span of its message, so that a fault a walk met too is listed once.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::limits::{MAX_DECODE_ERRORS_KEPT, MAX_DECODE_ERRORS_TRACKED};

/// What did not decode.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Undecoded {
    /// An event of a line (its fields, or the framing of the line's events).
    Event,
    /// A stat of an event.
    EventStat,
    /// A stat of an event-metadata entry.
    MetadataStat,
    /// A stat of a plane.
    PlaneStat,
    /// The value of a `bytes` stat, which holds a message of its own
    /// ([`Plane::note_undecoded_payload`](crate::Plane::note_undecoded_payload)).
    StatPayload,
    /// A field of a message that prost would not decode, found by the strict check of the
    /// space's structure ([`Space::check_structure`](crate::Space::check_structure)): the
    /// message's path, as `XSpace.planes[2].lines[0].events[5]`.
    Message(Box<str>),
}

impl fmt::Display for Undecoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Undecoded::Event => "an event",
            Undecoded::EventStat => "a stat of an event",
            Undecoded::MetadataStat => "a stat of an event metadata entry",
            Undecoded::PlaneStat => "a stat of a plane",
            Undecoded::StatPayload => "the value of a stat",
            Undecoded::Message(path) => return write!(f, "a field of {path}"),
        })
    }
}

/// One entry of the input that did not decode, and the error with its [`Location`](crate::Location).
#[derive(Debug)]
pub struct DecodeError {
    /// What did not decode.
    pub what: Undecoded,
    /// The error (its location names the file, the plane and the byte offset).
    pub error: Error,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} could not be decoded: {}", self.what, self.error)
    }
}

/// The decode errors a space met after its parse, each entry once (by its byte offset), in
/// file order: at most [`MAX_DECODE_ERRORS_KEPT`] of them, and a count of the rest.
///
/// Entries are met as walks read them: what is listed depends on what was read (a scan reads
/// what its analyses need), not on the order in which threads met them.
#[derive(Debug, Default)]
pub struct DecodeErrors {
    /// The first errors in file order.
    pub errors: Vec<DecodeError>,
    /// Distinct errors met beyond [`errors`](Self::errors).
    pub omitted: u64,
    /// True when more than [`MAX_DECODE_ERRORS_TRACKED`] distinct errors were met: `omitted`
    /// then counts those tracked only, and more were met.
    pub saturated: bool,
}

impl DecodeErrors {
    /// True when no decode error was met.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// One line per kept error, then one that counts the rest (if any).
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        if self.omitted > 0 {
            let more = if self.saturated { " or more" } else { "" };
            out.push(format!("{}{more} more entries of the profile could not be decoded", self.omitted));
        }
        out
    }
}

/// The log a space shares with its planes. Cloned handles write the same log.
#[derive(Clone, Debug, Default)]
pub(crate) struct DecodeLog(Arc<Mutex<Log>>);

#[derive(Debug, Default)]
struct Log {
    /// By byte offset: the errors met, up to [`MAX_DECODE_ERRORS_TRACKED`].
    met: BTreeMap<u64, DecodeError>,
    /// More distinct offsets were met than tracked.
    saturated: bool,
    /// By byte offset: the bytes of the message of each error the strict check noted, from
    /// the key of the field that holds it (absolute offsets).
    spans: BTreeMap<u64, std::ops::Range<u64>>,
}

impl DecodeLog {
    /// Notes `error`, met decoding `what` (the error path of the iterators: never on intact
    /// bytes). The same entry met again (by its byte offset) is noted once; of two reports of it
    /// (a stat read by two walks that place it differently), the first in a fixed order is kept,
    /// so the log does not depend on which thread came first.
    #[cold]
    #[inline(never)]
    pub(crate) fn note(&self, what: Undecoded, error: &Error) {
        self.note_in(what, error, None);
    }

    /// Notes a fault the strict check found in the message whose bytes are `span` (absolute
    /// offsets): listed unless a walk noted an error inside that message (the same fault, met
    /// as the walk read it).
    #[cold]
    #[inline(never)]
    pub(crate) fn note_structure(&self, what: Undecoded, error: &Error, span: std::ops::Range<u64>) {
        self.note_in(what, error, Some(span));
    }

    fn note_in(&self, what: Undecoded, error: &Error, span: Option<std::ops::Range<u64>>) {
        let offset = error.location().offset.unwrap_or(u64::MAX);
        let Ok(mut log) = self.0.lock() else { return };
        if let Some(span) = span {
            log.spans.insert(offset, span);
        }
        let tracked = log.met.len();
        match log.met.entry(offset) {
            std::collections::btree_map::Entry::Occupied(mut seen) => {
                let seen = seen.get_mut();
                // Met again as it was noted, the same kind of error at the same place (a
                // metadata stat read for every event that uses it): nothing is formatted.
                if seen.what == what
                    && seen.error.location() == error.location()
                    && std::mem::discriminant(seen.error.kind()) == std::mem::discriminant(error.kind())
                {
                    return;
                }
                let key = |w: Undecoded, e: &Error| (w, e.to_string());
                if key(what.clone(), error) < key(seen.what.clone(), &seen.error) {
                    *seen = DecodeError { what, error: error.duplicate() };
                }
            }
            std::collections::btree_map::Entry::Vacant(slot) => {
                if tracked < MAX_DECODE_ERRORS_TRACKED {
                    slot.insert(DecodeError { what, error: error.duplicate() });
                } else {
                    log.saturated = true;
                }
            }
        }
    }

    /// The errors noted so far: those of the strict check but where a walk met an error in the
    /// same message.
    pub(crate) fn errors(&self) -> DecodeErrors {
        let Ok(log) = self.0.lock() else { return DecodeErrors::default() };
        let walked = |e: &DecodeError| !matches!(e.what, Undecoded::Message(_));
        let shown = |(offset, e): &(&u64, &DecodeError)| match log.spans.get(offset) {
            Some(span) if !walked(e) => !log.met.range(span.clone()).any(|(_, other)| walked(other)),
            _ => true,
        };
        let distinct = log.met.iter().filter(shown).count();
        let errors: Vec<DecodeError> = log
            .met
            .iter()
            .filter(shown)
            .take(MAX_DECODE_ERRORS_KEPT)
            .map(|(_, e)| DecodeError { what: e.what.clone(), error: e.error.duplicate() })
            .collect();
        DecodeErrors { omitted: (distinct - errors.len()) as u64, errors, saturated: log.saturated }
    }
}
