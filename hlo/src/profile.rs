//! Finding HLO modules in a profile: the `/host:metadata` plane (facts §2.2).
//!
//! Each compiled program is one event-metadata entry named `module(program_id)` whose stats hold
//! `Hlo Proto` (a serialized `xla.HloProto`; `HLO Proto` in libtpu 0.0.37) and `program_id`.
//! When the `program_id` stat is missing (seen on TPU captures), the trailing `(N)` of the name
//! is the program id, else the metadata id.

use bytes::Bytes;
use xlens_xplane::{Plane, Session, Space, names};

use crate::cost::Cost;
use crate::decode::{Parts, Strict, decode_assignment};
use crate::error::{Location, Warning, WarningKind};
use crate::ids::InstrId;
use crate::module::Module;

/// One serialized HLO proto found in a profile, not yet decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HloProtoEntry {
    /// The metadata name, `module(program_id)` (e.g. `"jit_train_step(36)"`).
    pub name: String,
    /// The program id.
    pub program_id: u64,
    /// The serialized `xla.HloProto` (a zero-copy window into the profile when possible).
    pub bytes: Bytes,
    /// True when the proto was stored under the legacy stat name `HLO Proto`.
    pub legacy: bool,
}

impl HloProtoEntry {
    /// Decodes the proto and builds its module, tagged with the program id. The bytes must be
    /// an `HloProto` that prost decodes whole (every field checked, [`xlens_xplane::strict`]).
    pub fn decode(&self) -> crate::Result<Module> {
        self.decode_checked(&Strict::new())
    }

    /// [`HloProtoEntry::decode`] with the strict check's tables built once for many entries.
    fn decode_checked(&self, strict: &Strict) -> crate::Result<Module> {
        self.tagged(Module::decode_checked(self.bytes.clone(), strict, true))
    }

    /// A module built from this entry, tagged with its program id (an error with its name).
    fn tagged(&self, built: crate::Result<Module>) -> crate::Result<Module> {
        built.map(|m| m.with_program_id(self.program_id, self.name.clone())).map_err(|e| e.in_module(&self.name))
    }
}

/// The program id in a trailing `(N)` of a metadata name.
fn trailing_program_id(name: &str) -> Option<u64> {
    let inner = name.strip_suffix(')')?;
    let open = inner.rfind('(')?;
    inner[open + 1..].parse().ok()
}

/// The HLO protos of a profile's `/host:metadata` plane, sorted by program id then name.
/// Entries whose stats do not decode are reported as warnings.
pub fn hlo_protos(space: &Space) -> (Vec<HloProtoEntry>, Vec<Warning>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let Some(plane) = space.metadata_plane() else { return (out, warnings) };
    for meta in plane.event_metadata() {
        match entry(plane, meta) {
            Ok(Some(e)) => out.push(e),
            Ok(None) => {}
            Err(why) => warnings
                .push(Warning { kind: WarningKind::ModuleSkipped(why), location: Location::in_module(meta.name()) }),
        }
    }
    out.sort_by(|a, b| (a.program_id, &a.name).cmp(&(b.program_id, &b.name)));
    for pair in out.windows(2) {
        if pair[0].program_id == pair[1].program_id {
            warnings.push(Warning {
                kind: WarningKind::DuplicateProgramId(pair[0].program_id),
                location: Location::in_module(pair[1].name.clone()),
            });
        }
    }
    (out, warnings)
}

fn entry(plane: &Plane, meta: &xlens_xplane::EventMetadata) -> Result<Option<HloProtoEntry>, String> {
    let mut proto: Option<(&[u8], bool)> = None;
    let mut program_id = None;
    for stat in plane.metadata_stats(meta) {
        let stat = stat.map_err(|e| format!("metadata stats do not decode: {e}"))?;
        match stat.name() {
            names::stat::HLO_PROTO => proto = stat.as_bytes().map(|b| (b, false)).or(proto),
            names::stat::HLO_PROTO_LEGACY if proto.is_none() => proto = stat.as_bytes().map(|b| (b, true)),
            names::stat::PROGRAM_ID => program_id = stat.as_u64(),
            _ => {}
        }
    }
    let Some((bytes, legacy)) = proto else { return Ok(None) };
    let program_id = program_id.or_else(|| trailing_program_id(meta.name())).unwrap_or(meta.id().0.max(0) as u64);
    let bytes = plane.share(bytes).unwrap_or_else(|| Bytes::copy_from_slice(bytes));
    Ok(Some(HloProtoEntry { name: meta.name().to_owned(), program_id, bytes, legacy }))
}

