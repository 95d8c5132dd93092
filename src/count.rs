//! CNF counting (paper section 3.1.1, Algorithm 1; SPEC section 4).
//!
//! Candidates are counted in rounds over consecutive length intervals. A candidate `x[i:j]`
//! starts and ends on UTF-8 character boundaries and is valid when its boundary penalty (SPEC
//! section 2) is not forbidden. Enumeration from a start position stops early exactly as
//! Algorithm 1 says: when the substring is invalid and no extension can make it valid (it
//! touches three units and does not start at a unit start), or when a valid substring shorter
//! than the round's minimum length is not in the trie of earlier rounds with a count of at least
//! the round's threshold.
//!
//! Counting is parallel over documents (and over position ranges of long documents) into one
//! table sharded by hash, each shard behind its own lock, fed through small per-task buffers.
//! When the table outgrows its memory budget it is sorted and spilled to a run file; the end of
//! the round merges the runs, so counts stay exact within any budget. Counts are u64 sums, so
//! the result does not depend on the number of threads or the order of the documents.
//!
//! After each round only what can still matter is kept: candidates whose count reaches a later
//! round's threshold (for that round's trie), and the best `raw_vocab_size` candidates so far
//! (by count, ties by bytes), which contain the final raw vocabulary.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use rustc_hash::FxHasher;

use crate::error::Error;
use crate::probe::{ProbeTable, SlotKey};
use crate::spill;
use crate::trie::{ByteTrie, ROOT};
use crate::cost::{crossing, Crossing};
use crate::units::unit_starts;

/// A counting round: candidate lengths `min_len..=max_len` (bytes), kept when their count is at
/// least `threshold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    pub min_len: usize,
    pub max_len: usize,
    pub threshold: u64,
}

/// The paper's rounds: ([1, 12], 0), ([13, 21], 80), ([22, 30], 80).
pub const DEFAULT_ROUNDS: [Round; 3] = [
    Round { min_len: 1, max_len: 12, threshold: 0 },
    Round { min_len: 13, max_len: 21, threshold: 80 },
    Round { min_len: 22, max_len: 30, threshold: 80 },
];

/// Checks that rounds are consecutive, non-overlapping intervals starting at length 1.
pub fn validate_rounds(rounds: &[Round]) -> Result<(), Error> {
    if rounds.is_empty() {
        return Err(Error::Value("rounds must not be empty".into()));
    }
    let mut next = 1usize;
    for (k, r) in rounds.iter().enumerate() {
        if r.min_len != next || r.max_len < r.min_len {
            return Err(Error::Value(format!(
                "round {k} is ({}, {}, {}); rounds must be consecutive, non-overlapping length \
                 intervals starting at 1 (expected a round starting at {next})",
                r.min_len, r.max_len, r.threshold
            )));
        }
        if r.max_len > 1024 {
            return Err(Error::Value(format!("round {k}: candidates longer than 1024 bytes are not supported")));
        }
        next = r.max_len + 1;
    }
    Ok(())
}

/// Algorithm 1's CountCandidates for the start positions in `positions` of one document:
/// calls `emit` with every counted candidate. `starts` holds the unit starts of `doc` followed
/// by a sentinel 1 (length `doc.len() + 1`). `trie` is used for lengths below `round.min_len`.
pub fn count_candidates(
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

/// Keys of the counting tables: candidates packed so that key order is bytewise order. The
/// empty key (length 0) marks free slots: candidates are never empty.
pub trait CountKey: SlotKey + Clone + Eq + Hash + Ord + Send + Sync + 'static {
    /// Longest candidate the key can hold.
    const MAX_LEN: usize;
    fn from_bytes(b: &[u8]) -> Self;
    /// Appends the candidate's bytes to `out`.
    fn write_bytes(&self, out: &mut Vec<u8>);
    fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_bytes(&mut v);
        v
    }
}

/// A candidate of up to `8 * N - 1` bytes in `N` big-endian words, zero padded, the length in
/// the lowest byte of the last word. Word compares keep equality and order inline (a byte array
/// compares through `memcmp`), and the derived order is bytewise. [`K16`] (two words, table
/// entries of 24 bytes) holds the first round's candidates, [`K32`] the next rounds'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Words<const N: usize> {
    w: [u64; N],
}

/// Up to 15 bytes.
pub type K16 = Words<2>;
/// Up to 31 bytes.
pub type K32 = Words<4>;

