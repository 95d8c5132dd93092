//! The counting phase over all rounds on one machine (paper section 3.1.1, Algorithm 1; SPEC
//! section 4): each round counts every document into one exact table, spilling it to sorted runs
//! when it outgrows its memory budget, then keeps what can still matter.
//!
//! After each round only what can still matter is kept: candidates whose count reaches a later
//! round's threshold (for that round's trie), and the best `raw_vocab_size` candidates so far
//! (by count, ties by bytes), which contain the final raw vocabulary. Counts are u64 sums, so
//! the result does not depend on the number of threads or the order of the documents.

use std::path::PathBuf;

use super::block::{BlockCounts, Survivors};
use super::cands::Cands;
use super::keys::CountKey;
use super::parallel::count_batch;
use super::rounds::{validate_rounds, Round};
use super::select::Selector;
use super::shuffle::{RoundSelector, Selection};
use rayon::prelude::*;
use super::table::{with_table, AnyTable};
use crate::error::Error;
use crate::spill;
use crate::trie::ByteTrie;

/// Text counted between two checks of the memory budget.
pub(crate) const CHECK_BYTES: usize = 512 * 1024;

/// The consecutive slices of `docs` after which a counter checks its memory budget: each holds
/// at least one document and ends once it reaches [`CHECK_BYTES`] of text; with its byte size.
pub(crate) fn budget_slices<'a>(docs: &'a [&[u8]]) -> impl Iterator<Item = (std::ops::Range<usize>, usize)> + 'a {
    let mut start = 0usize;
    std::iter::from_fn(move || {
        if start >= docs.len() {
            return None;
        }
        let mut end = start;
        let mut size = 0usize;
        while end < docs.len() && (end == start || size < CHECK_BYTES) {
            size += docs[end].len();
            end += 1;
        }
        let slice = start..end;
        start = end;
        Some((slice, size))
    })
}

/// Statistics of one finished round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundStats {
    /// Distinct candidates counted in the round.
    pub distinct: u64,
    /// Candidates whose count reached the threshold.
    pub retained: u64,
    /// Spill runs written.
    pub spills: usize,
    /// Bytes written to spill runs.
    pub spilled_bytes: u64,
    /// Largest table size (bytes, estimated) during the round.
    pub peak_table_bytes: usize,
}

/// The counting phase over all rounds: `begin_round`, `add` batches of documents, `end_round`,
/// once per round; then `result`. For counts made elsewhere, `end_round_with` takes the merged
/// counts of the round instead of `add` (see [`count_block`](super::count_block)).
pub struct Counter {
    rounds: Vec<Round>,
    raw_vocab_size: usize,
    budget: usize,
    tmp_dir: PathBuf,
    round: usize,
    table: Option<AnyTable>,
    trie: Option<ByteTrie>,
    runs: Vec<PathBuf>,
    /// Retained candidates that can still matter, with their counts (sorted after each round).
    kept: Cands,
    /// Every multi-byte character counted at its round's threshold, with its count, sorted by
    /// bytes (independent of the `raw_vocab_size` cut).
    chars: Vec<(Vec<u8>, u64)>,
    stats: RoundStats,
}

impl Counter {
    /// `budget`: bytes the counting table may hold before it spills to `tmp_dir` (an existing
    /// directory this counter may write files into).
    pub fn new(rounds: Vec<Round>, raw_vocab_size: usize, budget: usize, tmp_dir: PathBuf) -> Result<Self, Error> {
        validate_rounds(&rounds)?;
        if raw_vocab_size == 0 {
            return Err(Error::Value("raw_vocab_size must be positive".into()));
        }
        Ok(Counter {
            rounds,
            raw_vocab_size,
            budget: budget.max(1 << 20),
            tmp_dir,
            round: 0,
            table: None,
            trie: None,
            runs: Vec::new(),
            kept: Cands::default(),
            chars: Vec::new(),
            stats: RoundStats::default(),
        })
    }

