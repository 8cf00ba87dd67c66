//! HLO opcodes: one table gives the enum, the canonical string and the coarse class.
//!
//! The list follows openxla/xla `xla/hlo/ir/hlo_opcode.h`. An opcode string this table does not
//! know decodes as [`Opcode::Other`]; the instruction keeps its string
//! ([`crate::Instruction::opcode_name`]).

use std::fmt;

/// What an opcode does, coarsely: the grouping the cost model and detectors use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum OpClass {
    /// Element-by-element arithmetic, comparison, conversion and selection.
    Elementwise,
    /// Layout changes: `copy`, `transpose`, `reshape`, `dynamic-reshape` (XProf's "data formatting").
    DataFormatting,
    /// Matrix products and convolutions.
    Contraction,
    /// Reductions and sorts that apply a computation (`reduce`, `reduce-window`, `sort`, ...).
    Reduction,
    /// `fusion`.
    Fusion,
    /// Cross-device communication (`all-reduce`, `all-gather`, `collective-permute`, ...).
    Collective,
    /// Control flow and asynchrony: `while`, `conditional`, `call`, `async-*`.
    ControlFlow,
    /// Data movement without arithmetic: `broadcast`, `slice`, `concatenate`, `gather`, `pad`, ...
    DataMovement,
    /// Program structure that moves no data: `parameter`, `constant`, `tuple`,
    /// `get-tuple-element`, `bitcast`, `after-all`, ...
    Structural,
    /// Host transfers: `infeed`, `outfeed`, `send`, `recv` and their `-done` partners.
    HostTransfer,
    /// `custom-call`.
    CustomCall,
    /// Anything else (random numbers, linear-algebra helpers, unknown opcodes).
    Other,
}

macro_rules! opcodes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $class:ident; )*) => {
        /// An HLO opcode.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Opcode {
            $( $(#[$doc])* #[doc = concat!("`", $name, "`")] $variant, )*
            /// An opcode string not in this table.
            Other,
        }

        impl Opcode {
            /// Every known opcode, in the table's (alphabetical) order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            /// The canonical HLO spelling (`"all-reduce"`); `"other"` for [`Opcode::Other`].
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Opcode::$variant => $name,)*
                    Opcode::Other => "other",
                }
            }

            /// The opcode for an HLO spelling; [`Opcode::Other`] when unknown.
            ///
            /// ```
            /// use xlens_hlo::Opcode;
            /// assert_eq!(Opcode::from_name("all-gather-start"), Opcode::AllGatherStart);
            /// assert_eq!(Opcode::from_name("frobnicate"), Opcode::Other);
            /// ```
            pub fn from_name(name: &str) -> Opcode {
                match name {
                    $($name => Opcode::$variant,)*
                    _ => Opcode::Other,
                }
            }

            /// The opcode's coarse class.
            pub fn class(self) -> OpClass {
                match self {
                    $(Opcode::$variant => OpClass::$class,)*
                    Opcode::Other => OpClass::Other,
                }
            }
        }
    };
}

