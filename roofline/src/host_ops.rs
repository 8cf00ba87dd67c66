//! The op events of host threads (XLA:CPU runs its thunks there), read once per host.
//!
//! A CPU profile holds millions of events on a few threads. Every CPU analysis (the op profile,
//! the step anatomy, the host detectors) needs the same few facts of each `hlo_op` event, so one
//! walk of each event's stats collects them into a compact table that the others share, together
//! with the threads that carry step markers.

use std::collections::{BTreeMap, HashMap};

use xlens_xplane::{Picos, Space, names};

/// One executed HLO op on a host thread, compactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOp {
    /// Start.
    pub start: Picos,
    /// End.
    pub end: Picos,
    /// Index into [`HostOps::names`] (the `hlo_op` stat).
    pub name: u32,
    /// `program_id` stat.
    pub program_id: Option<u64>,
    /// `run_id` stat (one program execution).
    pub run_id: Option<i64>,
    /// `device_ordinal` stat (0 when absent).
    pub core: i64,
    /// Index of the thread (line) in `/host:CPU`.
    pub line: u32,
}

/// Every host-thread op event of a host, read in one walk of each event's stats.
///
/// ```
/// use xlens_xplane::Session;
/// use xlens_roofline::HostOps;
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/corpus/clean");
/// let session = Session::open(dir.as_ref())?;
/// let ops = HostOps::read(session.hosts()[0].space())?;
/// assert!(!ops.ops.is_empty());
/// assert!(!ops.marker_lines.is_empty(), "the python thread carries the step markers");
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostOps {
    /// The ops, in thread order then file order.
    pub ops: Vec<HostOp>,
    /// Interned op names.
    pub names: Vec<String>,
    /// The `hlo_module` stat of each program, as first seen.
    pub modules: BTreeMap<u64, String>,
    /// Threads (line indices) with a host step marker event (see
    /// [`crate::is_host_step_marker`]), ascending.
    pub marker_lines: Vec<usize>,
    /// Of those, the threads whose markers are root annotations (an `_r` stat): the threads that
    /// run the training loop.
    pub rooted_marker_lines: Vec<usize>,
}

impl HostOps {
    /// Reads the host-thread plane (`/host:CPU`) of a space; empty without one. Events that fail
    /// to decode end their line, as everywhere else; the error is returned.
    pub fn read(space: &Space) -> xlens_xplane::Result<HostOps> {
        match HostOps::read_partial(space) {
            (ops, None) => Ok(ops),
            (_, Some(e)) => Err(e),
        }
    }

    /// Like [`HostOps::read`], but keeps what was read before a decoding error (the rest of
    /// that line is skipped, other lines are read) and returns the first error beside it.
    pub fn read_partial(space: &Space) -> (HostOps, Option<xlens_xplane::Error>) {
        use rayon::prelude::*;
        let mut out = HostOps::default();
        let Some(plane) = space.host_threads() else { return (out, None) };
        // Step markers decided once per metadata entry, not per event.
        let marker = plane.metadata_mask(|m| crate::is_host_step_marker(m.name()));
        let ids = StatIds {
            root: plane.stat_id(names::stat::IS_ROOT),
            hlo_op: plane.stat_id(names::stat::HLO_OP),
            program: plane.stat_id(names::stat::PROGRAM_ID),
            run: plane.stat_id(names::stat::RUN_ID),
            ordinal: plane.stat_id(names::stat::DEVICE_ORDINAL),
            module: plane.stat_id(names::stat::HLO_MODULE),
        };
        // Threads are read in parallel, each with its own name table; the tables are merged in
        // thread order, so the result does not depend on scheduling.
        let lines: Vec<LineOps> = plane.lines().par_iter().map(|line| read_line(plane, line, &ids, &marker)).collect();
        let mut error = None;
        let mut interner = Interner::default();
        // Sized exactly: the table is the largest allocation of a CPU profile's analysis, and
        // growing it by doubling would hold up to twice its size while the threads' own tables
        // are still alive.
        out.ops = Vec::with_capacity(lines.iter().map(|l| l.ops.len()).sum());
        for (index, line) in lines.into_iter().enumerate() {
            let global: Vec<u32> = line.interner.names.iter().map(|n| interner.by_string(n)).collect();
            out.ops.extend(line.ops.into_iter().map(|op| HostOp { name: global[op.name as usize], ..op }));
            for (program, module) in line.modules {
                out.modules.entry(program).or_insert(module);
            }
            if line.has_marker {
                out.marker_lines.push(index);
            }
            if line.rooted {
                out.rooted_marker_lines.push(index);
            }
            if error.is_none() {
                error = line.error;
            }
        }
        out.names = interner.names;
        (out, error)
    }

    /// The ops of each thread that ran any, thread by thread, in file order.
    pub fn by_line(&self) -> impl Iterator<Item = &[HostOp]> {
        self.ops.chunk_by(|a, b| a.line == b.line)
    }

    /// The ops of one thread, in file order.
    pub fn of_line(&self, line: usize) -> &[HostOp] {
        let from = self.ops.partition_point(|o| (o.line as usize) < line);
        let to = self.ops.partition_point(|o| (o.line as usize) <= line);
        &self.ops[from..to]
    }

    /// The name of an op.
    pub fn name(&self, op: &HostOp) -> &str {
        self.names.get(op.name as usize).map_or("", String::as_str)
    }
}

