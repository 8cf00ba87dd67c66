//! Shardings: which part of an array each device holds under an `OpSharding` (tiled, with
//! explicit or iota device lists, and replicated subgroups).
//!
//! ```
//! use xlens_hlo::raw::OpSharding;
//! use xlens_hlo::sharding::device_tiles;
//!
//! // Two tiles along dimension 0, devices in iota order `[2,2]T(1,0)`: 0, 2 | 1, 3, the
//! // last tile dimension replicated.
//! let s = OpSharding {
//!     r#type: 3,
//!     tile_assignment_dimensions: vec![2, 2],
//!     iota_reshape_dims: vec![2, 2],
//!     iota_transpose_perm: vec![1, 0],
//!     replicate_on_last_tile_dim: true,
//!     ..OpSharding::default()
//! };
//! let tiles = device_tiles(&s).unwrap();
//! assert_eq!(tiles[&0], vec![0]);
//! assert_eq!(tiles[&2], vec![0]);
//! assert_eq!(tiles[&1], vec![1]);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use crate::collective::{iota_transposed, valid_perm};
use crate::raw;

/// Most devices an iota device list may name here.
const MAX_DEVICES: u64 = 1 << 20;

/// `iota(n).reshape(dims).transpose(perm)` flattened (XLA's iota tile assignment); `None` for
/// negative or too many dimensions, or a permutation that is not one.
fn iota_devices(dims: &[i64], perm: &[i32]) -> Option<Vec<i64>> {
    let dims: Vec<u64> = dims.iter().map(|&d| u64::try_from(d).ok()).collect::<Option<_>>()?;
    let n = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
    if n > MAX_DEVICES {
        return None;
    }
    let perm = valid_perm(perm, dims.len()).ok()?;
    Some(iota_transposed(&dims, &perm))
}

/// What part of the data each device holds under an `OpSharding`: device id → data coordinates.
/// `None` when the sharding cannot be read (or is a tuple, manual or maximal); an empty map for a
/// replicated value. Devices holding the same coordinates hold the same data (replicated
/// subgroup dimensions are left out of the coordinates).
pub fn device_tiles(s: &raw::OpSharding) -> Option<BTreeMap<i64, Vec<i64>>> {
    match s.r#type {
        // REPLICATED.
        0 => Some(BTreeMap::new()),
        // OTHER: tiled.
        3 => {
            let dims = &s.tile_assignment_dimensions;
            let devices = if !s.tile_assignment_devices.is_empty() {
                s.tile_assignment_devices.clone()
            } else if !s.iota_reshape_dims.is_empty() {
                iota_devices(&s.iota_reshape_dims, &s.iota_transpose_perm)?
            } else {
                iota_devices(dims, &[])?
            };
            let n: i64 = dims.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?;
            if dims.is_empty() || n != devices.len() as i64 {
                return None;
            }
            // Trailing subgroup dimensions: replicated ones do not tell data apart.
            let trailing = if s.replicate_on_last_tile_dim { 1 } else { s.last_tile_dims.len() };
            let trailing_types: Vec<i32> =
                if s.replicate_on_last_tile_dim { vec![0] } else { s.last_tile_dims.clone() };
            let data_rank = dims.len().checked_sub(trailing)?;
            let mut out = BTreeMap::new();
            for (flat, &device) in devices.iter().enumerate() {
                let mut rest = flat as i64;
                let mut coords = vec![0i64; dims.len()];
                for k in (0..dims.len()).rev() {
                    coords[k] = rest % dims[k].max(1);
                    rest /= dims[k].max(1);
                }
                let key: Vec<i64> = coords
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k < data_rank || trailing_types.get(k - data_rank).is_some_and(|&t| t != 0))
                    .map(|(_, &c)| c)
                    .collect();
                out.insert(device, key);
            }
            Some(out)
        }
        _ => None,
    }
}

/// An `OpSharding` as XLA's HLO text writes it: `{replicated}`, `{maximal device=3}`,
/// `{manual}`, `{devices=[2,1]0,1}`, `{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}`, a
/// tuple's element shardings as `{a, b}`.
///
/// ```
/// use xlens_hlo::raw::OpSharding;
/// use xlens_hlo::sharding::sharding_text;
/// let tiled = OpSharding {
///     r#type: 3,
///     tile_assignment_dimensions: vec![2, 1],
///     tile_assignment_devices: vec![0, 1],
///     ..OpSharding::default()
/// };
/// assert_eq!(sharding_text(&tiled), "{devices=[2,1]0,1}");
/// assert_eq!(sharding_text(&OpSharding::default()), "{replicated}");
/// ```
pub fn sharding_text(s: &raw::OpSharding) -> String {
    format!("{{{}}}", sharding_body(s, 0))
}

/// Nested tuples deeper than this are written as `...`.
const MAX_TUPLE_DEPTH: usize = 8;

fn sharding_body(s: &raw::OpSharding, depth: usize) -> String {
    let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    match s.r#type {
        0 => "replicated".to_owned(),
        1 => format!("maximal device={}", s.tile_assignment_devices.first().copied().unwrap_or(0)),
        2 if depth >= MAX_TUPLE_DEPTH => "...".to_owned(),
        2 => s
            .tuple_shardings
            .iter()
            .map(|t| format!("{{{}}}", sharding_body(t, depth + 1)))
            .collect::<Vec<_>>()
            .join(", "),
        4 => "manual".to_owned(),
        5 => "unknown".to_owned(),
        6 => "unreduced".to_owned(),
        _ => {
            let devices = if !s.tile_assignment_devices.is_empty() {
                join(&s.tile_assignment_devices)
            } else {
                let reshape = if s.iota_reshape_dims.is_empty() {
                    vec![s.tile_assignment_dimensions.iter().product::<i64>()]
                } else {
                    s.iota_reshape_dims.clone()
                };
                let perm = if s.iota_transpose_perm.is_empty() {
                    String::new()
                } else {
                    let p: Vec<String> = s.iota_transpose_perm.iter().map(i32::to_string).collect();
                    format!("T({})", p.join(","))
                };
                format!("<=[{}]{perm}", join(&reshape))
            };
            let mut out = format!("devices=[{}]{devices}", join(&s.tile_assignment_dimensions));
            if s.replicate_on_last_tile_dim {
                out.push_str(" last_tile_dim_replicate");
            } else if !s.last_tile_dims.is_empty() {
                let names: Vec<&str> = s
                    .last_tile_dims
                    .iter()
                    .map(|&t| match t {
                        0 => "replicated",
                        4 => "manual",
                        6 => "unreduced",
                        _ => "unknown",
                    })
                    .collect();
                out.push_str(&format!(" last_tile_dims={{{}}}", names.join(", ")));
            }
            out
        }
    }
}
