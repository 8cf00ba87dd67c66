//! Synthetic profiles for tests, written with xlens' own builders.
//!
//! [`gpu`] writes NVIDIA-shaped XLA:GPU profiles: the planes, lines, events and stats that XLA's
//! CUPTI collector and JAX write on a CUDA machine (`/device:GPU:<n>` planes with `Stream #<id>(…)`
//! lines of kernels and memory copies, host launch events linked to them by `correlation_id`,
//! `train` step markers, the HLO of the program in `/host:metadata`), deterministic for a seed.
//! XProf 2.24.2 reads them as an "Nvidia GPU (Hopper)" profile, so xlens' GPU analysis can be
//! compared with XProf's on NVIDIA-shaped input; [`gpu::gpu_fixture`] names the committed ones of
//! `testdata/gpu/`.
//!
//! [`tpu`] writes TPU-shaped sessions (with [`synth`]) that each show one signature
//! (recompilation between steps, vector-unit-bound work, matmul padding, a straggler host) and
//! their clean twins; [`tpu::tpu_session`] names the committed ones of `testdata/tpu/`.
//!
//! ```
//! use xlens_testkit::gpu::{gpu_fixture, gpu_profile};
//! use xlens_xplane::Space;
//! let spec = gpu_fixture("gpu_healthy").unwrap();
//! let space = Space::parse(gpu_profile(&spec).into())?;
//! assert_eq!(space.gpus().len(), 1);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod alloc;
pub mod gpu;
pub mod invariants;
pub mod jax;
pub mod rewrite;
pub mod s3;
pub mod splice;
pub mod strip;
pub mod synth;
pub mod tpu;

/// The host files of the run at `dir` (a file, run directory or logdir), found by
/// [`xlens_source::discover`]; panics, naming `dir`, when there is none.
pub fn discover(dir: impl AsRef<std::path::Path>) -> xlens_source::Run {
    let dir = dir.as_ref();
    xlens_source::discover(&xlens_source::Location::Local(dir.to_path_buf()))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// Opens the run at `dir` (a file, run directory or logdir) with [`xlens_source::open_session`]:
/// the tests' way to a decoded [`xlens_xplane::Session`] of a directory of `testdata`.
/// Errors are the decoder's (they name the file).
pub fn open_session(dir: impl AsRef<std::path::Path>) -> xlens_xplane::Result<xlens_xplane::Session> {
    xlens_source::open_session(&xlens_source::Location::Local(dir.as_ref().to_path_buf()))
        .map_err(xlens_source::Error::into_error)
}

pub use gpu::{GPU_FIXTURES, GpuSpec, gpu_fixture, gpu_profile, write_gpu_fixture};
pub use tpu::{TPU_SESSIONS, tpu_session, tpu_session_ground_truth, write_tpu_session};

use xlens_hlo::raw;

/// The input/output aliases of a step that donates its state (`donate_argnums`): each output
/// aliases the first parameter of its shape not aliased yet, as XLA pairs donated buffers.
pub(crate) fn donated_aliases(
    params: &[raw::ShapeProto],
    outputs: &[raw::ShapeProto],
) -> raw::HloInputOutputAliasProto {
    let mut taken = vec![false; params.len()];
    let mut entries = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        let same = |p: &raw::ShapeProto| p.element_type == out.element_type && p.dimensions == out.dimensions;
        if let Some(n) = (0..params.len()).find(|&n| !taken[n] && same(&params[n])) {
            taken[n] = true;
            entries.push(raw::hlo_input_output_alias_proto::AliasEntryProto {
                output_shape_index: vec![i as i64],
                parameter_number: n as i64,
                parameter_shape_index: Vec::new(),
                kind: 1, // MAY_ALIAS
            });
        }
    }
    raw::HloInputOutputAliasProto { entries }
}

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
