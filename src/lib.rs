//! cnfmce: Counting-and-Filtering vocabularies and Min-Cost Encoding.
//!
//! The core is plain Rust, one idea per module, named after the paper; this file is the crate's
//! front: the module list and the public API, re-exported here. The PyO3 bindings (the
//! `cnfmce._core` extension module) live in `python/`, behind the `python` feature.
//!
//! - [`Tokenizer`] encodes and decodes with a [`Vocab`] and its [`Options`] ([`Algorithm`], λ, ε).
//!   [`tiktoken_entries`] reads a published `.tiktoken` vocabulary for it.
//! - [`train`] (or [`Trainer`], one pass at a time) trains a vocabulary from documents;
//!   [`Counter`] (counting over [`Round`]s) and [`Filter`] (usage under MCE, selection) are its
//!   two phases, and [`count_block`], [`BlockCounts`], [`BlockUsage`] the steps of a run spread
//!   over several machines (docs/spec.md section 6).
//!
//! Encoding with a vocabulary (the 256 single bytes are required; ids need not be dense):
//!
//! ```
//! use cnfmce::{Algorithm, Options, Tokenizer};
//! let mut tokens: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
//! for (id, t) in [(256, "the"), (257, " cat"), (258, " ca"), (259, "t sat")] {
//!     tokens.push((id, t.as_bytes().to_vec()));
//! }
//! let specials = vec![(b"<|end|>".to_vec(), 300)];
//! let tok = Tokenizer::new(tokens, specials, Options::default()).unwrap();
//! // " ca" + "t sat" would be fewer tokens, but "t sat" starts inside the unit "cat" and
//! // reaches "sat": it touches three units, which MCE forbids.
//! let ids = tok.encode(b"the cat sat", None);
//! assert_eq!(ids, vec![256, 257, b' ' as u32, b's' as u32, b'a' as u32, b't' as u32]);
//! assert_eq!(tok.decode(&ids).unwrap(), b"the cat sat");
//! // special tokens are matched only when allowed
//! let all = tok.matcher(None).unwrap();
//! assert_eq!(tok.encode(b"the<|end|>", Some(&all)), vec![256, 300]);
//! // forward maximum matching over the same vocabulary
//! let fmm = Tokenizer::new(vec![], vec![], Options::default().with_algorithm(Algorithm::Fmm));
//! assert!(fmm.is_err()); // an empty vocabulary lacks the single bytes
//! ```

mod automaton;
mod balance;
mod cost;
mod count;
mod error;
mod extend;
mod filter;
mod mce;
mod mem;
mod once_box;
mod options;
mod piece_cache;
mod probe;
mod raw_cut;
/// Corpus files (JSON lines, plain or gzip; text files) read into blocks of UTF-8 documents.
pub mod read;
mod refine;
mod runs;
mod spill;
mod tiktoken;
mod tokenizer;
mod train;
mod trie;
mod units;
mod vocab;

#[cfg(feature = "python")]
mod python;

pub use count::{
    count_block, partition_of, rounds_warning, scaled_threshold, validate_rounds, BlockCounter, BlockCounts, Counter,
    CountsMerger, Part, Round, RoundSelector, RoundStats, Selection, Survivors, BYTES_PER_THRESHOLD, DEFAULT_ROUNDS,
    MAX_CANDIDATE_LEN, MIN_SCALED_THRESHOLD, PAPER_THRESHOLD,
};
pub use balance::{balance_settings, BalanceSettings, BALANCE_ANCHORS, DEFAULT_BALANCE};
pub use error::Error;
pub use extend::{pieces_over, Base, ExtendPassStats, Extended, Extender};
pub(crate) use error::show_bytes;
pub use filter::{BlockUsage, Filter, Selected};
pub use mce::{token_preference, Encoder, Scratch};
pub use raw_cut::{has_han, pool_size as raw_pool_size, HAN_POOL_PER_RAW, MAX_RAW_HAN_EXPONENT};
pub use options::{Algorithm, Options, DEFAULT_BOUNDARY_PENALTY};
pub use refine::{
    SelectionRule, CHAR_COVERAGE, CHAR_COVERAGE_SHARE, MAX_NON_ASCII_EXPONENT, NON_ASCII_SHARE_EXPONENT, REFINE_STEPS, SCRIPT_SHARE_EXPONENT,
};
pub use tiktoken::tiktoken_entries;
pub use tokenizer::{OffsetUnit, SpecialMatcher, Tokenizer};
pub use train::{
    default_raw_vocab_size, train, FilterStats, Pass, PassStats, TrainConfig, Trained, Trainer, BATCH_BYTES,
    DEFAULT_COUNT_RAW_VOCAB_SIZE, DEFAULT_MEMORY_BUDGET, DEFAULT_VOCAB_SIZE, RAW_VOCAB_PER_TOKEN,
};
pub use units::{ascii_unit_starts, unit_starts, utf8_with_unit_starts};
pub use vocab::{Vocab, MAX_ID};
