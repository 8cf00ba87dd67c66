//! Precision audits: how far BF16 and INT8 matmuls, and BF16 accumulation, land from an f64
//! reference, next to the error bounds theory gives.
//!
//! - **BF16 operands** ([`Scheme::Bf16`]): both operands rounded to bf16 (round-to-nearest-even,
//!   via [`half`]), products accumulated in f32 as the MXU does with
//!   `preferred_element_type=float32`. Products of two bf16 values are exact in f32, so the error
//!   is the operand rounding plus the f32 accumulation.
//! - **INT8** ([`Scheme::Int8PerTensor`], [`Scheme::Int8PerChannel`]): symmetric quantisation,
//!   scale = max|x| / 127, `q = round(x / scale)`; the left operand per tensor or per row
//!   (token), the right operand per tensor or per column (output channel); exact integer
//!   accumulation, then dequantisation.
//! - **Accumulation drift** ([`accumulation_drift`]): a long dot product accumulated in bf16
//!   (rounded after every addition, as when partial sums are stored in bf16) against f32.
//!
//! Errors ([`ErrorStats`]) are measured against an f64 product of the unrounded f32 operands:
//! max absolute error, relative Frobenius error `‖Ĉ − C‖_F / ‖C‖_F`, and the median and max
//! error in bf16 ULPs of the reference value.
//!
//! ```
//! use xlens_budget::precision::{AuditSpec, Scheme, audit_matmul};
//! let rows = audit_matmul(&AuditSpec::normal(64, 256, 64, 7), &Scheme::ALL)?;
//! let (bf16, int8) = (&rows[0], &rows[2]);
//! assert_eq!((bf16.scheme, int8.scheme), (Scheme::Bf16, Scheme::Int8PerChannel));
//! assert!(bf16.error.rel_frobenius < bf16.bound);
//! // Close to the independent-rounding estimate, about 0.0023 for N(0, 1) operands.
//! assert!((bf16.error.rel_frobenius / bf16.estimate.unwrap() - 1.0).abs() < 0.2);
//! assert!(int8.error.rel_frobenius > bf16.error.rel_frobenius); // 8 bits of range vs 8 of significand
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use half::bf16;

use crate::error::{Error, ErrorKind, Result};
pub use crate::rng::SplitMix64;

/// bf16 unit roundoff: 2^-8 (8 significant bits).
pub const BF16_UNIT_ROUNDOFF: f64 = 1.0 / 256.0;
/// f32 unit roundoff: 2^-24.
pub const F32_UNIT_ROUNDOFF: f64 = 1.0 / 16_777_216.0;
/// E[1/m²] for significands m log-uniform on [1, 2) (Benford): (1/ln 2)(1/2 − 1/8).
const BENFORD_INV_M2: f64 = 0.375 / std::f64::consts::LN_2;

/// How matrix entries are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Normal with this mean and standard deviation.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Uniform on [low, high).
    Uniform {
        /// Lower end.
        low: f64,
        /// Upper end.
        high: f64,
    },
    /// N(0, std²), with every `every`-th column (from column 0) scaled by `scale`: outlier
    /// channels, as in LLM weights and activations.
    OutlierColumns {
        /// Standard deviation of ordinary columns.
        std: f64,
        /// Outlier period in columns (at least 1).
        every: usize,
        /// Factor applied to outlier columns.
        scale: f64,
    },
}

impl Distribution {
    /// N(0, 1).
    pub const fn normal() -> Distribution {
        Distribution::Normal { mean: 0.0, std: 1.0 }
    }

    /// U(0, 1).
    pub const fn unit_uniform() -> Distribution {
        Distribution::Uniform { low: 0.0, high: 1.0 }
    }

    fn sample(&self, rng: &mut SplitMix64, col: usize) -> f64 {
        match *self {
            Distribution::Normal { mean, std } => mean + std * rng.normal(),
            Distribution::Uniform { low, high } => low + (high - low) * rng.uniform(),
            Distribution::OutlierColumns { std, every, scale } => {
                let s = if col.is_multiple_of(every.max(1)) { std * scale } else { std };
                s * rng.normal()
            }
        }
    }
}

