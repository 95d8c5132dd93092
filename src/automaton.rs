//! A bytewise double-array Aho-Corasick automaton over the reversed tokens, built for large
//! vocabularies with little memory.
//!
//! Layout: one array of 8-byte states, each packing `base` and `fail` (28 bits each) and a
//! `check` byte, and beside it the array `out` (4 bytes per state). The children of a state with
//! base `b` sit at `b ^ c` for their byte `c` (XOR keeps them inside one 256-slot block) and hold
//! `check == c`; bases are unique, so a matching check proves the parent. A slot that is no
//! child (free, the root) holds `check = slot ^ o` for an offset `o` that no state of its block
//! uses as a base, so no lookup matches it. States without children point their base at a guard
//! block of such slots. The walk reads only the 8-byte states (an L2 miss per byte on large
//! vocabularies: half the footprint of the earlier 16-byte states); `out`, the first pattern on
//! the state's failure chain (itself included), is read afterwards for the states reached:
//! matches are read by following `next` links in the pattern table, longest first. Each pattern
//! also summarises its whole chain (the lengths as a bit mask, the count), so that the encoder can
//! often decide without following the links.
//!
//! The build walks the sorted patterns as ranges of keys sharing a prefix, so no intermediate
//! trie is stored, in two phases: depth first to place the states (a path from the root lands in
//! nearby memory, which the scan rewards; [`Automaton::place_states`]), then breadth first for
//! the failure links and the pattern chains (a node's failure state is shallower, so it is
//! complete when needed; [`Automaton::link_failures`]). Peak memory is the final arrays plus the sorted
//! keys and the traversal frontier.

use crate::error::Error;
use crate::mem::HugeBuf;
use std::collections::VecDeque;

/// No pattern / no state.
pub const NONE: u32 = u32::MAX;
/// Blocks kept open for placement; older blocks are closed.
const OPEN_BLOCKS: usize = 16;
/// How far ahead in the breadth-first queue the failure search's loads start (see
/// [`Automaton::link_failures`]).
const LINK_AHEAD: usize = 16;

/// Bits of a state index in the packed layout.
const INDEX_BITS: u32 = 28;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The most state slots (the guard block included) that the packed layout can index.
pub const MAX_STATES: usize = 1 << INDEX_BITS;

/// A state: `base` (bits 0..28), `fail` (bits 28..56), `check` (bits 56..64). During the build
/// base 0 means "no children" (no real state has base 0: that offset of block 0 is reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
struct State(u64);

impl State {
    #[inline(always)]
    fn new(base: u32, fail: u32, check: u8) -> Self {
        State(base as u64 | (fail as u64) << INDEX_BITS | (check as u64) << 56)
    }
    #[inline(always)]
    fn base(self) -> u32 {
        (self.0 & INDEX_MASK) as u32
    }
    #[inline(always)]
    fn fail(self) -> u32 {
        (self.0 >> INDEX_BITS & INDEX_MASK) as u32
    }
    #[inline(always)]
    fn check(self) -> u8 {
        (self.0 >> 56) as u8
    }
    #[inline(always)]
    fn with_base(self, base: u32) -> Self {
        State(self.0 & !INDEX_MASK | base as u64)
    }
    #[inline(always)]
    fn with_fail(self, fail: u32) -> Self {
        State(self.0 & !(INDEX_MASK << INDEX_BITS) | (fail as u64) << INDEX_BITS)
    }
    #[inline(always)]
    fn with_check(self, check: u8) -> Self {
        State(self.0 & !(0xFF << 56) | (check as u64) << 56)
    }
}

const FREE_STATE: State = State(0);

/// Longest pattern length that [`Pattern::lens`] can describe.
pub const MASK_LEN: usize = 64;

/// A pattern: its value (a token id), length, ε, the next shorter pattern on the chain, and a
/// summary of the whole chain from it (the chain depends on the pattern only: it is the
/// pattern's prefixes, in text order, that are patterns too).
#[derive(Clone, Copy, Debug)]
pub struct Pattern {
    pub eps: f64,
    /// The lengths of all patterns on the chain from this one (itself included): bit `l - 1`
    /// for length `l`; 0 when the chain has a pattern longer than [`MASK_LEN`].
    pub lens: u64,
    pub id: u32,
    pub len: u32,
    pub next: u32,
    /// How many patterns the chain from this one holds (itself included).
    pub chain: u32,
}

pub struct Automaton {
    /// In huge pages all through (see `HugeBuf`): the walk's hottest states, near the root,
    /// come first, and a `Vec`'s first bytes up to its first 2 MiB boundary stayed in 4 KiB
    /// pages (which share varied from run to run: 0.6–2.6 MiB of CNF-250k's 6.6 MiB).
    states: HugeBuf<State>,
    /// The first pattern of each state's chain ([`NONE`] for none), by state.
    outs: HugeBuf<u32>,
    patterns: HugeBuf<Pattern>,
    root_next: Box<[u32; 256]>,
    /// The root has a child for every byte (every vocabulary's automaton: it holds the 256
    /// single bytes), so [`Self::step_dense`] applies.
    dense_root: bool,
    /// The smallest ε of any pattern (0 without patterns).
    min_eps: f64,
}

/// Key indices sorted by key (`reversed`: by key read backwards, i.e. by token read forwards),
/// in parallel. An 8-byte big-endian prefix (of the bytes in that reading) decides most
/// comparisons.
fn sort_order(keys: &[&[u8]], reversed: bool) -> Vec<u32> {
    let prefix = |k: &[u8]| -> u64 {
        let mut b = [0u8; 8];
        if reversed {
            for (d, &c) in b.iter_mut().zip(k.iter().rev()) {
                *d = c;
            }
        } else {
            let n = k.len().min(8);
            b[..n].copy_from_slice(&k[..n]);
        }
        u64::from_be_bytes(b)
    };
    let mut sorted: Vec<(u64, u32)> = keys.iter().enumerate().map(|(i, k)| (prefix(k), i as u32)).collect();
    {
        use rayon::slice::ParallelSliceMut;
        sorted.par_sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                let (ka, kb) = (keys[a.1 as usize], keys[b.1 as usize]);
                if reversed {
                    ka.iter().rev().cmp(kb.iter().rev())
                } else {
                    ka.cmp(kb)
                }
            })
        });
    }
    sorted.into_iter().map(|e| e.1).collect()
}

