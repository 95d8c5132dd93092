//! Vocabulary extension: new CNF tokens added to an existing vocabulary that keeps every id.
//!
//! The base (any [`Tokenizer`]: a published vocabulary, a trained one) keeps every token, every
//! special token and every id; ids it leaves unused stay unused. The new tokens get the ids from
//! one past the base's largest id (special tokens included) on. They are chosen from counted
//! candidates (the counting phase of CNF, run by the caller; a candidate the base already has is
//! not new) by the filtering and refining passes of [`SelectionRule::Refined`](crate::SelectionRule),
//! with the base tokens always kept:
//!
//! 1. *Filtering.* The training text is encoded with MCE over the base and every candidate (the
//!    base's ids, candidates after them in counting order) and each id's usage counted.
//! 2. *Refining passes.* The candidates are cut to `REFINE_STEPS[i] * new_tokens` (2x, 1.4x,
//!    1.15x; a step that would remove nothing is skipped), each time keeping the candidates that
//!    save the most tokens, `usage(t) * (alt(t) - 1)` (`crate::refine`, step 3: `alt(t)` is what
//!    the current vocabulary, base included, needs to spell `t` without `t`; exact for the
//!    `2 * keep` most used candidates, the lower bound `usage(t)` for the others), and the text
//!    encoded again over the base and the kept candidates.
//! 3. *Final cut.* The last cut keeps `new_tokens` candidates by the same score; their ids follow
//!    the base's by usage in the last pass (most used first, ties by bytes). When fewer
//!    candidates were used than `new_tokens`, unused ones fill the places in counting order; when
//!    there are fewer candidates than `new_tokens`, the result has fewer new ids.
//!
//! Every base token keeps its id and bytes, so any encoding over the base is an encoding over the
//! extension with the same cost: the MCE cost of any text with the extension is at most its cost
//! with the base.
//!
//! For each new token, its *pieces* are its MCE encoding with the base alone (base ids), what an
//! embedding for it can be initialised from.

use std::collections::HashSet;

use rayon::prelude::*;

use crate::error::Error;
use crate::filter::{BlockUsage, Filter};
use crate::mce::{Encoder, Scratch};
use crate::options::{Algorithm, Options};
use crate::refine::{self, REFINE_STEPS};
use crate::tokenizer::Tokenizer;
use crate::vocab::Vocab;

/// A base vocabulary: its regular tokens `(id, bytes)`, its special tokens `(bytes, id)` and its
/// options.
#[derive(Clone, Debug)]
pub struct Base {
    pub tokens: Vec<(u32, Vec<u8>)>,
    pub specials: Vec<(Vec<u8>, u32)>,
    pub options: Options,
}

/// Statistics of one pass of an extension run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendPassStats {
    /// Candidates in the pass's vocabulary (beside the base).
    pub candidates: usize,
    pub tokens: u64,
    pub bytes: u64,
}

/// The result of an extension run.
pub struct Extended {
    pub tokenizer: Tokenizer,
    /// The first new id (one past the base's largest id).
    pub first_new_id: u32,
    /// The new tokens in id order (ids `first_new_id..`).
    pub new_tokens: Vec<Vec<u8>>,
    /// For each new token, its MCE encoding with the base alone.
    pub pieces: Vec<Vec<u32>>,
    /// New tokens that were used in the last pass.
    pub used_new_tokens: usize,
    /// The filtering pass, then each refining pass.
    pub passes: Vec<ExtendPassStats>,
    /// Set when the result has fewer new tokens than asked for.
    pub warning: Option<String>,
}

/// An extension run, one pass at a time (like [`crate::Trainer`]'s filtering and refining
/// passes): `while let Some(step) = e.next_pass() { e.add(..)...; e.end_pass()? }`, then
/// [`Extender::finish`].
///
/// A pass spread over machines: each builds the pass's [`Filter`] from
/// [`Extender::pass_vocab`] with [`Extender::pass_options`] (`Filter::with_ids`) and computes
/// the [`BlockUsage`] of its documents (`Filter::usage_of`); [`Extender::add_usage`] sums them
/// (exactly, in any order) before [`Extender::end_pass`].
pub struct Extender {
    base: Base,
    base_vocab_len: usize,
    first_new_id: u32,
    new_tokens: usize,
    /// The candidates of the current pass (id `first_new_id + index`).
    cands: Vec<Vec<u8>>,
    /// The current pass's vocabulary (the base and `cands`) and usage.
    filter: Filter,
    /// The refining step of the current pass (`None`: the filtering pass).
    step: Option<usize>,
    /// Whether every pass is done.
    done: bool,
    passes: Vec<ExtendPassStats>,
    /// The exponent of the ASCII / non-ASCII weighting of the cuts (`None`: no weighting).
    non_ascii_exponent: Option<f64>,
}