impl fmt::Display for Distribution {
    /// `N(0,1)`, `U(0,1)`, `N(0,1) outliers x100 every 64 cols`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Normal { mean, std } => write!(f, "N({mean},{})", std * std),
            Distribution::Uniform { low, high } => write!(f, "U({low},{high})"),
            Distribution::OutlierColumns { std, every, scale } => {
                write!(f, "N(0,{}) outliers x{scale} every {every} cols", std * std)
            }
        }
    }
}

/// A dense row-major f32 matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

impl Matrix {
    /// A matrix from row-major data; the length must be `rows × cols`.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Matrix> {
        let len = rows.checked_mul(cols).ok_or_else(|| Error::overflow("matrix size"))?;
        if rows == 0 || cols == 0 {
            return Err(Error::zero("matrix dimension"));
        }
        if data.len() != len {
            return Err(Error::new(ErrorKind::Matrix(format!("{rows}x{cols} needs {len} values, got {}", data.len()))));
        }
        Ok(Matrix { rows, cols, data })
    }

    /// A matrix of values drawn from `dist` (rounded to f32), row by row.
    pub fn random(rows: usize, cols: usize, dist: &Distribution, rng: &mut SplitMix64) -> Result<Matrix> {
        let len = rows.checked_mul(cols).ok_or_else(|| Error::overflow("matrix size"))?;
        let mut data = Vec::with_capacity(len);
        for _ in 0..rows {
            for j in 0..cols {
                data.push(dist.sample(rng, j) as f32);
            }
        }
        Matrix::new(rows, cols, data)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row-major values.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// Frobenius norm, in f64.
    pub fn frobenius(&self) -> f64 {
        self.data.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt()
    }

    /// Every value rounded to bf16 (round-to-nearest-even) and back to f32.
    pub fn to_bf16(&self) -> Matrix {
        let data = self.data.iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
        Matrix { rows: self.rows, cols: self.cols, data }
    }
}

/// A matmul scheme under audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// bf16 operands, f32 accumulation.
    Bf16,
    /// int8 operands, one scale per operand.
    Int8PerTensor,
    /// int8 operands, a scale per row of the left and per column of the right operand.
    Int8PerChannel,
}

impl Scheme {
    /// Every scheme.
    pub const ALL: [Scheme; 3] = [Scheme::Bf16, Scheme::Int8PerTensor, Scheme::Int8PerChannel];

    /// `"bf16"`, `"int8-per-tensor"`, `"int8-per-channel"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Bf16 => "bf16",
            Scheme::Int8PerTensor => "int8-per-tensor",
            Scheme::Int8PerChannel => "int8-per-channel",
        }
    }
}

/// Where int8 scales apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// One scale for the whole matrix.
    PerTensor,
    /// One scale per channel (row of the left operand, column of the right).
    PerChannel,
}

/// Error of an approximate result against an f64 reference.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorStats {
    /// max |ĉ − c|.
    pub max_abs: f64,
    /// ‖Ĉ − C‖_F / ‖C‖_F.
    pub rel_frobenius: f64,
    /// Median |ĉ − c| in bf16 ULPs of c (2^(e−7) for |c| in [2^e, 2^(e+1))).
    pub median_ulps: f64,
    /// Max |ĉ − c| in bf16 ULPs of c.
    pub max_ulps: f64,
}

/// One scheme's audit on one shape and distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulAudit {
    /// The scheme.
    pub scheme: Scheme,
    /// Rows of the left operand.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Columns of the right operand.
    pub n: usize,
    /// The left operand's distribution.
    pub a: Distribution,
    /// The right operand's distribution.
    pub b: Distribution,
    /// Measured error.
    pub error: ErrorStats,
    /// Rigorous bound on the relative Frobenius error. bf16:
    /// `(2u + u² + γ_{K−1}(1+u)²) ‖A‖_F ‖B‖_F / ‖C‖_F` with u = 2^-8 and γ for f32. int8: the
    /// Frobenius norm of the elementwise bound `(s_b/2) Σ|a| + (s_a/2) Σ|b̂|` (plus f32 output
    /// rounding), over ‖C‖_F.
    pub bound: f64,
    /// Expected relative Frobenius error under independent rounding errors (bf16 only):
    /// `√2 · 2^-7 · √(E[1/m²] / 12)` with Benford-distributed significands m, ≈ 0.0024.
    pub estimate: Option<f64>,
}

