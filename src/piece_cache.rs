//! The piece cache of MCE: solved short pieces, shared by every thread that encodes with one
//! [`crate::mce::Encoder`].
//!
//! `Encoder::mce_choices` cuts the text at the positions no token spans; a short piece between
//! two cuts is a problem of its own (its bytes, its unit starts and `D` at its right end), so its
//! solution can be replayed wherever the same piece occurs in the same unit context. This module
//! holds the cache (seqlock slots, the memory budget of all caches, statistics) and the key and
//! entry formats; the program that solves and replays pieces stays in [`crate::mce`].

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A piece found by `Encoder::next_piece`: `text[p..q]`, and for a short one its cache key
/// (bytes, start flags) and the hash that picks its set.
#[derive(Clone, Copy, Default)]
pub(crate) struct PieceKey {
    pub(crate) p: usize,
    pub(crate) q: usize,
    pub(crate) short: bool,
    pub(crate) key: u128,
    pub(crate) starts: u32,
    pub(crate) hash: u64,
}

impl PieceKey {
    /// The low bits of an entry's metadata word that belong to the key (length and starts).
    #[inline(always)]
    fn meta(&self) -> u64 {
        (self.q - self.p) as u64 | (self.starts as u64) << META_STARTS
    }
}

/// Pieces of at most this many bytes go through the piece cache.
pub(crate) const PIECE_MAX: usize = 16;
/// Most tokens a cached piece's path may hold.
pub(crate) const PIECE_TOKENS: usize = 6;
/// The piece cache has `2^CACHE_BITS` entries (64 bytes each: 16 MiB), in sets of [`WAYS`].
/// Small in tests, so that the randomized comparisons evict and collide entries often.
pub(crate) const CACHE_BITS: u32 = if cfg!(test) { 4 } else { 18 };
/// Entries of the caches made once [`CACHE_BUDGET`] is used up (256 KiB each).
pub(crate) const SMALL_CACHE_BITS: u32 = if cfg!(test) { 3 } else { 12 };
/// Entries per set: a piece can live in either slot of its set (the most recently used first).
/// On 3 MB of the en / code / multi test sets encoded again (o200k_base), the pieces solved
/// rather than replayed: 4.3 / 3.9 / 8.2% direct-mapped with 2^17 entries (before), 2.2 / 2.0 /
/// 4.9% two-way with 2^17, 0.7 / 0.7 / 1.7% two-way with 2^18 (benches/README.md, encperf).
pub(crate) const WAYS: usize = 2;
/// Bytes of full-size piece caches (all encoders together) past which an encoder's cache is
/// made small ([`SMALL_CACHE_BITS`]): many live encoders do not hold 16 MiB each.
pub(crate) const CACHE_BUDGET: usize = 256 << 20;
/// Bytes of full-size piece caches allocated now.
pub(crate) static CACHE_LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

// The metadata word of an entry (word 7): bits 0..5 the piece's length (0: empty slot), bits
// 5..22 its start flags (bit k: byte p + k starts a unit, k in 0..=len), 22..25 the number of
// tokens, 25..31 which tokens are partial crossings (cost 1 + λ), from bit 31 four bits per
// token: its length less one.
const META_STARTS: u32 = 5;
const META_KEY: u64 = (1 << 22) - 1;
const META_NTOK: u32 = 22;
const META_PARTIAL: u32 = 25;
const META_TLEN: u32 = 31;

/// One solved piece as the program leaves it (see [`PieceCache`]), unpacked.
#[derive(Clone, Copy)]
pub(crate) struct PieceEntry {
    pub(crate) ntok: u8,
    /// Bit m: token m costs 1 + λ.
    pub(crate) partial: u8,
    pub(crate) tlen: [u8; PIECE_TOKENS],
    pub(crate) x_max: f64,
    pub(crate) ids: [u32; PIECE_TOKENS],
}

