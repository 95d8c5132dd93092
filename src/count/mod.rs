//! CNF counting (paper section 3.1.1, Algorithm 1; SPEC section 4), one idea per file:
//!
//! - `rounds`: the rounds (length intervals and thresholds), their default and validation;
//! - `candidates`: which substrings of a document a round counts (validity, early stopping);
//! - `keys`: candidates packed into table keys; `table`: the sharded exact counting table;
//! - `parallel`: counting documents on all threads into the table;
//! - `cands`: candidates with counts in one arena; `select`: what a finished round keeps;
//! - `counter`: the rounds on one machine (memory budget, spilling to sorted runs);
//! - `block`: the same rounds over blocks counted elsewhere, merged exactly;
//! - `shuffle`: a round spread over machines by candidate (map, reduce, select), memory bounded.

mod block;
mod candidates;
mod cands;
mod counter;
mod keys;
mod parallel;
mod rounds;
mod select;
mod shuffle;
mod table;

pub use block::{count_block, BlockCounts, Survivors};
pub use counter::{Counter, RoundStats};
pub use shuffle::{partition_of, BlockCounter, CountsMerger, Part, RoundSelector, Selection};
pub use rounds::{
    rounds_warning, scaled_threshold, validate_rounds, Round, BYTES_PER_THRESHOLD, DEFAULT_ROUNDS, MAX_CANDIDATE_LEN,
    MIN_SCALED_THRESHOLD, PAPER_THRESHOLD,
};