impl Extender {
    /// `candidates`: counted candidates, best first (counting rank). Candidates the base already
    /// has (as a regular or a special token) and repeats are dropped; empty ones are an error.
    pub fn new(base: Base, candidates: Vec<Vec<u8>>, new_tokens: usize) -> Result<Self, Error> {
        if new_tokens == 0 {
            return Err(Error::Value("new_tokens must be a positive int, got 0".into()));
        }
        // checks the base (single bytes, repeats, ids) as a tokenizer would
        let check = Tokenizer::new(base.tokens.clone(), base.specials.clone(), base.options)?;
        let max_regular = base.tokens.iter().map(|t| t.0).max().unwrap_or(0);
        let max_special = base.specials.iter().map(|s| s.1).max().unwrap_or(0);
        let top = max_regular.max(max_special);
        let first_new_id = top
            .checked_add(1)
            .filter(|&i| i <= crate::vocab::MAX_ID)
            .ok_or_else(|| Error::Value("the base uses the largest id: there is no id left for new tokens".into()))?;
        let mut have: HashSet<&[u8]> = base.tokens.iter().map(|t| t.1.as_slice()).collect();
        have.extend(base.specials.iter().map(|s| s.0.as_slice()));
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut cands = Vec::new();
        for c in candidates {
            if c.is_empty() {
                return Err(Error::Value("an empty candidate in the counts".into()));
            }
            if have.contains(c.as_slice()) || seen.contains(&c) {
                continue;
            }
            seen.insert(c.clone());
            cands.push(c);
        }
        drop(have);
        drop(check);
        let base_vocab_len = base.tokens.len();
        let filter = Self::filter(&base, first_new_id, &cands)?;
        Ok(Extender {
            base,
            base_vocab_len,
            first_new_id,
            new_tokens,
            cands,
            filter,
            step: None,
            done: false,
            passes: Vec::new(),
            non_ascii_exponent: None,
        })
    }

    /// Weights the cuts like [`SelectionRule::RefinedNonAscii`](crate::SelectionRule) (`crate::refine`,
    /// step 5): the candidates of the smaller of the ASCII and non-ASCII groups (by the usage of
    /// the pass's whole vocabulary, base included) have their usage and score multiplied by the
    /// ratio of the two usages to the power `exponent` (0 to `MAX_NON_ASCII_EXPONENT`).
    pub fn with_non_ascii_exponent(mut self, exponent: f64) -> Result<Self, Error> {
        if !(exponent.is_finite() && (0.0..=refine::MAX_NON_ASCII_EXPONENT).contains(&exponent)) {
            return Err(Error::Value(format!(
                "non_ascii_exponent must be a number from 0 to {}, got {exponent}",
                refine::MAX_NON_ASCII_EXPONENT
            )));
        }
        self.non_ascii_exponent = Some(exponent);
        Ok(self)
    }

    /// The usage of MCE over the base and `cands` (ids from `first`), with the base's λ and ε.
    fn filter(base: &Base, first: u32, cands: &[Vec<u8>]) -> Result<Filter, Error> {
        let mut entries = base.tokens.clone();
        entries.extend(cands.iter().enumerate().map(|(i, c)| (first + i as u32, c.clone())));
        Filter::with_ids(entries, Self::options_of(base))
    }

    fn options_of(base: &Base) -> Options {
        base.options.with_algorithm(Algorithm::Mce)
    }

    /// The vocabulary of the current pass, `(id, bytes)` in id order: the base's tokens and the
    /// candidates (what a machine builds the pass's [`Filter`] from).
    pub fn pass_vocab(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.filter.vocab().iter()
    }

    /// The options of every pass's encoding: MCE with the base's λ and ε.
    pub fn pass_options(&self) -> Options {
        Self::options_of(&self.base)
    }

    /// The first new id.
    pub fn first_new_id(&self) -> u32 {
        self.first_new_id
    }

    /// Candidates of the current pass (after dropping those the base has).
    pub fn candidates(&self) -> &[Vec<u8>] {
        &self.cands
    }

    /// `None` for the filtering pass, `Some(i)` for refining step `i`; `None` of the outer
    /// option when every pass is done.
    pub fn next_pass(&self) -> Option<Option<usize>> {
        (!self.done).then_some(self.step)
    }

