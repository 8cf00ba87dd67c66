//! Collectives: replica groups (from any of XLA's three encodings), source-target pairs and
//! channel ids.

use crate::error::Location;
use crate::ids::InstrId;
use crate::limits::{self, Limit};
use crate::opcode::Opcode;
use crate::raw;
use crate::raw::hlo_instruction_proto::ReplicaGroupList;

/// How a collective's replica groups were encoded in the proto.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GroupEncoding {
    /// Explicit lists: `replica_groups` (field 49) or `collective_device_list` (field 87).
    List,
    /// An iota device list reshaped and transposed (field 92, or inside field 87).
    Iota,
    /// Mesh axes (field 93), as XLA prints `mesh['a'=4,'b'=2] {'a'}`.
    MeshAxes,
    /// No groups: the collective spans all devices (or is a collective-permute).
    None,
    /// The encoding could not be expanded (inconsistent sizes); see the module's warnings.
    Invalid,
}

impl GroupEncoding {
    /// A short name (`"list"`, `"iota"`, `"mesh_axes"`, `"none"`, `"invalid"`).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupEncoding::List => "list",
            GroupEncoding::Iota => "iota",
            GroupEncoding::MeshAxes => "mesh_axes",
            GroupEncoding::None => "none",
            GroupEncoding::Invalid => "invalid",
        }
    }
}

/// A collective instruction with its communication pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collective {
    /// The instruction (a synchronous collective or an async `-start`).
    pub instruction: InstrId,
    /// Its opcode.
    pub opcode: Opcode,
    /// The channel id, when positive.
    pub channel_id: Option<i64>,
    /// Whether group members are global device ids (`use_global_device_ids`).
    pub use_global_device_ids: bool,
    /// The replica groups, expanded to device (or replica/partition) ids.
    pub replica_groups: Vec<Vec<i64>>,
    /// How the groups were encoded.
    pub encoding: GroupEncoding,
    /// `(source, target)` pairs of a collective-permute.
    pub source_target_pairs: Vec<(i64, i64)>,
}

