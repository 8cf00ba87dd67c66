//! Finding HLO modules in a profile: the `/host:metadata` plane (facts §2.2).
//!
//! Each compiled program is one event-metadata entry named `module(program_id)` whose stats hold
//! `Hlo Proto` (a serialized `xla.HloProto`; `HLO Proto` in libtpu 0.0.37) and `program_id`.
//! When the `program_id` stat is missing (seen on TPU captures), the trailing `(N)` of the name
//! is the program id, else the metadata id.

use bytes::Bytes;
use xlens_xplane::{Plane, Session, Space, names};

use crate::cost::Cost;
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
    /// Decodes the proto and builds its module, tagged with the program id.
    pub fn decode(&self) -> crate::Result<Module> {
        Module::decode(self.bytes.clone())
            .map(|m| m.with_program_id(self.program_id, self.name.clone()))
            .map_err(|e| e.in_module(&self.name))
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
fn decode_largest_first(entries: &[HloProtoEntry]) -> Vec<crate::Result<Module>> {
    let mut decoded: Vec<Option<crate::Result<Module>>> = entries.iter().map(|_| None).collect();
    let mut queue: Vec<(&mut Option<crate::Result<Module>>, &HloProtoEntry)> =
        decoded.iter_mut().zip(entries).collect();
    queue.sort_by_key(|(_, entry)| std::cmp::Reverse(entry.bytes.len()));
    // Spawned in that order, taken in that order (FIFO) by whichever worker is free.
    rayon::scope_fifo(|scope| {
        for (slot, entry) in queue {
            scope.spawn_fifo(move |_| *slot = Some(entry.decode()));
        }
    });
    // The scope returns once every entry has filled its slot.
    decoded.into_iter().flatten().collect()
}

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
        let sizes = [1usize, 40, 3, 0, 90, 7];
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
}
