//! Min-Cost Encoding (SPEC section 2) and forward maximum matching.
//!
//! `D[n] = 0`; for `i = n-1 .. 0`, `D[i] = min_j c(i, j) + D[j]` over the tokens `x[i:j]` that are
//! not forbidden, ties to the largest `j`; `c(i, j)` is [`crate::cost`]'s, in double precision,
//! added left to right. The scan runs right to left over the reversed-token automaton of
//! [`Vocab`], so the tokens starting at `i` are known exactly when `D[i]` is due. `D` lives in a
//! ring buffer as long as the longest token; the choice at each position is one id and its
//! length. Memory: 6 bytes per input byte (unit flags, choices, lengths) plus fixed buffers.
//!
//! The text is handled in chunks, right to left. For each chunk the automaton walk runs first
//! and records the first match (the longest token) of every position, in several independent
//! lanes (see [`walk`]); then the dynamic program runs over the chunk, prefetching the matches a
//! few positions ahead. At each position the longest token's pattern describes its whole chain
//! (the lengths of the shorter tokens starting there), so a shorter candidate is only looked up
//! when a lower bound of its total, `(1 + p + min ε) + D[j]`, beats the best total so far; by
//! monotone rounding that bound never exceeds the candidate's exact total, so the candidates
//! skipped could not have won. Candidates come longest first, so "ties to the largest j" is a
//! strict `<`.

use crate::automaton::{Automaton, Pattern, NONE};
use crate::cost::{Costs, UnitWindow};
use crate::units::unit_starts;
use crate::vocab::Vocab;
use crate::piece_cache::{count, PieceCache, PieceEntry, PieceKey, PIECE_MAX, PIECE_TOKENS};
#[cfg(test)]
use crate::piece_cache::WAYS;
use std::sync::Arc;

/// Chains with more candidates than this (and tokens too long for the length mask) are read
/// into a flat list (see `long_chain`); prose rarely has more.
const LONG_CHAIN: u32 = 8;
/// The dynamic program prefetches the pattern of the position this far ahead.
const PREFETCH: usize = 16;
/// Bytes of text per walk and dynamic-program round (the walk's buffers hold 8 bytes per byte);
/// smaller in tests, so that short texts cross chunks.
const CHUNK: usize = if cfg!(test) { 1 << 12 } else { 1 << 15 };
/// Independent lanes of the walk, and the shortest lane worth its fix-up.
const LANES: usize = 8;
const LANE_MIN: usize = 32;

/// What decides the cost of a candidate token starting at `i` (see `mce_choices`).
struct Candidates<'a> {
    i: usize,
    units: &'a UnitWindow,
    starts: &'a [u8],
    costs: Costs,
    mask: usize,
}

/// Offers the candidate token `id` = x[i:i+len] (ε(t) `eps`): it becomes the best when its total
/// is strictly smaller (candidates come longest first, so ties keep the larger j).
#[inline(always)]
fn offer(cx: &Candidates<'_>, dist: &[f64], len: u32, id: u32, eps: f64, best: &mut (f64, u32, u32)) {
    let j = cx.i + len as usize;
    // SAFETY: j <= n (matches lie inside the text) and starts has n + 1 entries.
    let class = cx.units.class(j, unsafe { *cx.starts.get_unchecked(j) } != 0);
    let Some(cost) = cx.costs.cost_with(class, eps) else { return };
    // SAFETY: the index is masked to the ring's size.
    let total = cost + unsafe { *dist.get_unchecked(j & cx.mask) };
    if total < best.0 {
        *best = (total, id, len);
    }
}

/// The best candidate `(total, id, len)` at a position whose longest token's chain lengths fit
/// the mask of `pat` (see the module documentation).
#[cfg_attr(not(feature = "phase-profile"), inline(always))]
#[cfg_attr(feature = "phase-profile", inline(never))]
fn best_masked(ac: &Automaton, pat: &Pattern, cx: &Candidates<'_>, lower: (f64, f64), dist: &[f64]) -> (f64, u32, u32) {
    let (free, partial) = cx.units.masks(cx.i);
    let free = free & pat.lens;
    let partial = if cx.costs.partial_allowed() { partial & pat.lens } else { 0 };
    let mut best = (f64::INFINITY, 0u32, 0u32);
    let own = 1u64 << (pat.len - 1);
    if (free | partial) & own != 0 {
        let cost = cx.costs.cost_of(free & own == 0, pat.eps);
        // SAFETY (dist): indices are masked to the ring's size.
        best = (cost + unsafe { *dist.get_unchecked((cx.i + pat.len as usize) & cx.mask) }, pat.id, pat.len);
    }
    #[cfg(test)]
    {
        // How many chain steps below the first match the longest allowed candidate lies.
        let top = 64 - (free | partial).leading_zeros();
        tests::TOP_STEPS.with(|b| b.borrow_mut()[(pat.lens.checked_shr(top).unwrap_or(0).count_ones() as usize).min(2)] += 1);
    }
    let mut rest = (free | partial) & !own;
    let lowers = [lower.0, lower.1];
    let mut q = pat.next;
    while rest != 0 {
        let len = 64 - rest.leading_zeros();
        let bit = 1u64 << (len - 1);
        rest ^= bit;
        let is_partial = free & bit == 0;
        let d = unsafe { *dist.get_unchecked((cx.i + len as usize) & cx.mask) };
        // The bound by index, not by a branch (the class of a candidate is data).
        // SAFETY: the index is 0 or 1.
        if unsafe { *lowers.get_unchecked(is_partial as usize) } + d < best.0 {
            // The chain holds this length (the mask says so) further on: lengths decrease.
            let mut c = ac.pattern(q);
            while c.len != len {
                q = c.next;
                c = ac.pattern(q);
            }
            let total = cx.costs.cost_of(is_partial, c.eps) + d;
            if total < best.0 {
                best = (total, c.id, len);
            }
        }
    }
    best
}

/// The best candidate at a position whose chain is long (a run of spaces, dashes, ...). Along a
/// run the first match repeats, so its chain is read once into the flat list `flat` (for
/// `flat_first`) and reused, instead of following the chain's links at every position: same
/// candidates, same order (longest first), same arithmetic as `offer`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn long_chain(
    ac: &Automaton,
    first: u32,
    flat: &mut Vec<(u32, u32, f64)>,
    by_len: &mut Vec<f64>,
    id_by_len: &mut Vec<u32>,
    flat_first: &mut u32,
    cx: &Candidates<'_>,
    dist: &[f64],
) -> (f64, u32, u32) {
    if *flat_first != first {
        flat.clear();
        let mut p = first;
        while p != NONE {
            let c = ac.pattern(p);
            flat.push((c.len, c.id, c.eps));
            p = c.next;
        }
        let longest = flat.first().map_or(0, |f| f.0 as usize);
        by_len.clear();
        by_len.resize(longest + 1, f64::INFINITY);
        id_by_len.clear();
        id_by_len.resize(longest + 1, 0);
        for &(len, id, eps) in flat.iter() {
            by_len[len as usize] = cx.costs.cost_of(false, eps);
            id_by_len[len as usize] = id;
        }
        *flat_first = first;
    }
    let longest = by_len.len() - 1;
    // Worth it when the lengths are dense enough: the sums cost about a third of a walked
    // candidate each (runs of spaces: 84 tokens over 128 lengths in o200k_base; dashes, 28
    // over 112, stay with the walk).
    if flat.len() * 3 >= longest {
        if let Some(r) = whole_unit_run(by_len, id_by_len, cx, dist) {
            return r;
        }
    }
    let mut best = (f64::INFINITY, 0u32, 0u32);
    for &(len, id, eps) in flat.iter() {
        offer(cx, dist, len, id, eps, &mut best);
    }
    best
}

/// The best candidate when every candidate at `cx.i` is free (inside the first unit or whole
/// units only: inside a run of spaces, of CJK characters, ...); None otherwise. Then each costs
/// (1 + ε) + D[j]: the totals are a sum of two arrays, by length, over the window
/// D[i+1 ..= i+longest] (contiguous thanks to the ring's mirror). The smallest total, then the
/// longest candidate reaching it (ties go to the largest j), is the choice the walk over the
/// chain makes.
// Inlined into its one caller: returned through memory, its Option cost a store-forwarding
// stall per position.
#[inline(always)]
fn whole_unit_run(by_len: &[f64], id_by_len: &[u32], cx: &Candidates<'_>, dist: &[f64]) -> Option<(f64, u32, u32)> {
    let i = cx.i;
    let longest = by_len.len() - 1;
    if !cx.units.free_up_to(i, longest) {
        return None;
    }
    let w0 = (i + 1) & cx.mask;
    let window = &dist[w0..w0 + longest];
    let costs = &by_len[1..];
    let m = min_of_sums(costs, window);
    (0..longest).rev().find(|&k| costs[k] + window[k] == m).map(|k| (m, id_by_len[k + 1], k as u32 + 1))
}

/// The smallest `a[k] + b[k]` (each sum rounded as usual; ∞ for empty input). Four independent
/// minima, so that the loop is not one long dependency chain.
#[inline]
fn min_of_sums(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX (checked just above).
        return unsafe { min_of_sums_avx(a, b) };
    }
    min_of_sums_scalar(a, b)
}

/// [`min_of_sums`] four sums at a time: the same additions (one rounding each), so the same
/// minimum.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn min_of_sums_avx(a: &[f64], b: &[f64]) -> f64 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let inf = _mm256_set1_pd(f64::INFINITY);
    let mut m = [inf; 4];
    let mut k = 0;
    // SAFETY (loads): k + 16 <= n, then k + 4 <= n, within both slices.
    while k + 16 <= n {
        for (l, ml) in m.iter_mut().enumerate() {
            let s = _mm256_add_pd(_mm256_loadu_pd(pa.add(k + 4 * l)), _mm256_loadu_pd(pb.add(k + 4 * l)));
            *ml = _mm256_min_pd(s, *ml);
        }
        k += 16;
    }
    while k + 4 <= n {
        m[0] = _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(pa.add(k)), _mm256_loadu_pd(pb.add(k))), m[0]);
        k += 4;
    }
    let v = _mm256_min_pd(_mm256_min_pd(m[0], m[1]), _mm256_min_pd(m[2], m[3]));
    let mut lanes = [0.0f64; 4];
    _mm256_storeu_pd(lanes.as_mut_ptr(), v);
    let mut best = lanes[0].min(lanes[1]).min(lanes[2].min(lanes[3]));
    for (x, y) in a[k..n].iter().zip(&b[k..n]) {
        let s = x + y;
        if s < best {
            best = s;
        }
    }
    best
}