/// The f64 product `A · B` of the f32 operands: the reference.
pub fn matmul_f64(a: &Matrix, b: &Matrix) -> Result<Vec<f64>> {
    check_shapes(a, b)?;
    let (k, n) = (a.cols, b.cols);
    let bd: Vec<f64> = b.data.iter().map(|&x| f64::from(x)).collect();
    let mut out = vec![0f64; a.rows * n];
    par_rows(&mut out, n, |i, row| {
        for kk in 0..k {
            axpy(row, f64::from(a.data[i * k + kk]), &bd[kk * n..(kk + 1) * n]);
        }
    });
    Ok(out)
}

/// `A · B` with operands rounded to bf16 and products accumulated in f32, in order of `k`.
pub fn matmul_bf16(a: &Matrix, b: &Matrix) -> Result<Vec<f32>> {
    check_shapes(a, b)?;
    let (a, b) = (a.to_bf16(), b.to_bf16());
    let (k, n) = (a.cols, b.cols);
    let mut out = vec![0f32; a.rows * n];
    par_rows(&mut out, n, |i, row| {
        for kk in 0..k {
            axpy(row, a.data[i * k + kk], &b.data[kk * n..(kk + 1) * n]);
        }
    });
    Ok(out)
}

/// Symmetrically quantised int8 values with their scales.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    /// Quantised values, row-major like the source.
    pub values: Vec<i8>,
    /// One scale (per tensor) or one per channel.
    pub scales: Vec<f32>,
}

/// Quantises `m` along rows (a scale per row, per channel) or as a whole: scale = max|x| / 127
/// (1 for an all-zero channel), `q = round(x / scale)` clamped to ±127.
pub fn quantize_rows(m: &Matrix, granularity: Granularity) -> Quantized {
    quantize(m, granularity, true)
}

/// Quantises `m` along columns (a scale per column, per channel) or as a whole.
pub fn quantize_cols(m: &Matrix, granularity: Granularity) -> Quantized {
    quantize(m, granularity, false)
}

fn quantize(m: &Matrix, granularity: Granularity, by_rows: bool) -> Quantized {
    let channels = match (granularity, by_rows) {
        (Granularity::PerTensor, _) => 1,
        (Granularity::PerChannel, true) => m.rows,
        (Granularity::PerChannel, false) => m.cols,
    };
    let channel = |i: usize, j: usize| match (granularity, by_rows) {
        (Granularity::PerTensor, _) => 0,
        (Granularity::PerChannel, true) => i,
        (Granularity::PerChannel, false) => j,
    };
    let mut max = vec![0f32; channels];
    for i in 0..m.rows {
        for j in 0..m.cols {
            let c = channel(i, j);
            max[c] = max[c].max(m.data[i * m.cols + j].abs());
        }
    }
    let scales: Vec<f32> = max.iter().map(|&x| if x > 0.0 { x / 127.0 } else { 1.0 }).collect();
    let mut values = Vec::with_capacity(m.data.len());
    for i in 0..m.rows {
        for j in 0..m.cols {
            let q = (m.data[i * m.cols + j] / scales[channel(i, j)]).round().clamp(-127.0, 127.0);
            values.push(q as i8);
        }
    }
    Quantized { values, scales }
}

/// `A · B` in int8: A quantised by rows, B by columns, at the given granularity; exact integer
/// accumulation; dequantised `ĉ_ij = s_a(i) · s_b(j) · Σ q_a q_b`, rounded once to f32.
pub fn matmul_int8(a: &Matrix, b: &Matrix, granularity: Granularity) -> Result<Vec<f32>> {
    check_shapes(a, b)?;
    let (qa, qb) = (quantize_rows(a, granularity), quantize_cols(b, granularity));
    Ok(int8_product(a, b, &qa, &qb))
}

