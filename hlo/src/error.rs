//! The crate's error and warning types.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in the input something happened.
///
/// Every field is optional: a dangling operand knows its module, computation and instruction; an
/// undecodable proto knows only the module (or the file it came from).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The file the bytes came from, when read from disk.
    pub file: Option<PathBuf>,
    /// The module: its `name(program_id)` in a profile, else its name.
    pub module: Option<String>,
    /// The computation name.
    pub computation: Option<String>,
    /// The instruction name.
    pub instruction: Option<String>,
}

impl Location {
    /// A location in a module.
    pub fn in_module(module: impl Into<String>) -> Self {
        Location { module: Some(module.into()), ..Location::default() }
    }

    /// The same location, in the given computation.
    pub fn with_computation(mut self, computation: impl Into<String>) -> Self {
        self.computation = Some(computation.into());
        self
    }

    /// The same location, at the given instruction.
    pub fn with_instruction(mut self, instruction: impl Into<String>) -> Self {
        self.instruction = Some(instruction.into());
        self
    }

    /// The same location, in the given file.
    pub fn with_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    fn is_empty(&self) -> bool {
        *self == Location::default()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(file) = &self.file {
            parts.push(file.display().to_string());
        }
        if let Some(module) = &self.module {
            parts.push(format!("module {module}"));
        }
        if let Some(computation) = &self.computation {
            parts.push(format!("computation {computation}"));
        }
        if let Some(instruction) = &self.instruction {
            parts.push(format!("instruction {instruction}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// What kind of failure an [`Error`] is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading a file failed.
    #[error("i/o error: {0}")]
    Io(#[source] std::io::Error),
    /// The input has no bytes at all.
    #[error("input is empty: an HloProto has at least a module")]
    EmptyInput,
    /// The bytes are not a protobuf `HloProto` / `HloModuleProto`.
    #[error("malformed HLO protobuf: {0}")]
    Decode(#[source] prost::DecodeError),
    /// A field of the proto that prost would not decode, found by the strict check
    /// ([`xlens_xplane::strict`]) where the decoder itself skips the field.
    #[error("malformed HLO protobuf: a field of {path}: {why} (byte {offset})")]
    Malformed {
        /// The message whose field is malformed (`HloProto.hlo_module.computations[0]`).
        path: String,
        /// What prost would say.
        why: &'static str,
        /// The byte offset in the proto.
        offset: usize,
    },
    /// The proto decoded but holds no module (no computations).
    #[error("the proto holds no HLO module")]
    NoModule,
    /// The module names no entry computation that exists.
    #[error("entry computation {0} does not exist")]
    NoEntry(String),
    /// An id refers to nothing in the module.
    #[error("{what} {id} refers to nothing in the module")]
    DanglingId {
        /// What held the id (`"operand id"`, `"called computation id"`, `"root id"`, ...).
        what: &'static str,
        /// The id.
        id: i64,
    },
    /// Two instructions of one computation, or two computations, share an id.
    #[error("duplicate {what} id {id}")]
    DuplicateId {
        /// `"instruction"` or `"computation"`.
        what: &'static str,
        /// The id.
        id: i64,
    },
    /// The operands (or control edges) of a computation form a cycle.
    #[error("instructions form a cycle")]
    Cycle,
    /// Computations call each other in a cycle.
    #[error("computations call each other in a cycle")]
    CallCycle,
    /// A shape is invalid (negative dimension, bad layout, too many dimensions).
    #[error("invalid shape: {0}")]
    InvalidShape(String),
    /// A count in the input exceeds a decoder limit.
    #[error("{} ({count}) exceeds the limit of {}", limit.what(), limit.max())]
    LimitExceeded {
        /// The limit.
        limit: Limit,
        /// The count that exceeded it.
        count: u64,
    },
    /// Building the module would need more memory than its budget allows (see
    /// [`crate::limits::module_budget`]): its proto holds many more computations or instructions
    /// than its bytes can describe in a real program.
    #[error(
        "building the module would need about {needed} bytes of memory, over its budget of {budget} bytes for \
         {encoded_bytes} bytes of proto"
    )]
    MemoryBudget {
        /// The bytes its computations and instructions would cost.
        needed: u64,
        /// The budget ([`crate::limits::module_budget`] of its size).
        budget: u64,
        /// The size of the encoded proto.
        encoded_bytes: u64,
    },
    /// A heap-simulator trace cannot be replayed (a buffer freed twice, a negative heap).
    #[error("heap simulator trace cannot be replayed: {0}")]
    HeapTrace(String),
    /// Building a DataFrame failed.
    #[error("building a frame failed: {0}")]
    Frame(String),
}

/// An error from decoding an HLO proto or building its graph, with its [`Location`].
pub struct Error(Box<Inner>);

struct Inner {
    kind: ErrorKind,
    location: Location,
}

impl Error {
    #[cold]
    pub(crate) fn new(kind: ErrorKind, location: Location) -> Self {
        Error(Box::new(Inner { kind, location }))
    }

    #[cold]
    pub(crate) fn io(err: std::io::Error, path: &Path) -> Self {
        Error::new(ErrorKind::Io(err), Location::default().with_file(path))
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// Where it went wrong.
    pub fn location(&self) -> &Location {
        &self.0.location
    }

    /// True when the bytes are not a valid protobuf of the expected message.
    pub fn is_decode(&self) -> bool {
        matches!(
            self.0.kind,
            ErrorKind::Decode(_) | ErrorKind::Malformed { .. } | ErrorKind::EmptyInput | ErrorKind::NoModule
        )
    }

    /// Adds the module to the location (keeps one already set).
    pub(crate) fn in_module(mut self, module: &str) -> Self {
        self.0.location.module.get_or_insert_with(|| module.to_owned());
        self
    }

    /// Fills the computation and instruction of the location from `location` where unset.
    pub(crate) fn at(mut self, location: Location) -> Self {
        let loc = &mut self.0.location;
        if loc.computation.is_none() {
            loc.computation = location.computation;
        }
        if loc.instruction.is_none() {
            loc.instruction = location.instruction;
        }
        self
    }

    /// Adds the file to the location.
    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        self.0.location.file = Some(file.to_path_buf());
        self
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("kind", &self.0.kind).field("location", &self.0.location).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.location.is_empty() {
            write!(f, "{}", self.0.kind)
        } else {
            write!(f, "{} (at {})", self.0.kind, self.0.location)
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0.kind)
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Something odd but decodable in the input.
///
/// Decoding goes on; analyses may be less complete. Warnings are data, never printed by the library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// What is odd.
    pub kind: WarningKind,
    /// Where.
    pub location: Location,
}

/// The kinds of [`Warning`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// A `/host:metadata` entry's HLO proto did not decode or build; the other modules are kept.
    ModuleSkipped(String),
    /// Two instructions share a name; lookups by name find the first (XLA renames clashes, which
    /// breaks the join between profile events and instructions).
    DuplicateName(String),
    /// An opcode string this crate does not know; the instruction is kept as [`crate::Opcode::Other`].
    UnknownOpcode(String),
    /// A collective's replica groups could not be expanded; its groups are left empty.
    InvalidReplicaGroups(String),
    /// A `stack_frame_id` or file-location id points outside the module's stack-frame index.
    DanglingStackFrame(i64),
    /// Two `/host:metadata` entries carry the same program id; both are kept.
    DuplicateProgramId(u64),
    /// More warnings than [`crate::limits::MAX_WARNINGS_PER_MODULE`]: this many more were
    /// found and not kept.
    WarningsOmitted(u64),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WarningKind::ModuleSkipped(why) => write!(f, "module skipped: {why}")?,
            WarningKind::DuplicateName(name) => write!(f, "duplicate instruction name {name}")?,
            WarningKind::UnknownOpcode(op) => write!(f, "unknown opcode {op:?}")?,
            WarningKind::InvalidReplicaGroups(why) => write!(f, "replica groups not expanded: {why}")?,
            WarningKind::DanglingStackFrame(id) => write!(f, "stack frame id {id} is not in the stack-frame index")?,
            WarningKind::DuplicateProgramId(id) => write!(f, "program id {id} appears twice")?,
            WarningKind::WarningsOmitted(n) => write!(f, "{n} more warnings not kept")?,
        }
        if !self.location.is_empty() {
            write!(f, " (at {})", self.location)?;
        }
        Ok(())
    }
}

// Declared here so that errors can name it; `limits` re-exports it and gives its bounds and names.
/// A decoder limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Computations in one module.
    Computations,
    /// Instructions in one module (all computations).
    Instructions,
    /// Dimensions of one array shape.
    Rank,
    /// Nesting depth of computation calls (entry → while body → fusion → ...).
    CallDepth,
    /// Device ids in the expanded replica groups of one collective.
    ReplicaGroupDevices,
    /// Frames walked for one instruction's call stack.
    StackDepth,
    /// Hops of a neighbourhood query, from its instruction.
    NeighborhoodHops,
}