    /// Encodes a batch of documents with the current vocabulary (parallel on the current rayon
    /// pool) and adds the usage.
    pub fn add(&mut self, docs: &[&[u8]]) -> Result<(), Error> {
        if self.done {
            return Err(Error::Value("all passes are done".into()));
        }
        self.filter.add(docs);
        Ok(())
    }

    /// The usage of a block of documents with the current vocabulary (for distributed runs).
    pub fn usage_of(&self, docs: &[&[u8]]) -> BlockUsage {
        self.filter.usage_of(docs)
    }

    /// Adds the usage of blocks encoded elsewhere with the current vocabulary (the usage of no
    /// documents, `BlockUsage::default()`, adds nothing).
    pub fn add_usage(&mut self, block: &BlockUsage) -> Result<(), Error> {
        if self.done {
            return Err(Error::Value("all passes are done".into()));
        }
        if block.usage.is_empty() && block.tokens == 0 && block.bytes == 0 {
            return Ok(());
        }
        self.filter.add_usage(block)
    }

    /// Ends the pass in progress; the next one (if any) cuts the candidates further.
    pub fn end_pass(&mut self) -> Result<ExtendPassStats, Error> {
        if self.done {
            return Err(Error::Value("all passes are done".into()));
        }
        let (tokens, bytes) = self.filter.totals();
        if bytes == 0 {
            return Err(Error::Value("the corpus is empty: no text to count the new tokens on".into()));
        }
        let st = ExtendPassStats { candidates: self.cands.len(), tokens, bytes };
        self.passes.push(st.clone());
        let from = self.step.map_or(0, |i| i + 1);
        let next = (from..REFINE_STEPS.len())
            .map(|i| (i, refine::step_size(i, self.new_tokens)))
            .find(|&(_, keep)| keep < self.cands.len());
        match next {
            None => self.done = true,
            Some((i, keep)) => {
                let kept = self.cut(keep);
                self.filter = Self::filter(&self.base, self.first_new_id, &kept)?;
                self.cands = kept;
                self.step = Some(i);
            }
        }
        Ok(st)
    }

    /// The `keep` candidates that save the most tokens (module documentation), with their
    /// usage, ordered by usage (most used first, ties by bytes).
    fn cut_with_usage(&self, keep: usize) -> Vec<(Vec<u8>, u64)> {
        let usage = self.filter.usage();
        let first = self.first_new_id as usize;
        let u = |i: usize| usage[first + i];
        let weight = self.non_ascii_exponent.map(|e| refine::non_ascii_weights(self.filter.vocab(), &usage, e));
        let w = |i: usize| weight.as_ref().map_or(1.0, |w| w[first + i]);
        let scaled = |x: u64, w: f64| if w == 1.0 { x } else { (x as f64 * w).round() as u64 };
        let wu = |i: usize| scaled(u(i), w(i));
        let mut by_usage: Vec<usize> = (0..self.cands.len()).filter(|&i| u(i) > 0).collect();
        by_usage.par_sort_unstable_by(|&a, &b| wu(b).cmp(&wu(a)).then_with(|| self.cands[a].cmp(&self.cands[b])));
        let top = (2 * keep).min(by_usage.len());
        let mut score: Vec<u64> = vec![0; self.cands.len()];
        for &i in &by_usage[top..] {
            score[i] = wu(i);
        }
        let enc = self.filter.encoder();
        let exact: Vec<(usize, u64)> = by_usage[..top]
            .par_iter()
            .map_init(
                || (Scratch::default(), Vec::new()),
                |(scratch, out), &i| {
                    let alt = refine::alt_cost(enc, &self.cands[i], scratch, out);
                    (i, scaled(u(i).saturating_mul(alt.saturating_sub(1)), w(i)))
                },
            )
            .collect();
        for (i, s) in exact {
            score[i] = s;
        }
        let mut order: Vec<usize> = (0..self.cands.len()).collect();
        // best score first, ties by bytes; unused (score 0) in the current order
        order.par_sort_unstable_by(|&a, &b| match (score[a], score[b]) {
            (0, 0) => a.cmp(&b),
            (x, y) => y.cmp(&x).then_with(|| self.cands[a].cmp(&self.cands[b])),
        });
        order.truncate(keep);
        order.par_sort_unstable_by(|&a, &b| u(b).cmp(&u(a)).then_with(|| self.cands[a].cmp(&self.cands[b])));
        order.into_iter().map(|i| (self.cands[i].clone(), u(i))).collect()
    }

