//! Runs of one repeated byte (spaces, dashes, `=`, zeros, tabs, newlines, letters, ...): an exact
//! periodic shortcut of the min-cost program (SPEC section 2) over a run's interior.
//!
//! # The interior of a run
//!
//! Let `W` be the longest token of the vocabulary and `x[r0:r1]` a run of one byte `b` inside a
//! long piece. A position `i` is *interior* when `x[i : i+W]` is `b^W` and the unit start flags
//! are constant over `i+1 .. i+W` (all 0: the window lies inside one unit, a run of an ASCII
//! letter; all 1 and byte `i` starts a unit too: every byte is a unit by itself, a run of
//! spaces, digits, punctuation or invalid bytes). Then the tokens starting at `i` are exactly
//! the tokens `b^k` of the vocabulary (`k ∈ K`, at most `W`; the one-byte token always), every
//! one is free (`p = 0`: inside one unit, or whole units), and costs `c_k = 1 + ε(id_k)`, the
//! same at every interior position. With `M = max K`:
//!
//! ```text
//! D[i] = min over k ∈ K of fl(c_k + D[i+k])      (ties to the largest k)
//! ```
//!
//! The flags are read off the unit annotation (not assumed from the byte), so the rule holds
//! whatever the byte.
//!
//! # The periodic shortcut, and why it is exact
//!
//! Write `σ(j, k) = c_k + D[j+k]` for the exact (real) sum and `fl(σ)` for its IEEE double
//! (round to nearest, ties to even), which is what the program computes.
//!
//! *Claim.* Let `g` be a position with `[g, g+P)` interior, `P ≥ 1`, and suppose
//!
//! 1. every `D[x]`, `x ∈ [g, g+P+M)`, lies in one binade `[2^E, 2^(E+1))`; then they are all
//!    multiples of `u = 2^(E-52)`;
//! 2. `D[x] - D[x+P] = q` for every `x ∈ [g, g+M)` (these differences are exact: Sterbenz), so
//!    `q` is a multiple of `u`, and `q > 0`;
//! 3. `T + N·q ≤ 2^(E+1) - u` for a double `T ∈ [2^E, 2^(E+1))` at least every `fl(σ(j, k))`,
//!    `j ∈ [g, g+P)`, `k ∈ K` (the code takes `T = fl(max c_k + max D[g+1 .. g+P+M))`, a bound
//!    by monotone rounding);
//! 4. no `σ(j, k)` (same range) is a rounding midpoint of the grid `u`, or `q/u` is even.
//!
//! Then for every interior `i ∈ [g - N·P, g)`: `D[i] = D[i+P] + q` and the choice at `i` is the
//! choice at `i + P`.
//!
//! *Proof.* Induction on `i` going left; write `C(x)` for `D[x] = D[x+P] + q`, true for
//! `x ∈ [g, g+M)` by (2). At an interior `i < g`, every `i + k` (`1 ≤ k ≤ M`) is `< g + M`, so
//! `C(i+k)` holds (by (2), or by the induction) and `σ(i, k) = σ(i+P, k) + q` exactly. Applying
//! this repeatedly, `σ(i, k) = σ(j, k) + n·q` where `j ∈ [g, g+P)`, `j ≡ i (mod P)` and
//! `1 ≤ n ≤ N`. Since `σ(j, k) > D[j+k] ≥ 2^E` and `σ(j, k) ≤ fl(σ(j, k)) + u/2 ≤ T + u/2`, (3)
//! puts `σ(i+P, k)` and `σ(i, k)` in `[2^E, 2^(E+1) - u/2]`, where the doubles are exactly the
//! multiples of `u` (`2^(E+1)` included). Rounding to the nearest multiple of `u` commutes with
//! adding the multiple `q` of `u`, except at a midpoint, where ties to even picks the neighbour
//! whose quotient by `u` is even: the same neighbour after the shift when `q/u` is even. A
//! midpoint stays a midpoint under shifts by multiples of `u` and nothing else becomes one, so
//! by (4) `fl(σ(i, k)) = fl(σ(i+P, k)) + q` for every `k`. All totals at `i` are those at `i + P`
//! plus the same `q`: the same one is smallest (ties to the largest `k` included), `D[i] =
//! D[i+P] + q` (that is `C(i)`), and `i` chooses what `i + P` chose, as `i + P` is interior
//! and computed by the same recurrence. ∎
//!
//! So after `N` periods the window `D[g-NP ..g-NP+P+M)` is the verified window plus `N·q`
//! (every such addition is exact: the results are multiples of `u` below `2^(E+1)`), and the
//! choices and lengths of `[g-NP, g)` are copies of those of `[g, g+P)`.
//!
//! # How it runs
//!
//! [`solve`] walks an interior right to left with the plain recurrence (the real program, same
//! arithmetic as the encoder's: `cost + D[j]`, candidates longest first, strict `<`), and after
//! each position tries to verify a period `P` at the current position: a few multiples of the
//! lengths with the smallest cost per byte (a guess; only the verification counts). A verified
//! period is replayed as far as (3) allows and as long as at least `W` positions of the
//! interior remain; the plain recurrence then continues, so a binade crossing (where (1) fails
//! for a while) and the run's left end are always the real program. If nothing verifies, the
//! plain recurrence solves the whole interior (never wrong, only slower). The residues of (4)
//! are checked once per replay when `q/u` is odd, over the verified period's `P·|K|` sums (TwoSum
//! gives each rounding error exactly); a guess refused by (3) or (4) is not retried until `D`
//! leaves the binade.
//!
//! On o200k_base a run of spaces (84 tokens `" "^k` up to `k = 128`) verifies `P = 128` within
//! a few hundred positions of each binade, so a run of 10,000,000 spaces runs the plain
//! recurrence on under 10,000 positions and replays the rest.
//!
//! The encoder ([`crate::mce`]) stops a chunk at the right edge of a long run's interior (the
//! positions within `W` of the run's end see other bytes and go through the ordinary program),
//! hands the interior to [`solve`], and resumes the walk and the unit window at its left end
//! ([`state_at`], [`replay_units`]): neither the automaton walk nor the candidate emission runs
//! inside the interior.
//!
//! Testing aid: `CNFMCE_RUN_SHORTCUT=0` in the environment (read once per process) turns the
//! shortcut off, so that a test can compare the shortcut with the ordinary program.

