//! Algorithm 1's CountCandidates: which substrings of a document are counted in a round.
//!
//! A candidate `x[i:j]` starts and ends on UTF-8 character boundaries and is valid when its
//! boundary penalty (SPEC section 2) is not forbidden. Enumeration from a start position stops
//! early exactly as Algorithm 1 says: when the substring is invalid and no extension can make it
//! valid (it touches three units and does not start at a unit start), or when a valid substring
//! shorter than the round's minimum length is not in the trie of earlier rounds with a count of
//! at least the round's threshold.
//!
//! A round without a trie (the first) is enumerated unit by unit instead of position by
//! position, with the same result: every candidate starting in a unit `U` either lies within
//! `U` and the unit after it, `V` (it touches at most two units, so it is valid), or starts at
//! `U`'s start and covers three or more whole units. The first kind depends only on the bytes of
//! the pair `UV`, which recurs far more often than its candidates are distinct (`"the"` + `" "`),
//! so a [`Sink`] may count pairs and list their candidates ([`pair_candidates`]) once per
//! distinct pair with its count.

use crate::cost::{crossing, Crossing};
use super::rounds::Round;
use crate::trie::{ByteTrie, ROOT};

/// Where the candidates of a document go.
pub(crate) trait Sink {
    /// One occurrence of a candidate.
    fn candidate(&mut self, c: &[u8]);
    /// One occurrence of the unit pair `p` (its first unit is `p[..split]`, at most
    /// [`PAIR_MAX`] bytes, followed in the document by a character boundary): it stands for the
    /// candidates `pair_candidates(p, split, max_len, true, ..)` lists.
    fn pair(&mut self, p: &[u8], split: usize, max_len: usize) {
        pair_candidates(p, split, max_len, true, |c| self.candidate(c));
    }
}

impl<F: FnMut(&[u8])> Sink for F {
    #[inline]
    fn candidate(&mut self, c: &[u8]) {
        self(c)
    }
}

/// Longest unit pair given to [`Sink::pair`] (longer pairs are listed where they occur).
pub(crate) const PAIR_MAX: usize = 30;

/// The candidates that start in the first unit of the unit pair `p` (the units `p[..split]`
/// and `p[split..]`) and end within the pair: at most `max_len` bytes, starting and ending on
/// character boundaries (`end_ok`: the byte after the pair is not a UTF-8 continuation byte).
/// They touch one or two units, so all of them are valid.
#[inline]
pub(crate) fn pair_candidates(p: &[u8], split: usize, max_len: usize, end_ok: bool, mut emit: impl FnMut(&[u8])) {
    let m = p.len();
    for i in 0..split {
        if p[i] & 0xC0 == 0x80 {
            continue;
        }
        for j in i + 1..=m.min(i + max_len) {
            if if j < m { p[j] & 0xC0 == 0x80 } else { !end_ok } {
                continue;
            }
            emit(&p[i..j]);
        }
    }
}

/// Algorithm 1's CountCandidates for the start positions in `positions` of one document: gives
/// `sink` every counted candidate. `starts` holds the unit starts of `doc` followed by a
/// sentinel 1 (length `doc.len() + 1`). `trie` is used for lengths below `round.min_len`.
///
/// A round without a trie goes unit by unit: the units that start in `positions` give all
/// candidates that start in them, wherever they end (so ranges that split a document give
/// each candidate once between them).
pub(crate) fn count_candidates(
    doc: &[u8],
    starts: &[u8],
    positions: std::ops::Range<usize>,
    round: &Round,
    trie: Option<&ByteTrie>,
    sink: &mut impl Sink,
) {
    let n = doc.len();
    debug_assert_eq!(starts.len(), n + 1);
    let Some(trie) = trie.filter(|_| round.min_len > 1) else {
        if round.min_len > 1 {
            // Without a trie every prefix is missing: nothing reaches min_len (kept as the walk
            // says, for callers that give no trie).
            for i in positions {
                if doc[i] & 0xC0 != 0x80 {
                    candidates_at(doc, starts, i, round, None, &mut |c: &[u8]| sink.candidate(c));
                }
            }
            return;
        }
        by_units(doc, starts, positions, round.max_len, sink);
        return;
    };
    let mut emit = |c: &[u8]| sink.candidate(c);
    // Positions go in blocks: the Bloom filter's words for a whole block are requested before
    // the first is read.
    const BLOCK: usize = 32;
    let mut probes = [(0usize, 0usize, 0u64); BLOCK];
    let mut start = positions.start;
    while start < positions.end {
        let end = (start + BLOCK).min(positions.end);
        let mut k = 0;
        for i in start..end {
            if doc[i] & 0xC0 == 0x80 {
                continue; // candidates start on character boundaries
            }
            if let Some(longest) = longest_required(doc, starts, i, round) {
                let (word, bits) = if longest == 0 { (usize::MAX, 0) } else { trie.bloom_slot(&doc[i..i + longest]) };
                if word != usize::MAX {
                    trie.prefetch_bloom(word);
                }
                probes[k] = (i, word, bits);
                k += 1;
            }
        }
        for &(i, word, bits) in &probes[..k] {
            if word == usize::MAX || trie.bloom_has(word, bits) {
                candidates_at(doc, starts, i, round, Some(trie), &mut emit);
            }
        }
        start = end;
    }
}