/// The rank of each key in the order of its tokens read forwards (the keys reversed):
/// the pattern numbering, which puts a token's chain (its prefixes that are tokens) in nearby
/// memory.
fn forward_ranks(keys: &[&[u8]]) -> Vec<u32> {
    let mut rank = vec![0u32; keys.len()];
    for (r, k) in sort_order(keys, true).into_iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    rank
}

/// The root state (slot 0).
const ROOT: u32 = 0;

struct Block {
    /// Free slots (bit set = free).
    free: [u64; 4],
    /// Offsets already used as a base.
    used_base: [u64; 4],
    nfree: u32,
}

impl Block {
    fn new() -> Self {
        Block { free: [u64::MAX; 4], used_base: [0; 4], nfree: 256 }
    }
    #[inline]
    fn is_free(&self, o: usize) -> bool {
        self.free[o >> 6] >> (o & 63) & 1 == 1
    }
    #[inline]
    fn base_used(&self, o: usize) -> bool {
        self.used_base[o >> 6] >> (o & 63) & 1 == 1
    }
    fn take(&mut self, o: usize) {
        self.free[o >> 6] &= !(1u64 << (o & 63));
        self.nfree -= 1;
    }
    /// An offset `o` unused as a base with every `o ^ c` free.
    fn fit(&self, labels: &[u8]) -> Option<usize> {
        if labels.len() > self.nfree as usize {
            return None;
        }
        if labels.len() == 1 {
            // Any free slot works for a single child: o = slot ^ c.
            let c = labels[0] as usize;
            for w in 0..4 {
                let mut bits = self.free[w];
                while bits != 0 {
                    let slot = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let o = slot ^ c;
                    if !self.base_used(o) {
                        return Some(o);
                    }
                }
            }
            return None;
        }
        'outer: for o in 0..256usize {
            if self.base_used(o) {
                continue;
            }
            for &c in labels {
                if !self.is_free(o ^ c as usize) {
                    continue 'outer;
                }
            }
            return Some(o);
        }
        None
    }
}
/// The patterns sorted, in one arena: the trie of the build is implicit, a node being the range
/// of keys that share its prefix.
struct SortedKeys {
    /// Key indices in sorted order (pattern numbers once `Automaton::build_limited` has
    /// numbered the patterns).
    order: Vec<u32>,
    arena: Vec<u8>,
    starts: Vec<usize>,
}

impl SortedKeys {
    fn new(keys: &[&[u8]]) -> Self {
        // Sort (see `sort_order`), then copy the keys into one arena in sorted order so that
        // the breadth-first sweep reads memory sequentially.
        let order = sort_order(keys, false);
        let total: usize = keys.iter().map(|k| k.len()).sum();
        let mut arena: Vec<u8> = Vec::with_capacity(total);
        let mut starts: Vec<usize> = Vec::with_capacity(keys.len() + 1);
        for &i in &order {
            starts.push(arena.len());
            arena.extend_from_slice(keys[i as usize]);
        }
        starts.push(arena.len());
        SortedKeys { order, arena, starts }
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    #[inline]
    fn key(&self, i: usize) -> &[u8] {
        &self.arena[self.starts[i]..self.starts[i + 1]]
    }

    /// The children of the node whose keys are `lo..hi` at `depth`: their labels and key ranges.
    fn children(&self, depth: usize, lo: usize, hi: usize, labels: &mut Vec<u8>, ranges: &mut Vec<(u32, u32)>) {
        labels.clear();
        ranges.clear();
        let mut k = lo;
        if k < hi && self.key(k).len() == depth {
            k += 1; // the pattern ending at this node itself
        }
        while k < hi {
            let c = self.key(k)[depth];
            let mut e = k + 1;
            while e < hi && self.key(e)[depth] == c {
                e += 1;
            }
            labels.push(c);
            ranges.push((k as u32, e as u32));
            k = e;
        }
    }
}

/// Nodes per run of a level in [`Automaton::link_failures`] (few in tests, so that small
/// vocabularies have levels of many runs).
const LINK_RUN: usize = if cfg!(test) { 8 } else { 4096 };

/// Failure searches interleaved by [`LinkCx::search_lanes`].
const SEARCH_LANES: usize = 8;

/// A child to link: its state `t`, its label `c`, the first key of its range `clo`, and `f`:
/// where its failure search starts, then its failure state.
#[derive(Clone, Copy)]
struct Job {
    t: u32,
    c: u8,
    f: u32,
    clo: u32,
}

/// The tables and buffers of [`Automaton::link_failures`].
struct LinkCx<'a> {
    states: &'a mut [State],
    outs: &'a mut [u32],
    root_next: &'a [u32; 256],
    sorted: &'a SortedKeys,
    patterns: &'a mut [Pattern],
    /// Empty run buffers of capacity LINK_RUN, reused: every run of every level is one of
    /// them, so the frontier takes at most the buffers in use at once (about one level).
    pool: Vec<Vec<(u32, u32, u32)>>,
}