opcodes! {
    Abs = "abs", Elementwise;
    Acos = "acos", Elementwise;
    Acosh = "acosh", Elementwise;
    Add = "add", Elementwise;
    AddDependency = "add-dependency", Structural;
    AfterAll = "after-all", Structural;
    AllGather = "all-gather", Collective;
    AllGatherDone = "all-gather-done", Collective;
    AllGatherStart = "all-gather-start", Collective;
    AllReduce = "all-reduce", Collective;
    AllReduceDone = "all-reduce-done", Collective;
    AllReduceStart = "all-reduce-start", Collective;
    AllToAll = "all-to-all", Collective;
    And = "and", Elementwise;
    Asin = "asin", Elementwise;
    Asinh = "asinh", Elementwise;
    AsyncDone = "async-done", ControlFlow;
    AsyncStart = "async-start", ControlFlow;
    AsyncUpdate = "async-update", ControlFlow;
    Atan = "atan", Elementwise;
    Atan2 = "atan2", Elementwise;
    Atanh = "atanh", Elementwise;
    BatchNormGrad = "batch-norm-grad", Other;
    BatchNormInference = "batch-norm-inference", Other;
    BatchNormTraining = "batch-norm-training", Other;
    Bitcast = "bitcast", Structural;
    BitcastConvert = "bitcast-convert", Elementwise;
    Broadcast = "broadcast", DataMovement;
    Call = "call", ControlFlow;
    Cbrt = "cbrt", Elementwise;
    Ceil = "ceil", Elementwise;
    Cholesky = "cholesky", Other;
    Clamp = "clamp", Elementwise;
    Clz = "count-leading-zeros", Elementwise;
    CollectiveBroadcast = "collective-broadcast", Collective;
    CollectivePermute = "collective-permute", Collective;
    CollectivePermuteDone = "collective-permute-done", Collective;
    CollectivePermuteStart = "collective-permute-start", Collective;
    CollectiveReduce = "collective-reduce", Collective;
    Compare = "compare", Elementwise;
    Complex = "complex", Elementwise;
    Concatenate = "concatenate", DataMovement;
    Conditional = "conditional", ControlFlow;
    Constant = "constant", Structural;
    Convert = "convert", Elementwise;
    Convolution = "convolution", Contraction;
    Copy = "copy", DataFormatting;
    CopyDone = "copy-done", DataMovement;
    CopyStart = "copy-start", DataMovement;
    Cos = "cosine", Elementwise;
    Cosh = "cosh", Elementwise;
    CustomCall = "custom-call", CustomCall;
    Divide = "divide", Elementwise;
    Domain = "domain", Structural;
    Dot = "dot", Contraction;
    DynamicReshape = "dynamic-reshape", DataFormatting;
    DynamicSlice = "dynamic-slice", DataMovement;
    DynamicUpdateSlice = "dynamic-update-slice", DataMovement;
    Erf = "erf", Elementwise;
    Exp = "exponential", Elementwise;
    Expm1 = "exponential-minus-one", Elementwise;
    Fft = "fft", Other;
    Floor = "floor", Elementwise;
    Fusion = "fusion", Fusion;
    Gather = "gather", DataMovement;
    GetDimensionSize = "get-dimension-size", Structural;
    GetTupleElement = "get-tuple-element", Structural;
    Imag = "imag", Elementwise;
    Infeed = "infeed", HostTransfer;
    Iota = "iota", DataMovement;
    IsFinite = "is-finite", Elementwise;
    Log = "log", Elementwise;
    Log1p = "log-plus-one", Elementwise;
    Logistic = "logistic", Elementwise;
    Map = "map", Elementwise;
    Maximum = "maximum", Elementwise;
    Minimum = "minimum", Elementwise;
    Mulhi = "mulhi", Elementwise;
    Multiply = "multiply", Elementwise;
    Negate = "negate", Elementwise;
    Not = "not", Elementwise;
    OptimizationBarrier = "opt-barrier", Structural;
    Or = "or", Elementwise;
    Outfeed = "outfeed", HostTransfer;
    Pad = "pad", DataMovement;
    Parameter = "parameter", Structural;
    PartitionId = "partition-id", Structural;
    PopulationCount = "popcnt", Elementwise;
    Power = "power", Elementwise;
    RaggedAllToAll = "ragged-all-to-all", Collective;
    RaggedDot = "ragged-dot", Contraction;
    Real = "real", Elementwise;
    Recv = "recv", HostTransfer;
    RecvDone = "recv-done", HostTransfer;
    Reduce = "reduce", Reduction;
    ReducePrecision = "reduce-precision", Elementwise;
    ReduceScatter = "reduce-scatter", Collective;
    ReduceWindow = "reduce-window", Reduction;
    Remainder = "remainder", Elementwise;
    ReplicaId = "replica-id", Structural;
    Reshape = "reshape", DataFormatting;
    Reverse = "reverse", DataMovement;
    Rng = "rng", Other;
    RngBitGenerator = "rng-bit-generator", Other;
    RngGetAndUpdateState = "rng-get-and-update-state", Other;
    RoundNearestAfz = "round-nearest-afz", Elementwise;
    RoundNearestEven = "round-nearest-even", Elementwise;
    Rsqrt = "rsqrt", Elementwise;
    ScaledDot = "scaled-dot", Contraction;
    Scan = "scan", ControlFlow;
    Scatter = "scatter", DataMovement;
    Select = "select", Elementwise;
    SelectAndScatter = "select-and-scatter", Reduction;
    Send = "send", HostTransfer;
    SendDone = "send-done", HostTransfer;
    SetDimensionSize = "set-dimension-size", Structural;
    ShiftLeft = "shift-left", Elementwise;
    ShiftRightArithmetic = "shift-right-arithmetic", Elementwise;
    ShiftRightLogical = "shift-right-logical", Elementwise;
    Shuffle = "shuffle", DataMovement;
    Sign = "sign", Elementwise;
    Sin = "sine", Elementwise;
    Sinh = "sinh", Elementwise;
    Slice = "slice", DataMovement;
    Sort = "sort", Reduction;
    Sqrt = "sqrt", Elementwise;
    StochasticConvert = "stochastic-convert", Elementwise;
    Subtract = "subtract", Elementwise;
    Tan = "tan", Elementwise;
    Tanh = "tanh", Elementwise;
    TopK = "topk", Reduction;
    Transpose = "transpose", DataFormatting;
    TriangularSolve = "triangular-solve", Other;
    Tuple = "tuple", Structural;
    While = "while", ControlFlow;
    Xor = "xor", Elementwise;
}

