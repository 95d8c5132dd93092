//! The counting table of one round: one exact `(candidate, count)` table sharded by hash, each
//! shard an open-addressing [`ProbeTable`] behind its own lock.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use rustc_hash::FxHasher;

use super::keys::{CountKey, K16, K32};
use super::parallel::{settle, State};
use super::rounds::Round;
use crate::probe::ProbeTable;

pub(crate) const SHARDS: usize = 256;

#[inline]
pub(crate) fn fx<K: Hash>(k: &K) -> u64 {
    let mut h = FxHasher::default();
    k.hash(&mut h);
    h.finish()
}

#[inline]
pub(crate) fn shard_of(h: u64) -> usize {
    // Not the top bits: hashbrown uses those as control bytes within a shard.
    ((h >> 40) as usize) & (SHARDS - 1)
}

/// The counting table of one round, sharded by hash, with the parked states of its counting
/// workers (counts not yet in the shards: every read of the table settles them first).
pub(crate) struct Table<K: CountKey> {
    shards: Vec<Mutex<ProbeTable<K>>>,
    entries: AtomicUsize,
    key_heap: AtomicUsize,
    parked: Mutex<Vec<State<K>>>,
    /// Bytes the parked states hold.
    parked_bytes: AtomicUsize,
}

impl<K: CountKey> Table<K> {
    pub(crate) fn new() -> Self {
        Table {
            shards: (0..SHARDS).map(|_| Mutex::new(ProbeTable::new(fx::<K>))).collect(),
            entries: AtomicUsize::new(0),
            key_heap: AtomicUsize::new(0),
            parked: Mutex::new(Vec::new()),
            parked_bytes: AtomicUsize::new(0),
        }
    }

    /// Keeps a worker's state for the next worker of the round.
    pub(crate) fn park(&self, s: State<K>) {
        let mut p = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        self.parked_bytes.fetch_add(s.bytes(), Ordering::Relaxed);
        p.push(s);
    }

    pub(crate) fn unpark(&self) -> Option<State<K>> {
        let s = self.parked.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
        self.parked_bytes.fetch_sub(s.bytes(), Ordering::Relaxed);
        Some(s)
    }

    pub(crate) fn take_parked(&self) -> Vec<State<K>> {
        let v = std::mem::take(&mut *self.parked.lock().unwrap_or_else(|p| p.into_inner()));
        self.parked_bytes.fetch_sub(v.iter().map(|s| s.bytes()).sum(), Ordering::Relaxed);
        v
    }

    /// Every entry, after settling the workers' counts (in no particular order); empties the
    /// table.
    pub(crate) fn take_all(&self) -> impl Iterator<Item = (K, u64)> + '_ {
        settle(self);
        self.entries.store(0, Ordering::Relaxed);
        self.key_heap.store(0, Ordering::Relaxed);
        self.shards.iter().flat_map(|s| {
            let mut t = s.lock().unwrap_or_else(|p| p.into_inner());
            t.take().collect::<Vec<_>>()
        })
    }

    pub(crate) fn add(&self, shard: usize, items: &mut Vec<(u64, K, u64)>) {
        let mut t = self.shards[shard].lock().unwrap_or_else(|p| p.into_inner());
        let (added, heap) = t.add_batch(items);
        drop(t);
        self.entries.fetch_add(added, Ordering::Relaxed);
        self.key_heap.fetch_add(heap, Ordering::Relaxed);
    }

    /// Approximate bytes held (slots, key heap and the parked workers' caches).
    pub(crate) fn bytes(&self) -> usize {
        let cap: usize = self
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).capacity())
            .sum();
        cap * std::mem::size_of::<(K, u64)>() + self.key_heap.load(Ordering::Relaxed) + self.parked_bytes.load(Ordering::Relaxed)
    }

    /// The bytes the table would hold if every shard doubled now: slots grow at 3/4 load to
    /// twice their size, so entries may need up to 8/3 of their size in slots.
    pub(crate) fn bytes_after_growth(&self) -> usize {
        self.entries.load(Ordering::Relaxed) * std::mem::size_of::<(K, u64)>() * 8 / 3
            + self.key_heap.load(Ordering::Relaxed)
            + self.parked_bytes.load(Ordering::Relaxed)
    }

    /// Distinct candidates (after settling the workers' counts).
    pub(crate) fn len(&self) -> usize {
        settle(self);
        self.entries.load(Ordering::Relaxed)
    }

    /// Empties the table into a vector sorted bytewise (after settling the workers' counts).
    pub(crate) fn drain_sorted(&self) -> Vec<(K, u64)> {
        let mut all = Vec::with_capacity(self.len());
        for s in &self.shards {
            let mut t = s.lock().unwrap_or_else(|p| p.into_inner());
            all.extend(t.take());
        }
        self.entries.store(0, Ordering::Relaxed);
        self.key_heap.store(0, Ordering::Relaxed);
        all.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// The table of a round, with the smallest key type that holds its longest candidate.
pub(crate) enum AnyTable {
    K16(Table<K16>),
    K32(Table<K32>),
    Var(Table<Box<[u8]>>),
}

/// `$body` with `$name` bound to the round's table, whatever its key type.
macro_rules! with_table {
    ($t:expr, $name:ident => $body:expr) => {
        match $t {
            AnyTable::K16($name) => $body,
            AnyTable::K32($name) => $body,
            AnyTable::Var($name) => $body,
        }
    };
}

pub(crate) use with_table;

impl AnyTable {
    /// An empty table for the candidates of `round`.
    pub(crate) fn for_round(round: &Round) -> Self {
        if round.max_len <= K16::MAX_LEN {
            AnyTable::K16(Table::new())
        } else if round.max_len <= K32::MAX_LEN {
            AnyTable::K32(Table::new())
        } else {
            AnyTable::Var(Table::new())
        }
    }
}