impl LinkCx<'_> {
    fn buffer(&mut self) -> Vec<(u32, u32, u32)> {
        self.pool.pop().unwrap_or_else(|| Vec::with_capacity(LINK_RUN))
    }

    fn give_back(&mut self, mut run: Vec<(u32, u32, u32)>) {
        if run.capacity() == LINK_RUN {
            run.clear();
            self.pool.push(run);
        }
    }

    #[inline(always)]
    fn state(&self, s: u32) -> State {
        self.states[s as usize]
    }

    /// The child of `s` by `c` during the build (root children come from the root table).
    #[inline]
    fn child_of(&self, s: u32, c: u8) -> Option<u32> {
        if s == ROOT {
            let t = self.root_next[c as usize];
            return (t != ROOT).then_some(t);
        }
        let b = self.state(s).base();
        if b == 0 {
            return None;
        }
        // A base points at a whole block, so b ^ c is a slot.
        let t = b ^ c as u32;
        (self.state(t).check() == c).then_some(t)
    }

    /// Links the children of the nodes of `group` (consecutive runs of a level, all at
    /// `depth`; their buffers go back to the pool); returns the children in order, in full
    /// runs of [`LINK_RUN`] but the last.
    fn link_group(&mut self, depth: u32, group: Vec<Vec<(u32, u32, u32)>>, lanes: bool) -> Vec<Vec<(u32, u32, u32)>> {
        let mut runs: Vec<Vec<(u32, u32, u32)>> = Vec::new();
        let mut next = self.buffer();
        let mut jobs = Vec::new();
        for run in group {
            self.link_run(depth, &run, &mut runs, &mut next, &mut jobs, lanes);
            self.give_back(run);
        }
        if next.is_empty() {
            self.give_back(next);
        } else {
            runs.push(next);
        }
        runs
    }

    /// Links the children of the nodes `run` (all at `depth`), appending them to `next` and
    /// each full `next` to `runs`; `lanes`: the failure searches interleaved (see
    /// [`Self::search_lanes`]), else one after the other (the plain sweep the tests compare
    /// with).
    fn link_run(
        &mut self,
        depth: u32,
        run: &[(u32, u32, u32)],
        runs: &mut Vec<Vec<(u32, u32, u32)>>,
        next: &mut Vec<(u32, u32, u32)>,
        jobs: &mut Vec<Job>,
        lanes: bool,
    ) {
        let sorted = self.sorted;
        let mut labels: Vec<u8> = Vec::with_capacity(256);
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(256);
        let d = depth as usize;
        jobs.clear();
        for (m, &(s, lo, hi)) in run.iter().enumerate() {
            if let Some(&(s2, ..)) = run.get(m + LINK_AHEAD) {
                crate::mem::prefetch(self.states.as_ptr().wrapping_add(s2 as usize));
            }
            sorted.children(d, lo as usize, hi as usize, &mut labels, &mut ranges);
            if labels.is_empty() {
                continue;
            }
            let base = self.state(s).base();
            let s_fail = self.state(s).fail();
            for (&c, &(clo, chi)) in labels.iter().zip(ranges.iter()) {
                let t = base ^ c as u32;
                // The failure search starts at the parent's failure state (the root's
                // children fail to the root: no search, `f` = NONE marks it).
                jobs.push(Job { t, c, f: if s == ROOT { NONE } else { s_fail }, clo });
                if next.len() == LINK_RUN {
                    runs.push(std::mem::replace(next, self.buffer()));
                }
                next.push((t, clo, chi));
            }
        }
        if lanes {
            self.search_lanes(jobs);
        } else {
            for job in jobs.iter_mut() {
                job.f = if job.f == NONE { ROOT } else { self.search(job.f, job.c) };
            }
        }
        // The outputs and patterns of the children, their loads started a few jobs ahead.
        for k in 0..jobs.len() {
            if let Some(j) = jobs.get(k + LINK_AHEAD) {
                crate::mem::prefetch(self.outs.as_ptr().wrapping_add(j.f as usize));
            }
            if let Some(j) = jobs.get(k + LINK_AHEAD / 2) {
                let o = self.outs[j.f as usize];
                crate::mem::prefetch(self.patterns.as_ptr().wrapping_add(o as usize));
                crate::mem::prefetch(self.patterns.as_ptr().wrapping_add(sorted.order[j.clo as usize] as usize));
            }
            let Job { t, f: fail, clo, .. } = jobs[k];
            let mut out = self.outs[fail as usize];
            if sorted.key(clo as usize).len() == d + 1 {
                // A pattern ends at the child (the first key of its range; at most one).
                let pi = sorted.order[clo as usize];
                let Pattern { id, eps, .. } = self.patterns[pi as usize];
                let len = depth + 1;
                let (lens, chain) = match out {
                    NONE => (0, 0),
                    o => (self.patterns[o as usize].lens, self.patterns[o as usize].chain),
                };
                let lens = if len as usize > MASK_LEN || (out != NONE && lens == 0) { 0 } else { lens | 1u64 << (len - 1) };
                self.patterns[pi as usize] = Pattern { eps, lens, id, len, next: out, chain: chain + 1 };
                out = pi;
            }
            self.states[t as usize] = self.states[t as usize].with_fail(fail);
            self.outs[t as usize] = out;
        }
    }

    /// The failure state of a child by `c` whose parent fails to `f`: the first state on the
    /// failure chain from `f` with a child by `c` gives that child, else the root.
    fn search(&self, mut f: u32, c: u8) -> u32 {
        loop {
            if let Some(g) = self.child_of(f, c) {
                return g;
            }
            if f == ROOT {
                return ROOT;
            }
            f = self.state(f).fail();
        }
    }

    /// [`Self::search`] for every job (`job.f`: the parent's failure state, or NONE for a
    /// child of the root; replaced by the result), [`SEARCH_LANES`] searches at a time. Each
    /// search is a chain of dependent loads (a state, then its child's slot, then the next
    /// failure state ...) into a table far larger than the caches; a lane advances by one
    /// load per turn, the load having been prefetched on its previous turn, so the lanes'
    /// misses overlap instead of following each other.
    fn search_lanes(&self, jobs: &mut [Job]) {
        let st = &*self.states;
        // A lane: its job, the state `f` on the chain, and whether `f`'s state (phase 0) or
        // its child's slot (phase 1, `slot`) is the load prefetched last turn.
        #[derive(Clone, Copy)]
        struct Lane {
            job: usize,
            f: u32,
            slot: u32,
            phase: u8,
        }
        let mut lanes: [Lane; SEARCH_LANES] = [Lane { job: usize::MAX, f: 0, slot: 0, phase: 0 }; SEARCH_LANES];
        let mut taken = 0usize;
        let mut active = 0usize;
        // Gives the lane its next job that needs a search (children of the root get the root).
        let refill = |lane: &mut Lane, taken: &mut usize, jobs: &mut [Job]| -> bool {
            while *taken < jobs.len() {
                let k = *taken;
                *taken += 1;
                let f = jobs[k].f;
                if f == NONE {
                    jobs[k].f = ROOT;
                    continue;
                }
                crate::mem::prefetch(st.as_ptr().wrapping_add(f as usize));
                *lane = Lane { job: k, f, slot: 0, phase: 0 };
                return true;
            }
            lane.job = usize::MAX;
            false
        };
        for lane in lanes.iter_mut() {
            if refill(lane, &mut taken, jobs) {
                active += 1;
            }
        }
        while active > 0 {
            for lane in lanes.iter_mut() {
                if lane.job == usize::MAX {
                    continue;
                }
                let c = jobs[lane.job].c;
                let found = if lane.phase == 0 {
                    if lane.f == ROOT {
                        // The root's children come from the root table (ROOT: none, and the
                        // chain ends at the root either way).
                        Some(self.root_next[c as usize])
                    } else {
                        let b = self.state(lane.f).base();
                        if b == 0 {
                            // No children: on to the failure state.
                            lane.f = self.state(lane.f).fail();
                            crate::mem::prefetch(st.as_ptr().wrapping_add(lane.f as usize));
                            None
                        } else {
                            lane.slot = b ^ c as u32;
                            lane.phase = 1;
                            crate::mem::prefetch(st.as_ptr().wrapping_add(lane.slot as usize));
                            None
                        }
                    }
                } else if self.state(lane.slot).check() == c {
                    Some(lane.slot)
                } else {
                    // f is not the root here (phase 1 follows a real state only).
                    lane.f = self.state(lane.f).fail();
                    lane.phase = 0;
                    crate::mem::prefetch(st.as_ptr().wrapping_add(lane.f as usize));
                    None
                };
                if let Some(g) = found {
                    jobs[lane.job].f = g;
                    if !refill(lane, &mut taken, jobs) {
                        active -= 1;
                    }
                }
            }
        }
    }

}

