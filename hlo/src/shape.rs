//! Shapes: element types with their bit widths, dimensions, tuples and layouts, with logical
//! and TPU-padded byte sizes.
//!
//! Arithmetic on sizes saturates: a hostile shape cannot overflow, it only reports `u64::MAX`.

use std::fmt;

use crate::error::{Error, ErrorKind, Location, Result};
use crate::limits::{self, Limit};
use crate::raw;

/// Bytes XLA charges for one tuple element (a pointer in the tuple's index table, 64-bit hosts).
pub const POINTER_SIZE: u64 = 8;

/// Lanes of a TPU vector register: the minor-most dimension is tiled by 128.
pub const TPU_LANES: u64 = 128;

macro_rules! primitive_types {
    ($( $variant:ident = $value:literal, $name:literal, $bits:literal; )*) => {
        /// An XLA element type (`xla.PrimitiveType`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum PrimitiveType {
            $( #[doc = concat!("`", $name, "` (", stringify!($value), ")")] $variant, )*
            /// A value this crate does not know.
            Unknown(i32),
        }

        impl PrimitiveType {
            /// The type for its proto enum value.
            pub fn from_proto(value: i32) -> PrimitiveType {
                match value {
                    $($value => PrimitiveType::$variant,)*
                    other => PrimitiveType::Unknown(other),
                }
            }

            /// The proto enum value.
            pub fn proto_value(self) -> i32 {
                match self {
                    $(PrimitiveType::$variant => $value,)*
                    PrimitiveType::Unknown(v) => v,
                }
            }

            /// The HLO text spelling (`"f32"`, `"bf16"`, `"pred"`); `"unknown"` when unknown.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(PrimitiveType::$variant => $name,)*
                    PrimitiveType::Unknown(_) => "unknown",
                }
            }

            /// Bits of information per element (`4` for `s4`, `1` for `pred`'s value, `64` for
            /// `c64`'s two floats is `64`); 0 for tuples, tokens and unknown types.
            pub fn bit_width(self) -> u32 {
                match self {
                    $(PrimitiveType::$variant => $bits,)*
                    PrimitiveType::Unknown(_) => 0,
                }
            }
        }
    };
}

primitive_types! {
    Invalid = 0, "invalid", 0;
    Pred = 1, "pred", 1;
    S1 = 30, "s1", 1;
    S2 = 26, "s2", 2;
    S4 = 21, "s4", 4;
    S8 = 2, "s8", 8;
    S16 = 3, "s16", 16;
    S32 = 4, "s32", 32;
    S64 = 5, "s64", 64;
    U1 = 31, "u1", 1;
    U2 = 27, "u2", 2;
    U4 = 22, "u4", 4;
    U8 = 6, "u8", 8;
    U16 = 7, "u16", 16;
    U32 = 8, "u32", 32;
    U64 = 9, "u64", 64;
    F16 = 10, "f16", 16;
    F32 = 11, "f32", 32;
    Bf16 = 16, "bf16", 16;
    F64 = 12, "f64", 64;
    F8E5M2 = 19, "f8e5m2", 8;
    F8E4M3 = 28, "f8e4m3", 8;
    F8E4M3FN = 20, "f8e4m3fn", 8;
    F8E4M3B11FNUZ = 23, "f8e4m3b11fnuz", 8;
    F8E3M4 = 29, "f8e3m4", 8;
    F8E5M2FNUZ = 24, "f8e5m2fnuz", 8;
    F8E4M3FNUZ = 25, "f8e4m3fnuz", 8;
    F4E2M1FN = 32, "f4e2m1fn", 4;
    F8E8M0FNU = 33, "f8e8m0fnu", 8;
    F6E3M2FN = 35, "f6e3m2fn", 6;
    F6E2M3FN = 36, "f6e2m3fn", 6;
    C64 = 15, "c64", 64;
    C128 = 18, "c128", 128;
    Tuple = 13, "tuple", 0;
    OpaqueType = 14, "opaque", 0;
    Token = 17, "token", 0;
    Buffer = 34, "buffer", 0;
}