    pub fn rounds(&self) -> &[Round] {
        &self.rounds
    }

    /// Sets the threshold of every round after the first to `threshold`, during the first
    /// round (after it began, before it ends: its selection keeps the candidates the later
    /// rounds' tries need at their thresholds). How [`scaled_threshold`](super::scaled_threshold)
    /// is applied once the first round has seen the whole corpus.
    pub fn set_later_thresholds(&mut self, threshold: u64) -> Result<(), Error> {
        if self.round != 0 || self.table.is_none() {
            return Err(Error::Value("later thresholds can only be set during the first round".into()));
        }
        for r in self.rounds.iter_mut().skip(1) {
            r.threshold = threshold;
        }
        Ok(())
    }

    /// Index of the round in progress (or the number of rounds when all are done).
    pub fn round(&self) -> usize {
        self.round
    }

    /// Starts the next round: builds the trie of earlier candidates at its threshold.
    pub fn begin_round(&mut self) -> Result<(), Error> {
        if self.table.is_some() {
            return Err(Error::Value("a round is already in progress".into()));
        }
        let r = *self
            .rounds
            .get(self.round)
            .ok_or_else(|| Error::Value("all rounds are done".into()))?;
        self.trie = if r.min_len > 1 {
            Some(ByteTrie::from_sorted(&self.kept.keys_at_least(r.threshold)))
        } else {
            None
        };
        self.table = Some(AnyTable::for_round(&r));
        self.stats = RoundStats::default();
        Ok(())
    }

    /// The round in progress, or an error.
    fn current(&self) -> Result<Round, Error> {
        match self.table {
            Some(_) => Ok(self.rounds[self.round]),
            None => Err(Error::Value("no round in progress".into())),
        }
    }

    /// The survivors the round in progress extends (what [`count_block`](super::count_block)
    /// needs on the machines that count its blocks).
    pub fn survivors(&self) -> Result<Survivors, Error> {
        let r = self.current()?;
        let mut keys: Vec<(&[u8], u64)> = if r.min_len > 1 {
            (0..self.kept.len()).map(|i| self.kept.get(i)).filter(|e| e.1 >= r.threshold).collect()
        } else {
            Vec::new()
        };
        keys.sort_unstable();
        Survivors::from_sorted(&keys)
    }