/// A round of minimum length 1 (no trie), unit by unit (see the module documentation).
fn by_units(doc: &[u8], starts: &[u8], positions: std::ops::Range<usize>, max_len: usize, sink: &mut impl Sink) {
    let n = doc.len();
    // The unit start after x (the sentinel makes n one).
    let next = |x: usize| {
        let mut y = x + 1;
        while starts[y] == 0 {
            y += 1;
        }
        y
    };
    let mut a = positions.start;
    while a < positions.end && starts[a] == 0 {
        a += 1; // that unit belongs to the range before
    }
    if a >= positions.end {
        return;
    }
    let mut b = next(a);
    while a < positions.end {
        let c = if b < n { next(b) } else { n };
        let end_ok = c == n || doc[c] & 0xC0 != 0x80;
        if c - a <= PAIR_MAX && end_ok {
            sink.pair(&doc[a..c], b - a, max_len);
        } else {
            pair_candidates(&doc[a..c], b - a, max_len, end_ok, |x| sink.candidate(x));
        }
        // Three or more whole units from a.
        if doc[a] & 0xC0 != 0x80 {
            let mut e = c;
            while e < n {
                e = next(e);
                if e - a > max_len {
                    break;
                }
                if e == n || doc[e] & 0xC0 != 0x80 {
                    sink.candidate(&doc[a..e]);
                }
            }
        }
        a = b;
        b = c;
    }
}

/// Algorithm 1's enumeration from one start position `i` (a character boundary).
#[inline(always)]
fn candidates_at(doc: &[u8], starts: &[u8], i: usize, round: &Round, trie: Option<&ByteTrie>, emit: &mut impl FnMut(&[u8])) {
    let n = doc.len();
    let check_trie = round.min_len > 1;
    let start_i = starts[i] != 0;
    let mut units = 1usize;
    let mut node = Some(ROOT);
    let max_l = round.max_len.min(n - i);
    for l in 1..=max_l {
        let j = i + l;
        if l > 1 && starts[j - 1] != 0 {
            units += 1;
        }
        if check_trie && l < round.min_len {
            node = match (node, trie) {
                (Some(nd), Some(t)) => t.child(nd, doc[j - 1]),
                _ => None,
            };
        }
        if j < n && doc[j] & 0xC0 == 0x80 {
            continue; // ends inside a character: an extension may be valid
        }
        let whole = start_i && starts[j] != 0;
        if crossing(units, whole) == Crossing::Forbidden {
            if !start_i {
                break; // forbidden, and no extension can start at a unit start
            }
            continue; // extending to the end of a unit can make it valid
        }
        if l >= round.min_len {
            emit(&doc[i..j]);
        } else if check_trie {
            match (node, trie) {
                (Some(nd), Some(t)) if t.is_terminal(nd) => {}
                _ => break, // missing or low-frequency prefix
            }
        }
    }
}

