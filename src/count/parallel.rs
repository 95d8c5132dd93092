//! The parallel counting driver: documents (and position ranges of long documents) are counted
//! on the rayon pool by workers, each with a small direct-mapped cache that absorbs repeated
//! candidates and per-shard buffers that reach the shared table in batches.

use rayon::prelude::*;

use super::candidates::{count_candidates, pair_candidates, Sink, PAIR_MAX};
use super::keys::{CountKey, K32};
use super::rounds::Round;
use super::table::{fx, shard_of, Table, SHARDS};
use crate::probe::SlotKey;
use crate::trie::ByteTrie;
use crate::units::unit_starts;

/// Evicted entries buffered per shard before they go to the table.
const FLUSH: usize = 256;

/// Slots of the per-worker cache (direct mapped by hash; tiny in tests, so that evictions are
/// exercised).
const CACHE: usize = if cfg!(test) { 1 << 3 } else { 1 << 14 };

/// Slots of the per-worker cache of unit pairs (direct mapped by hash; tiny in tests).
const PAIRS: usize = if cfg!(test) { 1 << 2 } else { 1 << 13 };

/// Candidates a worker has hashed (and whose cache slot it has prefetched) before it adds
/// them: the cache is too big for L1, so each slot is requested this many candidates ahead.
const AHEAD: usize = 16;

/// A counting worker: a small direct-mapped cache that absorbs repeated candidates (frequent
/// substrings are most of the occurrences), and per-shard buffers of evicted `(hash, key,
/// count)` that go to the shared table in batches. A candidate is hashed when it comes in and
/// counted [`AHEAD`] candidates later, its cache slot prefetched meanwhile. Everything is
/// flushed on drop.
struct Worker<'a, K: CountKey> {
    table: &'a Table<K>,
    /// Empty keys mark free slots.
    cache: Vec<(u64, K, u64)>,
    bufs: Vec<Vec<(u64, K, u64)>>,
    /// Hashed candidates waiting to be counted (a ring of `AHEAD`), with their counts.
    pending: Vec<(u64, K, u64)>,
    head: usize,
    /// Unit pairs counted in a round without a trie (see [`Sink::pair`]): the key holds the
    /// split, then the pair's bytes. An evicted pair gives its candidates with its count.
    pairs: Vec<(u64, K32, u64)>,
    /// The round's longest candidate.
    max_len: usize,
    starts: Vec<u8>,
}

impl<'a, K: CountKey> Worker<'a, K> {
    fn new(table: &'a Table<K>, max_len: usize) -> Self {
        Worker {
            table,
            cache: vec![(0, K::empty(), 0); CACHE],
            bufs: (0..SHARDS).map(|_| Vec::new()).collect(),
            pending: Vec::with_capacity(AHEAD),
            head: 0,
            pairs: Vec::new(),
            max_len,
            starts: Vec::new(),
        }
    }

    #[inline]
    fn evict(&mut self, e: (u64, K, u64)) {
        let s = shard_of(e.0);
        let b = &mut self.bufs[s];
        if b.capacity() == 0 {
            b.reserve_exact(FLUSH);
        }
        b.push(e);
        if b.len() >= FLUSH {
            self.table.add(s, b);
        }
    }

    /// `n` occurrences of the candidate `cand`.
    #[inline]
    fn push(&mut self, cand: &[u8], n: u64) {
        let k = K::from_bytes(cand);
        let h = fx(&k);
        crate::mem::prefetch(&self.cache[(h as usize) & (CACHE - 1)]);
        if self.pending.len() < AHEAD {
            self.pending.push((h, k, n));
            return;
        }
        let (oh, ok, on) = std::mem::replace(&mut self.pending[self.head], (h, k, n));
        self.head = (self.head + 1) % AHEAD;
        self.count(oh, ok, on);
    }