impl PrimitiveType {
    /// Bytes one element occupies in an unpacked buffer: whole bytes, at least one for any array
    /// type (XLA's `ByteSizeOfPrimitiveType`: `pred` and `s4` take a byte each); 0 for non-arrays.
    pub fn byte_size(self) -> u64 {
        match self.bit_width() {
            0 => 0,
            bits => u64::from(bits).div_ceil(8),
        }
    }

    /// True for element types of arrays (not tuple, token, opaque, buffer or invalid).
    pub fn is_array(self) -> bool {
        self.bit_width() > 0
    }

    /// True for floating-point types (including complex).
    pub fn is_float(self) -> bool {
        matches!(self, PrimitiveType::F16 | PrimitiveType::F32 | PrimitiveType::Bf16 | PrimitiveType::F64)
            || matches!(self, PrimitiveType::C64 | PrimitiveType::C128)
            || self.as_str().starts_with("f8")
            || self.as_str().starts_with("f6")
            || self.as_str().starts_with("f4")
    }
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrimitiveType::Unknown(v) => write!(f, "type{v}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// How an array is laid out in memory (`xla.LayoutProto`, the fields this crate reads).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    minor_to_major: Vec<i64>,
    tiles: Vec<Vec<i64>>,
    element_size_in_bits: u64,
    memory_space: i64,
    tail_padding_alignment: u64,
}

impl Layout {
    /// Dimension numbers from the fastest-varying (minor) to the slowest (major). Always a
    /// permutation of `0..rank` (validated), or empty for a scalar.
    pub fn minor_to_major(&self) -> &[i64] {
        &self.minor_to_major
    }

    /// Tiles, first applied first; each lists tile sizes for the minor-most dimensions,
    /// major to minor (e.g. `[[8, 128]]` is XLA's `T(8,128)`). Empty on CPU.
    pub fn tiles(&self) -> &[Vec<i64>] {
        &self.tiles
    }

    /// Packed element size in bits when set (sub-byte types on TPU), else 0.
    pub fn element_size_in_bits(&self) -> u64 {
        self.element_size_in_bits
    }

    /// The backend's memory space number (0 is the default device memory; TPU uses 1 for VMEM).
    pub fn memory_space(&self) -> i64 {
        self.memory_space
    }

    /// Total elements are padded to a multiple of this (1 when unset).
    pub fn tail_padding_alignment(&self) -> u64 {
        self.tail_padding_alignment.max(1)
    }
}

/// A shape: an array (element type, dimensions, layout) or a tuple of shapes.
///
/// Token, opaque and buffer shapes are kept as element-type-only shapes of rank 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    element_type: PrimitiveType,
    dims: Vec<i64>,
    dynamic: Vec<bool>,
    tuple: Vec<Shape>,
    layout: Option<Layout>,
}

/// A 2-D tile for the two minor-most dimensions: `(sublanes, lanes)`, e.g. `(8, 128)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile2D {
    /// Tile size of the second-minor dimension.
    pub sublanes: u64,
    /// Tile size of the minor-most dimension.
    pub lanes: u64,
}

impl Tile2D {
    /// The TPU's default tile for an element width: 32-bit words of a `(8, 128)` vector register,
    /// packed along the sublanes for narrower types: `(8,128)` for 32- and 64-bit types,
    /// `(16,128)` for 16-bit, `(32,128)` for 8-bit (and `pred`), `(64,128)` for 4-bit.
    ///
    /// ```
    /// use xlens_hlo::{PrimitiveType, Tile2D};
    /// assert_eq!(Tile2D::tpu_default(PrimitiveType::Bf16), Tile2D { sublanes: 16, lanes: 128 });
    /// ```
    pub fn tpu_default(element_type: PrimitiveType) -> Tile2D {
        // `pred` is stored a byte per element; other sub-byte types are packed on TPU.
        let bits = match element_type {
            PrimitiveType::Pred => 8,
            other => u64::from(other.bit_width()).clamp(1, 32),
        };
        Tile2D { sublanes: 8 * (32 / bits).max(1), lanes: TPU_LANES }
    }
}

