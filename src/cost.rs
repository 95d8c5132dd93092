//! The cost of a token in the min-cost encoding: the paper's equation (3), SPEC section 2. This
//! module is the one home of the unit-crossing rule; MCE, counting and the evaluation's
//! boundary-crossing metric all use it.
//!
//! For the candidate token `t = x[i:j]`, let `u` be the number of word-like units it touches and
//! `a` whether it covers whole units only (it starts at a unit start and `j` is a unit start or
//! the end of the text). Then
//!
//! ```text
//! p(i, j) = 0   when u == 1 or a        (inside one unit, or whole units)
//!         = λ   when u == 2 and not a   (a partial crossing of two units)
//!         = +∞  when u >= 3 and not a   (forbidden)
//! c(i, j) = 1 + p(i, j) + ε(t)          computed as (1 + p) + ε in double precision
//! ```
//!
//! where `ε(t) = 0.1 / (10 + 10000 / (1 + 0.01 t))` for token id `t` (0 when the token preference
//! is off). λ = ∞ forbids partial crossings too.

/// How a candidate token lies over the word-like units (the cases of `p(i, j)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crossing {
    /// Inside one unit, or whole units only: `p = 0`.
    Free,
    /// Two units, not whole: `p = λ`.
    Partial,
    /// Three or more units, not whole: never used.
    Forbidden,
}

/// The crossing class of a candidate that touches `units` units (at least 1) and covers whole
/// units only when `whole`.
#[inline(always)]
pub fn crossing(units: usize, whole: bool) -> Crossing {
    if units <= 1 || whole {
        Crossing::Free
    } else if units == 2 {
        Crossing::Partial
    } else {
        Crossing::Forbidden
    }
}

/// The crossing class of `x[i:j]` (`i < j <= n`) read directly off the unit start flags
/// (`starts[k] != 0` when byte `k` starts a unit; `starts` has `n` or `n + 1` entries, the end
/// of the text counts as a unit start). O(j - i); the encoder keeps an incremental form
/// ([`UnitWindow`]).
#[cfg_attr(not(feature = "python"), allow(dead_code))] // the evaluation binding uses it
pub fn crossing_of(starts: &[u8], i: usize, j: usize) -> Crossing {
    debug_assert!(i < j);
    let units = 1 + starts[i + 1..j].iter().filter(|&&s| s != 0).count();
    let end_starts = j >= starts.len() || starts[j] != 0;
    crossing(units, starts[i] != 0 && end_starts)
}

/// ε(t) of SPEC section 2 for token id `t`.
#[inline]
pub fn token_preference(t: u32) -> f64 {
    0.1 / (10.0 + 10000.0 / (1.0 + 0.01 * t as f64))
}

/// The cost function of one set of options (λ, ε on or off).
#[derive(Clone, Copy, Debug)]
pub struct Costs {
    /// `1 + λ` (∞ when λ = ∞).
    partial: f64,
    pref: bool,
}

impl Costs {
    /// `boundary_penalty` is λ (>= 0, may be ∞); `token_preference` turns ε(t) on.
    pub fn new(boundary_penalty: f64, token_preference: bool) -> Self {
        Costs { partial: 1.0 + boundary_penalty, pref: token_preference }
    }

    /// Whether partial crossings can be used at all (λ finite).
    #[inline(always)]
    pub fn partial_allowed(self) -> bool {
        self.partial.is_finite()
    }

    /// `1 + p(i, j)` for a class that is not forbidden; `1 + λ` for partial crossings.
    #[inline(always)]
    pub fn base(self, partial: bool) -> f64 {
        if partial {
            self.partial
        } else {
            1.0
        }
    }

    /// ε of a token whose ε(t) is `eps` (precomputed by [`token_preference`]): `eps`, or 0
    /// when the preference is off.
    #[inline(always)]
    pub fn eps(self, eps: f64) -> f64 {
        if self.pref {
            eps
        } else {
            0.0
        }
    }

    /// `c(i, j)` of equation (3) for a token in class `class` whose ε(t) is `eps` (as
    /// [`token_preference`] gives it, stored beside the token); None when forbidden.
    #[inline(always)]
    pub fn cost_with(self, class: Crossing, eps: f64) -> Option<f64> {
        match class {
            Crossing::Free => Some(1.0 + self.eps(eps)),
            Crossing::Partial if self.partial_allowed() => Some(self.partial + self.eps(eps)),
            _ => None,
        }
    }

    /// `c(i, j)` for a class that is not forbidden (free, or partial with λ finite): the same
    /// arithmetic as [`Self::cost_with`], for callers that know the class is allowed.
    #[inline(always)]
    pub fn cost_of(self, partial: bool, eps: f64) -> f64 {
        self.base(partial) + self.eps(eps)
    }

    /// A lower bound of `c(i, j)` for every token whose ε(t) is at least `min_eps`, free
    /// (`partial == false`) or partial; ∞ for partial when partial crossings are forbidden. By
    /// monotone rounding, `lower_bound(..) + d <= c(i, j) + d` for any `d`.
    #[inline(always)]
    pub fn lower_bound(self, partial: bool, min_eps: f64) -> f64 {
        self.base(partial) + self.eps(min_eps)
    }
}

/// The unit context of position `i` for the candidates `x[i:i+l]`, kept incrementally while the
/// encoder walks the text right to left (the same rule as [`crossing_of`]).
///
/// With `s1 < s2` the first two unit starts after `i` (the end of the text when there is none),
/// `u(i, i+l) == 1` iff `i + l <= s1` and `u == 2` iff `s1 < i + l <= s2`; whole units iff
/// `starts[i]` and `starts[i + l]`.
#[derive(Clone, Copy, Debug)]
pub struct UnitWindow {
    s1: usize,
    s2: usize,
    start_i: bool,
    /// Bit `l - 1`: whether `i + l` starts a unit, for `l` in 1..=64.
    ahead: u64,
    /// The first position after `i` that starts no unit (`usize::MAX`: none up to the end).
    inner: usize,
}

