//! The promises checked on every mutated input, each a named [`Oracle`].
//!
//! The scan runs in process, as `xlens scan FILE` runs it (one host, the default configuration,
//! every detector), inside `catch_unwind`; its report is rendered as text, JSON and HTML. What
//! the bytes are is judged independently of xlens's decoder: prost decodes them with the
//! generated `XSpace` types (and each `HloProto` of `/host:metadata` with the HLO types), and an
//! input prost rejects must not be reported `OPTIMAL`. [`check_cli`] runs the real binary on a
//! file, for the promise no in-process run can check: the process ends by exit code, not by a
//! signal.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use xlens_faults::{ScanConfig, Status, scan_session};
use xlens_report::render;
use xlens_xplane::{HostInput, Space, names, raw};

use super::wire::{Payload, Structure};

/// The promises, each counted on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Oracle {
    /// (a) Decoding, scanning and rendering never panic.
    NoPanic,
    /// (b) A case ends within [`Limits::case_time`].
    NoHang,
    /// (c) The heap's peak during a case stays under [`Limits::memory_bound`] of the input.
    MemoryBound,
    /// (d) Bytes that prost rejects as an `XSpace` are never reported `OPTIMAL`.
    IncompleteOnDecodeError,
    /// (d') An `HloProto` of `/host:metadata` that prost rejects is never reported `OPTIMAL`.
    IncompleteOnHloError,
    /// (e) The text and HTML reports, and stderr, hold no C0 or C1 control character but
    /// `'\n'` (and `'\t'` in HTML); JSON holds no raw C0 one ([`Output`]).
    EscapedOutput,
    /// (f) `xlens scan FILE --format json` ends by an exit code, not a signal or a timeout, with
    /// at most one line on stderr.
    NoSignal,
}

impl Oracle {
    /// Every oracle, in the order the summary lists them.
    pub const ALL: [Oracle; 7] = [
        Oracle::NoPanic,
        Oracle::NoHang,
        Oracle::MemoryBound,
        Oracle::IncompleteOnDecodeError,
        Oracle::IncompleteOnHloError,
        Oracle::EscapedOutput,
        Oracle::NoSignal,
    ];

    /// The name used in reports and in reproducers' file names.
    pub fn name(self) -> &'static str {
        match self {
            Oracle::NoPanic => "no_panic",
            Oracle::NoHang => "no_hang",
            Oracle::MemoryBound => "memory_bound",
            Oracle::IncompleteOnDecodeError => "incomplete_on_decode_error",
            Oracle::IncompleteOnHloError => "incomplete_on_hlo_error",
            Oracle::EscapedOutput => "escaped_output",
            Oracle::NoSignal => "no_signal",
        }
    }
}

/// The bounds of a case.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest a case may take (decode, scan and render).
    pub case_time: Duration,
    /// Peak heap bytes allowed per input byte.
    pub memory_factor: usize,
    /// Peak heap bytes allowed on top of `memory_factor` × the input: the fixed tables of a scan
    /// (the detector registry, the chip catalogue, the rendered report) are not proportional to
    /// the input.
    pub memory_margin: usize,
}

impl Default for Limits {
    /// 10 s a case, 8 × the input + 64 MiB of heap. The unmutated captures of testdata peak at
    /// 2–12 × their size and 8.2 MiB at most (the campaign's `--calibrate`), so the bound leaves
    /// room for mutants that make a scan read more, and catches one that makes it allocate far
    /// more than the bytes present (issue 40's HLO decoder at 250 ×).
    fn default() -> Limits {
        Limits { case_time: Duration::from_secs(10), memory_factor: 8, memory_margin: 64 << 20 }
    }
}

impl Limits {
    /// The peak heap bytes allowed for an input of `len` bytes.
    pub fn memory_bound(&self, len: usize) -> usize {
        len.saturating_mul(self.memory_factor).saturating_add(self.memory_margin)
    }
}

/// Measures the heap's peak over a case. The counting allocator lives in the binaries (the
/// campaign, the tests), which hand it in through this trait: the library installs none.
pub trait PeakProbe {
    /// Starts a case: the peak is measured from the heap's size now.
    fn reset(&self);
    /// The most bytes allocated on top of the size at [`PeakProbe::reset`] since then.
    fn peak(&self) -> usize;
}

/// What prost makes of the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// A valid `XSpace`, and every `HloProto` of `/host:metadata` valid.
    Valid,
    /// Valid but for strings that are not UTF-8 (which xlens reads lossily, by design).
    Utf8Only,
    /// A valid `XSpace` whose `/host:metadata` holds an `HloProto` prost rejects.
    HloInvalid(String),
    /// Not a valid `XSpace`: prost's error.
    Invalid(String),
}