impl<const N: usize> SlotKey for Words<N> {
    fn empty() -> Self {
        Words { w: [0; N] }
    }
    #[inline]
    fn is_empty_key(&self) -> bool {
        self.w[N - 1] & 0xFF == 0
    }
}

impl SlotKey for Box<[u8]> {
    fn empty() -> Self {
        Box::new([])
    }
    #[inline]
    fn is_empty_key(&self) -> bool {
        self.is_empty()
    }
    fn heap(&self) -> usize {
        self.len() + 16
    }
}

impl<const N: usize> CountKey for Words<N> {
    const MAX_LEN: usize = 8 * N - 1;
    #[inline]
    fn from_bytes(b: &[u8]) -> Self {
        let mut w = [0u64; N];
        for (word, chunk) in w.iter_mut().zip(b.chunks(8)) {
            let mut x = [0u8; 8];
            x[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_be_bytes(x);
        }
        w[N - 1] |= b.len() as u64;
        Words { w }
    }
    fn write_bytes(&self, out: &mut Vec<u8>) {
        let len = (self.w[N - 1] & 0xFF) as usize;
        let start = out.len();
        for word in &self.w {
            out.extend_from_slice(&word.to_be_bytes());
        }
        out.truncate(start + len);
    }
}

impl CountKey for Box<[u8]> {
    const MAX_LEN: usize = usize::MAX;
    fn from_bytes(b: &[u8]) -> Self {
        b.into()
    }
    fn write_bytes(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

const SHARDS: usize = 256;
const FLUSH: usize = 256;

#[inline]
fn fx<K: Hash>(k: &K) -> u64 {
    let mut h = FxHasher::default();
    k.hash(&mut h);
    h.finish()
}

#[inline]
fn shard_of(h: u64) -> usize {
    // Not the top bits: hashbrown uses those as control bytes within a shard.
    ((h >> 40) as usize) & (SHARDS - 1)
}

/// The counting table of one round, sharded by hash.
pub struct Table<K: CountKey> {
    shards: Vec<Mutex<ProbeTable<K>>>,
    entries: AtomicUsize,
    key_heap: AtomicUsize,
}

impl<K: CountKey> Table<K> {
    fn new() -> Self {
        Table {
            shards: (0..SHARDS).map(|_| Mutex::new(ProbeTable::new(fx::<K>))).collect(),
            entries: AtomicUsize::new(0),
            key_heap: AtomicUsize::new(0),
        }
    }

    fn add(&self, shard: usize, items: &mut Vec<(u64, K, u64)>) {
        let mut t = self.shards[shard].lock().unwrap_or_else(|p| p.into_inner());
        let (added, heap) = t.add_batch(items);
        drop(t);
        self.entries.fetch_add(added, Ordering::Relaxed);
        self.key_heap.fetch_add(heap, Ordering::Relaxed);
    }

    /// Approximate bytes held (slots and key heap).
    fn bytes(&self) -> usize {
        let cap: usize = self
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).capacity())
            .sum();
        cap * std::mem::size_of::<(K, u64)>() + self.key_heap.load(Ordering::Relaxed)
    }

    /// The bytes the table would hold if every shard doubled now: slots grow at 3/4 load to
    /// twice their size, so entries may need up to 8/3 of their size in slots.
    fn bytes_after_growth(&self) -> usize {
        self.len() * std::mem::size_of::<(K, u64)>() * 8 / 3 + self.key_heap.load(Ordering::Relaxed)
    }

    fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Empties the table into a vector sorted bytewise.
    fn drain_sorted(&self) -> Vec<(K, u64)> {
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

enum AnyTable {
    K16(Table<K16>),
    K32(Table<K32>),
    Var(Table<Box<[u8]>>),
}

macro_rules! with_table {
    ($t:expr, $name:ident => $body:expr) => {
        match $t {
            AnyTable::K16($name) => $body,
            AnyTable::K32($name) => $body,
            AnyTable::Var($name) => $body,
        }
    };
}

/// Text counted between two checks of the memory budget.
pub const CHECK_BYTES: usize = 512 * 1024;

/// Documents longer than this are split into position ranges counted in parallel.
const SPLIT: usize = 1 << 16;

fn count_batch<K: CountKey>(table: &Table<K>, docs: &[&[u8]], round: &Round, trie: Option<&ByteTrie>) {
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

/// Candidates with counts in one arena (no allocation per candidate).
#[derive(Default)]
pub struct Cands {
    data: Vec<u8>,
    /// (count, offset, length) into `data`.
    items: Vec<(u64, usize, u32)>,
}

impl Cands {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    #[inline]
    pub fn push(&mut self, k: &[u8], c: u64) {
        self.items.push((c, self.data.len(), k.len() as u32));
        self.data.extend_from_slice(k);
    }

    #[inline]
    pub fn get(&self, i: usize) -> (&[u8], u64) {
        let (c, o, l) = self.items[i];
        (&self.data[o..o + l as usize], c)
    }

    fn key(&self, e: &(u64, usize, u32)) -> &[u8] {
        &self.data[e.1..e.1 + e.2 as usize]
    }

    pub fn extend(&mut self, other: &Cands) {
        for i in 0..other.len() {
            let (k, c) = other.get(i);
            self.push(k, c);
        }
    }

    /// Sorts by count descending, ties by bytes.
    pub fn sort(&mut self) {
        let data = &self.data;
        let key = |e: &(u64, usize, u32)| &data[e.1..e.1 + e.2 as usize];
        self.items.par_sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| key(a).cmp(key(b))));
    }

    /// Keeps the best `m` (count descending, ties by bytes), in no particular order, and compacts
    /// the arena; returns the count of the worst kept (0 when fewer than `m` remain).
    pub fn prune_top(&mut self, m: usize) -> u64 {
        if self.items.len() <= m {
            return 0;
        }
        if m == 0 {
            *self = Cands::default();
            return u64::MAX;
        }
        let data = &self.data;
        let key = |e: &(u64, usize, u32)| &data[e.1..e.1 + e.2 as usize];
        self.items.select_nth_unstable_by(m - 1, |a, b| b.0.cmp(&a.0).then_with(|| key(a).cmp(key(b))));
        self.items.truncate(m);
        let worst = self.items[m - 1].0;
        self.compact();
        worst
    }

    /// Keeps the items for which `keep(index in the current order, count)` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, u64) -> bool) {
        let mut i = 0usize;
        self.items.retain(|e| {
            i += 1;
            keep(i - 1, e.0)
        });
        self.compact();
    }

    fn compact(&mut self) {
        let mut data = Vec::with_capacity(self.items.iter().map(|e| e.2 as usize).sum());
        for e in self.items.iter_mut() {
            let o = data.len();
            data.extend_from_slice(&self.data[e.1..e.1 + e.2 as usize]);
            e.1 = o;
        }
        self.data = data;
        self.items.shrink_to_fit();
    }

    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.items.capacity() * std::mem::size_of::<(u64, usize, u32)>()
    }

    /// Keys with a count of at least `t`, sorted bytewise.
    pub fn keys_at_least(&self, t: u64) -> Vec<&[u8]> {
        let mut keys: Vec<&[u8]> = self.items.iter().filter(|e| e.0 >= t).map(|e| self.key(e)).collect();
        keys.par_sort_unstable();
        keys
    }
}

/// Chooses what a finished round keeps: candidates at a later round's threshold (for its trie)
/// and the best `m` below it, with a running cutoff so that most low counts are dropped without
/// being stored.
struct Selector {
    threshold: u64,
    future: Option<u64>,
    m: usize,
    direct: Cands,
    low: Cands,
    cutoff: u64,
    distinct: u64,
    retained: u64,
}

impl Selector {
    #[inline]
    fn offer(&mut self, k: &[u8], c: u64) {
        self.distinct += 1;
        if c < self.threshold {
            return;
        }
        self.retained += 1;
        if self.future.is_some_and(|f| c >= f) {
            self.direct.push(k, c);
        } else if c >= self.cutoff {
            self.low.push(k, c);
            if self.low.len() >= prune_trigger(self.m) {
                self.cutoff = self.low.prune_top(self.m);
            }
        }
    }
}

/// Statistics of one finished round.
#[derive(Clone, Debug, Default)]
pub struct RoundStats {
    /// Distinct candidates counted in the round.
    pub distinct: u64,
    /// Candidates whose count reached the threshold.
    pub retained: u64,
    /// Spill runs written.
    pub spills: usize,
    /// Bytes written to spill runs.
    pub spilled_bytes: u64,
    /// Largest table size (bytes, estimated) during the round.
    pub peak_table_bytes: usize,
}