impl UnitWindow {
    /// The context past the end of a text of `n` bytes (before the first `enter`).
    pub fn new(n: usize) -> Self {
        UnitWindow { s1: n, s2: n, start_i: false, ahead: 0, inner: usize::MAX }
    }

    /// The context past position `q` for candidates that end at `q` at the latest (a piece
    /// `x[..q]`); `start_q` is the start flag of byte `q` (true at the end of the text).
    pub fn ending_at(q: usize, start_q: bool) -> Self {
        UnitWindow { inner: if start_q { usize::MAX } else { q }, ..Self::new(q) }
    }

    /// Moves to position `i` from `i + 1`: `start_i` and `start_next` are the start flags of
    /// bytes `i` and `i + 1` (the end of the text counts as a start).
    #[inline(always)]
    pub fn enter(&mut self, start_i: bool, start_next: bool) {
        self.ahead = (self.ahead << 1) | start_next as u64;
        self.start_i = start_i;
    }

    /// Leaves position `i` (moving left): `i` becomes the first start after the next position.
    #[inline(always)]
    pub fn leave(&mut self, i: usize) {
        if self.start_i {
            self.s2 = self.s1;
            self.s1 = i;
        } else {
            self.inner = i;
        }
    }

    /// The class of `x[i:j]`; `start_j` is the start flag of `j`.
    #[inline(always)]
    pub fn class(&self, j: usize, start_j: bool) -> Crossing {
        if j <= self.s1 || (self.start_i && start_j) {
            Crossing::Free
        } else if j <= self.s2 {
            Crossing::Partial
        } else {
            Crossing::Forbidden
        }
    }

    /// Whether every candidate `x[i:i+l]` with `l <= longest` is free (`i + longest <= n`,
    /// and at most the piece's end given to [`Self::ending_at`]): inside the first unit, or
    /// whole units (every byte `i + 1 ..= i + longest` starts one).
    #[inline(always)]
    pub fn free_up_to(&self, i: usize, longest: usize) -> bool {
        i + longest <= self.s1 || (self.start_i && i + longest < self.inner)
    }

    /// The classes of all lengths 1..=64 at position `i` as bit masks (bit `l - 1`): `(free,
    /// partial)`; lengths in neither are forbidden.
    #[inline(always)]
    pub fn masks(&self, i: usize) -> (u64, u64) {
        let upto = |k: usize| if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
        let free = upto(self.s1 - i) | if self.start_i { self.ahead } else { 0 };
        let partial = !free & upto(self.s2 - i);
        (free, partial)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::unit_starts;

    #[test]
    fn rules_of_the_paper() {
        // co-advisor: units co, -, advisor
        let mut s = Vec::new();
        unit_starts(b"co-advisor", &mut s);
        assert_eq!(crossing_of(&s, 0, 10), Crossing::Free); // co-advisor (whole)
        assert_eq!(crossing_of(&s, 1, 3), Crossing::Partial); // o-
        assert_eq!(crossing_of(&s, 1, 5), Crossing::Forbidden); // o-ad
        assert_eq!(crossing_of(&s, 3, 5), Crossing::Free); // ad
        assert_eq!(crossing_of(&s, 0, 3), Crossing::Free); // co- (whole units)
        let c = Costs::new(0.05, true);
        let e = token_preference(7);
        assert_eq!(c.cost_with(Crossing::Free, e), Some(1.0 + e));
        assert_eq!(c.cost_with(Crossing::Partial, e), Some((1.0 + 0.05) + e));
        assert_eq!(c.cost_with(Crossing::Forbidden, e), None);
        assert_eq!(Costs::new(f64::INFINITY, false).cost_with(Crossing::Partial, e), None);
        assert_eq!(Costs::new(0.3, false).cost_with(Crossing::Free, e), Some(1.0));
        assert_eq!(c.cost_of(true, e), (1.0 + 0.05) + e);
        assert!(c.lower_bound(true, 0.0) <= c.cost_of(true, e));
    }

    #[test]
    fn window_matches_direct_rule() {
        let text = "co-advisor 12 漢字 e\u{301}x--  ab\u{e31}c,d".as_bytes();
        let mut starts = Vec::new();
        unit_starts(text, &mut starts);
        let n = text.len();
        starts.push(1);
        let mut w = UnitWindow::new(n);
        for i in (0..n).rev() {
            w.enter(starts[i] != 0, starts[i + 1] != 0);
            for longest in 1..=n - i {
                // Inside the first unit, or whole units only (then every candidate is free).
                let s1 = (i + 1..=n).find(|&k| starts[k] != 0).unwrap_or(n);
                let want = i + longest <= s1 || (starts[i] != 0 && !starts[i + 1..=i + longest].contains(&0));
                assert_eq!(w.free_up_to(i, longest), want, "free_up_to({i}, {longest})");
                assert!(!want || (i + 1..=i + longest).all(|j| crossing_of(&starts, i, j) == Crossing::Free));
            }
            let (free, partial) = w.masks(i);
            for j in i + 1..=n {
                let want = crossing_of(&starts, i, j);
                assert_eq!(w.class(j, starts[j] != 0), want, "{i}..{j}");
                if j - i <= 64 {
                    let bit = 1u64 << (j - i - 1);
                    let got = if free & bit != 0 {
                        Crossing::Free
                    } else if partial & bit != 0 {
                        Crossing::Partial
                    } else {
                        Crossing::Forbidden
                    };
                    assert_eq!(got, want, "masks {i}..{j}");
                }
            }
            w.leave(i);
        }
    }
}
