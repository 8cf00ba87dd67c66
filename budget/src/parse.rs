//! Parsing command-line sizes into typed values, with typed errors for bad input.

use crate::error::{Error, ErrorKind, Result};
use crate::plan::Budget;

/// Parses a positive count: digits (`7000000000`), scientific (`7e9`), or a number with a
/// decimal suffix `K` (10^3), `M` (10^6), `B`/`G` (10^9), `T` (10^12): `7B`, `1.5B`, `32K`.
///
/// Zero, negative numbers, fractions and values above `u64::MAX` are errors.
///
/// ```
/// use xlens_budget::parse::count;
/// assert_eq!(count("params", "7B")?, 7_000_000_000);
/// assert_eq!(count("params", "1.5e9")?, 1_500_000_000);
/// assert_eq!(count("seq", "32K")?, 32_000);
/// assert!(count("params", "-7B").unwrap_err().is_non_positive());
/// assert!(count("params", "0").unwrap_err().is_non_positive());
/// assert!(count("params", "1e30").unwrap_err().is_overflow());
/// assert!(count("layers", "2.5").is_err());
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn count(what: &'static str, text: &str) -> Result<u64> {
    let t = text.trim();
    let parse_err = || {
        Error::new(ErrorKind::Parse {
            what,
            value: text.to_owned(),
            expected: "a whole number such as 4096, 7e9, 7B or 32K",
        })
    };
    if t.starts_with('-') {
        return Err(Error::new(ErrorKind::Negative { what, value: text.to_owned() }));
    }
    let (num, scale) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() && !t[..i].is_empty() && !t[..i].ends_with(['e', 'E']) => {
            let scale = match c.to_ascii_uppercase() {
                'K' => 1e3,
                'M' => 1e6,
                'B' | 'G' => 1e9,
                'T' => 1e12,
                _ => return Err(parse_err()),
            };
            (&t[..i], scale)
        }
        _ => (t, 1.0),
    };
    if let Ok(v) = num.parse::<u64>() {
        let v = if scale == 1.0 { Some(v) } else { v.checked_mul(scale as u64) };
        return match v {
            Some(0) => Err(Error::zero(what)),
            Some(v) => Ok(v),
            None => Err(Error::overflow(what)),
        };
    }
    let v: f64 = num.parse().map_err(|_| parse_err())?;
    let v = v * scale;
    if !v.is_finite() && !v.is_nan() || v >= 18_446_744_073_709_551_616.0 {
        return Err(Error::overflow(what));
    }
    if v.is_nan() || v.fract() != 0.0 {
        return Err(parse_err());
    }
    if v < 0.0 {
        return Err(Error::new(ErrorKind::Negative { what, value: text.to_owned() }));
    }
    if v == 0.0 {
        return Err(Error::zero(what));
    }
    Ok(v as u64)
}

/// Parses a budget fraction in (0, 1]: `0.8` or `80%`.
///
/// ```
/// use xlens_budget::parse::budget;
/// assert_eq!(budget("0.8")?.fraction(), 0.8);
/// assert_eq!(budget("90%")?.fraction(), 0.9);
/// assert!(budget("1.5").is_err() && budget("0").is_err() && budget("x").is_err());
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn budget(text: &str) -> Result<Budget> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (t, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        Error::new(ErrorKind::Parse {
            what: "budget",
            value: text.to_owned(),
            expected: "a fraction such as 0.8 or 80%",
        })
    })?;
    Budget::new(v * scale)
}