/// Checks that `minor_to_major` is empty or a permutation of `0..rank` (the ranks of real
/// shapes fit a 64-bit mask; larger ones, up to [`limits::MAX_RANK`], use a vector).
fn check_minor_to_major(rank: usize, minor_to_major: &[i64]) -> Result<()> {
    let in_rank = |d: i64| usize::try_from(d).ok().filter(|&d| d < rank);
    let is_permutation = if rank <= 64 {
        let mut seen = 0u64;
        minor_to_major.iter().all(|&d| {
            in_rank(d).is_some_and(|d| {
                let fresh = seen & (1 << d) == 0;
                seen |= 1 << d;
                fresh
            })
        })
    } else {
        let mut seen = vec![false; rank];
        minor_to_major.iter().all(|&d| in_rank(d).is_some_and(|d| !std::mem::replace(&mut seen[d], true)))
    };
    if !is_permutation {
        return Err(invalid(format!("minor_to_major {minor_to_major:?} is not a permutation of rank {rank}")));
    }
    if !minor_to_major.is_empty() && minor_to_major.len() != rank {
        return Err(invalid(format!("minor_to_major {minor_to_major:?} does not cover rank {rank}")));
    }
    Ok(())
}

impl Shape {
    /// An array shape without layout (tests and builders).
    ///
    /// ```
    /// use xlens_hlo::{PrimitiveType, Shape};
    /// let s = Shape::array(PrimitiveType::F32, &[8, 512]);
    /// assert_eq!((s.element_count(), s.logical_bytes(), s.to_string()), (4096, 16384, "f32[8,512]".to_owned()));
    /// ```
    pub fn array(element_type: PrimitiveType, dims: &[i64]) -> Shape {
        Shape { element_type, dims: dims.to_vec(), dynamic: Vec::new(), tuple: Vec::new(), layout: None }
    }

    /// The same shape with a layout of the given minor-to-major order (not validated).
    pub fn with_minor_to_major(mut self, minor_to_major: &[i64]) -> Shape {
        self.layout = Some(Layout { minor_to_major: minor_to_major.to_vec(), ..Layout::default() });
        self
    }

    /// A tuple of shapes.
    pub fn tuple(elements: Vec<Shape>) -> Shape {
        Shape {
            element_type: PrimitiveType::Tuple,
            dims: Vec::new(),
            dynamic: Vec::new(),
            tuple: elements,
            layout: None,
        }
    }

    /// Converts and validates a proto shape: dimensions must be non-negative, the rank within
    /// [`limits::MAX_RANK`], and `minor_to_major` a permutation of the dimensions.
    pub fn from_proto(proto: &raw::ShapeProto) -> Result<Shape> {
        Shape::from_proto_owned(proto.clone())
    }

    /// [`Shape::from_proto`] taking the proto: its vectors become the shape's, not copies (the
    /// module decode converts a shape per instruction).
    pub(crate) fn from_proto_owned(proto: raw::ShapeProto) -> Result<Shape> {
        let raw::ShapeProto { element_type, dimensions, tuple_shapes, layout, is_dynamic_dimension } = proto;
        let element_type = PrimitiveType::from_proto(element_type);
        limits::check(Limit::Rank, dimensions.len() as u64, Location::default)?;
        if let Some(d) = dimensions.iter().find(|d| **d < 0) {
            return Err(invalid(format!("negative dimension {d}")));
        }
        let tuple = tuple_shapes.into_iter().map(Shape::from_proto_owned).collect::<Result<Vec<_>>>()?;
        let layout = match layout {
            None => None,
            Some(l) => {
                check_minor_to_major(dimensions.len(), &l.minor_to_major)?;
                Some(Layout {
                    minor_to_major: l.minor_to_major,
                    tiles: l.tiles.into_iter().map(|t| t.dimensions).collect(),
                    element_size_in_bits: u64::try_from(l.element_size_in_bits).unwrap_or(0),
                    memory_space: l.memory_space,
                    tail_padding_alignment: u64::try_from(l.tail_padding_alignment_in_elements).unwrap_or(0),
                })
            }
        };
        // No dynamic dimension reads as no flags: XLA writes one `false` per dimension.
        let dynamic = if is_dynamic_dimension.contains(&true) { is_dynamic_dimension } else { Vec::new() };
        Ok(Shape { element_type, dims: dimensions, dynamic, tuple, layout })
    }