impl Automaton {
    /// Builds the automaton of `patterns` (`(bytes, value)`), which are matched as given (the
    /// caller reverses tokens). Patterns must be non-empty and distinct. Fails when the states
    /// would not fit the packed layout ([`MAX_STATES`] slots).
    pub fn build(keys: &[&[u8]], values: &[(u32, f64)]) -> Result<Self, Error> {
        Self::build_limited(keys, values, MAX_STATES)
    }

    /// [`Self::build`] with at most `max_states` slots (at most [`MAX_STATES`]; smaller limits
    /// test the failure).
    fn build_limited(keys: &[&[u8]], values: &[(u32, f64)], max_states: usize) -> Result<Self, Error> {
        Self::build_with(keys, values, max_states, true)
    }

    /// [`Self::build_limited`], the failure searches interleaved or not (`lanes`; the tests
    /// compare the two).
    fn build_with(keys: &[&[u8]], values: &[(u32, f64)], max_states: usize, lanes: bool) -> Result<Self, Error> {
        debug_assert_eq!(keys.len(), values.len());
        let max_states = max_states.min(MAX_STATES);
        let mut sorted = SortedKeys::new(keys);
        let (mut states, root_next) = Self::place_states(&sorted, max_states)?;
        // Patterns are numbered in the order of their tokens read forwards (see
        // `forward_ranks`): each pattern's id and ε go to its slot now, and the sorted keys'
        // order is turned into pattern numbers, so no rank table is kept during the last phase
        // (computed here, before the outputs and patterns are allocated, its sort does not
        // raise the build's peak memory).
        // The outputs and patterns are read at random by the encoder: in huge pages all through
        // (see `HugeBuf`).
        let mut patterns = {
            let rank = forward_ranks(keys);
            let mut patterns = HugeBuf::filled(sorted.len(), Pattern { eps: 0.0, lens: 0, id: 0, len: 0, next: NONE, chain: 0 });
            for (k, &(id, eps)) in values.iter().enumerate() {
                let p = &mut patterns[rank[k] as usize];
                (p.id, p.eps) = (id, eps);
            }
            for o in sorted.order.iter_mut() {
                *o = rank[*o as usize];
            }
            patterns
        };
        let mut outs = HugeBuf::filled(states.len(), NONE);
        Self::link_failures(&mut states, &mut outs, &root_next, &sorted, &mut patterns, lanes);
        drop(sorted);
        // States without children: the guard block (the last one).
        let guard = (states.len() - 256) as u32;
        for st in states.iter_mut() {
            if st.base() == 0 {
                *st = st.with_base(guard);
            }
        }
        states.trim();
        let min_eps = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
        let min_eps = if min_eps.is_finite() { min_eps } else { 0.0 };
        let dense_root = root_next.iter().all(|&t| t != ROOT);
        Ok(Automaton { states, outs, patterns, root_next, dense_root, min_eps })
    }

