//! CNF training driven by the core (paper section 3.1; SPEC section 4): the counting rounds,
//! their thresholds, the filtering pass, the selection and the special tokens, ending in a
//! [`Tokenizer`]. Whoever holds the documents only streams them in, once per pass.
//!
//! [`train`] does everything for a corpus it can read several times. [`Trainer`] is the same
//! run one pass at a time, for drivers that read the documents themselves (the Python package:
//! file readers, progress bars, Ctrl-C between batches) and for distributed runs, which replace
//! a pass's [`Trainer::add`] calls by the merged results of blocks counted elsewhere
//! ([`count_block`](crate::count_block) and [`Trainer::end_pass_with_counts`];
//! [`Filter::usage_of`] and [`Trainer::end_pass_with_usage`]). The result is the same whichever
//! way the passes are fed.
//!
//! ```
//! use cnfmce::{train, TrainConfig};
//! let docs = ["the cat sat on the mat", "the dog sat on the log", "the cat and the dog"];
//! let config = TrainConfig { vocab_size: 300, special_tokens: vec!["<|end|>".into()], ..TrainConfig::default() };
//! let tok = train(|| docs.iter(), config).unwrap();
//! assert_eq!(tok.num_ids(), 300);
//! assert_eq!(tok.token_to_id(b"<|end|>"), Some(299));
//! let ids = tok.encode(b"the cat", None);
//! assert!(ids.len() < 7);
//! assert_eq!(tok.decode(&ids).unwrap(), b"the cat");
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::count::{validate_rounds, Counter, Round, RoundStats, Survivors, DEFAULT_ROUNDS};
use crate::count::{BlockCounts, RoundSelector, Selection};
use crate::error::Error;
use crate::filter::{BlockUsage, Filter, Selected};
use crate::options::{Algorithm, Options};
use crate::raw_cut;
use crate::refine::{self, SelectionRule, NON_ASCII_SHARE_EXPONENT};
use crate::tokenizer::Tokenizer;

/// `vocab_size` when none is given (the paper's 250,000).
pub const DEFAULT_VOCAB_SIZE: usize = 250_000;

/// `raw_vocab_size` of counting alone (`cnfmce.count`, `cnfmce count`), which knows no
/// `vocab_size`: the paper's 5,000,000.
pub const DEFAULT_COUNT_RAW_VOCAB_SIZE: usize = 5_000_000;

/// `raw_vocab_size` of training when none is given is this multiple of `vocab_size` (see
/// [`default_raw_vocab_size`]). Measured on the mix of all shared training text against 5x, 20x,
/// 40x and the paper's fixed 5,000,000 at 32k, 128k and 250k (`docs/results/selection.md`): the
/// multiple with the smallest worst case over the six categories at every size measured.
pub const RAW_VOCAB_PER_TOKEN: usize = 10;

/// The `raw_vocab_size` training uses for `vocab_size` when none is given.
pub fn default_raw_vocab_size(vocab_size: usize) -> usize {
    vocab_size.saturating_mul(RAW_VOCAB_PER_TOKEN)
}

/// Counting-table bytes before spilling when no budget is given.
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

/// About how many bytes of documents [`train`] hands to a pass at a time.
pub const BATCH_BYTES: usize = 2 << 20;

/// What to train (SPEC section 4).
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// Ids in use in the result: byte tokens and special tokens included.
    pub vocab_size: usize,
    /// Candidates kept by counting. `None`: [`default_raw_vocab_size`] when counting, all the
    /// counts when they are given ([`Trainer::use_counts`]).
    pub raw_vocab_size: Option<usize>,
    pub rounds: Vec<Round>,
    /// Special tokens; they get the ids after the regular ones, in this order.
    pub special_tokens: Vec<String>,
    /// The options of the result; filtering uses its λ and ε with MCE.
    pub options: Options,
    /// Bytes the counting table may hold before it spills to disk.
    pub memory_budget: usize,
    /// Where spill runs are written. `None`: a new directory under the system's temporary
    /// directory, removed when the trainer is dropped.
    pub tmp_dir: Option<PathBuf>,
    /// How the final vocabulary is chosen: the paper's [`SelectionRule::Paper`] (the default and
    /// reference setting, SPEC section 4: one filtering pass, the most used tokens) or
    /// [`SelectionRule::Refined`] (character coverage over every counted character, refining
    /// passes, tokens saved; see [`crate::refine`]).
    pub selection: SelectionRule,
    /// The exponent of the ASCII / non-ASCII normalisation of [`SelectionRule::RefinedNonAscii`]
    /// (`crate::refine` step 5; default [`NON_ASCII_SHARE_EXPONENT`]); another value needs that
    /// selection.
    pub non_ascii_exponent: f64,
    /// The Han weighting of the raw vocabulary's cut ([`crate::raw_cut`]): 0, the default, is the
    /// paper's cut by count; above 0, counting keeps [`crate::HAN_POOL_PER_RAW`] times
    /// `raw_vocab_size` candidates and the cut ranks them by Han-weighted count.
    pub raw_han_exponent: f64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            vocab_size: DEFAULT_VOCAB_SIZE,
            raw_vocab_size: None,
            rounds: DEFAULT_ROUNDS.to_vec(),
            special_tokens: Vec::new(),
            options: Options::default(),
            memory_budget: DEFAULT_MEMORY_BUDGET,
            tmp_dir: None,
            selection: SelectionRule::default(),
            non_ascii_exponent: NON_ASCII_SHARE_EXPONENT,
            raw_han_exponent: 0.0,
        }
    }
}