    /// Counts `n` occurrences of `k` (hash `h`).
    #[inline]
    fn count(&mut self, h: u64, k: K, n: u64) {
        let slot = &mut self.cache[(h as usize) & (CACHE - 1)];
        if slot.0 == h && slot.1 == k {
            slot.2 += n;
        } else {
            let old = std::mem::replace(slot, (h, k, n));
            if !old.1.is_empty_key() {
                self.evict(old);
            }
        }
    }

    /// Gives the candidates of a counted pair, each with the pair's count.
    fn expand(&mut self, key: &K32, n: u64) {
        let mut buf = [0u8; 32];
        let len = key.write_to(&mut buf);
        let (split, p) = (buf[0] as usize, &buf[1..len]);
        let max_len = self.max_len;
        pair_candidates(p, split, max_len, true, |c| self.push(c, n));
    }
}

impl<K: CountKey> Sink for Worker<'_, K> {
    #[inline]
    fn candidate(&mut self, c: &[u8]) {
        self.push(c, 1);
    }

    #[inline]
    fn pair(&mut self, p: &[u8], split: usize, max_len: usize) {
        debug_assert!(p.len() <= PAIR_MAX && max_len == self.max_len);
        let mut b = [0u8; PAIR_MAX + 1];
        b[0] = split as u8;
        b[1..=p.len()].copy_from_slice(p);
        let k = K32::from_bytes(&b[..=p.len()]);
        let h = fx(&k);
        if self.pairs.is_empty() {
            self.pairs = vec![(0, K32::empty(), 0); PAIRS];
        }
        let slot = &mut self.pairs[(h as usize) & (PAIRS - 1)];
        if slot.0 == h && slot.1 == k {
            slot.2 += 1;
        } else {
            let (_, old, n) = std::mem::replace(slot, (h, k, 1));
            if !old.is_empty_key() {
                self.expand(&old, n);
            }
        }
    }
}

impl<K: CountKey> Drop for Worker<'_, K> {
    fn drop(&mut self) {
        for (_, k, n) in std::mem::take(&mut self.pairs) {
            if !k.is_empty_key() {
                self.expand(&k, n);
            }
        }
        let pending = std::mem::take(&mut self.pending);
        for (h, k, n) in pending {
            self.count(h, k, n);
        }
        for slot in 0..CACHE {
            let e = std::mem::replace(&mut self.cache[slot], (0, K::empty(), 0));
            if !e.1.is_empty_key() {
                self.evict(e);
            }
        }
        for (s, b) in self.bufs.iter_mut().enumerate() {
            if !b.is_empty() {
                self.table.add(s, b);
            }
        }
    }
}

/// Documents longer than this are split into position ranges counted in parallel.
const SPLIT: usize = 1 << 16;

/// Counts the candidates of `docs` into `table` (parallel on the current rayon pool).
pub(crate) fn count_batch<K: CountKey>(table: &Table<K>, docs: &[&[u8]], round: &Round, trie: Option<&ByteTrie>) {
    let (long, short): (Vec<&[u8]>, Vec<&[u8]>) = docs.iter().partition(|d| d.len() > SPLIT);
    short.par_iter().for_each_init(
        || Worker::new(table, round.max_len),
        |w, doc| {
            let mut starts = std::mem::take(&mut w.starts);
            unit_starts(doc, &mut starts);
            starts.push(1);
            count_candidates(doc, &starts, 0..doc.len(), round, trie, w);
            w.starts = starts;
        },
    );
    for doc in long {
        let mut starts = Vec::new();
        unit_starts(doc, &mut starts);
        starts.push(1);
        let n = doc.len();
        let starts = &starts;
        (0..n.div_ceil(SPLIT)).into_par_iter().for_each_init(
            || Worker::new(table, round.max_len),
            |w, k| {
                let r = k * SPLIT..((k + 1) * SPLIT).min(n);
                count_candidates(doc, starts, r, round, trie, w);
            },
        );
    }
}