    /// Phase 1 of the build: every trie node gets a state, placed depth first (so that a path
    /// from the root lies in nearby memory, which the scan follows) with first fit among the
    /// open blocks, then the guard block is appended and every slot that is no child gets a
    /// check no lookup matches (see the module documentation). Leaves keep base 0 (pointed at
    /// the guard block at the end); `fail` and the outputs are filled by phase 2.
    fn place_states(sorted: &SortedKeys, max_states: usize) -> Result<(HugeBuf<State>, Box<[u32; 256]>), Error> {
        let total = sorted.arena.len();
        // At most one state per key byte; reserving that much costs address space, not memory.
        // In huge pages from the first slot (the hottest states, near the root, come first).
        let mut states: HugeBuf<State> = HugeBuf::with_capacity((total + total / 8 + 1024).min(max_states));
        // Block 0 holds the root at slot 0; the guard block is appended at the end.
        states.grow(256, FREE_STATE);
        let mut blocks: Vec<Block> = vec![Block::new()];
        blocks[0].take(0);
        // Base 0 marks "no children" during the build, so no state may use it.
        blocks[0].used_base[0] |= 1;
        let mut open: VecDeque<usize> = VecDeque::from([0usize]);
        let mut root_next = Box::new([ROOT; 256]);
        let mut labels: Vec<u8> = Vec::with_capacity(256);
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(256);
        let mut stack: Vec<(u32, u32, u32, u32)> = vec![(ROOT, 0, 0, sorted.len() as u32)];
        let too_many = || {
            Error::Value(format!(
                "the vocabulary is too large for the automaton: its states would exceed {max_states} slots \
                 ({} tokens, {total} bytes)",
                sorted.len()
            ))
        };
        while let Some((s, depth, lo, hi)) = stack.pop() {
            sorted.children(depth as usize, lo as usize, hi as usize, &mut labels, &mut ranges);
            if labels.is_empty() {
                continue; // base stays 0: the guard block
            }
            // First fit among the open blocks, else a new block.
            let mut placed = None;
            for (qi, &bi) in open.iter().enumerate() {
                if let Some(o) = blocks[bi].fit(&labels) {
                    placed = Some((qi, bi, o));
                    break;
                }
            }
            let (qi, bi, o) = match placed {
                Some(p) => p,
                None => {
                    // This block and the guard block must fit.
                    if states.len() + 512 > max_states {
                        return Err(too_many());
                    }
                    let bi = blocks.len();
                    blocks.push(Block::new());
                    states.grow(256, FREE_STATE);
                    open.push_back(bi);
                    let o = blocks[bi].fit(&labels).expect("an empty block fits any children");
                    (open.len() - 1, bi, o)
                }
            };
            let block = &mut blocks[bi];
            block.used_base[o >> 6] |= 1u64 << (o & 63);
            for &c in &labels {
                block.take(o ^ c as usize);
            }
            let full = block.nfree < 8;
            let base = (bi * 256 + o) as u32;
            states[s as usize] = states[s as usize].with_base(base);
            for (&c, &(clo, chi)) in labels.iter().zip(ranges.iter()).rev() {
                let t = base ^ c as u32;
                states[t as usize] = State::new(0, ROOT, c);
                if s == ROOT {
                    root_next[c as usize] = t;
                }
                stack.push((t, depth + 1, clo, chi));
            }
            if full {
                open.remove(qi);
            } else if open.len() > OPEN_BLOCKS {
                open.pop_front();
            }
        }
        if states.len() + 256 > max_states {
            return Err(too_many());
        }
        // The guard block: offset 0 is the base of every state without children.
        let mut guard = Block::new();
        guard.used_base[0] |= 1;
        blocks.push(guard);
        states.grow(256, FREE_STATE);
        // Base 0 of block 0 is reserved, not a real base, so it may serve as `o` there.
        blocks[0].used_base[0] &= !1;
        for (bi, block) in blocks.iter().enumerate() {
            let Some(o) = (0..256).find(|&o| !block.base_used(o)) else {
                // Every offset is a base: all 256 slots are children (a base has a child of its
                // own in the block), and none needs a non-matching check.
                continue;
            };
            for slot in 0..256usize {
                if block.is_free(slot) || (bi == 0 && slot == ROOT as usize) {
                    let t = bi * 256 + slot;
                    states[t] = states[t].with_check((slot ^ o) as u8);
                }
            }
        }
        Ok((states, root_next))
    }

    /// Phase 2 of the build: failure links and outputs breadth first (a failure state is
    /// shallower, so it is complete when its dependents are reached), and the patterns with
    /// their chains (a chain's tail is shorter, so it is complete too).
    ///
    /// Level by level, in runs of [`LINK_RUN`] nodes: the children of a run are listed first,
    /// then their failure searches run interleaved ([`LinkCx::search_lanes`]: each search is a
    /// chain of dependent loads into tables far larger than the caches, hundreds of MB for a
    /// 5M-entry vocabulary), then their outputs and patterns are written. A child's search
    /// reads only shallower nodes (complete: their level is done) and the `base`/`check`
    /// fields, which this phase does not change, so the order of the searches does not matter.
    fn link_failures(
        states: &mut [State],
        outs: &mut [u32],
        root_next: &[u32; 256],
        sorted: &SortedKeys,
        patterns: &mut [Pattern],
        lanes: bool,
    ) {
        let mut cx = LinkCx { states, outs, root_next, sorted, patterns, pool: Vec::new() };
        // A level: its nodes (state, key range) in breadth-first order, in runs of at most
        // LINK_RUN nodes, each run's buffer reused once linked (so the frontier takes about
        // the memory of one breadth-first queue).
        let mut level: Vec<Vec<(u32, u32, u32)>> = vec![cx.buffer()];
        level[0].push((ROOT, 0, sorted.len() as u32));
        let mut depth = 0u32;
        while !level.is_empty() {
            level = cx.link_group(depth, level, lanes);
            depth += 1;
        }
    }

    /// The state after consuming `c` in state `s`.
    #[inline(always)]
    pub fn next(&self, mut s: u32, c: u8) -> u32 {
        loop {
            if s == ROOT {
                // SAFETY: c < 256.
                return unsafe { *self.root_next.get_unchecked(c as usize) };
            }
            // SAFETY: states are < states.len(); bases point at a full 256-slot block (a real
            // one or the guard), so base ^ c stays in range.
            let st = unsafe { *self.states.get_unchecked(s as usize) };
            let t = st.base() ^ c as u32;
            if unsafe { self.states.get_unchecked(t as usize) }.check() == c {
                return t;
            }
            s = st.fail();
        }
    }

    /// One step of [`Self::next`] without branches: from state `s` on byte `c`, either the
    /// transition (`(t, true)`: `c` consumed, `t == self.next(s, c)`) or one failure link
    /// (`(fail, false)`: `c` still to be consumed from there). [`Self::next`] is this step
    /// repeated until `c` is consumed. Without a data-dependent branch, independent walks that
    /// advance in turn keep their memory loads in flight together (a mispredicted "is there a
    /// transition" branch per byte would discard them).
    #[inline(always)]
    pub fn step(&self, s: u32, c: u8) -> (u32, bool) {
        // SAFETY: as in `next`; the root table has 256 entries.
        let st = unsafe { *self.states.get_unchecked(s as usize) };
        let at_root = s == ROOT;
        let via_root = unsafe { *self.root_next.get_unchecked(c as usize) };
        // Selected by masks, so that the compiler emits no branch.
        let root_mask = 0u32.wrapping_sub(at_root as u32);
        let t = (via_root & root_mask) | ((st.base() ^ c as u32) & !root_mask);
        let ok = at_root | (unsafe { self.states.get_unchecked(t as usize) }.check() == c);
        let ok_mask = 0u32.wrapping_sub(ok as u32);
        ((t & ok_mask) | (st.fail() & !ok_mask), ok)
    }