/// [`min_of_sums`] without vector instructions.
#[inline]
fn min_of_sums_scalar(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut m = [f64::INFINITY; 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..4 {
            let s = x[l] + y[l];
            m[l] = if s < m[l] { s } else { m[l] };
        }
    }
    let mut best = m[0].min(m[1]).min(m[2].min(m[3]));
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        let s = x + y;
        if s < best {
            best = s;
        }
    }
    best
}

/// The automaton walk over `text[a..b]`, right to left, from state `from` (the state after
/// consuming `text[b]`, or the root at the end of the text): `outs[k]` becomes the first match
/// (longest token) at position `a + k`; returns the state after consuming `text[a]`.
///
/// A long range is cut into [`LANES`] segments walked at the same time, so that their chains of
/// dependent memory loads overlap. Every lane but the rightmost starts from the root and may be
/// wrong for its first positions (until the state reflects the longest match it has room for);
/// each is then fixed by continuing the exact walk from its right neighbour's left end until the
/// two agree, from where on they agree (the transitions are deterministic). The states and
/// matches are exactly those of one walk from the end. The lanes advance by branch-free steps
/// ([`Automaton::step`]): measured on CNF-250k, 8 such lanes walk 1.4–1.7x faster than 4 lanes
/// of `next` (whose per-byte "transition or failure" branch mispredicts and discards the other
/// lanes' loads in flight), 16 lanes slower than 8.
///
/// With a dense root (every vocabulary's automaton) the lanes step by
/// [`Automaton::step_dense`], which has no root case.
#[cfg_attr(feature = "phase-profile", inline(never))]
fn walk(ac: &Automaton, text: &[u8], a: usize, b: usize, from: u32, outs: &mut Vec<u32>, states: &mut Vec<u32>) -> u32 {
    if ac.dense_root() {
        walk_lanes::<LANES, true>(ac, text, a, b, from, outs, states)
    } else {
        walk_lanes::<LANES, false>(ac, text, a, b, from, outs, states)
    }
}

/// [`walk`] with `LANES` lanes, stepping by [`Automaton::step_dense`] if `DENSE` (the root must
/// then be dense) else by [`Automaton::step`].
fn walk_lanes<const LANES: usize, const DENSE: bool>(
    ac: &Automaton,
    text: &[u8],
    a: usize,
    b: usize,
    from: u32,
    outs: &mut Vec<u32>,
    states: &mut Vec<u32>,
) -> u32 {
    let n = b - a;
    let text = &text[a..b];
    outs.clear();
    outs.resize(n, 0);
    if n < LANES * LANE_MIN {
        let mut s = from;
        for k in (0..n).rev() {
            s = ac.next(s, text[k]);
            outs[k] = ac.out(s);
        }
        return s;
    }
    states.clear();
    states.resize(n, 0);
    let seg = n / LANES;
    let r = n - LANES * seg;
    // Lane l walks text[lo[l]..lo[l] + left[l]] right to left (lane 0 also covers the first r
    // positions), all lanes one step each in turn. A step either consumes a byte or follows
    // one failure link (`Automaton::step`, no branch), so lanes advance at their own pace: a
    // lane's position k is written at every step, last by the step that consumes text[k].
    let lo: [usize; LANES] = std::array::from_fn(|l| if l == 0 { 0 } else { r + l * seg });
    let mut left: [usize; LANES] = std::array::from_fn(|l| r + (l + 1) * seg - lo[l]);
    let mut st = [ac.root(); LANES];
    st[LANES - 1] = from;
    loop {
        // Each lane has at least m bytes left, and a step consumes at most one.
        let m = left.iter().copied().min().unwrap_or(0);
        if m == 0 {
            break;
        }
        for _ in 0..m {
            for l in 0..LANES {
                let k = lo[l] + left[l] - 1;
                // SAFETY: k < lo[l] + (bytes of lane l) <= n, the length of text, outs and
                // states (left[l] >= 1 during these m rounds).
                unsafe {
                    let c = *text.get_unchecked(k);
                    let (s, consumed) = if DENSE { ac.step_dense(st[l], c) } else { ac.step(st[l], c) };
                    *states.get_unchecked_mut(k) = s;
                    st[l] = s;
                    left[l] -= consumed as usize;
                }
            }
        }
    }
    // The lanes not finished: one at a time (from a state on a failure link, `next` consumes
    // the pending byte as the steps would have).
    for l in 0..LANES {
        let mut s = st[l];
        for k in (lo[l]..lo[l] + left[l]).rev() {
            s = ac.next(s, text[k]);
            states[k] = s;
        }
    }
    for l in (0..LANES - 1).rev() {
        // states[hi] is exact: lane l + 1 started exact or has been fixed.
        let hi = r + (l + 1) * seg;
        let lo = if l == 0 { 0 } else { r + l * seg };
        let mut s = states[hi];
        for k in (lo..hi).rev() {
            s = ac.next(s, text[k]);
            if states[k] == s {
                break;
            }
            states[k] = s;
        }
    }
    // The matches, read after the walk: independent loads (the walk's own chain of dependent
    // loads touches only the 8-byte states).
    for (o, &s) in outs.iter_mut().zip(states.iter()) {
        *o = ac.out(s);
    }
    states[0]
}

pub use crate::cost::token_preference;
pub use crate::options::{Algorithm, Options};

/// A vocabulary with its encoding options.
pub struct Encoder {
    /// Shared by the encoders that differ only in their options.
    vocab: Arc<Vocab>,
    options: Options,
    costs: Costs,
    /// Solved short pieces, shared by every thread that encodes with this encoder (made with
    /// the first short piece; see [`PieceCache`]).
    pub(crate) cache: crate::once_box::OnceBox<PieceCache>,
}

/// Pieces looked up ahead of their turn. Larger batches let more of the pieces missing from
/// the cache (en ~5%) walk the automaton together (`walk_missing`): in-process interleaved CPU
/// A/B on o200k_base, primed caches, 8 → 16 → 32 → 64 each 1.02–1.05x (benches/README.md).
const PIECE_BATCH: usize = 64;

/// Makes room for `n` items in `v`: a new allocation of exactly `n` (contents dropped), advised
/// to huge pages when large, if `v` has less. A text of megabytes needs per-byte buffers of
/// tens of megabytes, allocated anew for each such text (`Scratch::shrink`): with huge pages
/// their first touch faults once per 2 MiB instead of once per 4 KiB.
fn reserve_huge<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        *v = Vec::with_capacity(n);
        crate::mem::advise_huge(v);
    }
}

/// Reusable buffers for one thread.
#[derive(Default)]
pub struct Scratch {
    /// The text of `Encoder::encode_filled`.
    text: Vec<u8>,
    starts: Vec<u8>,
    /// Bit `i % 64` of word `i / 64`: whether position `i` is a cut (0, or no token spans the
    /// byte pair `i - 1, i`); see `Encoder::cuts`.
    cuts: Vec<u64>,
    choice: Vec<u32>,
    /// The length of the chosen token at each position (0: 256 bytes or more, look it up).
    lens: Vec<u8>,
    dist: Vec<f64>,
    /// The walk's results for one chunk: first match and state of each position.
    outs: Vec<u32>,
    states: Vec<u32>,
    /// The candidates of the last long chain, flat (see `long_chain`).
    flat: Vec<(u32, u32, f64)>,
    /// The same candidates by length: `1 + ε` (∞ for lengths without a token) and id.
    by_len: Vec<f64>,
    id_by_len: Vec<u32>,
    /// The buffers of the run shortcut (see `crate::runs`).
    runs: crate::runs::RunScratch,
}

/// Runs `f` with this thread's scratch buffers, which persist across calls; a fresh set when
/// they are already in use (a nested call). Buffers that grew beyond 4 MiB of input are freed
/// afterwards.
pub fn with_thread_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
    }
    let mut f = Some(f);
    let r = SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut scratch) => {
            let r = (f.take().expect("called once"))(&mut scratch);
            scratch.shrink(1 << 22);
            Some(r)
        }
        Err(_) => None,
    });
    match r {
        Some(r) => r,
        None => (f.take().expect("called once"))(&mut Scratch::default()),
    }
}

impl Scratch {
    /// `choice` and `lens` made at least `n` long (the per-position result of a pass over `n`
    /// bytes), on huge pages when large (`reserve_huge`). They are not cleared: a pass writes
    /// every position of the path it leaves (the replay of a cached piece, the programs and the
    /// run shortcut write each token's start) and only those are read, so zeroing the rest was
    /// a write of 5 bytes per byte of text for nothing.
    fn reset_paths(&mut self, n: usize) {
        if self.choice.len() < n {
            reserve_huge(&mut self.choice, n);
            self.choice.resize(n, 0);
        }
        if self.lens.len() < n {
            reserve_huge(&mut self.lens, n);
            self.lens.resize(n, 0);
        }
    }

    /// The token chosen at every position and its length (0: look it up) after the last pass.
    #[cfg(test)]
    pub(crate) fn paths(&self) -> (&[u32], &[u8]) {
        (&self.choice, &self.lens)
    }

    /// Frees the buffers when they grew beyond `max_bytes` of input (after a huge text), so
    /// an idle thread does not keep hundreds of megabytes.
    pub fn shrink(&mut self, max_bytes: usize) {
        if self.starts.capacity() > max_bytes {
            *self = Scratch::default();
        }
    }
}

impl Encoder {
    pub fn new(vocab: Vocab, options: Options) -> Self {
        Self::shared(Arc::new(vocab), options)
    }

    fn shared(vocab: Arc<Vocab>, options: Options) -> Self {
        let costs = Costs::new(options.boundary_penalty, options.token_preference);
        Encoder { vocab, options, costs, cache: crate::once_box::OnceBox::new() }
    }