/// The counting phase over all rounds.
pub struct Counter {
    rounds: Vec<Round>,
    raw_vocab_size: usize,
    budget: usize,
    tmp_dir: PathBuf,
    round: usize,
    table: Option<AnyTable>,
    trie: Option<ByteTrie>,
    runs: Vec<PathBuf>,
    /// Retained candidates that can still matter, with their counts (sorted after each round).
    kept: Cands,
    stats: RoundStats,
}

impl Counter {
    /// `budget`: bytes the counting table may hold before it spills to `tmp_dir`.
    pub fn new(rounds: Vec<Round>, raw_vocab_size: usize, budget: usize, tmp_dir: PathBuf) -> Result<Self, Error> {
        validate_rounds(&rounds)?;
        if raw_vocab_size == 0 {
            return Err(Error::Value("raw_vocab_size must be positive".into()));
        }
        Ok(Counter {
            rounds,
            raw_vocab_size,
            budget: budget.max(1 << 20),
            tmp_dir,
            round: 0,
            table: None,
            trie: None,
            runs: Vec::new(),
            kept: Cands::default(),
            stats: RoundStats::default(),
        })
    }

    pub fn rounds(&self) -> &[Round] {
        &self.rounds
    }

    /// Index of the round in progress (or the number of rounds when all are done).
    pub fn round(&self) -> usize {
        self.round
    }

    /// Starts the next round: builds the trie of earlier candidates at its threshold.
    pub fn begin_round(&mut self) -> Result<(), Error> {
        if self.table.is_some() {
            return Err(Error::Value("a round is already in progress".into()));
        }
        let r = *self
            .rounds
            .get(self.round)
            .ok_or_else(|| Error::Value("all rounds are done".into()))?;
        self.trie = if r.min_len > 1 {
            Some(ByteTrie::from_sorted(&self.kept.keys_at_least(r.threshold)))
        } else {
            None
        };
        self.table = Some(if r.max_len <= K16::MAX_LEN {
            AnyTable::K16(Table::new())
        } else if r.max_len <= K32::MAX_LEN {
            AnyTable::K32(Table::new())
        } else {
            AnyTable::Var(Table::new())
        });
        self.stats = RoundStats::default();
        Ok(())
    }

    /// Counts a batch of documents (parallel on the current rayon pool).
    ///
    /// The budget is checked every [`CHECK_BYTES`] of text: the table spills as soon as the
    /// next growth of its shards could take it past the budget, so it never holds more than the
    /// budget plus what one such slice adds.
    pub fn add(&mut self, docs: &[&[u8]]) -> Result<(), Error> {
        let r = self.rounds[self.round];
        if self.table.is_none() {
            return Err(Error::Value("no round in progress".into()));
        }
        let mut start = 0usize;
        while start < docs.len() {
            let mut end = start;
            let mut size = 0usize;
            while end < docs.len() && (end == start || size < CHECK_BYTES) {
                size += docs[end].len();
                end += 1;
            }
            let trie = self.trie.as_ref();
            if let Some(table) = self.table.as_ref() {
                with_table!(table, t => count_batch(t, &docs[start..end], &r, trie));
            }
            let bytes = self.table_bytes();
            self.stats.peak_table_bytes = self.stats.peak_table_bytes.max(bytes);
            let projected = self.table.as_ref().map_or(0, |t| with_table!(t, t => t.bytes_after_growth()));
            if projected > self.budget {
                self.spill()?;
            }
            start = end;
        }
        Ok(())
    }

    /// Estimated bytes held by the counting table.
    pub fn table_bytes(&self) -> usize {
        self.table.as_ref().map_or(0, |t| with_table!(t, t => t.bytes()))
    }

    /// Bytes held by the retained candidates and the trie.
    pub fn kept_bytes(&self) -> usize {
        self.kept.heap_bytes() + self.trie.as_ref().map_or(0, |t| t.heap_bytes())
    }

    fn spill(&mut self) -> Result<(), Error> {
        let path = self.tmp_dir.join(format!("run-{}-{}.bin", self.round, self.runs.len()));
        let written = match self.table.as_ref() {
            None => return Ok(()),
            Some(t) => with_table!(t, t => {
                let sorted = t.drain_sorted();
                spill::write_run(&path, sorted.iter().map(|(k, c)| (k.bytes(), *c)))?
            }),
        };
        self.runs.push(path);
        self.stats.spills += 1;
        self.stats.spilled_bytes += written;
        Ok(())
    }