/// Decodes every HLO module of a profile, in parallel, sorted by program id then name. A module
/// whose proto fails to decode or build becomes a warning; the others are kept.
///
/// ```
/// use xlens_hlo::{modules_from_space, testing};
/// use xlens_xplane::Space;
/// let space = Space::parse(testing::tiny_profile_bytes().into())?;
/// let (modules, warnings) = modules_from_space(&space);
/// assert!(warnings.is_empty());
/// assert_eq!((modules[0].display_name(), modules[0].program_id()), ("jit_f(7)".to_owned(), Some(7)));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn modules_from_space(space: &Space) -> (Vec<Module>, Vec<Warning>) {
    let (entries, mut warnings) = hlo_protos(space);
    let decoded = decode_largest_first(&entries);
    let mut modules = Vec::with_capacity(decoded.len());
    for (entry, result) in entries.iter().zip(decoded) {
        match result {
            Ok(m) => modules.push(m),
            Err(e) => warnings.push(Warning {
                kind: WarningKind::ModuleSkipped(e.to_string()),
                location: Location::in_module(entry.name.clone()),
            }),
        }
    }
    (modules, warnings)
}

/// Decodes every entry in parallel, the largest protos first, and returns the results in the
/// entries' order. A module's build ends in steps that run on one worker (its name index, the
/// topological orders, the costs); begun last, the largest module ran them alone while the other
/// workers had nothing left (a profile's main program is often listed after its small helpers).
/// A large entry is two jobs: its module and, right behind it in the queue, its buffer
/// assignment (read on one worker before the instructions, it held up the largest module while
/// the next free worker took the small ones).
fn decode_largest_first(entries: &[HloProtoEntry]) -> Vec<crate::Result<Module>> {
    type Assignment = std::result::Result<Option<crate::raw::BufferAssignmentProto>, prost::DecodeError>;
    struct Slot<'a> {
        entry: &'a HloProtoEntry,
        module: Option<crate::Result<Module>>,
        assignment: Option<Assignment>,
        parts: Option<(Parts, Vec<Bytes>)>,
    }
    let strict = &Strict::new();
    let mut slots: Vec<Slot<'_>> = entries
        .iter()
        .map(|entry| Slot {
            entry,
            module: None,
            assignment: None,
            parts: if entry.bytes.len() >= SPLIT_MIN_BYTES { Parts::read(&entry.bytes, strict) } else { None },
        })
        .collect();
    let mut queue: Vec<&mut Slot<'_>> = slots.iter_mut().collect();
    queue.sort_by_key(|slot| std::cmp::Reverse(slot.entry.bytes.len()));
    // Spawned in that order, taken in that order (FIFO) by whichever worker is free. Small
    // protos go in batches: one job each, a worker spent longer taking the next job from the
    // other's queue than decoding a module of a few instructions.
    fn decode_all(batch: Vec<&mut Slot<'_>>, strict: &Strict) {
        batch.into_iter().for_each(|slot| slot.module = Some(slot.entry.decode_checked(strict)));
    }
    rayon::scope_fifo(|scope| {
        let mut batch: Vec<&mut Slot<'_>> = Vec::new();
        let mut batch_bytes = 0;
        for slot in queue {
            // (A proto this small is never split: see `SPLIT_MIN_BYTES`.)
            if slot.entry.bytes.len() < BATCH_BYTES {
                batch_bytes += slot.entry.bytes.len();
                batch.push(slot);
                if batch_bytes >= BATCH_BYTES {
                    let full = std::mem::take(&mut batch);
                    batch_bytes = 0;
                    scope.spawn_fifo(move |_| decode_all(full, strict));
                }
                continue;
            }
            let Slot { entry, module, assignment, parts } = slot;
            match parts.take() {
                Some((parts, occurrences)) => {
                    scope.spawn_fifo(move |_| *module = Some(parts.build()));
                    scope.spawn_fifo(move |_| *assignment = Some(decode_assignment(&occurrences)));
                }
                None => scope.spawn_fifo(move |_| *module = Some(entry.decode_checked(strict))),
            }
        }
        if !batch.is_empty() {
            scope.spawn_fifo(move |_| decode_all(batch, strict));
        }
    });
    // The scope returns once every job has filled its slot.
    slots
        .into_iter()
        .map(|slot| match (slot.module, slot.assignment) {
            (Some(built), Some(Ok(assignment))) => slot.entry.tagged(built.map(|mut m| {
                m.set_buffer_assignment(assignment);
                m
            })),
            (Some(whole), None) => whole,
            // An assignment that does not decode fails the whole proto: read as a whole again
            // for the same error. (A job that did not run cannot happen: the scope waits.)
            (Some(_), Some(Err(_))) | (None, _) => slot.entry.decode_checked(strict),
        })
        .collect()
}