    /// The same vocabulary (and automaton, shared, not copied) with other options: only the
    /// costs change (and the piece cache is its own).
    pub fn with_options(&self, options: Options) -> Self {
        Self::shared(Arc::clone(&self.vocab), options)
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    pub fn options(&self) -> Options {
        self.options
    }

    /// Encodes `text` (any bytes), appending ids to `out`.
    pub fn encode_into(&self, text: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        if self.options.algorithm == Algorithm::Mce {
            // Room for the sentinel too (see `mce_choices`).
            reserve_huge(&mut scratch.starts, text.len() + 1);
            unit_starts(text, &mut scratch.starts);
        }
        self.encode_annotated(text, scratch, out);
    }

    /// `encode_into` of the text that `fill(buf, starts)` gives, borrowed (`Some`) or written
    /// into `buf` (`None`), and of its unit starts, which it writes to `starts` exactly as [`unit_starts`] computes them (a caller that
    /// knows the characters, e.g. of a Python `str`, annotates them as it writes their UTF-8,
    /// instead of a second pass that validates and decodes them again). An `Err` of `fill` is
    /// returned with nothing encoded.
    /// `size_hint`: about how many bytes the text has (buffers of that size are made ready,
    /// on huge pages when large, as `encode_into` does).
    pub fn encode_filled<'t, E>(
        &self,
        scratch: &mut Scratch,
        out: &mut Vec<u32>,
        size_hint: usize,
        fill: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> Result<Option<&'t [u8]>, E>,
    ) -> Result<(), E> {
        // Room for the sentinel too (see `mce_choices`).
        reserve_huge(&mut scratch.starts, size_hint + 1);
        let mut buf = std::mem::take(&mut scratch.text);
        let r = fill(&mut buf, &mut scratch.starts);
        if let Ok(given) = r {
            let text = given.unwrap_or(&buf);
            if !text.is_empty() {
                assert_eq!(scratch.starts.len(), text.len(), "one unit-start flag per byte");
                self.encode_annotated(text, scratch, out);
            }
        }
        scratch.text = buf;
        r.map(|_| ())
    }

    /// `encode_into` with `scratch.starts` holding the unit starts of `text` (not empty).
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn encode_annotated(&self, text: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
        match self.options.algorithm {
            Algorithm::Mce => {
                self.mce_choices(text, scratch);
            }
            Algorithm::Fmm => self.fmm_choices(text, scratch),
        }
        let mut i = 0usize;
        while i < text.len() {
            let id = scratch.choice[i];
            out.push(id);
            let l = scratch.lens[i] as usize;
            i += if l != 0 { l } else { self.vocab.token_len(id) };
        }
    }

    /// Encodes `text` into a new vector.
    pub fn encode(&self, text: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        with_thread_scratch(|scratch| self.encode_into(text, scratch, &mut out));
        out
    }

    /// Fills `scratch.choice[i]` and `scratch.lens[i]` with the token chosen at every position
    /// `i` by the MCE program (see the module documentation). The randomized comparisons with
    /// the reference DP check the choices.
    ///
    /// The text is cut at the positions no token spans (a byte pair that occurs inside no
    /// token): the program never crosses them, so each piece between two cuts is solved from
    /// `D` at its right end, right to left. Short pieces go through the piece cache (see
    /// [`PieceCache`]), long ones through the walk and the program of [`Self::long_piece`].
    fn mce_choices(&self, text: &[u8], scratch: &mut Scratch) -> f64 {
        let n = text.len();
        let ring = (self.vocab.max_len() + 1).next_power_of_two();
        scratch.dist.clear();
        // The ring of D and its mirror: D[q] is at q & mask and at (q & mask) + ring, so that
        // any window of up to `ring` positions is one contiguous slice.
        scratch.dist.resize(2 * ring, 0.0);
        scratch.reset_paths(n);
        // Sentinel: the end of the text closes the last unit.
        scratch.starts.push(1);
        self.cuts(text, &mut scratch.cuts);
        // The piece cache is looked up (or made: 16 MiB to allocate and fill) with the first
        // short piece, so that a text of long pieces only (a run of spaces) does without it.
        let mut cache: Option<&PieceCache> = None;
        // D[q] at the right end of the current piece (D[n] = 0).
        let mut x = 0.0f64;
        // The pieces, found (and their cache slots prefetched) a batch at a time, one batch
        // ahead of the batch being solved, so that the cache's memory latency overlaps the
        // work on a whole batch.
        // Two batches, used in turn (the one being solved and the one ahead), by index: swapping
        // the arrays would copy both (3.5 KiB each) once per batch.
        let mut batches = [[PieceKey::default(); PIECE_BATCH]; 2];
        let mut cur = 0usize;
        // Only the pieces `walk_missing` walks are read, and it writes all their positions.
        let mut walks = [[NONE; PIECE_MAX]; PIECE_BATCH];
        let (mut nb, mut end) = self.next_batch(text, &scratch.starts, &scratch.cuts, None, n, &mut batches[0]);
        while nb > 0 {
            let (lo, hi) = batches.split_at_mut(1);
            let (batch, ahead) = if cur == 0 { (&lo[0], &mut hi[0]) } else { (&hi[0], &mut lo[0]) };
            if cache.is_none() && batch[..nb].iter().any(|k| k.short) {
                cache = Some(self.piece_cache());
            }
            let (na, after) = if end > 0 { self.next_batch(text, &scratch.starts, &scratch.cuts, cache, end, ahead) } else { (0, 0) };
            // The short pieces missing from the cache are walked together (see `walk_missing`).
            let walked = cache.map_or(0, |c| self.walk_missing(text, &batch[..nb], c, &mut walks));
            for (m, k) in batch[..nb].iter().enumerate() {
                x = if let (true, Some(c)) = (k.short, cache) {
                    self.short_piece(text, k, x, (walked >> m & 1 != 0).then_some(&walks[m]), c, scratch)
                } else {
                    self.long_piece(text, k.p, k.q, x, scratch)
                };
            }
            cur ^= 1;
            (nb, end) = (na, after);
        }
        scratch.starts.pop();
        x
    }

    /// Counts of the piece cache's events so far (`cache-stats` feature): replays, solves,
    /// busy and torn reads, lost writer races, inserts, promotions; `None` before the cache is
    /// made.
    #[cfg(feature = "cache-stats")]
    pub fn piece_cache_stats(&self) -> Option<[u64; 7]> {
        Some(self.cache.get()?.stats.counts())
    }

    /// The piece cache of this encoder (made on first use).
    #[inline]
    pub(crate) fn piece_cache(&self) -> &PieceCache {
        self.cache.get_or_init(PieceCache::new)
    }

    /// D[0] of the MCE program over `text` (non-empty), with the choices left in `scratch`
    /// (see [`Scratch::paths`]): for the tests that compare the program's costs, not only its
    /// output.
    #[cfg(test)]
    pub(crate) fn mce_cost(&self, text: &[u8], scratch: &mut Scratch) -> f64 {
        reserve_huge(&mut scratch.starts, text.len() + 1);
        unit_starts(text, &mut scratch.starts);
        self.mce_choices(text, scratch)
    }

    /// The program over the piece `text[p..q]` (`q` a cut or the end of the text, so the walk
    /// starts from the root there and no candidate ends past `q`) given `D[q] = x`; returns
    /// `D[p]`. The walk runs a chunk ahead of the program (see [`walk`]).
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn long_piece(&self, text: &[u8], p: usize, q: usize, x: f64, scratch: &mut Scratch) -> f64 {
        let ring = scratch.dist.len() / 2;
        let mask = ring - 1;
        let Scratch { starts, choice, lens, dist, outs, states, flat, by_len, id_by_len, runs, .. } = scratch;
        let (starts, dist, choice, lens) = (&starts[..], &mut dist[..], &mut choice[..], &mut lens[..]);
        dist[q & mask] = x;
        dist[(q & mask) + ring] = x;
        let ac = self.vocab.automaton();
        let costs = self.costs;
        // Lower bounds of c(i, j) for free and partial candidates (ε >= the smallest ε).
        let lower = (costs.lower_bound(false, ac.min_eps()), costs.lower_bound(true, ac.min_eps()));
        // Units past q do not matter: no candidate ends past q.
        let mut units = UnitWindow::ending_at(q, starts[q] != 0);
        // The first match whose chain `flat` holds.
        let mut flat_first = NONE;
        let mut state = ac.root();
        let mut end = q;
        // Long runs of one byte: see `crate::runs` (its interiors skip the walk and the program).
        let (shortcut, w) = (crate::runs::enabled(), self.vocab.max_len());
        while end > p {
            let mut start = end.saturating_sub(CHUNK).max(p);
            if shortcut {
                if let Some(a) = crate::runs::interior_at(text, starts, p, q, end, w) {
                    crate::runs::solve(ac, costs, text, w, a, end, dist, choice, lens, runs);
                    state = crate::runs::state_at(ac, text, a, w, q);
                    crate::runs::replay_units(&mut units, starts, a, end);
                    end = a;
                    continue;
                }
                if let Some(e) = crate::runs::next_edge(text, p, q, start, end, w) {
                    start = e;
                }
            }
            state = walk(ac, text, start, end, state, outs, states);
            let outs = &outs[..];
            for k in (0..end - start).rev() {
                let i = start + k;
                // SAFETY (all get_unchecked below): k < outs.len(); i < n and starts has n + 1
                // entries; j = i + len <= q because matches lie inside the piece; indices into
                // dist are masked.
                if k >= PREFETCH {
                    crate::mem::prefetch(ac.pattern_ptr(unsafe { *outs.get_unchecked(k - PREFETCH) }));
                    // And the second pattern of the chain of the position half as far ahead
                    // (its first pattern has arrived by now): the shorter candidates are
                    // looked up there first (`best_masked`), a load on the program's critical
                    // path otherwise (a pointer chase into the pattern table). NONE is fine:
                    // a prefetch of any address is harmless.
                    let ahead = unsafe { *outs.get_unchecked(k - PREFETCH / 2) };
                    crate::mem::prefetch(ac.pattern_ptr(ac.pattern(ahead).next));
                }
                let first = unsafe { *outs.get_unchecked(k) };
                units.enter(unsafe { *starts.get_unchecked(i) } != 0, unsafe { *starts.get_unchecked(i + 1) } != 0);
                let pat = ac.pattern(first);
                let cx = Candidates { i, units: &units, starts, costs, mask };
                let best = if pat.lens != 0 {
                    best_masked(ac, pat, &cx, lower, dist)
                } else if pat.chain > LONG_CHAIN {
                    // A long chain (a run of spaces, dashes, ...): see `long_chain`.
                    long_chain(ac, first, flat, by_len, id_by_len, &mut flat_first, &cx, dist)
                } else {
                    let mut best = (f64::INFINITY, 0u32, 0u32);
                    let mut c = first;
                    while c != NONE {
                        let pc = ac.pattern(c);
                        c = pc.next;
                        offer(&cx, dist, pc.len, pc.id, pc.eps, &mut best);
                    }
                    best
                };
                // The one-byte token is never forbidden, so best is finite.
                unsafe {
                    *dist.get_unchecked_mut(i & mask) = best.0;
                    *dist.get_unchecked_mut((i & mask) + ring) = best.0;
                    *choice.get_unchecked_mut(i) = best.1;
                    *lens.get_unchecked_mut(i) = if best.2 < 256 { best.2 as u8 } else { 0 };
                }
                units.leave(i);
            }
            end = start;
        }
        dist[p & mask]
    }

