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
mod cost;
mod count;
mod error;
mod filter;
mod mce;
mod mem;
mod probe;
mod spill;
mod tokenizer;
mod trie;
mod units;
mod vocab;

#[cfg(feature = "python")]
mod python;

pub use count::{validate_rounds, Counter, Round, RoundStats, DEFAULT_ROUNDS};
pub use error::Error;
pub(crate) use error::show_bytes;
pub use filter::{Filter, Selected};
pub use mce::{token_preference, Algorithm, Encoder, Options, Scratch};
pub use tokenizer::{OffsetUnit, SpecialMatcher, Tokenizer};
pub use units::unit_starts;
pub use vocab::{Vocab, MAX_ID};