fn int8_product(a: &Matrix, b: &Matrix, qa: &Quantized, qb: &Quantized) -> Vec<f32> {
    let (k, n) = (a.cols, b.cols);
    let sa = |i: usize| f64::from(qa.scales[if qa.scales.len() == 1 { 0 } else { i }]);
    let sb = |j: usize| f64::from(qb.scales[if qb.scales.len() == 1 { 0 } else { j }]);
    let mut out = vec![0f32; a.rows * n];
    // int32 accumulation, as on hardware, is exact while K · 127² fits; beyond that, int64.
    if (k as u64).saturating_mul(127 * 127) <= i32::MAX as u64 {
        let bq: Vec<i32> = qb.values.iter().map(|&v| i32::from(v)).collect();
        par_rows(&mut out, n, |i, row| {
            let mut acc = vec![0i32; n];
            for kk in 0..k {
                axpy(&mut acc, i32::from(qa.values[i * k + kk]), &bq[kk * n..(kk + 1) * n]);
            }
            for (j, (o, &c)) in row.iter_mut().zip(&acc).enumerate() {
                *o = (sa(i) * sb(j) * f64::from(c)) as f32;
            }
        });
    } else {
        let bq: Vec<i64> = qb.values.iter().map(|&v| i64::from(v)).collect();
        par_rows(&mut out, n, |i, row| {
            let mut acc = vec![0i64; n];
            for kk in 0..k {
                axpy(&mut acc, i64::from(qa.values[i * k + kk]), &bq[kk * n..(kk + 1) * n]);
            }
            for (j, (o, &c)) in row.iter_mut().zip(&acc).enumerate() {
                *o = (sa(i) * sb(j) * c as f64) as f32;
            }
        });
    }
    out
}

/// Error statistics of `approx` against `reference` (same length).
pub fn error_stats(approx: &[f32], reference: &[f64]) -> ErrorStats {
    let mut max_abs = 0f64;
    let mut err2 = 0f64;
    let mut ref2 = 0f64;
    let mut ulps: Vec<f64> = Vec::with_capacity(reference.len());
    for (&x, &r) in approx.iter().zip(reference) {
        let e = (f64::from(x) - r).abs();
        max_abs = max_abs.max(e);
        err2 += e * e;
        ref2 += r * r;
        ulps.push(e / bf16_ulp(r));
    }
    let max_ulps = ulps.iter().copied().fold(0.0, f64::max);
    let median_ulps = if ulps.is_empty() {
        0.0
    } else {
        let mid = ulps.len() / 2;
        *ulps.select_nth_unstable_by(mid, f64::total_cmp).1
    };
    let rel_frobenius = if ref2 > 0.0 { (err2 / ref2).sqrt() } else { err2.sqrt() };
    ErrorStats { max_abs, rel_frobenius, median_ulps, max_ulps }
}

/// The bf16 ULP at `x`: 2^(e−7) for |x| in [2^e, 2^(e+1)); the subnormal spacing 2^-133 below
/// the smallest normal.
pub fn bf16_ulp(x: f64) -> f64 {
    let a = x.abs();
    if a < f64::from(f32::MIN_POSITIVE) {
        return (-133f64).exp2();
    }
    (a.log2().floor() - 7.0).exp2()
}

/// What to audit: an `m × k` by `k × n` product with operands drawn from `a` and `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AuditSpec {
    /// Rows of the left operand (tokens).
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Columns of the right operand (output channels).
    pub n: usize,
    /// Left operand distribution.
    pub a: Distribution,
    /// Right operand distribution.
    pub b: Distribution,
    /// Generator seed; the same seed gives the same figures.
    pub seed: u64,
}

impl AuditSpec {
    /// An `m × k` by `k × n` product of N(0, 1) operands.
    pub fn normal(m: usize, k: usize, n: usize, seed: u64) -> AuditSpec {
        AuditSpec { m, k, n, a: Distribution::normal(), b: Distribution::normal(), seed }
    }
}