    /// The element type ([`PrimitiveType::Tuple`] for tuples).
    pub fn element_type(&self) -> PrimitiveType {
        self.element_type
    }

    /// Dimension sizes (empty for scalars and tuples).
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// True for a tuple.
    pub fn is_tuple(&self) -> bool {
        self.element_type == PrimitiveType::Tuple
    }

    /// True for an array (including scalars).
    pub fn is_array(&self) -> bool {
        self.element_type.is_array()
    }

    /// Whether dimension `i` is dynamic (its size is an upper bound).
    pub fn is_dynamic_dimension(&self, i: usize) -> bool {
        self.dynamic.get(i).copied().unwrap_or(false)
    }

    /// The tuple's element shapes (empty for arrays).
    pub fn tuple_shapes(&self) -> &[Shape] {
        &self.tuple
    }

    /// The layout, when the producer recorded one (optimized modules always do).
    pub fn layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }

    /// The memory space of an array's layout (0 when there is none).
    pub fn memory_space(&self) -> i64 {
        self.layout.as_ref().map_or(0, |l| l.memory_space)
    }

    /// The subshape at a shape index (`[]` is the shape itself); `None` when out of range.
    pub fn subshape(&self, index: &[i64]) -> Option<&Shape> {
        let mut s = self;
        for &i in index {
            s = s.tuple.get(usize::try_from(i).ok()?)?;
        }
        Some(s)
    }

    /// The array leaves, depth first (an array is its own only leaf).
    pub fn leaves(&self) -> Vec<&Shape> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves<'a>(&'a self, out: &mut Vec<&'a Shape>) {
        if self.is_tuple() {
            for t in &self.tuple {
                t.collect_leaves(out);
            }
        } else {
            out.push(self);
        }
    }

    /// Elements of an array (1 for a scalar, 0 for tuples and tokens).
    pub fn element_count(&self) -> u64 {
        if !self.is_array() {
            return 0;
        }
        self.dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d.max(0) as u64))
    }

    /// Elements summed over all array leaves.
    pub fn element_count_recursive(&self) -> u64 {
        self.leaves().iter().fold(0u64, |acc, s| acc.saturating_add(s.element_count()))
    }

    fn bits_per_element(&self) -> u64 {
        match self.layout.as_ref().map(|l| l.element_size_in_bits) {
            Some(bits) if bits > 0 => bits,
            _ => self.element_type.byte_size() * 8,
        }
    }

    /// Bytes of the data itself, summed over array leaves, without the padding a device layout
    /// adds: elements × element size (packed when the layout says so).
    pub fn logical_bytes(&self) -> u64 {
        if self.is_tuple() {
            return self.tuple.iter().fold(0u64, |acc, t| acc.saturating_add(t.logical_bytes()));
        }
        self.element_count().saturating_mul(self.bits_per_element()).div_ceil(8)
    }

    /// Bytes XLA's `ShapeUtil::ByteSizeOf(shape, pointer_size = 8)` reports: an array's logical
    /// bytes, and for a tuple only its index table (8 bytes per element). This is the size the
    /// cost analysis and buffer assignment charge.
    pub fn byte_size(&self) -> u64 {
        match self.element_type {
            PrimitiveType::Tuple => POINTER_SIZE.saturating_mul(self.tuple.len() as u64),
            PrimitiveType::OpaqueType => POINTER_SIZE,
            _ => self.logical_bytes(),
        }
    }

    /// Dimension sizes in physical order, major to minor (the layout's reverse minor-to-major;
    /// the logical order when there is no layout).
    pub fn physical_dims(&self) -> Vec<u64> {
        let dims: Vec<u64> = self.dims.iter().map(|&d| d.max(0) as u64).collect();
        match self.layout.as_ref().map(|l| l.minor_to_major.as_slice()) {
            Some(m2m) if m2m.len() == dims.len() => m2m.iter().rev().map(|&d| dims[d as usize]).collect(),
            _ => dims,
        }
    }

    /// Bytes on a TPU: the layout's own tiles when it has them, else the default TPU tiling of
    /// the two minor-most physical dimensions ([`Tile2D::tpu_default`]); rank-1 arrays are
    /// padded to whole tiles, scalars are not padded. Summed over array leaves.
    ///
    /// ```
    /// use xlens_hlo::{PrimitiveType, Shape};
    /// // bf16[3, 100] occupies one (16, 128) tile: 2048 elements × 2 bytes.
    /// let s = Shape::array(PrimitiveType::Bf16, &[3, 100]).with_minor_to_major(&[1, 0]);
    /// assert_eq!((s.logical_bytes(), s.tpu_padded_bytes()), (600, 4096));
    /// ```
    pub fn tpu_padded_bytes(&self) -> u64 {
        if self.is_tuple() {
            return self.tuple.iter().fold(0u64, |acc, t| acc.saturating_add(t.tpu_padded_bytes()));
        }
        if !self.is_array() {
            return 0;
        }
        match self.layout.as_ref() {
            Some(l) if !l.tiles.is_empty() => self.tiled_bytes(&l.tiles),
            _ => self.padded_bytes(Tile2D::tpu_default(self.element_type)),
        }
    }

    /// Bytes after padding the two minor-most physical dimensions to multiples of `tile`
    /// (a rank-1 array to whole `sublanes × lanes` tiles), summed over array leaves.
    pub fn padded_bytes(&self, tile: Tile2D) -> u64 {
        if self.is_tuple() {
            return self.tuple.iter().fold(0u64, |acc, t| acc.saturating_add(t.padded_bytes(tile)));
        }
        if !self.is_array() {
            return 0;
        }
        let mut phys = self.physical_dims();
        let n = phys.len();
        match n {
            0 => {}
            1 => phys[0] = round_up(phys[0], tile.sublanes.saturating_mul(tile.lanes)),
            _ => {
                phys[n - 1] = round_up(phys[n - 1], tile.lanes);
                phys[n - 2] = round_up(phys[n - 2], tile.sublanes);
            }
        }
        self.bytes_of_elements(product(&phys))
    }

    /// Applies XLA tiles in order: each tile rounds the minor-most dimensions up to its sizes
    /// and splits them into (tile count, tile size) dimensions; later tiles apply to the result.
    fn tiled_bytes(&self, tiles: &[Vec<i64>]) -> u64 {
        let mut dims = self.physical_dims();
        for tile in tiles {
            if tile.is_empty() || tile.len() > dims.len() {
                continue;
            }
            let k = tile.len();
            let split = dims.len() - k;
            let mut counts = Vec::with_capacity(k);
            let mut sizes = Vec::with_capacity(k);
            for (i, &t) in tile.iter().enumerate() {
                let d = dims[split + i];
                // A non-positive tile size combines the dimension instead of tiling it.
                let t = if t > 0 { t as u64 } else { d.max(1) };
                counts.push(d.div_ceil(t.max(1)));
                sizes.push(t);
            }
            dims.truncate(split);
            dims.extend(counts);
            dims.extend(sizes);
        }
        self.bytes_of_elements(product(&dims))
    }

    fn bytes_of_elements(&self, elements: u64) -> u64 {
        let align = self.layout.as_ref().map_or(1, Layout::tail_padding_alignment);
        round_up(elements, align).saturating_mul(self.bits_per_element()).div_ceil(8)
    }
}