    /// Fills `cuts` with the cut flags of `text` (see [`Scratch`]): one pass without branches,
    /// so that finding a piece's start is a bit scan, not a byte loop that mispredicts at the
    /// end of every piece.
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn cuts(&self, text: &[u8], cuts: &mut Vec<u64>) {
        let n = text.len();
        cuts.clear();
        cuts.resize(n.div_ceil(64), 0);
        let vocab = &*self.vocab;
        for (w, word) in cuts.iter_mut().enumerate() {
            let lo = (w << 6).max(1);
            let hi = ((w + 1) << 6).min(n);
            let mut bits = 0u64;
            for i in lo..hi {
                // SAFETY: 1 <= i < n.
                let spanned = vocab.pair_in_token(unsafe { *text.get_unchecked(i - 1) }, unsafe { *text.get_unchecked(i) });
                bits |= (!spanned as u64) << (i & 63);
            }
            *word = bits;
        }
        cuts[0] |= 1;
    }

    /// Up to [`PIECE_BATCH`] pieces left of `end` (> 0) into `out`, right to left, with the
    /// cache slots of the short ones prefetched (when `cache` is given: ready for this encoder); returns how many and where the last one starts.
    #[cfg_attr(not(feature = "phase-profile"), inline(always))]
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn next_batch(&self, text: &[u8], starts: &[u8], cuts: &[u64], cache: Option<&PieceCache>, mut end: usize, out: &mut [PieceKey; PIECE_BATCH]) -> (usize, usize) {
        let mut nb = 0;
        while nb < PIECE_BATCH && end > 0 {
            let k = self.next_piece(text, starts, cuts, end);
            if let (true, Some(cache)) = (k.short, cache) {
                cache.prefetch(&k);
            }
            out[nb] = k;
            nb += 1;
            end = k.p;
        }
        (nb, end)
    }