    /// Ends the round: merges the counts, keeps the candidates at the threshold, prunes what can
    /// no longer matter.
    pub fn end_round(&mut self) -> Result<RoundStats, Error> {
        let r = self.rounds[self.round];
        let table = self.table.take().ok_or_else(|| Error::Value("no round in progress".into()))?;
        // Later rounds need candidates at their thresholds for their tries.
        let future = self.rounds[self.round + 1..].iter().map(|r| r.threshold).min();
        let m = self.raw_vocab_size;
        let mut sel = Selector {
            threshold: r.threshold,
            future,
            m,
            direct: Cands::default(),
            low: Cands::default(),
            cutoff: 0,
            distinct: 0,
            retained: 0,
        };
        with_table!(&table, t => {
            if self.runs.is_empty() {
                // Without runs the selection needs no order: stream the shards one by one.
                let mut buf = Vec::with_capacity(64);
                for sh in &t.shards {
                    let mut g = sh.lock().unwrap_or_else(|p| p.into_inner());
                    for (k, c) in g.take() {
                        if c < sel.threshold || (c < sel.cutoff && sel.future.is_none_or(|f| c < f)) {
                            sel.distinct += 1;
                            sel.retained += u64::from(c >= sel.threshold);
                            continue;
                        }
                        buf.clear();
                        k.write_bytes(&mut buf);
                        sel.offer(&buf, c);
                    }
                }
            } else {
                let sorted = t.drain_sorted();
                spill::merge(&self.runs, sorted.into_iter().map(|(k, c)| (k.bytes(), c)), |k, c| {
                    sel.offer(&k, c);
                    Ok(())
                })?;
            }
        });
        drop(table);
        for p in self.runs.drain(..) {
            let _ = std::fs::remove_file(p);
        }
        let mut all = std::mem::take(&mut self.kept);
        all.extend(&sel.direct);
        drop(sel.direct);
        sel.low.prune_top(m);
        all.extend(&sel.low);
        drop(sel.low);
        all.sort();
        all.retain(|i, c| i < m || future.is_some_and(|f| c >= f));
        self.kept = all;
        self.trie = None;
        self.round += 1;
        self.stats.distinct = sel.distinct;
        self.stats.retained = sel.retained;
        Ok(self.stats.clone())
    }

    /// The raw vocabulary: the best `raw_vocab_size` candidates by count (ties by bytes).
    pub fn result(&self) -> Vec<(&[u8], u64)> {
        (0..self.kept.len().min(self.raw_vocab_size)).map(|i| self.kept.get(i)).collect()
    }
}