fn product(dims: &[u64]) -> u64 {
    dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
}

fn round_up(value: u64, multiple: u64) -> u64 {
    if multiple <= 1 { value } else { value.div_ceil(multiple).saturating_mul(multiple) }
}

#[cold]
fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::InvalidShape(msg), Location::default())
}

impl fmt::Display for Shape {
    /// The HLO text form: `f32[8,512]{1,0}`, `(f32[], s32[4]{0})`, `token[]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_tuple() {
            f.write_str("(")?;
            for (i, t) in self.tuple.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{t}")?;
            }
            return f.write_str(")");
        }
        write!(f, "{}[", self.element_type)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if self.is_dynamic_dimension(i) {
                f.write_str("<=")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        if let Some(l) = &self.layout
            && !self.dims.is_empty()
            && self.is_array()
        {
            f.write_str("{")?;
            for (i, d) in l.minor_to_major.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{d}")?;
            }
            // XLA's `Layout::ToString`: `:` before the tiles and memory space, one `T` before
            // the tiles (`{1,0:T(8,128)(2,1)S(5)}`).
            if !l.tiles.is_empty() || l.memory_space != 0 {
                f.write_str(":")?;
            }
            if !l.tiles.is_empty() {
                f.write_str("T")?;
                for t in &l.tiles {
                    let dims: Vec<String> = t.iter().map(|d| d.to_string()).collect();
                    write!(f, "({})", dims.join(","))?;
                }
            }
            if l.memory_space != 0 {
                write!(f, "S({})", l.memory_space)?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(et: i32, dims: &[i64], m2m: &[i64]) -> raw::ShapeProto {
        raw::ShapeProto {
            element_type: et,
            dimensions: dims.to_vec(),
            layout: Some(raw::LayoutProto { minor_to_major: m2m.to_vec(), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn logical_and_padded_bytes() {
        let f32_ = Shape::from_proto(&proto(11, &[8, 512], &[1, 0])).unwrap();
        assert_eq!((f32_.logical_bytes(), f32_.tpu_padded_bytes()), (16384, 16384));
        // Column-major: the minor dim is 8, padded to 128; the second-minor 512 is a multiple of 8.
        let cm = Shape::from_proto(&proto(11, &[8, 512], &[0, 1])).unwrap();
        assert_eq!(cm.tpu_padded_bytes(), 128 * 512 * 4);
        let s8 = Shape::from_proto(&proto(2, &[3, 130], &[1, 0])).unwrap();
        assert_eq!(s8.tpu_padded_bytes(), 32 * 256);
        let v = Shape::from_proto(&proto(11, &[10], &[0])).unwrap();
        assert_eq!(v.tpu_padded_bytes(), 1024 * 4);
        let scalar = Shape::from_proto(&proto(16, &[], &[])).unwrap();
        assert_eq!((scalar.logical_bytes(), scalar.tpu_padded_bytes()), (2, 2));
        let t = Shape::tuple(vec![f32_.clone(), scalar.clone()]);
        assert_eq!((t.logical_bytes(), t.byte_size(), t.element_count_recursive()), (16386, 16, 4097));
        assert_eq!(t.to_string(), "(f32[8,512]{1,0}, bf16[])");
    }

    #[test]
    fn explicit_tiles_are_applied_in_order() {
        let mut p = proto(16, &[3, 100], &[1, 0]);
        p.layout.as_mut().unwrap().tiles =
            vec![raw::TileProto { dimensions: vec![8, 128] }, raw::TileProto { dimensions: vec![2, 1] }];
        let s = Shape::from_proto(&p).unwrap();
        assert_eq!(s.tpu_padded_bytes(), 8 * 128 * 2);
        assert_eq!(s.to_string(), "bf16[3,100]{1,0:T(8,128)(2,1)}");
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(Shape::from_proto(&proto(11, &[-1], &[0])).is_err());
        assert!(Shape::from_proto(&proto(11, &[2, 2], &[0, 0])).is_err());
        assert!(Shape::from_proto(&proto(11, &[2, 2], &[2, 0])).is_err());
        assert!(Shape::from_proto(&proto(11, &[2, 2], &[0])).is_err());
        let huge = Shape::from_proto(&proto(11, &[i64::MAX, i64::MAX], &[1, 0])).unwrap();
        assert_eq!(huge.logical_bytes(), u64::MAX / 8 + 1);
        assert_eq!(huge.element_count(), u64::MAX);
    }

    #[test]
    fn sub_byte_types() {
        assert_eq!(PrimitiveType::S4.byte_size(), 1);
        assert_eq!(Tile2D::tpu_default(PrimitiveType::S4).sublanes, 64);
        assert_eq!(Tile2D::tpu_default(PrimitiveType::Pred).sublanes, 32);
        assert_eq!(Tile2D::tpu_default(PrimitiveType::F64).sublanes, 8);
        assert_eq!(Tile2D::tpu_default(PrimitiveType::F32).sublanes, 8);
        assert_eq!(Tile2D::tpu_default(PrimitiveType::Bf16).sublanes, 16);
        assert_eq!(Tile2D::tpu_default(PrimitiveType::S8).sublanes, 32);
    }
}
