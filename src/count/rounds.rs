//! Counting rounds: consecutive length intervals, each with the count a candidate needs to be
//! kept (Algorithm 1). Their default and their validation live here.

use crate::error::Error;

/// A counting round: candidate lengths `min_len..=max_len` (bytes), kept when their count is at
/// least `threshold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    pub min_len: usize,
    pub max_len: usize,
    pub threshold: u64,
}

impl Round {
    /// A round's own constraints: `1 <= min_len <= max_len <= MAX_CANDIDATE_LEN`.
    pub fn check(&self) -> Result<(), Error> {
        if self.min_len < 1 || self.max_len < self.min_len || self.max_len > MAX_CANDIDATE_LEN {
            return Err(Error::Value(format!(
                "bad round ({}, {}, {}): need 1 <= min <= max <= {MAX_CANDIDATE_LEN}",
                self.min_len, self.max_len, self.threshold
            )));
        }
        Ok(())
    }
}

/// The paper's rounds: ([1, 12], 0), ([13, 21], 80), ([22, 30], 80).
pub const DEFAULT_ROUNDS: [Round; 3] = [
    Round { min_len: 1, max_len: 12, threshold: 0 },
    Round { min_len: 13, max_len: 21, threshold: 80 },
    Round { min_len: 22, max_len: 30, threshold: 80 },
];

/// The paper's threshold of the rounds after the first (80, for its 6.9M documents).
pub const PAPER_THRESHOLD: u64 = 80;

/// The lowest threshold [`scaled_threshold`] gives.
pub const MIN_SCALED_THRESHOLD: u64 = 20;

/// Bytes of text per unit of [`scaled_threshold`]'s threshold: the paper's 80 is reached at
/// 512 MiB of text.
pub const BYTES_PER_THRESHOLD: u64 = (512 << 20) / PAPER_THRESHOLD;

/// The threshold of the rounds after the first for a corpus of `corpus_bytes` bytes of text (the
/// default when no rounds are given): one per [`BYTES_PER_THRESHOLD`] bytes, rounded, at least
/// [`MIN_SCALED_THRESHOLD`] and at most [`PAPER_THRESHOLD`]. A long candidate's count grows with
/// the corpus; a fixed 80, the paper's for 6.9M documents, drops on a corpus of a few hundred MB
/// the multi-word candidates that a raw vocabulary of millions would keep
/// (`docs/results/defaults.md` measures 20 against 80).
pub fn scaled_threshold(corpus_bytes: u64) -> u64 {
    let t = corpus_bytes.saturating_add(BYTES_PER_THRESHOLD / 2) / BYTES_PER_THRESHOLD;
    t.clamp(MIN_SCALED_THRESHOLD, PAPER_THRESHOLD)
}

/// Longest candidate a round may count (bytes).
pub const MAX_CANDIDATE_LEN: usize = 1024;

/// Checks that rounds are valid ([`Round::check`]) and consecutive, non-overlapping intervals
/// starting at length 1.
pub fn validate_rounds(rounds: &[Round]) -> Result<(), Error> {
    if rounds.is_empty() {
        return Err(Error::Value("rounds must not be empty".into()));
    }
    let mut next = 1usize;
    for (k, r) in rounds.iter().enumerate() {
        r.check().map_err(|e| Error::Value(format!("round {k}: {e}")))?;
        if r.min_len != next {
            return Err(Error::Value(format!(
                "round {k} is ({}, {}, {}); rounds must be consecutive, non-overlapping length \
                 intervals starting at 1 (expected a round starting at {next})",
                r.min_len, r.max_len, r.threshold
            )));
        }
        next = r.max_len + 1;
    }
    Ok(())
}

/// A note for the user when valid rounds will not count everything they might expect: a round
/// after the second with a lower threshold than an earlier one (after the first) makes
/// Algorithm 1's early stopping drop candidates that reach the lower threshold.
pub fn rounds_warning(rounds: &[Round]) -> Option<String> {
    let lower = (2..rounds.len()).any(|k| rounds[k].threshold < rounds[k - 1].threshold);
    lower.then(|| {
        "a later round has a lower threshold than an earlier one (after the first): Algorithm 1's \
         early stopping then drops some candidates that reach the lower threshold; use \
         non-decreasing thresholds to count them all"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_threshold_grows_with_the_corpus_between_its_bounds() {
        assert_eq!(scaled_threshold(0), MIN_SCALED_THRESHOLD);
        assert_eq!(scaled_threshold(100 << 20), MIN_SCALED_THRESHOLD);
        assert_eq!(scaled_threshold(256 << 20), 40);
        assert_eq!(scaled_threshold(512 << 20), PAPER_THRESHOLD);
        assert_eq!(scaled_threshold(u64::MAX), PAPER_THRESHOLD);
        let mut last = 0;
        for mb in (0..1024).step_by(7) {
            let t = scaled_threshold(mb << 20);
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn rejects_bad_rounds() {
        let bad = [Round { min_len: 2, max_len: 5, threshold: 0 }];
        assert!(validate_rounds(&bad).is_err());
        let gap = [Round { min_len: 1, max_len: 5, threshold: 0 }, Round { min_len: 7, max_len: 9, threshold: 0 }];
        assert!(validate_rounds(&gap).is_err());
        assert!(validate_rounds(&[]).is_err());
        assert!(validate_rounds(&[Round { min_len: 1, max_len: 2000, threshold: 0 }]).is_err());
        assert!(validate_rounds(&DEFAULT_ROUNDS).is_ok());
        assert!(rounds_warning(&DEFAULT_ROUNDS).is_none());
        let r = |a, b, t| Round { min_len: a, max_len: b, threshold: t };
        assert!(rounds_warning(&[r(1, 2, 0), r(3, 4, 5), r(5, 6, 2)]).is_some());
        assert!(rounds_warning(&[r(1, 2, 5), r(3, 4, 1)]).is_none());
    }
}