    /// The piece that ends at `q` (the cut or text position left of which it starts) with its
    /// cache key when it is short.
    #[inline(always)]
    fn next_piece(&self, text: &[u8], starts: &[u8], cuts: &[u64], q: usize) -> PieceKey {
        // The last cut before q (bit 0 is always set).
        let mut w = (q - 1) >> 6;
        let mut word = cuts[w] & (u64::MAX >> (63 - ((q - 1) & 63)));
        while word == 0 {
            w -= 1;
            word = cuts[w];
        }
        let p = (w << 6) + 63 - word.leading_zeros() as usize;
        let len = q - p;
        if len > PIECE_MAX {
            return PieceKey { p, q, short: false, ..PieceKey::default() };
        }
        let key = if p + 16 <= text.len() {
            u128::from_le_bytes(text[p..p + 16].try_into().expect("16 bytes"))
        } else {
            let mut b = [0u8; 16];
            b[..len].copy_from_slice(&text[p..q]);
            u128::from_le_bytes(b)
        };
        let key = if len == 16 { key } else { key & ((1u128 << (8 * len)) - 1) };
        // Start flags are 0 or 1: a multiply gathers eight of them into a byte.
        let gather = |w: u64| (w.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32;
        let bits = if p + 16 <= starts.len() {
            let w = u128::from_le_bytes(starts[p..p + 16].try_into().expect("16 bytes"));
            gather(w as u64) | gather((w >> 64) as u64) << 8
        } else {
            starts[p..].iter().enumerate().fold(0u32, |b, (k, &s)| b | (s as u32) << k)
        };
        // Flags p..=q: bit 16 (byte p + 16) only for a piece of 16 bytes.
        let bits = if len == 16 { bits | (starts[q] as u32) << 16 } else { bits & ((1u32 << (len + 1)) - 1) };
        PieceKey { p, q, short: true, key, starts: bits, hash: PieceCache::hash(key, len, bits) }
    }

    /// Walks the short pieces of `batch` that the cache does not hold (bit `m` of the result set
    /// for `batch[m]`), filling `walks[m][i - p]` with the first match at each position `i` of
    /// the piece: the walk from the root at `q` that [`Self::piece_program`] needs. Each walk is
    /// a chain of dependent memory loads; the walks of different pieces are independent, so
    /// they advance in turn, one byte each, and their latencies overlap. A piece that an
    /// earlier piece of the batch will put into the cache is walked for nothing; one whose
    /// entry an earlier piece evicts is walked by `short_piece` itself.
    #[cfg_attr(not(feature = "phase-profile"), inline(always))]
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn walk_missing(&self, text: &[u8], batch: &[PieceKey], cache: &PieceCache, walks: &mut [[u32; PIECE_MAX]; PIECE_BATCH]) -> u64 {
        let ac = self.vocab.automaton();
        let mut lanes = [(0usize, 0usize, 0usize); PIECE_BATCH];
        let mut nl = 0;
        let mut longest = 0;
        let mut walked = 0u64;
        for (m, k) in batch.iter().enumerate() {
            if k.short && !cache.seems_held(k) {
                lanes[nl] = (m, k.p, k.q);
                nl += 1;
                longest = longest.max(k.q - k.p);
                walked |= 1 << m;
            }
        }
        let mut st = [ac.root(); PIECE_BATCH];
        for t in 0..longest {
            for (l, &(m, p, q)) in lanes[..nl].iter().enumerate() {
                if t < q - p {
                    let i = q - 1 - t;
                    st[l] = ac.next(st[l], text[i]);
                    let first = ac.out(st[l]);
                    crate::mem::prefetch(ac.pattern_ptr(first));
                    walks[m][i - p] = first;
                }
            }
        }
        // The second pattern of each chain (the first has had the walk's time to arrive):
        // `piece_program` reads every candidate, each a load into the pattern table.
        for &(m, p, q) in &lanes[..nl] {
            for &first in &walks[m][..q - p] {
                crate::mem::prefetch(ac.pattern_ptr(ac.pattern(first).next));
            }
        }
        walked
    }

    /// A piece of at most [`PIECE_MAX`] bytes: replayed from the cache when it holds the piece
    /// (same bytes, same unit starts) and its margin covers `x` = D[q]; otherwise solved by
    /// [`Self::piece_program`] (from the walk `walk` when given) and remembered. Returns `D[p]`.
    #[cfg_attr(not(feature = "phase-profile"), inline(always))]
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn short_piece(&self, text: &[u8], k: &PieceKey, x: f64, walk: Option<&[u32; PIECE_MAX]>, cache: &PieceCache, scratch: &mut Scratch) -> f64 {
        let (p, q) = (k.p, k.q);
        let found = cache.find(k);
        let hit = found.filter(|f| x < f.x_max());
        #[cfg(test)]
        tests::BRANCHES.with(|b| b.borrow_mut()[usize::from(hit.is_some()) * 2 + usize::from(walk.is_some())] += 1);
        #[cfg(test)]
        tests::WAY_HITS.with(|b| b.borrow_mut()[hit.map_or(WAYS, |f| f.way)] += 1);
        if let Some(e) = hit {
            count!(cache, hits);
            if e.way != 0 {
                // Least recently used replacement: the hit moves first in its set.
                cache.promote(k, &e);
            }
            // The cached choices are the program's for this D[q] (see PieceCache); D[p] is
            // their costs added right to left onto x, as the program adds them.
            let mut d = x;
            let mut pos = q;
            for m in (0..e.ntok()).rev() {
                let l = e.tlen(m);
                pos -= l;
                // c(i, j) + D[j], written as the program writes it (the sum is the same).
                #[allow(clippy::assign_op_pattern)]
                {
                    d = self.costs.cost_of(e.partial(m), token_preference(e.id(m))) + d;
                }
                scratch.choice[pos] = e.id(m);
                scratch.lens[pos] = l as u8;
            }
            return d;
        }
        count!(cache, misses);
        let mut own = [NONE; PIECE_MAX];
        let walk = match walk {
            Some(w) => w,
            None => {
                let ac = self.vocab.automaton();
                let mut state = ac.root();
                for i in (p..q).rev() {
                    state = ac.next(state, text[i]);
                    own[i - p] = ac.out(state);
                }
                &own
            }
        };
        let (d, entry) = self.piece_program(p, q, x, walk, scratch);
        if let Some(entry) = entry {
            cache.insert(k, &entry);
        }
        d
    }

    /// The program over a short piece (see [`Self::long_piece`]) with every candidate walked,
    /// keeping at each position the second-best total too; returns `D[p]` and, when the choices
    /// along the piece's path can be reused for other values of `D[q]`, the cache entry.
    ///
    /// Reuse is safe when every decision on the path wins by more than rounding can move it.
    /// With `L` the piece length, `u = 2^-53` and `S` the largest total involved, each total is
    /// within `(L + 1) u S` of its value in exact arithmetic (at most `L + 1` roundings, each of
    /// at most `u S`); in exact arithmetic, changing `D[q]` from `x` to `x'` shifts every total
    /// by `x' - x` and changes no decision. So if the smallest gap `g` between a path decision
    /// and its runner-up here satisfies `g > 2 (L + 1) u (S + S')`, with `S' = S - x + x'`, the
    /// program makes the same decisions at `x'`. The entry stores the largest such `x'` with a
    /// factor 2 of slack; a gap of 0 (a tie decided by the tie rule) is never reused.
    ///
    /// `walk[i - p]` is the first match at `i` of the walk from the root at `q`.
    #[cfg_attr(feature = "phase-profile", inline(never))]
    fn piece_program(&self, p: usize, q: usize, x: f64, walk: &[u32; PIECE_MAX], scratch: &mut Scratch) -> (f64, Option<PieceEntry>) {
        let ac = self.vocab.automaton();
        let costs = self.costs;
        let starts = &scratch.starts[..];
        let len = q - p;
        let mut d = [0f64; PIECE_MAX + 1];
        let mut second = [f64::INFINITY; PIECE_MAX];
        let mut partial = [false; PIECE_MAX];
        d[len] = x;
        let mut units = UnitWindow::ending_at(q, starts[q] != 0);
        for i in (p..q).rev() {
            units.enter(starts[i] != 0, starts[i + 1] != 0);
            let (mut best, mut id, mut blen, mut bpart) = (f64::INFINITY, 0u32, 0u32, false);
            let mut sec = f64::INFINITY;
            let mut c = walk[i - p];
            while c != NONE {
                let pc = ac.pattern(c);
                c = pc.next;
                let j = i + pc.len as usize;
                let class = units.class(j, starts[j] != 0);
                let Some(cost) = costs.cost_with(class, pc.eps) else { continue };
                let total = cost + d[j - p];
                if total < best {
                    sec = best;
                    (best, id, blen, bpart) = (total, pc.id, pc.len, class == crate::cost::Crossing::Partial);
                } else if total < sec {
                    sec = total;
                }
            }
            d[i - p] = best;
            second[i - p] = sec;
            partial[i - p] = bpart;
            scratch.choice[i] = id;
            scratch.lens[i] = blen as u8;
            units.leave(i);
        }
        let mut entry = PieceEntry { ntok: 0, partial: 0, tlen: [0; PIECE_TOKENS], x_max: f64::NEG_INFINITY, ids: [0; PIECE_TOKENS] };
        let (mut gap, mut top) = (f64::INFINITY, 0.0f64);
        let mut pos = p;
        while pos < q {
            let m = entry.ntok as usize;
            if m == PIECE_TOKENS {
                return (d[0], None);
            }
            let k = pos - p;
            entry.ids[m] = scratch.choice[pos];
            entry.tlen[m] = scratch.lens[pos];
            entry.partial |= (partial[k] as u8) << m;
            entry.ntok += 1;
            gap = gap.min(second[k] - d[k]);
            top = top.max(d[k]);
            if second[k].is_finite() {
                top = top.max(second[k]);
            }
            pos += scratch.lens[pos] as usize;
        }
        if gap == f64::INFINITY {
            entry.x_max = f64::INFINITY;
        } else {
            // x' < g / (4 (L + 1) u) - 2 S + x, less a little for the rounding of this bound.
            let u = f64::EPSILON / 2.0;
            let bound = gap / (4.0 * (len as f64 + 1.0) * u) - 2.0 * top + x;
            entry.x_max = bound - 1e-9 * (bound.abs() + 2.0 * top + x.abs() + 1.0);
            if entry.x_max.is_nan() || entry.x_max <= 0.0 {
                return (d[0], None);
            }
        }
        (d[0], Some(entry))
    }

    /// Fills `scratch.choice[i]` and `scratch.lens[i]` with the longest token starting at every
    /// position.
    fn fmm_choices(&self, text: &[u8], scratch: &mut Scratch) {
        let n = text.len();
        scratch.reset_paths(n);
        let choice = &mut scratch.choice[..];
        let lens = &mut scratch.lens[..];
        let ac = self.vocab.automaton();
        let mut state = ac.root();
        for i in (0..n).rev() {
            state = ac.next(state, text[i]);
            // The first pattern is the longest; every byte is a token, so there is one.
            let p = ac.pattern(ac.out(state));
            choice[i] = p.id;
            lens[i] = if p.len < 256 { p.len as u8 } else { 0 };
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The boundary class of SPEC section 2 written out directly (independent of
    /// `crate::cost`): `Some(false)` no penalty, `Some(true)` λ, `None` forbidden.
    fn boundary(starts: &[u8], w: &[u32], i: usize, j: usize) -> Option<bool> {
        let u = w[j - 1] - w[i] + 1;
        let a = starts[i] != 0 && (j == starts.len() || starts[j] != 0);
        if u == 1 || a {
            Some(false)
        } else if u == 2 {
            Some(true)
        } else {
            None
        }
    }

    /// The unit index of every byte (`w[i]` of SPEC section 2).
    fn unit_indices(starts: &[u8]) -> Vec<u32> {
        let mut u = 0u32;
        starts.iter().enumerate().map(|(i, &s)| {
            if s != 0 && i > 0 {
                u += 1;
            }
            u
        }).collect()
    }

    /// Tiny deterministic generator (xorshift) so the tests need no extra crates (the tests of
    /// `runs` use it too).
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The dynamic program written out directly from SPEC section 2, O(n * L).
    pub(crate) fn reference(tokens: &[(u32, Vec<u8>)], text: &[u8], opt: Options) -> Vec<u32> {
        let n = text.len();
        let index: std::collections::HashMap<&[u8], u32> = tokens.iter().map(|t| (t.1.as_slice(), t.0)).collect();
        let find = |s: &[u8]| index.get(s).copied();
        let maxl = tokens.iter().map(|t| t.1.len()).max().unwrap();
        if opt.algorithm == Algorithm::Fmm {
            let mut out = Vec::new();
            let mut i = 0;
            while i < n {
                let mut l = maxl.min(n - i);
                loop {
                    if let Some(id) = find(&text[i..i + l]) {
                        out.push(id);
                        i += l;
                        break;
                    }
                    l -= 1;
                }
            }
            return out;
        }
        let (_, nxt) = reference_program(tokens, text, opt);
        reference_path(&nxt, n)
    }

    /// SPEC section 2's MCE program written out directly: `D` and the chosen `(j, id)` at every
    /// position (the tests of `runs` compare `D` and the choices too).
    pub(crate) fn reference_program(tokens: &[(u32, Vec<u8>)], text: &[u8], opt: Options) -> (Vec<f64>, Vec<(usize, u32)>) {
        let n = text.len();
        let mut starts = Vec::new();
        unit_starts(text, &mut starts);
        let w = unit_indices(&starts);
        let index: std::collections::HashMap<&[u8], u32> = tokens.iter().map(|t| (t.1.as_slice(), t.0)).collect();
        // The token lengths (a candidate x[i:j] needs j - i among them).
        let mut lengths: Vec<usize> = tokens.iter().map(|t| t.1.len()).collect();
        lengths.sort_unstable();
        lengths.dedup();
        let mut d = vec![f64::INFINITY; n + 1];
        let mut nxt = vec![(0usize, 0u32); n + 1];
        d[n] = 0.0;
        for i in (0..n).rev() {
            for j in lengths.iter().map(|l| i + l).take_while(|&j| j <= n) {
                let Some(&id) = index.get(&text[i..j]) else { continue };
                let p = match boundary(&starts, &w, i, j) {
                    Some(false) => 0.0,
                    Some(true) => opt.boundary_penalty,
                    None => continue,
                };
                if p.is_infinite() {
                    continue;
                }
                let e = if opt.token_preference { token_preference(id) } else { 0.0 };
                let c = 1.0 + p + e;
                let tot = c + d[j];
                if tot < d[i] || (tot == d[i] && j > nxt[i].0) {
                    d[i] = tot;
                    nxt[i] = (j, id);
                }
            }
        }
        (d, nxt)
    }

    /// The tokens of the path `reference_program` chose, from position 0.
    pub(crate) fn reference_path(nxt: &[(usize, u32)], n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < n {
            out.push(nxt[i].1);
            i = nxt[i].0;
        }
        out
    }

    const PIECES: &[&str] = &[
        "a", "b", "e", "ab", "ba", " ", "  ", "-", "1", "23", "é", "\u{301}", "中", "文", "か", "カ",
        "한", "ก", "\u{e31}", "😀", ".", "\n", "th", "the", " the", "he ", "_",
    ];

    #[test]
    fn matches_reference_on_random_vocabularies() {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        for round in 0..300 {
            let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
            let mut seen: std::collections::HashSet<Vec<u8>> = toks.iter().map(|t| t.1.clone()).collect();
            let n_extra = 5 + rng.below(60);
            let mut next_id = 256u32;
            for _ in 0..n_extra {
                let mut t = Vec::new();
                for _ in 0..1 + rng.below(4) {
                    t.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
                }
                if rng.below(5) == 0 && t.len() > 1 {
                    t.truncate(t.len() - 1); // partial UTF-8 sequences too
                }
                if seen.insert(t.clone()) {
                    toks.push((next_id, t));
                    next_id += 1 + rng.below(3) as u32; // gaps in ids
                }
            }
            // shuffle which ids the single bytes get, so ε matters
            let v = Vocab::new(toks.clone()).unwrap();
            for _ in 0..8 {
                let mut text = Vec::new();
                for _ in 0..rng.below(30) {
                    text.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
                }
                if rng.below(4) == 0 {
                    text.push(0xFF);
                }
                for (lam, eps, alg) in [
                    (0.05, true, Algorithm::Mce),
                    (0.0, true, Algorithm::Mce),
                    (0.3, false, Algorithm::Mce),
                    (f64::INFINITY, true, Algorithm::Mce),
                    (0.05, true, Algorithm::Fmm),
                ] {
                    let opt = Options { algorithm: alg, boundary_penalty: lam, token_preference: eps };
                    let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
                    let got = enc.encode(&text);
                    let want = reference(&toks, &text, opt);
                    assert_eq!(got, want, "round {round} text {text:?} opt {opt:?}");
                    let back: Vec<u8> =
                        got.iter().flat_map(|&id| v.token(id).unwrap().to_vec()).collect();
                    assert_eq!(back, text);
                }
            }
        }
    }

    #[test]
    fn long_texts_match_reference() {
        let mut rng = Rng(0xD1B54A32D192ED03);
        for round in 0..12 {
            let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
            let mut seen: std::collections::HashSet<Vec<u8>> = toks.iter().map(|t| t.1.clone()).collect();
            for _ in 0..40 {
                let mut t = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    t.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
                }
                if seen.insert(t.clone()) {
                    let id = toks.len() as u32;
                    toks.push((id, t));
                }
            }
            let mut text = Vec::new();
            while text.len() < 1500 + rng.below(3000) {
                text.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
            }
            for alg in [Algorithm::Mce, Algorithm::Fmm] {
                let opt = Options { algorithm: alg, ..Options::default() };
                let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
                assert_eq!(enc.encode(&text), reference(&toks, &text, opt), "round {round} {alg:?}");
            }
        }
    }

    /// A vocabulary of the 256 bytes plus `extra` random tokens built from PIECES.
    fn random_vocab(rng: &mut Rng, extra: usize, max_pieces: usize) -> Vec<(u32, Vec<u8>)> {
        let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        let mut seen: std::collections::HashSet<Vec<u8>> = toks.iter().map(|t| t.1.clone()).collect();
        for _ in 0..extra {
            let mut t = Vec::new();
            for _ in 0..1 + rng.below(max_pieces) {
                t.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
            }
            if rng.below(6) == 0 && t.len() > 1 {
                t.truncate(t.len() - 1); // partial UTF-8 sequences too
            }
            if seen.insert(t.clone()) {
                let id = toks.len() as u32;
                toks.push((id, t));
            }
        }
        toks
    }

    #[test]
    fn lane_walk_equals_one_walk() {
        // The walk in lanes (and from a given state, as at a chunk boundary) gives exactly the
        // matches and final state of one walk over the same range.
        let mut rng = Rng(0x8BADF00DDEADBEEF);
        for round in 0..40 {
            let extra = 20 + rng.below(200);
            let toks = random_vocab(&mut rng, extra, 6);
            let v = Vocab::new(toks).unwrap();
            let ac = v.automaton();
            let mut text = Vec::new();
            let len = [10, 1023, 1024, 1025, 1500, 4099, 9000][round % 7] + rng.below(9);
            while text.len() < len {
                text.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
            }
            let n = text.len();
            let b = n - rng.below(n / 3 + 1);
            let a = rng.below(b / 2 + 1);
            let (from, want, s) = one_walk(ac, &text, a, b);
            let (mut outs, mut states) = (Vec::new(), Vec::new());
            let end = walk(ac, &text, a, b, from, &mut outs, &mut states);
            assert_eq!(outs, want, "round {round}");
            assert_eq!(end, s, "round {round}");
        }
    }

    /// The reference for the lane walks over `text[a..b]`: the exact state after consuming
    /// `text[b..]` from the root (as at a chunk boundary), the first pattern at every position
    /// of `a..b` by one walk with `next`, and that walk's final state.
    fn one_walk(ac: &Automaton, text: &[u8], a: usize, b: usize) -> (u32, Vec<u32>, u32) {
        let mut from = ac.root();
        for k in (b..text.len()).rev() {
            from = ac.next(from, text[k]);
        }
        let mut outs = vec![0u32; b - a];
        let mut s = from;
        for k in (a..b).rev() {
            s = ac.next(s, text[k]);
            outs[k - a] = ac.out(s);
        }
        (from, outs, s)
    }

    #[test]
    fn lane_walk_with_tokens_as_long_as_a_lane() {
        // Lanes start from the root and are fixed by continuing their right neighbour's walk
        // until the two agree: with tokens as long as a lane (runs of one byte, of a pair) the
        // fix-up crosses whole lanes; lanes stop on failure links at the end of the lockstep
        // rounds. Several lane counts, every range against one walk.
        let mut rng = Rng(0x5DEECE66D1234567);
        for round in 0..60 {
            let extra = 30 + rng.below(60);
            let mut toks = random_vocab(&mut rng, extra, 4);
            let longest = 1 + rng.below(300);
            for k in 2..=longest {
                let t = if round % 2 == 0 { b"a".repeat(k) } else { b"ab".repeat(k).split_off(k) };
                if (rng.below(4) != 0 || k == longest) && !toks.iter().any(|x| x.1 == t) {
                    let id = toks.len() as u32;
                    toks.push((id, t));
                }
            }
            let v = Vocab::new(toks).unwrap();
            let ac = v.automaton();
            let mut text = Vec::new();
            let len = [300, 600, 1000, 2500, 5000][round % 5] + rng.below(40);
            while text.len() < len {
                match rng.below(5) {
                    0 => text.extend_from_slice(&b"a".repeat(1 + rng.below(2 * longest))),
                    1 => text.extend_from_slice(&b"ab".repeat(1 + rng.below(longest))),
                    _ => text.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes()),
                }
            }
            let n = text.len();
            let b = n - rng.below(n / 4 + 1);
            let a = rng.below(b / 3 + 1);
            let (from, want, s) = one_walk(ac, &text, a, b);
            let (mut outs, mut states) = (Vec::new(), Vec::new());
            // Both steps: the vocabulary's root is dense, and `step` must agree there too.
            assert!(ac.dense_root());
            for (lanes, dense) in [2, 8, 16].into_iter().flat_map(|l| [(l, false), (l, true)]) {
                let end = match (lanes, dense) {
                    (2, false) => walk_lanes::<2, false>(ac, &text, a, b, from, &mut outs, &mut states),
                    (2, true) => walk_lanes::<2, true>(ac, &text, a, b, from, &mut outs, &mut states),
                    (8, false) => walk_lanes::<8, false>(ac, &text, a, b, from, &mut outs, &mut states),
                    (8, true) => walk_lanes::<8, true>(ac, &text, a, b, from, &mut outs, &mut states),
                    (_, false) => walk_lanes::<16, false>(ac, &text, a, b, from, &mut outs, &mut states),
                    (_, true) => walk_lanes::<16, true>(ac, &text, a, b, from, &mut outs, &mut states),
                };
                assert_eq!(end, s, "round {round} lanes {lanes} dense {dense}");
                assert_eq!(outs, want, "round {round} lanes {lanes} dense {dense}");
            }
        }
    }

    /// The walk's speed by lane count on real data (not run by default; wall time, best of 10,
    /// interleaved): `CNFMCE_BENCH_VOCAB=VOCAB.tiktoken CNFMCE_BENCH_TEXT=A.txt,B.txt cargo test
    /// --release --lib walk_speed_by_lanes -- --ignored --nocapture`. The matches must agree.
    #[test]
    #[ignore]
    fn walk_speed_by_lanes() {
        let (Ok(vocab), Ok(texts)) = (std::env::var("CNFMCE_BENCH_VOCAB"), std::env::var("CNFMCE_BENCH_TEXT")) else {
            panic!("set CNFMCE_BENCH_VOCAB (a .tiktoken file) and CNFMCE_BENCH_TEXT (comma-separated files)");
        };
        let toks = crate::tiktoken_entries(&std::fs::read(&vocab).unwrap()).unwrap();
        let v = Vocab::new(toks).unwrap();
        let ac = v.automaton();
        for f in texts.split(',') {
            let text = std::fs::read(f).unwrap();
            let mut best = [f64::INFINITY; 3];
            let mut sums = [0u64; 3];
            for rep in 0..10 {
                for w in 0..3 {
                    let which = (w + rep) % 3;
                    let (mut outs, mut states) = (Vec::new(), Vec::new());
                    let t0 = std::time::Instant::now();
                    let mut end = text.len();
                    let mut sum = 0u64;
                    while end > 0 {
                        let start = end.saturating_sub(1 << 15);
                        match which {
                            0 => walk_lanes::<4, true>(ac, &text, start, end, ac.root(), &mut outs, &mut states),
                            1 => walk_lanes::<8, true>(ac, &text, start, end, ac.root(), &mut outs, &mut states),
                            _ => walk_lanes::<16, true>(ac, &text, start, end, ac.root(), &mut outs, &mut states),
                        };
                        sum = outs.iter().fold(sum, |s, &o| s.wrapping_mul(31).wrapping_add(o as u64));
                        end = start;
                    }
                    best[which] = best[which].min(t0.elapsed().as_secs_f64());
                    sums[which] = sum;
                }
            }
            assert!(sums.iter().all(|&s| s == sums[0]), "{f}: the lane counts disagree");
            let mbs = |t: f64| text.len() as f64 / t / 1e6;
            eprintln!("{f}: walk MB/s, 4 lanes {:.1}, 8 lanes {:.1}, 16 lanes {:.1}", mbs(best[0]), mbs(best[1]), mbs(best[2]));
        }
    }

    #[test]
    fn texts_over_several_chunks_match_reference() {
        // Longer than CHUNK (the walk and the DP run in rounds, the ring carries over), with
        // runs of one character (near-ties between paths with the same costs in another order,
        // over a large D), tokens longer than the 64-length mask, invalid bytes, and every
        // option set.
        let mut rng = Rng(0x94D049BB133111EB);
        for round in 0..4 {
            let mut toks = random_vocab(&mut rng, 150, 4);
            for k in 2..=70 {
                if rng.below(3) != 0 {
                    let id = toks.len() as u32;
                    toks.push((id, if k % 2 == 0 { b"a".repeat(k) } else { " ".repeat(k).into_bytes() }));
                }
            }
            let mut text = Vec::new();
            while text.len() < 3 * CHUNK + rng.below(CHUNK) {
                match rng.below(12) {
                    0 => text.extend_from_slice(&b"a".repeat(1 + rng.below(150))),
                    1 => text.extend_from_slice(&b" ".repeat(1 + rng.below(150))),
                    2 => text.push(0xFF),
                    _ => text.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes()),
                }
            }
            for (lam, eps) in [(0.05, true), (0.0, true), (0.3, false), (f64::INFINITY, true)] {
                let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: lam, token_preference: eps };
                let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
                let got = enc.encode(&text);
                assert_eq!(got, reference(&toks, &text, opt), "round {round} λ {lam} ε {eps}");
            }
        }
    }