impl PieceEntry {
    /// Words 1..8 of the slot of the piece `k` holding this entry.
    fn words(&self, k: &PieceKey) -> [u64; 7] {
        let mut meta = k.meta() | (self.ntok as u64) << META_NTOK | (self.partial as u64) << META_PARTIAL;
        for m in 0..self.ntok as usize {
            debug_assert!((1..=16).contains(&self.tlen[m]));
            meta |= ((self.tlen[m] - 1) as u64) << (META_TLEN + 4 * m as u32);
        }
        let id = |m: usize| self.ids[m] as u64 | (self.ids[m + 1] as u64) << 32;
        [k.key as u64, (k.key >> 64) as u64, self.x_max.to_bits(), id(0), id(2), id(4), meta]
    }
}

/// A slot read whole and unchanged while it was read: words 1..8 (see [`PieceCache`]).
#[derive(Clone, Copy)]
pub(crate) struct Found {
    /// Which slot of the set.
    pub(crate) way: usize,
    /// Its sequence number when read.
    seq: u64,
    words: [u64; 7],
}

impl Found {
    #[inline(always)]
    pub(crate) fn x_max(&self) -> f64 {
        f64::from_bits(self.words[2])
    }

    #[inline(always)]
    pub(crate) fn ntok(&self) -> usize {
        (self.words[6] >> META_NTOK & 7) as usize
    }

    #[inline(always)]
    pub(crate) fn partial(&self, m: usize) -> bool {
        self.words[6] >> (META_PARTIAL as usize + m) & 1 != 0
    }

    #[inline(always)]
    pub(crate) fn tlen(&self, m: usize) -> usize {
        (self.words[6] >> (META_TLEN as usize + 4 * m) & 15) as usize + 1
    }

    #[inline(always)]
    pub(crate) fn id(&self, m: usize) -> u32 {
        (self.words[3 + m / 2] >> (32 * (m & 1))) as u32
    }
}

/// A slot: word 0 its sequence number (odd while a writer holds it), words 1..3 the piece's
/// bytes (little endian, zero above its length), word 3 the margin `x_max` (f64 bits), words
/// 4..7 the ids (two per word), word 7 the metadata (see `META_*`). All zero: empty.
#[repr(C, align(64))]
struct Slot([AtomicU64; 8]);

/// The memory of a [`Slot`] as allocated (zero: an empty slot); never read as such.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct RawSlot([u64; 8]);

// A Slot is a RawSlot's bytes seen as atomics (AtomicU64 has u64's size and bit validity).
const _: () = assert!(std::mem::size_of::<Slot>() == 64 && std::mem::size_of::<RawSlot>() == 64);
const _: () = assert!(std::mem::align_of::<Slot>() == std::mem::align_of::<RawSlot>());

/// Events of a piece cache, counted in test builds (the concurrency tests assert each occurred)
/// and with the `cache-stats` feature (for measurements; see [`Encoder::piece_cache_stats`]).
#[cfg(any(test, feature = "cache-stats"))]
#[derive(Default)]
pub(crate) struct CacheStats {
    /// Replayed.
    pub hits: AtomicU64,
    /// Solved by the program (not held, or its margin too small).
    pub misses: AtomicU64,
    /// A slot whose key matched was being written (odd sequence number) when read.
    pub busy: AtomicU64,
    /// A slot whose key matched changed while it was read (the sequence number moved).
    pub torn: AtomicU64,
    /// A writer found a slot of its set held by another writer and gave up.
    pub lost: AtomicU64,
    /// Entries stored.
    pub inserts: AtomicU64,
    /// Hits in the second slot moved first.
    pub promoted: AtomicU64,
}

#[cfg(any(test, feature = "cache-stats"))]
impl CacheStats {
    /// The counts now: hits, misses, busy, torn, lost, inserts, promoted.
    pub fn counts(&self) -> [u64; 7] {
        [&self.hits, &self.misses, &self.busy, &self.torn, &self.lost, &self.inserts, &self.promoted].map(|c| c.load(Ordering::Relaxed))
    }
}

