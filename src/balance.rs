//! `balance`: the one control of a trained vocabulary's trade-off between the ASCII and the
//! non-ASCII parts of its training mix (English, science, maths and code against Chinese and the
//! other scripts and accented Latin). It sets the exponents of
//! [`SelectionRule::RefinedNonAscii`](crate::SelectionRule::RefinedNonAscii) (`crate::refine`
//! step 5: the smaller group's tokens saved weighted by the ratio of the two groups' usage to
//! that power) and of the raw vocabulary's Han-weighted cut (`crate::raw_cut`), at every
//! `vocab_size`, so that a user never sets them:
//!
//! - `balance = 0`: ids by tokens saved over the training mix as it is (exponents 0);
//! - `balance = 1`: the two groups get an equal say: non-ASCII exponent 1 at every size measured
//!   ([`BALANCE_ANCHORS`]); the Han-weighted raw cut was measured at 250k on the validation split
//!   and lost there (`docs/results/defaults.md`), so balance sets its exponent to 0;
//! - in between, both exponents in proportion.
//!
//! The anchors are interpolated linearly in `ln(vocab_size)` and held constant beyond the
//! smallest and the largest measured size. [`DEFAULT_BALANCE`] is the value the validation split
//! chose for the default vocabulary: 0 had the best mean gain over the six categories at 128k and
//! 250k, and no category below `selection="refined"`.

use crate::error::Error;

/// The balance of a training run that gives none (chosen on the validation split).
pub const DEFAULT_BALANCE: f64 = 0.0;

/// `(vocab_size, non-ASCII exponent at balance 1, raw Han exponent at balance 1)`, by size.
pub const BALANCE_ANCHORS: [(usize, f64, f64); 3] = [(32_000, 1.0, 0.0), (128_000, 1.0, 0.0), (250_000, 1.0, 0.0)];

/// The exponents `balance` sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalanceSettings {
    /// The exponent of [`SelectionRule::RefinedNonAscii`](crate::SelectionRule::RefinedNonAscii).
    pub non_ascii_exponent: f64,
    /// The Han weighting of the raw vocabulary's cut (`TrainConfig::raw_han_exponent`).
    pub raw_han_exponent: f64,
}

/// The exponents of `balance` (a number from 0 to 1) for a vocabulary of `vocab_size` ids.
pub fn balance_settings(balance: f64, vocab_size: usize) -> Result<BalanceSettings, Error> {
    if !(balance.is_finite() && (0.0..=1.0).contains(&balance)) {
        return Err(Error::Value(format!("balance must be a number from 0 to 1, got {balance}")));
    }
    let (e, h) = anchors_at(vocab_size.max(1));
    Ok(BalanceSettings { non_ascii_exponent: balance * e, raw_han_exponent: balance * h })
}

/// The balance-1 exponents at `vocab_size`: [`BALANCE_ANCHORS`] interpolated in `ln(size)`.
fn anchors_at(vocab_size: usize) -> (f64, f64) {
    let a = &BALANCE_ANCHORS;
    if vocab_size <= a[0].0 {
        return (a[0].1, a[0].2);
    }
    for w in a.windows(2) {
        let ((k0, e0, h0), (k1, e1, h1)) = (w[0], w[1]);
        if vocab_size <= k1 {
            let t = ((vocab_size as f64).ln() - (k0 as f64).ln()) / ((k1 as f64).ln() - (k0 as f64).ln());
            return (e0 + t * (e1 - e0), h0 + t * (h1 - h0));
        }
    }
    let last = a[a.len() - 1];
    (last.1, last.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_balance_is_the_mix_as_it_is_and_one_the_anchors() {
        for k in [300, 32_000, 100_000, 128_000, 200_000, 250_000, 1_000_000] {
            let s = balance_settings(0.0, k).unwrap();
            assert_eq!((s.non_ascii_exponent, s.raw_han_exponent), (0.0, 0.0));
        }
        for (k, e, h) in BALANCE_ANCHORS {
            let s = balance_settings(1.0, k).unwrap();
            assert!((s.non_ascii_exponent - e).abs() < 1e-12 && (s.raw_han_exponent - h).abs() < 1e-12);
        }
        let (small, large) = (BALANCE_ANCHORS[0], BALANCE_ANCHORS[BALANCE_ANCHORS.len() - 1]);
        assert_eq!(balance_settings(1.0, 1000).unwrap().non_ascii_exponent, small.1);
        assert_eq!(balance_settings(1.0, 10_000_000).unwrap().raw_han_exponent, large.2);
    }

    #[test]
    fn settings_move_in_proportion_and_between_the_anchors() {
        for w in BALANCE_ANCHORS.windows(2) {
            let ((k0, e0, h0), (k1, e1, h1)) = (w[0], w[1]);
            let mid = ((k0 as f64) * (k1 as f64)).sqrt() as usize;
            let s = balance_settings(1.0, mid).unwrap();
            // halfway in ln(size): halfway between the anchors' exponents
            assert!((s.non_ascii_exponent - (e0 + e1) / 2.0).abs() < 1e-3, "{s:?}");
            assert!((s.raw_han_exponent - (h0 + h1) / 2.0).abs() < 1e-3, "{s:?}");
            let half = balance_settings(0.5, k1).unwrap();
            assert!((half.non_ascii_exponent - 0.5 * e1).abs() < 1e-12);
            assert!((half.raw_han_exponent - 0.5 * h1).abs() < 1e-12);
        }
    }

    #[test]
    fn balance_outside_zero_to_one_is_refused() {
        for b in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            let e = balance_settings(b, 32_000).unwrap_err();
            assert!(e.to_string().contains("balance must be a number from 0 to 1"), "{e}");
        }
    }
}
