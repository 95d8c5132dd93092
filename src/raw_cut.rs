//! The raw vocabulary's cut (SPEC section 4): which counted candidates the filtering pass sees.
//!
//! The paper's cut, the default, keeps the best `raw_vocab_size` candidates by count (ties by
//! bytes). The *Han-weighted cut* (issue 13, `TrainConfig::raw_han_exponent` > 0; screened in
//! `docs/results/raw_rule.md`, rule `hanA`) ranks a pool of the best
//! [`HAN_POOL_PER_RAW`]` * raw_vocab_size` candidates by count (all of them when fewer) by their
//! count times a weight, and keeps the best `raw_vocab_size` of that order:
//!
//! * a candidate with a Han character ([`has_han`]) has the weight
//!   `(ASCII mass / non-ASCII mass) ^ raw_han_exponent`, where the *mass* of a group is the summed
//!   count of the pool's candidates of the group (ASCII: every byte below 0x80);
//! * every other candidate, and every candidate when the ASCII mass is not larger than the
//!   non-ASCII mass (a corpus that is mostly multi-byte text), has weight 1.
//!
//! Ties of the weighted count go to the higher count, then to the smaller bytes (the order of the
//! paper's cut). On a mix dominated by ASCII text the Han candidates that the paper's cut leaves
//! just below the line (Chinese words seen 20 to 30 times at 250k) enter the raw vocabulary in
//! place of the ASCII candidates at the line; the filtering and refining passes then decide what
//! the vocabulary keeps, as always. Counting itself is unchanged: it keeps the pool by count.

use rayon::slice::ParallelSliceMut;

/// The Han-weighted cut ranks the best `HAN_POOL_PER_RAW * raw_vocab_size` candidates by count.
pub const HAN_POOL_PER_RAW: usize = 4;

/// The largest `raw_han_exponent` accepted.
pub const MAX_RAW_HAN_EXPONENT: f64 = 4.0;

/// Whether `t` holds a character of the CJK Unified Ideographs (U+4E00..U+9FFF) or of their
/// Extension A (U+3400..U+4DBF); bytes that are not valid UTF-8 are skipped.
pub fn has_han(t: &[u8]) -> bool {
    if t.is_ascii() {
        return false;
    }
    String::from_utf8_lossy(t).chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c) || ('\u{3400}'..='\u{4dbf}').contains(&c))
}

/// The candidates the counting phase keeps for a raw vocabulary of `raw` candidates.
pub fn pool_size(raw: usize, raw_han_exponent: f64) -> usize {
    if raw_han_exponent > 0.0 {
        raw.saturating_mul(HAN_POOL_PER_RAW)
    } else {
        raw
    }
}

/// The weight of the Han candidates of `pool` (module documentation).
pub fn han_weight(pool: &[(Vec<u8>, u64)], raw_han_exponent: f64) -> f64 {
    let (mut ascii, mut other) = (0u128, 0u128);
    for (t, c) in pool {
        if t.is_ascii() {
            ascii += *c as u128;
        } else {
            other += *c as u128;
        }
    }
    if raw_han_exponent == 0.0 || other == 0 || ascii <= other {
        return 1.0;
    }
    (ascii as f64 / other as f64).powf(raw_han_exponent)
}