    /// Whether [`Self::step_dense`] may be used: the root has a child for every byte.
    pub fn dense_root(&self) -> bool {
        self.dense_root
    }

    /// [`Self::step`] for an automaton whose root has a child for every byte
    /// ([`Self::dense_root`]): the root's transitions are then found like any other state's
    /// (its children sit at its base `^ c` and always match), so the step needs no root case
    /// (no root table load and no selection; measured on CNF-250k: the lane walk 1.1–1.2x
    /// faster). Results are unspecified when the root is not dense.
    #[inline(always)]
    pub fn step_dense(&self, s: u32, c: u8) -> (u32, bool) {
        debug_assert!(self.dense_root);
        // SAFETY: as in `next`.
        let st = unsafe { *self.states.get_unchecked(s as usize) };
        let t = st.base() ^ c as u32;
        let ok = unsafe { self.states.get_unchecked(t as usize) }.check() == c;
        let ok_mask = 0u32.wrapping_sub(ok as u32);
        ((t & ok_mask) | (st.fail() & !ok_mask), ok)
    }

    /// The first (longest) pattern matching at state `s`, or [`NONE`].
    #[inline(always)]
    pub fn out(&self, s: u32) -> u32 {
        // SAFETY: s is a valid state.
        unsafe { *self.outs.get_unchecked(s as usize) }
    }

    /// Where the output of state `s` lives (for prefetching; any `s` is allowed).
    #[inline(always)]
    pub fn out_ptr(&self, s: u32) -> *const u32 {
        self.outs.as_ptr().wrapping_add(s as usize)
    }

    /// Pattern `p` (an index from [`Self::out`] or [`Pattern::next`]).
    #[inline(always)]
    pub fn pattern(&self, p: u32) -> &Pattern {
        // SAFETY: pattern indices come from the automaton itself.
        unsafe { self.patterns.get_unchecked(p as usize) }
    }

    /// Where pattern `p` lives (for prefetching; any `p` is allowed).
    #[inline(always)]
    pub fn pattern_ptr(&self, p: u32) -> *const Pattern {
        self.patterns.as_ptr().wrapping_add(p as usize)
    }

    /// The smallest ε of any pattern: a lower bound for the ε of every match.
    pub fn min_eps(&self) -> f64 {
        self.min_eps
    }