/// Protos of at least this size are read as two jobs (module, buffer assignment).
const SPLIT_MIN_BYTES: usize = 64 << 10;

/// Protos smaller than this are decoded in batches of about this many bytes, one job each.
const BATCH_BYTES: usize = 16 << 10;

// A batched proto is never one that is split in two jobs.
const _: () = assert!(BATCH_BYTES <= SPLIT_MIN_BYTES);

/// The modules of every host of a session: a program id seen on several hosts is decoded once
/// (from the first host, in host order). Sorted by program id then name.
pub fn modules_from_session(session: &Session) -> (Vec<Module>, Vec<Warning>) {
    let mut modules: Vec<Module> = Vec::new();
    let mut warnings = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for host in session.hosts() {
        let (entries, w) = hlo_protos(host.space());
        warnings.extend(w);
        let fresh: Vec<HloProtoEntry> =
            entries.into_iter().filter(|e| seen.insert((e.program_id, e.name.clone()))).collect();
        let decoded = decode_largest_first(&fresh);
        for (entry, result) in fresh.iter().zip(decoded) {
            match result {
                Ok(m) => modules.push(m),
                Err(e) => warnings.push(Warning {
                    kind: WarningKind::ModuleSkipped(e.to_string()),
                    location: Location::in_module(entry.name.clone()),
                }),
            }
        }
    }
    modules.sort_by_key(|a| (a.program_id(), a.display_name()));
    (modules, warnings)
}

/// The hosts of a session each program was captured on, by its profile name
/// (`module(program_id)`, [`Module::display_name`]), hosts in session order. Reads only the
/// metadata planes; no proto is decoded.
pub fn module_hosts(session: &Session) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for host in session.hosts() {
        for entry in hlo_protos(host.space()).0 {
            let hosts = out.entry(entry.name).or_default();
            if hosts.last().map(String::as_str) != Some(host.name()) {
                hosts.push(host.name().to_owned());
            }
        }
    }
    out
}

/// XLA's own cost numbers for one instruction, read from a profile, next to this crate's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostCheck {
    /// The instruction.
    pub instruction: InstrId,
    /// The `flops` stat on the op's event metadata (TPU op lines), if present.
    pub profile_flops: Option<u64>,
    /// The `bytes_accessed` stat, if present.
    pub profile_bytes_accessed: Option<u64>,
    /// This crate's estimate.
    pub estimate: Cost,
}

