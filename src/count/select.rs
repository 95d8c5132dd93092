//! What a finished round keeps (Algorithm 1's threshold, then the `raw_vocab_size` cut).
//!
//! Every distinct candidate of the round is offered once with its exact count, in any order.
//! Kept: the candidates at the round's threshold whose count reaches a later round's threshold
//! (they go into that round's trie), and the best `m` (count descending, ties by bytes) of the
//! others, which contain the final raw vocabulary. A running cutoff drops most low counts without
//! storing them. The outcome does not depend on the order of the offers.
//!
//! Beside the cut, every offered candidate that is one multi-byte UTF-8 character and reaches
//! the round's threshold is recorded with its exact count, whatever the cut keeps: the refined
//! selection's character coverage (`crate::refine`) ranks characters by these counts, so a
//! character below the raw vocabulary's cut can still be covered.

use super::cands::Cands;

/// The selection of one round.
pub(crate) struct Selector {
    threshold: u64,
    future: Option<u64>,
    m: usize,
    direct: Cands,
    low: Cands,
    cutoff: u64,
    distinct: u64,
    retained: u64,
    chars: Vec<(Vec<u8>, u64)>,
}

/// What a round's selection gives: the candidates that can still matter, sorted by count
/// descending (ties by bytes), and how many distinct candidates were offered and retained.
pub(crate) struct Selected {
    pub(crate) kept: Cands,
    pub(crate) distinct: u64,
    pub(crate) retained: u64,
    /// The multi-byte characters offered at the threshold with their counts, sorted by bytes.
    pub(crate) chars: Vec<(Vec<u8>, u64)>,
}

impl Selector {
    /// `threshold`: this round's; `future`: the lowest threshold of the later rounds (None after
    /// the last round); `m`: the raw vocabulary size.
    pub(crate) fn new(threshold: u64, future: Option<u64>, m: usize) -> Self {
        Selector {
            threshold,
            future,
            m,
            direct: Cands::default(),
            low: Cands::default(),
            cutoff: 0,
            distinct: 0,
            retained: 0,
            chars: Vec::new(),
        }
    }

    /// Records `k` with count `c` when it is one multi-byte character at the threshold (every
    /// offered candidate must pass here once, whether it is stored or not).
    #[inline]
    pub(crate) fn note_char(&mut self, k: &[u8], c: u64) {
        if c >= self.threshold && c > 0 && crate::refine::one_multibyte_char(k) {
            self.chars.push((k.to_vec(), c));
        }
    }

    /// Adds characters that another selector over part of the round's candidates recorded.
    pub(crate) fn add_chars(&mut self, chars: &[(Vec<u8>, u64)]) {
        self.chars.extend(chars.iter().filter(|e| e.1 >= self.threshold).cloned());
    }

    /// Counts one distinct candidate with count `c` and tells whether it must be stored: when
    /// true, pass its bytes to [`Selector::keep`]. (Callers that hold candidates in another form
    /// ask first and write the bytes only when needed.)
    #[inline]
    pub(crate) fn wants(&mut self, c: u64) -> bool {
        self.distinct += 1;
        if c < self.threshold {
            return false;
        }
        self.retained += 1;
        self.future.is_some_and(|f| c >= f) || c >= self.cutoff
    }

    /// Offers a candidate that another selector over part of the round's candidates kept (its
    /// count is at least the threshold; it was counted there, see [`Selector::add_counted`]).
    #[inline]
    pub(crate) fn offer_kept(&mut self, k: &[u8], c: u64) {
        if c >= self.threshold && (self.future.is_some_and(|f| c >= f) || c >= self.cutoff) {
            self.keep(k, c);
        }
    }

    /// Adds the distinct and retained candidates that the selectors of the round's parts saw.
    pub(crate) fn add_counted(&mut self, distinct: u64, retained: u64) {
        self.distinct += distinct;
        self.retained += retained;
    }

    /// Stores a candidate for which [`Selector::wants`] said true.
    #[inline]
    pub(crate) fn keep(&mut self, k: &[u8], c: u64) {
        if self.future.is_some_and(|f| c >= f) {
            self.direct.push(k, c);
        } else {
            self.low.push(k, c);
            if self.low.len() >= prune_trigger(self.m) {
                self.cutoff = self.low.prune_top(self.m);
            }
        }
    }

    /// [`Selector::wants`] and, when wanted, [`Selector::keep`].
    #[inline]
    pub(crate) fn offer(&mut self, k: &[u8], c: u64) {
        self.note_char(k, c);
        if self.wants(c) {
            self.keep(k, c);
        }
    }

    /// The round's outcome joined with what earlier rounds kept.
    pub(crate) fn finish(self, earlier: Cands) -> Selected {
        let Selector { future, m, direct, mut low, distinct, retained, chars, .. } = self;
        let mut all = earlier;
        all.extend(&direct);
        drop(direct);
        low.prune_top(m);
        all.extend(&low);
        drop(low);
        all.sort();
        all.retain(|i, c| i < m || future.is_some_and(|f| c >= f));
        Selected { kept: all, distinct, retained, chars: merge_chars(chars) }
    }
}

/// Character counts sorted by bytes, the counts of a character recorded more than once summed.
pub(crate) fn merge_chars(mut chars: Vec<(Vec<u8>, u64)>) -> Vec<(Vec<u8>, u64)> {
    chars.sort_unstable();
    let mut out: Vec<(Vec<u8>, u64)> = Vec::with_capacity(chars.len());
    for (k, c) in chars {
        match out.last_mut() {
            Some(last) if last.0 == k => last.1 = last.1.saturating_add(c),
            _ => out.push((k, c)),
        }
    }
    out
}

/// Buffer size at which the low candidates are pruned to the best `m` (small in tests so that
/// the pruning path runs on small corpora).
fn prune_trigger(m: usize) -> usize {
    if cfg!(test) {
        m.saturating_mul(2).saturating_add(2)
    } else {
        m.max(1 << 16).saturating_mul(2)
    }
}