/// Audits the given schemes on one product: operands drawn once, one f64 reference, one row per
/// scheme.
pub fn audit_matmul(spec: &AuditSpec, schemes: &[Scheme]) -> Result<Vec<MatmulAudit>> {
    let AuditSpec { m, k, n, a, b, seed } = *spec;
    let mut rng = SplitMix64::new(seed);
    let ma = Matrix::random(m, k, &a, &mut rng)?;
    let mb = Matrix::random(k, n, &b, &mut rng)?;
    let reference = matmul_f64(&ma, &mb)?;
    let ref_norm = reference.iter().map(|x| x * x).sum::<f64>().sqrt();
    let mut rows = Vec::with_capacity(schemes.len());
    for &scheme in schemes {
        let (approx, bound, estimate) = match scheme {
            Scheme::Bf16 => {
                let u = BF16_UNIT_ROUNDOFF;
                let accumulation = gamma(k.saturating_sub(1), F32_UNIT_ROUNDOFF).unwrap_or(f64::INFINITY);
                let c = 2.0 * u + u * u + accumulation * (1.0 + u).powi(2);
                let bound = c * ma.frobenius() * mb.frobenius() / ref_norm;
                let estimate = std::f64::consts::SQRT_2 * 2f64.powi(-7) * (BENFORD_INV_M2 / 12.0).sqrt();
                (matmul_bf16(&ma, &mb)?, bound, Some(estimate))
            }
            Scheme::Int8PerTensor | Scheme::Int8PerChannel => {
                let g = if scheme == Scheme::Int8PerTensor { Granularity::PerTensor } else { Granularity::PerChannel };
                let (qa, qb) = (quantize_rows(&ma, g), quantize_cols(&mb, g));
                let approx = int8_product(&ma, &mb, &qa, &qb);
                let bound = int8_bound(&ma, &mb, &qa, &qb, &approx) / ref_norm;
                (approx, bound, None)
            }
        };
        rows.push(MatmulAudit { scheme, m, k, n, a, b, error: error_stats(&approx, &reference), bound, estimate });
    }
    Ok(rows)
}

/// ‖elementwise bound‖_F for the int8 product: `(s_b(j)/2) Σ_k |a_ik| + (s_a(i)/2) Σ_k |b̂_kj|`
/// plus 2^-23 |ĉ_ij| for the f32 output.
fn int8_bound(a: &Matrix, b: &Matrix, qa: &Quantized, qb: &Quantized, approx: &[f32]) -> f64 {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let sa = |i: usize| f64::from(qa.scales[if qa.scales.len() == 1 { 0 } else { i }]);
    let sb = |j: usize| f64::from(qb.scales[if qb.scales.len() == 1 { 0 } else { j }]);
    let row_abs: Vec<f64> =
        (0..m).map(|i| a.data[i * k..(i + 1) * k].iter().map(|&x| f64::from(x).abs()).sum()).collect();
    let mut col_abs = vec![0f64; n];
    for q_row in qb.values.chunks_exact(n) {
        for (j, (acc, &q)) in col_abs.iter_mut().zip(q_row).enumerate() {
            *acc += (f64::from(q) * sb(j)).abs();
        }
    }
    let mut sum = 0f64;
    for i in 0..m {
        for j in 0..n {
            let e = sb(j) / 2.0 * row_abs[i]
                + sa(i) / 2.0 * col_abs[j]
                + f64::from(approx[i * n + j]).abs() * 2f64.powi(-23);
            sum += e * e;
        }
    }
    sum.sqrt()
}

/// γ_n = n·u / (1 − n·u), `None` when n·u ≥ 1 (no bound).
pub fn gamma(n: usize, u: f64) -> Option<f64> {
    let nu = n as f64 * u;
    (nu < 1.0).then(|| nu / (1.0 - nu))
}

/// The accumulator of a long dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accumulator {
    /// Rounded to bf16 after every addition.
    Bf16,
    /// f32 (`preferred_element_type=float32`).
    F32,
}

impl Accumulator {
    /// `"bf16"` or `"f32"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Accumulator::Bf16 => "bf16",
            Accumulator::F32 => "f32",
        }
    }

    /// The accumulator's unit roundoff.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            Accumulator::Bf16 => BF16_UNIT_ROUNDOFF,
            Accumulator::F32 => F32_UNIT_ROUNDOFF,
        }
    }
}

/// Drift of one accumulator at one length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriftRow {
    /// Dot-product length.
    pub k: usize,
    /// The accumulator.
    pub accumulator: Accumulator,
    /// Mean over trials of |ŝ − s| / |s|.
    pub rel_error: f64,
    /// Recursive-summation bound γ_{K−1} Σ|x_i| / |s| (Higham, Accuracy and Stability of
    /// Numerical Algorithms, §4.2), the largest over trials; `None` when (K−1)·u ≥ 1 and the
    /// bound says nothing.
    pub bound: Option<f64>,
    /// First-order term (K−1)·u·Σ|x_i|/|s|, the largest over trials (shown where γ is void).
    pub first_order: f64,
}

