//! The parallel counting driver: documents (and position ranges of long documents) are counted
//! on the rayon pool by workers, each with a small direct-mapped cache that absorbs repeated
//! candidates and per-shard buffers that reach the shared table in batches.

use rayon::prelude::*;

use super::candidates::count_candidates;
use super::keys::CountKey;
use super::rounds::Round;
use super::table::{fx, shard_of, Table, SHARDS};
use crate::trie::ByteTrie;
use crate::units::unit_starts;

/// Evicted entries buffered per shard before they go to the table.
const FLUSH: usize = 256;

/// Slots of the per-worker cache (direct mapped by hash).
const CACHE: usize = 1 << 12;

/// A counting worker: a small direct-mapped cache that absorbs repeated candidates (frequent
/// substrings are most of the occurrences), and per-shard buffers of evicted `(hash, key,
/// count)` that go to the shared table in batches. Everything is flushed on drop.
struct Worker<'a, K: CountKey> {
    table: &'a Table<K>,
    cache: Vec<Option<(u64, K, u64)>>,
    bufs: Vec<Vec<(u64, K, u64)>>,
    starts: Vec<u8>,
}

impl<'a, K: CountKey> Worker<'a, K> {
    fn new(table: &'a Table<K>) -> Self {
        Worker {
            table,
            cache: vec![None; CACHE],
            bufs: (0..SHARDS).map(|_| Vec::new()).collect(),
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

    #[inline]
    fn push(&mut self, cand: &[u8]) {
        let k = K::from_bytes(cand);
        let h = fx(&k);
        let slot = (h as usize) & (CACHE - 1);
        match &mut self.cache[slot] {
            Some((hh, kk, c)) if *hh == h && *kk == k => *c += 1,
            entry => {
                if let Some(old) = entry.replace((h, k, 1)) {
                    self.evict(old);
                }
            }
        }
    }
}

impl<K: CountKey> Drop for Worker<'_, K> {
    fn drop(&mut self) {
        for slot in 0..CACHE {
            if let Some(e) = self.cache[slot].take() {
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
        || Worker::new(table),
        |w, doc| {
            let mut starts = std::mem::take(&mut w.starts);
            unit_starts(doc, &mut starts);
            starts.push(1);
            count_candidates(doc, &starts, 0..doc.len(), round, trie, |c| w.push(c));
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
            || Worker::new(table),
            |w, k| {
                let r = k * SPLIT..((k + 1) * SPLIT).min(n);
                count_candidates(doc, starts, r, round, trie, |c| w.push(c));
            },
        );
    }
}
