//! `wrong_mesh_mapping`: the program's collectives run over the wrong axis of the device mesh:
//! the minor (fast) axis carries no communication while every input is replicated along it, long
//! chains of collective-permutes hop across the slow axis, or a collective class over strided
//! groups takes a multiple of the time per byte of the same collective over contiguous groups.
//!
//! Device ids are taken in mesh order (row-major, as `jax.make_mesh` and `mesh_utils` lay them
//! out): the last mesh axis is the one whose devices have consecutive ids, and it is mapped to the
//! fastest links. A group `{0,2,4,6}` on a `4x2` mesh (`'data'`, `'model'`) runs over the outer
//! `'data'` axis; `{0,1}` over the inner `'model'` axis.

use std::collections::BTreeMap;

use xlens_hlo::raw::hlo_instruction_proto::ReplicaGroupList;
use xlens_hlo::{Collective, ComputationKind, InstrId, Module, Opcode, raw};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct WrongMeshMapping;

const META: DetectorMeta = DetectorMeta {
    id: "wrong_mesh_mapping",
    title: "Collectives run over the wrong mesh axis",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Collectives of the main program mapped onto the wrong mesh axis, from the decoded replica groups \
                  (explicit lists, iota lists and mesh axes) and source-target pairs, taking device ids in mesh \
                  order (the last mesh axis has consecutive ids and the fastest links): (1) an idle inner axis: no \
                  collective group or permute pair joins two devices of the same block of b consecutive ids, while \
                  collectives run over strided groups (e.g. `{{0,2,4,6},{1,3,5,7}}` on a 4x2 mesh) and no entry \
                  parameter is partitioned along that block (their `sharding`s replicate it), so the b devices of \
                  each block compute the same thing and all traffic uses the slow axis; (2) a chain of dependent \
                  collective-permutes whose pairs join devices that are not neighbours on the inner axis; (3) on \
                  device timelines, a collective over strided groups that takes a multiple of the time per byte of \
                  the same collective over contiguous groups (its single-hop time).",
        why: "The minor mesh axis is laid out on the fastest interconnect (neighbouring chips, or the cores of one \
              chip). A tensor-parallel axis mapped to the outer axis sends every activation or weight exchange \
              over multi-hop or slower links, and an axis that carries no collective is usually an axis whose \
              devices hold replicas of the same work: the model runs b times over without getting faster. A ring \
              of permutes over strided devices pays several hops per step of the ring.",
        evidence: "The mesh (from mesh-axes groups when the program has them, else inferred from the groups), the \
                   idle inner block size, the collectives by group pattern with their counts and bytes per step, the \
                   entry parameters and how many are replicated along the inner block, the longest permute chain \
                   with its pairs, time per byte of strided and contiguous classes, and the collectives as HLO \
                   instructions with their JAX source lines. Impact: the measured time per step (per core) of the \
                   collectives on the slow axis or of the permute chain (the time at stake, an upper bound of the \
                   gain), or the excess time of the slow class over the single-hop rate.",
        thresholds: "A chain must have at least `wrong_mesh_mapping.min_permute_chain` (default 4) dependent \
                     collective-permutes. A strided class is slow when its time per byte is at least \
                     `wrong_mesh_mapping.min_hop_multiple` (default 2) times the contiguous class's. The idle-axis \
                     pattern needs at least 4 devices and an inner block of at least 2. Severity P1; P0 when the \
                     impact is at least 20 % of the step, P2 under 2 %.",
        fix: "Map the parallelism that communicates most to the inner (fastest) mesh axis: shard weights along that \
              axis for tensor parallelism and keep data/FSDP parallelism on the outer axis; shard the batch over \
              both axes when an axis would otherwise hold replicas; or reorder the mesh axes so the heavy \
              collectives run over neighbouring devices. Replace chains of point-to-point transfers over strided \
              devices by one collective (all-gather, reduce-scatter) or a ring over the inner axis.",
        fix_lines: FixLines {
            jax: "in `jax.make_mesh((4, 2), ('data', 'model'))` the last axis ('model') is the fast one, so shard \
                  weights `P(None, 'model')`/`P('model', None)` for tensor parallelism, the batch `P(('data', \
                  'model'))` where an axis would hold replicas, or build the mesh with \
                  `mesh_utils.create_device_mesh`; replace `ppermute` chains by `all_gather`/`psum_scatter`.",
            tensorflow: "with DTensor the last dimension of `dtensor.create_mesh` is the inner one: put the model \
                         dimension there.",
            pytorch_xla: "with SPMD the last axis of `xs.Mesh(device_ids, mesh_shape, axis_names)` is the inner one: \
                          put the model axis there.",
        },
    },
};