struct StatIds {
    root: Option<xlens_xplane::StatMetadataId>,
    hlo_op: Option<xlens_xplane::StatMetadataId>,
    program: Option<xlens_xplane::StatMetadataId>,
    run: Option<xlens_xplane::StatMetadataId>,
    ordinal: Option<xlens_xplane::StatMetadataId>,
    module: Option<xlens_xplane::StatMetadataId>,
}

/// What one thread holds.
struct LineOps {
    ops: Vec<HostOp>,
    interner: Interner,
    modules: BTreeMap<u64, String>,
    has_marker: bool,
    rooted: bool,
    error: Option<xlens_xplane::Error>,
}

fn read_line(
    plane: &xlens_xplane::Plane,
    line: &xlens_xplane::Line,
    ids: &StatIds,
    marker: &xlens_xplane::MetadataMask,
) -> LineOps {
    let mut out = LineOps {
        ops: Vec::new(),
        interner: Interner::default(),
        modules: BTreeMap::new(),
        has_marker: false,
        rooted: false,
        error: None,
    };
    for ev in line.events(plane) {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                out.error = Some(e);
                break;
            }
        };
        if (!out.has_marker || !out.rooted) && marker.contains(&ev) {
            out.has_marker = true;
            out.rooted = out.rooted || ids.root.is_some_and(|r| ev.stat(r).is_some());
        }
        if ids.hlo_op.is_none() || !ev.has_stats() {
            continue;
        }
        if let Some(op) = read_op(&ev, ids, &mut out.interner, &mut out.modules) {
            out.ops.push(HostOp { line: line.index() as u32, ..op });
        }
    }
    out
}

/// Op names interned by their stat-metadata reference when the writer used one (XProf's
/// writers do), else by the string itself; neither path allocates for a name seen before.
#[derive(Default)]
struct Interner {
    by_ref: HashMap<u64, u32>,
    by_name: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn by_string(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.by_name.insert(name.to_owned(), i);
        i
    }
}

/// One walk of an event's stats; `None` when it has no `hlo_op`.
fn read_op(
    ev: &xlens_xplane::Event<'_>,
    ids: &StatIds,
    interner: &mut Interner,
    modules: &mut BTreeMap<u64, String>,
) -> Option<HostOp> {
    let (mut name, mut program_id, mut run_id, mut core) = (None, None, None, 0);
    let mut module = None;
    for s in ev.stats().map_while(|s| s.ok()) {
        let id = Some(s.metadata_id());
        if id == ids.hlo_op {
            name = Some(match s.ref_id() {
                Some(r) => match interner.by_ref.get(&r) {
                    Some(&i) => i,
                    None => {
                        let i = interner.by_string(&s.as_str().unwrap_or_default());
                        interner.by_ref.insert(r, i);
                        i
                    }
                },
                None => interner.by_string(&s.as_str()?),
            });
        } else if id == ids.program {
            program_id = s.as_u64();
        } else if id == ids.run {
            run_id = s.as_i64();
        } else if id == ids.ordinal {
            core = s.as_i64().unwrap_or(0);
        } else if id == ids.module {
            module = Some(s);
        }
    }
    let name = name?;
    let program = program_id.unwrap_or(0);
    modules
        .entry(program)
        .or_insert_with(|| module.and_then(|s| s.as_str()).map(|s| s.into_owned()).unwrap_or_default());
    Some(HostOp { start: ev.start(), end: ev.end(), name, program_id, run_id, core, line: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::Session;

    /// The parallel, interned read equals a plain walk of every event's stats.
    #[test]
    fn matches_a_plain_walk() {
        for name in ["corpus/clean", "real/debug_print", "real/sharded_collectives"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(name);
            let session = Session::open(&dir).unwrap();
            let space = session.hosts()[0].space();
            let plane = space.host_threads().unwrap();
            let hlo_op = plane.stat_id(names::stat::HLO_OP).unwrap();
            let program = plane.stat_id(names::stat::PROGRAM_ID).unwrap();
            let root = plane.stat_id(names::stat::IS_ROOT);
            let mut expected = Vec::new();
            let mut markers = Vec::new();
            for line in plane.lines() {
                let mut marked = false;
                for ev in line.events(plane).map(|e| e.unwrap()) {
                    marked |= crate::is_host_step_marker(ev.name()) && root.is_some_and(|r| ev.stat(r).is_some());
                    if let Some(op) = ev.stat(hlo_op).and_then(|s| s.as_str()) {
                        let p = ev.stat(program).and_then(|s| s.as_u64());
                        expected.push((line.index(), ev.start(), ev.end(), op.into_owned(), p));
                    }
                }
                if marked {
                    markers.push(line.index());
                }
            }
            let ops = HostOps::read(space).unwrap();
            let actual: Vec<_> = ops
                .ops
                .iter()
                .map(|o| (o.line as usize, o.start, o.end, ops.name(o).to_owned(), o.program_id))
                .collect();
            assert!(!expected.is_empty(), "{name}");
            assert_eq!(actual, expected, "{name}");
            assert_eq!(ops.rooted_marker_lines, markers, "{name}");
            assert!(ops.modules.values().all(|m| !m.is_empty()), "{name}: {:?}", ops.modules);
            let line = ops.ops[0].line as usize;
            assert!(ops.of_line(line).iter().all(|o| o.line as usize == line));
            let groups: Vec<&[HostOp]> = ops.by_line().collect();
            assert_eq!(groups.iter().map(|g| g.len()).sum::<usize>(), ops.ops.len(), "{name}");
            assert!(groups.iter().all(|g| g.iter().all(|o| o.line == g[0].line)), "{name}");
            assert!(groups.windows(2).all(|w| w[0][0].line < w[1][0].line), "{name}");
        }
    }
}