/// Dot products of length K for each K in `ks`, operands drawn from `dist` and rounded to bf16
/// (their products are exact in f32), accumulated in order in bf16 and in f32 and compared with
/// the exact sum; `trials` independent vectors per K (seeded).
///
/// ```
/// use xlens_budget::precision::{Accumulator, Distribution, accumulation_drift};
/// let rows = accumulation_drift(&[256, 16384], &Distribution::unit_uniform(), 2, 1)?;
/// let err = |k, acc| rows.iter().find(|r| r.k == k && r.accumulator == acc).unwrap().rel_error;
/// assert!(err(16384, Accumulator::Bf16) > 10.0 * err(256, Accumulator::Bf16));
/// assert!(err(16384, Accumulator::F32) < 1e-5);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn accumulation_drift(ks: &[usize], dist: &Distribution, trials: usize, seed: u64) -> Result<Vec<DriftRow>> {
    if trials == 0 {
        return Err(Error::zero("trials"));
    }
    let mut rng = SplitMix64::new(seed);
    let mut rows = Vec::with_capacity(ks.len() * 2);
    for &k in ks {
        if k == 0 {
            return Err(Error::zero("dot-product length"));
        }
        let mut sums = [(0f64, None::<f64>, 0f64); 2];
        let mut bound_void = [false; 2];
        for _ in 0..trials {
            let products: Vec<f32> = (0..k)
                .map(|i| {
                    let x = bf16::from_f64(dist.sample(&mut rng, i)).to_f32();
                    let y = bf16::from_f64(dist.sample(&mut rng, i)).to_f32();
                    x * y
                })
                .collect();
            let exact: f64 = products.iter().map(|&p| f64::from(p)).sum();
            let abs_sum: f64 = products.iter().map(|&p| f64::from(p).abs()).sum();
            let mut acc_bf16 = 0f32;
            let mut acc_f32 = 0f32;
            for &p in &products {
                acc_bf16 = round_to_bf16(f64::from(acc_bf16) + f64::from(p));
                acc_f32 += p;
            }
            for (slot, (acc, got)) in
                [(Accumulator::Bf16, acc_bf16), (Accumulator::F32, acc_f32)].into_iter().enumerate()
            {
                let denom = exact.abs().max(f64::MIN_POSITIVE);
                let rel = (f64::from(got) - exact).abs() / denom;
                let u = acc.unit_roundoff();
                let scale = abs_sum / denom;
                let entry = &mut sums[slot];
                entry.0 += rel;
                match gamma(k - 1, u) {
                    Some(g) => entry.1 = Some(entry.1.unwrap_or(0.0).max(g * scale)),
                    None => bound_void[slot] = true,
                }
                entry.2 = entry.2.max((k - 1) as f64 * u * scale);
            }
        }
        for (slot, acc) in [Accumulator::Bf16, Accumulator::F32].into_iter().enumerate() {
            let (sum, bound, first_order) = sums[slot];
            rows.push(DriftRow {
                k,
                accumulator: acc,
                rel_error: sum / trials as f64,
                bound: if bound_void[slot] { None } else { bound },
                first_order,
            });
        }
    }
    Ok(rows)
}

/// Rounds an f64 to the nearest bf16 (ties to even) with a single rounding: round to f32 by
/// round-to-odd, then to bf16 by round-to-nearest-even (exact because f32 keeps 16 more bits).
pub fn round_to_bf16(x: f64) -> f32 {
    if !x.is_finite() {
        return bf16::from_f32(x as f32).to_f32();
    }
    let mut r = x as f32;
    if f64::from(r).abs() > x.abs() {
        // Step back toward zero: truncation.
        r = f32::from_bits(r.to_bits() - 1);
    }
    if f64::from(r) != x {
        r = f32::from_bits(r.to_bits() | 1);
    }
    bf16::from_f32(r).to_f32()
}