/// Most devices the mesh analysis considers (ids beyond this are treated as odd data).
const MAX_DEVICES: i64 = 1 << 16;

/// The devices a collective communicates with: its groups, or its permute pairs as 2-groups.
fn groups_of(c: &Collective) -> Vec<Vec<i64>> {
    if c.source_target_pairs.is_empty() {
        c.replica_groups.clone()
    } else {
        c.source_target_pairs.iter().map(|&(s, t)| vec![s, t]).collect()
    }
}

/// Number of devices the collectives name (largest id + 1).
fn device_count(collectives: &[&Collective]) -> i64 {
    collectives.iter().flat_map(|c| groups_of(c)).flatten().max().map_or(0, |m| m + 1)
}

/// True when some group (or pair) joins two distinct devices of one block of `b` consecutive ids.
fn crosses_block(c: &Collective, b: i64) -> bool {
    if c.source_target_pairs.is_empty() && c.replica_groups.is_empty() {
        // No groups: the collective spans every device.
        return true;
    }
    groups_of(c).iter().any(|g| {
        let mut ids = g.clone();
        ids.sort_unstable();
        ids.dedup();
        let mut blocks: Vec<i64> = ids.iter().map(|d| d.div_euclid(b)).collect();
        blocks.dedup();
        blocks.len() < ids.len()
    })
}

/// True when some group's members are not consecutive ids (it skips devices of the inner axis).
fn is_strided(c: &Collective) -> bool {
    c.replica_groups.iter().any(|g| {
        let mut g = g.clone();
        g.sort_unstable();
        g.windows(2).any(|w| w[1] - w[0] > 1)
    })
}

/// The largest block of consecutive device ids (a divisor of `n`, 2 ≤ b < n) that no collective
/// joins two devices of.
fn idle_inner_block(collectives: &[&Collective], n: i64) -> Option<i64> {
    (2..n).filter(|b| n % b == 0).filter(|&b| !collectives.iter().any(|c| crosses_block(c, b))).max()
}

/// Whether an entry parameter is split along blocks of `b` consecutive devices: `Some(true)` when
/// two devices of one block hold different parts, `Some(false)` when every block holds one part,
/// `None` without a readable sharding.
fn partitioned_along(sharding: Option<&raw::OpSharding>, b: i64) -> Option<bool> {
    let s = sharding?;
    if s.r#type == 2 {
        // TUPLE: partitioned when any element is.
        let parts: Vec<Option<bool>> = s.tuple_shardings.iter().map(|t| partitioned_along(Some(t), b)).collect();
        if parts.contains(&Some(true)) {
            return Some(true);
        }
        return parts.iter().all(Option::is_some).then_some(false);
    }
    let coords = xlens_hlo::sharding::device_tiles(s)?;
    let mut by_block: BTreeMap<i64, &Vec<i64>> = BTreeMap::new();
    for (device, key) in &coords {
        match by_block.get(&device.div_euclid(b)) {
            Some(k) if *k != key => return Some(true),
            Some(_) => {}
            None => {
                by_block.insert(device.div_euclid(b), key);
            }
        }
    }
    Some(false)
}

/// Bytes a collective moves per device (its result, or its operands for a reduce-scatter).
fn collective_bytes(module: &Module, c: &Collective) -> u64 {
    let instr = module.instruction(c.instruction);
    match c.opcode {
        Opcode::ReduceScatter => {
            instr.operands().iter().fold(0u64, |a, &o| a.saturating_add(module.instruction(o).shape().logical_bytes()))
        }
        _ => instr.shape().logical_bytes(),
    }
}

/// Per-op self time in ms per step and core, by instruction name.
fn op_ms_per_step(host: &HostProfile, module: &Module) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if let (Ok(profile), Ok(steps), Some(pid)) = (host.op_profile(), host.steps(), module.program_id()) {
        let scale = f64::from(profile.cores.max(1)) * steps.steps.len().max(1) as f64;
        for op in profile.ops.iter().filter(|o| o.program_id == pid) {
            *out.entry(op.name.clone()).or_insert(0.0) += op.self_time.as_ms_f64() / scale;
        }
    }
    out
}

/// The instruction whose events time a collective: the async-start wrapping it, else itself.
fn timed_name(module: &Module, id: InstrId) -> &str {
    let comp = module.computation(module.instruction(id).computation());
    match comp.callers().first() {
        Some(&caller) if comp.kind() == ComputationKind::Async => module.instruction(caller).name(),
        _ => module.instruction(id).name(),
    }
}

