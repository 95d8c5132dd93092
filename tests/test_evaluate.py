"""Tests of cnfmce.evaluation (cnfmce.evaluate, cnfmce.compare), cnfmce.adapters and cnfmce.eval_cli.

Every metric is checked on small examples whose values are worked out by hand in the comments,
then against a slow, direct re-implementation of the definitions on random texts and random
segmentations (units from tests/reference.py, written from the SPEC without the package).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import random
import sys
import unicodedata
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pytest

import cnfmce
from cnfmce.adapters import (CnfmceEncoder, Encoder, HFEncoder, SentencePieceEncoder,
                             TiktokenEncoder, as_encoder, load_encoder)
from cnfmce.evaluation import (compare, crossing_count, digit_alignment, edit_distance, evaluate,
                             fairness_gini, gini, language_costs, renyi_efficiency, renyi_entropy)
from cnfmce.eval_cli import add_eval_parser, main_eval

import reference as ref
from conftest import REPO, shared_path

sys.path.append(str(REPO / "benches"))


# --- helpers --------------------------------------------------------------------------------------

def make_tok(extra: Sequence[bytes]) -> cnfmce.Tokenizer:
    """Ids 0..255 are the single bytes, then ``extra`` in order (256, 257, ...)."""
    return cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + list(extra))


def seg_ids(tok: cnfmce.Tokenizer, pieces: Sequence[bytes]) -> List[int]:
    ids = [tok.token_to_id(p) for p in pieces]
    assert None not in ids, pieces
    return ids  # type: ignore[return-value]


def ev1(tok, text: str, pieces: Sequence[bytes], **kw) -> Dict:
    """evaluate() of one document segmented into ``pieces``."""
    assert b"".join(pieces) == text.encode()
    return evaluate(tok, [text], encodings=[seg_ids(tok, pieces)], **kw)


class ToyEncoder(Encoder):
    """A normalising encoder: lower-cases, then one token per character; decodes the tokens."""

    kind = "toy"

    def __init__(self) -> None:
        super().__init__("toy")
        self.vocab = [chr(c) for c in range(128)] + ["é", "你"]
        self.index = {c: i for i, c in enumerate(self.vocab)}

    def encode(self, text: str) -> List[int]:
        return [self.index[c] for c in text.lower()]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.vocab[i] for i in ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self.vocab[token_id].encode()

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def id_bound(self) -> int:
        return len(self.vocab)


# --- compression ----------------------------------------------------------------------------------

def test_compression_counts_by_hand():
    tok = make_tok([b"ab", b" cd", b"\xc3\xa9\xc3\xa9"])
    docs = ["ab cd", "éé x"]
    enc = [seg_ids(tok, [b"ab", b" cd"]), seg_ids(tok, [b"\xc3\xa9\xc3\xa9", b" ", b"x"])]
    r = evaluate(tok, docs, encodings=enc)
    # chars 5 + 4 = 9, bytes 5 + 6 = 11, tokens 2 + 3 = 5, words 2 + 2 = 4
    assert (r["docs"], r["chars"], r["bytes"], r["tokens"], r["words"]) == (2, 9, 11, 5, 4)
    assert r["chars_per_token"] == pytest.approx(9 / 5)        # Eq. 5: ratio of totals
    assert r["bytes_per_token"] == pytest.approx(11 / 5)
    assert r["tokens_per_kchar"] == pytest.approx(1000 * 5 / 9)
    assert r["fertility"] == pytest.approx(5 / 4)
    assert r["fertility_doc_mean"] == pytest.approx((2 / 2 + 3 / 2) / 2)
    assert r["token_length_bytes"] == pytest.approx(11 / 5)
    assert r["token_length_doc_mean"] == pytest.approx((5 / 2 + 6 / 3) / 2)
    assert r["roundtrip_exact_match"] == 1.0 and r["byte_mismatch_docs"] == 0


def test_empty_inputs_give_none_not_zero():
    tok = make_tok([])
    r = evaluate(tok, [])
    assert r["docs"] == 0 and r["tokens"] == 0
    for k in ("chars_per_token", "fertility", "boundary_crossing_rate", "utf8_token_integrity",
              "roundtrip_exact_match", "three_digit_f1", "renyi_efficiency_2"):
        assert r[k] is None, k
    r = evaluate(tok, ["", "   "])
    assert r["docs"] == 2 and r["tokens"] == 3 and r["words"] == 0 and r["fertility"] is None
    assert r["roundtrip_exact_match"] == 1.0


# --- vocabulary usage and Rényi efficiency --------------------------------------------------------

def test_vocab_utilization_and_renyi_by_hand():
    tok = make_tok([b"aa"])
    # ids: "aa", "aa", "b", "c"  ->  p = (1/2, 1/4, 1/4)
    r = ev1(tok, "aaaabc", [b"aa", b"aa", b"b", b"c"], vocab_size=8, alphas=(1.0, 2.0, 2.5))
    assert r["vocab_size"] == 8 and r["distinct_ids"] == 3
    assert r["vocab_utilization"] == pytest.approx(3 / 8)
    sq = 0.5 ** 2 + 2 * 0.25 ** 2                                # 0.375
    assert r["renyi_efficiency_2"] == pytest.approx(-math.log2(sq) / 3)          # log2 8 = 3
    s25 = 0.5 ** 2.5 + 2 * 0.25 ** 2.5
    assert r["renyi_efficiency_2.5"] == pytest.approx(math.log2(s25) / (1 - 2.5) / 3)
    assert r["renyi_efficiency_1"] == pytest.approx(1.5 / 3)     # Shannon entropy 1.5 bits
    # default V: the tokenizer's declared size (256 bytes + "aa")
    r = ev1(tok, "aaaabc", [b"aa", b"aa", b"b", b"c"])
    assert r["vocab_size"] == 257
    assert r["renyi_efficiency_2"] == pytest.approx(-math.log2(sq) / math.log2(257))


def test_renyi_matches_tokenization_scorer_formula():
    # tokenization-scorer: scale * log2(sum(p ** power)) / log2(vocab), scale = 1 / (1 - power)
    rng = random.Random(5)
    counts = [rng.randint(0, 50) for _ in range(40)]
    p = np.array([c for c in counts if c]) / sum(counts)
    for power in (2.0, 2.5, 3.0):
        want = 1 / (1 - power) * np.log2(np.sum(p ** power)) / np.log2(1000)
        assert renyi_efficiency(counts, power, 1000) == pytest.approx(want)
    assert renyi_entropy([0, 0], 2.0) is None
    assert renyi_efficiency([4], 2.0, 1) is None
    assert renyi_entropy([1, 1, 1, 1], 2.0) == pytest.approx(2.0)   # uniform over 4: 2 bits


# --- word-unit boundary crossing (paper section 4.5) ----------------------------------------------

@pytest.mark.parametrize("text,pieces,c2,c3", [
    # "is a" touches is, ␣, ancient (u = 3) and ends inside "ancient": a crossing of both kinds
    ("is ancient", [b"is a", b"ncient"], 1, 1),
    # " anc" touches ␣ and ancient (u = 2), ends inside: crossing (u >= 2 only)
    ("is ancient", [b"is", b" anc", b"ient"], 1, 0),
    # whole units: " ancient" (␣ + ancient), "is" -- no crossing
    ("is ancient", [b"is", b" ancient"], 0, 0),
    ("is ancient", [b"is ancient"], 0, 0),
    # co-advisor: units co, -, advisor (SPEC section 2's example)
    ("co-advisor", [b"co-advisor"], 0, 0),
    ("co-advisor", [b"c", b"o-", b"advisor"], 1, 0),        # o-  : u = 2, starts inside "co"
    ("co-advisor", [b"c", b"o-ad", b"visor"], 1, 1),        # o-ad: u = 3
    ("co-advisor", [b"co", b"-advisor"], 0, 0),             # -advisor: two whole units
    # CJK characters are units of their own: "你好" is two complete units
    ("你好 ok", [b"\xe4\xbd\xa0\xe5\xa5\xbd", b" ok"], 0, 0),
    # a token ending inside a 3-byte character ends inside its unit
    ("你好", [b"\xe4\xbd\xa0\xe5", b"\xa5\xbd"], 1, 0),
])
def test_boundary_crossing_by_hand(text, pieces, c2, c3):
    tok = make_tok([p for p in pieces if len(p) > 1])
    r = ev1(tok, text, pieces)
    assert r["boundary_crossing_tokens"] == c2
    assert r["boundary_crossing_tokens_u3"] == c3
    assert r["boundary_crossing_rate"] == pytest.approx(c2 / len(pieces))
    assert r["boundary_crossing_rate_u3"] == pytest.approx(c3 / len(pieces))


def test_crossing_count_function():
    # groups: [0,2) [2,3) [3,6)
    g = bytes([1, 0, 1, 1, 0, 0])
    s = np.array([0, 1, 3, 5])
    e = np.array([1, 4, 5, 6])
    # [0,1): one group; [1,4): u = 3 partial; [3,5): one group; [5,6): one group
    assert crossing_count(g, s, e) == 1 and crossing_count(g, s, e, 3) == 1
    assert crossing_count(g, np.array([0, 2]), np.array([2, 6])) == 0   # whole groups
    assert crossing_count(g, np.array([1]), np.array([3])) == 1         # u = 2 partial
    assert crossing_count(g, np.array([1]), np.array([3]), min_groups=3) == 0
    assert crossing_count(g, np.array([2]), np.array([2])) == 0         # empty span


def test_mce_never_makes_three_unit_crossings(o200k):
    text = ("The co-advisor said: it is an ancient well-known fact, isn't it? 12,345 items "
            "(taxonomy) memory_efficient — 你好世界 naïve café.")
    r = evaluate(o200k, [text])
    assert r["boundary_crossing_rate_u3"] == 0.0
    r_fmm = evaluate(o200k.with_options(algorithm="fmm"), [text])
    assert r_fmm["boundary_crossing_tokens"] >= r["boundary_crossing_tokens"]


# --- UTF-8 integrity ------------------------------------------------------------------------------

def test_utf8_integrity_by_hand():
    # é你 = C3 A9 | E4 BD A0.  Tokens C3 | A9 E4 | BD A0 (TokEval's example): all three are
    # incomplete UTF-8; the middle one holds bytes of two characters and completes neither.
    tok = make_tok([b"\xa9\xe4", b"\xbd\xa0"])
    r = ev1(tok, "é你", [b"\xc3", b"\xa9\xe4", b"\xbd\xa0"])
    assert r["utf8_token_integrity"] == 0.0 and r["utf8_incomplete_tokens"] == 3
    assert r["char_boundary_crossing_rate"] == pytest.approx(1 / 3)
    assert (r["multibyte_chars"], r["multibyte_chars_split"]) == (2, 2)
    assert r["multibyte_split_rate"] == 1.0
    # caf|é: both complete; "é" is not split
    tok = make_tok([b"caf", b"\xc3\xa9"])
    r = ev1(tok, "café", [b"caf", b"\xc3\xa9"])
    assert r["utf8_token_integrity"] == 1.0 and r["char_boundary_crossing_rate"] == 0.0
    assert (r["multibyte_chars"], r["multibyte_chars_split"]) == (1, 0)
    # byte fallback: caf | C3 | A9  ->  2 of 3 tokens incomplete, but no token crosses a character
    tok = make_tok([b"caf"])
    r = ev1(tok, "café", [b"caf", b"\xc3", b"\xa9"])
    assert r["utf8_token_integrity"] == pytest.approx(1 / 3)
    assert r["char_boundary_crossing_rate"] == 0.0
    assert r["multibyte_split_rate"] == 1.0
    # 你好 with 你 in three byte tokens and 好 whole: 1 of 2 characters split (TokEval's example)
    tok = make_tok([b"\xe5\xa5\xbd"])
    r = ev1(tok, "你好", [b"\xe4", b"\xbd", b"\xa0", b"\xe5\xa5\xbd"])
    assert r["multibyte_split_rate"] == 0.5
    # a 4-byte character split 1+3 and a 2-byte one whole
    tok = make_tok([b"\x9f\x98\x80", b"\xc3\xa9"])
    r = ev1(tok, "😀é", [b"\xf0", b"\x9f\x98\x80", b"\xc3\xa9"])
    assert (r["multibyte_chars"], r["multibyte_chars_split"]) == (2, 1)
    assert r["utf8_token_integrity"] == pytest.approx(1 / 3)


# --- round trip and byte alignment ----------------------------------------------------------------

def test_roundtrip_and_mismatch_are_counted_honestly():
    enc = ToyEncoder()
    r = evaluate(enc, ["abc", "ABC", "é你 x"])
    # "ABC" decodes to "abc": one round-trip failure, and its token bytes differ from the text
    assert r["roundtrip_exact_match"] == pytest.approx(2 / 3) and r["roundtrip_failures"] == 1
    assert r["byte_mismatch_docs"] == 1
    # metrics are computed on the token bytes: every token is one whole character
    assert r["utf8_token_integrity"] == 1.0 and r["multibyte_split_rate"] == 0.0
    assert r["tokens"] == 3 + 3 + 4 and r["chars_per_token"] == pytest.approx(10 / 10)


# --- three-digit boundary alignment ---------------------------------------------------------------

@pytest.mark.parametrize("pieces,f1,tp,npred,nideal", [
    ([b"1", b"234", b"567"], 1.0, 2, 2, 2),          # 1|234|567: P = I = {1, 4}
    ([b"12", b"345", b"67"], 0.0, 0, 2, 2),          # TokEval's example: P = {2, 5}
    ([b"1234567"], 0.0, 0, 0, 2),                    # kept whole: nothing predicted
    ([b"123", b"4567"], 0.0, 0, 1, 2),               # left-to-right 3-digit chunks
    ([b"1", b"2", b"3", b"4", b"5", b"6", b"7"], 2 * 2 / (6 + 2), 2, 6, 2),   # digit by digit
])
def test_three_digit_f1_one_number(pieces, f1, tp, npred, nideal):
    tok = make_tok([p for p in pieces if len(p) > 1])
    r = ev1(tok, "1234567", pieces)
    assert r["digit_runs"] == 1
    assert r["three_digit_f1"] == pytest.approx(f1)
    assert r["three_digit_precision"] == (tp / npred if npred else None)
    assert r["three_digit_recall"] == pytest.approx(tp / nideal)


def test_three_digit_f1_over_a_document():
    # "v 42, 4|2, 12|345 x9": runs 42 (whole: F1 1), 42 split (F1 0), 12345 (P = {2}, I = {2}:
    # F1 1), 9 (F1 1). The token " 1" starts before the run: only boundaries strictly inside count.
    text = "v 42, 42, 12345 x9"
    pieces = [b"v", b" 42", b",", b" 4", b"2", b",", b" 12", b"345", b" x", b"9"]
    tok = make_tok([p for p in pieces if len(p) > 1])
    r = ev1(tok, text, pieces)
    assert r["digit_runs"] == 4
    assert r["three_digit_f1"] == pytest.approx((1 + 0 + 1 + 1) / 4)   # TokEval's mean_f1
    # pooled: TP = 1, |P| = 1 + 1 = 2, |I| = 1  ->  P = 1/2, R = 1, F1 = 2/3
    assert r["three_digit_precision"] == pytest.approx(1 / 2)
    assert r["three_digit_recall"] == pytest.approx(1.0)
    assert r["three_digit_f1_micro"] == pytest.approx(2 / 3)


def test_three_digit_f1_unicode_digits():
    # Arabic-Indic digits (2 bytes each): ١٢٣٤ has I = {1}; a cut after the first digit is right,
    # a cut inside a digit's bytes is a wrong boundary.
    text = "١٢٣٤"
    b = text.encode()
    tok = make_tok([b[:2], b[2:], b[:3], b[3:]])
    r = ev1(tok, text, [b[:2], b[2:]])
    assert r["three_digit_f1"] == 1.0
    r = ev1(tok, text, [b[:3], b[3:]])
    assert r["three_digit_f1"] == 0.0 and r["three_digit_precision"] == 0.0


def test_digit_alignment_function():
    # ASCII: positions are byte offsets; tokens start at 0, 1, 4
    n, f1, tp, p, i = digit_alignment("1234567", None, np.array([0, 1, 4]))
    assert (n, f1, tp, p, i) == (1, 1.0, 2, 2, 2)
    assert digit_alignment("no digits", None, np.array([0])) == (0, 0.0, 0, 0, 0)


# --- fairness Gini --------------------------------------------------------------------------------

def test_gini_by_hand():
    # c = (1, 2, 3): sum_ij |ci - cj| = 2 * (1 + 2 + 1) = 8, mu = 2  ->  8 / (2 * 9 * 2)
    assert gini([1, 2, 3]) == pytest.approx(8 / 36)
    assert gini([2, 2, 2]) == 0.0
    assert gini([1]) is None and gini([]) is None and gini([0, 0]) is None
    # (n - 1) / n is the maximum
    assert gini([0, 0, 0, 5]) == pytest.approx(3 / 4)
    rng = random.Random(3)
    for _ in range(20):
        c = [rng.random() for _ in range(rng.randint(2, 9))]
        mu = sum(c) / len(c)
        want = sum(abs(x - y) for x in c for y in c) / (2 * len(c) ** 2 * mu)
        assert gini(c) == pytest.approx(want)


def test_fairness_gini_by_hand():
    enc = ToyEncoder()   # one token per character
    docs = ["abcd", "éé", "x y", "  "]
    langs = ["en", "fr", "en", "de"]
    # en: 4 + 3 tokens over 4 + 3 bytes -> 1.0; fr: 2 tokens / 4 bytes -> 0.5; de is blank: left out
    costs = language_costs(enc, docs, langs)
    assert costs == {"en": 1.0, "fr": 0.5}
    # |1 - 0.5| * 2 / (2 * 2^2 * 0.75) = 1/6
    assert fairness_gini(enc, docs, langs) == pytest.approx(1 / 6)
    # per character: fr costs 2 / 2 = 1.0 too -> parity
    assert fairness_gini(enc, docs, langs, unit="chars") == 0.0
    r = evaluate(enc, docs, langs=langs)
    assert r["fairness_gini"] == pytest.approx(1 / 6) and r["language_costs"] == costs
    assert r["per_language"]["en"]["tokens"] == 7
    assert fairness_gini(enc, ["abc"], ["en"]) is None     # one language: undefined
    with pytest.raises(ValueError):
        evaluate(enc, ["a", "b"], langs=["en"])


# --- edit distance, distance and agreement --------------------------------------------------------

def naive_lev(a: Sequence, b: Sequence) -> int:
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            cur = d[j]
            d[j] = min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
            prev = cur
    return d[-1]


def numpy_lev(a: Sequence[int], b: Sequence[int]) -> int:
    """Row-by-row exact DP: D[i][j] = min_k<=j (E[k] + j - k), E = min(up + 1, diag + cost)."""
    a_ = np.asarray(a)
    b_ = np.asarray(b)
    j = np.arange(len(b_) + 1)
    row = j.copy()
    for i in range(1, len(a_) + 1):
        e = np.empty_like(row)
        e[0] = i
        e[1:] = np.minimum(row[1:] + 1, row[:-1] + (b_ != a_[i - 1]))
        row = np.minimum.accumulate(e - j) + j
    return int(row[-1])


def test_edit_distance_known_values():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], [1, 2, 3]) == 3 and edit_distance([1, 2], []) == 2
    assert edit_distance([1, 2, 3], [1, 2, 3]) == 0
    assert edit_distance([1, 2, 3], [3, 2, 1]) == 2
    assert edit_distance(["ab", "cd"], ["ab", "c", "d"]) == 2
    assert edit_distance([(1, 2), (3,)], [(1, 2), (4,)]) == 1   # any hashable elements


def test_edit_distance_random_against_naive_dp():
    rng = random.Random(12345)
    for trial in range(1500):
        k = rng.choice([1, 2, 3, 5, 20, 10**6])
        a = [rng.randint(0, k) for _ in range(rng.randint(0, 70))]
        if trial % 3 == 0:   # similar sequences: edits of a
            b = list(a)
            for _ in range(rng.randint(0, 8)):
                op = rng.randint(0, 2)
                pos = rng.randint(0, len(b))
                if op == 0:
                    b.insert(pos, rng.randint(0, k))
                elif b and pos < len(b):
                    if op == 1:
                        del b[pos]
                    else:
                        b[pos] = rng.randint(0, k)
        else:
            b = [rng.randint(0, k) for _ in range(rng.randint(0, 70))]
        assert edit_distance(a, b) == naive_lev(a, b), (a, b)
        assert edit_distance(b, a) == naive_lev(a, b)


def test_edit_distance_long_against_numpy_dp():
    rng = random.Random(7)
    for m, n, k in ((1500, 1700, 50), (2000, 1990, 3), (64, 3000, 10), (700, 65, 2)):
        a = [rng.randint(0, k) for _ in range(m)]
        b = [rng.randint(0, k) for _ in range(n)]
        assert edit_distance(a, b) == numpy_lev(a, b)
        # similar: a shifted copy with sprinkled substitutions
        c = a[5:] + a[:5]
        for i in range(0, len(c), 37):
            c[i] = -1
        assert edit_distance(a, c) == numpy_lev(a, c)


def test_compare_by_hand():
    tok = make_tok([b"ab", b"cd"])
    # doc 1: ab|cd vs ab|c|d  -> lev 2 (cd -> c, insert d), longer 3;
    #        bytes a b c d: ids ab ab cd cd vs ab ab c d -> 2 of 4 agree
    # doc 2: x|y vs x|y      -> lev 0, longer 2; 2 of 2 agree
    docs = ["abcd", "xy"]
    ea = [seg_ids(tok, [b"ab", b"cd"]), seg_ids(tok, [b"x", b"y"])]
    eb = [seg_ids(tok, [b"ab", b"c", b"d"]), seg_ids(tok, [b"x", b"y"])]
    r = compare(tok, tok, docs, encodings_a=ea, encodings_b=eb)
    assert r["edit_distance"] == 2 and r["max_length"] == 5
    assert r["distance"] == pytest.approx(2 / 5)                  # corpus ratio of totals
    assert r["distance_doc_mean"] == pytest.approx((2 / 3 + 0) / 2)
    assert r["agreement"] == pytest.approx((2 + 2) / (4 + 2))
    assert r["agreement_docs_skipped"] == 0 and (r["tokens_a"], r["tokens_b"]) == (4, 5)


def test_compare_mce_fmm_and_normalising_tokenizer(o200k):
    docs = ["The co-advisor said it is ancient.", "memory_efficient (taxonomy) 12345"]
    r = compare(o200k, o200k.with_options(algorithm="fmm"), docs)
    assert 0 <= r["distance"] <= 1 and 0 <= r["agreement"] <= 1
    same = compare(o200k, o200k, docs)
    assert same["distance"] == 0.0 and same["agreement"] == 1.0
    # a tokenizer whose token bytes are not the text's: that document is not byte-aligned
    r = compare(ToyEncoder(), ToyEncoder(), ["abc", "ABC"])
    assert r["agreement"] == 1.0 and r["agreement_docs_skipped"] == 0
    r = compare(ToyEncoder(), make_tok([]), ["abc", "ABC"])
    assert r["agreement_docs_skipped"] == 1 and r["agreement_bytes"] == 3


# --- every metric against a direct re-implementation ----------------------------------------------

ALPHABET = list("abcxyz ABC  ,.-'_01234567899") + ["é", "ß", "你", "好", "😀", "\u0301", "ä",
                                                     "٣", "٤", "７", "\n", "ζ", "Ж"]


def brute(text: str, pieces: List[bytes]) -> Dict[str, float]:
    """The definitions of cnfmce.evaluation, one token and one character at a time."""
    data = text.encode()
    starts = ref.unit_starts(data)
    w = ref.unit_indices(starts)
    n = len(data)
    cross2 = cross3 = incomplete = char_cross = 0
    # character index of each byte
    cidx, cstart = [], []
    for k, ch in enumerate(text):
        ln = len(ch.encode())
        cidx += [k] * ln
        cstart += [True] + [False] * (ln - 1)
    pos = 0
    bounds = set()
    for p in pieces:
        i, j = pos, pos + len(p)
        bounds.add(i)
        pos = j
        u = w[j - 1] - w[i] + 1
        a = starts[i] == 1 and (j == n or starts[j] == 1)
        cross2 += u >= 2 and not a
        cross3 += u >= 3 and not a
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            incomplete += 1
        uc = cidx[j - 1] - cidx[i] + 1
        complete_c = cstart[i] and (j == n or cstart[j])
        char_cross += uc >= 2 and not complete_c
    multi = split = 0
    bpos = 0
    for ch in text:
        ln = len(ch.encode())
        if ln >= 2:
            multi += 1
            split += any(q in bounds for q in range(bpos + 1, bpos + ln))
        bpos += ln
    # digits: character offsets -> byte offsets
    byte_of = []
    b = 0
    for ch in text:
        byte_of.append(b)
        b += len(ch.encode())
    byte_of.append(b)
    f1s = []
    tp_t = pr_t = id_t = 0
    k = 0
    while k < len(text):
        if unicodedata.category(text[k]) == "Nd":
            e = k
            while e < len(text) and unicodedata.category(text[e]) == "Nd":
                e += 1
            L = e - k
            ideal = {byte_of[k + L - 3 * m] for m in range(1, L) if L - 3 * m > 0}
            pred = {q for q in bounds if byte_of[k] < q < byte_of[e]}
            tp = len(ideal & pred)
            f1s.append(1.0 if not ideal and not pred else 2 * tp / (len(ideal) + len(pred)))
            tp_t += tp
            pr_t += len(pred)
            id_t += len(ideal)
            k = e
        else:
            k += 1
    q = len(pieces)
    return {"boundary_crossing_tokens": cross2, "boundary_crossing_tokens_u3": cross3,
            "utf8_incomplete_tokens": incomplete, "char_crossing": char_cross,
            "multibyte_chars": multi, "multibyte_chars_split": split, "digit_runs": len(f1s),
            "f1_sum": sum(f1s), "tp": tp_t, "pred": pr_t, "ideal": id_t, "tokens": q}


def test_metrics_against_brute_force_on_random_segmentations():
    rng = random.Random(2024)
    docs, segs = [], []
    for _ in range(150):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40)))
        data = text.encode()
        cuts = sorted(set(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 12))))) \
            if len(data) > 1 else []
        bounds = [0] + cuts + [len(data)]
        docs.append(text)
        segs.append([data[a:b] for a, b in zip(bounds, bounds[1:])])
    vocab = sorted({p for s in segs for p in s if len(p) > 1})
    tok = make_tok(vocab)
    r = evaluate(tok, docs, encodings=[seg_ids(tok, s) for s in segs])
    tot: Dict[str, float] = {}
    for text, s in zip(docs, segs):
        for k, v in brute(text, s).items():
            tot[k] = tot.get(k, 0) + v
    for k in ("boundary_crossing_tokens", "boundary_crossing_tokens_u3", "utf8_incomplete_tokens",
              "multibyte_chars", "multibyte_chars_split", "digit_runs", "tokens"):
        assert r[k] == tot[k], k
    assert r["char_boundary_crossing_rate"] == pytest.approx(tot["char_crossing"] / tot["tokens"])
    assert r["three_digit_f1"] == pytest.approx(tot["f1_sum"] / tot["digit_runs"])
    assert r["three_digit_precision"] == pytest.approx(tot["tp"] / tot["pred"])
    assert r["three_digit_recall"] == pytest.approx(tot["tp"] / tot["ideal"])
    assert r["chars"] == sum(len(d) for d in docs)
    assert r["roundtrip_exact_match"] == 1.0 and r["byte_mismatch_docs"] == 0


# --- adapters on the real vocabularies ------------------------------------------------------------

PLAIN = ["Hello world, this is a test of 12345 numbers.", "你好，世界！今天天气很好。",
         "mixed 中文 and English text 2024"]


@pytest.fixture(scope="module")
def tiktoken_o200k():
    pytest.importorskip("tiktoken")
    shared_path("vocabs", "o200k_base.tiktoken")
    import baselines
    return baselines.tiktoken_encoding("o200k_base")


@pytest.fixture(scope="module")
def hf_qwen():
    pytest.importorskip("tokenizers")
    shared_path("vocabs", "qwen3.5.tokenizer.json.gz")
    import baselines
    return baselines.hf_tokenizer("qwen3.5")


def test_tiktoken_adapter(tiktoken_o200k):
    enc = as_encoder(tiktoken_o200k)
    assert isinstance(enc, TiktokenEncoder) and enc.name == "tiktoken:o200k_base"
    assert enc.vocab_size == 200_000            # 199,998 ranks + 2 special tokens
    for text in PLAIN:
        ids = enc.encode(text)
        assert ids == tiktoken_o200k.encode_ordinary(text)
        assert b"".join(enc.token_bytes(i) for i in ids) == text.encode()
    assert enc.encode_batch(PLAIN) == [enc.encode(t) for t in PLAIN]
    assert enc.encode("<|endoftext|>") == tiktoken_o200k.encode_ordinary("<|endoftext|>")
    # the same encoding from a spec, ranks read from the shared file (no download)
    vocabs = shared_path("vocabs")
    spec_enc = load_encoder("tiktoken:o200k_base", vocab_dir=vocabs)
    assert spec_enc.encode(PLAIN[2]) == enc.encode(PLAIN[2])
    path_enc = load_encoder(f"tiktoken:{vocabs / 'o200k_base.tiktoken'}")
    assert path_enc.encode(PLAIN[0]) == enc.encode(PLAIN[0])
    r = evaluate(enc, PLAIN)
    assert r["roundtrip_exact_match"] == 1.0 and r["byte_mismatch_docs"] == 0
    assert r["vocab_size"] == 200_000


def test_tiktoken_spec_without_local_file_or_network_is_a_clear_error(monkeypatch, tmp_path):
    # no NAME.tiktoken in vocab_dir / $CNFMCE_VOCABS and tiktoken's own loader failing (no network
    # here): an OSError naming the encoding and the fix, not a raw HTTPS traceback
    tiktoken = pytest.importorskip("tiktoken")

    def offline(name):
        raise ConnectionError("HTTPSConnectionPool(host='openaipublic.blob.core.windows.net'): "
                              "Max retries exceeded")
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    monkeypatch.delenv("CNFMCE_VOCABS", raising=False)
    with pytest.raises(OSError, match=r"'o200k_base'.*CNFMCE_VOCABS.*ConnectionError"):
        load_encoder("tiktoken:o200k_base", vocab_dir=tmp_path)
    # an unknown name keeps tiktoken's own ValueError
    monkeypatch.setattr(tiktoken, "get_encoding", lambda n: (_ for _ in ()).throw(ValueError("Unknown encoding")))
    with pytest.raises(ValueError, match="Unknown encoding"):
        load_encoder("tiktoken:nope_base", vocab_dir=tmp_path)


def test_hf_adapter_qwen(hf_qwen):
    enc = as_encoder(hf_qwen)
    assert isinstance(enc, HFEncoder) and enc.byte_level
    assert enc.vocab_size == hf_qwen.get_vocab_size(with_added_tokens=True)
    for text in PLAIN:
        ids = enc.encode(text)
        assert ids == hf_qwen.encode(text, add_special_tokens=False).ids
        assert b"".join(enc.token_bytes(i) for i in ids) == text.encode()
    eot = hf_qwen.token_to_id("<|endoftext|>")
    assert enc.token_bytes(eot) == b"<|endoftext|>"
    table = enc.token_table()
    assert table[eot] == b"<|endoftext|>" and table[enc.encode("Hello")[0]] == b"Hello"
    # the vocabulary as cnfmce reads it gives the same bytes for every regular id
    path = shared_path("vocabs", "qwen3.5.tokenizer.json.gz")
    spec_enc = load_encoder(f"hf:{path}")
    assert spec_enc.kind == "hf" and spec_enc.encode(PLAIN[1]) == enc.encode(PLAIN[1])
    assert load_encoder(path).kind == "hf"          # a bare tokenizer.json runs tokenizers
    mce = load_encoder(f"mce:{path}")
    assert mce.kind == "cnfmce" and mce.name == "mce:qwen3.5.tokenizer"
    mce_table = mce.token_table()
    for i in list(range(0, 248044, 997)) + [eot]:
        assert mce_table[i] == table[i], i
    r = evaluate(enc, PLAIN)
    assert r["roundtrip_exact_match"] == 1.0 and r["byte_mismatch_docs"] == 0


def test_hf_adapter_normalizer_mismatch(hf_qwen):
    # Qwen normalises to NFC: "e" + combining acute becomes "é"; the token bytes are the NFC text
    text = "cafe\u0301 and re\u0301sume\u0301"
    enc = as_encoder(hf_qwen)
    ids = enc.encode(text)
    assert b"".join(enc.token_bytes(i) for i in ids) == unicodedata.normalize("NFC", text).encode()
    r = evaluate(enc, [text, "plain text"])
    assert r["byte_mismatch_docs"] == 1 and r["roundtrip_failures"] == 1
    assert r["chars"] == len(text) + 10 and r["multibyte_chars"] == 3
    assert r["utf8_token_integrity"] is not None


def test_sentencepiece_adapter(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world 123 héllo 你好"] * 50 + ["the quick brown fox"] * 50),
        model_writer=model, vocab_size=300, byte_fallback=True, model_type="bpe", minloglevel=2)
    path = tmp_path / "tiny.model"
    path.write_bytes(model.getvalue())
    enc = as_encoder(str(path))
    assert isinstance(enc, SentencePieceEncoder) and enc.kind == "sentencepiece"
    assert enc.vocab_size == 300
    text = "héllo 😀 world"
    ids = enc.encode(text)
    # dummy prefix: the pieces hold " " + text; 😀 is four byte-fallback pieces
    assert b"".join(enc.token_bytes(i) for i in ids) == b" " + text.encode()
    assert enc.token_bytes(enc.processor.piece_to_id("<0xF0>")) == b"\xf0"
    assert enc.token_bytes(1) == b""   # <s>
    r = evaluate(enc, [text])
    assert r["byte_mismatch_docs"] == 1 and r["roundtrip_exact_match"] == 1.0
    assert r["multibyte_chars_split"] == 1 and r["utf8_incomplete_tokens"] == 4
    assert as_encoder(enc.processor).kind == "sentencepiece"


def test_cnfmce_adapter_and_specs(tmp_path):
    tok = make_tok([b"ab", b" cd"])
    enc = as_encoder(tok)
    assert isinstance(enc, CnfmceEncoder) and enc.name == "cnfmce:mce"
    assert enc.encode("ab cd") == tok.encode("ab cd") and enc.vocab_size == 258
    assert as_encoder(enc) is enc
    p = tmp_path / "tok.json"
    tok.save(p)
    assert load_encoder(p).name == "mce:tok"
    f = load_encoder(f"fmm:{p}")
    assert f.tokenizer.algorithm == "fmm" and f.name == "fmm:tok"
    with pytest.raises(FileNotFoundError):
        load_encoder(tmp_path / "missing.json")
    with pytest.raises(TypeError):
        as_encoder(42)


# --- the CLI --------------------------------------------------------------------------------------

def write_corpus(path: Path) -> List[Tuple[str, str]]:
    rows = [("The quick brown fox jumps over 1234567 lazy dogs.", "en"),
            ("Le renard brun saute par-dessus 42 chiens paresseux.", "fr"),
            ("敏捷的棕色狐狸跳过了懒狗。", "zh"),
            ("Another English sentence, with co-advisor in it.", "en")]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for text, lang in rows:
            fh.write(json.dumps({"text": text, "source": "test", "lang": lang}) + "\n")
        fh.write("\n")
    return rows


@pytest.mark.shared
def test_eval_cli(tmp_path, capsys):
    corpus = tmp_path / "small" / "test.jsonl.gz"
    corpus.parent.mkdir()
    rows = write_corpus(corpus)
    tok = make_tok([b"The", b" quick", b" brown"])
    tpath = tmp_path / "tiny.json"
    tok.save(tpath)
    out_json = tmp_path / "r.json"
    out_csv = tmp_path / "r.csv"
    vocabs = shared_path("vocabs")
    pytest.importorskip("tiktoken")
    rc = main_eval(["-t", str(tpath), "-t", "o200k=tiktoken:o200k_base", "--vocab-dir", str(vocabs),
                    "--by-lang", "--compare", "--max-docs", "3", "--json", str(out_json),
                    "--csv", str(out_csv), str(corpus)])
    assert rc == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert lines[0].startswith("| tokenizer | corpus | docs | chars/token")
    assert "fairness Gini" in lines[0]
    assert any(ln.startswith("| mce:tiny | small/test | 3 |") for ln in lines)
    assert any(ln.startswith("| o200k | small/test | 3 |") for ln in lines)
    assert any(ln.startswith("| mce:tiny | o200k | small/test | 3 |") for ln in lines)
    res = json.loads(out_json.read_text())
    direct = evaluate(tok, [t for t, _ in rows[:3]], langs=[lg for _, lg in rows[:3]])
    got = res["results"][0]
    for k in ("tokens", "chars_per_token", "fairness_gini", "boundary_crossing_rate",
              "three_digit_f1", "renyi_efficiency_2"):
        assert got[k] == pytest.approx(direct[k]), k
    assert got["language_costs"] == pytest.approx(direct["language_costs"])
    assert res["results"][1]["tokenizer"] == "o200k" and len(res["comparisons"]) == 1
    csv_lines = out_csv.read_text().splitlines()
    assert len(csv_lines) == 3 and csv_lines[0].startswith("corpus,corpus_path,tokenizer,")
    # errors: a missing corpus, a bad spec
    assert main_eval(["-t", str(tpath), str(tmp_path / "nope.jsonl")]) == 1
    assert "no such corpus file" in capsys.readouterr().err
    assert main_eval(["-t", str(tmp_path / "nope.json"), str(corpus)]) == 1
    assert "no such tokenizer file" in capsys.readouterr().err


def test_add_eval_parser_dispatch(tmp_path, capsys):
    import argparse
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"text": "ab cd ab"}) + "\n", encoding="utf-8")
    tok = make_tok([b"ab"])
    tpath = tmp_path / "t.json"
    tok.save(tpath)
    parser = argparse.ArgumentParser(prog="cnfmce")
    sub = parser.add_subparsers(dest="command")
    add_eval_parser(sub)
    args = parser.parse_args(["eval", "-t", f"lab={tpath}", str(corpus)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    # "ab cd ab": ab | " " | c | d | " " | ab  ->  6 tokens, 8 chars
    assert "| lab | " in out and "| 1 | 1.333 | 1.333 | 750.0 |" in out


def test_real_corpus_sample(o200k):
    path = shared_path("corpora", "zh", "test.jsonl.gz")
    from cnfmce.eval_cli import read_corpus
    docs, langs = read_corpus(str(path), 30, with_lang=True)
    r = evaluate(o200k, docs, langs=langs)
    assert r["docs"] == 30 and r["byte_mismatch_docs"] == 0 and r["roundtrip_exact_match"] == 1.0
    assert r["chars_per_token"] * r["tokens_per_kchar"] == pytest.approx(1000)
    assert r["boundary_crossing_rate_u3"] == 0.0
    assert 0 < r["vocab_utilization"] < 1 and 0 < r["renyi_efficiency_2"] < 1
    assert 0 <= r["multibyte_split_rate"] <= 1 and r["multibyte_chars"] > 0