/// Pairs this crate's per-instruction costs with the `flops` / `bytes_accessed` stats XLA put on
/// the device planes' op metadata (TPU traces: metadata named after the instruction, with a
/// `program_id` stat equal to the module's). One entry per instruction found, in module order.
pub fn profile_cost_checks(space: &Space, module: &Module) -> Vec<CostCheck> {
    let mut found: std::collections::BTreeMap<InstrId, CostCheck> = std::collections::BTreeMap::new();
    for plane in space.analysis_devices() {
        for meta in plane.event_metadata() {
            let Some(instr) = module.instruction_by_name(meta.name()) else { continue };
            let (mut program, mut flops, mut bytes) = (None, None, None);
            for stat in plane.metadata_stats(meta).map_while(Result::ok) {
                match stat.name() {
                    names::stat::PROGRAM_ID => program = stat.as_u64(),
                    names::stat::FLOPS => flops = stat.as_u64().or_else(|| stat.as_f64().map(|f| f as u64)),
                    names::stat::BYTES_ACCESSED => bytes = stat.as_u64().or_else(|| stat.as_f64().map(|f| f as u64)),
                    _ => {}
                }
            }
            if program.is_some() && program != module.program_id() {
                continue;
            }
            if flops.is_none() && bytes.is_none() {
                continue;
            }
            found.entry(instr.id()).or_insert(CostCheck {
                instruction: instr.id(),
                profile_flops: flops,
                profile_bytes_accessed: bytes,
                estimate: module.cost(instr.id()),
            });
        }
    }
    found.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Modules decoded largest first come back in the entries' order, each with its own
    /// program id, whatever the sizes (one entry that fails to decode keeps its place).
    #[test]
    fn modules_decoded_largest_first_keep_the_entries_order() {
        use prost::Message;
        let module = |name: &str, ops: usize| {
            let mut b = crate::testing::HloBuilder::new(name);
            let mut main = b.computation("main");
            let mut last = main.param("p", 0, crate::testing::shape(crate::shape::PrimitiveType::F32, &[4]));
            for k in 0..ops {
                last = main.op(
                    &format!("negate.{k}"),
                    "negate",
                    crate::testing::shape(crate::shape::PrimitiveType::F32, &[4]),
                    &[last],
                );
            }
            main.finish(last);
            Bytes::from(b.finish("main").encode_to_vec())
        };
        // Single jobs and batches of small protos (under `BATCH_BYTES`) of several sizes.
        let sizes = [1usize, 40, 3, 0, 90, 7, 900, 300, 250, 400, 120, 5];
        let mut entries: Vec<HloProtoEntry> = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| HloProtoEntry {
                name: format!("jit_{k}({k})"),
                program_id: k as u64,
                bytes: module(&format!("jit_{k}"), n),
                legacy: false,
            })
            .collect();
        entries[2].bytes = Bytes::from_static(b"\xff\xff");
        let decoded = decode_largest_first(&entries);
        assert_eq!(decoded.len(), sizes.len());
        for (k, result) in decoded.iter().enumerate() {
            match result {
                Ok(m) => {
                    assert_ne!(k, 2);
                    assert_eq!(m.program_id(), Some(k as u64));
                    assert_eq!(m.instructions().len(), sizes[k] + 1);
                }
                Err(_) => assert_eq!(k, 2),
            }
        }
    }

    #[test]
    fn program_id_from_name() {
        assert_eq!(trailing_program_id("jit_f(42)"), Some(42));
        assert_eq!(trailing_program_id("jit_f(a)(1)"), Some(1));
        assert_eq!(trailing_program_id("jit_f"), None);
        assert_eq!(trailing_program_id("jit_f(x)"), None);
    }

    /// A large proto is read as two jobs (its module, its buffer assignment): the modules equal
    /// those read whole, assignment included; a second occurrence of the assignment merges into
    /// the first as it does read whole; an assignment that does not decode gives the whole
    /// read's error.
    #[test]
    fn large_protos_read_in_two_jobs_equal_the_whole_read() {
        use prost::Message;
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/h200/h200_train_bf16/vm.xplane.pb");
        let space = xlens_xplane::open_space(std::path::Path::new(path)).unwrap();
        let (entries, _) = hlo_protos(&space);
        let large: Vec<&HloProtoEntry> = entries.iter().filter(|e| e.bytes.len() >= SPLIT_MIN_BYTES).collect();
        assert!(!large.is_empty() && large.iter().all(|e| Parts::read(&e.bytes, &Strict::new()).is_some()));
        let same = |a: &crate::Result<Module>, b: &crate::Result<Module>| match (a, b) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.buffer_assignment(), b.buffer_assignment());
                assert_eq!(a.memory_stats(0).ok(), b.memory_stats(0).ok());
                assert_eq!(a.instructions().len(), b.instructions().len());
                assert_eq!(a.display_name(), b.display_name());
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("{:?} against {:?}", a.as_ref().err(), b.as_ref().err()),
        };
        for (split, whole) in decode_largest_first(&entries).iter().zip(&entries) {
            same(split, &whole.decode());
        }
        // The largest entry with a second assignment appended (one more logical buffer), then
        // with one that does not decode.
        let entry = large.iter().max_by_key(|e| e.bytes.len()).unwrap();
        let extra = crate::raw::BufferAssignmentProto {
            logical_buffers: vec![crate::raw::LogicalBufferProto { id: 999_999, size: 4096, ..Default::default() }],
            ..Default::default()
        };
        let field = |payload: &[u8]| {
            let mut out = entry.bytes.to_vec();
            prost::encoding::encode_key(3, prost::encoding::WireType::LengthDelimited, &mut out);
            prost::encoding::encode_varint(payload.len() as u64, &mut out);
            out.extend_from_slice(payload);
            Bytes::from(out)
        };
        for bytes in [field(&extra.encode_to_vec()), field(&[0x0a, 0x05, 0xff])] {
            let changed = HloProtoEntry { bytes, ..(*entry).clone() };
            let split = decode_largest_first(std::slice::from_ref(&changed));
            same(&split[0], &changed.decode());
        }
    }
}
