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

/// Unit pairs a worker has hashed (and whose slot it has prefetched) before it counts them.
const PAIR_AHEAD: usize = 8;

/// A slot of the pair cache, one cache line (a slot across two lines would cost two misses).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PairSlot {
    h: u64,
    k: K32,
    n: u64,
}

/// A counting worker: a small direct-mapped cache that absorbs repeated candidates (frequent
/// substrings are most of the occurrences), and per-shard buffers of evicted `(hash, key,
/// count)` that go to the shared table in batches. A candidate is hashed when it comes in and
/// counted [`AHEAD`] candidates later, its cache slot prefetched meanwhile.
///
/// A worker's caches outlive the batch it counted: on drop its [`State`] is parked in the table
/// and the next worker of the round takes it up (creating and flushing caches of a megabyte for
/// every half megabyte of text cost more than they saved). [`settle`] flushes the parked states
/// into the table; the table does so before anyone reads it.
struct Worker<'a, K: CountKey> {
    table: &'a Table<K>,
    s: State<K>,
    /// Flushed (nothing to park on drop).
    flushed: bool,
}

/// What a worker holds between batches.
pub(crate) struct State<K: CountKey> {
    /// Empty keys mark free slots.
    cache: Vec<(u64, K, u64)>,
    bufs: Vec<Vec<(u64, K, u64)>>,
    /// Hashed candidates waiting to be counted (a ring of `AHEAD`), with their counts.
    pending: Vec<(u64, K, u64)>,
    head: usize,
    /// Unit pairs counted in a round without a trie (see [`Sink::pair`]): the key holds the
    /// split, then the pair's bytes. An evicted pair gives its candidates with its count.
    pairs: Vec<PairSlot>,
    /// Hashed pairs waiting to be counted (a ring of `PAIR_AHEAD`).
    pending_pairs: Vec<(u64, K32)>,
    pair_head: usize,
    /// The round's longest candidate.
    max_len: usize,
    starts: Vec<u8>,
}

impl<K: CountKey> State<K> {
    fn new(max_len: usize) -> Self {
        State {
            cache: vec![(0, K::empty(), 0); CACHE],
            bufs: (0..SHARDS).map(|_| Vec::new()).collect(),
            pending: Vec::with_capacity(AHEAD),
            head: 0,
            pairs: Vec::new(),
            pending_pairs: Vec::with_capacity(PAIR_AHEAD),
            pair_head: 0,
            max_len,
            starts: Vec::new(),
        }
    }
}

impl<K: CountKey> State<K> {
    /// Bytes the state holds (its caches and buffers).
    pub(crate) fn bytes(&self) -> usize {
        let e = std::mem::size_of::<(u64, K, u64)>();
        (self.cache.capacity() + self.bufs.iter().map(|b| b.capacity()).sum::<usize>()) * e
            + self.pairs.capacity() * std::mem::size_of::<PairSlot>()
    }
}

/// Flushes every parked worker state of `table` into it.
pub(crate) fn settle<K: CountKey>(table: &Table<K>) {
    for s in table.take_parked() {
        let mut w = Worker { table, s, flushed: false };
        w.flush();
    }
}

impl<'a, K: CountKey> Worker<'a, K> {
    /// A worker for a round of longest candidate `max_len`, with a parked state if there is one.
    fn new(table: &'a Table<K>, max_len: usize) -> Self {
        let s = table.unpark().unwrap_or_else(|| State::new(max_len));
        debug_assert_eq!(s.max_len, max_len);
        Worker { table, s, flushed: false }
    }

    #[inline]
    fn evict(&mut self, e: (u64, K, u64)) {
        let s = shard_of(e.0);
        let b = &mut self.s.bufs[s];
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
        crate::mem::prefetch(&self.s.cache[(h as usize) & (CACHE - 1)]);
        if self.s.pending.len() < AHEAD {
            self.s.pending.push((h, k, n));
            return;
        }
        let (oh, ok, on) = std::mem::replace(&mut self.s.pending[self.s.head], (h, k, n));
        self.s.head = (self.s.head + 1) % AHEAD;
        self.count(oh, ok, on);
    }

    /// Counts `n` occurrences of `k` (hash `h`).
    #[inline]
    fn count(&mut self, h: u64, k: K, n: u64) {
        let slot = &mut self.s.cache[(h as usize) & (CACHE - 1)];
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
        let max_len = self.s.max_len;
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
        debug_assert!(p.len() <= PAIR_MAX && max_len == self.s.max_len);
        let mut b = [0u8; PAIR_MAX + 1];
        b[0] = split as u8;
        b[1..=p.len()].copy_from_slice(p);
        let k = K32::from_bytes(&b[..=p.len()]);
        let h = fx(&k);
        if self.s.pairs.is_empty() {
            self.s.pairs = vec![PairSlot { h: 0, k: K32::empty(), n: 0 }; PAIRS];
        }
        crate::mem::prefetch(&self.s.pairs[(h as usize) & (PAIRS - 1)]);
        if self.s.pending_pairs.len() < PAIR_AHEAD {
            self.s.pending_pairs.push((h, k));
            return;
        }
        let (oh, ok) = std::mem::replace(&mut self.s.pending_pairs[self.s.pair_head], (h, k));
        self.s.pair_head = (self.s.pair_head + 1) % PAIR_AHEAD;
        self.count_pair(oh, ok);
    }
}

impl<K: CountKey> Worker<'_, K> {
    /// Counts one occurrence of the pair key `k` (hash `h`).
    #[inline]
    fn count_pair(&mut self, h: u64, k: K32) {
        let slot = &mut self.s.pairs[(h as usize) & (PAIRS - 1)];
        if slot.h == h && slot.k == k {
            slot.n += 1;
        } else {
            let old = std::mem::replace(slot, PairSlot { h, k, n: 1 });
            if !old.k.is_empty_key() {
                self.expand(&old.k, old.n);
            }
        }
    }
}

impl<K: CountKey> Worker<'_, K> {
    /// Everything the worker holds goes to the table.
    fn flush(&mut self) {
        self.flushed = true;
        for (h, k) in std::mem::take(&mut self.s.pending_pairs) {
            self.count_pair(h, k);
        }
        for e in std::mem::take(&mut self.s.pairs) {
            if !e.k.is_empty_key() {
                self.expand(&e.k, e.n);
            }
        }
        let pending = std::mem::take(&mut self.s.pending);
        for (h, k, n) in pending {
            self.count(h, k, n);
        }
        for slot in 0..CACHE {
            let e = std::mem::replace(&mut self.s.cache[slot], (0, K::empty(), 0));
            if !e.1.is_empty_key() {
                self.evict(e);
            }
        }
        for (s, b) in self.s.bufs.iter_mut().enumerate() {
            if !b.is_empty() {
                self.table.add(s, b);
            }
        }
    }
}

impl<K: CountKey> Drop for Worker<'_, K> {
    fn drop(&mut self) {
        if !self.flushed {
            let s = std::mem::replace(&mut self.s, State { cache: Vec::new(), bufs: Vec::new(), pending: Vec::new(), head: 0,
                pairs: Vec::new(), pending_pairs: Vec::new(), pair_head: 0, max_len: 0, starts: Vec::new() });
            self.table.park(s);
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
            let mut starts = std::mem::take(&mut w.s.starts);
            unit_starts(doc, &mut starts);
            starts.push(1);
            count_candidates(doc, &starts, 0..doc.len(), round, trie, w);
            w.s.starts = starts;
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