impl Validity {
    /// Judges `data`.
    pub fn of(data: &[u8]) -> Validity {
        let space = match raw::XSpace::decode(data) {
            Ok(space) => space,
            Err(e) => {
                // Strings that are not UTF-8 are read lossily by xlens: only a wire error counts.
                let mut clean = data.to_vec();
                let structure = Structure::parse(data);
                for f in structure.fields.iter().filter(|f| f.payload == Payload::Text) {
                    if std::str::from_utf8(&data[f.value..f.end]).is_err() {
                        clean[f.value..f.end].fill(b'?');
                    }
                }
                return match raw::XSpace::decode(clean.as_slice()) {
                    Ok(_) => Validity::Utf8Only,
                    Err(_) => Validity::Invalid(e.to_string()),
                };
            }
        };
        for plane in space.planes.iter().filter(|p| p.name == names::plane::HOST_METADATA) {
            // The modules are bytes stats of the event metadata entries, named as `hlo_protos`
            // (xlens-hlo) looks them up.
            let hlo_stat = |id: i64| {
                plane
                    .stat_metadata
                    .get(&id)
                    .is_some_and(|m| m.name == names::stat::HLO_PROTO || m.name == names::stat::HLO_PROTO_LEGACY)
            };
            for (id, m) in &plane.event_metadata {
                for stat in m.stats.iter().filter(|s| hlo_stat(s.metadata_id)) {
                    if let Some(raw::x_stat::Value::BytesValue(b)) = &stat.value
                        && let Err(e) = xlens_hlo::raw::HloProto::decode(b.as_ref())
                    {
                        return Validity::HloInvalid(format!("HloProto of event metadata {id}: {e}"));
                    }
                }
            }
        }
        Validity::Valid
    }

    /// The name used in summaries.
    pub fn name(&self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Utf8Only => "utf8_only",
            Validity::HloInvalid(_) => "hlo_invalid",
            Validity::Invalid(_) => "invalid",
        }
    }
}

/// What a case gave.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The report's status; `None` when the scan failed with an error (no report, as the CLI
    /// exits 1) or panicked.
    pub status: Option<Status>,
    /// The scan's error, when it failed.
    pub error: Option<String>,
    /// What prost makes of the bytes.
    pub validity: Validity,
    /// How long the case took.
    pub elapsed: Duration,
    /// The heap's peak over the case, when a probe measured it.
    pub peak: Option<usize>,
    /// Each broken promise with what broke it.
    pub failures: Vec<(Oracle, String)>,
}

/// One host read from bytes in memory, as `open_space` reads a file.
struct BytesHost(Bytes);

impl HostInput for BytesHost {
    fn host(&self) -> &str {
        "campaign"
    }
    fn display(&self) -> String {
        "campaign.xplane.pb".to_owned()
    }
    fn open(&self) -> xlens_xplane::Result<Space> {
        Space::parse(self.0.clone())
    }
}

/// Scans `data` and checks oracles (a) to (e) on it.
pub fn check(data: &[u8], limits: &Limits, probe: Option<&dyn PeakProbe>) -> Verdict {
    let mut failures = Vec::new();
    if let Some(p) = probe {
        p.reset();
    }
    let start = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let host = BytesHost(Bytes::copy_from_slice(data));
        let scanned = scan_session(None, &[host], &ScanConfig::default(), &|_, _| {});
        scanned.map(|report| {
            let rendered = [
                ("text", Output::Text, render::text(&report)),
                ("JSON", Output::Json, render::json(&report)),
                ("HTML", Output::Html, render::html(&report)),
            ];
            (report, rendered)
        })
    }));
    let elapsed = start.elapsed();
    let peak = probe.map(PeakProbe::peak);
    let (status, error) = match outcome {
        Err(payload) => {
            failures.push((Oracle::NoPanic, panic_message(payload.as_ref())));
            (None, None)
        }
        Ok(Err(e)) => (None, Some(one_line(&e))),
        Ok(Ok((report, rendered))) => {
            for (format, output, out) in &rendered {
                if let Some(what) = control_char(out, *output) {
                    failures.push((Oracle::EscapedOutput, format!("{format} report: {what}")));
                }
            }
            (Some(report.status), None)
        }
    };
    if elapsed > limits.case_time {
        failures.push((Oracle::NoHang, format!("took {:.1} s (limit {:?})", elapsed.as_secs_f64(), limits.case_time)));
    }
    if let Some(peak) = peak
        && peak > limits.memory_bound(data.len())
    {
        failures.push((
            Oracle::MemoryBound,
            format!(
                "peak heap {} bytes for {} input bytes (bound {})",
                peak,
                data.len(),
                limits.memory_bound(data.len())
            ),
        ));
    }
    let validity = Validity::of(data);
    if status == Some(Status::Optimal) {
        match &validity {
            Validity::Invalid(e) => failures.push((Oracle::IncompleteOnDecodeError, format!("OPTIMAL, prost: {e}"))),
            Validity::HloInvalid(e) => failures.push((Oracle::IncompleteOnHloError, format!("OPTIMAL, prost: {e}"))),
            _ => {}
        }
    }
    Verdict { status, error, validity, elapsed, peak, failures }
}

/// A file that changes under the scan: `after` the CLI started, the file is truncated to `len`
/// bytes (issue 40 case 2: a profile rewritten while `scan` reads it).
#[derive(Clone, Copy, Debug)]
pub struct Shrink {
    /// How long after the start.
    pub after: Duration,
    /// The length the file is cut to.
    pub len: u64,
}