    fn cut(&self, keep: usize) -> Vec<Vec<u8>> {
        self.cut_with_usage(keep).into_iter().map(|c| c.0).collect()
    }

    /// The extended tokenizer (base options), its new tokens and their pieces over the base.
    pub fn finish(&self) -> Result<Extended, Error> {
        if !self.done {
            return Err(Error::Value("the extension is not finished: run every pass first".into()));
        }
        let chosen = self.cut_with_usage(self.new_tokens.min(self.cands.len()));
        let used_new_tokens = chosen.iter().filter(|c| c.1 > 0).count();
        let new_tokens: Vec<Vec<u8>> = chosen.into_iter().map(|c| c.0).collect();
        let mut entries = self.base.tokens.clone();
        entries.extend(new_tokens.iter().enumerate().map(|(i, t)| (self.first_new_id + i as u32, t.clone())));
        let tokenizer = Tokenizer::new(entries, self.base.specials.clone(), self.base.options)?;
        let pieces = pieces_over(&self.base, &new_tokens)?;
        let warning = (new_tokens.len() < self.new_tokens).then(|| {
            format!(
                "the text offers only {} candidates the base lacks: {} new tokens instead of {}",
                self.cands.len(),
                new_tokens.len(),
                self.new_tokens
            )
        });
        debug_assert_eq!(tokenizer.vocab().len(), self.base_vocab_len + new_tokens.len());
        Ok(Extended {
            tokenizer,
            first_new_id: self.first_new_id,
            new_tokens,
            pieces,
            used_new_tokens,
            passes: self.passes.clone(),
            warning,
        })
    }
}

