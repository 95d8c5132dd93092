//! Min-Cost Encoding (SPEC section 2) and forward maximum matching.
//!
//! `D[n] = 0`; for `i = n-1 .. 0`, `D[i] = min_j c(i, j) + D[j]` over the tokens `x[i:j]` that are
//! not forbidden, ties to the largest `j`; `c(i, j) = 1.0 + p + ε(t)` in double precision, added
//! left to right. The scan runs right to left over the reversed-token automaton of [`Vocab`], so
//! the tokens starting at `i` are known exactly when `D[i]` is due. `D` lives in a ring buffer as
//! long as the longest token; the choice at each position is one id. Memory: 5 bytes per input
//! byte (unit flags and choices), linear in the input.

use crate::automaton::NONE;
use crate::units::unit_starts;
use crate::vocab::Vocab;

/// Chains with more candidates than this are read into a flat list (see `mce_choices`); prose
/// rarely has more.
const LONG_CHAIN: u16 = 8;

/// `1 + p` for the candidate x[i:j] (p of SPEC section 2), or None when it is forbidden; `s1` and
/// `s2` are the first two unit starts after `i` (see `mce_choices`).
#[inline(always)]
fn unit_cost(j: usize, s1: usize, s2: usize, start_i: bool, starts: &[u8], base_partial: Option<f64>) -> Option<f64> {
    // SAFETY: j <= n (matches lie inside the text) and starts has n + 1 entries.
    if j <= s1 || (start_i && unsafe { *starts.get_unchecked(j) } != 0) {
        Some(1.0)
    } else if j <= s2 {
        base_partial
    } else {
        None
    }
}

/// What decides the cost of a candidate token starting at `i` (see `mce_choices`).
struct Candidates<'a> {
    i: usize,
    s1: usize,
    s2: usize,
    start_i: bool,
    starts: &'a [u8],
    base_partial: Option<f64>,
    mask: usize,
}

/// Offers the candidate token `id` = x[i:i+len] (preference `eps`, already 0 when ε is off):
/// it becomes the best when its total is strictly smaller (candidates come longest first, so
/// ties keep the larger j).
#[inline(always)]
fn offer(cx: &Candidates<'_>, dist: &[f64], len: u32, id: u32, eps: f64, best: &mut f64, best_id: &mut u32) {
    let j = cx.i + len as usize;
    let Some(base) = unit_cost(j, cx.s1, cx.s2, cx.start_i, cx.starts, cx.base_partial) else { return };
    // SAFETY: the index is masked to the ring's size.
    let total = (base + eps) + unsafe { *dist.get_unchecked(j & cx.mask) };
    if total < *best {
        *best = total;
        *best_id = id;
    }
}