/// Runs `bin scan FILE --format json` on `data` written to `dir` (cut short during the scan
/// with `shrink`), and says what broke oracle (f) (or (b), when it outlives `timeout`), if
/// anything.
pub fn check_cli(
    bin: &Path,
    data: &[u8],
    dir: &Path,
    timeout: Duration,
    shrink: Option<Shrink>,
) -> Option<(Oracle, String)> {
    use std::process::{Command, Stdio};
    let file = dir.join("case.xplane.pb");
    if let Err(e) = std::fs::write(&file, data) {
        return Some((Oracle::NoSignal, format!("writing {}: {e}", file.display())));
    }
    let child = Command::new(bin)
        .arg("scan")
        .arg(&file)
        .args(["--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return Some((Oracle::NoSignal, format!("starting {}: {e}", bin.display()))),
    };
    // Drain the pipes on threads, so a full pipe does not stall the child.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let start = Instant::now();
    let cut_note = shrink.map_or(String::new(), |c| format!(" (file cut to {} bytes after {:?})", c.len, c.after));
    let mut shrink = shrink;
    let status = loop {
        if let Some(cut) = shrink
            && start.elapsed() >= cut.after
        {
            shrink = None;
            if let Err(e) = std::fs::OpenOptions::new().write(true).open(&file).and_then(|f| f.set_len(cut.len)) {
                let _ = child.kill();
                let _ = child.wait();
                return Some((Oracle::NoSignal, format!("cutting {}: {e}", file.display())));
            }
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Some((Oracle::NoHang, format!("xlens scan ran past {timeout:?}")));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Some((Oracle::NoSignal, format!("waiting: {e}"))),
        }
    };
    let _ = stdout.map(|h| h.join());
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr);
    if status.code().is_none() {
        use std::os::unix::process::ExitStatusExt;
        return Some((
            Oracle::NoSignal,
            format!("killed by signal {:?}{cut_note}; stderr: {:?}", status.signal(), first_chars(&stderr)),
        ));
    }
    let lines = stderr.lines().count();
    if lines > 1 {
        return Some((
            Oracle::NoSignal,
            format!("exit {status}{cut_note}, {lines} lines on stderr: {:?}", first_chars(&stderr)),
        ));
    }
    if let Some(what) = control_char(&stderr, Output::Text) {
        return Some((Oracle::EscapedOutput, format!("stderr: {what}")));
    }
    None
}

fn drain(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = r.read_to_end(&mut out);
        out
    })
}

/// Which characters an output may hold raw.
#[derive(Clone, Copy, Debug)]
pub enum Output {
    /// The text report and stderr: no C0 or C1 control character (nor DEL) but `'\n'`, as
    /// `render::printable_lines` escapes them.
    Text,
    /// The HTML page: none but `'\n'` and `'\t'` (whitespace in markup, kept by the page's
    /// escaper on purpose).
    Html,
    /// JSON: no C0 control character but `'\n'` (JSON escapes them; DEL and C1 are plain
    /// characters in a JSON string, and a consumer's concern).
    Json,
}

/// The first character of `text` that `output` may not hold raw, with its line.
pub fn control_char(text: &str, output: Output) -> Option<String> {
    let bad = |c: char| match output {
        Output::Text => c.is_control() && c != '\n',
        Output::Html => c.is_control() && c != '\n' && c != '\t',
        Output::Json => c < ' ' && c != '\n',
    };
    let (at, c) = text.char_indices().find(|&(_, c)| bad(c))?;
    let line = text[..at].matches('\n').count() + 1;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    Some(format!("control character {c:?} on line {line}: {:?}", first_chars(&text[start..end])))
}

fn first_chars(s: &str) -> String {
    s.chars().take(200).collect()
}

fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Schema;
    use super::*;

    fn capture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(name);
        std::fs::read(path).expect("capture")
    }

    /// A byte of wire type 7 inside an embedded HloProto (lengths fixed up) leaves a valid
    /// XSpace holding an invalid HLO module.
    #[test]
    fn junk_inside_embedded_hlo_is_hlo_invalid() {
        let data = capture("tpu/tpu_padding_waste/host0.xplane.pb");
        let structure = Structure::parse(&data);
        // The largest bytes stat of the capture: its HloProto.
        let hlo = (0..structure.fields.len())
            .filter(|&i| structure.fields[i].parent == Schema::Stat && structure.fields[i].number == 6)
            .max_by_key(|&i| structure.fields[i].end - structure.fields[i].value)
            .expect("an embedded HloProto");
        let at = structure.fields[hlo].value;
        let bytes = super::super::mutate::splice_fixed(&data, &structure, hlo, at..at, &[0x0f], true);
        assert_eq!(Validity::of(&data), Validity::Valid, "the capture is valid");
        let v = Validity::of(&bytes);
        assert!(matches!(v, Validity::HloInvalid(_)), "{v:?}");
    }
}