use crate::automaton::{Automaton, NONE};
use crate::cost::{Costs, UnitWindow};

/// Interiors shorter than this many times the longest token go through the ordinary program.
const MIN_FACTOR: usize = 4;
/// The longest interior one call of [`solve`] handles (so that every scan over a run is
/// bounded; a longer run is solved in segments, each restarting from the ring).
const SEGMENT: usize = 1 << 20;
/// The multiples tried of each period guess.
const MULTIPLES: usize = 4;
/// How many lengths (those with the smallest cost per byte) give period guesses.
const GUESSES: usize = 2;

/// Whether the shortcut is on (`CNFMCE_RUN_SHORTCUT=0` turns it off; read once).
pub fn enabled() -> bool {
    // 0: not read yet, 1: off, 2: on (an atomic, not a OnceLock: a process forked while another
    // thread reads it must not wait for that thread)
    use std::sync::atomic::{AtomicU8, Ordering};
    static ON: AtomicU8 = AtomicU8::new(0);
    match ON.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var("CNFMCE_RUN_SHORTCUT").map_or(true, |v| v.trim() != "0");
            ON.store(1 + on as u8, Ordering::Relaxed);
            on
        }
        v => v == 2,
    }
}

/// The shortest interior handed to [`solve`] for a vocabulary whose longest token is `w`.
pub fn min_interior(w: usize) -> usize {
    MIN_FACTOR * w.max(1)
}