/// The MCE encoding of each token of `tokens` with the base alone (its λ and ε).
pub fn pieces_over(base: &Base, tokens: &[Vec<u8>]) -> Result<Vec<Vec<u32>>, Error> {
    let enc = Encoder::new(Vocab::new(base.tokens.clone())?, Extender::options_of(base));
    Ok(tokens
        .par_iter()
        .map_init(Scratch::default, |scratch, t| {
            let mut out = Vec::new();
            enc.encode_into(t, scratch, &mut out);
            out
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(extra: &[&str], with_special: bool) -> Base {
        let mut tokens: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        for (k, t) in extra.iter().enumerate() {
            // a hole at id 256 + 2k + 1: unused ids stay unused
            tokens.push((256 + 2 * k as u32, t.as_bytes().to_vec()));
        }
        let specials = if with_special { vec![(b"<|end|>".to_vec(), 400)] } else { vec![] };
        Base { tokens, specials, options: Options::default() }
    }

    fn run(b: Base, cands: &[&str], n: usize, docs: &[&str]) -> Extended {
        let c = cands.iter().map(|s| s.as_bytes().to_vec()).collect();
        let mut e = Extender::new(b, c, n).unwrap();
        let d: Vec<&[u8]> = docs.iter().map(|s| s.as_bytes()).collect();
        while e.next_pass().is_some() {
            e.add(&d).unwrap();
            e.end_pass().unwrap();
        }
        e.finish().unwrap()
    }

    #[test]
    fn ids_kept_and_new_after_the_largest() {
        let b = base(&["the", " cat"], true);
        let docs = ["the cat sat on the mat", "the cat sat on the hat", "sat on sat on"];
        let cands = ["the", " sat", " on", " the", "at", " mat", " hat", "<|end|>", " sat"];
        let x = run(b.clone(), &cands, 3, &docs);
        assert_eq!(x.first_new_id, 401);
        for (id, t) in &b.tokens {
            assert_eq!(x.tokenizer.vocab().token(*id), Some(t.as_slice()));
        }
        assert_eq!(x.tokenizer.specials(), b.specials.as_slice());
        assert_eq!(x.tokenizer.vocab().token(257), None);
        assert_eq!(x.new_tokens.len(), 3);
        // the base's tokens and special token are not new, repeats count once
        assert!(x.new_tokens.iter().all(|t| t != b"the" && t != b"<|end|>"));
        for (i, t) in x.new_tokens.iter().enumerate() {
            assert_eq!(x.tokenizer.vocab().token(401 + i as u32), Some(t.as_slice()));
            // pieces spell the token with base ids
            let spelled: Vec<u8> = x.pieces[i].iter().flat_map(|&p| b.tokens.iter().find(|e| e.0 == p).unwrap().1.clone()).collect();
            assert_eq!(&spelled, t);
        }
        assert!(x.new_tokens.contains(&b" sat".to_vec()) && x.new_tokens.contains(&b" on".to_vec()));
        assert!(x.warning.is_none());
        // more than the candidates: fewer new ids and a warning
        let y = run(b, &cands, 50, &docs);
        assert_eq!(y.new_tokens.len(), 6);
        assert!(y.warning.is_some());
    }

    #[test]
    fn passes_spread_over_machines_give_the_local_result() {
        // each "machine" builds the pass's filter from its vocabulary and options and counts
        // its blocks; the sums, in another order, give what the run's own passes give
        let b = base(&["the", " cat"], true);
        let docs = ["the cat sat on the mat", "the cat sat on the hat", "sat on sat on", "a mat, a hat"];
        let cands = ["the", " sat", " on", " the", "at", " mat", " hat", "<|end|>", " sat", "on", " a"];
        let want = run(b.clone(), &cands, 3, &docs);
        let c: Vec<Vec<u8>> = cands.iter().map(|s| s.as_bytes().to_vec()).collect();
        let mut e = Extender::new(b, c, 3).unwrap();
        let mut passes = 0;
        while e.next_pass().is_some() {
            let entries: Vec<(u32, Vec<u8>)> = e.pass_vocab().map(|(i, t)| (i, t.to_vec())).collect();
            let worker = Filter::with_ids(entries, e.pass_options()).unwrap();
            let mut total = BlockUsage::default();
            for d in docs.iter().rev() {
                total = worker.usage_of(&[d.as_bytes()]).merge(&total).unwrap();
            }
            assert_eq!(total, e.usage_of(&docs.iter().map(|d| d.as_bytes()).collect::<Vec<_>>()));
            e.add_usage(&BlockUsage::default()).unwrap();
            e.add_usage(&total).unwrap();
            e.end_pass().unwrap();
            passes += 1;
        }
        assert!(passes >= 2);
        let got = e.finish().unwrap();
        assert_eq!((got.new_tokens, got.pieces, got.passes), (want.new_tokens, want.pieces, want.passes));
        assert!(e.add_usage(&BlockUsage { usage: vec![1], tokens: 1, bytes: 1 }).is_err());
    }

    #[test]
    fn refining_passes_and_bad_input() {
        let b = base(&[], false);
        let docs = ["aaaa bbbb cccc dddd eeee aaaa bbbb aaaa"; 3];
        let cands = ["aaaa", "bbbb", "cccc", "dddd", "eeee", "aa", "bb", " a", " b", " c", " d", " e"];
        let x = run(b.clone(), &cands, 2, &docs);
        assert!(x.passes.len() >= 2, "refining passes were made: {:?}", x.passes);
        // tokens saved, not usage: "aaaa" 9 uses x (2 - 1) = 9 ("aa" + "aa"), "cccc" 3 x (4 - 1)
        // = 9 (no "cc"), "bbbb" 6 x (2 - 1) = 6 ("bb" + "bb")
        assert_eq!(x.new_tokens, vec![b"aaaa".to_vec(), b"cccc".to_vec()]);
        assert!(Extender::new(b.clone(), vec![vec![]], 2).is_err());
        assert!(Extender::new(b.clone(), vec![], 0).is_err());
        // the non-ASCII weighting moves a place from an ASCII candidate to a non-ASCII one
        let docs2 = ["aaaa bbbb cccc aaaa bbbb aaaa bbbb cccc 中文 dddd"; 3];
        let cands2 = ["aaaa", "bbbb", "cccc", "dddd", "中文"];
        let plain = run(b.clone(), &cands2, 2, &docs2);
        assert!(!plain.new_tokens.contains(&"中文".as_bytes().to_vec()));
        let c2: Vec<Vec<u8>> = cands2.iter().map(|s| s.as_bytes().to_vec()).collect();
        let mut e = Extender::new(b.clone(), c2, 2).unwrap().with_non_ascii_exponent(1.0).unwrap();
        let d2: Vec<&[u8]> = docs2.iter().map(|s| s.as_bytes()).collect();
        while e.next_pass().is_some() {
            e.add(&d2).unwrap();
            e.end_pass().unwrap();
        }
        assert!(e.finish().unwrap().new_tokens.contains(&"中文".as_bytes().to_vec()));
        assert!(Extender::new(b.clone(), vec![], 1).unwrap().with_non_ascii_exponent(-1.0).is_err());
        let mut e = Extender::new(b, vec![b"ab".to_vec()], 1).unwrap();
        assert!(e.end_pass().is_err()); // no text
        assert!(e.finish().is_err());
    }
}
