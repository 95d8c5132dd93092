//! Algorithm 1's CountCandidates: which substrings of a document are counted in a round.
//!
//! A candidate `x[i:j]` starts and ends on UTF-8 character boundaries and is valid when its
//! boundary penalty (SPEC section 2) is not forbidden. Enumeration from a start position stops
//! early exactly as Algorithm 1 says: when the substring is invalid and no extension can make it
//! valid (it touches three units and does not start at a unit start), or when a valid substring
//! shorter than the round's minimum length is not in the trie of earlier rounds with a count of
//! at least the round's threshold.

use crate::cost::{crossing, Crossing};
use super::rounds::Round;
use crate::trie::{ByteTrie, ROOT};

/// Algorithm 1's CountCandidates for the start positions in `positions` of one document:
/// calls `emit` with every counted candidate. `starts` holds the unit starts of `doc` followed
/// by a sentinel 1 (length `doc.len() + 1`). `trie` is used for lengths below `round.min_len`.
pub(crate) fn count_candidates(
    doc: &[u8],
    starts: &[u8],
    positions: std::ops::Range<usize>,
    round: &Round,
    trie: Option<&ByteTrie>,
    mut emit: impl FnMut(&[u8]),
) {
    let n = doc.len();
    debug_assert_eq!(starts.len(), n + 1);
    let check_trie = round.min_len > 1;
    for i in positions {
        if doc[i] & 0xC0 == 0x80 {
            continue; // candidates start on character boundaries
        }
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
}