/// A two-way set-associative cache of solved short pieces, owned by one encoder and shared by
/// every thread encoding with it (least recently used replacement: a hit in the second slot
/// moves to the first, a new entry goes first).
///
/// A piece `text[p..q]` between two cuts (positions no token spans) is a problem of its own:
/// its program reads only its bytes, the unit starts `p..=q` and `D[q]`. The program's
/// decisions do not depend on `D[q]` in exact arithmetic, but they can in floating point (ties
/// and near-ties round differently at different magnitudes), so an entry also holds how large
/// `D[q]` may be for its decisions to stand (see `Encoder::piece_program`); a piece that is a
/// tie at any magnitude is never cached. Replaying an entry adds its costs right to left onto
/// `D[q]`: the same operations on the same values as the program, so `D[p]` is bit-identical.
///
/// Concurrency: every word is an atomic, read and written `Relaxed`, with a sequence lock per
/// slot. A writer takes the slots it writes by moving their sequence numbers from even to odd
/// (compare-exchange; if any is taken already it gives up and the entry is not stored), issues
/// a release fence, writes, and releases each slot with the next even number (a release
/// store). A reader loads the sequence number (acquire), the words, an acquire fence, and the
/// sequence number again: the words are one writer's entry if it was even and unchanged
/// (a writer that wrote any word read had made the number odd before, and the fences order
/// that before the second load). Anything else is a miss, never a replay: a reader never
/// writes, except to move a hit in the second slot first (at most once per such hit, and
/// only if it gets both slots at once).
pub(crate) struct PieceCache {
    /// The slots' memory, from a huge-page boundary (see [`crate::mem::HugeBuf`]), used only
    /// through [`Self::slots`].
    buf: crate::mem::HugeBuf<RawSlot>,
    /// A set's first slot is `(hash >> shift) * WAYS`.
    shift: u32,
    /// Counted in [`CACHE_LIVE`].
    pub(crate) full: bool,
    #[cfg(any(test, feature = "cache-stats"))]
    pub(crate) stats: CacheStats,
    /// Test hook: readers and writers pause inside their critical windows, so that threads
    /// overlap there even on a machine of two busy cores.
    #[cfg(test)]
    pub(crate) pause: std::sync::atomic::AtomicBool,
}

impl Drop for PieceCache {
    fn drop(&mut self) {
        if self.full {
            CACHE_LIVE.fetch_sub(self.slots().len() * std::mem::size_of::<Slot>(), Ordering::Relaxed);
        }
    }
}