/// Sorts by count descending, ties by bytes (the paper's order; also the raw vocabulary's id
/// order, [`crate::Filter::rank`]).
pub(crate) fn by_count(counts: &mut [(Vec<u8>, u64)]) {
    counts.par_sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

/// The raw vocabulary's candidates from `counts` (module documentation): the best `raw` by count
/// when `raw_han_exponent` is 0, by the Han-weighted count of the pool otherwise; `counts` as
/// they are when `raw` is `None` or not smaller than their number. The order of the result is
/// unspecified ([`crate::Filter::rank`] orders the raw vocabulary).
pub fn cut(mut counts: Vec<(Vec<u8>, u64)>, raw: Option<usize>, raw_han_exponent: f64) -> Vec<(Vec<u8>, u64)> {
    let Some(raw) = raw.filter(|&r| r < counts.len()) else { return counts };
    by_count(&mut counts);
    counts.truncate(pool_size(raw, raw_han_exponent));
    if raw_han_exponent == 0.0 {
        return counts;
    }
    let w = han_weight(&counts, raw_han_exponent);
    if w == 1.0 {
        counts.truncate(raw);
        return counts;
    }
    // (weighted count, rank in the paper's order): the rank breaks ties of the weighted count
    let mut keyed: Vec<(f64, usize)> =
        counts.iter().enumerate().map(|(i, (t, c))| (if has_han(t) { *c as f64 * w } else { *c as f64 }, i)).collect();
    keyed.par_sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut keep = vec![false; counts.len()];
    for &(_, i) in keyed.iter().take(raw) {
        keep[i] = true;
    }
    counts.into_iter().zip(keep).filter_map(|(c, k)| k.then_some(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(t: &str, n: u64) -> (Vec<u8>, u64) {
        (t.as_bytes().to_vec(), n)
    }

    fn sorted(mut v: Vec<(Vec<u8>, u64)>) -> Vec<(Vec<u8>, u64)> {
        v.sort();
        v
    }

    /// The cut from its definition: every candidate's weighted count, sorted, the best `raw`.
    fn reference(counts: &[(Vec<u8>, u64)], raw: usize, e: f64) -> Vec<(Vec<u8>, u64)> {
        let mut all = counts.to_vec();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(raw * HAN_POOL_PER_RAW);
        let ascii: u64 = all.iter().filter(|x| x.0.is_ascii()).map(|x| x.1).sum();
        let other: u64 = all.iter().filter(|x| !x.0.is_ascii()).map(|x| x.1).sum();
        let w = if other > 0 && ascii > other { (ascii as f64 / other as f64).powf(e) } else { 1.0 };
        let score = |x: &(Vec<u8>, u64)| if has_han(&x.0) { x.1 as f64 * w } else { x.1 as f64 };
        all.sort_by(|a, b| score(b).partial_cmp(&score(a)).unwrap().then(b.1.cmp(&a.1)).then_with(|| a.0.cmp(&b.0)));
        all.truncate(raw);
        sorted(all)
    }

    #[test]
    fn han_detection() {
        assert!(has_han("的".as_bytes()));
        assert!(has_han("a 中文".as_bytes()));
        assert!(has_han("㐀".as_bytes()));
        assert!(!has_han("Ελλάδα".as_bytes()));
        assert!(!has_han("ひらがな".as_bytes()));
        assert!(!has_han(b"plain"));
        assert!(!has_han(&[0xe4, 0xb8])); // a prefix of a Han character is not one
    }

    #[test]
    fn exponent_zero_is_the_papers_cut() {
        let counts = vec![c("b", 5), c("a", 5), c("中", 9), c("x", 1), c("文", 2)];
        assert_eq!(sorted(cut(counts.clone(), Some(3), 0.0)), sorted(vec![c("中", 9), c("a", 5), c("b", 5)]));
        assert_eq!(sorted(cut(counts.clone(), None, 1.0)), sorted(counts.clone()));
        assert_eq!(sorted(cut(counts.clone(), Some(5), 1.0)), sorted(counts));
    }

    #[test]
    fn han_candidates_move_up_by_the_mass_ratio() {
        // ASCII mass 100 + 90 + 80 + 70 = 340, non-ASCII 60 + 25 = 85: ratio 4, weight 4^0.5 = 2
        let counts = vec![c("the", 100), c("and", 90), c("of", 80), c("to", 70), c("中文", 25), c("été", 60)];
        let got = sorted(cut(counts.clone(), Some(3), 0.5));
        // 中文 weighs 50: below the, and, of; été (not Han) keeps 60
        assert_eq!(got, sorted(vec![c("the", 100), c("and", 90), c("of", 80)]));
        let got = sorted(cut(counts.clone(), Some(3), 1.0)); // weight 4: 中文 weighs 100
        assert_eq!(got, sorted(vec![c("the", 100), c("中文", 25), c("and", 90)]));
        assert_eq!(han_weight(&counts, 1.0), 4.0);
    }

    #[test]
    fn mostly_multibyte_text_is_not_weighted() {
        let counts = vec![c("中文", 100), c("的", 90), c("a", 10), c("b", 5)];
        assert_eq!(han_weight(&counts, 1.0), 1.0);
        assert_eq!(sorted(cut(counts, Some(2), 1.0)), sorted(vec![c("中文", 100), c("的", 90)]));
    }

    #[test]
    fn ties_of_the_weighted_count_go_to_the_count_then_the_bytes() {
        // ASCII 8 + 4 + 4 = 16, non-ASCII 4 + 4 = 8: weight 2; 中 weighs 8 like x (count 8)
        let counts = vec![c("x", 8), c("中", 4), c("y", 4), c("z", 4), c("é", 4)];
        assert_eq!(sorted(cut(counts.clone(), Some(1), 1.0)), vec![c("x", 8)]);
        assert_eq!(sorted(cut(counts.clone(), Some(2), 1.0)), sorted(vec![c("x", 8), c("中", 4)]));
        assert_eq!(sorted(cut(counts, Some(3), 1.0)), sorted(vec![c("x", 8), c("中", 4), c("y", 4)]));
    }

    #[test]
    fn the_pool_bounds_what_can_enter() {
        // raw 1: the pool is the best 4 by count; 中 (count 1) is outside it whatever its weight
        let counts = vec![c("a", 50), c("b", 40), c("c", 30), c("d", 20), c("中", 1)];
        assert_eq!(cut(counts, Some(1), 4.0), vec![c("a", 50)]);
    }

    #[test]
    fn matches_the_reference_on_random_counts() {
        let pieces = ["a", "b", "ab", " the", "中", "文", "中文", "é", "Ελ", "日本", "x1", "的 ", "\n", "ο"];
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..300 {
            let n = 1 + (next() % 60) as usize;
            let mut seen = std::collections::BTreeMap::new();
            for _ in 0..n {
                let parts = 1 + next() % 3;
                let t: String = (0..parts).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect();
                seen.insert(t.into_bytes(), 1 + next() % if case % 2 == 0 { 8 } else { 1000 });
            }
            let counts: Vec<(Vec<u8>, u64)> = seen.into_iter().collect();
            let raw = 1 + (next() as usize % counts.len());
            let e = [0.0, 0.15, 0.5, 1.0, 2.0][case % 5];
            let want = if e == 0.0 {
                let mut all = counts.clone();
                all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                all.truncate(raw);
                sorted(all)
            } else {
                reference(&counts, raw, e)
            };
            assert_eq!(sorted(cut(counts.clone(), Some(raw), e)), want, "case {case}: raw {raw}, exponent {e}");
        }
    }
}
