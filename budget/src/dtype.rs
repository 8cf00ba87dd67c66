//! Element types and the training recipes and optimizers built on them.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, ErrorKind, Result};

/// An element type and its storage size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE binary32, 4 bytes.
    F32,
    /// bfloat16, 2 bytes.
    Bf16,
    /// IEEE binary16, 2 bytes.
    F16,
    /// 8-bit float (e4m3 / e5m2), 1 byte.
    Fp8,
    /// 8-bit integer, 1 byte.
    Int8,
}

impl DType {
    /// Bytes per element.
    pub const fn bytes(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::Bf16 | DType::F16 => 2,
            DType::Fp8 | DType::Int8 => 1,
        }
    }

    /// `"f32"`, `"bf16"`, `"f16"`, `"fp8"`, `"int8"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
            DType::Fp8 => "fp8",
            DType::Int8 => "int8",
        }
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Parses `f32`/`fp32`/`float32`, `bf16`/`bfloat16`, `f16`/`fp16`, `fp8`, `int8`/`i8`.
    fn from_str(s: &str) -> Result<DType> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => DType::F32,
            "bf16" | "bfloat16" => DType::Bf16,
            "f16" | "fp16" | "float16" => DType::F16,
            "fp8" | "f8" | "float8" | "e4m3" | "e5m2" => DType::Fp8,
            "int8" | "i8" | "s8" => DType::Int8,
            _ => return Err(unknown("dtype", s, "f32, bf16, f16, fp8, int8")),
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a training run stores parameters, gradients and optimizer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recipe {
    /// Everything in f32: weights, gradients, optimizer moments; f32 activations.
    Fp32,
    /// Mixed precision (ZeRO accounting): bf16 weights and gradients for compute, an f32 master
    /// copy of the weights, f32 optimizer moments; bf16 activations.
    MixedBf16,
    /// bf16 everywhere, no master copy (moments in bf16 too); bf16 activations.
    PureBf16,
}

impl Recipe {
    /// Every recipe.
    pub const ALL: [Recipe; 3] = [Recipe::Fp32, Recipe::MixedBf16, Recipe::PureBf16];

    /// The type of the working weights and gradients.
    pub const fn weight_dtype(self) -> DType {
        match self {
            Recipe::Fp32 => DType::F32,
            Recipe::MixedBf16 | Recipe::PureBf16 => DType::Bf16,
        }
    }

    /// The type of saved activations.
    pub const fn activation_dtype(self) -> DType {
        self.weight_dtype()
    }

    /// The type of optimizer moments.
    pub const fn moment_dtype(self) -> DType {
        match self {
            Recipe::Fp32 | Recipe::MixedBf16 => DType::F32,
            Recipe::PureBf16 => DType::Bf16,
        }
    }

    /// Bytes per parameter of the f32 master copy (0 without one).
    pub const fn master_bytes(self) -> u64 {
        match self {
            Recipe::MixedBf16 => 4,
            Recipe::Fp32 | Recipe::PureBf16 => 0,
        }
    }

    /// `"fp32"`, `"mixed-bf16"`, `"bf16"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Recipe::Fp32 => "fp32",
            Recipe::MixedBf16 => "mixed-bf16",
            Recipe::PureBf16 => "bf16",
        }
    }
}

impl FromStr for Recipe {
    type Err = Error;

    /// Parses `fp32`/`f32`, `mixed-bf16`/`mixed`, `bf16`/`pure-bf16`.
    fn from_str(s: &str) -> Result<Recipe> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "fp32" | "f32" | "float32" => Recipe::Fp32,
            "mixed-bf16" | "mixed" | "amp-bf16" => Recipe::MixedBf16,
            "bf16" | "pure-bf16" => Recipe::PureBf16,
            _ => return Err(unknown("recipe", s, "fp32, mixed-bf16, bf16")),
        })
    }
}

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The optimizer, for the state it keeps per parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Optimizer {
    /// Adam or AdamW: first and second moments (2 values per parameter).
    Adam,
    /// Adafactor without momentum: factored second moments, O(rows + cols) per matrix, counted
    /// as 0 bytes per parameter (under 0.1% of the parameters for widths of 2048 and more).
    Adafactor,
    /// Lion: one momentum value per parameter.
    Lion,
    /// SGD with momentum: one value per parameter.
    SgdMomentum,
    /// Plain SGD: no state.
    Sgd,
}