impl Opcode {
    /// True for opcodes XLA treats as elementwise on their own (`HloInstruction::IsElementwise`
    /// for a non-fusion instruction): the arithmetic, comparison, conversion and selection ops,
    /// `copy` and `map`. A fusion's answer depends on its body
    /// ([`crate::Module::is_elementwise`]).
    pub fn is_elementwise(self) -> bool {
        matches!(self.class(), OpClass::Elementwise) || self == Opcode::Copy
    }

    /// True for elementwise ops XLA's cost analysis counts as transcendentals, not FLOPs.
    pub fn is_transcendental(self) -> bool {
        matches!(
            self,
            Opcode::Exp
                | Opcode::Log
                | Opcode::Logistic
                | Opcode::Power
                | Opcode::Sqrt
                | Opcode::Cbrt
                | Opcode::Rsqrt
                | Opcode::Tanh
                | Opcode::Tan
                | Opcode::Sin
                | Opcode::Cos
                | Opcode::Expm1
                | Opcode::Log1p
                | Opcode::Atan2
        )
    }

    /// True for collectives that carry data between devices: the synchronous ones and the
    /// `-start` halves of asynchronous pairs (a `-done` completes its start and is not counted).
    ///
    /// ```
    /// use xlens_hlo::Opcode;
    /// assert!(Opcode::AllReduceStart.is_collective());
    /// assert!(!Opcode::AllReduceDone.is_collective());
    /// ```
    pub fn is_collective(self) -> bool {
        self.class() == OpClass::Collective && !self.is_async_done()
    }

    /// True for the `-done` half of an asynchronous pair (`all-gather-done`, `copy-done`,
    /// `async-done`, `send-done`, ...).
    pub fn is_async_done(self) -> bool {
        matches!(
            self,
            Opcode::AllGatherDone
                | Opcode::AllReduceDone
                | Opcode::CollectivePermuteDone
                | Opcode::CopyDone
                | Opcode::AsyncDone
                | Opcode::SendDone
                | Opcode::RecvDone
        )
    }

    /// True for `transpose`, `copy`, `reshape` and `dynamic-reshape`, which XProf files under
    /// "data formatting".
    pub fn is_data_formatting(self) -> bool {
        self.class() == OpClass::DataFormatting
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `fusion_kind` of a fusion instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FusionKind {
    /// `kLoop`: elementwise-style loop fusion.
    Loop,
    /// `kInput`: a reduction fused with its inputs.
    Input,
    /// `kOutput`: a contraction fused with its output ops.
    Output,
    /// `kCustom`: backend-defined (e.g. XLA:CPU's YNNPACK `ynn_fusion`, GPU Triton GEMMs).
    Custom,
    /// A string this crate does not know.
    Other,
}

impl FusionKind {
    /// The kind for XLA's spelling (`"kLoop"`); `None` for an empty string.
    pub fn from_name(name: &str) -> Option<FusionKind> {
        Some(match name {
            "" => return None,
            "kLoop" => FusionKind::Loop,
            "kInput" => FusionKind::Input,
            "kOutput" => FusionKind::Output,
            "kCustom" => FusionKind::Custom,
            _ => FusionKind::Other,
        })
    }

    /// XLA's spelling (`"kLoop"`); `"kOther"` for [`FusionKind::Other`].
    pub fn as_str(self) -> &'static str {
        match self {
            FusionKind::Loop => "kLoop",
            FusionKind::Input => "kInput",
            FusionKind::Output => "kOutput",
            FusionKind::Custom => "kCustom",
            FusionKind::Other => "kOther",
        }
    }
}

impl fmt::Display for FusionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_round_trips_and_is_unique() {
        let mut seen = std::collections::HashSet::new();
        for &op in Opcode::ALL {
            assert!(seen.insert(op.as_str()), "duplicate spelling {op}");
            assert_eq!(Opcode::from_name(op.as_str()), op);
        }
        assert_eq!(Opcode::ALL.len(), 136);
    }

    #[test]
    fn classes_match_xprof_groupings() {
        for op in [Opcode::Copy, Opcode::Transpose, Opcode::Reshape, Opcode::DynamicReshape] {
            assert!(op.is_data_formatting());
        }
        assert!(Opcode::Exp.is_transcendental() && !Opcode::Add.is_transcendental());
        assert!(Opcode::Add.is_elementwise() && Opcode::Copy.is_elementwise());
        assert!(!Opcode::Broadcast.is_elementwise() && !Opcode::Fusion.is_elementwise());
        assert!(Opcode::ReduceScatter.is_collective() && !Opcode::CopyStart.is_collective());
        assert_eq!(FusionKind::from_name("kLoop"), Some(FusionKind::Loop));
        assert_eq!(FusionKind::from_name(""), None);
    }
}
