//! The encoding options of a tokenizer (SPEC section 2): the algorithm, λ (the boundary penalty)
//! and ε(t) (the token preference) on or off. Their defaults and their validation live here and
//! nowhere else: an [`Options`] value is checked when it is made ([`Options::new`] and the
//! `with_*` methods), so whoever receives one (a tokenizer, the filtering pass of training) uses
//! it as it is.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// λ when none is given: the penalty of a token that crosses into a second unit without covering
/// it (SPEC section 2).
pub const DEFAULT_BOUNDARY_PENALTY: f64 = 0.05;

/// The segmentation algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Min-cost encoding (SPEC section 2).
    #[default]
    Mce,
    /// Forward maximum matching: the longest token at each step, no unit rules.
    Fmm,
}

impl Algorithm {
    /// `"mce"` or `"fmm"`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Mce => "mce",
            Algorithm::Fmm => "fmm",
        }
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    /// `"mce"` or `"fmm"` (exactly; other spellings are refused).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "mce" => Ok(Algorithm::Mce),
            "fmm" => Ok(Algorithm::Fmm),
            _ => Err(Error::Value(format!("algorithm must be \"mce\" or \"fmm\", got {s:?}"))),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Encoding options (saved with a tokenizer). Always valid: λ is a number `>= 0` (`+∞` forbids
/// every partial crossing), never NaN, and `-0.0` is stored as `0.0`.
///
/// ```
/// use cnfmce::{Algorithm, Options};
/// let o = Options::default();
/// assert_eq!((o.algorithm(), o.boundary_penalty(), o.token_preference()), (Algorithm::Mce, 0.05, true));
/// let fmm = Options::new(Algorithm::Fmm, 0.2, false).unwrap();
/// assert_eq!(fmm.boundary_penalty(), 0.2);
/// assert!(Options::new(Algorithm::Mce, -1.0, true).is_err());
/// assert!(o.with_boundary_penalty(f64::NAN).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    // The fields are crate-visible so that the encoder reads them directly; outside the crate an
    // `Options` can only be made through the checked constructors.
    pub(crate) algorithm: Algorithm,
    /// λ: the penalty for a token that touches two units with an incomplete end.
    pub(crate) boundary_penalty: f64,
    /// ε(t) on or off.
    pub(crate) token_preference: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { algorithm: Algorithm::Mce, boundary_penalty: DEFAULT_BOUNDARY_PENALTY, token_preference: true }
    }
}

impl Options {
    /// Checked options (see the type's documentation for what λ may be).
    pub fn new(algorithm: Algorithm, boundary_penalty: f64, token_preference: bool) -> Result<Self, Error> {
        Ok(Options { algorithm, boundary_penalty: check_boundary_penalty(boundary_penalty)?, token_preference })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn boundary_penalty(&self) -> f64 {
        self.boundary_penalty
    }

    pub fn token_preference(&self) -> bool {
        self.token_preference
    }

    pub fn with_algorithm(self, algorithm: Algorithm) -> Self {
        Options { algorithm, ..self }
    }

    /// These options with another λ (checked).
    pub fn with_boundary_penalty(self, boundary_penalty: f64) -> Result<Self, Error> {
        Options::new(self.algorithm, boundary_penalty, self.token_preference)
    }

    pub fn with_token_preference(self, token_preference: bool) -> Self {
        Options { token_preference, ..self }
    }
}

/// λ as stored: `>= 0` or `+∞`; `-0.0` becomes `0.0`; NaN and negative values are refused.
fn check_boundary_penalty(lambda: f64) -> Result<f64, Error> {
    if lambda.is_nan() || lambda < 0.0 {
        let shown = if lambda.is_nan() { "nan".to_string() } else { lambda.to_string() };
        return Err(Error::Value(format!(
            "boundary_penalty must be >= 0 (infinity forbids partial crossings), got {shown}"
        )));
    }
    Ok(lambda + 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambda_is_checked_and_normalised() {
        for bad in [-1.0, -f64::INFINITY, f64::NAN, -1e-300] {
            assert!(Options::new(Algorithm::Mce, bad, true).is_err(), "{bad}");
        }
        let z = Options::new(Algorithm::Mce, -0.0, true).unwrap().boundary_penalty();
        assert!(z == 0.0 && z.is_sign_positive());
        assert_eq!(Options::new(Algorithm::Fmm, f64::INFINITY, false).unwrap().boundary_penalty(), f64::INFINITY);
    }

    #[test]
    fn algorithm_names() {
        for a in [Algorithm::Mce, Algorithm::Fmm] {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
        }
        assert!("MCE".parse::<Algorithm>().is_err());
        assert!("".parse::<Algorithm>().is_err());
    }
}
