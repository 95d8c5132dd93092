//! cnfmce: Counting-and-Filtering vocabularies and Min-Cost Encoding.
//!
//! The core is plain Rust, one idea per module, named after the paper; this file is the crate's
//! front: the module list and the public API, re-exported here. The PyO3 bindings (the
//! `cnfmce._core` extension module) live in `python/`, behind the `python` feature.
//!
//! - [`Tokenizer`] encodes and decodes with a [`Vocab`] and its [`Options`] ([`Algorithm`], λ, ε).
//! - [`Counter`] (counting over [`Round`]s) and [`Filter`] (usage under MCE, selection) are the
//!   two phases of CNF vocabulary training.

mod automaton;
mod count;
mod error;
mod filter;
mod mce;
mod mem;
mod options;
mod probe;
mod spill;
mod tokenizer;
mod train;
mod trie;
// `boundary` and `unit_indices` are used by tests only until the unit-crossing rule gets its one
// home (issue 12, item 3).
#[allow(dead_code)]
mod units;
mod vocab;

#[cfg(feature = "python")]
mod python;

pub use count::{
    count_block, rounds_warning, validate_rounds, BlockCounts, Counter, Round, RoundStats, Survivors, DEFAULT_ROUNDS,
    MAX_CANDIDATE_LEN,
};
pub use error::Error;
pub(crate) use error::show_bytes;
pub use filter::{BlockUsage, Filter, Selected};
pub use mce::{token_preference, Encoder, Scratch};
pub use options::{Algorithm, Options, DEFAULT_BOUNDARY_PENALTY};
pub use tokenizer::{OffsetUnit, SpecialMatcher, Tokenizer};
pub use train::{
    default_raw_vocab_size, train, FilterStats, Pass, PassStats, TrainConfig, Trained, Trainer, BATCH_BYTES,
    DEFAULT_COUNT_RAW_VOCAB_SIZE, DEFAULT_MEMORY_BUDGET, DEFAULT_VOCAB_SIZE, RAW_VOCAB_PER_TOKEN,
};
pub use units::unit_starts;
pub use vocab::{Vocab, MAX_ID};
