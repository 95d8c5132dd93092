"""A slow, obviously-correct reference of SPEC section 2 (units, boundary penalty, MCE, FMM).

Written straight from the SPEC and the paper's equations (2)-(4), in pure Python, without using the
package. Unit annotation uses ``unicodedata.category`` (Python's Unicode 14.0 tables) for the
General Category and the ``regex`` module's ``\\p{Script=...}`` (the Script property, not
Script_Extensions) for the script.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Dict, List, Optional, Sequence, Tuple

import regex

__all__ = [
    "NONJOINING_SCRIPTS", "char_joins", "char_spans", "unit_starts", "unit_indices",
    "boundary_penalty", "token_preference", "candidates", "mce_encode", "fmm_encode", "encode",
    "RefTokenizer",
]

NONJOINING_SCRIPTS = ("Han", "Hiragana", "Katakana", "Bopomofo")
_NONJOINING_SCRIPT_RE = regex.compile(
    "[" + "".join(r"\p{Script=%s}" % s for s in NONJOINING_SCRIPTS) + "]")


def char_joins(ch: str) -> bool:
    """SPEC 2: a character joins when its General Category is L* or M* and its Script is not
    Han, Hiragana, Katakana or Bopomofo."""
    assert len(ch) == 1
    if unicodedata.category(ch)[0] not in ("L", "M"):
        return False
    return _NONJOINING_SCRIPT_RE.match(ch) is None


def char_spans(data: bytes) -> List[Tuple[int, int, Optional[str]]]:
    """Splits ``data`` into (start, end, char) spans: one per valid UTF-8 character, and one per
    byte that is not part of a valid UTF-8 sequence (char None).

    Python's strict UTF-8 decoder with ``surrogateescape`` turns every byte that is not part of a
    valid sequence into exactly one lone surrogate U+DC80..U+DCFF, so the spans follow directly.
    """
    text = data.decode("utf-8", errors="surrogateescape")
    spans = []
    pos = 0
    for ch in text:
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:
            # A strict UTF-8 decoder never yields a surrogate from valid input (ED A0..BF .. is
            # invalid), so a surrogate here always stands for one escaped invalid byte.
            spans.append((pos, pos + 1, None))
            pos += 1
        else:
            ln = len(ch.encode("utf-8"))
            spans.append((pos, pos + ln, ch))
            pos += ln
    assert pos == len(data)
    return spans


def unit_starts(data: bytes) -> List[int]:
    """1 where byte i is the first byte of its unit, else 0 (SPEC section 2)."""
    starts = [0] * len(data)
    prev_joins = False
    for a, b, ch in char_spans(data):
        joins = ch is not None and char_joins(ch)
        starts[a] = 0 if (joins and prev_joins) else 1
        prev_joins = joins
    return starts


def unit_indices(starts: Sequence[int]) -> List[int]:
    """w[i]: the unit index of byte i."""
    w = []
    u = -1
    for s in starts:
        if s:
            u += 1
        w.append(u)
    return w


def boundary_penalty(starts: Sequence[int], w: Sequence[int], i: int, j: int, lam: float
                     ) -> Optional[float]:
    """p(i, j) of SPEC section 2 / paper equation (2); None when forbidden."""
    n = len(starts)
    assert 0 <= i < j <= n
    u = w[j - 1] - w[i] + 1
    first = starts[i] == 1
    last = (j == n) or starts[j] == 1
    a = first and last
    if u == 1 or a:
        return 0.0
    if u == 2:
        return lam
    return None


def token_preference(t: int) -> float:
    """ε(t) = 0.1 / (10 + 10000 / (1 + 0.01 * t))."""
    return 0.1 / (10 + 10000 / (1 + 0.01 * t))


def candidates(vocab: Dict[bytes, int], data: bytes) -> List[List[Tuple[int, int]]]:
    """For every position i, the (j, id) pairs with x[i:j] in the vocabulary, j increasing."""
    n = len(data)
    maxlen = max(len(t) for t in vocab)
    out = []
    for i in range(n):
        here = []
        for j in range(i + 1, min(n, i + maxlen) + 1):
            t = vocab.get(data[i:j])
            if t is not None:
                here.append((j, t))
        out.append(here)
    return out


def mce_encode(vocab: Dict[bytes, int], data: bytes, lam: float = 0.05,
               token_preference_on: bool = True,
               cands: Optional[List[List[Tuple[int, int]]]] = None,
               starts: Optional[Sequence[int]] = None) -> List[int]:
    """The dynamic program of SPEC section 2, written out directly.

    ``cands`` (from :func:`candidates`) and ``starts`` (from :func:`unit_starts`) may be passed
    in to save time when the same text is encoded under several options.
    """
    n = len(data)
    if n == 0:
        return []
    if cands is None:
        cands = candidates(vocab, data)
    if starts is None:
        starts = unit_starts(data)
    w = unit_indices(starts)
    D = [math.inf] * (n + 1)
    choice: List[Tuple[int, int]] = [(-1, -1)] * (n + 1)
    D[n] = 0.0
    for i in range(n - 1, -1, -1):
        best = math.inf
        best_choice = (-1, -1)
        for j, t in cands[i]:
            p = boundary_penalty(starts, w, i, j, lam)
            if p is None or math.isinf(p):  # forbidden (λ = inf forbids partial crossings)
                continue
            eps = token_preference(t) if token_preference_on else 0.0
            c = 1.0 + p + eps
            total = c + D[j]
            if total <= best:  # j increases: on a tie the largest j wins
                best = total
                best_choice = (j, t)
        assert best_choice[0] > i, "single bytes must be in the vocabulary"
        D[i] = best
        choice[i] = best_choice
    out = []
    i = 0
    while i < n:
        j, t = choice[i]
        out.append(t)
        i = j
    return out


def fmm_encode(vocab: Dict[bytes, int], data: bytes) -> List[int]:
    """Forward maximum matching: the longest vocabulary entry at each step, no unit rules."""
    maxlen = max(len(t) for t in vocab)
    out = []
    i = 0
    n = len(data)
    while i < n:
        for ln in range(min(maxlen, n - i), 0, -1):
            t = vocab.get(data[i:i + ln])
            if t is not None:
                out.append(t)
                i += ln
                break
        else:
            raise AssertionError("single bytes must be in the vocabulary")
    return out


def encode(vocab: Dict[bytes, int], data: bytes, algorithm: str = "mce", lam: float = 0.05,
           token_preference_on: bool = True) -> List[int]:
    if algorithm == "fmm":
        return fmm_encode(vocab, data)
    assert algorithm == "mce"
    return mce_encode(vocab, data, lam, token_preference_on)


class RefTokenizer:
    """Reference tokenizer over ``tokens`` (id = list index) with optional special tokens."""

    def __init__(self, tokens: Sequence[bytes], algorithm: str = "mce", boundary_penalty: float = 0.05,
                 token_preference: bool = True, special_tokens: Optional[Dict[str, int]] = None):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        assert len(self.vocab) == len(tokens)
        self.algorithm = algorithm
        self.lam = boundary_penalty
        self.eps = token_preference
        self.special_tokens = dict(special_tokens or {})

    def encode_bytes(self, data: bytes, allowed: Sequence[str] = ()) -> List[int]:
        specials = sorted((s.encode("utf-8") for s in allowed), key=len, reverse=True)
        out: List[int] = []
        piece_start = 0
        i = 0
        while i < len(data):
            hit = next((s for s in specials if data.startswith(s, i)), None)  # leftmost-longest
            if hit is None:
                i += 1
                continue
            out += encode(self.vocab, data[piece_start:i], self.algorithm, self.lam, self.eps)
            out.append(self.special_tokens[hit.decode("utf-8")])
            i += len(hit)
            piece_start = i
        out += encode(self.vocab, data[piece_start:], self.algorithm, self.lam, self.eps)
        return out

    def encode(self, text: str, allowed: Sequence[str] = ()) -> List[int]:
        return self.encode_bytes(text.encode("utf-8"), allowed)
