//! The steps of a counting round for a corpus split into blocks (documents counted on several
//! machines or at several times): count a block given the earlier rounds' survivors, merge the
//! partial counts exactly, then let the [`Counter`](super::Counter) apply the round's threshold
//! and cut to the merged counts ([`Counter::end_round_with`](super::Counter::end_round_with)).
//!
//! Counts are exact u64 sums of exact per-block counts, so any partition of the corpus into
//! blocks, merged in any order, gives the counts of the whole corpus, and the round keeps exactly
//! what a local round keeps.

use super::cands::Cands;
use super::keys::CountKey;
use super::parallel::count_batch;
use super::rounds::{Round, MAX_CANDIDATE_LEN};
use super::table::{with_table, AnyTable};
use crate::error::Error;
use crate::spill::{read_record, write_record};
use crate::trie::ByteTrie;

/// The candidates of earlier rounds that a round may extend (Algorithm 1, line 5): those kept
/// with a count of at least the round's threshold. Made by
/// [`Counter::survivors`](super::Counter::survivors); sent to other machines with
/// [`Survivors::to_bytes`].
pub struct Survivors {
    trie: ByteTrie,
    packed: Vec<u8>,
    len: usize,
}

impl Survivors {
    /// The survivors `keys` (sorted bytewise and distinct), with their counts (kept in the
    /// packed form, for inspection).
    pub(crate) fn from_sorted(keys: &[(&[u8], u64)]) -> Result<Self, Error> {
        let mut packed = Vec::new();
        for (k, c) in keys {
            write_record(&mut packed, k, *c)?;
        }
        let only: Vec<&[u8]> = keys.iter().map(|e| e.0).collect();
        Ok(Survivors { trie: ByteTrie::from_sorted(&only), packed, len: keys.len() })
    }

    /// Reads what [`Survivors::to_bytes`] wrote.
    pub fn from_bytes(data: &[u8]) -> Result<Self, Error> {
        let counts = BlockCounts::from_bytes(data)?;
        let keys: Vec<(&[u8], u64)> = counts.iter().collect();
        Survivors::from_sorted(&keys)
    }

    /// The survivors as records (the format of [`BlockCounts::to_bytes`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.packed.clone()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn trie(&self) -> &ByteTrie {
        &self.trie
    }
}

/// Exact counts of the candidates of one round in some documents: distinct candidates sorted
/// bytewise, each with its u64 count.
#[derive(Default)]
pub struct BlockCounts {
    cands: Cands,
}

impl BlockCounts {
    pub fn len(&self) -> usize {
        self.cands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cands.len() == 0
    }

    /// `(candidate, count)` in bytewise order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        (0..self.cands.len()).map(|i| self.cands.get(i))
    }

    /// The sum of two partial counts (u64, exact; an overflow is an error).
    pub fn merge(&self, other: &BlockCounts) -> Result<BlockCounts, Error> {
        let (mut a, mut b) = (self.iter().peekable(), other.iter().peekable());
        let mut out = Cands::default();
        loop {
            let next = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (Some(x), Some(y)) => match x.0.cmp(y.0) {
                    std::cmp::Ordering::Less => a.next(),
                    std::cmp::Ordering::Greater => b.next(),
                    std::cmp::Ordering::Equal => {
                        let (k, c) = a.next().expect("peeked");
                        let (_, d) = b.next().expect("peeked");
                        let sum = c.checked_add(d).ok_or_else(|| {
                            Error::Value(format!("the count of {:?} overflows u64", crate::show_bytes(k)))
                        })?;
                        Some((k, sum))
                    }
                },
            };
            if let Some((k, c)) = next {
                out.push(k, c);
            }
        }
        Ok(BlockCounts { cands: out })
    }

    /// The counts as records (little endian `u16` length, the bytes, `u64` count), sorted.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, c) in self.iter() {
            write_record(&mut out, k, c).expect("candidates are at most 1024 bytes");
        }
        out
    }

    /// Reads what [`BlockCounts::to_bytes`] wrote; refuses records that are truncated, empty,
    /// too long or out of order.
    pub fn from_bytes(mut data: &[u8]) -> Result<Self, Error> {
        let bad = |m: String| Error::Value(format!("not cnfmce block counts: {m}"));
        let mut cands = Cands::default();
        let mut prev: Option<Vec<u8>> = None;
        while let Some((k, c)) = read_record(&mut data).map_err(bad)? {
            if k.is_empty() || k.len() > MAX_CANDIDATE_LEN {
                return Err(bad(format!("a candidate of {} bytes", k.len())));
            }
            if prev.as_ref().is_some_and(|p| *p >= k) {
                return Err(bad("candidates out of order or repeated".into()));
            }
            cands.push(&k, c);
            prev = Some(k);
        }
        Ok(BlockCounts { cands })
    }

}

/// Counts the candidates of `round` in `docs` (parallel on the current rayon pool), extending
/// only the `survivors` of earlier rounds (unused in a round that starts at length 1). The
/// counts are complete: thresholds apply only once all blocks are merged.
pub fn count_block(docs: &[&[u8]], round: &Round, survivors: &Survivors) -> BlockCounts {
    let table = AnyTable::for_round(round);
    let trie = (round.min_len > 1).then(|| survivors.trie());
    let mut cands = Cands::default();
    let mut buf = Vec::with_capacity(64);
    with_table!(&table, t => {
        count_batch(t, docs, round, trie);
        for (k, c) in t.drain_sorted() {
            buf.clear();
            k.write_bytes(&mut buf);
            cands.push(&buf, c);
        }
    });
    BlockCounts { cands }
}