    #[test]
    fn with_options_shares_the_vocabulary() {
        let mut rng = Rng(0x2545F4914F6CDD1D);
        let toks = random_vocab(&mut rng, 80, 4);
        let base = Encoder::new(Vocab::new(toks.clone()).unwrap(), Options::default());
        let mut scratch = Scratch::default();
        for (lam, eps, alg) in [(0.3, false, Algorithm::Mce), (f64::INFINITY, true, Algorithm::Mce), (0.05, true, Algorithm::Fmm)] {
            let opt = Options { algorithm: alg, boundary_penalty: lam, token_preference: eps };
            let other = base.with_options(opt);
            assert!(Arc::ptr_eq(&base.vocab, &other.vocab));
            let fresh = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
            for _ in 0..20 {
                let mut text = Vec::new();
                for _ in 0..rng.below(80) {
                    text.extend_from_slice(PIECES[rng.below(PIECES.len())].as_bytes());
                }
                // one scratch for all three: the piece cache must not mix the encoders
                let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
                other.encode_into(&text, &mut scratch, &mut a);
                base.encode_into(&text, &mut scratch, &mut c);
                fresh.encode_into(&text, &mut scratch, &mut b);
                assert_eq!(a, b);
                assert_eq!(a, reference(&toks, &text, opt));
                assert_eq!(c, reference(&toks, &text, Options::default()));
            }
        }
    }

