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
