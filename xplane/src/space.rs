//! [`Space`]: one decoded `*.xplane.pb` (one host).

use bytes::Bytes;

use crate::error::check_limit;
use crate::error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
use crate::limits::{self, Limit};
use crate::meter::WalkMeter;
use crate::names;
use crate::plane::{Plane, PlaneKind, wire_error};
use crate::undecoded::{DecodeErrors, DecodeLog};
use crate::wire::{Reader, WireType};

/// Below this many bytes, planes are decoded on the calling thread.
const PARALLEL_DECODE_MIN_BYTES: usize = 4 << 20;

/// One decoded XSpace: the planes of one host file.
///
/// Decoding reads every plane's metadata tables and line headers; events stay encoded in the
/// input until iterated ([`crate::Line::events`]), so the cost is one linear pass and memory is
/// the input plus small tables.
#[derive(Debug)]
pub struct Space {
    planes: Vec<Plane>,
    errors: Vec<String>,
    warnings: Vec<String>,
    hostnames: Vec<String>,
    encoded_len: usize,
    /// The file the space was opened from, if any.
    path: Option<std::sync::Arc<std::path::Path>>,
    /// The stamp of that file when it was mapped.
    stamp: Option<crate::stamp::FileStamp>,
    /// Bytes of line bodies walked at least once (shared with the planes).
    meter: WalkMeter,
    /// The decode errors met after the parse (shared with the planes).
    decode_log: DecodeLog,
    /// Set once the strict check of every plane ran ([`Space::check_structure`]).
    checked: std::sync::OnceLock<()>,
}