impl TrainConfig {
    /// Every check of a training run's arguments (made before any document is read).
    fn check(&self) -> Result<(), Error> {
        validate_rounds(&self.rounds)?;
        if self.raw_vocab_size == Some(0) {
            return Err(Error::Value("raw_vocab_size must be a positive int, got 0".into()));
        }
        let e = self.non_ascii_exponent;
        if !(e.is_finite() && (0.0..=refine::MAX_NON_ASCII_EXPONENT).contains(&e)) {
            return Err(Error::Value(format!(
                "non_ascii_exponent must be a number from 0 to {}, got {e}",
                refine::MAX_NON_ASCII_EXPONENT
            )));
        }
        if e != NON_ASCII_SHARE_EXPONENT && self.selection != SelectionRule::RefinedNonAscii {
            return Err(Error::Value(format!(
                "non_ascii_exponent is an exponent of selection='refined-non-ascii', not of selection='{}'",
                self.selection.name()
            )));
        }
        let h = self.raw_han_exponent;
        if !(h.is_finite() && (0.0..=raw_cut::MAX_RAW_HAN_EXPONENT).contains(&h)) {
            return Err(Error::Value(format!(
                "raw_han_exponent must be a number from 0 to {}, got {h}",
                raw_cut::MAX_RAW_HAN_EXPONENT
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for s in &self.special_tokens {
            if s.is_empty() {
                return Err(Error::Value("special tokens must be non-empty strings, got ''".into()));
            }
            if !seen.insert(s.as_str()) {
                return Err(Error::Value(format!("special_tokens has duplicates ({s:?})")));
            }
        }
        if self.vocab_size < 256 + self.special_tokens.len() {
            return Err(Error::Value(format!(
                "vocab_size {} is too small: it must hold the 256 single bytes plus {} special tokens",
                self.vocab_size,
                self.special_tokens.len()
            )));
        }
        Ok(())
    }

    /// The raw vocabulary's size when counting: `raw_vocab_size`, or its default for
    /// `vocab_size`.
    fn counting_raw_vocab_size(&self) -> usize {
        self.raw_vocab_size.unwrap_or_else(|| default_raw_vocab_size(self.vocab_size))
    }

    /// Regular tokens in the result.
    fn regular(&self) -> usize {
        self.vocab_size - self.special_tokens.len()
    }
}

/// One pass over the corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Counting round `index` (of the configured rounds).
    Count { index: usize, round: Round },
    /// Filtering: usage of the raw vocabulary under MCE.
    Filter,
    /// Refining step `index` of [`SelectionRule::Refined`]: usage under MCE of a vocabulary of
    /// `size` tokens cut from the previous pass's (fed like the filtering pass).
    Refine { index: usize, size: usize },
}

/// Statistics of a finished pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassStats {
    Count(RoundStats),
    Filter(FilterStats),
}

/// Statistics of the filtering pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterStats {
    /// Size of the raw vocabulary (missing single bytes included).
    pub raw_vocab_size: usize,
    /// Tokens produced and bytes encoded with the raw vocabulary.
    pub tokens: u64,
    pub bytes: u64,
}

/// A trained tokenizer with what the run measured.
pub struct Trained {
    pub tokenizer: Tokenizer,
    /// The filtering pass over the raw vocabulary.
    pub stats: FilterStats,
    /// Tokens of the result that were used in the last pass (filtering or refining).
    pub used_tokens: usize,
    /// The refining passes made, with their vocabulary sizes and the tokens and bytes encoded.
    pub refine: Vec<FilterStats>,
    /// Multi-byte characters kept by coverage ([`SelectionRule::Refined`]).
    pub covered_characters: usize,
    /// Of those, the characters below the `raw_vocab_size` cut, added to the raw vocabulary.
    pub covered_beyond_cut: usize,
    /// Fallback prefixes added to the raw vocabulary ([`SelectionRule::RefinedNonAscii`]).
    pub fallback_prefixes: usize,
    pub selection: SelectionRule,
    /// Set when the result has fewer ids than `vocab_size` (a raw vocabulary too small).
    pub warning: Option<String>,
}

enum Stage {
    Counting(Counter),
    Filtering(Filter),
    /// A refining pass in progress (or next): its filter and step index.
    Refining(Filter, usize),
    Filtered(Filter),
    /// Between two stages (or after a failed change of stage).
    Empty,
}

/// A training run, one pass at a time (see the module documentation):
///
/// ```
/// use cnfmce::{Trainer, TrainConfig};
/// let docs: Vec<&[u8]> = vec![b"low lower lowest", b"new newer newest"];
/// let mut t = Trainer::new(TrainConfig { vocab_size: 270, ..TrainConfig::default() }).unwrap();
/// while let Some(_pass) = t.next_pass() {
///     t.begin_pass().unwrap();
///     t.add(&docs).unwrap(); // in batches, as many calls as needed
///     t.end_pass().unwrap();
/// }
/// let trained = t.finish().unwrap();
/// assert_eq!(trained.tokenizer.num_ids(), 270);
/// ```
pub struct Trainer {
    config: TrainConfig,
    stage: Stage,
    /// The pass in progress.
    current: Option<Pass>,
    /// A spill directory this trainer made (removed on drop).
    own_tmp: Option<PathBuf>,
    /// The filtering pass's statistics, then each refining pass's.
    filter_stats: Option<FilterStats>,
    refine_stats: Vec<FilterStats>,
    /// Multi-byte characters every cut keeps (empty for [`SelectionRule::Paper`]).
    covered: std::collections::HashSet<Vec<u8>>,
    /// Covered characters the raw vocabulary's cut left out (added to it).
    beyond_cut: usize,
    /// Fallback prefixes added to the raw vocabulary.
    prefixes: usize,
}

/// The raw vocabulary's tokens of 2 to 4 bytes: those that can be one multi-byte character or
/// the prefix of one (what `Trainer::add_covered` looks characters and prefixes up in).
fn multibyte_lengths(counts: &[(Vec<u8>, u64)]) -> std::collections::HashSet<&[u8]> {
    counts.iter().filter(|(t, _)| (2..=4).contains(&t.len())).map(|(t, _)| t.as_slice()).collect()
}

impl Trainer {
    /// Checks the configuration (nothing is read or written yet).
    pub fn new(config: TrainConfig) -> Result<Self, Error> {
        config.check()?;
        let raw = config.counting_raw_vocab_size();
        let (tmp, own_tmp) = match &config.tmp_dir {
            Some(d) => (d.clone(), None),
            None => {
                static SEQ: AtomicUsize = AtomicUsize::new(0);
                let name = format!("cnfmce-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
                let d = std::env::temp_dir().join(name);
                (d.clone(), Some(d))
            }
        };
        let pool = raw_cut::pool_size(raw, config.raw_han_exponent);
        let counter = Counter::new(config.rounds.clone(), pool, config.memory_budget, tmp)?;
        Ok(Trainer {
            config,
            stage: Stage::Counting(counter),
            current: None,
            own_tmp,
            filter_stats: None,
            refine_stats: Vec::new(),
            covered: Default::default(),
            beyond_cut: 0,
            prefixes: 0,
        })
    }

    /// Starts from counts made earlier (a mapping candidate → count, e.g. merged from several
    /// `count` runs) instead of counting: the next pass is the filtering pass. The raw
    /// vocabulary is the best `raw_vocab_size` of them (all when it is `None`), ranked by count,
    /// ties by bytes.
    pub fn use_counts(&mut self, counts: Vec<(Vec<u8>, u64)>) -> Result<(), Error> {
        self.use_counts_and_chars(counts, Vec::new())
    }

    /// [`Trainer::use_counts`] with the character counts counting kept beside the
    /// `raw_vocab_size` cut ([`Counter::char_counts`]: each one multi-byte UTF-8 character, at
    /// most once). The refined selections rank every character of `chars` and of `counts` (a
    /// character in both has its count in `chars`), so the counts of
    /// [`Counter::result`] and [`Counter::char_counts`] give what training from the documents
    /// gives. Of `chars`, only the covered characters the cut left out (and, under
    /// [`SelectionRule::RefinedNonAscii`], the fallback prefixes) join the raw vocabulary; the
    /// paper's rule ignores them.
    pub fn use_counts_and_chars(&mut self, counts: Vec<(Vec<u8>, u64)>, chars: Vec<(Vec<u8>, u64)>) -> Result<(), Error> {
        match &self.stage {
            Stage::Counting(c) if c.round() == 0 && self.current.is_none() => {}
            _ => return Err(Error::Value("counts can only be given before the first pass".into())),
        }
        if self.config.raw_han_exponent > 0.0 && self.config.raw_vocab_size.is_none() {
            return Err(Error::Value(
                "raw_han_exponent weights the raw vocabulary's cut: give raw_vocab_size with the counts".into(),
            ));
        }
        let mut given: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        for (t, c) in chars {
            if !refine::one_multibyte_char(&t) {
                return Err(Error::Value(format!(
                    "character counts must be single multi-byte UTF-8 characters, got {}",
                    crate::show_bytes(&t)
                )));
            }
            if given.insert(t.clone(), c).is_some() {
                return Err(Error::Value(format!("character {} is given twice", crate::show_bytes(&t))));
            }
        }
        // coverage ranks every character of the counts given, as counting ranks every character
        // it counted, whatever the raw vocabulary's cut
        for (t, c) in counts.iter().filter(|(t, _)| refine::one_multibyte_char(t)) {
            given.entry(t.clone()).or_insert(*c);
        }
        let chars: Vec<(Vec<u8>, u64)> = given.into_iter().collect();
        self.set_covered(&chars);
        let mut counts = raw_cut::cut(counts, self.config.raw_vocab_size, self.config.raw_han_exponent);
        self.add_covered(&mut counts, &chars);
        let raw = Filter::rank(counts, None)?;
        self.stage = Stage::Filtering(Filter::new(raw, self.filter_options())?);
        Ok(())
    }

    /// The characters coverage keeps, from the character counts ([`SelectionRule::Refined`]
    /// only).
    fn set_covered(&mut self, chars: &[(Vec<u8>, u64)]) {
        if self.config.selection.refines() {
            self.covered = refine::covered_characters(chars, self.config.regular()).into_iter().collect();
        }
    }

    /// Adds to the raw vocabulary's counts the covered characters that the `raw_vocab_size` cut
    /// left out, with their counts from `chars` (so the filtering pass and every cut see them).
    /// Then, when the rule has them, the fallback prefixes of every character of 3 or 4 bytes
    /// counted (`refine` module documentation, step 6).
    fn add_covered(&mut self, counts: &mut Vec<(Vec<u8>, u64)>, chars: &[(Vec<u8>, u64)]) {
        if !self.covered.is_empty() {
            let have = multibyte_lengths(counts);
            let missing: Vec<(Vec<u8>, u64)> = chars
                .iter()
                .filter(|(t, _)| self.covered.contains(t) && !have.contains(t.as_slice()))
                .cloned()
                .collect();
            self.beyond_cut = missing.len();
            counts.extend(missing);
        }
        if self.config.selection.fallback_prefixes() {
            let have = multibyte_lengths(counts);
            let prefixes = refine::fallback_prefixes(chars, &have);
            self.prefixes = prefixes.len();
            counts.extend(prefixes);
        }
    }

    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Estimated bytes of the counting table (0 outside counting passes).
    pub fn table_bytes(&self) -> usize {
        match &self.stage {
            Stage::Counting(c) => c.table_bytes(),
            _ => 0,
        }
    }

    /// Filtering encodes with MCE, whatever algorithm the result will use.
    fn filter_options(&self) -> Options {
        self.config.options.with_algorithm(Algorithm::Mce)
    }

    /// The pass to run next (the one in progress, if any); `None` when all passes are done.
    pub fn next_pass(&self) -> Option<Pass> {
        if let Some(p) = self.current {
            return Some(p);
        }
        match &self.stage {
            Stage::Counting(c) => {
                let index = c.round();
                Some(Pass::Count { index, round: c.rounds()[index] })
            }
            Stage::Filtering(_) => Some(Pass::Filter),
            Stage::Refining(f, index) => Some(Pass::Refine { index: *index, size: f.vocab().len() }),
            Stage::Filtered(..) | Stage::Empty => None,
        }
    }

    /// Starts the next pass.
    pub fn begin_pass(&mut self) -> Result<Pass, Error> {
        if self.current.is_some() {
            return Err(Error::Value("a pass is already in progress".into()));
        }
        let pass = self.next_pass().ok_or_else(|| Error::Value("all passes are done".into()))?;
        if let (Stage::Counting(c), Some(dir)) = (&mut self.stage, &self.own_tmp) {
            if c.round() == 0 {
                std::fs::create_dir_all(dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
            }
            c.begin_round()?;
        } else if let Stage::Counting(c) = &mut self.stage {
            c.begin_round()?;
        }
        self.current = Some(pass);
        Ok(pass)
    }

    /// During the first counting round: the threshold of every later round becomes `threshold`
    /// (in the counter and in [`Trainer::config`]'s rounds); see [`Counter::set_later_thresholds`].
    pub fn set_later_thresholds(&mut self, threshold: u64) -> Result<(), Error> {
        match (&mut self.stage, self.current) {
            (Stage::Counting(c), Some(Pass::Count { index: 0, .. })) => c.set_later_thresholds(threshold)?,
            _ => return Err(Error::Value("later thresholds can only be set during the first round".into())),
        }
        for r in self.config.rounds.iter_mut().skip(1) {
            r.threshold = threshold;
        }
        Ok(())
    }

    /// Feeds a batch of documents to the pass in progress (parallel on the current rayon pool).
    pub fn add(&mut self, docs: &[&[u8]]) -> Result<(), Error> {
        self.in_pass()?;
        match &mut self.stage {
            Stage::Counting(c) => c.add(docs),
            Stage::Filtering(f) | Stage::Refining(f, _) => {
                f.add(docs);
                Ok(())
            }
            Stage::Filtered(..) | Stage::Empty => unreachable!("no pass after filtering"),
        }
    }

    fn in_pass(&self) -> Result<Pass, Error> {
        self.current.ok_or_else(|| Error::Value("no pass in progress: call begin_pass".into()))
    }

    /// Ends the pass in progress.
    pub fn end_pass(&mut self) -> Result<PassStats, Error> {
        self.in_pass()?;
        match &mut self.stage {
            Stage::Counting(c) => {
                let st = c.end_round()?;
                self.after_round(st)
            }
            Stage::Filtering(_) | Stage::Refining(..) => self.after_filter(),
            Stage::Filtered(..) | Stage::Empty => unreachable!("no pass after filtering"),
        }
    }

    /// In a counting pass: the survivors of earlier rounds that [`count_block`](crate::count_block)
    /// needs to count a block of this round elsewhere.
    pub fn survivors(&self) -> Result<Survivors, Error> {
        match (&self.stage, self.in_pass()?) {
            (Stage::Counting(c), _) => c.survivors(),
            _ => Err(Error::Value("survivors exist only in a counting pass".into())),
        }
    }

    /// Ends a counting pass with the merged counts of its blocks (instead of [`Trainer::add`]).
    pub fn end_pass_with_counts(&mut self, counts: &BlockCounts) -> Result<PassStats, Error> {
        self.in_pass()?;
        match &mut self.stage {
            Stage::Counting(c) => {
                let st = c.end_round_with(counts)?;
                self.after_round(st)
            }
            _ => Err(Error::Value("the pass in progress is not a counting pass".into())),
        }
    }

    /// In a counting pass: the selection that the reducers of a partitioned round apply to
    /// their partition's merged counts ([`CountsMerger::select`](crate::CountsMerger::select)).
    pub fn round_selector(&self) -> Result<RoundSelector, Error> {
        match (&self.stage, self.in_pass()?) {
            (Stage::Counting(c), _) => c.round_selector(),
            _ => Err(Error::Value("a round selector exists only in a counting pass".into())),
        }
    }

    /// Ends a counting pass with the selections of disjoint partitions of its candidates
    /// (instead of [`Trainer::add`] or [`Trainer::end_pass_with_counts`]): the coordinator never
    /// holds more than what the partitions kept.
    pub fn end_pass_with_selected<S: std::borrow::Borrow<Selection>>(&mut self, parts: &[S]) -> Result<PassStats, Error> {
        self.in_pass()?;
        match &mut self.stage {
            Stage::Counting(c) => {
                let st = c.end_round_with_selected(parts)?;
                self.after_round(st)
            }
            _ => Err(Error::Value("the pass in progress is not a counting pass".into())),
        }
    }

    /// In the filtering pass: the filter over the raw vocabulary; in a refining pass, the
    /// filter over that pass's vocabulary (its tokens, in id order, are what the machines of a
    /// distributed run build their own filter from).
    pub fn filter(&self) -> Result<&Filter, Error> {
        match &self.stage {
            Stage::Filtering(f) | Stage::Refining(f, _) => Ok(f),
            _ => Err(Error::Value("the filter exists only in the filtering and refining passes".into())),
        }
    }

    /// Ends the filtering pass with the summed usage of its blocks (instead of [`Trainer::add`]).
    pub fn end_pass_with_usage(&mut self, usage: &BlockUsage) -> Result<PassStats, Error> {
        self.in_pass()?;
        match &mut self.stage {
            Stage::Filtering(f) | Stage::Refining(f, _) => f.add_usage(usage)?,
            _ => return Err(Error::Value("the pass in progress is not the filtering pass".into())),
        }
        self.after_filter()
    }

    fn after_round(&mut self, st: RoundStats) -> Result<PassStats, Error> {
        self.current = None;
        let Stage::Counting(c) = &self.stage else { unreachable!("a counting pass ended") };
        if c.round() == c.rounds().len() {
            let mut counts: Vec<(Vec<u8>, u64)> = c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
            let chars = c.char_counts().to_vec();
            // The counter (and its memory) goes before the filter is built.
            self.stage = Stage::Empty;
            counts = raw_cut::cut(counts, Some(self.config.counting_raw_vocab_size()), self.config.raw_han_exponent);
            self.set_covered(&chars);
            self.add_covered(&mut counts, &chars);
            let raw = Filter::rank(counts, None)?;
            self.stage = Stage::Filtering(Filter::new(raw, self.filter_options())?);
        }
        Ok(PassStats::Count(st))
    }

    fn after_filter(&mut self) -> Result<PassStats, Error> {
        self.current = None;
        let (f, step) = match std::mem::replace(&mut self.stage, Stage::Empty) {
            Stage::Filtering(f) => (f, None),
            Stage::Refining(f, i) => (f, Some(i)),
            _ => unreachable!("a filtering or refining pass ended"),
        };
        let (tokens, bytes) = f.totals();
        if bytes == 0 {
            self.stage = match step {
                None => Stage::Filtering(f),
                Some(i) => Stage::Refining(f, i),
            };
            return Err(Error::Value("the corpus is empty: no text to train on".into()));
        }
        let stats = FilterStats { raw_vocab_size: f.vocab().len(), tokens, bytes };
        match step {
            None => self.filter_stats = Some(stats.clone()),
            Some(_) => self.refine_stats.push(stats.clone()),
        }
        let next = step.map_or(0, |i| i + 1);
        self.stage = match self.next_refine(&f, next)? {
            Some((g, index)) => Stage::Refining(g, index),
            None => Stage::Filtered(f),
        };
        Ok(PassStats::Filter(stats))
    }

    /// The next refining pass after the pass of `f` (from step `from` on), if any: the cut of
    /// `f`'s vocabulary to the first step size that removes tokens.
    fn next_refine(&self, f: &Filter, from: usize) -> Result<Option<(Filter, usize)>, Error> {
        if !self.config.selection.refines() {
            return Ok(None);
        }
        let k = self.config.regular();
        let n = f.vocab().len();
        for index in from..refine::REFINE_STEPS.len() {
            let keep = refine::step_size(index, k);
            if keep >= n {
                continue;
            }
            let chosen = self.cut(f, keep)?;
            let toks = chosen.into_iter().map(|s| s.token).collect();
            return Ok(Some((Filter::new(toks, self.filter_options())?, index)));
        }
        Ok(None)
    }

    /// The cut of `f`'s vocabulary to `keep` tokens by the refined rule, in id order.
    fn cut(&self, f: &Filter, keep: usize) -> Result<Vec<Selected>, Error> {
        let usage = f.usage();
        let weight = match self.config.selection {
            SelectionRule::RefinedScripts => Some(refine::script_weights(f.encoder().vocab(), &usage)),
            SelectionRule::RefinedNonAscii => {
                Some(refine::non_ascii_weights(f.encoder().vocab(), &usage, self.config.non_ascii_exponent))
            }
            _ => None,
        };
        let score = refine::saved_scores(f.encoder(), &usage, keep, weight.as_deref());
        refine::choose(f.encoder(), &usage, &score, keep, &self.covered)
    }

    /// The final vocabulary: with [`SelectionRule::Paper`], the `vocab_size - len(special_tokens)`
    /// most used tokens of the filtering pass (all 256 single bytes included) in id order by
    /// usage; with [`SelectionRule::Refined`], the last refined cut; then the special tokens.
    pub fn finish(&self) -> Result<Trained, Error> {
        let (Stage::Filtered(f), Some(stats)) = (&self.stage, &self.filter_stats) else {
            return Err(Error::Value("training is not finished: run every pass first".into()));
        };
        let k = self.config.regular();
        let selected = match self.config.selection {
            SelectionRule::Paper => f.select(k)?,
            SelectionRule::Refined | SelectionRule::RefinedScripts | SelectionRule::RefinedNonAscii
                if f.vocab().len() > k =>
            {
                self.cut(f, k)?
            }
            // nothing to cut: every token, ids by usage (the paper's rule does exactly that)
            SelectionRule::Refined | SelectionRule::RefinedScripts | SelectionRule::RefinedNonAscii => f.select(k)?,
        };
        let used_tokens = selected.iter().filter(|s| s.usage > 0).count();
        let n = selected.len();
        let entries: Vec<(u32, Vec<u8>)> =
            selected.into_iter().enumerate().map(|(i, s)| (i as u32, s.token)).collect();
        let specials: Vec<(Vec<u8>, u32)> = (self.config.special_tokens.iter())
            .enumerate()
            .map(|(i, s)| (s.as_bytes().to_vec(), (n + i) as u32))
            .collect();
        let warning = (n < k).then(|| {
            format!(
                "the raw vocabulary has only {} tokens: the result has {} ids instead of {}",
                stats.raw_vocab_size,
                n + specials.len(),
                self.config.vocab_size
            )
        });
        let tokenizer = Tokenizer::new(entries, specials, self.config.options)?;
        Ok(Trained {
            tokenizer,
            stats: stats.clone(),
            used_tokens,
            refine: self.refine_stats.clone(),
            covered_characters: self.covered.len(),
            covered_beyond_cut: self.beyond_cut,
            fallback_prefixes: self.prefixes,
            selection: self.config.selection,
            warning,
        })
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        if let Some(d) = &self.own_tmp {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Trains a tokenizer on the documents `corpus()` yields (called once per pass: three counting
/// rounds and the filtering pass with the default rounds).
pub fn train<F, I>(mut corpus: F, config: TrainConfig) -> Result<Tokenizer, Error>
where
    F: FnMut() -> I,
    I: IntoIterator,
    I::Item: AsRef<[u8]>,
{
    let mut t = Trainer::new(config)?;
    while t.next_pass().is_some() {
        t.begin_pass()?;
        let mut batch = Vec::new();
        let mut size = 0usize;
        for doc in corpus() {
            size += doc.as_ref().len();
            batch.push(doc);
            if size >= BATCH_BYTES {
                t.add(&batch.iter().map(|d| d.as_ref()).collect::<Vec<_>>())?;
                batch.clear();
                size = 0;
            }
        }
        if !batch.is_empty() {
            t.add(&batch.iter().map(|d| d.as_ref()).collect::<Vec<_>>())?;
        }
        t.end_pass()?;
    }
    Ok(t.finish()?.tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::count_block;

    const DOCS: &[&str] = &[
        "the cat sat on the mat; the cat sat on the hat",
        "co-advisor co-advisor co-advisors 漢字漢字 かなカナ e\u{301}te\u{301}",
        "1600 B.C. was a significant year in human history.",
        "the the the the the cat cat and the dog, the dog",
        "    indented code() { return x + y; }\n    indented code() { return x - y; }",
    ];

    fn config() -> TrainConfig {
        TrainConfig {
            vocab_size: 300,
            raw_vocab_size: Some(400),
            rounds: vec![
                Round { min_len: 1, max_len: 6, threshold: 0 },
                Round { min_len: 7, max_len: 12, threshold: 2 },
                Round { min_len: 13, max_len: 20, threshold: 2 },
            ],
            special_tokens: vec!["<|end|>".into(), "<|pad|>".into()],
            options: Options::new(Algorithm::Mce, 0.1, true).unwrap(),
            ..TrainConfig::default()
        }
    }

    fn vocabulary(t: &Tokenizer) -> (Vec<(u32, Vec<u8>)>, Vec<(Vec<u8>, u32)>, Options) {
        (t.vocab().iter().map(|(i, b)| (i, b.to_vec())).collect(), t.specials().to_vec(), t.options())
    }

    /// The distributed protocol: every pass fed by blocks (any partition, merged in any order)
    /// that travel as bytes, gives the tokenizer of the local run.
    #[test]
    fn blocks_give_the_local_tokenizer() {
        use SelectionRule::{Paper, Refined};
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        for (split, reverse, selection) in [(1, false, Paper), (2, true, Refined), (3, false, Paper), (5, true, Refined)] {
            let config = || TrainConfig { selection, ..config() };
            let local = train(|| DOCS.iter(), config()).unwrap();
            let mut t = Trainer::new(config()).unwrap();
            while let Some(pass) = t.begin_pass().ok() {
                let mut blocks: Vec<&[&[u8]]> = docs.chunks(split).collect();
                if reverse {
                    blocks.reverse();
                }
                match pass {
                    Pass::Count { round, .. } => {
                        let survivors = Survivors::from_bytes(&t.survivors().unwrap().to_bytes()).unwrap();
                        let mut total = BlockCounts::default();
                        for b in blocks {
                            let part = BlockCounts::from_bytes(&count_block(b, &round, &survivors).to_bytes()).unwrap();
                            total = total.merge(&part).unwrap();
                        }
                        t.end_pass_with_counts(&total).unwrap();
                    }
                    Pass::Filter | Pass::Refine { .. } => {
                        // Each machine builds its own filter from the pass's vocabulary.
                        let raw: Vec<Vec<u8>> = t.filter().unwrap().vocab().iter().map(|(_, b)| b.to_vec()).collect();
                        let worker = Filter::new(raw, t.config().options.with_algorithm(Algorithm::Mce)).unwrap();
                        let mut total = BlockUsage::default();
                        for b in blocks {
                            total = BlockUsage::from_bytes(&worker.usage_of(b).to_bytes()).unwrap().merge(&total).unwrap();
                        }
                        t.end_pass_with_usage(&total).unwrap();
                    }
                }
            }
            let got = t.finish().unwrap().tokenizer;
            assert_eq!(vocabulary(&got), vocabulary(&local), "blocks of {split}, {selection:?}");
        }
        let local = train(|| DOCS.iter(), config()).unwrap();
        assert_eq!(local.num_ids(), 300);
        assert_eq!(local.specials(), &[(b"<|end|>".to_vec(), 298), (b"<|pad|>".to_vec(), 299)]);
        // ids by usage, all single bytes present
        assert_eq!((0..=255u8).filter(|b| local.token_to_id(&[*b]).is_some()).count(), 256);
    }

    /// The partitioned protocol (map: BlockCounter with spilling, reduce: CountsMerger and the
    /// round's selector, coordinator: end_pass_with_selected) gives the local tokenizer.
    #[test]
    fn partitioned_rounds_give_the_local_tokenizer() {
        use crate::count::{BlockCounter, CountsMerger, Part};
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        let dir = std::env::temp_dir();
        for (split, parts, budget, selection) in [
            (1, 1, 1 << 30, SelectionRule::Paper),
            (2, 3, 1, SelectionRule::Paper),
            (3, 7, 1 << 30, SelectionRule::Refined),
        ] {
            let config = || TrainConfig { selection, ..config() };
            let local = train(|| DOCS.iter(), config()).unwrap();
            let mut t = Trainer::new(config()).unwrap();
            while let Ok(pass) = t.begin_pass() {
                match pass {
                    Pass::Count { round, .. } => {
                        let survivors = t.survivors().unwrap();
                        let selector = t.round_selector().unwrap();
                        let mut reducers: Vec<CountsMerger> = (0..parts).map(|_| CountsMerger::new(1 << 20, dir.clone())).collect();
                        for b in docs.chunks(split) {
                            let mut bc = BlockCounter::new(round, budget, dir.clone()).unwrap();
                            bc.add(b, &survivors).unwrap();
                            for (p, part) in bc.finish(parts).unwrap().into_iter().enumerate() {
                                let data = match part {
                                    Part::Memory(v) => v,
                                    Part::File(f) => {
                                        let v = std::fs::read(&f).unwrap();
                                        std::fs::remove_file(f).unwrap();
                                        v
                                    }
                                };
                                reducers[p].add_records(data).unwrap();
                            }
                        }
                        let sels: Vec<_> = reducers.into_iter().map(|r| r.select(&selector).unwrap()).collect();
                        t.end_pass_with_selected(&sels).unwrap();
                    }
                    Pass::Filter | Pass::Refine { .. } => {
                        let usage = t.filter().unwrap().usage_of(&docs);
                        t.end_pass_with_usage(&usage).unwrap();
                    }
                }
            }
            assert_eq!(vocabulary(&t.finish().unwrap().tokenizer), vocabulary(&local), "{split} {parts} {budget} {selection:?}");
        }
    }

    /// Every round of `rounds` over `docs` with a `Counter` keeping `raw` candidates: its result
    /// and its character counts.
    fn counted(rounds: Vec<Round>, raw: usize, docs: &[&[u8]]) -> (Vec<(Vec<u8>, u64)>, Vec<(Vec<u8>, u64)>) {
        let n = rounds.len();
        let mut c = Counter::new(rounds, raw, 1 << 30, std::env::temp_dir()).unwrap();
        for _ in 0..n {
            c.begin_round().unwrap();
            c.add(docs).unwrap();
            c.end_round().unwrap();
        }
        (c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect(), c.char_counts().to_vec())
    }

    /// Counting's raw vocabulary and its character counts give `train`'s vocabulary under every
    /// selection rule (the contract of `train_from_counts(count(...))`); the raw vocabulary
    /// alone does not when characters fall below the cut.
    #[test]
    fn counts_and_characters_give_train() {
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        let (counts, chars) = counted(config().rounds, 400, &docs);
        assert!(chars.iter().any(|ch| ch.0.len() >= 3 && !counts.iter().any(|x| x.0 == ch.0)));
        for selection in [SelectionRule::Paper, SelectionRule::Refined, SelectionRule::RefinedScripts, SelectionRule::RefinedNonAscii] {
            let config = || TrainConfig { selection, ..config() };
            let local = train(|| DOCS.iter(), config()).unwrap();
            let mut t = Trainer::new(config()).unwrap();
            t.use_counts_and_chars(counts.clone(), chars.clone()).unwrap();
            let got = t.finish_all(&docs);
            assert_eq!(vocabulary(&got.tokenizer), vocabulary(&local), "{selection:?}");
            let mut t = Trainer::new(config()).unwrap();
            t.use_counts(counts.clone()).unwrap();
            let cut_only = t.finish_all(&docs);
            if selection.refines() {
                assert_ne!(vocabulary(&cut_only.tokenizer), vocabulary(&local), "{selection:?}");
            } else {
                assert_eq!(vocabulary(&cut_only.tokenizer), vocabulary(&local));
            }
        }
        // a character also among the counts (there with a count of 0, below the cut) is ranked
        // by its count among the characters given
        let config = || TrainConfig { selection: SelectionRule::RefinedNonAscii, ..config() };
        let local = train(|| DOCS.iter(), config()).unwrap();
        let mut both = counts.clone();
        both.extend(chars.iter().filter(|ch| !counts.iter().any(|x| x.0 == ch.0)).map(|(k, _)| (k.clone(), 0)));
        let mut t = Trainer::new(config()).unwrap();
        t.use_counts_and_chars(both.clone(), chars.clone()).unwrap();
        assert_eq!(vocabulary(&t.finish_all(&docs).tokenizer), vocabulary(&local));
        let mut t = Trainer::new(config()).unwrap();
        t.use_counts(both).unwrap();
        assert_ne!(vocabulary(&t.finish_all(&docs).tokenizer), vocabulary(&local));
        // characters that are not one multi-byte character, or repeated, are refused
        for bad in [vec![(b"ab".to_vec(), 3)], vec![(vec![0xe6, 0xbc], 3)], vec![("漢".as_bytes().to_vec(), 1), ("漢".as_bytes().to_vec(), 2)]] {
            let mut t = Trainer::new(config()).unwrap();
            assert!(matches!(t.use_counts_and_chars(counts.clone(), bad), Err(Error::Value(_))));
        }
    }

    #[test]
    fn counts_given_and_documents_in_any_order() {
        let config = || TrainConfig { selection: SelectionRule::Refined, ..config() };
        let local = train(|| DOCS.iter(), config()).unwrap();
        let rev = train(|| DOCS.iter().rev(), config()).unwrap();
        assert_eq!(vocabulary(&rev), vocabulary(&local));
        // train = counting, then filtering from the counts
        let mut c = Counter::new(config().rounds, 400, 1 << 30, std::env::temp_dir()).unwrap();
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        for _ in 0..3 {
            c.begin_round().unwrap();
            c.add(&docs).unwrap();
            c.end_round().unwrap();
        }
        let counts: Vec<(Vec<u8>, u64)> = c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        // the raw vocabulary alone lacks the characters below its cut that coverage takes
        let beyond: Vec<(Vec<u8>, u64)> =
            c.char_counts().iter().filter(|ch| !counts.iter().any(|x| x.0 == ch.0)).cloned().collect();
        assert!(!beyond.is_empty());
        let mut t = Trainer::new(config()).unwrap();
        t.use_counts(counts.clone()).unwrap();
        let cut_only = t.finish_all(&docs);
        assert_ne!(vocabulary(&cut_only.tokenizer), vocabulary(&local));
        assert_eq!(cut_only.covered_beyond_cut, 0);
        // with them (what counting kept beside the cut), the counts give train's result
        let mut t = Trainer::new(config()).unwrap();
        t.use_counts(counts.into_iter().chain(beyond).collect()).unwrap();
        assert_eq!(t.next_pass(), Some(Pass::Filter));
        t.begin_pass().unwrap();
        t.add(&docs).unwrap();
        assert!(matches!(t.end_pass().unwrap(), PassStats::Filter(FilterStats { raw_vocab_size: 400.., .. })));
        // the refined selection cuts the raw vocabulary (400 candidates and the missing bytes)
        // to 298 regular tokens through refining passes of shrinking sizes
        assert!(t.finish().is_err(), "not finished before the refining passes");
        let mut sizes = vec![usize::MAX];
        while let Some(pass) = t.next_pass() {
            let Pass::Refine { index, size } = pass else { panic!("{pass:?}") };
            assert_eq!(size, refine::step_size(index, 298));
            assert!(size < *sizes.last().unwrap());
            sizes.push(size);
            t.begin_pass().unwrap();
            t.add(&docs).unwrap();
            t.end_pass().unwrap();
        }
        assert!(sizes.len() >= 2, "{sizes:?}");
        let got = t.finish().unwrap();
        assert!(got.covered_beyond_cut > 0);
        assert_eq!(vocabulary(&got.tokenizer), vocabulary(&local));
    }

    impl Trainer {
        /// Runs every remaining pass over `docs` and finishes.
        fn finish_all(mut self, docs: &[&[u8]]) -> Trained {
            while self.next_pass().is_some() {
                self.begin_pass().unwrap();
                self.add(docs).unwrap();
                self.end_pass().unwrap();
            }
            self.finish().unwrap()
        }
    }

    /// Thread pools of any size give the same vocabulary, with either selection.
    #[test]
    fn selections_are_deterministic_across_threads() {
        let docs: Vec<String> = (0..60)
            .map(|i| format!("{} {} 漢字{}かな {}", DOCS[i % DOCS.len()], DOCS[(i * 7) % DOCS.len()], i % 9, "ab ".repeat(i % 5)))
            .collect();
        for selection in [SelectionRule::Paper, SelectionRule::Refined] {
            let cfg = || TrainConfig { selection, raw_vocab_size: Some(3000), ..config() };
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| train(|| docs.iter(), cfg()).unwrap())
            };
            let one = run(1);
            assert_eq!(vocabulary(&run(3)), vocabulary(&one), "{selection:?}");
            assert_eq!(one.num_ids(), 300);
        }
    }

    /// `SelectionRule::Paper` is the paper's rule: the most used tokens of the one filtering pass.
    #[test]
    fn paper_selection_is_the_filtering_pass_top() {
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        let cfg = TrainConfig { selection: SelectionRule::Paper, ..config() };
        let mut t = Trainer::new(cfg.clone()).unwrap();
        let mut passes = 0;
        while t.next_pass().is_some() {
            t.begin_pass().unwrap();
            t.add(&docs).unwrap();
            t.end_pass().unwrap();
            passes += 1;
        }
        assert_eq!(passes, 4, "three counting rounds and one filtering pass");
        let Stage::Filtered(f) = &t.stage else { panic!("filtered") };
        let want: Vec<Vec<u8>> = f.select(298).unwrap().into_iter().map(|s| s.token).collect();
        let got = t.finish().unwrap();
        assert!(got.refine.is_empty() && got.covered_characters == 0);
        let toks: Vec<Vec<u8>> = (0..298).map(|i| got.tokenizer.vocab().token(i).unwrap().to_vec()).collect();
        assert_eq!(toks, want);
    }

    /// The Han-weighted cut (crate::raw_cut): counting keeps the pool, the cut keeps the Han
    /// candidates the paper's cut leaves just below the line, and `train` equals
    /// `train_from_counts(count(pool), raw_vocab_size)`; the raw vocabulary is the cut of the
    /// pool, recomputed here from the counter's result.
    #[test]
    fn han_weighted_cut() {
        let mut docs: Vec<String> = Vec::new();
        for i in 0..40 {
            docs.push(format!("the cat number {i} sat on the mat and the dog ran {} times", i % 7));
            if i % 4 == 0 {
                docs.push(format!("我们的数据{}和中文的分词", ["很好", "不错", "一般"][i % 3]));
            }
        }
        let bytes: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
        let rounds = vec![Round { min_len: 1, max_len: 12, threshold: 0 }, Round { min_len: 13, max_len: 24, threshold: 2 }];
        let config = |e: f64, selection| TrainConfig {
            vocab_size: 300,
            raw_vocab_size: Some(120),
            rounds: rounds.clone(),
            raw_han_exponent: e,
            selection,
            ..TrainConfig::default()
        };
        let (pool, chars) = counted(rounds.clone(), 480, &bytes);
        let raw_of = |t: &Trainer| {
            let Stage::Filtering(f) = &t.stage else { panic!("filtering next") };
            let mut v: Vec<Vec<u8>> = f.vocab().iter().map(|(_, b)| b.to_vec()).collect();
            v.sort();
            v
        };
        let run_counting = |cfg: TrainConfig| {
            let mut t = Trainer::new(cfg).unwrap();
            while matches!(t.next_pass(), Some(Pass::Count { .. })) {
                t.begin_pass().unwrap();
                t.add(&bytes).unwrap();
                t.end_pass().unwrap();
            }
            t
        };
        let paper = raw_of(&run_counting(config(0.0, SelectionRule::Paper)));
        let weighted = raw_of(&run_counting(config(1.0, SelectionRule::Paper)));
        let han = |v: &[Vec<u8>]| v.iter().filter(|t| crate::has_han(t)).count();
        assert!(han(&weighted) > han(&paper), "{} Han candidates, the paper's cut {}", han(&weighted), han(&paper));
        let mut want: Vec<Vec<u8>> = raw_cut::cut(pool.clone(), Some(120), 1.0).into_iter().map(|x| x.0).collect();
        let missing: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).filter(|b| !want.contains(b)).collect();
        want.extend(missing);
        want.sort();
        assert_eq!(weighted, want);
        for selection in [SelectionRule::Paper, SelectionRule::RefinedNonAscii] {
            let local = train(|| docs.iter(), config(1.0, selection)).unwrap();
            let mut t = Trainer::new(config(1.0, selection)).unwrap();
            t.use_counts_and_chars(pool.clone(), chars.clone()).unwrap();
            assert_eq!(vocabulary(&t.finish_all(&bytes).tokenizer), vocabulary(&local), "{selection:?}");
            let plain = train(|| docs.iter(), config(0.0, selection)).unwrap();
            assert_ne!(vocabulary(&plain), vocabulary(&local), "{selection:?}");
        }
        // given counts need a raw_vocab_size to cut
        let mut t = Trainer::new(TrainConfig { raw_vocab_size: None, ..config(1.0, SelectionRule::Paper) }).unwrap();
        let e = t.use_counts(pool.clone()).err().expect("refused");
        assert!(e.to_string().contains("raw_vocab_size"), "{e}");
    }

    /// `non_ascii_exponent` weighs the smaller group of selection="refined-non-ascii" by that
    /// power of the usage ratio: 0 is selection="refined", another value another vocabulary.
    #[test]
    fn non_ascii_exponent_of_the_run() {
        // mostly ASCII words, some Greek: the two groups compete for the last ids
        let latin = ["alpha", "river", "stone", "window", "garden", "yellow", "market", "silver", "planet", "castle"];
        let greek = ["ποτάμι", "πέτρα", "κήπος", "αγορά", "ασήμι", "κάστρο"];
        let mut state = 7u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let docs: Vec<String> = (0..300)
            .map(|i| {
                let words = if i % 5 == 0 { &greek[..] } else { &latin[..] };
                (0..8).map(|_| words[next() % words.len()]).collect::<Vec<_>>().join(" ")
            })
            .collect();
        let cfg = |e: f64| TrainConfig {
            vocab_size: 290,
            raw_vocab_size: Some(2000),
            rounds: vec![Round { min_len: 1, max_len: 14, threshold: 0 }],
            selection: SelectionRule::RefinedNonAscii,
            non_ascii_exponent: e,
            ..TrainConfig::default()
        };
        let default = train(|| docs.iter(), cfg(NON_ASCII_SHARE_EXPONENT)).unwrap();
        let implicit = TrainConfig { non_ascii_exponent: TrainConfig::default().non_ascii_exponent, ..cfg(0.0) };
        assert_eq!(vocabulary(&train(|| docs.iter(), implicit).unwrap()), vocabulary(&default));
        let non_ascii = |t: &Tokenizer| t.vocab().iter().filter(|(_, b)| b.len() > 1 && !b.is_ascii()).count();
        let (none, strong) = (train(|| docs.iter(), cfg(0.0)).unwrap(), train(|| docs.iter(), cfg(3.0)).unwrap());
        assert!(non_ascii(&strong) > non_ascii(&none), "{} non-ASCII ids with 3, {} with 0", non_ascii(&strong), non_ascii(&none));
        assert!(non_ascii(&strong) >= non_ascii(&default) && non_ascii(&default) >= non_ascii(&none));
    }

    #[test]
    fn checks_come_first() {
        let bad = |f: fn(&mut TrainConfig)| {
            let mut c = config();
            f(&mut c);
            Trainer::new(c).err().expect("refused")
        };
        bad(|c| c.vocab_size = 257);
        bad(|c| c.special_tokens = vec!["a".into(), "a".into()]);
        bad(|c| c.special_tokens = vec![String::new()]);
        bad(|c| c.raw_vocab_size = Some(0));
        bad(|c| c.rounds = vec![]);
        bad(|c| c.non_ascii_exponent = 1.0); // not the selection's
        bad(|c| {
            c.selection = SelectionRule::RefinedNonAscii;
            c.non_ascii_exponent = f64::NAN
        });
        bad(|c| {
            c.selection = SelectionRule::RefinedNonAscii;
            c.non_ascii_exponent = -0.5
        });
        bad(|c| c.raw_han_exponent = 4.5);
        bad(|c| c.raw_han_exponent = f64::INFINITY);
        bad(|c| c.raw_han_exponent = -1.0);
        let mut t = Trainer::new(config()).unwrap();
        assert!(t.add(&[b"x"]).is_err()); // no pass begun
        assert!(t.end_pass().is_err());
        t.begin_pass().unwrap();
        assert!(t.begin_pass().is_err());
        assert!(t.use_counts(vec![]).is_err());
        let empty = t.end_pass().err().expect("empty corpus");
        assert!(empty.to_string().contains("empty"), "{empty}");
        let e = train(|| Vec::<&str>::new(), config()).err().expect("empty corpus");
        assert!(e.to_string().contains("empty"));
        assert!(Trainer::new(config()).unwrap().finish().is_err());
    }

    #[test]
    fn own_spill_directory_is_removed() {
        let mut c = config();
        c.memory_budget = 1; // spill at every check
        let mut t = Trainer::new(c).unwrap();
        let dir = t.own_tmp.clone().unwrap();
        t.begin_pass().unwrap();
        assert!(dir.is_dir());
        t.add(&DOCS.iter().map(|d| d.as_bytes()).collect::<Vec<_>>()).unwrap();
        drop(t);
        assert!(!dir.exists());
    }

    #[test]
    fn default_raw_vocab_size_is_a_multiple() {
        assert_eq!(default_raw_vocab_size(1000), 1000 * RAW_VOCAB_PER_TOKEN);
        assert_eq!(default_raw_vocab_size(usize::MAX), usize::MAX);
    }
}