/// `c[j] = c[j] + a · b[j]` (no fused multiply-add), eight lanes at a time: this shape keeps
/// unoptimised test builds within a few seconds for 1024³ products.
fn axpy<T>(c: &mut [T], a: T, b: &[T])
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    let mut c_chunks = c.chunks_exact_mut(8);
    let mut b_chunks = b.chunks_exact(8);
    for (c8, b8) in (&mut c_chunks).zip(&mut b_chunks) {
        if let (Ok(c8), Ok(b8)) = (<&mut [T; 8]>::try_from(c8), <&[T; 8]>::try_from(b8)) {
            *c8 = [
                c8[0] + a * b8[0],
                c8[1] + a * b8[1],
                c8[2] + a * b8[2],
                c8[3] + a * b8[3],
                c8[4] + a * b8[4],
                c8[5] + a * b8[5],
                c8[6] + a * b8[6],
                c8[7] + a * b8[7],
            ];
        }
    }
    for (c, &b) in c_chunks.into_remainder().iter_mut().zip(b_chunks.remainder()) {
        *c = *c + a * b;
    }
}

fn check_shapes(a: &Matrix, b: &Matrix) -> Result<()> {
    if a.cols != b.rows {
        return Err(Error::new(ErrorKind::Matrix(format!(
            "cannot multiply {}x{} by {}x{}",
            a.rows, a.cols, b.rows, b.cols
        ))));
    }
    Ok(())
}

/// Runs `f(row_index, row)` over the rows of `out` (each `n` long) on up to
/// `available_parallelism` threads; output is independent of the thread count.
fn par_rows<T: Send>(out: &mut [T], n: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let rows = out.len() / n.max(1);
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).clamp(1, 16).min(rows.max(1));
    let per = rows.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (t, chunk) in out.chunks_mut(per * n).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (r, row) in chunk.chunks_mut(n).enumerate() {
                    f(t * per + r, row);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_to_bf16_is_single_rounding() {
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: ties to even gives 1.
        assert_eq!(round_to_bf16(1.0 + 2f64.powi(-8)), 1.0);
        // Just above the tie rounds up, even when the excess is below f32 precision.
        assert_eq!(round_to_bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-40)), 1.0 + 2f32.powi(-7));
        assert_eq!(round_to_bf16(-(1.0 + 2f64.powi(-8) + 2f64.powi(-40))), -(1.0 + 2f32.powi(-7)));
        assert_eq!(round_to_bf16(3.0), 3.0);
        assert_eq!(round_to_bf16(0.0), 0.0);
    }

    #[test]
    fn bf16_ulps() {
        assert_eq!(bf16_ulp(1.0), 2f64.powi(-7));
        assert_eq!(bf16_ulp(1.99), 2f64.powi(-7));
        assert_eq!(bf16_ulp(-3.0), 2f64.powi(-6));
        assert_eq!(bf16_ulp(0.0), 2f64.powi(-133));
    }

    #[test]
    fn quantize_per_channel_scales() {
        let m = Matrix::new(2, 2, vec![1.0, -254.0, 0.25, 0.0]).unwrap();
        let per_tensor = quantize_cols(&m, Granularity::PerTensor);
        assert_eq!(per_tensor.scales, [2.0]);
        assert_eq!(per_tensor.values, [1, -127, 0, 0]); // 1 / 2 rounds away from zero; 0.25 / 2 to 0
        let per_col = quantize_cols(&m, Granularity::PerChannel);
        assert_eq!(per_col.scales, [1.0 / 127.0, 2.0]);
        assert_eq!(per_col.values, [127, -127, 32, 0]); // 0.25 * 127 = 31.75
        let per_row = quantize_rows(&m, Granularity::PerChannel);
        assert_eq!(per_row.scales, [2.0, 0.25 / 127.0]);
    }

    #[test]
    fn shape_errors() {
        let a = Matrix::new(2, 3, vec![0.0; 6]).unwrap();
        assert!(matmul_f64(&a, &a).is_err());
        assert!(Matrix::new(2, 3, vec![0.0; 5]).is_err());
        assert!(Matrix::new(0, 3, vec![]).unwrap_err().is_non_positive());
    }

    #[test]
    fn exact_small_product() {
        let a = Matrix::new(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = Matrix::new(2, 2, vec![5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!(matmul_f64(&a, &b).unwrap(), [19.0, 22.0, 43.0, 50.0]);
        assert_eq!(matmul_bf16(&a, &b).unwrap(), [19.0, 22.0, 43.0, 50.0]);
        let int8 = matmul_int8(&a, &b, Granularity::PerChannel).unwrap();
        let stats = error_stats(&int8, &[19.0, 22.0, 43.0, 50.0]);
        assert!(stats.rel_frobenius < 0.01, "{stats:?}");
    }
}
