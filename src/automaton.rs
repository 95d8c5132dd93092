//! A bytewise double-array Aho-Corasick automaton over the reversed tokens, built for large
//! vocabularies with little memory.
//!
//! Layout: one array of 16-byte states `{base, fail, out, check}`. The children of a state with
//! base `b` sit at `b ^ c` for their byte `c` (XOR keeps them inside one 256-slot block) and hold
//! `check == c`; bases are unique, so a matching check proves the parent. States without children
//! point their base at a guard block whose checks match no byte. `out` is the first pattern on
//! the state's failure chain (itself included): matches are read by following `next` links in the
//! pattern table, longest first. Each pattern also summarises its whole chain (the lengths as a
//! bit mask, the count), so that the encoder can often decide without following the links.
//!
//! The build walks the sorted patterns as ranges of keys sharing a prefix, so no intermediate
//! trie is stored, in two phases: depth first to place the states (a path from the root lands in
//! nearby memory, which the scan rewards; [`Automaton::place_states`]), then breadth first for
//! the failure links and the pattern chains (a node's failure state is shallower, so it is
//! complete when needed; [`Automaton::link_failures`]). Peak memory is the final arrays plus the sorted
//! keys and the traversal frontier.

use std::collections::VecDeque;

/// No pattern / no state.
pub const NONE: u32 = u32::MAX;
const EMPTY: u32 = u32::MAX;
/// Blocks kept open for placement; older blocks are closed.
const OPEN_BLOCKS: usize = 16;

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct State {
    base: u32,
    fail: u32,
    out: u32,
    check: u32,
}

const FREE_STATE: State = State { base: 0, fail: 0, out: NONE, check: EMPTY };

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
    states: Vec<State>,
    patterns: Vec<Pattern>,
    root_next: Box<[u32; 256]>,
    /// The smallest ε of any pattern (0 without patterns).
    min_eps: f64,
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
    /// Key indices in sorted order.
    order: Vec<u32>,
    arena: Vec<u8>,
    starts: Vec<usize>,
}