impl Optimizer {
    /// Every optimizer.
    pub const ALL: [Optimizer; 5] =
        [Optimizer::Adam, Optimizer::Adafactor, Optimizer::Lion, Optimizer::SgdMomentum, Optimizer::Sgd];

    /// Optimizer values kept per parameter.
    pub const fn moments(self) -> u64 {
        match self {
            Optimizer::Adam => 2,
            Optimizer::Lion | Optimizer::SgdMomentum => 1,
            Optimizer::Adafactor | Optimizer::Sgd => 0,
        }
    }

    /// `"adam"`, `"adafactor"`, `"lion"`, `"sgd-momentum"`, `"sgd"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Optimizer::Adam => "adam",
            Optimizer::Adafactor => "adafactor",
            Optimizer::Lion => "lion",
            Optimizer::SgdMomentum => "sgd-momentum",
            Optimizer::Sgd => "sgd",
        }
    }
}

impl FromStr for Optimizer {
    type Err = Error;

    /// Parses `adam`/`adamw`, `adafactor`, `lion`, `sgd-momentum`/`momentum`, `sgd`.
    fn from_str(s: &str) -> Result<Optimizer> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "adam" | "adamw" => Optimizer::Adam,
            "adafactor" => Optimizer::Adafactor,
            "lion" => Optimizer::Lion,
            "sgd-momentum" | "momentum" | "sgdm" => Optimizer::SgdMomentum,
            "sgd" => Optimizer::Sgd,
            _ => return Err(unknown("optimizer", s, "adam, adafactor, lion, sgd-momentum, sgd")),
        })
    }
}

impl fmt::Display for Optimizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bytes per parameter of training state, by part.
///
/// ```
/// use xlens_budget::{Optimizer, Recipe, StateBytes};
/// let fp32 = StateBytes::training(Recipe::Fp32, Optimizer::Adam);
/// let mixed = StateBytes::training(Recipe::MixedBf16, Optimizer::Adam);
/// assert_eq!((fp32.weights, fp32.gradients, fp32.master, fp32.optimizer), (4, 4, 0, 8));
/// assert_eq!((mixed.weights, mixed.gradients, mixed.master, mixed.optimizer), (2, 2, 4, 8));
/// assert_eq!((fp32.total(), mixed.total()), (16, 16)); // mixed precision saves activations, not state
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StateBytes {
    /// Working weights.
    pub weights: u64,
    /// Gradients (same type as the weights).
    pub gradients: u64,
    /// f32 master copy of the weights.
    pub master: u64,
    /// Optimizer moments.
    pub optimizer: u64,
}

impl StateBytes {
    /// Training state per parameter for a recipe and optimizer.
    pub const fn training(recipe: Recipe, optimizer: Optimizer) -> StateBytes {
        let w = recipe.weight_dtype().bytes();
        StateBytes {
            weights: w,
            gradients: w,
            master: recipe.master_bytes(),
            optimizer: optimizer.moments() * recipe.moment_dtype().bytes(),
        }
    }

    /// Serving state per parameter: the weights alone.
    pub const fn serving(weights: DType) -> StateBytes {
        StateBytes { weights: weights.bytes(), gradients: 0, master: 0, optimizer: 0 }
    }

    /// Sum of the parts.
    pub const fn total(&self) -> u64 {
        self.weights + self.gradients + self.master + self.optimizer
    }
}

#[cold]
pub(crate) fn unknown(what: &'static str, value: &str, expected: &'static str) -> Error {
    Error::new(ErrorKind::Unknown { what, value: value.to_owned(), expected })
}
