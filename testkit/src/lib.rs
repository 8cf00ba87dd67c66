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
//! ```
//! use xlens_testkit::gpu::{gpu_fixture, gpu_profile};
//! use xlens_xplane::Space;
//! let spec = gpu_fixture("gpu_healthy").unwrap();
//! let space = Space::parse(gpu_profile(&spec).into())?;
//! assert_eq!(space.gpus().len(), 1);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod gpu;

pub use gpu::{GPU_FIXTURES, GpuSpec, gpu_fixture, gpu_profile, write_gpu_fixture};