/// Buffer size at which the low candidates are pruned to the best `m` (small in tests so that
/// the pruning path runs on small corpora).
fn prune_trigger(m: usize) -> usize {
    if cfg!(test) {
        m.saturating_mul(2).saturating_add(2)
    } else {
        m.max(1 << 16).saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Brute force: every valid substring by the SPEC rules, no early stopping at all.
    fn brute(docs: &[&str], r: &Round) -> BTreeMap<Vec<u8>, u64> {
        let mut m = BTreeMap::new();
        for d in docs {
            let x = d.as_bytes();
            let mut s = Vec::new();
            unit_starts(x, &mut s);
            for i in 0..x.len() {
                if !d.is_char_boundary(i) {
                    continue;
                }
                for j in i + 1..=x.len().min(i + r.max_len) {
                    if !d.is_char_boundary(j) || j - i < r.min_len {
                        continue;
                    }
                    if crate::cost::crossing_of(&s, i, j) != Crossing::Forbidden {
                        *m.entry(x[i..j].to_vec()).or_insert(0) += 1;
                    }
                }
            }
        }
        m
    }

    fn run(docs: &[&str], rounds: &[Round], m: usize, budget: usize) -> Vec<(Vec<u8>, u64)> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cnfmce-count-test-{}-{seq}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Counter::new(rounds.to_vec(), m, budget, dir.clone()).unwrap();
        c.budget = budget; // allow tiny budgets in tests
        let bytes: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
        for _ in rounds {
            c.begin_round().unwrap();
            for chunk in bytes.chunks(2) {
                c.add(chunk).unwrap();
            }
            c.end_round().unwrap();
        }
        let out = c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        out
    }

    const DOCS: &[&str] = &[
        "1600 B.C. was a significant year in human history.",
        "the cat sat on the mat; the cat sat on the hat",
        "co-advisor co-advisor co-advisors 漢字漢字 かなカナ e\u{301}te\u{301}",
        "the the the the the cat cat",
    ];

    #[test]
    fn single_round_equals_brute_force() {
        let r = Round { min_len: 1, max_len: 12, threshold: 0 };
        let want = brute(DOCS, &r);
        let got = run(DOCS, &[r], usize::MAX >> 1, usize::MAX >> 1);
        let got: BTreeMap<Vec<u8>, u64> = got.into_iter().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn spilling_gives_identical_counts() {
        let rounds = [
            Round { min_len: 1, max_len: 5, threshold: 0 },
            Round { min_len: 6, max_len: 10, threshold: 2 },
            Round { min_len: 11, max_len: 40, threshold: 2 },
        ];
        let a = run(DOCS, &rounds, 1000, usize::MAX >> 1);
        let b = run(DOCS, &rounds, 1000, 1);
        assert_eq!(a, b);
        // Later rounds with threshold 2 keep only repeated candidates: compare with brute force.
        let mut want: Vec<(Vec<u8>, u64)> = Vec::new();
        for r in &rounds {
            for (k, v) in brute(DOCS, r) {
                if v >= r.threshold {
                    want.push((k, v));
                }
            }
        }
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        want.truncate(1000);
        assert_eq!(a, want);
    }

    #[test]
    fn examples_of_the_paper() {
        let r = Round { min_len: 1, max_len: 30, threshold: 0 };
        let got = brute(&["1600 B.C. was a significant year in human history."], &r);
        for ok in ["6", " sig", "significant", "cant", " year", " was a", "significant year", "ficant "] {
            assert!(got.contains_key(ok.as_bytes()), "{ok}");
        }
        assert!(!got.contains_key(&b"ficant year"[..]));
        let c = run(&["1600 B.C. was a significant year in human history."], &[r], 1 << 20, 1 << 30);
        let c: BTreeMap<Vec<u8>, u64> = c.into_iter().collect();
        assert_eq!(c, got);
    }

    #[test]
    fn top_m_with_ties_by_bytes() {
        let r = Round { min_len: 1, max_len: 12, threshold: 0 };
        let mut want: Vec<(Vec<u8>, u64)> = brute(DOCS, &r).into_iter().collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for m in [1, 5, 17, 100] {
            assert_eq!(run(DOCS, &[r], m, 1 << 30), want[..m].to_vec(), "m = {m}");
        }
        let r = Round { min_len: 1, max_len: 3, threshold: 0 };
        let got = run(&["abab"], &[r], 3, 1 << 30);
        // counts: a 2, b 2, ab 2, ba 1, aba 1, bab 1 ... top 3 by count then bytes
        assert_eq!(got, vec![(b"a".to_vec(), 2), (b"ab".to_vec(), 2), (b"b".to_vec(), 2)]);
    }

    #[test]
    fn rejects_bad_rounds() {
        let bad = [Round { min_len: 2, max_len: 5, threshold: 0 }];
        assert!(validate_rounds(&bad).is_err());
        let gap = [Round { min_len: 1, max_len: 5, threshold: 0 }, Round { min_len: 7, max_len: 9, threshold: 0 }];
        assert!(validate_rounds(&gap).is_err());
        assert!(validate_rounds(&DEFAULT_ROUNDS).is_ok());
    }

    #[test]
    fn keys_preserve_byte_order() {
        let mut v: Vec<Vec<u8>> = vec![b"".to_vec(), b"a".to_vec(), b"a\0".to_vec(), b"a\x01".to_vec(), b"ab".to_vec(), b"b".to_vec(), vec![0xff; 15]];
        v.sort();
        let k16: Vec<K16> = v.iter().map(|b| K16::from_bytes(b)).collect();
        assert!(k16.windows(2).all(|w| w[0] < w[1]));
        assert!(v.iter().all(|b| K16::from_bytes(b).bytes() == *b));
        v.push(vec![0xff; 31]);
        v.push([vec![b'a'; 30], vec![0]].concat());
        v.sort();
        assert!(v.iter().all(|b| K32::from_bytes(b).bytes() == *b));
        let k32: Vec<K32> = v.iter().map(|b| K32::from_bytes(b)).collect();
        assert!(k32.windows(2).all(|w| w[0] < w[1]));
    }
}