impl SortedKeys {
    fn new(keys: &[&[u8]]) -> Self {
        // Sort by an 8-byte big-endian prefix first (most comparisons end there), then copy the
        // keys into one arena in sorted order so that the breadth-first sweep reads memory
        // sequentially.
        let prefix = |k: &[u8]| -> u64 {
            let mut b = [0u8; 8];
            let n = k.len().min(8);
            b[..n].copy_from_slice(&k[..n]);
            u64::from_be_bytes(b)
        };
        let mut sorted: Vec<(u64, u32)> =
            keys.iter().enumerate().map(|(i, k)| (prefix(k), i as u32)).collect();
        {
            use rayon::slice::ParallelSliceMut;
            sorted.par_sort_unstable_by(|a, b| {
                a.0.cmp(&b.0).then_with(|| keys[a.1 as usize].cmp(keys[b.1 as usize]))
            });
        }
        let order: Vec<u32> = sorted.into_iter().map(|e| e.1).collect();
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

impl Automaton {
    /// Builds the automaton of `patterns` (`(bytes, value)`), which are matched as given (the
    /// caller reverses tokens). Patterns must be non-empty and distinct.
    pub fn build(keys: &[&[u8]], values: &[(u32, f64)]) -> Self {
        debug_assert_eq!(keys.len(), values.len());
        let sorted = SortedKeys::new(keys);
        let (mut states, root_next) = Self::place_states(&sorted);
        let patterns = Self::link_failures(&mut states, &root_next, &sorted, values);
        // The guard block: checks that match no byte, for states without children.
        let guard = states.len() as u32;
        states.resize(states.len() + 256, FREE_STATE);
        for st in states.iter_mut() {
            if st.base == NONE {
                st.base = guard;
            }
        }
        states.shrink_to_fit();
        let min_eps = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
        let min_eps = if min_eps.is_finite() { min_eps } else { 0.0 };
        Automaton { states, patterns, root_next, min_eps }
    }

    /// Phase 1 of the build: every trie node gets a state, placed depth first (so that a path
    /// from the root lies in nearby memory, which the scan follows) with first fit among the
    /// open blocks. Leaves get base `NONE` (the guard block, appended later); `fail` and `out`
    /// are filled by phase 2.
    fn place_states(sorted: &SortedKeys) -> (Vec<State>, Box<[u32; 256]>) {
        let total = sorted.arena.len();
        // At most one state per key byte; reserving that much costs address space, not memory.
        let mut states: Vec<State> = Vec::with_capacity(total + total / 8 + 1024);
        crate::mem::advise_huge(&states);
        // Block 0 holds the root at slot 0; the guard block is appended at the end.
        states.resize(256, FREE_STATE);
        let mut blocks: Vec<Block> = vec![Block::new()];
        blocks[0].take(0);
        // Base 0 marks "children not placed yet" during the build, so no state may use it.
        blocks[0].used_base[0] |= 1;
        let mut open: VecDeque<usize> = VecDeque::from([0usize]);
        states[0] = State { base: 0, fail: ROOT, out: NONE, check: EMPTY };
        let mut root_next = Box::new([ROOT; 256]);
        let mut labels: Vec<u8> = Vec::with_capacity(256);
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(256);
        let mut stack: Vec<(u32, u32, u32, u32)> = vec![(ROOT, 0, 0, sorted.len() as u32)];
        while let Some((s, depth, lo, hi)) = stack.pop() {
            sorted.children(depth as usize, lo as usize, hi as usize, &mut labels, &mut ranges);
            if labels.is_empty() {
                states[s as usize].base = NONE; // fixed to the guard block at the end
                continue;
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
                    let bi = blocks.len();
                    blocks.push(Block::new());
                    states.resize(states.len() + 256, FREE_STATE);
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
            states[s as usize].base = base;
            for (&c, &(clo, chi)) in labels.iter().zip(ranges.iter()).rev() {
                let t = base ^ c as u32;
                states[t as usize] = State { base: 0, fail: ROOT, out: NONE, check: c as u32 };
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
        (states, root_next)
    }

    /// Phase 2 of the build: failure links and outputs breadth first (a failure state is
    /// shallower, so it is complete when its dependents are reached), and the patterns with
    /// their chains (a chain's tail is shorter, so it is complete too).
    fn link_failures(states: &mut [State], root_next: &[u32; 256], sorted: &SortedKeys, values: &[(u32, f64)]) -> Vec<Pattern> {
        let mut patterns: Vec<Pattern> = Vec::with_capacity(sorted.len());
        crate::mem::advise_huge(&patterns);
        patterns.resize(sorted.len(), Pattern { eps: 0.0, lens: 0, id: 0, len: 0, next: NONE, chain: 0 });
        let mut labels: Vec<u8> = Vec::with_capacity(256);
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(256);
        let mut queue: VecDeque<(u32, u32, u32, u32)> = VecDeque::new();
        queue.push_back((ROOT, 0, 0, sorted.len() as u32));
        while let Some((s, depth, lo, hi)) = queue.pop_front() {
            let d = depth as usize;
            sorted.children(d, lo as usize, hi as usize, &mut labels, &mut ranges);
            if labels.is_empty() {
                continue;
            }
            let base = states[s as usize].base;
            let s_fail = states[s as usize].fail;
            for (&c, &(clo, chi)) in labels.iter().zip(ranges.iter()) {
                let t = base ^ c as u32;
                let fail = if s == ROOT {
                    ROOT
                } else {
                    let mut f = s_fail;
                    loop {
                        if let Some(g) = Self::child_of(states, root_next, f, c) {
                            break g;
                        }
                        if f == ROOT {
                            break ROOT;
                        }
                        f = states[f as usize].fail;
                    }
                };
                let mut out = states[fail as usize].out;
                if sorted.key(clo as usize).len() == d + 1 {
                    // A pattern ends at the child (the first key of its range; at most one).
                    let pi = sorted.order[clo as usize];
                    let (id, eps) = values[pi as usize];
                    let len = depth + 1;
                    let (lens, chain) = match out {
                        NONE => (0, 0),
                        o => (patterns[o as usize].lens, patterns[o as usize].chain),
                    };
                    let lens = if len as usize > MASK_LEN || (out != NONE && lens == 0) {
                        0
                    } else {
                        lens | 1u64 << (len - 1)
                    };
                    patterns[pi as usize] = Pattern { eps, lens, id, len, next: out, chain: chain + 1 };
                    out = pi;
                }
                let st = &mut states[t as usize];
                st.fail = fail;
                st.out = out;
                queue.push_back((t, depth + 1, clo, chi));
            }
        }
        patterns
    }

    /// The child of `s` by `c` during the build (root children come from the root table).
    #[inline]
    fn child_of(states: &[State], root_next: &[u32; 256], s: u32, c: u8) -> Option<u32> {
        if s == ROOT {
            let t = root_next[c as usize];
            return (t != ROOT).then_some(t);
        }
        let b = states[s as usize].base;
        if b == NONE {
            return None;
        }
        let t = (b ^ c as u32) as usize;
        (t < states.len() && states[t].check == c as u32).then_some(t as u32)
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
            let st = unsafe { self.states.get_unchecked(s as usize) };
            let t = st.base ^ c as u32;
            if unsafe { self.states.get_unchecked(t as usize) }.check == c as u32 {
                return t;
            }
            s = st.fail;
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
        let st = unsafe { self.states.get_unchecked(s as usize) };
        let at_root = s == ROOT;
        let via_root = unsafe { *self.root_next.get_unchecked(c as usize) };
        // Selected by masks, so that the compiler emits no branch.
        let root_mask = 0u32.wrapping_sub(at_root as u32);
        let t = (via_root & root_mask) | ((st.base ^ c as u32) & !root_mask);
        let ok = at_root | (unsafe { self.states.get_unchecked(t as usize) }.check == c as u32);
        let ok_mask = 0u32.wrapping_sub(ok as u32);
        ((t & ok_mask) | (st.fail & !ok_mask), ok)
    }

    /// The first (longest) pattern matching at state `s`, or [`NONE`].
    #[inline(always)]
    pub fn out(&self, s: u32) -> u32 {
        // SAFETY: s is a valid state.
        unsafe { self.states.get_unchecked(s as usize) }.out
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
        self.states.capacity() * std::mem::size_of::<State>()
            + self.patterns.capacity() * std::mem::size_of::<Pattern>()
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
            let a = Automaton::build(&refs, &vals);
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
            let a = Automaton::build(&refs, &vals);
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
    fn all_bytes_and_long_chains() {
        let mut pats: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        pats.push(vec![b'a'; 300]);
        pats.push(b"abcabc".to_vec());
        let refs: Vec<&[u8]> = pats.iter().map(|p| p.as_slice()).collect();
        let vals: Vec<(u32, f64)> = (0..refs.len()).map(|k| (k as u32 * 3, 0.0)).collect();
        let a = Automaton::build(&refs, &vals);
        let text: Vec<u8> = [vec![b'a'; 310], b"xabcabcabc\xff\x00".to_vec()].concat();
        assert_eq!(scan(&a, &text), naive(&refs, &text));
    }
}