/// A parameter's sharding; `None` when it has none, or when the part of its proto the model
/// reads on demand does not decode (then no sharding tells).
fn sharding(p: &xlens_hlo::Instruction) -> Option<&xlens_hlo::raw::OpSharding> {
    p.raw().ok()?.sharding.as_deref()
}

/// The mesh as named axes, when some collective uses mesh-axes groups (field 93).
fn named_mesh(module: &Module, collectives: &[&Collective]) -> Option<Vec<(String, i64)>> {
    // A collective's proto always decodes: the module's build read its groups from it.
    collectives.iter().find_map(|c| match &module.instruction(c.instruction).raw().ok()?.replica_group_list {
        Some(ReplicaGroupList::MeshAxesReplicaGroupList(m)) => {
            m.mesh.as_ref().map(|mesh| mesh.axes.iter().map(|a| (a.name.clone(), a.size)).collect())
        }
        _ => None,
    })
}

/// The longest chain of collective-permutes in which each depends on the previous one through
/// non-collective instructions of the same computation.
fn longest_permute_chain(module: &Module, collectives: &[&Collective]) -> Vec<InstrId> {
    let permutes: Vec<InstrId> = collectives
        .iter()
        .filter(|c| matches!(c.opcode, Opcode::CollectivePermute | Opcode::CollectivePermuteStart))
        .map(|c| c.instruction)
        .collect();
    if permutes.len() < 2 {
        return permutes.into_iter().take(1).collect();
    }
    let permute_set: std::collections::BTreeSet<InstrId> = permutes.iter().copied().collect();
    let is_permute = |id: InstrId| permute_set.contains(&id);
    // Nearest permute ancestors of each permute (bounded walk).
    let mut parents: BTreeMap<InstrId, Vec<InstrId>> = BTreeMap::new();
    for &p in &permutes {
        let mut stack: Vec<InstrId> = module.instruction(p).operands().to_vec();
        let mut seen = std::collections::BTreeSet::new();
        let mut found = Vec::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) || seen.len() > 4096 {
                continue;
            }
            let instr = module.instruction(id);
            if is_permute(id) {
                found.push(id);
            } else if !instr.opcode().is_collective() {
                // Through computation and `-done` halves (not collectives themselves).
                stack.extend(instr.operands());
            }
        }
        found.sort_unstable();
        parents.insert(p, found);
    }
    // Longest path, permutes in topological order of their computations.
    let order: Vec<InstrId> = module.topological_order().filter(|id| is_permute(*id)).collect();
    let mut best: BTreeMap<InstrId, Vec<InstrId>> = BTreeMap::new();
    for id in order {
        let mut chain = parents
            .get(&id)
            .into_iter()
            .flatten()
            .filter_map(|p| best.get(p))
            .max_by_key(|c| c.len())
            .cloned()
            .unwrap_or_default();
        chain.push(id);
        best.insert(id, chain);
    }
    best.into_values().max_by_key(|c| c.len()).unwrap_or_default()
}

/// Collective opcode spelling for messages (`all-gather`, ...), async starts folded in.
fn family(op: Opcode) -> &'static str {
    match op {
        Opcode::AllGather | Opcode::AllGatherStart => "all-gather",
        Opcode::AllReduce | Opcode::AllReduceStart => "all-reduce",
        Opcode::CollectivePermute | Opcode::CollectivePermuteStart => "collective-permute",
        other => other.as_str(),
    }
}

fn severity_for(impact: &Impact, default: Severity) -> Severity {
    // Untimed collectives keep the default: their share is unknown, not small.
    if impact.ms_per_step > 0.0 { Severity::from_impact(impact.pct_of_step, default) } else { default }
}

/// An inner block of consecutive devices that no collective joins, whose devices hold the same
/// inputs (pattern 1).
struct InnerBlock {
    /// Devices the collectives name.
    devices: i64,
    /// Devices per block.
    size: i64,
    /// Entry parameters replicated along the blocks.
    replicated: usize,
    /// Entry parameters.
    params: usize,
}

impl InnerBlock {
    /// The block, when no entry parameter is split along it and some are replicated along it.
    fn find(module: &Module, collectives: &[&Collective]) -> Option<InnerBlock> {
        let n = device_count(collectives);
        if !(4..=MAX_DEVICES).contains(&n) {
            return None;
        }
        let b = idle_inner_block(collectives, n)?;
        if !collectives.iter().any(|c| c.group_size() > 1 || !c.source_target_pairs.is_empty()) {
            return None;
        }
        let params = module.entry_parameters();
        let verdicts: Vec<Option<bool>> = params.iter().map(|p| partitioned_along(sharding(p), b)).collect();
        let split = verdicts.iter().filter(|v| **v == Some(true)).count();
        let replicated = verdicts.iter().filter(|v| **v == Some(false)).count();
        // The inner axis splits some input without communicating (independent work, not
        // replicas), or no sharding tells.
        (split == 0 && replicated > 0).then_some(InnerBlock { devices: n, size: b, replicated, params: params.len() })
    }
}