    pub fn root(&self) -> u32 {
        ROOT
    }

    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    pub fn heap_bytes(&self) -> usize {
        self.states.bytes()
            + self.outs.bytes()
            + self.patterns.bytes()
            + 256 * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All (start, len, value) of patterns occurring in `text`, via the automaton.
    fn scan(a: &Automaton, text: &[u8]) -> Vec<(usize, usize, u32)> {
        let mut out = Vec::new();
        let mut s = a.root();
        for (i, &c) in text.iter().enumerate() {
            s = a.next(s, c);
            let mut p = a.out(s);
            let mut last = usize::MAX;
            let mut chain = 0usize;
            while p != NONE {
                let pat = a.pattern(p);
                assert!((pat.len as usize) < last, "longest first");
                last = pat.len as usize;
                out.push((i + 1 - pat.len as usize, pat.len as usize, pat.id));
                chain += 1;
                p = pat.next;
            }
            let first = a.out(s);
            if first != NONE {
                let f = a.pattern(first);
                assert_eq!(f.chain as usize, chain);
                let mut lengths = Vec::new();
                let mut q = first;
                while q != NONE {
                    lengths.push(a.pattern(q).len as usize);
                    q = a.pattern(q).next;
                }
                let want = if lengths.iter().any(|&l| l > MASK_LEN) {
                    0
                } else {
                    lengths.iter().fold(0u64, |m, &l| m | 1 << (l - 1))
                };
                assert_eq!(f.lens, want);
            }
        }
        out.sort();
        out
    }

    fn naive(pats: &[&[u8]], text: &[u8]) -> Vec<(usize, usize, u32)> {
        let mut out = Vec::new();
        for i in 0..text.len() {
            for (k, p) in pats.iter().enumerate() {
                if text[i..].starts_with(p) {
                    out.push((i, p.len(), k as u32 * 3));
                }
            }
        }
        out.sort();
        out
    }

    /// `rnd(n)`: pseudo-random numbers below `n` from a xorshift generator seeded with `x`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    #[test]
    fn interleaved_failure_searches_equal_one_sweep() {
        // Levels far wider than a run (8 nodes in tests), long failure chains (small
        // alphabets, long keys): the interleaved searches must give the very same states,
        // outputs and patterns as one search after the other, and match the naive search.
        let mut rnd = xorshift(0x9E3779B97F4A7C15u64);
        for round in 0..12 {
            let alpha = if round % 3 == 0 { 256 } else { 3 + rnd(5) };
            let mut pats: Vec<Vec<u8>> = Vec::new();
            for _ in 0..300 + rnd(3000) {
                let len = 1 + rnd(if round % 2 == 0 { 6 } else { 40 }) as usize;
                pats.push((0..len).map(|_| rnd(alpha) as u8).collect());
            }
            pats.sort();
            pats.dedup();
            let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
            let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32 * 3, k as f64 * 1e-3)).collect();
            let par = Automaton::build_with(&refs, &vals, MAX_STATES, true).unwrap();
            let seq = Automaton::build_with(&refs, &vals, MAX_STATES, false).unwrap();
            assert_eq!(&par.states[..], &seq.states[..], "round {round}");
            assert_eq!(par.outs[..], seq.outs[..], "round {round}");
            assert_eq!(par.patterns.len(), seq.patterns.len());
            for (p, q) in par.patterns.iter().zip(seq.patterns.iter()) {
                assert_eq!((p.eps.to_bits(), p.lens, p.id, p.len, p.next, p.chain), (q.eps.to_bits(), q.lens, q.id, q.len, q.next, q.chain));
            }
            let text: Vec<u8> = (0..2000).map(|_| rnd(alpha) as u8).collect();
            assert_eq!(scan(&par, &text), naive(&refs, &text), "round {round}");
        }
    }

    #[test]
    fn matches_naive_search() {
        let mut rnd = xorshift(0x2545F4914F6CDD1Du64);
        for round in 0..200 {
            let alpha = 2 + rnd(6) as u8 + if round % 5 == 0 { 240 } else { 0 };
            let mut pats: Vec<Vec<u8>> = Vec::new();
            for _ in 0..1 + rnd(80) {
                let len = 1 + rnd(7) as usize;
                let p: Vec<u8> = (0..len).map(|_| (rnd(alpha as u64) as u8).wrapping_mul(37)).collect();
                if !pats.contains(&p) {
                    pats.push(p);
                }
            }
            let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
            let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32 * 3, 0.0)).collect();
            let a = Automaton::build(&refs, &vals).unwrap();
            let text: Vec<u8> = (0..rnd(200)).map(|_| (rnd(alpha as u64) as u8).wrapping_mul(37)).collect();
            assert_eq!(scan(&a, &text), naive(&refs, &text), "round {round}");
        }
    }

    #[test]
    fn steps_repeated_are_next() {
        // `step` until the byte is consumed is `next`, from every state reached on random text
        // (failure chains of several links, the root with and without a child).
        let mut rnd = xorshift(0x9E3779B97F4A7C15u64);
        for round in 0..100 {
            let alpha = 2 + rnd(5);
            let mut pats: Vec<Vec<u8>> = Vec::new();
            for _ in 0..1 + rnd(60) {
                let p: Vec<u8> = (0..1 + rnd(9)).map(|_| b'a' + rnd(alpha) as u8).collect();
                if !pats.contains(&p) {
                    pats.push(p);
                }
            }
            let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
            let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32, 0.0)).collect();
            let a = Automaton::build(&refs, &vals).unwrap();
            let mut s = a.root();
            for i in 0..300 {
                let c = if i % 17 == 16 { b'z' } else { b'a' + rnd(alpha + 1) as u8 };
                let want = a.next(s, c);
                let mut t = s;
                let mut links = 0;
                loop {
                    let (u, consumed) = a.step(t, c);
                    t = u;
                    if consumed {
                        break;
                    }
                    links += 1;
                    assert!(links <= 10, "round {round}: a failure chain longer than the pattern");
                }
                assert_eq!(t, want, "round {round} byte {i}");
                s = want;
            }
        }
    }

    #[test]
    fn dense_root_steps_equal_steps() {
        // With all 256 single bytes among the keys (every vocabulary) the root is dense, and
        // `step_dense` equals `step` on every byte from every state (all states, found
        // breadth first through `next`): keys of 1 to 256 bytes, shared prefixes, single-child
        // chains (long keys whose prefixes are not keys), small alphabets and all byte values.
        // Without them the root is not dense.
        let mut rnd = xorshift(0xD1B54A32D192ED03u64);
        for round in 0..24 {
            let alpha = if round % 3 == 0 { 256 } else { 2 + rnd(6) };
            let mut pats: Vec<Vec<u8>> = if round % 8 == 7 { Vec::new() } else { (0..=255u8).map(|b| vec![b]).collect() };
            for _ in 0..1 + rnd(80) {
                let len = match rnd(6) {
                    0 => 256,
                    1 => 20 + rnd(60) as usize,
                    _ => 1 + rnd(8) as usize,
                };
                let p: Vec<u8> = (0..len).map(|_| (b'a' as u64 + rnd(alpha)) as u8).collect();
                for q in [p.clone(), p[..len / 2 + 1].to_vec()] {
                    if !pats.contains(&q) {
                        pats.push(q);
                    }
                }
            }
            let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
            let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32, 0.0)).collect();
            let a = Automaton::build(&refs, &vals).unwrap();
            let dense = round % 8 != 7;
            assert_eq!(a.dense_root(), dense || (0..=255u8).all(|b| pats.contains(&vec![b])), "round {round}");
            if !a.dense_root() {
                continue;
            }
            let mut seen = std::collections::HashSet::from([a.root()]);
            let mut queue = VecDeque::from([a.root()]);
            let mut steps = 0usize;
            while let Some(s) = queue.pop_front() {
                for c in 0..=255u8 {
                    assert_eq!(a.step_dense(s, c), a.step(s, c), "round {round} state {s} byte {c}");
                    steps += 1;
                    let t = a.next(s, c);
                    if seen.insert(t) {
                        queue.push_back(t);
                    }
                }
            }
            let keyed: usize = {
                let mut prefixes = std::collections::HashSet::new();
                for p in &pats {
                    for l in 1..=p.len() {
                        prefixes.insert(&p[..l]);
                    }
                }
                prefixes.len()
            };
            assert_eq!(seen.len(), keyed + 1, "round {round}: every trie node reached");
            assert_eq!(steps, seen.len() * 256);
        }
    }

    /// Patterns are numbered in the order of their keys read backwards (the tokens read
    /// forwards), ties of the 8-byte prefix included (keys of 1-20 bytes over a small alphabet
    /// and all 256 byte values), and each chain still lists the pattern's suffixes that are
    /// patterns, longest first.
    #[test]
    fn patterns_are_numbered_by_reversed_keys() {
        let mut rnd = xorshift(0x2545F4914F6CDD1Du64);
        for round in 0..30 {
            let mut pats: Vec<Vec<u8>> = Vec::new();
            for _ in 0..1 + rnd(200) {
                let alpha = if round % 3 == 0 { 256 } else { 3 };
                let p: Vec<u8> = (0..1 + rnd(20)).map(|_| rnd(alpha) as u8).collect();
                if !pats.contains(&p) {
                    pats.push(p);
                }
            }
            let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
            // Ids are the input positions, times 3 (not the pattern numbers).
            let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32 * 3, 0.0)).collect();
            let a = Automaton::build(&refs, &vals).unwrap();
            assert_eq!(a.patterns.len(), pats.len());
            let key_of = |p: &Pattern| -> Vec<u8> { pats[p.id as usize / 3].iter().rev().copied().collect() };
            for w in a.patterns.windows(2) {
                assert!(key_of(&w[0]) < key_of(&w[1]), "round {round}: patterns out of forward order");
            }
            for p in a.patterns.iter() {
                let key = &pats[p.id as usize / 3];
                assert_eq!(p.len as usize, key.len());
                let want: Vec<usize> =
                    (1..=key.len()).rev().filter(|&l| pats.iter().any(|q| q.as_slice() == &key[key.len() - l..])).collect();
                let mut got = Vec::new();
                let mut q = a.patterns.iter().position(|x| x.id == p.id).unwrap() as u32;
                while q != NONE {
                    got.push(a.pattern(q).len as usize);
                    q = a.pattern(q).next;
                }
                assert_eq!(got, want, "round {round}");
                assert_eq!(p.chain as usize, want.len());
            }
        }
    }

    #[test]
    fn all_bytes_and_long_chains() {
        let mut pats: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        pats.push(vec![b'a'; 300]);
        pats.push(b"abcabc".to_vec());
        let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
        let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32 * 3, 0.0)).collect();
        let a = Automaton::build(&refs, &vals).unwrap();
        let text: Vec<u8> = [vec![b'a'; 310], b"xabcabcabc\xff\x00".to_vec()].concat();
        assert_eq!(scan(&a, &text), naive(&refs, &text));
    }

    /// Every goto of the packed layout: from each trie node (the string `w`, state `s`), a
    /// step on byte `c` is a transition exactly when `w + c` is a prefix of some pattern, and
    /// lands on that prefix's state; free slots, the root's slot and the guard block match no
    /// lookup. All 256 byte values, blocks filled to every density (a node with all 256
    /// children, single children, leaves).
    #[test]
    fn gotos_are_the_trie_on_all_byte_values() {
        let mut rnd = xorshift(0xD1B54A32D192ED03u64);
        for round in 0..40 {
            let mut pats: Vec<Vec<u8>> = Vec::new();
            if round % 4 == 0 {
                // A node with all 256 children, and the root with all 256.
                pats.extend((0..=255u8).map(|b| vec![b]));
                pats.extend((0..=255u8).map(|b| vec![7, b]));
            }
            for _ in 0..1 + rnd(300) {
                let alpha = if rnd(2) == 0 { 256 } else { 3 };
                let p: Vec<u8> = (0..1 + rnd(6)).map(|_| rnd(alpha) as u8).collect();
                if !pats.contains(&p) {
                    pats.push(p);
                }
            }
            let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
            let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32, 0.0)).collect();
            let a = Automaton::build(&refs, &vals).unwrap();
            let prefixes: std::collections::HashSet<&[u8]> =
                pats.iter().flat_map(|p| (1..=p.len()).map(move |l| &p[..l])).collect();
            let mut seen = std::collections::HashMap::new();
            let mut todo: Vec<(Vec<u8>, u32)> = vec![(Vec::new(), a.root())];
            while let Some((w, s)) = todo.pop() {
                for c in 0..=255u8 {
                    let mut wc = w.clone();
                    wc.push(c);
                    let is_prefix = prefixes.contains(wc.as_slice());
                    let t = if s == a.root() {
                        let t = a.next(s, c);
                        assert_eq!(t != a.root(), is_prefix, "round {round}: root by {c}");
                        t
                    } else {
                        let (t, consumed) = a.step(s, c);
                        assert_eq!(consumed, is_prefix, "round {round}: {w:?} by {c}");
                        t
                    };
                    if is_prefix {
                        assert!(seen.insert(t, wc.clone()).is_none(), "round {round}: two prefixes share state {t}");
                        todo.push((wc, t));
                    }
                }
            }
            assert_eq!(seen.len(), prefixes.len());
            let text: Vec<u8> = (0..400).map(|i| if i % 3 == 0 { 7 } else { rnd(256) as u8 }).collect();
            let naive_vals: Vec<&[u8]> = refs.clone();
            let want: Vec<(usize, usize, u32)> =
                naive(&naive_vals, &text).into_iter().map(|(i, l, v)| (i, l, v / 3)).collect();
            assert_eq!(scan(&a, &text), want, "round {round}");
        }
    }

    /// The packed fields hold every index up to the layout's limit.
    #[test]
    fn packed_fields_at_the_limit() {
        let top = (MAX_STATES - 1) as u32;
        for &(b, f, c) in &[(top, top, 255u8), (0, top, 0), (top, 0, 255), (1, 2, 3), (top - 1, 1, 128)] {
            let s = State::new(b, f, c);
            assert_eq!((s.base(), s.fail(), s.check()), (b, f, c));
            let s = s.with_base(top ^ b).with_fail(top ^ f).with_check(!c);
            assert_eq!((s.base(), s.fail(), s.check()), (top ^ b, top ^ f, !c));
        }
    }

    /// A vocabulary whose states exceed the layout's limit is refused with a clear error (here
    /// with a small limit: the same check guards [`MAX_STATES`]); exactly at the limit it builds.
    #[test]
    fn too_many_states_is_an_error() {
        let mut rnd = xorshift(0x5851F42D4C957F2Du64);
        let pats: Vec<Vec<u8>> = (0..2000).map(|_| (0..1 + rnd(12)).map(|_| rnd(256) as u8).collect()).collect();
        let mut pats: Vec<Vec<u8>> = pats;
        pats.sort();
        pats.dedup();
        let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
        let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32 * 3, 0.0)).collect();
        let need = Automaton::build(&refs, &vals).unwrap().num_states();
        assert!(need > 1024);
        let a = Automaton::build_limited(&refs, &vals, need).unwrap();
        let text: Vec<u8> = (0..3000).map(|_| rnd(256) as u8).collect();
        assert_eq!(scan(&a, &text), naive(&refs, &text));
        for limit in [need - 1, need / 2, 300] {
            let e = Automaton::build_limited(&refs, &vals, limit).err().expect("over the limit");
            let msg = e.to_string();
            assert!(msg.contains("too large for the automaton") && msg.contains(&limit.to_string()), "{msg}");
        }
    }
}

#[cfg(test)]
#[path = "automaton_profile.rs"]
mod profile;