    #[test]
    fn cut_bitmap_and_piece_scan_match_the_byte_pairs() {
        // The cut flags and the piece starts found by bit scans equal the byte-pair definition
        // (a cut where no token spans text[i - 1], text[i]) on texts of every length around the
        // 64-bit words, dense and sparse in cuts, with cuts at the first and last positions.
        let mut rng = Rng(0x5eed_c075);
        for round in 0..60 {
            let toks = random_vocab(&mut rng, 40, 3);
            let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: 1.0, token_preference: true };
            let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
            let v = enc.vocab();
            let mut cuts = Vec::new();
            for n in [1usize, 2, 63, 64, 65, 127, 128, 129, 200 + round * 7] {
                let text: Vec<u8> = (0..n)
                    .map(|_| match round % 3 {
                        0 => PIECES[rng.below(PIECES.len())].as_bytes()[0],
                        1 => b"ab "[rng.below(3)],
                        _ => rng.below(256) as u8,
                    })
                    .collect();
                enc.cuts(&text, &mut cuts);
                let is_cut = |i: usize| i == 0 || !v.pair_in_token(text[i - 1], text[i]);
                for i in 0..n {
                    assert_eq!(cuts[i / 64] >> (i % 64) & 1 != 0, is_cut(i), "n {n} i {i}");
                }
                assert!(cuts.len() == n.div_ceil(64));
                let mut starts = Vec::new();
                unit_starts(&text, &mut starts);
                starts.push(1);
                let mut q = n;
                while q > 0 {
                    let k = enc.next_piece(&text, &starts, &cuts, q);
                    let mut p = q - 1;
                    while !is_cut(p) {
                        p -= 1;
                    }
                    assert_eq!((k.p, k.q), (p, q), "n {n}");
                    q = p;
                }
            }
        }
    }

    #[test]
    fn cache_made_ready_with_the_first_short_piece() {
        // The piece cache is made only when a batch holds a short piece: texts whose right
        // end (where the scan starts) has more than a batch of long pieces, then short ones;
        // texts of long pieces only make none.
        let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        // Byte pairs of a/b and of c/d are inside tokens, a pair of one of each is not: runs of
        // one alphabet then the other are long pieces with no short piece between them.
        for t in [&b"ab"[..], b"ba", b"aab", b"bb", b"abab", b"cd", b"dc", b"cc", b"ddc"] {
            let id = toks.len() as u32;
            toks.push((id, t.to_vec()));
        }
        let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: 0.05, token_preference: true };
        let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
        let other = enc.with_options(Options { boundary_penalty: 0.3, ..opt });
        let mut rng = Rng(0x1a2b_3c4d);
        let mut scratch = Scratch::default();
        let long = |rng: &mut Rng, k: usize| -> Vec<u8> {
            let abc: &[u8] = if k % 2 == 0 { b"ab" } else { b"cd" };
            (0..PIECE_MAX + 1 + rng.below(40)).map(|_| abc[rng.below(2)]).collect()
        };
        for round in 0..6 {
            // "x" is in no token of two bytes: a cut on both sides.
            let mut text = Vec::new();
            for _ in 0..rng.below(30) {
                text.extend((0..1 + rng.below(6)).map(|_| b"ab"[rng.below(2)]));
                text.push(b'x');
            }
            for k in 0..PIECE_BATCH + 1 + rng.below(2 * PIECE_BATCH) {
                text.extend(long(&mut rng, k));
            }
            let e = if round % 2 == 0 { &enc } else { &other };
            let mut got = Vec::new();
            e.encode_into(&text, &mut scratch, &mut got);
            assert_eq!(got, reference(&toks, &text, e.options()), "round {round}");
            assert!(e.cache.get().is_some(), "round {round}: short pieces, so a cache");
            // Long pieces only: no cache is made.
            let only_long: Vec<u8> = (0..1 + rng.below(3 * PIECE_BATCH)).flat_map(|k| long(&mut rng, k)).collect();
            // A new encoder each round, so it has no cache yet.
            let f = enc.with_options(Options { boundary_penalty: 0.1 * round as f64, ..opt });
            let mut got = Vec::new();
            f.encode_into(&only_long, &mut scratch, &mut got);
            assert_eq!(got, reference(&toks, &only_long, f.options()), "round {round}, long only");
            assert!(f.cache.get().is_none(), "round {round}: no short piece, no cache");
            f.encode_into(&text, &mut scratch, &mut got);
            assert!(f.cache.get().is_some(), "round {round}: then short pieces, so a cache");
        }
    }

    #[test]
    fn same_piece_in_two_unit_contexts() {
        // "a-" is a piece in both texts (no token holds "xa", "-x" or the invalid byte), but
        // after the letter x it crosses two units partially (forbidden with λ = ∞) and after
        // an invalid byte it covers whole units: the cache must tell the two apart.
        let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        toks.push((256, b"a-".to_vec()));
        let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: f64::INFINITY, token_preference: true };
        let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
        let mut scratch = Scratch::default();
        for text in [&b"\xffa-\xff"[..], b"xa-x", b"\xffa-\xff", b"xa-x"] {
            let mut got = Vec::new();
            enc.encode_into(text, &mut scratch, &mut got);
            assert_eq!(got, reference(&toks, text, opt), "{text:?}");
        }
        assert_eq!(enc.encode(b"xa-x").len(), 4);
        assert_eq!(enc.encode(b"\xffa-\xff").len(), 3);
    }

    #[test]
    fn piece_cache_matches_reference() {
        BRANCHES.with(|b| *b.borrow_mut() = [0; 4]);
        WAY_HITS.with(|b| *b.borrow_mut() = [0; WAYS + 1]);
        // Vocabularies over a few letters with some byte pairs inside no token, so that texts
        // split into pieces; one Scratch (one cache) over many texts and two encoders, so that
        // pieces are replayed from the cache: the same piece at the start and end of texts, in
        // other unit contexts (a letter, digit, space or mark before or after it), longer than
        // PIECE_MAX, at small and large D (runs of "a" where "a" and "aa" give paths with the
        // same costs in another order: floating-point near-ties), partial UTF-8, invalid bytes.
        let mut rng = Rng(0x5851F42D4C957F2D);
        for round in 0..24 {
            let (toks, pieces) = cache_vocab(&mut rng);
            let opts = [(0.05, true), (0.0, true), (0.3, false), (f64::INFINITY, true)];
            let (lam, eps) = opts[round % 4];
            let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: lam, token_preference: eps };
            let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
            let other = Encoder::new(Vocab::new(toks.clone()).unwrap(), Options { boundary_penalty: 0.2, ..opt });
            // Four encoders in turn with one scratch: each has its own piece cache.
            let third = enc.with_options(Options { boundary_penalty: 0.1, ..opt });
            let fourth = enc.with_options(Options { token_preference: !eps, ..opt });
            let mut scratch = Scratch::default();
            for t in 0..12 {
                let size = if t % 4 == 3 { 6000 } else { 1 + rng.below(300) };
                let text = cache_text(&mut rng, &pieces, size);
                let order: &[&Encoder] =
                    if t % 2 == 0 { &[&enc, &enc, &other, &enc] } else { &[&enc, &third, &other, &fourth, &other, &enc] };
                for e in order {
                    let mut got = Vec::new();
                    e.encode_into(&text, &mut scratch, &mut got);
                    assert_eq!(got, reference(&toks, &text, e.options()), "round {round} text {t}");
                }
            }
        }
        // Every branch of `short_piece` ran: solved without a walk (evicted by an earlier piece
        // of its batch, or its margin too small) and with one, replayed without a walk and
        // after a walk for nothing (an earlier piece of the batch cached it).
        let b = BRANCHES.with(|b| *b.borrow());
        assert!(b.iter().all(|&c| c > 0), "{b:?}");
        // Replayed from either slot of a set, and solved (no slot held it with a margin).
        let w = WAY_HITS.with(|b| *b.borrow());
        assert!(w.iter().all(|&c| c > 0), "{w:?}");
    }

    /// The atoms of the piece-cache tests' tokens, pieces and texts (`cache_vocab`, `cache_text`).
    const CACHE_ATOMS: &[&str] = &["a", "b", "aa", "ab", "ba", "1", " ", "é", "\u{301}", "中", "-", "x"];

    /// A vocabulary for the piece-cache tests (`piece_cache_matches_reference` and the
    /// shared-cache tests): a few letters, marks and digits, some byte pairs inside no token;
    /// and a few short pieces made of the same atoms, to be reused all over the texts.
    pub(crate) fn cache_vocab(rng: &mut Rng) -> (Vec<(u32, Vec<u8>)>, Vec<Vec<u8>>) {
        let atoms = CACHE_ATOMS;
        let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        let mut seen: std::collections::HashSet<Vec<u8>> = toks.iter().map(|t| t.1.clone()).collect();
        for (k, t) in [&b"a-"[..], b"aa", b"aaa", b"ab", b" a", b"ba"].into_iter().enumerate() {
            // "a-" always: after a letter it is a partial crossing, after a space whole.
            if (k == 0 || rng.below(4) != 0) && seen.insert(t.to_vec()) {
                let id = toks.len() as u32;
                toks.push((id, t.to_vec()));
            }
        }
        for _ in 0..10 + rng.below(40) {
            let mut t = Vec::new();
            for _ in 0..1 + rng.below(3) {
                t.extend_from_slice(atoms[rng.below(atoms.len() - 1)].as_bytes()); // never "x"
            }
            if rng.below(6) == 0 && t.len() > 1 {
                t.truncate(t.len() - 1);
            }
            if seen.insert(t.clone()) {
                let id = 256 + rng.below(3) as u32 * 1000 + toks.len() as u32;
                if !toks.iter().any(|e| e.0 == id) {
                    toks.push((id, t));
                }
            }
        }
        let pieces = (0..6)
            .map(|k| {
                let mut v = Vec::new();
                for _ in 0..if k == 5 { 12 } else { 1 + rng.below(4) } {
                    v.extend_from_slice(atoms[rng.below(atoms.len())].as_bytes());
                }
                v
            })
            .collect();
        (toks, pieces)
    }

    /// A text of about `size` bytes for the piece-cache tests: the pieces of `cache_vocab`
    /// between separators (cuts), runs of "a", partial UTF-8, "a-" in two unit contexts.
    pub(crate) fn cache_text(rng: &mut Rng, pieces: &[Vec<u8>], size: usize) -> Vec<u8> {
        let atoms = CACHE_ATOMS;
        let seps: &[&str] = &["x", " ", "-", "1", "\u{301}", "中", "\u{ff}"];
        let mut text = Vec::new();
        while text.len() < size {
            match rng.below(11) {
                0 => text.extend_from_slice(&b"a".repeat(1 + rng.below(5))),
                10 => text.extend_from_slice([&b"xa-x"[..], b"\xffa-x", b"xa-\xff", b"\xffa-\xff"][rng.below(4)]),
                1 => text.push(0xE4), // partial UTF-8
                2 => text.extend_from_slice(atoms[rng.below(atoms.len())].as_bytes()),
                3 | 4 => text.extend_from_slice(seps[rng.below(seps.len())].as_bytes()),
                _ => text.extend_from_slice(&pieces[rng.below(pieces.len())]),
            }
        }
        text
    }


    thread_local! {
        /// How often `short_piece` took each branch: index 2 * replayed + walked.
        pub(super) static BRANCHES: std::cell::RefCell<[u64; 4]> = const { std::cell::RefCell::new([0; 4]) };
        /// Positions of `best_masked` whose longest allowed candidate lies 0, 1, 2+ chain steps
        /// below the first match.
        pub(super) static TOP_STEPS: std::cell::RefCell<[u64; 3]> = const { std::cell::RefCell::new([0; 3]) };
        /// How often `short_piece` replayed from each slot of a set (index WAYS: not replayed).
        pub(super) static WAY_HITS: std::cell::RefCell<[u64; WAYS + 1]> = const { std::cell::RefCell::new([0; WAYS + 1]) };
    }

    #[test]
    fn long_chains_match_reference() {
        // Runs of one character with tokens of many lengths give chains longer than
        // LONG_CHAIN, which take the flat-list path; mixed with other pieces so that the
        // flat list is rebuilt and units vary inside the runs.
        let mut rng = Rng(0xA0761D6478BD642F);
        for round in 0..16 {
            let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
            let mut seen: std::collections::HashSet<Vec<u8>> = toks.iter().map(|t| t.1.clone()).collect();
            for unit in ["a", " ", "-", "中", "é"] {
                for k in 2..=(12 + rng.below(30)) {
                    if rng.below(6) == 0 {
                        continue; // gaps in the run lengths
                    }
                    let mut t = unit.repeat(k).into_bytes();
                    if rng.below(8) == 0 {
                        t.push(b'b'); // a run followed by something else
                    }
                    if seen.insert(t.clone()) {
                        let id = 256 + rng.below(5000) as u32 * 7 + toks.len() as u32 * 35_000;
                        toks.push((id, t));
                    }
                }
            }
            let mut text = Vec::new();
            while text.len() < 200 + rng.below(2000) {
                let unit = ["a", " ", "-", "中", "é", "b", "\u{301}", "x"][rng.below(8)];
                text.extend_from_slice(unit.repeat(1 + rng.below(60)).as_bytes());
            }
            for (lam, eps) in [(0.05, true), (0.0, false), (f64::INFINITY, true), (0.3, true)] {
                let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: lam, token_preference: eps };
                let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
                assert_eq!(enc.encode(&text), reference(&toks, &text, opt), "round {round} λ {lam} ε {eps}");
            }
        }
    }

    #[test]
    fn substring_vocabularies_match_reference() {
        // Vocabularies of random substrings (2..=30 bytes) of a text of words, and of all the
        // prefixes of some (long chains), like the synthetic 5M-entry vocabulary of
        // benches/encode.py: the longest match often crosses three units, so the longest
        // allowed candidate lies steps down the chain (`best_masked` walks there; counted).
        // ε off gives ties everywhere (ties go to the largest j); ids up to 5M spread ε over
        // its whole range. Texts are pieces longer than the cache's, so `long_piece` solves
        // them; compared with the reference on the tokens and on D[0] bit for bit.
        let mut rng = Rng(0xD1B54A32D192ED03);
        TOP_STEPS.with(|b| *b.borrow_mut() = [0; 3]);
        let words = ["the", "a", "of", "and", "to", "in", "is", "it", "that", "on", "we", "co-op", "x1", "é", "中文", "ab", "ba"];
        let seps = [" ", " ", " ", ", ", ". ", "\n", "-", "  "];
        let gen = |rng: &mut Rng, n: usize| -> Vec<u8> {
            let mut t = Vec::new();
            while t.len() < n {
                t.extend_from_slice(words[rng.below(words.len())].as_bytes());
                t.extend_from_slice(seps[rng.below(seps.len())].as_bytes());
            }
            t
        };
        for round in 0..24 {
            let corpus = gen(&mut rng, 4000);
            let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
            let mut seen: std::collections::HashSet<Vec<u8>> = toks.iter().map(|t| t.1.clone()).collect();
            let mut ids: std::collections::HashSet<u32> = (0..256).collect();
            let target = 200 + rng.below(3000);
            while toks.len() < target {
                let a = rng.below(corpus.len() - 31);
                let len = 2 + rng.below(29);
                let chain = rng.below(4) == 0;
                for l in if chain { 2..=len } else { len..=len } {
                    let t = corpus[a..a + l].to_vec();
                    if !seen.insert(t.clone()) {
                        continue;
                    }
                    let mut id = if round % 3 == 0 { 256 + rng.below(8000) as u32 } else { 256 + rng.below(5_000_000) as u32 };
                    while !ids.insert(id) {
                        id += 1;
                    }
                    toks.push((id, t));
                }
            }
            let size = 300 + rng.below(3000);
            let text = gen(&mut rng, size);
            for (lam, eps) in [(0.05, true), (0.0, false), (f64::INFINITY, true), (0.3, true), (0.0, true)] {
                let opt = Options { algorithm: Algorithm::Mce, boundary_penalty: lam, token_preference: eps };
                let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
                let want = reference(&toks, &text, opt);
                let d = reference_program(&toks, &text, opt).0[0];
                assert_eq!(enc.encode(&text), want, "round {round} λ {lam} ε {eps}");
                let mut scratch = Scratch::default();
                let d0 = enc.mce_cost(&text, &mut scratch);
                assert_eq!(d0.to_bits(), d.to_bits(), "round {round} λ {lam} ε {eps}");
            }
        }
        let steps = TOP_STEPS.with(|b| *b.borrow());
        assert!(steps.iter().all(|&c| c > 1000), "top steps {steps:?}");
    }

    #[test]
    fn min_of_sums_paths_agree() {
        // The vector path and the scalar one: same minimum, any length, infinities included.
        let mut rng = Rng(0x2545F4914F6CDD1D);
        for n in 0..200 {
            let a: Vec<f64> = (0..n)
                .map(|_| if rng.below(5) == 0 { f64::INFINITY } else { 1.0 + rng.below(1000) as f64 * 1e-5 })
                .collect();
            let b: Vec<f64> = (0..n).map(|_| rng.below(1 << 20) as f64 / 7.0).collect();
            let want = min_of_sums_scalar(&a, &b);
            assert_eq!(min_of_sums(&a, &b).to_bits(), want.to_bits(), "n = {n}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx") {
                assert_eq!(unsafe { min_of_sums_avx(&a, &b) }.to_bits(), want.to_bits(), "n = {n}");
            }
        }
    }

    #[test]
    fn paper_example_co_advisor() {
        // With "co-advisor" absent but "o-" and "o-ad" present, MCE may use "o-" (λ) but never
        // "o-ad" (three units, partial).
        let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        for (k, t) in ["o-ad", "visor", "o-", "advisor"].iter().enumerate() {
            toks.push((256 + k as u32, t.as_bytes().to_vec()));
        }
        let enc = Encoder::new(Vocab::new(toks).unwrap(), Options::default());
        let ids = enc.encode(b"co-advisor");
        let v = enc.vocab();
        let parts: Vec<&[u8]> = ids.iter().map(|&i| v.token(i).unwrap()).collect();
        assert_eq!(parts, vec![&b"c"[..], b"o-", b"advisor"]);
    }

    #[test]
    fn long_runs_are_linear() {
        let mut toks: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        toks.push((256, b"aaaa".to_vec()));
        toks.push((257, b"    ".to_vec()));
        let enc = Encoder::new(Vocab::new(toks).unwrap(), Options::default());
        let ids = enc.encode(&vec![b'a'; 1_000_001]);
        assert_eq!(ids.len(), 250_001);
        let ids = enc.encode(&vec![b' '; 1_000_000]);
        assert_eq!(ids.len(), 250_000);
    }
}