/// When `end` (with `end + w <= q`) is the right edge of a run's interior (see the module
/// documentation) in the piece `text[p..q]`: the interior's left end `a` (interior `[a, end)`,
/// at least [`min_interior`] and at most [`SEGMENT`] positions). `starts` holds the unit start
/// flags (`n + 1` entries, the end of the text counting as a start).
pub fn interior_at(text: &[u8], starts: &[u8], p: usize, q: usize, end: usize, w: usize) -> Option<usize> {
    if end <= p || end + w > q {
        return None;
    }
    let b = text[end];
    let v = starts[end];
    if text[end - 1] != b || text[end..end + w].iter().any(|&c| c != b) || starts[end..end + w].iter().any(|&s| s != v) {
        return None;
    }
    // Positions [a, end) hold b, and starts[a+1 ..= end] == v.
    let lim = end.saturating_sub(SEGMENT).max(p);
    let mut a = end;
    // 64 positions at a time while whole blocks match (text[a-64 .. a] and starts[a-63 ..= a]),
    // then one at a time.
    let (bw, vw) = (u64::from_ne_bytes([b; 8]), u64::from_ne_bytes([v; 8]));
    let differs = |s: &[u8], pat: u64| s.chunks_exact(8).fold(0u64, |acc, c| acc | (u64::from_ne_bytes(c.try_into().expect("8 bytes")) ^ pat)) != 0;
    while a >= lim + 64 && !differs(&text[a - 64..a], bw) && !differs(&starts[a - 63..a + 1], vw) {
        a -= 64;
    }
    while a > lim && text[a - 1] == b && starts[a] == v {
        a -= 1;
    }
    if v != 0 && starts[a] == 0 {
        a += 1;
    }
    (end - a >= min_interior(w)).then_some(a)
}

/// The right edge `e` (`start < e < end`) of the rightmost run interior of at least
/// [`min_interior`] positions whose edge lies inside the chunk `[start, end)` of the piece
/// `text[p..q]`, judged by the bytes alone ([`interior_at`] checks the unit flags too). Samples
/// every `w`-th position, so that prose pays a few comparisons per `w` bytes.
pub fn next_edge(text: &[u8], p: usize, q: usize, start: usize, end: usize, w: usize) -> Option<usize> {
    let w = w.max(1);
    let min = min_interior(w);
    let right = q.min(end + w);
    let mut s = end;
    while s > start {
        s -= 1;
        let b = text[s];
        if s > p && s + 1 < q && text[s - 1] == b && text[s + 1] == b {
            let mut r1 = s + 1;
            while r1 < right && text[r1] == b {
                r1 += 1;
            }
            let mut r0 = s;
            // Far enough to know whether the interior is long enough.
            let stop = r1.saturating_sub(w + min).max(p);
            while r0 > stop && text[r0 - 1] == b {
                r0 -= 1;
            }
            if r1 >= w + min {
                let e = r1 - w;
                if e > start && e < end && e >= r0 + min {
                    return Some(e);
                }
            }
            // Not this run: go on left of it.
            if r0 <= start {
                return None;
            }
            s = r0;
            continue;
        }
        s = s.saturating_sub(w - 1).max(start);
    }
    None
}

/// The walk's state after consuming `text[a]` (right to left from the end of the text), for a
/// run interior starting at `a` in a piece ending at `q`: the state depends on the next
/// `W` bytes only (no state is deeper than the longest token), so a walk from the root over
/// `text[a .. a+W]` finds it.
pub fn state_at(ac: &Automaton, text: &[u8], a: usize, w: usize, q: usize) -> u32 {
    let mut s = ac.root();
    for i in (a..(a + w).min(q)).rev() {
        s = ac.next(s, text[i]);
    }
    s
}

/// Moves the unit window from `end` (left, not yet entered) to the left of `a` as if every
/// position of `[a, end)` had been entered and left: only the last 66 positions are, since over
/// a stretch of constant start flags (`starts[a+1 ..= end]`, and `starts[a]` when they are 1)
/// the window forgets everything older (two unit starts, the last non-start, 64 flags ahead).
pub fn replay_units(units: &mut UnitWindow, starts: &[u8], a: usize, end: usize) {
    for i in (a..end.min(a + 66)).rev() {
        units.enter(starts[i] != 0, starts[i + 1] != 0);
        units.leave(i);
    }
}

/// A candidate of an interior: the token `b^len` with its id and cost `1 + ε`.
#[derive(Clone, Copy, Debug)]
struct Cand {
    len: usize,
    id: u32,
    cost: f64,
}

/// Reusable buffers of [`solve`].
#[derive(Default)]
pub struct RunScratch {
    cands: Vec<Cand>,
    /// The window of D, newest (leftmost) last: `win[t] = D[hi - 1 - t]`.
    win: Vec<f64>,
    periods: Vec<(usize, u64)>,
}

/// `(s, err)` with `s = fl(a + b)` and `a + b = s + err` exactly (Knuth's TwoSum).
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    (s, err)
}

/// The biased exponent of a positive double.
#[inline(always)]
fn exponent(x: f64) -> u64 {
    x.to_bits() >> 52
}