impl Space {
    /// Decodes an XSpace from its serialized bytes.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     // Builders write their plane (line, event) when dropped.
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let train = plane.event_metadata("train");
    ///     plane.line(7, "python", 0).event(train, 1_000, 5_000);
    /// }
    /// let bytes = b.finish();
    ///
    /// let space = Space::parse(bytes.into())?;
    /// let plane = &space.planes()[0];
    /// let line = &plane.lines()[0];
    /// let ev = line.events(plane).next().unwrap()?;
    /// assert_eq!((ev.name(), ev.start().0, ev.duration().0), ("train", 1_000, 5_000));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse(bytes: Bytes) -> Result<Space> {
        Space::parse_with_budget(bytes, limits::table_budget)
    }

    /// [`Space::parse`] with the table budget of a plane given its size and the number of
    /// planes (tests tighten it).
    pub(crate) fn parse_with_budget(bytes: Bytes, budget: impl Fn(usize, usize) -> u64 + Sync) -> Result<Space> {
        if bytes.is_empty() {
            return Err(Error::new(ErrorKind::EmptyInput, Location::default()));
        }
        let encoded_len = bytes.len();
        let buf: &[u8] = &bytes;
        let mut r = Reader::new(buf);
        let mut plane_windows: Vec<(usize, usize)> = Vec::new();
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let mut hostnames = Vec::new();
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| wire_error(e, Location::at_offset(tag_pos as u64)))?;
            let val_pos = r.pos();
            let fail = |e| wire_error(e, Location::at_offset(val_pos as u64));
            match (field, wire) {
                (1, WireType::Len) => {
                    let body = r.read_len().map_err(fail)?;
                    check_limit(Limit::Planes, plane_windows.len() + 1, || Location::at_offset(val_pos as u64))?;
                    plane_windows.push((r.pos() - body.len(), body.len()));
                }
                (2..=4, WireType::Len) => {
                    let text = String::from_utf8_lossy(r.read_len().map_err(fail)?).into_owned();
                    let messages = errors.len() + warnings.len() + hostnames.len() + 1;
                    check_limit(Limit::ProfilerMessages, messages, || Location::at_offset(val_pos as u64))?;
                    match field {
                        2 => errors.push(text),
                        3 => warnings.push(text),
                        _ => hostnames.push(text),
                    }
                }
                (1..=4, _) => {
                    return Err(Error::new(
                        ErrorKind::WrongWireType { message: "XSpace", field, found: wire.name() },
                        Location::at_offset(tag_pos as u64),
                    ));
                }
                _ => r.skip(wire).map_err(fail)?,
            }
        }
        let planes = plane_windows.len();
        let decode = |(index, &(start, len)): (usize, &(usize, usize))| {
            let budget = budget(len, planes);
            Plane::decode(bytes.slice(start..start + len), index, start as u64, budget).map_err(|e| e.in_plane(index))
        };
        let planes: Result<Vec<Plane>> = if encoded_len >= PARALLEL_DECODE_MIN_BYTES && plane_windows.len() > 1 {
            // The largest planes first, each taken by whichever worker is free: split in file
            // order, eight device planes and a host plane went five to one worker and four to
            // the other, and the second sat idle for a plane's decode.
            crate::queue::in_priority_order(&plane_windows, |_, w| std::cmp::Reverse(w.1), |i, w| decode((i, w)))
                .into_iter()
                // The first failure in file order, as a sequential parse meets it.
                .collect()
        } else {
            plane_windows.iter().enumerate().map(decode).collect()
        };
        let mut planes = planes?;
        let meter = WalkMeter::default();
        let decode_log = DecodeLog::default();
        for plane in &mut planes {
            plane.set_meter(&meter, &decode_log);
        }
        Ok(Space {
            planes,
            errors,
            warnings,
            hostnames,
            encoded_len,
            path: None,
            stamp: None,
            meter,
            decode_log,
            checked: std::sync::OnceLock::new(),
        })
    }

    /// Hands the resident pages of the file back to the OS, when the space was opened from a
    /// file mapping ([`crate::open_space`], [`crate::Session`]); does nothing for a space parsed
    /// from bytes in memory.
    ///
    /// Every page a pass reads stays in the process's resident set (RSS) for as long as the file
    /// is mapped. Releasing them copies and changes nothing: the pages stay in the page cache and
    /// the next read of them maps them again (a minor fault). Call it after a pass over most of
    /// the file that will not soon be repeated; [`Line::events_releasing`](crate::Line::events_releasing) releases
    /// as it walks.
    pub fn release_pages(&self) {
        for plane in &self.planes {
            plane.release_pages();
        }
    }

    /// Lets the planes release the pages of the mapping they were parsed from, and names the
    /// file in the locations of the errors and warnings they report after the parse.
    pub(crate) fn attach_file(
        &mut self,
        file: crate::residency::FileMap,
        path: &std::path::Path,
        stamp: crate::stamp::FileStamp,
    ) {
        let path: std::sync::Arc<std::path::Path> = path.into();
        for plane in &mut self.planes {
            plane.attach_file(file.clone(), path.clone());
        }
        self.path = Some(path);
        self.stamp = Some(stamp);
    }

    /// Fails with [`ErrorKind::FileChanged`](crate::ErrorKind::FileChanged) when the file this
    /// space was mapped from ([`crate::open_space`]) has changed since (its size, modification
    /// time or inode differ: truncated, rewritten or replaced while it was read), so that what was
    /// read of it may mix two versions. A space not read from a file is always unchanged. Call it
    /// after an analysis: a result is trustworthy when the file was stable from its mapping to
    /// then.
    pub fn check_file_unchanged(&self) -> Result<()> {
        match (&self.path, &self.stamp) {
            (Some(path), Some(stamp)) => stamp.check(path),
            _ => Ok(()),
        }
    }

    /// A handle on the count of event bytes walked so far (see [`WalkMeter`]).
    // Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
    #[doc(hidden)]
    pub fn walk_meter(&self) -> WalkMeter {
        self.meter.clone()
    }

    /// Everything in the space that prost would not decode as an XSpace, each entry once, in
    /// file order, with its location (file, plane, byte offset; line and event for an event):
    /// at most [`limits::MAX_DECODE_ERRORS_KEPT`] and a count of the rest.
    ///
    /// The parse reads the framing of planes, lines and metadata tables and fails on any error
    /// there; events and stats are decoded when read, and an iterator that meets malformed bytes
    /// yields one `Err` and stops. Callers that skip such an error (a stat read by id reads a
    /// malformed one as absent) lose data all the same, and bytes no walk reads are never
    /// decoded: so this runs the strict check of the whole space first
    /// ([`Space::check_structure`], once), which finds every field prost rejects (a fault of a
    /// message the walks met too is listed as they met it, once), and lists the walks' errors
    /// beside its own, so that a report built on the space can say it is incomplete.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder, Undecoded};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/device:GPU:0");
    ///     let cores = plane.stat_metadata("core_count");
    ///     plane.stat(cores, 132i64);
    /// }
    /// let mut bytes = b.finish();
    /// // The plane stat's body, `08 01 20 84 01`, gains a field of wire type 7 (no such type);
    /// // the lengths around it grow by one.
    /// let at = bytes.windows(5).position(|w| w == [0x08, 0x01, 0x20, 0x84, 0x01]).unwrap();
    /// bytes.insert(at + 5, 0x0f);
    /// bytes[at - 1] += 1; // the stat's length
    /// bytes[1] += 1; // the plane's
    /// let space = Space::parse(bytes.into())?;
    /// let plane = &space.planes()[0];
    /// // Nothing read it yet: the strict check finds it.
    /// let errors = space.decode_errors();
    /// assert_eq!(errors.errors.len(), 1);
    /// assert_eq!(errors.errors[0].what, Undecoded::Message("XSpace.planes[0].stats[0]".into()));
    /// // A walk meets it too: listed once, as the walk met it.
    /// assert!(plane.stat_by_name("core_count").is_none());
    /// let errors = space.decode_errors();
    /// assert_eq!(errors.errors.len(), 1);
    /// assert_eq!(errors.errors[0].what, Undecoded::PlaneStat);
    /// assert!(errors.errors[0].error.location().offset.is_some());
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    pub fn decode_errors(&self) -> DecodeErrors {
        self.check_structure();
        self.decode_log.errors()
    }

    /// Checks every field of every plane as prost would decode it ([`crate::strict`]), once, and
    /// notes each plane's or line's first fault in [`Space::decode_errors`]
    /// ([`Undecoded::Message`](crate::Undecoded::Message), naming the message). The planes,
    /// and the lines of each, are checked in parallel; nothing is allocated per field.
    ///
    /// [`Space::decode_errors`] runs it when it has not run: a scan starts it beside its
    /// analyses, so that it costs no wall time of its own.
    pub fn check_structure(&self) {
        self.checked.get_or_init(|| check_planes(&self.planes));
    }

    /// The planes in file order.
    pub fn planes(&self) -> &[Plane] {
        &self.planes
    }

    /// The first plane with exactly this name.
    pub fn plane_by_name(&self, name: &str) -> Option<&Plane> {
        self.planes.iter().find(|p| p.name() == name)
    }

    /// Planes of a kind, in file order.
    pub fn planes_where(&self, pred: impl Fn(PlaneKind) -> bool) -> impl Iterator<Item = &Plane> {
        self.planes.iter().filter(move |p| pred(p.kind()))
    }

    /// TPU TensorCore planes, sorted by ordinal.
    pub fn tpu_tensor_cores(&self) -> Vec<&Plane> {
        let mut v: Vec<&Plane> = self.planes_where(|k| matches!(k, PlaneKind::TpuTensorCore { .. })).collect();
        v.sort_by_key(|p| match p.kind() {
            PlaneKind::TpuTensorCore { ordinal } => ordinal,
            _ => u32::MAX,
        });
        v
    }

    /// GPU planes, sorted by ordinal.
    pub fn gpus(&self) -> Vec<&Plane> {
        let mut v: Vec<&Plane> = self.planes_where(|k| matches!(k, PlaneKind::Gpu { .. })).collect();
        v.sort_by_key(|p| match p.kind() {
            PlaneKind::Gpu { ordinal } => ordinal,
            _ => u32::MAX,
        });
        v
    }

    /// The devices XProf analyses: TPU TensorCores if any, else GPUs (facts §2.1).
    pub fn analysis_devices(&self) -> Vec<&Plane> {
        let tpus = self.tpu_tensor_cores();
        if tpus.is_empty() { self.gpus() } else { tpus }
    }

    /// The `/host:CPU` plane (host threads).
    pub fn host_threads(&self) -> Option<&Plane> {
        self.plane_by_name(names::plane::HOST_CPU)
    }

    /// The `/host:metadata` plane (HLO protos).
    pub fn metadata_plane(&self) -> Option<&Plane> {
        self.plane_by_name(names::plane::HOST_METADATA)
    }

    /// The `Task Environment` plane.
    pub fn task_environment(&self) -> Option<&Plane> {
        self.plane_by_name(names::plane::TASK_ENVIRONMENT)
    }

    /// Profile start in ns since the epoch (`Task Environment` stat `profile_start_time`).
    pub fn profile_start_ns(&self) -> Option<u64> {
        self.task_environment()?.stat_by_name(names::stat::PROFILE_START_TIME)?.as_u64()
    }

    /// Profile stop in ns since the epoch (`Task Environment` stat `profile_stop_time`).
    pub fn profile_stop_ns(&self) -> Option<u64> {
        self.task_environment()?.stat_by_name(names::stat::PROFILE_STOP_TIME)?.as_u64()
    }

    /// Errors the profiler recorded while capturing.
    pub fn profiler_errors(&self) -> &[String] {
        &self.errors
    }

    /// Warnings the profiler recorded while capturing.
    pub fn profiler_warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Host names recorded in the space.
    pub fn hostnames(&self) -> &[String] {
        &self.hostnames
    }

    /// Size of the serialized input in bytes.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len
    }

    /// Total number of events over all planes (counted without decoding them).
    pub fn event_count(&self) -> usize {
        self.planes.iter().map(Plane::event_count).sum()
    }

    /// Warnings known without a full pass: profiler-reported errors and warnings, and lossy names.
    /// [`crate::validate`] adds the checks that need every event.
    pub fn warnings(&self) -> Vec<Warning> {
        let location = || Location { file: self.path.as_deref().map(|p| p.to_path_buf()), ..Location::default() };
        let mut out: Vec<Warning> = self
            .errors
            .iter()
            .map(|e| Warning { kind: WarningKind::ProfilerError(e.clone()), location: location() })
            .chain(
                self.warnings
                    .iter()
                    .map(|w| Warning { kind: WarningKind::ProfilerWarning(w.clone()), location: location() }),
            )
            .collect();
        for plane in &self.planes {
            out.extend(plane.warnings().iter().cloned());
        }
        out
    }
}