/// A quick test for a start position `i`, before the trie walk of [`candidates_at`]: `None`
/// when the walk would emit nothing because no length reaches `round.min_len` or the walk
/// breaks on a forbidden prefix first; otherwise the length of the longest valid prefix shorter
/// than `round.min_len` (0: none). The walk breaks at the first valid prefix missing from the
/// trie, so when that one is certainly missing (the trie's Bloom filter says so) the position
/// can be skipped without changing anything; asking about the longest (usually the rarest)
/// costs one memory read instead of a walk of up to `min_len - 1` nodes.
#[inline(always)]
fn longest_required(doc: &[u8], starts: &[u8], i: usize, round: &Round) -> Option<usize> {
    let n = doc.len();
    if n - i < round.min_len {
        return None; // the walk ends before any length it could emit
    }
    let start_i = starts[i] != 0;
    let mut units = 1usize;
    let mut longest = 0usize;
    for l in 1..round.min_len {
        let j = i + l;
        if l > 1 && starts[j - 1] != 0 {
            units += 1;
        }
        if doc[j] & 0xC0 == 0x80 {
            continue; // (j < n: l < min_len <= n - i)
        }
        let whole = start_i && starts[j] != 0;
        if crossing(units, whole) == Crossing::Forbidden {
            if !start_i {
                return None; // the walk breaks here, before emitting anything
            }
            continue;
        }
        longest = l;
    }
    Some(longest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::unit_starts;
    use std::collections::BTreeMap;

    /// Algorithm 1's enumeration written out directly (the walk of every start position, no
    /// Bloom filter, no blocks).
    fn reference(doc: &[u8], round: &Round, keys: &std::collections::BTreeSet<Vec<u8>>) -> BTreeMap<Vec<u8>, u64> {
        let mut starts = Vec::new();
        unit_starts(doc, &mut starts);
        starts.push(1);
        let n = doc.len();
        let mut out = BTreeMap::new();
        for i in 0..n {
            if doc[i] & 0xC0 == 0x80 {
                continue;
            }
            let mut units = 1;
            for j in i + 1..=n.min(i + round.max_len) {
                if j > i + 1 && starts[j - 1] != 0 {
                    units += 1;
                }
                if j < n && doc[j] & 0xC0 == 0x80 {
                    continue;
                }
                if crossing(units, starts[i] != 0 && starts[j] != 0) == Crossing::Forbidden {
                    if starts[i] == 0 {
                        break;
                    }
                    continue;
                }
                if j - i >= round.min_len {
                    *out.entry(doc[i..j].to_vec()).or_insert(0) += 1;
                } else if round.min_len > 1 && !keys.contains(&doc[i..j]) {
                    break;
                }
            }
        }
        out
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Text from a few pieces (words, spaces, punctuation, digits, CJK, combining marks, stray
    /// bytes), so that the same substrings recur in different unit contexts.
    fn text(rng: &mut Rng, pieces: usize) -> Vec<u8> {
        const P: &[&[u8]] = &[b"the", b"cat", b" ", b" ", b"  ", b".", b",", b"ab", b"a", b"1600", b"\n",
            "漢字".as_bytes(), "かな".as_bytes(), "e\u{301}".as_bytes(), "é".as_bytes(), b"\xff", b"\x80", b"\xe2\x82"];
        (0..pieces).flat_map(|_| P[rng.below(P.len())].iter().copied()).collect()
    }

    /// The fast path (Bloom filter first, blocks of positions, ranges of a document) emits the
    /// same candidates as the literal walk, for tries that are and are not closed under taking
    /// prefixes (random subsets of the substrings), every round shape and any position ranges.
    #[test]
    fn fast_path_equals_the_walk() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for case in 0..300 {
            let pieces = 1 + rng.below(120);
            let doc = text(&mut rng, pieces);
            let min_len = if rng.below(3) == 0 { 1 } else { 1 + rng.below(14) };
            let round = Round { min_len, max_len: min_len + rng.below(20), threshold: 2 };
            // keys: a random share of the substrings shorter than min_len (sometimes all)
            let keep = 1 + rng.below(4);
            let mut keys = std::collections::BTreeSet::new();
            for i in 0..doc.len() {
                for j in i + 1..=doc.len().min(i + min_len.saturating_sub(1)) {
                    let r = rng.below(4);
                    if keep == 4 || r < keep {
                        keys.insert(doc[i..j].to_vec());
                    }
                }
            }
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
            let trie = ByteTrie::from_sorted(&refs);
            let use_trie = rng.below(8) != 0;
            let none = std::collections::BTreeSet::new();
            let want = reference(&doc, &round, if use_trie { &keys } else { &none });
            let mut starts = Vec::new();
            unit_starts(&doc, &mut starts);
            starts.push(1);
            let len = doc.len();
            let cut = rng.below(len + 1);
            let mut got = BTreeMap::new();
            for r in [0..cut, cut..doc.len()] {
                let trie = use_trie.then_some(&trie);
                count_candidates(&doc, &starts, r, &round, trie, &mut |c: &[u8]| *got.entry(c.to_vec()).or_insert(0u64) += 1);
            }
            assert_eq!(got, want, "case {case}: {doc:?} {round:?}");
        }
    }
}