    /// Counts a batch of documents (parallel on the current rayon pool).
    ///
    /// The budget is checked every [`CHECK_BYTES`] of text: the table spills as soon as the
    /// next growth of its shards could take it past the budget, so it never holds more than the
    /// budget plus what one such slice adds.
    pub fn add(&mut self, docs: &[&[u8]]) -> Result<(), Error> {
        let r = self.current()?;
        for (slice, _) in budget_slices(docs) {
            let trie = self.trie.as_ref();
            if let Some(table) = self.table.as_ref() {
                with_table!(table, t => count_batch(t, &docs[slice], &r, trie));
            }
            let bytes = self.table_bytes();
            self.stats.peak_table_bytes = self.stats.peak_table_bytes.max(bytes);
            let projected = self.table.as_ref().map_or(0, |t| with_table!(t, t => t.bytes_after_growth()));
            if projected > self.budget {
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Estimated bytes held by the counting table.
    pub fn table_bytes(&self) -> usize {
        self.table.as_ref().map_or(0, |t| with_table!(t, t => t.bytes()))
    }

    /// Bytes held by the retained candidates and the trie.
    pub fn kept_bytes(&self) -> usize {
        self.kept.heap_bytes() + self.trie.as_ref().map_or(0, |t| t.heap_bytes())
    }

    fn spill(&mut self) -> Result<(), Error> {
        let path = self.tmp_dir.join(format!("run-{}-{}.bin", self.round, self.runs.len()));
        let written = match self.table.as_ref() {
            None => return Ok(()),
            Some(t) => with_table!(t, t => {
                let sorted = t.drain_sorted();
                spill::write_run(&path, sorted.iter().map(|(k, c)| (k.bytes(), *c)))?
            }),
        };
        self.runs.push(path);
        self.stats.spills += 1;
        self.stats.spilled_bytes += written;
        Ok(())
    }

    /// The selection of the round in progress.
    fn selector(&self, r: &Round) -> Selector {
        // Later rounds need candidates at their thresholds for their tries.
        let future = self.rounds[self.round + 1..].iter().map(|r| r.threshold).min();
        Selector::new(r.threshold, future, self.raw_vocab_size)
    }

    /// Ends the round: merges the counts (table and spill runs), keeps the candidates at the
    /// threshold, prunes what can no longer matter.
    pub fn end_round(&mut self) -> Result<RoundStats, Error> {
        let r = self.current()?;
        let table = self.table.take().expect("a round is in progress");
        let mut sel = self.selector(&r);
        with_table!(&table, t => {
            if self.runs.is_empty() {
                // Without runs the selection needs no order: stream the shards one by one, and
                // write a key's bytes only for what the selection stores.
                let mut buf = Vec::with_capacity(64);
                for (k, c) in t.take_all() {
                    let char_ = k.maybe_multibyte_char();
                    if sel.wants(c) {
                        buf.clear();
                        k.write_bytes(&mut buf);
                        sel.keep(&buf, c);
                        if char_ {
                            sel.note_char(&buf, c);
                        }
                    } else if char_ {
                        buf.clear();
                        k.write_bytes(&mut buf);
                        sel.note_char(&buf, c);
                    }
                }
            } else {
                let sorted = t.drain_sorted();
                spill::merge(&self.runs, sorted.into_iter().map(|(k, c)| (k.bytes(), c)), |k, c| {
                    sel.offer(&k, c);
                    Ok(())
                })?;
            }
        });
        drop(table);
        for p in self.runs.drain(..) {
            let _ = std::fs::remove_file(p);
        }
        self.finish_round(sel)
    }

    /// Ends the round with its counts made elsewhere: `counts` is the merge of
    /// [`count_block`](super::count_block) over a partition of the corpus (nothing may have been
    /// added to this counter in the round). Keeps exactly what [`Counter::end_round`] keeps.
    pub fn end_round_with(&mut self, counts: &BlockCounts) -> Result<RoundStats, Error> {
        let r = self.current()?;
        if !self.runs.is_empty() || self.table.as_ref().is_some_and(|t| with_table!(t, t => t.len()) > 0) {
            return Err(Error::Value("documents were added in this round: end it with end_round".into()));
        }
        self.table = None;
        let mut sel = self.selector(&r);
        for (k, c) in counts.iter() {
            sel.offer(k, c);
        }
        self.finish_round(sel)
    }

    /// The selection of the round in progress, for the reducers of a partitioned round
    /// ([`CountsMerger::select`](super::CountsMerger::select)).
    pub fn round_selector(&self) -> Result<RoundSelector, Error> {
        let r = self.current()?;
        let later_threshold = self.rounds[self.round + 1..].iter().map(|r| r.threshold).min();
        Ok(RoundSelector { threshold: r.threshold, later_threshold, raw_vocab_size: self.raw_vocab_size })
    }

    /// Ends the round with the selections of its partitions (each made by
    /// [`Counter::round_selector`] on the complete counts of one partition of the candidates;
    /// partitions disjoint, in any order). Keeps exactly what [`Counter::end_round`] keeps.
    pub fn end_round_with_selected<S: std::borrow::Borrow<Selection>>(&mut self, parts: &[S]) -> Result<RoundStats, Error> {
        let r = self.current()?;
        if !self.runs.is_empty() || self.table.as_ref().is_some_and(|t| with_table!(t, t => t.len()) > 0) {
            return Err(Error::Value("documents were added in this round: end it with end_round".into()));
        }
        let mut keys: Vec<&[u8]> = parts.iter().flat_map(|p| p.borrow().iter().map(|e| e.0)).collect();
        keys.par_sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Value(format!(
                "the candidate {:?} is in two selections: selections must come from disjoint partitions",
                crate::show_bytes(w[0])
            )));
        }
        drop(keys);
        self.table = None;
        let mut sel = self.selector(&r);
        for p in parts {
            let p = p.borrow();
            sel.add_counted(p.distinct, p.retained);
            sel.add_chars(&p.chars);
            for (k, c) in p.iter() {
                if c < r.threshold {
                    return Err(Error::Value(format!(
                        "a selection holds {:?} with count {c}, below the round's threshold {}: it was not made by this round's selector",
                        crate::show_bytes(k),
                        r.threshold
                    )));
                }
                sel.offer_kept(k, c);
            }
        }
        self.finish_round(sel)
    }

    /// Keeps the round's selection; a first round without a single candidate means there was no
    /// text at all.
    fn finish_round(&mut self, sel: Selector) -> Result<RoundStats, Error> {
        let done = sel.finish(std::mem::take(&mut self.kept));
        self.kept = done.kept;
        let mut chars = std::mem::take(&mut self.chars);
        chars.extend(done.chars);
        self.chars = super::select::merge_chars(chars);
        self.trie = None;
        self.round += 1;
        self.stats.distinct = done.distinct;
        self.stats.retained = done.retained;
        if self.round == 1 && done.distinct == 0 {
            return Err(Error::Value("the corpus is empty: no text to train on".into()));
        }
        Ok(self.stats.clone())
    }

    /// Every multi-byte UTF-8 character counted (in the round whose lengths hold it, at that
    /// round's threshold) with its exact count, sorted by bytes, whether or not it is among the
    /// best `raw_vocab_size` candidates: what the refined selection's character coverage ranks.
    pub fn char_counts(&self) -> &[(Vec<u8>, u64)] {
        &self.chars
    }

    /// The raw vocabulary: the best `raw_vocab_size` candidates by count (ties by bytes).
    pub fn result(&self) -> Vec<(&[u8], u64)> {
        (0..self.kept.len().min(self.raw_vocab_size)).map(|i| self.kept.get(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::count_block;
    use crate::units::unit_starts;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Brute force: every valid substring by the SPEC rules, no early stopping at all.
    fn brute(docs: &[&str], r: &Round) -> BTreeMap<Vec<u8>, u64> {
        let mut m = BTreeMap::new();
        for d in docs {
            let x = d.as_bytes();
            let mut s = Vec::new();
            unit_starts(x, &mut s);
            for i in 0..x.len() {
                if !d.is_char_boundary(i) {
                    continue;
                }
                for j in i + 1..=x.len().min(i + r.max_len) {
                    if !d.is_char_boundary(j) || j - i < r.min_len {
                        continue;
                    }
                    if crate::cost::crossing_of(&s, i, j) != crate::cost::Crossing::Forbidden {
                        *m.entry(x[i..j].to_vec()).or_insert(0) += 1;
                    }
                }
            }
        }
        m
    }

    fn run(docs: &[&str], rounds: &[Round], m: usize, budget: usize) -> Vec<(Vec<u8>, u64)> {
        run_full(docs, rounds, m, budget).0
    }

    type Counts = Vec<(Vec<u8>, u64)>;

    /// The raw vocabulary and the character counts.
    fn run_full(docs: &[&str], rounds: &[Round], m: usize, budget: usize) -> (Counts, Counts) {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cnfmce-count-test-{}-{seq}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Counter::new(rounds.to_vec(), m, budget, dir.clone()).unwrap();
        c.budget = budget; // allow tiny budgets in tests
        let bytes: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
        for _ in rounds {
            c.begin_round().unwrap();
            for chunk in bytes.chunks(2) {
                c.add(chunk).unwrap();
            }
            c.end_round().unwrap();
        }
        let out = c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        (out, c.char_counts().to_vec())
    }

    /// Occurrences of every multi-byte character, by bytes.
    fn brute_chars(docs: &[&str]) -> Counts {
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for d in docs {
            for ch in d.chars().filter(|c| c.len_utf8() > 1) {
                *m.entry(ch.to_string().into_bytes()).or_insert(0) += 1;
            }
        }
        m.into_iter().collect()
    }

    #[test]
    fn character_counts_ignore_the_cut() {
        let mut docs = DOCS.to_vec();
        docs.extend(["𝒳𝒳 ß ß ßé 中中中 文", "漢字 中"]);
        let all = brute_chars(&docs);
        assert!(all.iter().any(|(k, _)| k.len() == 4) && all.iter().any(|(k, _)| k.len() == 2));
        let rounds = [
            Round { min_len: 1, max_len: 5, threshold: 0 },
            Round { min_len: 6, max_len: 10, threshold: 2 },
        ];
        for m in [1, 5, 1000] {
            for budget in [usize::MAX >> 1, 1] {
                let (raw, chars) = run_full(&docs, &rounds, m, budget);
                assert_eq!(chars, all, "m {m}, budget {budget}");
                assert_eq!(raw.len(), m.min(raw.len()));
            }
        }
        // characters counted in a later round keep only those at its threshold
        let later = [Round { min_len: 1, max_len: 2, threshold: 0 }, Round { min_len: 3, max_len: 8, threshold: 2 }];
        let want: Counts = all.iter().filter(|(k, c)| k.len() == 2 || *c >= 2).cloned().collect();
        assert!(want.len() < all.len());
        for budget in [usize::MAX >> 1, 1] {
            assert_eq!(run_full(&docs, &later, 3, budget).1, want);
        }
    }

    const DOCS: &[&str] = &[
        "1600 B.C. was a significant year in human history.",
        "the cat sat on the mat; the cat sat on the hat",
        "co-advisor co-advisor co-advisors 漢字漢字 かなカナ e\u{301}te\u{301}",
        "the the the the the cat cat",
    ];

    #[test]
    fn single_round_equals_brute_force() {
        let r = Round { min_len: 1, max_len: 12, threshold: 0 };
        let want = brute(DOCS, &r);
        let got = run(DOCS, &[r], usize::MAX >> 1, usize::MAX >> 1);
        let got: BTreeMap<Vec<u8>, u64> = got.into_iter().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn spilling_gives_identical_counts() {
        let rounds = [
            Round { min_len: 1, max_len: 5, threshold: 0 },
            Round { min_len: 6, max_len: 10, threshold: 2 },
            Round { min_len: 11, max_len: 40, threshold: 2 },
        ];
        let a = run(DOCS, &rounds, 1000, usize::MAX >> 1);
        let b = run(DOCS, &rounds, 1000, 1);
        assert_eq!(a, b);
        // Later rounds with threshold 2 keep only repeated candidates: compare with brute force.
        let mut want: Vec<(Vec<u8>, u64)> = Vec::new();
        for r in &rounds {
            for (k, v) in brute(DOCS, r) {
                if v >= r.threshold {
                    want.push((k, v));
                }
            }
        }
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        want.truncate(1000);
        assert_eq!(a, want);
    }

    #[test]
    fn examples_of_the_paper() {
        let r = Round { min_len: 1, max_len: 30, threshold: 0 };
        let got = brute(&["1600 B.C. was a significant year in human history."], &r);
        for ok in ["6", " sig", "significant", "cant", " year", " was a", "significant year", "ficant "] {
            assert!(got.contains_key(ok.as_bytes()), "{ok}");
        }
        assert!(!got.contains_key(&b"ficant year"[..]));
        let c = run(&["1600 B.C. was a significant year in human history."], &[r], 1 << 20, 1 << 30);
        let c: BTreeMap<Vec<u8>, u64> = c.into_iter().collect();
        assert_eq!(c, got);
    }

    #[test]
    fn top_m_with_ties_by_bytes() {
        let r = Round { min_len: 1, max_len: 12, threshold: 0 };
        let mut want: Vec<(Vec<u8>, u64)> = brute(DOCS, &r).into_iter().collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for m in [1, 5, 17, 100] {
            assert_eq!(run(DOCS, &[r], m, 1 << 30), want[..m].to_vec(), "m = {m}");
        }
        let r = Round { min_len: 1, max_len: 3, threshold: 0 };
        let got = run(&["abab"], &[r], 3, 1 << 30);
        // counts: a 2, b 2, ab 2, ba 1, aba 1, bab 1 ... top 3 by count then bytes
        assert_eq!(got, vec![(b"a".to_vec(), 2), (b"ab".to_vec(), 2), (b"b".to_vec(), 2)]);
    }

    /// The rounds counted block-wise (any partition, blocks merged in any order) keep exactly
    /// what the local rounds keep.
    #[test]
    fn blocks_merged_in_any_order_equal_local_rounds() {
        let rounds = [
            Round { min_len: 1, max_len: 5, threshold: 0 },
            Round { min_len: 6, max_len: 10, threshold: 2 },
            Round { min_len: 11, max_len: 40, threshold: 2 },
        ];
        let docs: Vec<&[u8]> = DOCS.iter().chain(DOCS.iter().rev()).map(|d| d.as_bytes()).collect();
        for m in [7, 40, 1000] {
            let want = run(&DOCS.iter().chain(DOCS.iter().rev()).copied().collect::<Vec<_>>(), &rounds, m, usize::MAX >> 1);
            for (split, reverse) in [(1, false), (3, true), (5, false), (8, true)] {
                let mut c = Counter::new(rounds.to_vec(), m, 1 << 30, std::env::temp_dir()).unwrap();
                for _ in &rounds {
                    c.begin_round().unwrap();
                    // Survivors travel as bytes, as they would between machines.
                    let survivors = Survivors::from_bytes(&c.survivors().unwrap().to_bytes()).unwrap();
                    let r = c.rounds()[c.round()];
                    let mut parts: Vec<BlockCounts> = docs.chunks(split).map(|b| count_block(b, &r, &survivors)).collect();
                    if reverse {
                        parts.reverse();
                    }
                    let mut total = BlockCounts::default();
                    for p in &parts {
                        let p = BlockCounts::from_bytes(&p.to_bytes()).unwrap();
                        total = p.merge(&total).unwrap();
                    }
                    c.end_round_with(&total).unwrap();
                }
                let got: Vec<(Vec<u8>, u64)> = c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
                assert_eq!(got, want, "m = {m}, blocks of {split}");
            }
        }
    }

    #[test]
    fn block_counts_refuse_bad_bytes() {
        let r = Round { min_len: 1, max_len: 4, threshold: 0 };
        let b = count_block(&[b"abcabc"], &r, &Survivors::from_sorted(&[]).unwrap());
        let bytes = b.to_bytes();
        assert_eq!(BlockCounts::from_bytes(&bytes).unwrap().to_bytes(), bytes);
        assert!(BlockCounts::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        let twice = [bytes.clone(), bytes.clone()].concat();
        assert!(BlockCounts::from_bytes(&twice).is_err()); // out of order
        assert!(BlockCounts::from_bytes(&[0, 0, 1, 0, 0, 0, 0, 0, 0, 0]).is_err()); // empty candidate
        let mut big = Vec::new();
        crate::spill::write_record(&mut big, b"a", u64::MAX).unwrap();
        let big = BlockCounts::from_bytes(&big).unwrap();
        assert!(big.merge(&big).is_err());
        let mut c = Counter::new(vec![r], 10, 1 << 30, std::env::temp_dir()).unwrap();
        c.begin_round().unwrap();
        c.add(&[b"ab"]).unwrap();
        assert!(c.end_round_with(&b).is_err()); // documents were added locally
    }
}