/// Counts an event of a cache (test builds and the `cache-stats` feature only).
macro_rules! count {
    ($cache:expr, $field:ident) => {
        #[cfg(any(test, feature = "cache-stats"))]
        $cache.stats.$field.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
}
pub(crate) use count;

impl PieceCache {
    /// A cache of `2^CACHE_BITS` entries while [`CACHE_BUDGET`] allows, else a small one.
    pub(crate) fn new() -> Self {
        let bytes = std::mem::size_of::<Slot>() << CACHE_BITS;
        let full = CACHE_LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes <= CACHE_BUDGET;
        if !full {
            CACHE_LIVE.fetch_sub(bytes, Ordering::Relaxed);
        }
        let mut c = Self::with_bits(if full { CACHE_BITS } else { SMALL_CACHE_BITS });
        c.full = full;
        c
    }

    /// An empty cache of `2^bits` entries (not counted in [`CACHE_LIVE`]).
    pub(crate) fn with_bits(bits: u32) -> Self {
        assert!(bits > WAYS.trailing_zeros() && bits <= 32);
        // Huge pages where the system allows them: a lookup in 16 MiB of 4 KiB pages
        // misses the TLB almost every time (1.04–1.10x, benches/README.md); a HugeBuf starts
        // at a huge-page boundary, so all of it can be (a Vec's first and last 2 MiB cannot).
        PieceCache {
            // SAFETY: a RawSlot is plain u64s; all zero is an empty slot.
            buf: unsafe { crate::mem::HugeBuf::zeroed(1 << bits) },
            shift: 64 - bits + WAYS.trailing_zeros(),
            full: false,
            #[cfg(any(test, feature = "cache-stats"))]
            stats: CacheStats::default(),
            #[cfg(test)]
            pause: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The slots.
    #[inline(always)]
    fn slots(&self) -> &[Slot] {
        let (ptr, len) = self.buf.raw_parts();
        // SAFETY: `buf` holds `len` initialised RawSlots, 64-byte aligned, owned by self and
        // never accessed but through this slice (no `&[RawSlot]` is made: `HugeBuf`'s deref
        // is not used); a Slot has a RawSlot's size, alignment and valid bit patterns, and
        // its atomics allow the shared mutation.
        unsafe { std::slice::from_raw_parts(ptr as *const Slot, len) }
    }

    /// The hash of a piece (its set is picked by the top bits).
    #[inline(always)]
    pub(crate) fn hash(key: u128, len: usize, starts: u32) -> u64 {
        let (w0, w1) = (key as u64, (key >> 64) as u64);
        (w0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ w1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ ((starts as u64) << 8 | len as u64).wrapping_mul(0x1656_67B1_9E37_79F9)
    }

    /// The first slot of the piece's set.
    #[inline(always)]
    fn set(&self, k: &PieceKey) -> usize {
        (k.hash >> self.shift) as usize * WAYS
    }

    /// Prefetches the piece's set.
    #[inline(always)]
    pub(crate) fn prefetch(&self, k: &PieceKey) {
        let s = self.set(k);
        for w in 0..WAYS {
            crate::mem::prefetch(&self.slots()[s + w]);
        }
    }

    /// Whether a slot of the piece's set seems to hold it (its key words as they read now; a
    /// hint, not checked against writers).
    #[inline(always)]
    pub(crate) fn seems_held(&self, k: &PieceKey) -> bool {
        let s = self.set(k);
        let (lo, hi, meta) = (k.key as u64, (k.key >> 64) as u64, k.meta());
        self.slots()[s..s + WAYS].iter().any(|slot| {
            let w = &slot.0;
            w[7].load(Ordering::Relaxed) & META_KEY == meta && w[1].load(Ordering::Relaxed) == lo && w[2].load(Ordering::Relaxed) == hi
        })
    }

    /// The entry of the piece `k` (same bytes, same unit starts; its margin not checked), read
    /// whole while no writer changed it (see [`PieceCache`]).
    #[inline(always)]
    pub(crate) fn find(&self, k: &PieceKey) -> Option<Found> {
        let s = self.set(k);
        let (lo, hi, meta) = (k.key as u64, (k.key >> 64) as u64, k.meta());
        for way in 0..WAYS {
            let w = &self.slots()[s + way].0;
            let seq = w[0].load(Ordering::Acquire);
            let m = w[7].load(Ordering::Relaxed);
            let (k0, k1) = (w[1].load(Ordering::Relaxed), w[2].load(Ordering::Relaxed));
            if m & META_KEY != meta || k0 != lo || k1 != hi {
                continue;
            }
            #[cfg(test)]
            self.pause_here();
            let rest = [w[3].load(Ordering::Relaxed), w[4].load(Ordering::Relaxed), w[5].load(Ordering::Relaxed), w[6].load(Ordering::Relaxed)];
            fence(Ordering::Acquire);
            let again = w[0].load(Ordering::Relaxed);
            if seq & 1 != 0 {
                count!(self, busy);
                continue;
            }
            if again != seq {
                count!(self, torn);
                continue;
            }
            return Some(Found { way, seq, words: [k0, k1, rest[0], rest[1], rest[2], rest[3], m] });
        }
        None
    }

    /// Takes slot `i` for writing if no writer holds it: its even sequence number before.
    #[inline]
    fn lock(&self, i: usize, expect: Option<u64>) -> Option<u64> {
        let seq = &self.slots()[i].0[0];
        let s = expect.unwrap_or_else(|| seq.load(Ordering::Relaxed));
        if s & 1 != 0 {
            return None;
        }
        seq.compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed).ok()
    }

    /// Releases slot `i` taken at sequence number `s`.
    #[inline]
    fn unlock(&self, i: usize, s: u64) {
        self.slots()[i].0[0].store(s + 2, Ordering::Release);
    }

    /// Words 1..8 of slot `i` (held by this writer).
    fn load_words(&self, i: usize) -> [u64; 7] {
        let w = &self.slots()[i].0;
        std::array::from_fn(|k| w[k + 1].load(Ordering::Relaxed))
    }

    /// Writes words 1..8 of slot `i` (held by this writer, after the release fence).
    fn store_words(&self, i: usize, words: &[u64; 7]) {
        let w = &self.slots()[i].0;
        for (k, &x) in words.iter().enumerate() {
            w[k + 1].store(x, Ordering::Relaxed);
            #[cfg(test)]
            if k == 3 {
                self.pause_here();
            }
        }
    }

    /// Takes both slots of the set starting at `s` (the second only at sequence number
    /// `second`, if given: the one it was read at), or neither.
    fn lock_set(&self, s: usize, second: Option<u64>) -> Option<[u64; WAYS]> {
        let a = self.lock(s, None)?;
        match self.lock(s + 1, second) {
            Some(b) => {
                // Orders the taking of the slots before the writes (see PieceCache).
                fence(Ordering::Release);
                Some([a, b])
            }
            None => {
                self.unlock(s, a);
                None
            }
        }
    }

    /// Moves the entry `f`, just read in the second slot of the piece's set, first (the first
    /// one second), unless a writer holds either slot or the second changed since it was read.
    pub(crate) fn promote(&self, k: &PieceKey, f: &Found) {
        debug_assert_eq!(f.way, 1);
        let s = self.set(k);
        let Some(seqs) = self.lock_set(s, Some(f.seq)) else {
            count!(self, lost);
            return;
        };
        let first = self.load_words(s);
        self.store_words(s, &f.words);
        self.store_words(s + 1, &first);
        self.unlock(s, seqs[0]);
        self.unlock(s + 1, seqs[1]);
        count!(self, promoted);
    }

    /// Stores the entry of the piece `k`: in place of its old entry (one whose margin was too
    /// small), else first in its set, the first moved second (the second dropped); not at all
    /// if another writer holds a slot of the set.
    pub(crate) fn insert(&self, k: &PieceKey, entry: &PieceEntry) {
        let s = self.set(k);
        let Some(seqs) = self.lock_set(s, None) else {
            count!(self, lost);
            return;
        };
        let words = entry.words(k);
        let (first, second) = (self.load_words(s), self.load_words(s + 1));
        let holds = |w: &[u64; 7]| w[6] & META_KEY == words[6] & META_KEY && w[0] == words[0] && w[1] == words[1];
        if holds(&second) && !holds(&first) {
            self.store_words(s + 1, &words);
        } else {
            if !holds(&first) {
                self.store_words(s + 1, &first);
            }
            self.store_words(s, &words);
        }
        self.unlock(s, seqs[0]);
        self.unlock(s + 1, seqs[1]);
        count!(self, inserts);
    }

    /// Test hook: a pause inside a critical window when `pause` is set.
    #[cfg(test)]
    fn pause_here(&self) {
        if self.pause.load(Ordering::Relaxed) {
            for _ in 0..4 {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mce::tests::{cache_text, cache_vocab, reference, Rng};
    use crate::mce::{Algorithm, Encoder, Options, Scratch};
    use crate::vocab::Vocab;

    #[test]
    fn shared_cache_under_threads_matches_reference() {
        // Four threads encode with ONE encoder, so with one piece cache (16 entries in tests),
        // texts made of a few distinct short pieces, so that they collide on the same slots;
        // every output is compared with the reference DP. In every other round the test hook
        // pauses readers between the key and the rest of a slot and writers in the middle of
        // their writes, so that they overlap even on two busy cores. The threads start together
        // (a barrier) and each goes over all the texts three times in its own order. Rounds run
        // until each event of the cache occurred: replays, solves, a slot being written when
        // read, a slot changed while read, a writer giving up, inserts, promotions.
        const THREADS: usize = 4;
        let mut rng = Rng(0x7A3D_91C4_55E2_0B6F);
        let mut total = [0u64; 7];
        let mut round = 0usize;
        loop {
            let (toks, pieces) = cache_vocab(&mut rng);
            let opts = [(0.05, true), (0.0, true), (0.3, false), (f64::INFINITY, true)];
            let (lam, eps) = opts[round % 4];
            let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: lam, token_preference: eps };
            let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
            let texts: Vec<Vec<u8>> = (0..60)
                .map(|t| {
                    let size = if t % 20 == 19 { 3000 } else { 1 + rng.below(200) };
                    cache_text(&mut rng, &pieces, size)
                })
                .collect();
            let want: Vec<Vec<u32>> = texts.iter().map(|t| reference(&toks, t, opt)).collect();
            let cache = enc.piece_cache();
            cache.pause.store(round % 2 == 1, Ordering::Relaxed);
            let barrier = std::sync::Barrier::new(THREADS);
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let (enc, texts, want, barrier) = (&enc, &texts, &want, &barrier);
                    s.spawn(move || {
                        let mut scratch = Scratch::default();
                        barrier.wait();
                        for rep in 0..3 {
                            for k in 0..texts.len() {
                                let i = (k * (2 * t + 1) + rep * 7) % texts.len();
                                let mut got = Vec::new();
                                enc.encode_into(&texts[i], &mut scratch, &mut got);
                                assert_eq!(got, want[i], "round {round} thread {t} text {i}");
                            }
                        }
                    });
                }
            });
            for (a, c) in total.iter_mut().zip(cache.stats.counts()) {
                *a += c;
            }
            round += 1;
            if round >= 4 && total.iter().all(|&c| c > 0) {
                break;
            }
            assert!(round < 400, "hits, misses, busy, torn, lost, inserts, promoted: {total:?}");
        }
        eprintln!("shared cache: {round} rounds; hits, misses, busy, torn, lost, inserts, promoted: {total:?}");
    }

    #[test]
    fn cache_budget_makes_small_caches() {
        // Past the budget of full-size caches an encoder's cache is small; it is exact too.
        CACHE_LIVE.fetch_add(CACHE_BUDGET, Ordering::Relaxed);
        let small = PieceCache::new();
        CACHE_LIVE.fetch_sub(CACHE_BUDGET, Ordering::Relaxed);
        assert!(!small.full);
        assert_eq!(small.slots().len(), 1 << SMALL_CACHE_BITS);
        let big = PieceCache::new();
        assert_eq!(big.slots().len(), 1 << CACHE_BITS);
        let live = CACHE_LIVE.load(Ordering::Relaxed);
        assert!(big.full && live >= big.slots().len() * 64);
        let mut rng = Rng(0x0BAD_5EED_1234_5678);
        for round in 0..8 {
            let (toks, pieces) = cache_vocab(&mut rng);
            let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: [0.05, 0.3][round % 2], token_preference: true };
            let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
            assert!(enc.cache.set(PieceCache::with_bits(SMALL_CACHE_BITS)).is_ok());
            for _ in 0..20 {
                let size = 1 + rng.below(400);
                let text = cache_text(&mut rng, &pieces, size);
                assert_eq!(enc.encode(&text), reference(&toks, &text, opt), "round {round}");
            }
            let st = &enc.piece_cache().stats;
            assert!(st.hits.load(Ordering::Relaxed) > 0 && st.inserts.load(Ordering::Relaxed) > 0);
        }
    }
}