/// The strict check of a space's planes ([`crate::Space::check_structure`]): each plane's own
/// fields, then its lines, in parallel; the first fault of each noted in the space's log.
fn check_planes(planes: &[crate::Plane]) {
    use rayon::prelude::*;
    let schema = crate::strict::Schema::xspace();
    let (Some(plane_message), Some(line_message)) =
        (schema.message("tensorflow.profiler.XPlane"), schema.message("tensorflow.profiler.XLine"))
    else {
        return;
    };
    planes.par_iter().for_each(|plane| {
        let buf = plane.body();
        let p = plane.index();
        // The lines (field 3) are handed out, to be checked in parallel.
        let mut lines: Vec<(std::ops::Range<usize>, usize)> = Vec::new();
        let own =
            schema.check_nested(buf, 0..buf.len(), plane_message, 1, Some(3), &mut |range, k| lines.push((range, k)));
        if let Err(fault) = own {
            plane.note_structure(format!("XSpace.planes[{p}]{}", fault.path), None, &fault);
        }
        lines.par_iter().with_max_len(1).for_each(|(range, k)| {
            if let Err(fault) = schema.check_nested(buf, range.clone(), line_message, 2, None, &mut |_, _| {}) {
                plane.note_structure(format!("XSpace.planes[{p}].lines[{k}]{}", fault.path), Some(*k), &fault);
            }
            // A checked line's pages go back to the OS, as a reading walk's do: the check reads
            // every byte of the file, beside analyses that keep their own tables.
            plane.release(range.clone());
        });
    });
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn profiles(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                profiles(&path, out);
            } else if path.to_string_lossy().ends_with(crate::XPLANE_SUFFIX) {
                out.push(path);
            }
        }
    }

    #[test]
    fn real_profiles_use_a_fraction_of_their_table_budget() {
        // The budget stops crafted inputs; every capture in testdata (CPU, GPU, TPU, field
        // captures made by others) decodes within a third of it (the most, about a fifth, on
        // the host threads of CPU captures).
        let mut files = Vec::new();
        profiles(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata"), &mut files);
        assert!(files.len() >= 40, "expected the testdata captures, found {}", files.len());
        for file in files {
            let bytes = Bytes::from(std::fs::read(&file).unwrap());
            let tight = |len, planes| limits::table_budget(len, planes) / 3;
            if let Err(e) = Space::parse_with_budget(bytes, tight) {
                panic!("{}: {e}", file.display());
            }
        }
    }

    /// A space large enough to decode its planes in parallel (largest first): the planes come
    /// back in file order, and of several planes that fail, the first in the file is reported,
    /// as a sequential parse would.
    #[test]
    fn planes_decoded_largest_first_keep_file_order_and_first_failure() {
        let sizes = [20_000usize, 70_000, 150_000, 150_000, 5_000, 90_000];
        let mut b = crate::SpaceBuilder::default();
        for (p, &n) in sizes.iter().enumerate() {
            let mut plane = b.plane(p as i64 + 1, &format!("/device:TPU:{p}"));
            let op = plane.event_metadata("fusion");
            let mut line = plane.line(1, "XLA Ops", 0);
            for k in 0..n as i64 {
                line.event(op, k * 10, 5);
            }
        }
        let bytes = Bytes::from(b.finish());
        assert!(bytes.len() >= PARALLEL_DECODE_MIN_BYTES, "{} bytes", bytes.len());
        let space = Space::parse(bytes.clone()).unwrap();
        let names: Vec<String> = space.planes().iter().map(|p| p.name().to_owned()).collect();
        let expected: Vec<String> = (0..sizes.len()).map(|p| format!("/device:TPU:{p}")).collect();
        assert_eq!(names, expected);
        let counts: Vec<usize> = space.planes().iter().map(|p| p.lines()[0].event_count()).collect();
        assert_eq!(counts, sizes);
        // Planes of more than 60,000 events fail their table budget: 1, 2, 3 and 5 (2 and 3, the
        // largest, are decoded first).
        let budget = |len: usize, _| if len > 60_000 * 8 { 1 } else { u64::MAX };
        let e = Space::parse_with_budget(bytes, budget).unwrap_err();
        assert_eq!(e.location().plane, Some(1), "{e}");
    }
}