/// The best candidate at a position whose chain is long (a run of spaces, dashes, ...). Along a
/// run the automaton state repeats, so its candidates are read once into the flat list `flat`
/// (for `flat_state`) and reused, instead of following the chain's links at every position:
/// same candidates, same order (longest first), same arithmetic as the loop in `mce_choices`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn long_chain(
    ac: &crate::automaton::Automaton,
    state: u32,
    pref: bool,
    flat: &mut Vec<(u32, u32, f64)>,
    by_len: &mut Vec<f64>,
    id_by_len: &mut Vec<u32>,
    flat_state: &mut u32,
    cx: &Candidates<'_>,
    dist: &[f64],
) -> (f64, u32) {
    if *flat_state != state {
        flat.clear();
        let mut p = ac.out(state);
        while p != NONE {
            let c = ac.pattern(p);
            flat.push((c.len, c.id, if pref { c.eps } else { 0.0 }));
            p = c.next;
        }
        let longest = flat.first().map_or(0, |f| f.0 as usize);
        by_len.clear();
        by_len.resize(longest + 1, f64::INFINITY);
        id_by_len.clear();
        id_by_len.resize(longest + 1, 0);
        for &(len, id, eps) in flat.iter() {
            by_len[len as usize] = 1.0 + eps;
            id_by_len[len as usize] = id;
        }
        *flat_state = state;
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
    let mut best = f64::INFINITY;
    let mut best_id = 0u32;
    for &(len, id, eps) in flat.iter() {
        offer(cx, dist, len, id, eps, &mut best, &mut best_id);
    }
    (best, best_id)
}

/// The best candidate when every candidate at `cx.i` lies inside the first unit or covers whole
/// units only (inside a run of spaces, of CJK characters, ...); None otherwise. Then each costs
/// (1 + ε) + D[j] with no unit penalty: the totals are a sum of two arrays, by length, over the
/// window D[i+1 ..= i+longest] (contiguous thanks to the ring's mirror). The smallest total,
/// then the longest candidate reaching it (ties go to the largest j), is the choice the walk
/// over the chain makes.
#[inline(never)]
fn whole_unit_run(by_len: &[f64], id_by_len: &[u32], cx: &Candidates<'_>, dist: &[f64]) -> Option<(f64, u32)> {
    let i = cx.i;
    let longest = by_len.len() - 1;
    if !(i + longest <= cx.s1 || (cx.start_i && !cx.starts[i + 1..=i + longest].contains(&0))) {
        return None;
    }
    let w0 = (i + 1) & cx.mask;
    let window = &dist[w0..w0 + longest];
    let costs = &by_len[1..];
    let m = min_of_sums(costs, window);
    (0..longest).rev().find(|&k| costs[k] + window[k] == m).map(|k| (m, id_by_len[k + 1]))
}

/// The smallest `a[k] + b[k]` (each sum rounded as usual; ∞ for empty input). Four independent
/// minima, so that the loop is not one long dependency chain.
#[inline]
fn min_of_sums(a: &[f64], b: &[f64]) -> f64 {
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

pub use crate::options::{Algorithm, Options};
pub use crate::vocab::token_preference;

/// A vocabulary with its encoding options.
pub struct Encoder {
    vocab: Vocab,
    options: Options,
}

/// Reusable buffers for one thread.
#[derive(Default)]
pub struct Scratch {
    starts: Vec<u8>,
    choice: Vec<u32>,
    dist: Vec<f64>,
    /// The candidates of the last long chain, flat (see `mce_choices`).
    flat: Vec<(u32, u32, f64)>,
    /// The same candidates by length: `1 + ε` (∞ for lengths without a token) and id.
    by_len: Vec<f64>,
    id_by_len: Vec<u32>,
}

impl Scratch {
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
        Encoder { vocab, options }
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
        match self.options.algorithm {
            Algorithm::Mce => {
                unit_starts(text, &mut scratch.starts);
                self.mce_choices(text, scratch);
            }
            Algorithm::Fmm => self.fmm_choices(text, scratch),
        }
        let mut i = 0usize;
        while i < text.len() {
            let id = scratch.choice[i];
            out.push(id);
            i += self.vocab.token_len(id);
        }
    }

    /// Encodes `text` into a new vector.
    pub fn encode(&self, text: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(text, &mut Scratch::default(), &mut out);
        out
    }

    /// Fills `scratch.choice[i]` with the id chosen at every position `i` by the MCE program.
    ///
    /// The automaton reports the tokens starting at `i` longest first, so "ties to the largest
    /// j" is "the first minimum wins": a strict `<` suffices. The randomized comparison with the
    /// reference DP checks this.
    fn mce_choices(&self, text: &[u8], scratch: &mut Scratch) {
        let n = text.len();
        let ring = (self.vocab.max_len() + 1).next_power_of_two();
        let mask = ring - 1;
        scratch.dist.clear();
        // The ring of D and its mirror: D[q] is at q & mask and at (q & mask) + ring, so that
        // any window of up to `ring` positions is one contiguous slice.
        scratch.dist.resize(2 * ring, 0.0);
        scratch.choice.clear();
        scratch.choice.resize(n, 0);
        // Sentinel: the end of the text closes the last unit.
        scratch.starts.push(1);
        let starts = &scratch.starts[..];
        let dist = &mut scratch.dist[..];
        let choice = &mut scratch.choice[..];
        let flat = &mut scratch.flat;
        let by_len = &mut scratch.by_len;
        let id_by_len = &mut scratch.id_by_len;
        let vocab = &self.vocab;
        let pref = self.options.token_preference;
        let lambda = self.options.boundary_penalty;
        // 1 + λ for a two-unit partial crossing; None when λ = ∞ forbids it.
        let base_partial = lambda.is_finite().then_some(1.0 + lambda);
        // dist[n & mask] = D[n] = 0 (the ring starts zeroed).
        let ac = vocab.automaton();
        let mut state = ac.root();
        // s1 < s2: the first two unit starts after i (n when there is none). With them,
        // u(i, j) == 1 iff j <= s1, and u(i, j) == 2 iff s1 < j <= s2.
        let mut s1 = n;
        let mut s2 = n;
        // The state whose chain `flat` holds.
        let mut flat_state = NONE;
        for i in (0..n).rev() {
            // SAFETY (all get_unchecked below): i < n; j = i + len <= n because matches lie
            // inside the consumed text; starts has n + 1 entries; indices into dist are masked.
            let start_i = unsafe { *starts.get_unchecked(i) } != 0;
            state = ac.next(state, unsafe { *text.get_unchecked(i) });
            let mut best = f64::INFINITY;
            let mut best_id = 0u32;
            let mut p = ac.out(state);
            let cx = Candidates { i, s1, s2, start_i, starts, base_partial, mask };
            if ac.chain_len(state) > LONG_CHAIN {
                // A long chain (a run of spaces, dashes, ...): see `long_chain`.
                (best, best_id) = long_chain(ac, state, pref, flat, by_len, id_by_len, &mut flat_state, &cx, dist);
                p = NONE;
            }
            while p != NONE {
                let c = ac.pattern(p);
                p = c.next;
                offer(&cx, dist, c.len, c.id, if pref { c.eps } else { 0.0 }, &mut best, &mut best_id);
            }
            // The one-byte token is never forbidden, so best is finite.
            unsafe {
                *dist.get_unchecked_mut(i & mask) = best;
                *dist.get_unchecked_mut((i & mask) + ring) = best;
                *choice.get_unchecked_mut(i) = best_id;
            }
            if start_i {
                s2 = s1;
                s1 = i;
            }
        }
        scratch.starts.pop();
    }

    /// Fills `scratch.choice[i]` with the longest token starting at every position.
    fn fmm_choices(&self, text: &[u8], scratch: &mut Scratch) {
        let n = text.len();
        scratch.choice.clear();
        scratch.choice.resize(n, 0);
        let choice = &mut scratch.choice[..];
        let ac = self.vocab.automaton();
        let mut state = ac.root();
        for i in (0..n).rev() {
            state = ac.next(state, text[i]);
            // The first pattern is the longest; every byte is a token, so there is one.
            choice[i] = ac.pattern(ac.out(state)).id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{boundary, unit_indices};

    /// Tiny deterministic generator (xorshift) so the tests need no extra crates.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The dynamic program written out directly from SPEC section 2, O(n * L).
    fn reference(tokens: &[(u32, Vec<u8>)], text: &[u8], opt: Options) -> Vec<u32> {
        let n = text.len();
        let mut starts = Vec::new();
        unit_starts(text, &mut starts);
        let w = unit_indices(&starts);
        let find = |s: &[u8]| tokens.iter().find(|t| t.1 == s).map(|t| t.0);
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
        let mut d = vec![f64::INFINITY; n + 1];
        let mut nxt = vec![(0usize, 0u32); n + 1];
        d[n] = 0.0;
        for i in (0..n).rev() {
            for j in i + 1..=n.min(i + maxl) {
                let Some(id) = find(&text[i..j]) else { continue };
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