/// What one replay needs: the period, `q`, and how many periods (3) allows.
struct Verified {
    period: usize,
    q: f64,
    periods: usize,
}

/// Solves the interior `[a, e)` of a run (see the module documentation): fills `choice` and
/// `lens` at every position of it, given `D[e ..= e + w]` in the ring `dist` (size `ring`, with
/// its mirror), and writes `D[a .. a + w]` there. `w` is the longest token; `e + w <= q`.
#[allow(clippy::too_many_arguments)]
pub fn solve(
    ac: &Automaton,
    costs: Costs,
    text: &[u8],
    w: usize,
    a: usize,
    e: usize,
    dist: &mut [f64],
    choice: &mut [u32],
    lens: &mut [u8],
    rs: &mut RunScratch,
) {
    let ring = dist.len() / 2;
    let mask = ring - 1;
    // The candidates, from the first match at the interior position e - 1 (its chain is every
    // token b^k): longest first, as the encoder offers them.
    rs.cands.clear();
    let mut c = ac.out(state_at(ac, text, e - 1, w, text.len()));
    while c != NONE {
        let pc = ac.pattern(c);
        rs.cands.push(Cand { len: pc.len as usize, id: pc.id, cost: costs.cost_of(false, pc.eps) });
        c = pc.next;
    }
    let cands = &rs.cands[..];
    let m = cands[0].len;
    let cmax = cands.iter().map(|c| c.cost).fold(0.0, f64::max);
    // Period guesses: multiples of the lengths with the smallest cost per byte (ties: longer).
    let mut by_rate: Vec<&Cand> = cands.iter().collect();
    by_rate.sort_by(|x, y| (x.cost / x.len as f64).total_cmp(&(y.cost / y.len as f64)).then(y.len.cmp(&x.len)));
    rs.periods.clear();
    for cand in by_rate.iter().take(GUESSES) {
        for t in 1..=MULTIPLES {
            rs.periods.push((cand.len * t, u64::MAX));
        }
    }
    rs.periods.sort_unstable();
    rs.periods.dedup_by_key(|x| x.0);
    let pmax = rs.periods.last().map_or(1, |x| x.0);
    // Entries kept in the window: a verification window, and W for the ring at the end.
    let keep = (pmax + m).max(w) + 1;

    let win = &mut rs.win;
    win.clear();
    let mut hi = e + m;
    for x in (e..hi).rev() {
        win.push(dist[x & mask]);
    }
    let mut lo = e;
    while lo > a {
        // A period to replay from `lo`?
        if let Some(v) = verify(cands, cmax, win, hi, lo, a, e, w, m, &mut rs.periods) {
            let (pp, n) = (v.period, v.periods);
            let g2 = lo - n * pp;
            #[cfg(test)]
            tests::count(tests::REPLAY);
            // Choices and lengths: [lo, lo + pp) repeats leftwards, doubling the copied block.
            let mut filled = 0;
            while filled < n * pp {
                let cnt = (filled + pp).min(n * pp - filled);
                let src = lo - filled;
                choice.copy_within(src..src + cnt, src - cnt);
                lens.copy_within(src..src + cnt, src - cnt);
                filled += cnt;
            }
            // The window [g2, g2 + pp + m): the verified one plus n q (exact, see above).
            let nq = n as f64 * v.q;
            let shifted: Vec<f64> = (lo..lo + pp + m).rev().map(|x| win[hi - 1 - x] + nq).collect();
            win.clear();
            win.extend_from_slice(&shifted);
            lo = g2;
            hi = g2 + pp + m;
            continue;
        }
        // The plain recurrence at i = lo - 1: D[i + k] is win[t - k], t = hi - 1 - i.
        let i = lo - 1;
        let t = win.len();
        let mut best = (f64::INFINITY, 0u32, 0usize);
        for c in cands {
            // SAFETY: c.len <= m <= hi - lo, so t - c.len < win.len().
            let total = c.cost + unsafe { *win.get_unchecked(t - c.len) };
            if total < best.0 {
                best = (total, c.id, c.len);
            }
        }
        win.push(best.0);
        choice[i] = best.1;
        lens[i] = if best.2 < 256 { best.2 as u8 } else { 0 };
        lo = i;
        if win.len() >= 2 * keep + 1024 {
            let drop = win.len() - keep;
            win.drain(..drop);
            hi -= drop;
        }
    }
    // D[a .. a + w] for the ordinary program left of a.
    for x in a..(a + w + 1).min(hi) {
        let d = win[hi - 1 - x];
        dist[x & mask] = d;
        dist[(x & mask) + ring] = d;
    }
}