impl Collective {
    /// Devices per group (the largest group; 0 without groups).
    pub fn group_size(&self) -> usize {
        self.replica_groups.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// The groups as XLA prints them: `{{0,2,4,6},{1,3,5,7}}`.
    pub fn groups_text(&self) -> String {
        let groups: Vec<String> = self
            .replica_groups
            .iter()
            .map(|g| format!("{{{}}}", g.iter().map(i64::to_string).collect::<Vec<_>>().join(",")))
            .collect();
        format!("{{{}}}", groups.join(","))
    }

    /// Source-target pairs as XLA prints them: `{{0,2},{2,4}}` (`{}` when there are none).
    pub fn pairs_text(&self) -> String {
        let pairs: Vec<String> = self.source_target_pairs.iter().map(|(a, b)| format!("{{{a},{b}}}")).collect();
        format!("{{{}}}", pairs.join(","))
    }
}

/// Expands an instruction's replica groups from whichever encoding it uses.
pub(crate) fn replica_groups(raw: &raw::HloInstructionProto) -> Result<(Vec<Vec<i64>>, GroupEncoding), String> {
    let list = |groups: &[raw::ReplicaGroup]| -> Result<Vec<Vec<i64>>, String> {
        let total: usize = groups.iter().map(|g| g.replica_ids.len()).sum();
        check(total as u64)?;
        Ok(groups.iter().map(|g| g.replica_ids.clone()).collect())
    };
    match &raw.replica_group_list {
        Some(ReplicaGroupList::CollectiveDeviceList(cdl)) => {
            if !cdl.replica_groups.is_empty() {
                return Ok((list(&cdl.replica_groups)?, GroupEncoding::List));
            }
            if let Some(iota) = &cdl.iota_replica_group_list {
                return Ok((expand_iota(iota)?, GroupEncoding::Iota));
            }
        }
        Some(ReplicaGroupList::IotaCollectiveDeviceList(iota)) => return Ok((expand_iota(iota)?, GroupEncoding::Iota)),
        Some(ReplicaGroupList::MeshAxesReplicaGroupList(mesh)) => {
            return Ok((expand_mesh_axes(mesh)?, GroupEncoding::MeshAxes));
        }
        None => {}
    }
    if !raw.replica_groups.is_empty() {
        return Ok((list(&raw.replica_groups)?, GroupEncoding::List));
    }
    Ok((Vec::new(), GroupEncoding::None))
}

fn check(devices: u64) -> Result<(), String> {
    limits::check(Limit::ReplicaGroupDevices, devices, Location::default).map_err(|e| e.to_string())
}

fn to_u64(v: i64, what: &str) -> Result<u64, String> {
    u64::try_from(v).map_err(|_| format!("negative {what} {v}"))
}

/// `iota(n).reshape(dims).transpose(perm)`, flattened row-major.
pub(crate) fn iota_transposed(dims: &[u64], perm: &[usize]) -> Vec<i64> {
    let n = dims.iter().product::<u64>() as usize;
    let rank = dims.len();
    // Strides of the source array.
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    let out_dims: Vec<u64> = perm.iter().map(|&p| dims[p]).collect();
    let mut index = vec![0u64; rank];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let src: u64 = (0..rank).map(|k| index[k] * strides[perm[k]]).sum();
        out.push(src as i64);
        for k in (0..rank).rev() {
            index[k] += 1;
            if index[k] < out_dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

fn chunk(values: Vec<i64>, per_group: usize) -> Vec<Vec<i64>> {
    if per_group == 0 {
        return Vec::new();
    }
    values.chunks(per_group).map(<[i64]>::to_vec).collect()
}

pub(crate) fn valid_perm(perm: &[i32], rank: usize) -> Result<Vec<usize>, String> {
    if perm.is_empty() {
        return Ok((0..rank).collect());
    }
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in perm {
        let p = usize::try_from(p).ok().filter(|&p| p < rank && !seen[p]).ok_or("bad transpose permutation")?;
        seen[p] = true;
        out.push(p);
    }
    if out.len() != rank {
        return Err("transpose permutation does not cover the dimensions".into());
    }
    Ok(out)
}

/// Expands an `IotaReplicaGroupListProto`.
fn expand_iota(iota: &raw::IotaReplicaGroupListProto) -> Result<Vec<Vec<i64>>, String> {
    let groups = to_u64(iota.num_replica_groups, "group count")?;
    let per = to_u64(iota.num_devices_per_group, "group size")?;
    let n = groups.checked_mul(per).ok_or("device count overflows")?;
    check(n)?;
    let mut dims =
        iota.iota_reshape_dims.iter().map(|&d| to_u64(d, "reshape dimension")).collect::<Result<Vec<_>, _>>()?;
    if dims.is_empty() {
        dims.push(n);
    }
    if dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) != Some(n) {
        return Err(format!("reshape dims {dims:?} do not hold {n} devices"));
    }
    let perm = valid_perm(&iota.iota_transpose_perm, dims.len())?;
    Ok(chunk(iota_transposed(&dims, &perm), per as usize))
}

/// Expands a `MeshAxesReplicaGroupListProto`: devices that differ only along the listed mesh
/// axes (or sub-axes) form a group, following XLA's `MeshAxesReplicaGroupList`.
fn expand_mesh_axes(m: &raw::MeshAxesReplicaGroupListProto) -> Result<Vec<Vec<i64>>, String> {
    let mesh = m.mesh.as_ref().ok_or("mesh-axes groups without a mesh")?;
    let sizes = mesh.axes.iter().map(|a| to_u64(a.size, "axis size")).collect::<Result<Vec<_>, _>>()?;
    let n = sizes.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or("mesh size overflows")?;
    check(n)?;
    if !mesh.device_ids.is_empty() && mesh.device_ids.len() as u64 != n {
        return Err(format!("mesh of {n} devices lists {} device ids", mesh.device_ids.len()));
    }
    let devices: Vec<i64> = match &mesh.iota_device_ids {
        _ if !mesh.device_ids.is_empty() => mesh.device_ids.clone(),
        // `device_ids=([4,2]T(1,0))`: the mesh's devices in a transposed iota order.
        Some(iota) if !iota.reshape_dims.is_empty() => {
            let dims = iota
                .reshape_dims
                .iter()
                .map(|&d| to_u64(d, "device order dimension"))
                .collect::<Result<Vec<_>, _>>()?;
            if dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) != Some(n) {
                return Err(format!("mesh of {n} devices has a device order of shape {dims:?}"));
            }
            let perm = valid_perm(&iota.transpose_perm, dims.len())?;
            iota_transposed(&dims, &perm)
        }
        _ => (0..n as i64).collect(),
    };
    // Per mesh dimension: how it is reshaped, and which of the new dimensions are grouped.
    let mut per_dim: Vec<Option<(Vec<u64>, Vec<usize>)>> = vec![None; sizes.len()];
    let mut devices_per_group = 1u64;
    for (dim, full) in sizes.iter().enumerate() {
        let refs: Vec<&raw::AxisRefProto> = m.axes.iter().filter(|a| a.mesh_axis_index == dim as i64).collect();
        if refs.is_empty() {
            continue;
        }
        let plan = if refs.len() == 1 && refs[0].sub_axis_info.is_none() {
            devices_per_group = devices_per_group.saturating_mul(*full);
            (vec![*full], vec![0])
        } else {
            let mut subs = Vec::with_capacity(refs.len());
            for (k, r) in refs.iter().enumerate() {
                let s = r.sub_axis_info.as_ref().ok_or("a full axis listed together with its sub-axes")?;
                let (pre, size) = (to_u64(s.pre_size, "sub-axis pre-size")?, to_u64(s.size, "sub-axis size")?);
                if pre == 0 || size == 0 || full % pre.saturating_mul(size) != 0 {
                    return Err(format!("sub-axis ({pre}){size} does not divide axis of size {full}"));
                }
                devices_per_group = devices_per_group.saturating_mul(size);
                subs.push((pre, size, k));
            }
            subs.sort_by_key(|s| s.0);
            let mut reshape = Vec::new();
            let mut grouped = vec![0usize; subs.len()];
            let mut prefix = 1u64;
            for &(pre, size, k) in &subs {
                if pre != prefix {
                    if pre % prefix != 0 {
                        return Err(format!("sub-axes of axis {dim} overlap"));
                    }
                    reshape.push(pre / prefix);
                    prefix = pre;
                }
                grouped[k] = reshape.len();
                reshape.push(size);
                prefix = prefix.saturating_mul(size);
            }
            if prefix != *full {
                if prefix == 0 || full % prefix != 0 {
                    return Err(format!("sub-axes of axis {dim} do not tile it"));
                }
                reshape.push(full / prefix);
            }
            (reshape, grouped)
        };
        per_dim[dim] = Some(plan);
    }
    if m.axes.iter().any(|a| usize::try_from(a.mesh_axis_index).map_or(true, |i| i >= sizes.len())) {
        return Err("axis reference outside the mesh".into());
    }
    let mut reshaped = Vec::new();
    let mut grouped_axes = Vec::new();
    for (dim, plan) in per_dim.into_iter().enumerate() {
        match plan {
            None => reshaped.push(sizes[dim]),
            Some((reshape, grouped)) => {
                let offset = reshaped.len();
                reshaped.extend(reshape);
                grouped_axes.extend(grouped.into_iter().map(|g| g + offset));
            }
        }
    }
    let mut perm: Vec<usize> = (0..reshaped.len()).filter(|d| !grouped_axes.contains(d)).collect();
    perm.extend(&grouped_axes);
    if perm.len() != reshaped.len() || reshaped.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) != Some(n) {
        return Err("mesh axes do not describe a partition of the devices".into());
    }
    let order = iota_transposed(&reshaped, &perm);
    let ids: Vec<i64> = order.into_iter().map(|i| devices[i as usize]).collect();
    Ok(chunk(ids, devices_per_group as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use raw::axis_ref_proto::SubAxis;
    use raw::mesh_proto::MeshAxis;

    fn mesh(axes: &[(&str, i64)], refs: &[(i64, Option<(i64, i64)>)]) -> raw::MeshAxesReplicaGroupListProto {
        raw::MeshAxesReplicaGroupListProto {
            mesh: Some(raw::MeshProto {
                axes: axes.iter().map(|(n, s)| MeshAxis { name: n.to_string(), size: *s }).collect(),
                device_ids: Vec::new(),
                iota_device_ids: None,
            }),
            axes: refs
                .iter()
                .map(|&(i, sub)| raw::AxisRefProto {
                    mesh_axis_index: i,
                    sub_axis_info: sub.map(|(pre_size, size)| SubAxis { pre_size, size }),
                })
                .collect(),
        }
    }

    #[test]
    fn iota_lists_expand() {
        let iota = raw::IotaReplicaGroupListProto {
            num_replica_groups: 2,
            num_devices_per_group: 4,
            iota_reshape_dims: vec![4, 2],
            iota_transpose_perm: vec![1, 0],
        };
        assert_eq!(expand_iota(&iota).unwrap(), vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        let plain =
            raw::IotaReplicaGroupListProto { num_replica_groups: 1, num_devices_per_group: 3, ..Default::default() };
        assert_eq!(expand_iota(&plain).unwrap(), vec![vec![0, 1, 2]]);
        let bad = raw::IotaReplicaGroupListProto {
            num_replica_groups: 2,
            num_devices_per_group: 4,
            iota_reshape_dims: vec![3, 2],
            ..Default::default()
        };
        assert!(expand_iota(&bad).is_err());
        let huge = raw::IotaReplicaGroupListProto {
            num_replica_groups: i64::MAX,
            num_devices_per_group: 4,
            ..Default::default()
        };
        assert!(expand_iota(&huge).is_err());
    }

    #[test]
    fn mesh_axes_follow_an_iota_device_order() {
        // mesh['axis_0'=1,'axis_1'=2,'axis_2'=4], device_ids=([4,2]T(1,0)) {'axis_1'}, as in
        // testdata/real/replicated_activations: devices 0,2,4,6,1,3,5,7 in mesh order, so
        // grouping along axis_1 pairs neighbours.
        let mut m = mesh(&[("axis_0", 1), ("axis_1", 2), ("axis_2", 4)], &[(1, None)]);
        m.mesh.as_mut().unwrap().iota_device_ids =
            Some(raw::mesh_proto::IotaDeviceIds { reshape_dims: vec![4, 2], transpose_perm: vec![1, 0] });
        assert_eq!(expand_mesh_axes(&m).unwrap(), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // An order that does not cover the mesh is an error, not a guess.
        m.mesh.as_mut().unwrap().iota_device_ids =
            Some(raw::mesh_proto::IotaDeviceIds { reshape_dims: vec![4, 4], transpose_perm: vec![1, 0] });
        assert!(expand_mesh_axes(&m).is_err());
    }

    #[test]
    fn mesh_axes_expand_like_xla() {
        // mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'}, as in testdata/real/sharded_donation.
        let m = mesh(&[("axis_0", 4), ("axis_1", 1), ("axis_2", 2)], &[(0, None)]);
        assert_eq!(expand_mesh_axes(&m).unwrap(), vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        let m = mesh(&[("a", 4), ("b", 2)], &[(1, None)]);
        assert_eq!(expand_mesh_axes(&m).unwrap(), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // {a:(1)2} on a=8 reshapes 8 → [1, 2, 4] and groups the middle dimension.
        let m = mesh(&[("a", 8)], &[(0, Some((1, 2)))]);
        assert_eq!(expand_mesh_axes(&m).unwrap(), vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
        // {a:(1)2, a:(4)2} reshapes 8 → [2, 2, 2] and groups dimensions 0 and 2.
        let m = mesh(&[("a", 8)], &[(0, Some((1, 2))), (0, Some((4, 2)))]);
        assert_eq!(expand_mesh_axes(&m).unwrap(), vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]);
        let mut explicit = mesh(&[("a", 2), ("b", 2)], &[(0, None)]);
        explicit.mesh.as_mut().unwrap().device_ids = vec![3, 2, 1, 0];
        assert_eq!(expand_mesh_axes(&explicit).unwrap(), vec![vec![3, 1], vec![2, 0]]);
        assert!(expand_mesh_axes(&mesh(&[("a", 4)], &[(3, None)])).is_err());
        assert!(expand_mesh_axes(&mesh(&[("a", 6)], &[(0, Some((1, 4)))])).is_err());
    }
}