/// Collectives by family and groups: their count, bytes per step and device, and ms per step.
fn collective_patterns(
    module: &Module,
    collectives: &[&Collective],
    times: &BTreeMap<String, f64>,
) -> BTreeMap<(String, String), (usize, u64, f64)> {
    let mut by_pattern: BTreeMap<(String, String), (usize, u64, f64)> = BTreeMap::new();
    for c in collectives {
        let e = by_pattern
            .entry((
                family(c.opcode).to_owned(),
                if c.source_target_pairs.is_empty() { c.groups_text() } else { c.pairs_text() },
            ))
            .or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(collective_bytes(module, c));
        e.2 += times.get(timed_name(module, c.instruction)).copied().unwrap_or(0.0);
    }
    by_pattern
}

/// The entry parameter that shows the replication best (tiled over the outer axis but the same
/// along the blocks of `b`), with its sharding.
fn replicated_parameter(module: &Module, b: i64) -> Vec<Evidence> {
    let params = module.entry_parameters();
    let replicated_params: Vec<&&xlens_hlo::Instruction> =
        params.iter().filter(|p| partitioned_along(sharding(p), b) == Some(false)).collect();
    let shown =
        replicated_params.iter().find(|p| sharding(p).is_some_and(|s| s.r#type == 3)).or(replicated_params.first());
    let mut evidence = Vec::new();
    if let Some(p) = shown {
        if let Some(s) = sharding(p).filter(|s| s.r#type == 3) {
            evidence.push(Evidence::note(format!(
                "{} ({}) is tiled {:?} over the devices{}: every block of {b} holds the same tile",
                p.name(),
                p.op_name(),
                s.tile_assignment_dimensions,
                if s.replicate_on_last_tile_dim { " with the last tile dimension replicated" } else { "" }
            )));
        }
        evidence.push(evidence::instruction(module, p.id()));
    }
    evidence
}

impl WrongMeshMapping {
    /// A finding of one pattern (`variant`: findings of several hosts merge per pattern).
    fn finding(&self, variant: &str, what: String, evidence: Vec<Evidence>, impact: Impact) -> Finding {
        Finding::new(self, severity_for(&impact, META.severity), what, evidence, impact).with_variant(variant)
    }

    /// Pattern 1: the inner axis carries no collective and holds replicas.
    fn idle_inner_axis(
        &self,
        (step_ms, tb): (Option<f64>, TimeBase),
        module: &Module,
        collectives: &[&Collective],
        times: &BTreeMap<String, f64>,
        out: &mut Vec<Finding>,
    ) {
        let Some(block) = InnerBlock::find(module, collectives) else { return };
        let by_pattern = collective_patterns(module, collectives, times);
        let ms: f64 = by_pattern.values().map(|v| v.2).sum();
        let bytes: u64 = by_pattern.values().fold(0u64, |a, v| a.saturating_add(v.1));
        let impact = Impact::of(ms, step_ms);
        let (n, b) = (block.devices, block.size);
        let mut evidence = vec![
            Evidence::metric("devices", "devices", n as f64, "count"),
            Evidence::metric("inner_block_devices", "inner block without collectives (devices)", b as f64, "count"),
            Evidence::metric(
                "outer_axis_collectives",
                "collectives, all over the outer axis",
                collectives.len() as f64,
                "count",
            ),
            Evidence::metric(
                "collective_bytes_per_device",
                format!("bytes the collectives produce {} and device", tb.per()),
                bytes as f64,
                "bytes",
            ),
            Evidence::metric(
                "replicated_parameters",
                "entry parameters replicated along the inner block",
                block.replicated as f64,
                "count",
            ),
            Evidence::metric("entry_parameters", "entry parameters", block.params as f64, "count"),
        ];
        if ms > 0.0 {
            evidence.push(Evidence::metric(
                "outer_axis_collective_time",
                format!("time of the outer-axis collectives {}", tb.per()),
                ms,
                "ms",
            ));
        }
        if let Some(axes) = &named_mesh(module, collectives) {
            let text: Vec<String> = axes.iter().map(|(a, s)| format!("'{a}'={s}")).collect();
            evidence.push(Evidence::note(format!("mesh from mesh-axes groups: [{}]", text.join(", "))));
        }
        for ((fam, groups), (count, by, t)) in &by_pattern {
            evidence.push(Evidence::note(format!(
                "{count} {fam} over {groups}: {by} bytes {}{}",
                tb.per(),
                if *t > 0.0 { format!(", {t:.3} ms {}", tb.per()) } else { String::new() }
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in collectives {
            if seen.insert(family(c.opcode)) {
                evidence.push(evidence::instruction(module, c.instruction));
            }
        }
        evidence.extend(replicated_parameter(module, b));
        let example = collectives
            .iter()
            .find(|c| c.group_size() > 1 || !c.source_target_pairs.is_empty())
            .map(|c| if c.source_target_pairs.is_empty() { c.groups_text() } else { c.pairs_text() })
            .unwrap_or_default();
        let what = format!(
            "No collective of {} joins two devices of the same block of {b} consecutive devices (the inner, fastest \
             mesh axis): all {} collectives run across the blocks, over the outer, slower axis (e.g. {example}), \
             and {} of {} entry parameters are replicated along the blocks, so the {b} devices of each block \
             compute the same thing.",
            module.display_name(),
            collectives.len(),
            block.replicated,
            block.params,
        );
        out.push(self.finding("idle_inner_axis", what, evidence, impact));
    }

    /// Pattern 2: a chain of dependent collective-permutes over non-neighbour devices.
    fn permute_chain(
        &self,
        (step_ms, tb): (Option<f64>, TimeBase),
        module: &Module,
        collectives: &[&Collective],
        times: &BTreeMap<String, f64>,
        min_chain: usize,
        out: &mut Vec<Finding>,
    ) {
        let chain = longest_permute_chain(module, collectives);
        if chain.len() < min_chain.max(2) {
            return;
        }
        let pairs_of = |id: InstrId| {
            collectives.iter().find(|c| c.instruction == id).map(|c| c.source_target_pairs.clone()).unwrap_or_default()
        };
        // Pairs that join neighbours of the inner axis (ids one apart) are single hops.
        let far = chain.iter().filter(|&&id| pairs_of(id).iter().any(|(s, t)| (s - t).abs() > 1)).count();
        if 2 * far < chain.len() {
            return;
        }
        let ms: f64 = chain.iter().map(|&id| times.get(timed_name(module, id)).copied().unwrap_or(0.0)).sum();
        let impact = Impact::of(ms, step_ms);
        let mut evidence = vec![
            Evidence::metric("chain_permutes", "collective-permutes in the chain", chain.len() as f64, "count"),
            Evidence::metric("far_permutes", "permutes between non-neighbour devices", far as f64, "count"),
        ];
        if ms > 0.0 {
            evidence.push(Evidence::metric("permute_chain_time", format!("time of the chain {}", tb.per()), ms, "ms"));
        }
        evidence.extend(chain.iter().take(8).map(|&id| evidence::instruction(module, id)));
        let what = format!(
            "{} runs a chain of {} dependent collective-permutes, {far} of them between devices that are not \
             neighbours on the inner mesh axis: {} of the ring crosses several hops or the slow axis.",
            module.display_name(),
            chain.len(),
            tb.every(),
        );
        out.push(self.finding("permute_chain", what, evidence, impact));
    }

    /// Pattern 3 (device timelines): a strided class much slower per byte than a contiguous one.
    fn slow_strided_class(
        &self,
        (step_ms, tb): (Option<f64>, TimeBase),
        module: &Module,
        collectives: &[&Collective],
        times: &BTreeMap<String, f64>,
        min_multiple: f64,
        out: &mut Vec<Finding>,
    ) {
        // (family, strided?) → (ms per step, bytes per step, example instruction).
        let mut classes: BTreeMap<(&'static str, bool), (f64, u64, Vec<InstrId>)> = BTreeMap::new();
        for c in collectives.iter().filter(|c| c.source_target_pairs.is_empty() && c.group_size() > 1) {
            let Some(&t) = times.get(timed_name(module, c.instruction)) else { continue };
            let strided = is_strided(c);
            let e = classes.entry((family(c.opcode), strided)).or_default();
            e.0 += t;
            e.1 = e.1.saturating_add(collective_bytes(module, c));
            e.2.push(c.instruction);
        }
        for (&(fam, strided), (ms, bytes, ids)) in &classes {
            if !strided || *bytes == 0 || *ms <= 0.0 {
                continue;
            }
            let Some((fast_ms, fast_bytes, fast_ids)) = classes.get(&(fam, false)) else { continue };
            if *fast_bytes == 0 || *fast_ms <= 0.0 {
                continue;
            }
            let slow = ms / *bytes as f64;
            let fast = fast_ms / *fast_bytes as f64;
            let multiple = slow / fast;
            if multiple < min_multiple {
                continue;
            }
            let excess = ms - fast * *bytes as f64;
            let impact = Impact::of(excess, step_ms);
            let mut evidence = vec![
                Evidence::metric(
                    "strided_time_per_mib",
                    "time per MiB, strided groups",
                    slow * (1u64 << 20) as f64,
                    "ms",
                ),
                Evidence::metric(
                    "contiguous_time_per_mib",
                    "time per MiB, contiguous groups",
                    fast * (1u64 << 20) as f64,
                    "ms",
                ),
                Evidence::metric("single_hop_multiple", "multiple of the single-hop time", multiple, "x"),
                Evidence::metric("strided_collectives", "strided collectives", ids.len() as f64, "count"),
                Evidence::metric(
                    "strided_collective_time",
                    format!("time of the strided collectives {}", tb.per()),
                    *ms,
                    "ms",
                ),
            ];
            evidence.extend(ids.iter().take(3).map(|&id| evidence::instruction(module, id)));
            evidence.extend(fast_ids.iter().take(1).map(|&id| evidence::instruction(module, id)));
            let what = format!(
                "{fam} over strided device groups in {} takes {multiple:.1}x the time per byte of {fam} over \
                 contiguous groups: it crosses the slow mesh axis or several hops ({excess:.2} ms {} above \
                 the single-hop rate).",
                module.display_name(),
                tb.per(),
            );
            out.push(self.finding(&format!("slow_strided_class:{fam}"), what, evidence, impact));
        }
    }
}

impl Detector for WrongMeshMapping {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let t = &config.thresholds.wrong_mesh_mapping;
        let module = host.main_module().ok_or_else(|| Skip::because("the profile carries no HLO module"))?;
        let collectives: Vec<&Collective> = module
            .collectives()
            .iter()
            .filter(|c| {
                module.computation(module.instruction(c.instruction).computation()).kind()
                    != ComputationKind::Unreachable
            })
            .filter(|c| c.encoding != xlens_hlo::GroupEncoding::Invalid)
            .collect();
        if collectives.is_empty() {
            return Ok(());
        }
        let times = op_ms_per_step(host, module);
        let base = (host.step_ms(), TimeBase::of(host));
        let mut found = Vec::new();
        self.idle_inner_axis(base, module, &collectives, &times, &mut found);
        self.permute_chain(base, module, &collectives, &times, t.min_permute_chain, &mut found);
        if host.device_kind() != xlens_xplane::DeviceKind::Cpu {
            self.slow_strided_class(base, module, &collectives, &times, t.min_hop_multiple, &mut found);
        }
        for f in found {
            out.push(f);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;
    use xlens_hlo::testing::{HloBuilder, shape};
    use xlens_hlo::{Module, PrimitiveType, raw};

    use super::*;
    use crate::finding::Finding;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_collectives_on_the_outer_axis_with_a_replicated_inner_axis() {
        let findings = run_on("wrong_mesh_mapping", &testdata("real/sharded_collectives"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Mesh 4x2 ('data', 'model'): every all-gather, reduce-scatter and all-reduce uses
        // {{0,2,4,6},{1,3,5,7}}; the 'model' pairs {0,1},{2,3},... never communicate.
        assert_eq!(metric(f, "devices"), 8.0);
        assert_eq!(metric(f, "inner block without collectives (devices)"), 2.0);
        assert_eq!(metric(f, "collectives, all over the outer axis"), 20.0);
        // All 9 entry parameters (bias, 6 weight shards, x, y) are replicated over 'model'
        // (`devices=[4,1,2]<=[8] last_tile_dim_replicate`, or replicated).
        assert_eq!(metric(f, "entry parameters replicated along the inner block"), 9.0);
        assert!(f.what.contains("(e.g. {{0,2,4,6},{1,3,5,7}})"), "{}", f.what);
        assert!(f.what.contains("9 of 9 entry parameters are replicated"), "{}", f.what);
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(text.iter().any(|t| t.starts_with("12 all-gather over {{0,2,4,6},{1,3,5,7}}")), "{text:#?}");
        assert!(text.iter().any(|t| t.starts_with("6 reduce-scatter over {{0,2,4,6},{1,3,5,7}}")), "{text:#?}");
        assert!(
            text.iter().any(|t| t.starts_with(
                "param.10 (ps['layers'][0]['w1']) is tiled [4, 1, 2] over the devices with \
                 the last tile dimension replicated"
            )),
            "{text:#?}"
        );
        assert!(f.impact.ms_per_step > 0.0, "{:?}", f.impact);
    }

    #[test]
    fn good_mappings_are_clean() {
        // The baseline runs its tensor-parallel collectives over 'model' ({{0,1},...}); the FSDP
        // program gathers over 'data' but shards the batch over both axes and all-reduces over
        // 'model' and over all 8 devices.
        for dir in ["corpus/sharded_collectives_baseline", "real/sharded_donation", "corpus/clean"] {
            assert!(run_on("wrong_mesh_mapping", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    #[test]
    fn reads_tiled_shardings() {
        // devices=[4,1,2]<=[8] last_tile_dim_replicate: replicated over pairs {0,1},{2,3},...
        let s = raw::OpSharding {
            r#type: 3,
            tile_assignment_dimensions: vec![4, 1, 2],
            iota_reshape_dims: vec![8],
            replicate_on_last_tile_dim: true,
            ..Default::default()
        };
        assert_eq!(partitioned_along(Some(&s), 2), Some(false));
        assert_eq!(partitioned_along(Some(&s), 4), Some(true));
        // devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate: split over 'model' (ids one apart).
        let s = raw::OpSharding {
            r#type: 3,
            tile_assignment_dimensions: vec![1, 2, 4],
            iota_reshape_dims: vec![4, 2],
            iota_transpose_perm: vec![1, 0],
            replicate_on_last_tile_dim: true,
            ..Default::default()
        };
        assert_eq!(partitioned_along(Some(&s), 2), Some(true));
        // devices=[8,1]<=[8]: every device its own part.
        let s = raw::OpSharding { r#type: 3, tile_assignment_dimensions: vec![8, 1], ..Default::default() };
        assert_eq!(partitioned_along(Some(&s), 2), Some(true));
        let replicated = raw::OpSharding::default();
        assert_eq!(partitioned_along(Some(&replicated), 2), Some(false));
        assert_eq!(partitioned_along(None, 2), None);
    }

    /// A ring of `n` dependent collective-permutes with the given pairs.
    fn permute_ring(n: usize, pairs: &[(i64, i64)]) -> Module {
        let mut b = HloBuilder::new("jit_ring");
        let mut main = b.computation("main");
        let f = shape(PrimitiveType::F32, &[128, 128]);
        let mut x = main.param("x", 0, f.clone());
        for k in 0..n {
            let p = main.op(&format!("collective-permute.{k}"), "collective-permute", f.clone(), &[x]);
            main.edit(p, |i| {
                i.source_target_pairs =
                    pairs.iter().map(|&(source, target)| raw::SourceTarget { source, target }).collect();
                i.channel_id = k as i64 + 1;
            });
            x = main.op(&format!("add.{k}"), "add", f.clone(), &[p, x]);
        }
        main.finish(x);
        Module::from_proto(b.finish("main"), 0).unwrap()
    }

    #[test]
    fn measures_permute_chains() {
        let strided = [(0, 2), (2, 4), (4, 6), (6, 0), (1, 3), (3, 5), (5, 7), (7, 1)];
        let m = permute_ring(5, &strided);
        let all: Vec<&Collective> = m.collectives().iter().collect();
        let chain = longest_permute_chain(&m, &all);
        let names: Vec<&str> = chain.iter().map(|&id| m.instruction(id).name()).collect();
        assert_eq!(
            names,
            [
                "collective-permute.0",
                "collective-permute.1",
                "collective-permute.2",
                "collective-permute.3",
                "collective-permute.4"
            ]
        );
        // The inner axis ({0,1},...) is idle in this module, but it has no shardings: only the
        // chain pattern needs the permutes.
        assert_eq!(idle_inner_block(&all, device_count(&all)), Some(2));
        let neighbours = [(0, 1), (1, 0), (2, 3), (3, 2)];
        let m = permute_ring(5, &neighbours);
        let all: Vec<&Collective> = m.collectives().iter().collect();
        assert_eq!(longest_permute_chain(&m, &all).len(), 5);
        assert_eq!(idle_inner_block(&all, device_count(&all)), None);
    }

    fn findings_of(m: &Module, step_ms: f64, times: &[(&str, f64)]) -> Vec<Finding> {
        let all: Vec<&Collective> = m.collectives().iter().collect();
        let times: BTreeMap<String, f64> = times.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect();
        let mut out = Vec::new();
        let d = WrongMeshMapping;
        d.idle_inner_axis((Some(step_ms), TimeBase::STEP), m, &all, &times, &mut out);
        d.permute_chain((Some(step_ms), TimeBase::STEP), m, &all, &times, 4, &mut out);
        out
    }

    #[test]
    fn reports_a_strided_permute_ring() {
        let strided = [(0, 2), (2, 4), (4, 6), (6, 0), (1, 3), (3, 5), (5, 7), (7, 1)];
        let times = [("collective-permute.0", 0.5), ("collective-permute.1", 0.5), ("collective-permute.4", 0.5)];
        let f = findings_of(&permute_ring(5, &strided), 10.0, &times);
        // Only the chain: without shardings nothing says the inner axis holds replicas.
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(metric(&f[0], "collective-permutes in the chain"), 5.0);
        assert_eq!(metric(&f[0], "permutes between non-neighbour devices"), 5.0);
        assert!((f[0].impact.ms_per_step - 1.5).abs() < 1e-9 && (f[0].impact.pct_of_step - 15.0).abs() < 1e-9);
        assert!(f[0].what.contains("chain of 5 dependent collective-permutes"), "{}", f[0].what);
        // Three permutes are below the default chain length; a ring between neighbours is fine.
        assert!(findings_of(&permute_ring(3, &strided), 10.0, &[]).is_empty());
        assert!(findings_of(&permute_ring(5, &[(0, 1), (1, 0), (2, 3), (3, 2)]), 10.0, &[]).is_empty());
    }

    /// A TPU-shaped profile (xlens_testkit::synth) that runs the HLO of the sharded baseline, with
    /// op events named after its all-reduces: the five over 'model' groups ({{0,1},...}) move 16 KiB
    /// to 96 KiB each, the gradient all-reduce over 'data' ({{0,2,4,6},{1,3,5,7}}) 1.5 MiB;
    /// `slow` scales the time per byte of the strided one.
    fn tpu_profile_with_strided_all_reduce(slow: f64) -> crate::profile::Profile {
        use xlens_testkit::synth::{Item, OpSpec, Program, SynthSpec, tpu_profile};
        let cpu = xlens_testkit::open_session(testdata("corpus/sharded_collectives_baseline")).unwrap();
        let (protos, _) = xlens_hlo::hlo_protos(cpu.hosts()[0].space());
        let proto = protos.iter().find(|p| p.name.starts_with("jit_step")).unwrap().bytes.to_vec();
        // 1 µs per 16 KiB on the inner axis.
        let ps_per_byte = 1_000_000.0 / 16_384.0;
        let op = |name: &str, bytes: f64, factor: f64| {
            Item::Op(OpSpec::new(name, "all-reduce", "all-reduce", 0, 0, (bytes * ps_per_byte * factor) as i64))
        };
        let mut items =
            vec![Item::Op(OpSpec::new("ynn_fusion.9", "fusion", "convolution fusion", 1 << 30, 1 << 22, 400_000_000))];
        for name in ["all-reduce", "all-reduce.1", "all-reduce.2", "all-reduce.3"] {
            items.push(op(name, 16_384.0, 1.0));
        }
        items.push(op("all-reduce.13", 16_388.0, 1.0));
        items.push(op("all-reduce.14", 6.0 * 262_144.0 + 4.0, slow));
        let spec = SynthSpec {
            cores: 2,
            steps: 4,
            program: Program { items },
            jitter: 0.0,
            module_name: "jit_step".to_owned(),
            program_id: 0,
            hlo_proto: Some(proto),
            ..SynthSpec::default()
        };
        let space = xlens_xplane::Space::parse(tpu_profile(&spec).into()).unwrap();
        crate::profile::Profile::from_space("tpu-host", space)
    }

    #[test]
    fn finds_a_strided_all_reduce_that_takes_several_hops_on_tpu() {
        let profile = tpu_profile_with_strided_all_reduce(3.0);
        let report = crate::scan::scan(&profile, &ScanConfig::only("wrong_mesh_mapping"));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
        let f = &report.findings[0];
        let multiple = metric(f, "multiple of the single-hop time");
        assert!((2.9..3.1).contains(&multiple), "{multiple}");
        assert_eq!(metric(f, "strided collectives"), 1.0);
        assert!(f.what.starts_with("all-reduce over strided device groups in jit_step(0)"), "{}", f.what);
        // all-reduce.14 over {{0,2,4,6},{1,3,5,7}} against the 'model' all-reduces.
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Instruction { name, text, .. }
                if name == "all-reduce.14" && text.contains("{{0,2,4,6},{1,3,5,7}}"))),
            "{f:#?}"
        );
        // Excess: 2/3 of the strided all-reduce's ~288 µs.
        assert!((0.15..0.25).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        // At the same rate per byte the mapping is fine.
        let profile = tpu_profile_with_strided_all_reduce(1.0);
        assert!(crate::scan::scan(&profile, &ScanConfig::only("wrong_mesh_mapping")).findings.is_empty());
    }
}