/// Tries the period guesses at `g = lo` (conditions (1)-(4) of the module documentation) and
/// returns the first that verifies with at least one period to replay. A guess that fails (4)
/// or (3) is not retried in the same binade (`periods[..].1` holds the binade).
#[allow(clippy::too_many_arguments)]
#[inline]
fn verify(cands: &[Cand], cmax: f64, win: &[f64], hi: usize, g: usize, a: usize, e: usize, w: usize, m: usize, periods: &mut [(usize, u64)]) -> Option<Verified> {
    let d = |x: usize| win[hi - 1 - x];
    let dg = d(g);
    let ex = exponent(dg);
    // Normal doubles whose ulp is a normal double too.
    if !(53..0x7FE).contains(&ex) {
        return None;
    }
    for slot in periods.iter_mut() {
        let pp = slot.0;
        if slot.1 == ex || g + pp > e || g + pp + m > hi || g < a + w + pp {
            continue;
        }
        // Cheap checks first: the window's far end in the same binade, two differences.
        let q = dg - d(g + pp);
        if exponent(d(g + pp + m - 1)) != ex || q <= 0.0 || (m > 1 && d(g + 1) - d(g + 1 + pp) != q) {
            continue;
        }
        // (1) and (2); the largest D the sums at [g, g + pp) read.
        let mut dmax = 0.0f64;
        let mut ok = true;
        for x in g..g + pp + m {
            let dx = d(x);
            ok &= exponent(dx) == ex;
            if x > g {
                dmax = dmax.max(dx);
            }
        }
        if !ok || (0..m).any(|j| d(g + j) - d(g + pp + j) != q) {
            continue;
        }
        let u = f64::from_bits((ex - 52) << 52);
        // q and 2^(E+1) - T are multiples of u below 2^53 u: exact quotients.
        let qu = (q / u) as u64;
        let ceiling = f64::from_bits((ex + 1) << 52);
        // (3) with T bounded by fl(c_max + D_max) (rounding is monotone).
        let top = cmax + dmax;
        if top >= ceiling {
            #[cfg(test)]
            tests::count(tests::BINADE);
            slot.1 = ex;
            continue;
        }
        let room = ((ceiling - top) / u) as u64;
        let allowed = ((room - 1) / qu) as usize;
        if allowed == 0 {
            #[cfg(test)]
            tests::count(tests::BINADE);
            slot.1 = ex;
            continue;
        }
        // (4): only an odd q/u needs the sums' residues.
        if qu % 2 == 1 {
            let half = u / 2.0;
            let midpoint = (g..g + pp).any(|j| cands.iter().any(|c| two_sum(c.cost, d(j + c.len)).1.abs() == half));
            #[cfg(test)]
            tests::count(if midpoint { tests::MIDPOINT } else { tests::ODD });
            if midpoint {
                slot.1 = ex;
                continue;
            }
        }
        let periods = allowed.min((g - a - w) / pp);
        if periods == 0 {
            continue;
        }
        return Some(Verified { period: pp, q, periods });
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{replay_units, UnitWindow};
    use crate::mce::{Encoder, Options, Scratch};
    use crate::options::Algorithm;
    use crate::vocab::Vocab;
    use std::cell::RefCell;

    /// Branch counters (per thread): replays, replays refused at a binade's top, verified
    /// periods with a midpoint among their sums (refused), odd `q/u` without one (accepted).
    pub(crate) const REPLAY: usize = 0;
    pub(crate) const BINADE: usize = 1;
    pub(crate) const MIDPOINT: usize = 2;
    pub(crate) const ODD: usize = 3;
    thread_local! {
        static COUNTS: RefCell<[u64; 4]> = const { RefCell::new([0; 4]) };
    }
    pub(crate) fn count(k: usize) {
        COUNTS.with(|c| c.borrow_mut()[k] += 1);
    }
    fn counts() -> [u64; 4] {
        COUNTS.with(|c| *c.borrow())
    }

    use crate::mce::tests::Rng;

    use crate::mce::tests::{reference_path as path, reference_program as reference};

    const RUN_BYTES: &[u8] = b" -=0\t\na";

    /// The 256 bytes, tokens `b^k` for a random set of lengths up to `w` (with gaps), tokens
    /// mixing `b` with other bytes, a few others; random distinct ids (so ε differs).
    fn run_vocab(rng: &mut Rng, b: u8, w: usize) -> Vec<(u32, Vec<u8>)> {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|c| vec![c]).collect();
        for k in 2..=w {
            if k == 2 || k == w || rng.below(3) != 0 {
                toks.push(vec![b; k]);
            }
        }
        let bs = |k: usize| vec![b; k];
        let mut mixed = vec![
            [&bs(1)[..], b"a"].concat(),
            [&bs(2)[..], b"\n"].concat(),
            [b"x", &bs(2)[..]].concat(),
            [&bs(1 + rng.below(w))[..], b"1"].concat(),
            b"-->".to_vec(),
            b"  \n".to_vec(),
            b" a".to_vec(),
            b"ab".to_vec(),
            "中文".as_bytes().to_vec(),
            vec![0xFF, 0xFF],
        ];
        mixed.retain(|t| t.len() <= w + 2);
        toks.extend(mixed);
        toks.sort();
        toks.dedup();
        let mut ids: Vec<u32> = (0..toks.len() as u32 * 3).collect();
        for k in (1..ids.len()).rev() {
            ids.swap(k, rng.below(k + 1));
        }
        toks.into_iter().zip(ids).map(|(t, id)| (id, t)).collect()
    }

    const SIDES: &[&[u8]] = &[b"", b"\xC2", b"x", b"12", b"\n", "中文".as_bytes(), b"\xFF", b"ab", b" a", b"-->", b"a", b"\t", b"  \n", b"z9"];

    /// Checks the encoder on `text` against the reference: tokens, D[0] bit for bit, and the
    /// choice at every position of the run `[r0, r1)` whose window is all `b` (long pieces
    /// write every position).
    fn check(enc: &Encoder, toks: &[(u32, Vec<u8>)], text: &[u8], run: (usize, usize, u8), what: &str) {
        let opt = enc.options();
        let (d, nxt) = reference(toks, text, opt);
        assert_eq!(enc.encode(text), path(&nxt, text.len()), "{what}: tokens");
        if text.is_empty() {
            return;
        }
        let mut scratch = Scratch::default();
        let d0 = enc.mce_cost(text, &mut scratch);
        assert_eq!(d0.to_bits(), d[0].to_bits(), "{what}: D[0] {d0} vs {}", d[0]);
        let (r0, r1, b) = run;
        let w = enc.vocab().max_len();
        if r1 - r0 > 16 + w && enc.vocab().pair_in_token(b, b) {
            let (choice, lens) = scratch.paths();
            for i in r0..r1 - w {
                let (j, id) = nxt[i];
                let l = j - i;
                assert_eq!((choice[i], lens[i]), (id, if l < 256 { l as u8 } else { 0 }), "{what}: choice at {i}");
            }
        }
    }

    fn options(rng: &mut Rng) -> Options {
        let lam = [0.05, 0.0, 0.3, f64::INFINITY][rng.below(4)];
        Options { algorithm: Algorithm::Mce, boundary_penalty: lam, token_preference: rng.below(4) != 0 }
    }

    fn case(rng: &mut Rng, toks: &[(u32, Vec<u8>)], enc: &Encoder, b: u8, len: usize, tag: &str) {
        // A continuation byte's run after a lead byte: its first byte joins the lead's character.
        let pre = if b == 0x80 && rng.below(2) == 0 { b"\xC2" } else { SIDES[rng.below(SIDES.len())] };
        let post = SIDES[rng.below(SIDES.len())];
        let text = [pre, &vec![b; len][..], post].concat();
        let what = format!("{tag} b={:?} len={len} pre={pre:?} post={post:?} opt={:?}", b as char, enc.options());
        check(enc, toks, &text, (pre.len(), pre.len() + len, b), &what);
    }

    #[test]
    fn short_runs_of_every_length_match_reference() {
        let mut rng = Rng(0x2545F4914F6CDD1D);
        for round in 0..16 {
            let b = RUN_BYTES[round % RUN_BYTES.len()];
            let w = 2 + rng.below(7);
            let toks = run_vocab(&mut rng, b, w);
            let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), options(&mut rng));
            // Every length up to past three of the longest period guesses and the window.
            for len in 0..=12 * w + w + 8 {
                case(&mut rng, &toks, &enc, b, len, &format!("round {round}"));
            }
        }
    }

    /// Vocabularies at the edges: single bytes only (W = 1), and tokens of 256 bytes and more
    /// (their lengths are stored as 0 and looked up).
    #[test]
    fn edge_vocabularies_match_reference() {
        let mut rng = Rng(0xA0761D6478BD642F);
        let bytes: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|c| (c as u32 * 7 + 3, vec![c])).collect();
        let mut long = bytes.clone();
        for (k, id) in [(2usize, 300u32), (7, 5000), (256, 12), (301, 9)] {
            long.push((id, vec![b' '; k]));
        }
        long.push((4, b"x".repeat(40)));
        for (toks, lens) in [(bytes, &[1, 5, 40, 301, 1500, 9000][..]), (long, &[1, 301, 1205, 30_005 + rng.below(300)][..])] {
            let before = counts()[REPLAY];
            for pref in [true, false] {
                let opt = Options { token_preference: pref, ..Options::default() };
                let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), opt);
                for &len in lens {
                    case(&mut rng, &toks, &enc, b' ', len, "edge");
                }
            }
            // (Single bytes only: every position is a cut, the pieces are short, nothing to replay.)
            let w = toks.iter().map(|t| t.1.len()).max().unwrap();
            assert!(w == 1 || counts()[REPLAY] > before, "a replay with W = {w}");
        }
    }

    /// The unit window after [`replay_units`] is the one after entering and leaving every
    /// position, over flags constant on `a+1 ..= end` (and at `a` when they are 1).
    #[test]
    fn replay_units_equals_full_walk() {
        let mut rng = Rng(0x853C49E6748FEA9B);
        for _ in 0..300 {
            let (left, mid, right) = (rng.below(5), 1 + rng.below(200), 1 + rng.below(80));
            let v = rng.below(2) as u8;
            let mut starts: Vec<u8> = (0..left).map(|_| rng.below(2) as u8).collect();
            let a = starts.len();
            starts.push(if v == 1 { 1 } else { rng.below(2) as u8 });
            starts.extend(std::iter::repeat_n(v, mid));
            let end = a + mid;
            starts.extend((0..right).map(|_| rng.below(2) as u8));
            let n = starts.len();
            starts.push(1);
            let mut w = UnitWindow::new(n);
            for i in (end..n).rev() {
                w.enter(starts[i] != 0, starts[i + 1] != 0);
                w.leave(i);
            }
            let mut full = w;
            for i in (a..end).rev() {
                full.enter(starts[i] != 0, starts[i + 1] != 0);
                full.leave(i);
            }
            replay_units(&mut w, &starts, a, end);
            assert_eq!(format!("{w:?}"), format!("{full:?}"), "flags {starts:?} a {a} end {end}");
        }
    }

    #[test]
    fn long_runs_across_binades_match_reference() {
        let before = counts();
        let mut rng = Rng(0x9E3779B97F4A7C15);
        for round in 0..45 {
            let b = [b' ', b'-', b'=', b'0', b'\t', b'\n', b'a', 0xFF, 0x80][round % 9];
            let w = 2 + rng.below(11);
            let toks = run_vocab(&mut rng, b, w);
            let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), options(&mut rng));
            let len = [300, 1000, 4000, 20_000, 70_000][rng.below(5)] + rng.below(500);
            case(&mut rng, &toks, &enc, b, len, &format!("round {round}"));
        }
        // A text of several runs and other bytes, crossing the encoder's chunks.
        let toks = run_vocab(&mut rng, b' ', 6);
        let enc = Encoder::new(Vocab::new(toks.clone()).unwrap(), Options::default());
        let mut text = Vec::new();
        for k in 0..30 {
            text.extend_from_slice(SIDES[k % SIDES.len()]);
            text.extend(std::iter::repeat_n(RUN_BYTES[k % RUN_BYTES.len()], 100 + 997 * (k % 7)));
        }
        check(&enc, &toks, &text, (0, 0, b' '), "several runs");
        let after = counts();
        let got: Vec<u64> = (0..4).map(|k| after[k] - before[k]).collect();
        // Every branch of the verification was taken.
        assert!(got.iter().all(|&c| c > 0), "replays, binade stops, midpoints, odd q/u: {got:?}");
    }
}
